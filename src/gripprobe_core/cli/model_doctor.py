"""``gripprobe doctor --model M``: probe the backends of model specs (backends/doctor.py), as a table
per model or as JSON.

Exit 0 when every model is reachable, served and gives a structured tool call; 1 when a check failed;
2 for bad input (one ``error:`` line with the fix, before anything is probed) and for an unreachable
backend (one ``error:`` line per backend: the URL, the error, the fix, as the run's preflight says it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Mapping

import click

from ..backends.doctor import CHECKS, ModelCheck, check_model
from ..errors import UserError
from ..jsonl import dumps
from ..runner.preflight import PROBE_TIMEOUT_S, BackendTarget, fix_for, unreachable_line
from ..textsafe import safe_text

LABELS = {"reachable": "reachable", "served": "served", "tool_call": "tool call", "model_hash": "model hash"}
DEFAULT_TOOL_TIMEOUT_S = 120.0


def choose(specs, model_ids: tuple[str, ...], backend_id: str | None, base_url: str | None, registry) -> list:
    """``[(model spec, backend spec, Backend)]`` for each ``--model``; :class:`UserError` (exit 2, one line
    with the fix) for an unknown model, a backend the model lacks, an unregistered kind, ``--base-url``
    for the embedded oracle."""
    out = []
    for mid in dict.fromkeys(model_ids):
        model = specs.models.get(mid)
        if model is None:
            import difflib

            near = difflib.get_close_matches(mid, list(specs.models), n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise UserError(f"unknown model {mid!r}; {hint}known: {', '.join(sorted(specs.models)) or 'none'} "
                            f"(add specs/models/{mid}.yaml, then run `gripprobe validate`)")
        if backend_id is None:
            backend = model.backends[0]
        else:
            backend = next((b for b in model.backends if b.id == backend_id), None)
            if backend is None:
                raise UserError(f"model {mid!r} has no backend {backend_id!r}; it has: "
                                f"{', '.join(b.id for b in model.backends)} (pick one with --backend)")
        kind = registry.backends.get(backend.kind)
        if kind is None:
            raise UserError(f"model {mid!r}: backend kind {backend.kind!r} is not registered; installed: "
                            f"{', '.join(sorted(registry.backends))} (install the plugin that provides it)")
        if base_url and not kind.remote:
            raise UserError(f"--base-url: model {mid!r} uses the embedded {backend.kind} backend, which has no URL; "
                            f"drop --base-url or pick a remote backend with --backend")
        out.append((model, backend, kind))
    return out


def _where(specs, model_id: str, backend, key: str) -> str:
    model = specs.models[model_id]
    return specs.where("model", model_id, "backends", model.backends.index(backend), key)


def fixes(check: ModelCheck, specs, *, base_url: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """What to do about each failed check, in one clause (and the unreachable line under ``reachable``)."""
    be, out = check.backend, {}
    if not check.is_reachable and check.reachable is not None:
        target = BackendTarget(be.id, be.kind, check.url or "", be.api_key_env, models=[check.model],
                               where=_where(specs, check.model, be, "base_url"))
        out["reachable"] = unreachable_line(check.reachable, target,
                                            fix_for(check.reachable, target, override=bool(base_url), env=env))
        return out
    where = _where(specs, check.model, be, "model_id")
    if check.status("served") is False:
        if check.listed is None:
            out["served"] = f"the server did not list its models ({check.listing_error}); check {where}"
        elif check.embedded and be.kind == "replay":
            out["served"] = f"set model_id ({where}) to the name the recording's server served"
        elif check.embedded:
            out["served"] = f"set model_id ({where}) to an oracle profile"
        elif be.kind == "ollama":
            out["served"] = f"run `ollama pull {be.model_id}` on the server, or set model_id ({where})"
        else:
            out["served"] = (f"serve it under that name (vLLM --served-model-name, llama-server --alias, "
                             f"lms load --identifier), or set model_id ({where}) to a name the server lists")
    tc = check.tool_call
    if tc is not None and not tc.ok:
        out["tool_call"] = tool_fix(tc, be.kind)
    if check.hash_mismatch:
        out["model_hash"] = (f"the server serves {check.server_digest}, not the spec's model_hash "
                             f"{be.model_hash}: update model_hash ({_where(specs, check.model, be, 'model_hash')}) "
                             f"or serve the build it names")
    return out


#: Tool-call text in a chat template's own format: what a server's tool-call parser (``--jinja``,
#: ``--tool-call-parser``) turns into tool calls. A fenced or bare JSON block is in none.
TEMPLATE_SYNTAXES = frozenset({"tool_call_tag", "function_tag", "invoke", "tool_use"})


def tool_fix(tc, kind: str) -> str:
    """What to do about a tool-call probe that did not give a structured call (docs/backends.md)."""
    err = (tc.error or "").lower()
    if tc.outcome == "error":
        if "does not support tools" in err:
            return ("the model's chat template has no tools: pick a model whose `ollama show` lists the tools "
                    "capability (docs/backends.md)")
        if "tool choice" in err or "tool-choice" in err or "tool_choice" in err or "tool-call-parser" in err:
            return "start vLLM with --enable-auto-tool-choice --tool-call-parser <parser> (docs/backends.md)"
        if "tools param requires" in err or "jinja" in err:
            return "start llama-server with --jinja (docs/backends.md)"
        if "no answer within" in err:
            return "the model did not answer in time: raise --timeout (a cold model loads first), or check the server"
        return "see the server's error above and its logs"
    if tc.outcome == "malformed":
        return ("the server returned a broken call: check that its tool-call parser matches the model "
                "(docs/backends.md)")
    if tc.text_tool_calls:
        syntaxes = set(getattr(tc, "text_tool_syntaxes", ()) or ())
        template = getattr(tc, "server_tool_template", None)
        if syntaxes and not syntaxes & TEMPLATE_SYNTAXES:  # a JSON block: no template's format
            said = " (the server's /props says its chat template does support tool calls)" if template else ""
            return ("the model ignored its chat template's tool-call format and wrote the call as a JSON block"
                    f"{said}: no server flag parses that; try another model or a larger quantization "
                    "(docs/backends.md)")
        if template:
            return ("llama-server's chat template supports tool calls (/props), yet the model's call in the "
                    "template's own format was not parsed: check that the template matches the model "
                    "(--chat-template-file; docs/backends.md)")
        if kind == "ollama":
            return ("Ollama did not parse the model's tool-call format: update Ollama, or use a model whose "
                    "`ollama show` lists the tools capability (docs/backends.md)")
        return ("the server did not parse the model's tool calls: enable its tool-call parser (vLLM "
                "--enable-auto-tool-choice --tool-call-parser …, llama-server --jinja; docs/backends.md)")
    return ("the model answered in text: agents would get no tool call from it; try another model or a larger "
            "quantization, and check the server's tool-call settings (docs/backends.md)")


def _marks() -> dict[Any, str]:
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗–".encode(enc)
        return {True: "✓", False: "✗", None: "–", "?": "?"}
    except (UnicodeEncodeError, LookupError):
        return {True: "ok", False: "XX", None: "--", "?": "?"}


def _n(count: int | None, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _short(digest: str | None) -> str:
    if not digest:
        return "unknown"
    return digest if len(digest) <= 19 else digest[:19] + "…"


def detail(check: ModelCheck, name: str) -> list[str]:
    """The text after a check's mark in the table: its first line, then any more."""
    be = check.backend
    if name == "reachable":
        p = check.reachable
        if p is None:
            return ["not checked"]
        if check.embedded:
            what = "recorded model" if be.kind == "replay" else "profile"
            return [f"embedded (started by GripProbe), {_n(p.models, what)}"]
        if not p.reachable:
            return [f"GET {p.url}: {p.error}"]
        return [f"GET {p.url}: HTTP {p.http_status}, {_n(p.models, 'model')}, {p.latency_ms:g} ms"]
    if not check.is_reachable:
        return ["not checked"]
    if name == "served":
        if check.listed is None:
            return [f"cannot list the models: {check.listing_error}"]
        if check.served:
            return [f"{be.model_id}"]
        names = [m.name for m in check.listed]
        shown = ", ".join(names[:8]) + (f", … ({len(names)} in all)" if len(names) > 8 else "")
        return [f"{be.model_id} is not among the models served ({shown or 'none'})"]
    if name == "tool_call":
        tc = check.tool_call
        if tc is None:
            return ["not checked"]
        took = f"{tc.latency_ms / 1000:.1f} s" if tc.latency_ms >= 100 else f"{tc.latency_ms:g} ms"
        via = f"{tc.endpoint}, {took}"
        if tc.outcome == "structured":
            return [f"structured: {tc.tool_name}({json.dumps(tc.arguments, ensure_ascii=False)})", via]
        if tc.outcome == "text":
            why = (tc.error or "").removeprefix("no structured call: ")
            return [f"text only: {why}", *([f'answer: "{tc.text}"'] if tc.text else []), via]
        if tc.outcome == "malformed":
            args = tc.arguments if isinstance(tc.arguments, str) else json.dumps(tc.arguments, ensure_ascii=False)
            return [f"malformed: {tc.error}: {tc.tool_name}({args})", via]
        return [f"{'rejected' if tc.http_status else 'no answer'}: {tc.error}", via]
    if name == "model_hash":
        if check.hash_mismatch:
            return [f"{_short(check.server_digest)} served, the spec says {be.model_hash}"]
        if check.hash_source == "server":
            same = " (matches the spec)" if be.model_hash else ""
            who = "the embedded oracle" if check.embedded else "the server"
            return [f"{_short(check.model_hash)} (reported by {who}){same}"]
        if check.hash_source == "spec":
            return [f"{_short(check.model_hash)} (the spec's model_hash; the server does not report one)"]
        return ["unknown (the server does not report one and the spec has no model_hash)"]
    raise ValueError(name)


def render(check: ModelCheck) -> list[str]:
    marks = _marks()
    be = check.backend
    where = "embedded" if check.embedded else check.url
    lines = [f"{check.model}  backend {be.id} ({be.kind}), model {be.model_id}, {where}"]
    pad = " " * 17
    for name in CHECKS:
        status = check.status(name)
        mark = marks["?"] if name == "model_hash" and status is None and check.is_reachable else marks[status]
        first, *more = detail(check, name)
        lines.append(f"  {mark} {LABELS[name]:11}  {first}")
        lines += [pad + m for m in more]
        if name in check.notes and name != "reachable":
            lines.append(f"{pad}fix: {check.notes[name]}")
    return [safe_text(line) for line in lines]


def run_model_doctor(specs, registry, model_ids: tuple[str, ...], *, backend_id: str | None, base_url: str | None,
                     as_json: bool, timeout_s: float | None) -> int:
    """Probe each model's backend, print the table (or JSON), return the exit code."""
    chosen = choose(specs, model_ids, backend_id, base_url, registry)
    env = os.environ

    async def probe_all() -> list[ModelCheck]:
        out = []
        for model, backend, kind in chosen:  # one at a time: a GPU box loads one model after the other
            out.append(await check_model(model, backend, kind, base_url=base_url, env=env,
                                         probe_timeout_s=PROBE_TIMEOUT_S,
                                         tool_timeout_s=timeout_s or DEFAULT_TOOL_TIMEOUT_S))
        return out

    checks = asyncio.run(probe_all())
    for c in checks:
        c.notes = fixes(c, specs, base_url=base_url, env=env)
    if as_json:
        click.echo(dumps([c.to_json() for c in checks], indent=2, ensure_ascii=False))
    else:
        for i, c in enumerate(checks):
            if i:
                click.echo("")
            for line in render(c):
                click.echo(line)
    for c in checks:
        if not c.is_reachable and "reachable" in c.notes:
            click.echo(f"error: {safe_text(c.notes['reachable'])}", err=True)
    return max((c.exit_code for c in checks), default=0)

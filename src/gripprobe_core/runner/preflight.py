"""Backends are checked before they are trusted: one listing request per backend.

Before a run's matrix starts, every model backend its cases will use (not the embedded oracle, which the
runner starts itself) is asked for its model list, concurrently: ``GET <root>/v1/models`` for an
OpenAI-compatible server, ``GET <root>/api/tags`` for Ollama, where ``<root>`` is the base URL the case
would use (``--base-url`` when given, else the spec's ``base_url``) without a trailing ``/v1``. One that
does not answer with its listing stops the run before anything is written (:class:`BackendUnreachable`,
exit 2, one line per backend with the fix). The runner probes again right after each phase, so a backend
that died mid-run is a harness fact, not the agent's failure (see ``derive.backend_was_unreachable``).

:func:`probe_backend` is the one probe; it never raises and never prints or stores the API key.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..errors import UserError
from ..models.results import BackendProbe
from ..timeutil import utc_now_iso
from .matrix import PlannedCase, missing_tool_kinds

PROBE_TIMEOUT_S = 5.0
"""Whole-probe budget (connect, answer, body): a live server lists its models well within it."""

MAX_LISTING_BYTES = 16 * 1024 * 1024

_LISTING = {"openai-compatible": ("/v1/models", "data"), "ollama": ("/api/tags", "models")}


def server_root(url: str) -> str:
    """``http://host:port/v1/`` → ``http://host:port``: the root the runner hands to agents and proxies."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _shown(url: str) -> str:
    """``url`` without user:password, for messages and records."""
    from yarl import URL

    try:
        u = URL(url)
        return str(u.with_user(None)) if u.user or u.password else url
    except (ValueError, TypeError):
        return url


async def probe_backend(kind: str, base_url: str, *, api_key: str | None = None, backend_id: str = "",
                        timeout_s: float = PROBE_TIMEOUT_S) -> BackendProbe:
    """List the models of the ``kind`` backend at ``base_url`` (with or without ``/v1``) once.

    ``api_key`` goes in an ``Authorization: Bearer`` header. Reachable means a 2xx answer whose body is
    the listing's JSON (``{"data": [...]}`` or ``{"models": [...]}``) within ``timeout_s``; anything else
    is unreachable with ``problem`` and ``error`` saying why. Never raises for what the server does.
    """
    import aiohttp

    path, key = _LISTING[kind]
    url = server_root(base_url) + path
    out: dict[str, Any] = {"backend_id": backend_id, "kind": kind, "url": _shown(url), "reachable": False}
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    t0 = time.monotonic()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url, headers=headers, allow_redirects=True) as resp:
                out["http_status"] = resp.status
                body = await resp.content.read(MAX_LISTING_BYTES + 1)
        out.update(_judge(resp.status, body, key))
    except asyncio.TimeoutError:
        out.update(problem="timeout", error=f"no answer within {timeout_s:g} s")
    except aiohttp.ClientConnectorDNSError:
        out.update(problem="dns", error="host name not found (DNS)")
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        out.update(problem="connect", error="connection refused" if refused else f"cannot connect: {exc.os_error}")
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError, ValueError):
        out.update(problem="url", error="not an http(s) URL")
    except (aiohttp.ClientError, OSError, socket.error) as exc:
        out.update(problem="connect", error=f"{type(exc).__name__}: {exc}"[:300])
    out["latency_ms"] = round((time.monotonic() - t0) * 1000, 1)
    out["checked_at"] = utc_now_iso()
    return BackendProbe.model_validate(out)


def _judge(status: int, body: bytes, key: str) -> dict[str, Any]:
    import json

    if status in (401, 403):
        return {"problem": "auth", "error": f"HTTP {status} (the server wants a valid API key)"}
    if not 200 <= status < 300:
        return {"problem": "http", "error": f"HTTP {status}"}
    if len(body) > MAX_LISTING_BYTES:
        return {"problem": "body", "error": f"the listing is over {MAX_LISTING_BYTES >> 20} MiB"}
    try:
        data = json.loads(body)
    except ValueError:
        return {"problem": "body", "error": "the answer is not JSON"}
    listed = data.get(key) if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return {"problem": "body", "error": f"the answer is not a model list (no {key!r} list)"}
    return {"reachable": True, "models": len(listed)}


@dataclass
class BackendTarget:
    """One backend the planned cases use, as they would reach it."""

    backend_id: str
    kind: str
    base_url: str
    api_key_env: str | None
    models: list[str] = field(default_factory=list)
    """Ids of the model specs that use it (to find the spec to fix)."""
    where: str | None = None
    """``file:line`` of its ``base_url`` in the first model spec that uses it, when known."""


def backend_targets(cases: Iterable[PlannedCase], *, base_url_override: str | None = None,
                    locate: Callable[[PlannedCase], str | None] | None = None) -> list[BackendTarget]:
    """The distinct non-oracle backends of the cases that will run (not SKIPPED, not TOOL_UNSUPPORTED).
    ``locate(case)`` may say where the case's backend ``base_url`` is written (``file:line``)."""
    out: dict[tuple, BackendTarget] = {}
    for pc in cases:
        be = pc.backend
        if be.kind == "oracle" or pc.skip_reason or missing_tool_kinds(pc.agent, pc.test):
            continue
        url = server_root(base_url_override or be.base_url or "")
        key = (be.id, be.kind, url, be.api_key_env)
        if key not in out:
            out[key] = BackendTarget(be.id, be.kind, url, be.api_key_env, where=locate(pc) if locate else None)
        target = out[key]
        if pc.model.id not in target.models:
            target.models.append(pc.model.id)
    return list(out.values())


def fix_for(probe: BackendProbe, target: BackendTarget, *, override: bool, env: Mapping[str, str]) -> str:
    """What the user should do about an unreachable backend, in one clause."""
    where = "--base-url" if override else \
        f"base_url ({target.where or 'model ' + ', '.join(target.models)})"
    if probe.problem == "auth":
        if not target.api_key_env:
            return "the server wants an API key: set api_key_env on the backend spec and export that variable"
        if not env.get(target.api_key_env):
            return f"set {target.api_key_env} (it is not set)"
        return f"set {target.api_key_env} to a key this server accepts"
    if probe.problem in ("http", "body"):
        server = "an Ollama" if target.kind == "ollama" else "an OpenAI-compatible"
        return f"check {where}: is it the root of {server} server?"
    if probe.problem == "url":
        return f"fix {where}"
    return f"start the server, or check {where}"


class BackendUnreachable(UserError):
    """One or more backends did not answer the preflight; one line per backend (exit 2)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        super().__init__("\nerror: ".join(self.lines))


def unreachable_line(probe: BackendProbe, target: BackendTarget, fix: str) -> str:
    return (f"backend {target.backend_id!r} ({target.kind}) is unreachable: GET {probe.url}: {probe.error}; "
            f"fix: {fix}")


async def probe_targets(targets: list[BackendTarget], env: Mapping[str, str],
                        timeout_s: float = PROBE_TIMEOUT_S) -> list[BackendProbe]:
    """Probe every target at once; results in the order of ``targets``."""
    return list(await asyncio.gather(*(
        probe_backend(t.kind, t.base_url, api_key=env.get(t.api_key_env) if t.api_key_env else None,
                      backend_id=t.backend_id, timeout_s=timeout_s) for t in targets)))


def preflight(cases: Iterable[PlannedCase], *, base_url_override: str | None, env: Mapping[str, str],
              locate: Callable[[PlannedCase], str | None] | None = None,
              timeout_s: float = PROBE_TIMEOUT_S) -> list[BackendProbe]:
    """Probe the backends ``cases`` use; raise :class:`BackendUnreachable` naming each one that did not
    answer, else return what every probe saw (for manifest.json). No backend to probe: ``[]``."""
    from .eventloop import run as run_loop

    targets = backend_targets(cases, base_url_override=base_url_override, locate=locate)
    if not targets:
        return []
    probes = run_loop(probe_targets(targets, env, timeout_s))
    bad = [unreachable_line(p, t, fix_for(p, t, override=bool(base_url_override), env=env))
           for p, t in zip(probes, targets) if not p.reachable]
    if bad:
        raise BackendUnreachable(bad)
    return probes

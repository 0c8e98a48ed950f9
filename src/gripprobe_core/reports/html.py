"""HTML reports: the run summary, one page per case, and the cross-run aggregate page (SPEC §7).

Every page comes from a jinja2 template in ``templates/`` with autoescaping on, and is self-contained:
CSS and JS are inlined, nothing is fetched (a Content-Security-Policy meta tag forbids it), so a page
works from ``file://`` with no network. Agent output is data, never markup: templates escape it and
the scripts insert it with ``textContent``. The event timeline is embedded as JSON (``<``, ``>``, ``&``
escaped as ``\\u003c`` …) and rendered by the browser in chunks, so a case with 10,000 events opens at
once. Missing or corrupt artifacts are shown as "missing" / "unreadable", never raised.

Every stored file is read through :class:`~gripprobe_core.store.files.Stored` (no link followed anywhere
below the run folder: a case's ``artifacts/`` or ``workspace/`` replaced by a link is not read through, and a
FIFO, device or symlink planted in a file's place is never opened), the workspace through
:mod:`.workspace_view`, and every name from disk (case directories, workspace and artifact files) is shown
through ``safe_name``. Every other value goes through ``safe_text`` on its way into a page (the environment's
``finalize``; the JSON a script draws from through ``inert``), so no stored byte reaches a page as a control
character.
"""

from __future__ import annotations

import json
import numbers
import os
import shlex
import stat
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from urllib.parse import quote

from ..models.statuses import STATUSES
from ..store import RunFolder, Stored, atomic_write_text
from ..store.runs import manifest_status
from ..textsafe import inert, safe_name, safe_text
from .scores import coverage_text, usage_parts
from .summary_md import COLUMNS, SCORE_COLUMNS, attempted, run_scores, run_totals, score_row_cells, summary_row
from .textdiff import diff_lines, first_difference, mark_differences
from .workspace_view import WORKSPACE_DEPTH_MAX, WORKSPACE_SCAN_MAX, workspace_view

if TYPE_CHECKING:  # annotations only: the models (pydantic) load where a result is parsed
    from ..models.results import CaseResult

PHASES = ("warmup", "measured")
TEXT_LIMIT = 64 * 1024          # bytes shown of a stdout/stderr/prompt file
FIELD_LIMIT = 4000              # characters shown of one event field (arguments, output, text)
ARTIFACTS_MAX = 1000            # files listed from artifacts/
PROXY_ROWS_MAX = 1000           # proxy exchanges listed per phase
SHORT_STATUS = {
    "PASS": "PASS", "PASS_WITH_POLICY_VIOLATION": "PASS+PV", "FAIL": "FAIL", "NO_TOOL_CALL": "NO_TOOL",
    "TIMEOUT": "TIMEOUT", "TOOL_UNSUPPORTED": "UNSUPP", "SHELL_ERROR": "SHELL_ERR",
    "HARNESS_ERROR": "HARNESS_ERR", "SKIPPED": "SKIP",
}
_CACHE_TAG = "inert1"
"""Part of every compiled template's cache file name: compiled code depends on the environment (``finalize``,
how filters are called), so a change to either bumps it and no page is rendered by stale code."""


@lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, PackageLoader, StrictUndefined, pass_eval_context

    # auto_reload off: the templates are the package's own files, so a template once loaded is not looked at on
    # disk again for every page (~5 stat calls a case page)
    env = Environment(loader=PackageLoader("gripprobe_core.reports", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, auto_reload=False,
                      bytecode_cache=_bytecode_cache(), finalize=_finalize)
    env.filters["num"] = _num
    env.filters["tojson"] = pass_eval_context(_tojson)
    env.filters["wbr"] = _wbr
    env.globals["short_status"] = lambda s: SHORT_STATUS.get(s, s)
    return env


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` of every page: text with its control characters escaped (``safe_text``: ESC, BEL,
    VT, C1, bidi controls shown as ``\\x1b`` …), whatever it came from, before autoescaping makes it HTML."""
    if isinstance(value, str):
        if type(value) is _written():  # markup written here from values already through _h: nothing to escape
            return value
        if isinstance(value, _markup()):
            return _markup()(safe_text(str(value)))
        return safe_text(value)
    return value


@lru_cache(maxsize=None)
def _markup() -> type:
    """markupsafe's Markup, imported once (on a page's ~200k values a per-call import showed in profiles)."""
    from markupsafe import Markup

    return Markup


@lru_cache(maxsize=None)
def _written() -> type:
    """Markup this module wrote itself (the aggregate's rows), every value in it through :func:`_h`: the
    page's ``finalize`` passes it as it is (``safe_text`` over a 5.6 MB page of rows was ~30-60 ms)."""

    class Written(_markup()):
        __slots__ = ()

    return Written


def _wbr(value: Any) -> Any:
    """Text escaped, with a line-break opportunity (``<wbr>``) after each ``_``, ``-``, ``/`` and ``.``: a long id
    (``oracle-tools-unsupported``, ``PASS_WITH_POLICY_VIOLATION``) wraps at its separators in a narrow column
    instead of widening the table; its text (and what a copy takes) is unchanged."""
    from markupsafe import Markup, escape

    text = str(escape(safe_text(str(value))))
    for sep in ("_", "-", "/", "."):
        text = text.replace(sep, sep + "<wbr>")
    return Markup(text)


def _tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
    """Jinja's ``tojson`` (``<``, ``>``, ``&``, ``'`` as ``\\u`` escapes) of an inert copy: the strings a page's
    script draws are as safe as the rest of the page, and a NaN is ``null`` (``JSON.parse`` takes no NaN).
    Takes the evaluation context first, as Jinja's own does (compiled templates call it so)."""
    from jinja2.utils import htmlsafe_json_dumps

    return htmlsafe_json_dumps(inert(value), indent=indent, sort_keys=True)


def _bytecode_cache() -> Any:
    """Compiled templates kept across runs (~/.cache/gripprobe/jinja, keyed by template source, Jinja's version
    and ``_CACHE_TAG``): compiling them costs a quarter of a second a process. None when the folder cannot be
    made."""
    from jinja2 import FileSystemBytecodeCache

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gripprobe" / "jinja"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return FileSystemBytecodeCache(str(base), pattern=f"__jinja2_{_CACHE_TAG}_%s.cache")


def _render(template: str, **ctx: Any) -> str:
    from .. import __version__
    return _env().get_template(template).render(version=__version__, **ctx)


def _num(v: Any, digits: int = 3) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "—" if v is None else str(v)
    return f"{v:.{digits}f}"


# ---------------------------------------------------------------------------------------- run pages

def render_run_html(run_dir: RunFolder, *, manifest: dict | None = None,
                    entries: list[tuple[str, CaseResult | None]] | None = None,
                    pages: KeptPages | None = None) -> list[Path]:
    """Write ``reports/summary.html`` and ``reports/cases/<case_id>.html`` for every case directory.

    A case directory without a readable case.json still gets a page showing the artifacts it has. ``pages``:
    case pages rendered as their cases ended; each is written as it is unless its case.json changed since.
    Returns the written paths, summary first."""
    manifest = run_dir.read_manifest() if manifest is None else manifest
    entries = run_dir.case_entries() if entries is None else entries
    written = [run_dir.reports / "summary.html"]
    atomic_write_text(written[0], render_summary_html(run_dir.run_id, manifest, entries), sync=False)
    for name, res in entries:
        path = run_dir.reports / "cases" / page_name(name)
        stored = run_dir.stored_case(name)
        text = pages.take(name, stored) if pages is not None else None
        if text is None:
            text = render_case_html(stored, res, run_id=run_dir.run_id)
        atomic_write_text(path, text, sync=False)
        written.append(path)
    return written


class KeptPages(Protocol):
    """Case pages a run rendered as its cases ended (:class:`gripprobe_core.runner.case_pages.CasePages`)."""

    def take(self, name: str, stored: Stored) -> str | None:
        """Case ``name``'s page if it is still the page of what ``stored`` holds, else None."""


def page_name(case_dir_name: str) -> str:
    """The file name of a case page: the case directory's name made display-safe (a harness-made case
    id is unchanged), so the page name and its link are the same valid text."""
    return f"{safe_name(case_dir_name)}.html"


def _page_link(case_dir_name: str) -> str:
    return "cases/" + quote(page_name(case_dir_name))


def render_summary_html(run_id: str, manifest: dict, entries: list[tuple[str, CaseResult | None]]) -> str:
    """``entries``: (case directory name, its result or None when case.json is missing/unreadable)."""
    return _render("summary.html", **_summary_context(run_id, manifest, entries))


def _summary_context(run_id: str, manifest: dict, entries: list[tuple[str, CaseResult | None]]) -> dict[str, Any]:
    """What ``summary.html`` (and the live view's page built on it) is rendered from."""
    results = [r for _, r in entries if r is not None]
    rows = []
    for name, r in entries:
        if r is None:
            continue
        rows.append({"cells": summary_row(r), "page": _page_link(name), "unsandboxed": r.sandbox == "none",
                     "attempted": attempted(r),
                     "filters": {"agent": [r.key.agent], "model": [r.key.model], "format": [r.key.format],
                                 "status": [r.verdict.status], "tag": list(r.tags)}})
    filters = {
        "agent": sorted({r.key.agent for r in results}), "model": sorted({r.key.model for r in results}),
        "format": sorted({r.key.format for r in results}),
        "status": [s for s in (*STATUSES, *sorted({r.verdict.status for r in results} - set(STATUSES)))
                   if any(r.verdict.status == s for r in results)],
        "tag": sorted({t for r in results for t in r.tags}),
    }
    hardware = sorted({h for r in results if (h := getattr(r, "hardware_profile", None))})
    planned = manifest.get("planned")
    scores = run_scores(results)
    score_rows = [{"cells": score_row_cells(row), "flaky": row["flaky"],
                   "matrix": [_agg_cell(row["cells"].get(t), list(STATUSES)) for t in scores["tests"]],
                   "usage": usage_parts(row["usage"])} for row in scores["rows"]]
    totals = run_totals(results)
    return dict(run_id=safe_name(run_id), manifest=manifest, run_status=manifest_status(manifest),
                columns=COLUMNS, rows=rows, totals=totals, filters=filters, hardware=hardware,
                score_columns=SCORE_COLUMNS, score_rows=score_rows, tests=scores["tests"],
                trials=scores["trials"], usage=usage_parts(totals["usage"]),
                planned=len(planned) if isinstance(planned, list) else 0,
                unfinished=[(safe_name(name), _page_link(name)) for name, r in entries if r is None])


def render_case_html(case_dir: Stored, result: CaseResult | None, run_id: str = "") -> str:
    """One case page from its directory (``run.stored_case(name)``: read without following a link below the
    run folder); ``result`` None when case.json is missing or unreadable."""
    return _render("case.html", **_case_context(case_dir, result, run_id))


def _case_context(case_dir: Stored, result: CaseResult | None, run_id: str = "") -> dict[str, Any]:
    """What ``case.html`` (and the live view's page built on it) is rendered from."""
    case_json = case_dir / "case.json"
    phases = {p.phase: p for p in result.phases} if result else {}
    # a run without warmup (--no-warmup) shows its measured phase alone, not a warmup "missing"
    shown = [ph for ph in PHASES if ph in phases] if result and result.phases else list(PHASES)
    timeline = {ph: _read_events(case_dir / "artifacts" / f"events.{ph}.jsonl") for ph in shown}
    proxy = [_proxy_view(case_dir, ph, phases.get(ph)) for ph in shown]
    return dict(
        run_id=safe_name(run_id or (result.run_id if result else "")), case_id=safe_name(case_dir.name),
        r=result, case_json_state="missing" if not case_json.lexists() else ("ok" if result else "unreadable"),
        hardware=getattr(result, "hardware_profile", None) if result else None,
        validators=_validators(result), timeline=timeline,
        usage=_usage_view(result.usage) if result else None,
        events_data={ph: t["events"] for ph, t in timeline.items()},
        prompt=_read_text(case_dir / "prompt.txt"),
        phases=[_phase_view(case_dir, ph, phases.get(ph)) for ph in shown],
        workspace=workspace_view(case_dir / "workspace"), scan_max=WORKSPACE_SCAN_MAX, depth_max=WORKSPACE_DEPTH_MAX,
        diffs=_diffs(result),
        proxy=proxy,
        # the calls the model wrote as text in the judged phase: the diagnosis, shown at the top
        text_calls=[n for p in proxy if p["phase"] == "measured" for x in p["rows"] for n in x["text_calls"]],
        artifacts=_artifact_list(case_dir / "artifacts"),
    )


def _read_text(path: Stored, limit: int = TEXT_LIMIT) -> dict:
    """A text file for display: state ok|missing|unreadable, at most ``limit`` bytes of it (a regular
    file only: anything else planted in its place, or a link on its way, is ``unreadable``, never opened)."""
    try:
        size = path.lstat().st_size
        data = path.read(limit)
    except FileNotFoundError:
        return {"state": "missing", "text": "", "size": 0, "shown": 0, "truncated": False}
    except OSError as exc:
        return {"state": "unreadable", "text": "", "size": 0, "shown": 0, "truncated": False,
                "error": type(exc).__name__}
    return {"state": "ok", "text": data.decode("utf-8", errors="replace"), "size": size, "shown": len(data),
            "truncated": size > len(data)}


def _clip(v: Any, limit: int = FIELD_LIMIT) -> str | None:
    if v is None:
        return None
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=1, default=str)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit} more characters not shown)"


def _read_events(path: Stored) -> dict:
    """Events of one phase in display order: each model response followed by the tool events it
    spawned (``depth`` 1, via parent_id); anything else in sequence order at depth 0."""
    try:
        # bytes.splitlines(): the harness writes JSON lines with ensure_ascii=False, and str.splitlines()
        # would also break a line at a U+2028 or U+0085 inside a string
        lines = [raw.decode("utf-8", "replace") for raw in path.read().splitlines()]
    except FileNotFoundError:
        return {"state": "missing", "events": [], "bad_lines": 0}
    except OSError:
        return {"state": "unreadable", "events": [], "bad_lines": 0}
    raw, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(e, dict):
            raw.append(e)
        else:
            bad += 1
    by_id = {e["event_id"]: e for e in raw if isinstance(e.get("event_id"), str)}

    def parent_of(e: dict) -> str | None:
        pid = e.get("parent_id")
        if not isinstance(pid, str) or pid == e.get("event_id") or pid not in by_id:
            return None
        return pid if _parent_ok(by_id[pid], by_id) else None

    def seq_key(e: dict) -> tuple:
        s = e.get("sequence")
        return (0, s) if isinstance(s, int) and not isinstance(s, bool) else (1, 0)

    children: dict[str, list[dict]] = {}
    top = []
    for e in raw:
        pid = parent_of(e)
        if pid is None:
            top.append(e)
        else:
            children.setdefault(pid, []).append(e)
    out = []
    for e in sorted(top, key=seq_key):
        kids = sorted(children.get(e.get("event_id"), []), key=seq_key) if isinstance(e.get("event_id"), str) else []
        out.append(_compact(e, 0, len(kids)))
        out.extend(_compact(k, 1, 0) for k in kids)
    state = "ok" if not bad else ("unreadable" if not raw else "partial")
    return {"state": state, "events": out, "bad_lines": bad}


def _parent_ok(p: dict, by_id: dict) -> bool:
    """Nesting is one level deep: a parent must itself be top level."""
    pid = p.get("parent_id")
    return not (isinstance(pid, str) and pid in by_id and pid != p.get("event_id"))


def _compact(e: dict, depth: int, kids: int) -> dict:
    """The fields the timeline shows, long values clipped (raw bodies never reach a report)."""
    p = e.get("payload") if isinstance(e.get("payload"), dict) else {}
    seq = e.get("sequence")
    out: dict[str, Any] = {
        "seq": seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        "type": str(e.get("event_type", "?")), "id": e.get("event_id"), "parent": e.get("parent_id"),
        "tier": e.get("source_tier"), "source": e.get("source"), "status": e.get("status"),
        "lat": e.get("latency_ms"), "ts": e.get("timestamp"), "depth": depth, "kids": kids,
    }
    name, raw_name = p.get("name"), p.get("raw_name")
    out["name"] = name or raw_name
    if raw_name and name and raw_name != name:
        out["raw"] = raw_name
    if p.get("kind"):
        out["kind"] = p.get("kind")
    if e.get("tool_call_id"):
        out["call"] = e.get("tool_call_id")
    for key, field in (("args", "arguments"), ("args", "input"), ("out", "output"), ("text", "text")):
        if p.get(field) not in (None, ""):
            out[key] = _clip(p.get(field))
    info = []
    if out["type"] == "permission_response":  # the answer, who gave it and by which rule
        info += [f"{label} {p.get(field)}" for label, field in (
            ("answer", "outcome"), ("option", "option_id"), ("rule", "rule"), ("by", "decided_by"))
                 if p.get(field) not in (None, "")]
    elif out["type"] == "permission_request" and isinstance(p.get("options"), list) and p.get("options"):
        info.append("options " + ", ".join(str(o.get("option_id")) for o in p["options"] if isinstance(o, dict)))
    for label, field in (("protocol", "protocol"), ("http", "http_status"), ("tool calls", "tool_call_count")):
        if p.get(field) is not None:
            info.append(f"{label} {p.get(field)}")
    usage = p.get("usage")
    if isinstance(usage, dict) and usage.get("total_tokens") is not None:
        info.append(f"tokens {usage.get('total_tokens')}")
    if e.get("exit_code") is not None:
        info.append(f"exit {e.get('exit_code')}")
    if e.get("error_type"):
        info.append(f"error {e.get('error_type')}")
    if e.get("raw_artifact_ref"):
        info.append(f"from {e.get('raw_artifact_ref')}")
    seen_by = e.get("seen_by")
    if isinstance(seen_by, list) and len(seen_by) > 1:
        info.append("seen by tiers " + ", ".join(str(t) for t in seen_by))
    out["info"] = " · ".join(info)
    return out


def _validators(result: CaseResult | None) -> list[dict]:
    if result is None:
        return []
    out = []
    for v in result.validators:
        s = v.source
        expected, observed = _clip(v.expected, TEXT_LIMIT) or "", _clip(v.observed, TEXT_LIMIT) or ""
        # Where the two differ: segments of each side, the changed ones shown as <del> / <ins>.
        marks = mark_differences(expected, observed) if v.expected != v.observed else None
        out.append({"v": v, "anchor": f"event-{s.phase}-{s.sequence}" if s else None,
                    "phase": s.phase if s else None, "seq": s.sequence if s else None,
                    "expected": expected, "observed": observed,
                    "expected_marks": marks[0] if marks else None, "observed_marks": marks[1] if marks else None,
                    "first_difference": first_difference(v.expected, v.observed)})
    return out


def _diffs(result: CaseResult | None) -> list[dict]:
    """Unified diff expected → observed, line by line with each line's kind, for every validator whose two
    values differ (cut after ``TEXT_LIMIT`` characters, and said so)."""
    if result is None:
        return []
    out = []
    for i, v in enumerate(result.validators, 1):
        if v.expected == v.observed or not (v.expected or v.observed):
            continue
        lines, size, cut = [], 0, 0
        for kind, line in diff_lines(v.expected, v.observed):
            if size > TEXT_LIMIT:
                cut += 1
                continue
            size += len(line) + 1
            lines.append((kind, line))
        out.append({"n": i, "kind": v.kind, "passed": v.passed, "lines": lines, "cut": cut,
                    "note": None if lines else "the values differ only in trailing newlines",
                    "where": first_difference(v.expected, v.observed)})
    return out


def _usage_view(usage: Any) -> dict | None:
    """A usage record's displayed parts and its source (A: the proxy's records; B: the agent's events)."""
    if usage is None:
        return None
    return {"source": usage.source, "parts": usage_parts(usage.model_dump())}


def _phase_view(case_dir: Stored, phase: str, rec) -> dict:
    proc = rec.process if rec else None
    return {
        "phase": phase, "rec": rec, "proc": proc, "usage": _usage_view(rec.usage) if rec else None,
        "command": shlex.join(proc.command) if proc and proc.command else None,
        "command_summary": command_summary(proc.command) if proc and proc.command else None,
        "stdout": _read_text(case_dir / f"{phase}.stdout"), "stderr": _read_text(case_dir / f"{phase}.stderr"),
        "final": _read_text(case_dir / "artifacts" / f"{phase}.final.txt"),
    }


def command_summary(argv: list[str]) -> str:
    """A phase's command on one line: ``bwrap … gripprobe-refagent (76 args)`` — the program, the agent it
    runs (the word after the ``--`` that follows the sandbox's init, else after the first ``--``) and how many
    arguments follow the program. The case page shows this and the whole command on demand."""
    prog = os.path.basename(argv[0]) or argv[0]
    agent = None
    if "--" in argv[1:]:
        cut = argv.index("--", 1)
        if "--as-pid-1" in argv:
            try:  # bwrap's `--` starts the init's line (compiled or Python); the init's own `--` the command's
                cut = argv.index("--", argv.index("--", argv.index("--as-pid-1")) + 1)
            except ValueError:
                pass
        if cut + 1 < len(argv):
            agent = os.path.basename(argv[cut + 1]) or argv[cut + 1]
    words = [prog, *(["…", agent] if agent and agent != prog else [])]
    n = len(argv) - 1
    return f"{' '.join(words)} ({n} arg{'' if n == 1 else 's'})"


def _proxy_view(case_dir: Stored, phase: str, rec) -> dict:
    """One summary row per recorded HTTP exchange; request and response bodies are left out."""
    info = dict(rec.proxy) if rec else {}
    record = info.get("record")
    name = record if isinstance(record, str) and record and "/" not in record and "\\" not in record \
        and record not in (".", "..") else f"proxy.{phase}.http.jsonl"
    path = case_dir / "artifacts" / name
    records = info.get("records") if isinstance(info.get("records"), dict) else {}
    capped = {k: records.get(k) if type(records.get(k)) is int else 0
              for k in ("slimmed", "dropped", "dropped_bytes", "max_records", "max_bytes")}
    refused = info.get("model_not_under_test")
    view = {"phase": phase, "mode": info.get("mode"), "status": info.get("status"),
            "reason": info.get("skip_reason") or info.get("error"), "state": "ok", "rows": [], "more": 0, "bad": 0,
            "capped": capped if capped["slimmed"] or capped["dropped"] else None,
            "refused": refused if type(refused) is int and refused > 0 else 0,
            "models": [str(m) for m in info.get("models") or [] if isinstance(m, str)]}
    try:
        fh = path.open()
    except FileNotFoundError:
        view["state"] = "missing"
        return view
    except OSError:
        view["state"] = "unreadable"
        return view
    with fh:
        for raw in fh:
            line = raw.decode("utf-8", "replace")
            if not line.strip():
                continue
            if len(view["rows"]) >= PROXY_ROWS_MAX:
                view["more"] += 1
                continue
            try:
                d = json.loads(line)
            except ValueError:
                view["bad"] += 1
                continue
            if not isinstance(d, dict):
                view["bad"] += 1
                continue
            view["rows"].append(_exchange(d))
    if view["bad"] and not view["rows"]:
        view["state"] = "unreadable"
    return view


def _exchange(d: dict) -> dict:
    g = lambda k: d.get(f"x_gripprobe_{k}")  # noqa: E731
    tools = [str(t) for t in (g("tool_names") or []) if t is not None]
    as_text = [str(t) for t in (g("tool_names_nonstructured") or []) if t is not None] \
        if isinstance(g("tool_names_nonstructured"), list) else []
    tools += [f"{t} (unstructured)" for t in as_text]
    return {"text_calls": as_text, "ts": g("timestamp"), "method": g("method"), "path": g("path"), "status": g("status"),
            "duration": g("duration_ms"), "protocol": g("protocol"), "stream": g("stream"),
            "tools": ", ".join(tools), "results": g("tool_result_count"),
            "error": g("proxy_error") or g("error"), "budget": bool(g("budget_exceeded"))}


def _artifact_list(root: Stored) -> list[dict]:
    """Names and sizes of the regular files in ``artifacts/`` (lstat: a symlink is not followed)."""
    try:
        fd = root.open_dir()
    except OSError:
        return []
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)[:ARTIFACTS_MAX]
        out = []
        for e in entries:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                out.append({"name": safe_name(e.name), "size": st.st_size})
        return out
    except OSError:
        return []
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------- aggregate

def render_aggregate_html(data: dict) -> str:
    """The cross-run aggregate page from the grouped data described in ``docs/reports.md``.

    Linear in rows × tests × statuses; every value is escaped, nothing is fetched. The table's rows (and the
    fidelity table's) are written in Python (:func:`_agg_row_html`), the rest of the page by its template."""
    return "".join(aggregate_html_chunks(data))


def aggregate_html_chunks(data: dict, rendered: Sequence[tuple[str, str]] | None = None,
                          frame: dict[str, Any] | None = None) -> Iterator[str]:
    """:func:`render_aggregate_html` as a stream of pieces (a row of the table at most), for a writer that never
    holds the whole page (``aggregate-reports``: ``store.layout.atomic_write_chunks``). ``rendered``: every row's
    markup already written (:func:`aggregate_row_markup` of the whole table, in order: ``aggregate-reports``
    writes it in worker processes), else it is written here, a row at a time. ``frame``: ``data``'s
    :func:`aggregate_frame` when the caller has made it already."""
    from .. import __version__

    frame = aggregate_frame(data) if frame is None else frame
    pairs = rendered if rendered is not None else _row_markup_stream(frame)
    written = _written()
    first, second = _tee_pairs(pairs)
    yield from _env().get_template("aggregate.html").generate(
        version=__version__, **frame, fid_columns=FIDELITY_COLUMNS,
        rows_html=(written(r) for r in first), fidelity_rows_html=(written(f) for f in second))


def _row_markup_stream(frame: dict[str, Any]) -> Iterator[tuple[str, str]]:
    statuses, tests, same = frame["statuses"], frame["tests"], frame["same"]
    for row in frame["rows"]:
        v = _view_row(row, statuses, tests)
        yield _agg_row_html(v, same), _fidelity_row_html(v)


def _tee_pairs(pairs: Iterable[tuple[str, str]]) -> tuple[Iterator[str], Iterator[str]]:
    """The table's rows as they come, and the fidelity table's rows (kept meanwhile: the fidelity table comes
    after the whole table, so each row's view is made once)."""
    kept: list[str] = []

    def first() -> Iterator[str]:
        for row_html, fid_html in pairs:
            kept.append(fid_html)
            yield row_html

    def second() -> Iterator[str]:
        yield from kept
        kept.clear()

    return first(), second()


def aggregate_row_markup(frame: dict[str, Any], lo: int = 0, hi: int | None = None) -> list[tuple[str, str]]:
    """The markup of the rows ``lo:hi`` of an aggregate page (``frame``: :func:`aggregate_frame`): each row's
    line of the table and of the fidelity table. Rows are independent of one another given the frame, so
    slices may be written in worker processes and joined in order."""
    return list(_row_markup_stream({**frame, "rows": frame["rows"][lo:hi]}))


def aggregate_context(data: dict) -> dict[str, Any]:
    """What the aggregate page is made of: its template's context but the rows' markup (each row's view in
    ``rows``: the row, its counts, scores, intervals, usage and test cells, as the page shows them)."""
    frame = aggregate_frame(data)
    return {**frame, "rows": [_view_row(row, frame["statuses"], frame["tests"]) for row in frame["rows"]]}


def _view_row(row: dict, statuses: list[str], tests: list[str]) -> dict[str, Any]:
    """A row as the page shows it: its counts, scores, intervals, usage and test cells."""
    cells = row.get("cells") or {}
    return {
        "row": row, "hardware": row.get("hardware") or "(unknown)",
        "counts": _count_list(row.get("counts") or {}, statuses),
        "strict_ci": _ci(row.get("strict_ci95")), "overall_ci": _ci(row.get("overall_ci95")),
        "pass_at_k": _pass_at_k(row.get("pass_at_k")), "pass_hat_k": _pass_at_k(row.get("pass_hat_k")),
        "ks": _ks_view(_pass_at_k(row.get("pass_at_k")), _pass_at_k(row.get("pass_hat_k"))),
        "coverage": coverage_text(row), "flaky": [str(t) for t in row.get("flaky") or []],
        "usage": usage_parts(row.get("usage") if isinstance(row.get("usage"), dict) else None),
        "cells": [_agg_cell(cells.get(t), statuses, t) for t in tests],
    }


def aggregate_frame(data: dict) -> dict[str, Any]:
    """The aggregate page's template context but its rows' views (``rows``: the rows as given): what every
    row's markup depends on besides the row (its statuses, tests, the columns the same for every row)."""
    statuses = list(data.get("statuses") or STATUSES)
    tests = [str(t) for t in data.get("tests") or []]
    seen = set(statuses)
    rows = []
    for row in data.get("rows") or []:
        for s in (row.get("counts") or {}):
            if s not in seen:
                seen.add(s)
                statuses.append(s)
        rows.append(row)
    agents = sorted({str(r.get("agent", "")) for r in rows})
    models = sorted({str(r.get("model", "")) for r in rows})
    formats = sorted({str(r.get("format", "")) for r in rows})
    hardware = sorted({r.get("hardware") or "(unknown)" for r in rows})
    # Column priorities: in the compact layout (the page's script picks it when the full table is wider than
    # the window) a format or hardware column holding one value in every row is said once above the table.
    same = {k: v[0] for k, v in (("format", formats), ("hardware", hardware)) if len(v) == 1}
    from .aggregate import run_signature_text, signatures_text

    signatures = data.get("signatures") if isinstance(data.get("signatures"), dict) else None
    return dict(data=data, title=data.get("title") or "GripProbe aggregate report",
                runs=[{**r, "signature": run_signature_text(r)} for r in data.get("runs") or []], tests=tests,
                statuses=statuses, rows=rows, same=same,
                signatures_line=signatures_text(signatures) if signatures else None,
                public_keys=(signatures or {}).get("keys") or [],
                filters={"agent": agents, "model": models, "format": formats, "hardware": hardware})


def _count_list(counts: dict, statuses: list[str]) -> list[tuple[str, int]]:
    return [(s, counts[s]) for s in statuses if counts.get(s)]


def _ci(ci: Any) -> str | None:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    return None


def _pass_at_k(pk: Any) -> list[tuple[str, str]]:
    if not isinstance(pk, dict):
        return []

    def key(k: str) -> tuple:
        return (0, int(k)) if str(k).isdigit() else (1, str(k))
    return [(str(k), _num(pk[k], 2)) for k in sorted(pk, key=key)]


def _ks_view(pass_at_k: list[tuple[str, str]], pass_hat_k: list[tuple[str, str]]) -> dict | None:
    """pass@k and pass^k in at most two short lines: pass@1 and pass@k for the largest k, then pass^k for the
    largest k (pass^1 is pass@1); every k in ``title``. None when there is none."""
    if not pass_at_k and not pass_hat_k:
        return None
    at = [pass_at_k[0], pass_at_k[-1]] if len(pass_at_k) > 1 else list(pass_at_k)
    hat = pass_hat_k[-1] if len(pass_hat_k) > 1 else None
    title = " · ".join([*(f"pass@{k} {p}" for k, p in pass_at_k), *(f"pass^{k} {p}" for k, p in pass_hat_k)])
    return {"at": at, "hat": hat, "title": title}


def _agg_cell(cell: Any, statuses: list[str], test: str = "") -> dict | None:
    if not isinstance(cell, dict):
        return None
    counts = _count_list(cell.get("counts") or {}, statuses)
    pass_at_k, pass_hat_k = _pass_at_k(cell.get("pass_at_k")), _pass_at_k(cell.get("pass_hat_k"))
    ci = _ci(cell.get("strict_ci95"))
    # compact cells (the page's layout when the full table is too wide): a status bar (segments as wide as
    # their counts) and everything in the cell's title
    bar = [(st, n) for st, n in counts if type(n) is int and n > 0]
    title = " · ".join([f"{test}: n={cell.get('n', 0)}", *(f"{st} {n}" for st, n in counts),
                        f"strict {_num(cell.get('strict'), 2)}" + (f" {ci}" if ci else ""),
                        f"overall {_num(cell.get('overall'), 2)}", *(f"pass@{k} {p}" for k, p in pass_at_k),
                        *(f"pass^{k} {p}" for k, p in pass_hat_k[1:]),
                        *(["flaky: its trials disagree"] if cell.get("flaky") else [])])
    return {"n": cell.get("n", 0), "counts": counts, "strict": cell.get("strict"), "overall": cell.get("overall"),
            "ci": ci, "pass_at_k": pass_at_k, "pass_hat_k": pass_hat_k, "ks": _ks_view(pass_at_k, pass_hat_k),
            "flaky": bool(cell.get("flaky")),
            "bar": bar, "title": title}


_HTML_SPECIAL = frozenset("&<>'\"")


def _h(value: Any) -> str:
    """One value as every page's ``{{ value }}`` writes it (:func:`_finalize`, then markupsafe's autoescape):
    markupsafe is only called for text holding a character it escapes, or for an object with its own markup."""
    if type(value) is str:
        text = value if value.isascii() and value.isprintable() else safe_text(value)
        return str(_escape()(text)) if not _HTML_SPECIAL.isdisjoint(text) else text
    if type(value) is int or type(value) is float:
        return str(value)
    return str(_escape()(_finalize(value)))


@lru_cache(maxsize=None)
def _escape() -> Any:
    from markupsafe import escape

    return escape


def _ks_html(ks: dict) -> str:
    """The ``ks_lines`` macro (macros.html) of a :func:`_ks_view`, written here for the aggregate's cells."""
    title = _h(ks["title"])
    out = f'<div class="ks" title="{title}">' + " · ".join(f"pass@{_h(k)} {_h(p)}" for k, p in ks["at"]) + "</div>"
    if ks["hat"]:
        out += f' <div class="ks" title="{title}">pass^{_h(ks["hat"][0])} {_h(ks["hat"][1])}</div>'
    return out


def _json_attr(value: Any) -> str:
    """The templates' ``tojson`` filter of ``value`` (:func:`_tojson`), as text for a single-quoted attribute."""
    from jinja2.utils import htmlsafe_json_dumps

    return safe_text(str(htmlsafe_json_dumps(inert(value), sort_keys=True)))


def _truncate(text: str, length: int = 16, end: str = "…") -> str:
    """Jinja's ``truncate(length, True, end, 0)``: the text, or its first ``length - len(end)`` characters and ``end``."""
    return text if len(text) <= length else text[:length - len(end)] + end


def _agg_row_html(v: dict, same: dict) -> str:
    """One group's row of the aggregate's table, its test cells included (``v``: a row's view, as
    :func:`render_aggregate_html` builds it): written here, not in the template, for the reason
    :func:`_agg_cell_html` gives."""
    row = v["row"]
    agent, version = row.get("agent", ""), row.get("agent_version")
    model, model_hash = row.get("model", ""), row.get("model_hash")
    counts_title = ", ".join(f"{_h(s)} {_h(c)}" for s, c in v["counts"])
    usage_title = "".join(f" · {_h(label)} {_h(value)}" for label, value in v["usage"])
    badges = "".join(f'<span class="badge st-{_h(s)}" title="{_h(s)}: {_h(c)}">{_h(SHORT_STATUS.get(s, s))} {_h(c)}'
                     "</span>" for s, c in v["counts"])
    strict_ci = f'<div class="muted nowrap">{_h(v["strict_ci"])}</div>' if v["strict_ci"] else ""
    overall_ci = f'<div class="muted nowrap">{_h(v["overall_ci"])}</div>' if v["overall_ci"] else ""
    ks = f'{_ks_html(v["ks"])} ' if v["ks"] else '<span class="muted">—</span>'
    flaky = (f'<div class="mark-flaky" title="{_h(", ".join(v["flaky"]))}">{len(v["flaky"])} flaky</div>'
             if v["flaky"] else "")
    usage = "".join(f'<div class="nowrap"><span class="muted">{_h(label)}</span> {_h(value)}</div> '
                    for label, value in v["usage"]) or '<span class="muted">—</span>'
    same_format = ' class="same-col"' if "format" in same else ""
    same_hardware = ' class="same-col"' if "hardware" in same else ""
    hashed = (f' <span class="muted mono" title="{_h(model_hash)}">{_h(_truncate(str(model_hash)))}</span>'
              if model_hash else "")
    versioned = f' <span class="muted">{_h(version)}</span>' if version else ""
    return (f"<tr data-f-agent='{_json_attr([str(agent)])}' data-f-model='{_json_attr([str(model)])}' "
            f"data-f-format='{_json_attr([str(row.get('format', ''))])}' data-f-hardware='{_json_attr([v['hardware']])}'>\n"
            f'  <td data-sort="{_h(agent)} {_h(version or "")}" title="{counts_title}{usage_title}">{_h(agent)}{versioned}'
            "</td>\n"
            f'  <td data-sort="{_h(model)}">{_h(model)}{hashed}</td>\n'
            f"  <td{same_format}>{_h(row.get('format', ''))}</td>\n"
            f"  <td{same_hardware}>{_h(v['hardware'])}</td>\n"
            f'  <td class="num nowrap" data-sort="{_h(row.get("coverage", 0))}">{_h(v["coverage"])}</td>\n'
            f'  <td class="num">{_h(row.get("n", 0))}</td>\n'
            f'  <td class="detail-col"><div class="counts">{badges}</div></td>\n'
            f'  <td class="num" data-sort="{_h(row.get("strict_pass_score"))}">{_h(_num(row.get("strict_pass_score")))} '
            f"{strict_ci}</td>\n"
            f'  <td class="num" data-sort="{_h(row.get("overall_score"))}">{_h(_num(row.get("overall_score")))} '
            f"{overall_ci}</td>\n"
            f'  <td class="ks-cell">{ks}{flaky}</td>\n'
            f'  <td class="usage detail-col">{usage}</td>\n'
            + "".join(map(_agg_cell_html, v["cells"])) + "</tr>\n")


#: The fidelity table's comparisons: (key, column label, what it compares).
FIDELITY_COLUMNS = (
    ("B_vs_A", "B vs A", "tier B (the agent's structured output) against tier A (the wire)"),
    ("C_vs_A", "C vs A", "tier C (the agent's plain text) against tier A (the wire)"),
    ("A_vs_truth", "A vs truth", "tier A (the wire) against the oracle's ground truth"),
    ("B_vs_truth", "B vs truth", "tier B against the oracle's ground truth"),
)


def _fid_rate(rate: Any, n: Any) -> str:
    if isinstance(rate, numbers.Number):
        return f'{_h(_num(rate, 2))} <span class="muted">({_h(n)})</span>'
    return f'<span class="muted">— ({_h(n or 0)})</span>'


def _fidelity_row_html(v: dict) -> str:
    """One group's row of the tool-call fidelity table (``row["fidelity"]``; docs/aggregate.md)."""
    row = v["row"]
    fid = row.get("fidelity") if isinstance(row.get("fidelity"), Mapping) else {}
    version = row.get("agent_version")
    out = [f'<tr data-fidelity-row>\n  <td>{_h(row.get("agent", ""))}'
           + (f' <span class="muted">{_h(version)}</span>' if version else "") + "</td>\n"
           f'  <td>{_h(row.get("model", ""))}</td><td>{_h(row.get("format", ""))}</td><td>{_h(v["hardware"])}</td>\n']
    for key, _label, title in FIDELITY_COLUMNS:
        f = fid.get(key) if isinstance(fid.get(key), Mapping) else {}
        head = f"{_h(title)}: {_h(f.get('matched', 0))} matched, "
        cases = f"{_h(f.get('cases', 0))} case(s)"
        out.append(f'  <td class="num" data-key="{_h(key)}-recall" title="{head}{_h(f.get("missed", 0))} missed, {cases}">'
                   f'{_fid_rate(f.get("recall"), f.get("n_reference"))}</td>\n'
                   f'  <td class="num" data-key="{_h(key)}-precision" title="{head}{_h(f.get("invented", 0))} invented, '
                   f'{cases}">{_fid_rate(f.get("precision"), f.get("n_tested"))}</td>\n')
    out.append("</tr>\n")
    return "".join(out)


def _agg_cell_html(c: dict | None) -> str:
    """One test cell of the aggregate's table (a row of 18 tests has 18; a 10k-case page 5,760): the markup the
    page's template wrote for it, written in Python, which is about ten times cheaper per cell than the template
    (the page was a fifth of ``aggregate-reports``'s time). Every value goes through :func:`_h`, as it did."""
    if c is None:
        return '<td class="cell muted" data-sort="">—</td>'
    strict, n, flaky = c["strict"], _h(c["n"]), c["flaky"]
    badges = "".join(f'<span class="badge st-{_h(s)}" title="{_h(s)}: {_h(k)}">{_h(SHORT_STATUS.get(s, s))} {_h(k)}'
                     "</span>" for s, k in c["counts"])
    if strict is not None:
        ci = f' <span class="muted">{_h(c["ci"])}</span>' if c["ci"] else ""
        score = f"<div>strict {_h(_num(strict, 2))}{ci} · overall {_h(_num(c['overall'], 2))}</div>"
    else:
        score = '<div class="muted">not attempted</div>'
    bar = "".join(f'<span class="seg st-{_h(s)}" style="flex-grow: {_h(k)}"></span>' for s, k in c["bar"])
    return (f'  <td class="cell" data-sort="{"" if strict is None else _h(strict)}" title="{_h(c["title"])}">\n'
            '    <div class="full-cell">\n'
            f"    <div>n={n}</div>\n"
            f'    <div class="counts">{badges}</div>\n'
            + score
            + ('<div class="mark-flaky" title="its trials disagree">flaky</div>' if flaky else "")
            + (f'<div class="muted">{_ks_html(c["ks"])}</div>' if c["ks"] else "")
            + "    </div>\n"
            f'    <div class="compact-cell"><div class="cell-score{" flaky" if flaky else ""}">{_h(_num(strict, 2))}'
            f'</div><div class="bar">{bar}</div><div class="muted">n={n}</div></div>\n'
            "  </td>\n")


# ---------------------------------------------------------------------------------------- compare

def render_compare_html(data: dict) -> str:
    """The comparison page (``gripprobe compare``): flips first, then the paired summary and the rows; every
    trial's status links to its case page (``pages``: relative to the folder the page is written to)."""
    return _render("compare.html", **_compare_context(data))


def _compare_context(data: dict) -> dict[str, Any]:
    """What ``compare.html`` (and the live view's page built on it) is rendered from."""
    from .compare import (build_cell_text, build_note, cell_label, delta_text, diff_text, p_text, pass_text, rate_text,
                          signatures_line, significance_note)

    def trials(side: dict) -> list[dict]:
        """Each trial's status, its case page (None: not in its run's reports) and ``run/case``."""
        pages, cases = side.get("pages") or [], side.get("cases") or []
        return [{"status": st, "page": pages[j] if j < len(pages) else None, "case": cases[j] if j < len(cases) else ""}
                for j, st in enumerate(side["statuses"])]

    fields = list(data.get("pairing") or [])[:-2]
    cells = []
    for c in data.get("cells") or []:
        ta, tb = trials(c["a"]), trials(c["b"])
        cells.append({"cell": c, "label": cell_label(c, fields), "a": rate_text(c["a"]), "b": rate_text(c["b"]),
                      "p": p_text(c.get("p_value")), "trials": list(zip(ta, tb)), "trials_a": ta, "trials_b": tb})
    rows = [{"row": r, "name": [r[f] for f in fields], "strict": diff_text(r["strict"]),
             "overall": diff_text(r["overall"]),
             "pass_a": pass_text(r["pass"]["a"]), "pass_b": pass_text(r["pass"]["b"]),
             "build_note": build_note(r), "build": build_cell_text(r),
             "tokens": delta_text(r["per_case"]["total_tokens"]), "cost": delta_text(r["per_case"]["cost"], digits=4),
             "agent_s": delta_text(r["per_case"]["agent_s"], digits=2),
             "ttft": delta_text(r["per_case"]["ttft_ms"], " ms"),
             "usage_a": usage_parts(r["usage"]["a"]), "usage_b": usage_parts(r["usage"]["b"])}
            for r in data.get("rows") or []]
    s = data["summary"]
    return dict(data=data, fields=fields, cells=cells, rows=rows, summary=s,
                strict=diff_text(s["strict"]), overall=diff_text(s["overall"]), p=p_text(s.get("mcnemar_p")),
                pass_a=pass_text(s["pass"]["a"]), pass_b=pass_text(s["pass"]["b"]),
                significance=significance_note(data), signatures=signatures_line(data))


# ---------------------------------------------------------------------------------------- live view

def render_view_page(template: str, *, live: dict, summary: tuple[str, dict, list] | None = None,
                     case: tuple[Stored, CaseResult | None, str] | None = None, compare: dict | None = None,
                     **extra: Any) -> str:
    """A page of ``gripprobe view`` (docs/view.md): one of its own templates (``view_*.html``), which extend the
    static pages' templates, rendered from the same context as the static page it extends (``summary``:
    (run id, manifest, entries) as for :func:`render_summary_html`; ``case``: (case folder, result, run id) as for
    :func:`render_case_html`; ``compare``: the comparison data), plus ``live``: what its script polls."""
    ctx: dict[str, Any] = {}
    if summary is not None:
        ctx.update(_summary_context(*summary))
    if case is not None:
        ctx.update(_case_context(*case))
    if compare is not None:
        ctx.update(_compare_context(compare))
    return _render(template, live=live, **ctx, **extra)

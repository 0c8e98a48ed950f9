"""What every exporter reads: the run's cases and one phase's normalized events as a timeline.

A stored run can hold anything (a case.json that is not a result, an events file with garbage lines,
fields of the wrong type, a symlink where a file or folder should be), so everything here is read
defensively: files through :class:`~gripprobe_core.store.Stored` (no link followed anywhere below the run
folder, never a FIFO or device), every event field checked for its type, and nothing raises on bad data. What could not be read is reported
in ``problems`` for the command to print.

The timeline pairs the events of one phase the way the reports do: each ``model_response`` with the
tool calls whose ``parent_id`` names it; a tool call is its ``tool_call_start`` and ``tool_call_result``
(joined by ``tool_call_id``, or, without an id, a result with the latest unanswered start of the same
tool and tier). Calls whose parent is not a model response of the timeline are ``orphans`` (tier B/C
evidence from agents whose model traffic was not seen).
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from ..jsonl import json_lines
from ..models.events import TIER_ORDER
from ..models.results import CaseResult
from ..store import RunFolder, Stored, read_regular
from ..store.files import OpenFolder
from ..store.layout import STORED_JSON_LIMIT
from ..store.lean import LeanCase, lean_case
from ..telemetry.merge import parse_timestamp

__all__ = ["Call", "ExportCase", "Response", "Timeline", "case_label", "clean", "clean_int", "iso", "load_cases",
           "read_text", "read_timeline", "write_file"]

#: Largest events file read (a bigger one is read up to this size: its last events are left out).
EVENTS_LIMIT = 64 * 1024 * 1024
#: Largest prompt / final answer / context file read.
TEXT_LIMIT = 1024 * 1024
PHASE = "measured"

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: Any, limit: int | None = None) -> str:
    """``value`` as text any UTF-8 encoder accepts: lone surrogates (from a JSON ``\\ud800`` escape) become
    U+FFFD; cut to ``limit`` characters when given."""
    s = value if isinstance(value, str) else str(value)
    s = _SURROGATE.sub("\ufffd", s)
    return s if limit is None or len(s) <= limit else s[:limit]


def clean_int(value: Any) -> int | None:
    """A non-negative integer that fits a signed 64-bit field, or None (bools, floats, strings, huge ints)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value < 2 ** 63 else None


#: Longest latency believed (ms, 30 days); a larger stored value is treated as unknown.
MAX_LATENCY_MS = 30 * 24 * 3600 * 1000.0


def _latency(value: Any) -> float | None:
    """A latency in ms from disk: a finite number from 0 to :data:`MAX_LATENCY_MS`, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) and 0 <= f <= MAX_LATENCY_MS else None


def _opt_str(value: Any) -> str | None:
    return clean(value) if isinstance(value, str) and value else None


def iso(seconds: float) -> str:
    """Epoch seconds as ISO-8601 UTC with milliseconds (``2026-11-24T19:25:51.422Z``)."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


#: Latest moment accepted from disk (2255-03-14): its nanoseconds still fit OTLP's signed 64-bit fields.
LATEST = 9_000_000_000.0


def when(value: Any) -> float | None:
    """Epoch seconds of an ISO-8601 timestamp from disk, or None; only 1970 to 2255 (what every consumer,
    OTLP nanoseconds included, can hold)."""
    seconds = parse_timestamp(value)
    if seconds is None or not 0 <= seconds < LATEST:
        return None
    return seconds


def _read(path: Stored | Path, limit: int) -> bytes:
    return path.read(limit) if isinstance(path, Stored) else read_regular(path, limit)


def read_text(path: Stored | Path, limit: int = TEXT_LIMIT) -> str | None:
    """A regular file's text (at most ``limit`` bytes, UTF-8 with replacement), or None."""
    try:
        return _read(path, limit).decode("utf-8", "replace")
    except OSError:
        return None


@dataclass
class ExportCase:
    """One case directory: its result (None when case.json is missing or not a valid result). ``path`` is
    read without following a link below the run folder."""

    name: str
    path: Stored
    result: CaseResult | LeanCase | None
    """The checked case.json: the result contract's fields under their names (a :class:`~gripprobe_core.store.lean.
    LeanCase` as :func:`load_cases` reads it, checked as strictly as the model checks it)."""

    @property
    def problem(self) -> str | None:
        if self.result is not None:
            return None
        if not (self.path / "case.json").lexists():
            return "no case.json (the case did not finish)"
        return "case.json is not a valid result (corrupt, foreign or not a regular file)"


def load_cases(run: RunFolder) -> list[ExportCase]:
    """Every case directory of the run (symlinks are not followed), sorted by name; each case.json read once below
    ``cases/`` (opened once) and checked whole by :func:`~gripprobe_core.store.lean.lean_case` (the result model's
    contract, a third of the model's parse time: docs/aggregate.md "Scale")."""
    try:
        cases = (run.stored / "cases").opened()
    except OSError:
        return []
    with cases:
        return [ExportCase(name, run.stored_case(name), _checked_case(cases, name)) for name in cases.folders()]


def _checked_case(cases: OpenFolder, name: str) -> LeanCase | None:
    try:
        data = cases.read(f"{name}/case.json", STORED_JSON_LIMIT + 1)
    except OSError:
        return None
    return lean_case(data) if len(data) <= STORED_JSON_LIMIT else None


def case_label(case: ExportCase) -> dict[str, str]:
    """agent, model, backend, format, test of a case: from case.json, else from its directory name
    (``agent__model__backend__format__test``), else ``unknown``."""
    if case.result is not None:
        k = case.result.key
        return {"agent": k.agent, "model": k.model, "backend": k.backend, "format": k.format, "test": k.test}
    parts = case.name.split("__")
    if len(parts) == 5 and all(parts):
        return dict(zip(("agent", "model", "backend", "format", "test"), parts))
    return {"agent": "unknown", "model": "unknown", "backend": "unknown", "format": "unknown", "test": case.name}


# --------------------------------------------------------------------------------------------- timeline


@dataclass
class Call:
    """One tool call: its start and/or result event."""

    tool_call_id: str | None
    raw_name: str
    name: str
    kind: str | None
    arguments: Any
    call_kind: str | None
    tier: str
    tiers: list[str]
    sequence: int
    parent: str | None
    start_event: str | None = None
    result_event: str | None = None
    start_ts: float | None = None
    result_ts: float | None = None
    output: str | None = None
    status: str = "unknown"
    exit_code: int | None = None
    error_type: str | None = None
    latency_ms: float | None = None
    permissions: list[dict[str, Any]] = field(default_factory=list)
    """The permission requests for this call and their answers (``request_id``, ``outcome``, ``option_id``,
    ``rule``, ``decided_by``), in order (docs/interaction.md)."""

    @property
    def has_result(self) -> bool:
        return self.result_event is not None


@dataclass
class Response:
    """One ``model_response`` event and the tool calls it asked for."""

    event_id: str
    sequence: int
    tier: str
    timestamp: float | None
    latency_ms: float | None
    response_id: str | None
    text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cached_tokens: int | None
    status: str
    error_type: str | None
    protocol: str | None
    calls: list[Call] = field(default_factory=list)
    reasoning: str | None = None
    """The model's reasoning in this response (its ``thought`` events, the best tier's)."""

    @property
    def end(self) -> float | None:
        if self.timestamp is None:
            return None
        return self.timestamp + (self.latency_ms or 0.0) / 1000.0


@dataclass
class Timeline:
    """One phase's events: ``state`` ok | partial (some lines unreadable) | unreadable | missing."""

    responses: list[Response] = field(default_factory=list)
    orphans: list[Call] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    """Every permission request of the phase with its answer (``tool_call_id`` included), in order."""
    state: str = "missing"
    bad_lines: int = 0
    events: int = 0

    @property
    def calls(self) -> list[Call]:
        """Every tool call, in timeline order."""
        out = [c for r in self.responses for c in r.calls] + self.orphans
        return sorted(out, key=lambda c: c.sequence)

    def items(self) -> list[Response | Call]:
        """Responses and orphan calls in timeline order."""
        return sorted([*self.responses, *self.orphans], key=lambda x: x.sequence)


_EVENT_TYPES = ("model_response", "tool_call_start", "tool_call_result", "thought", "permission_request",
                "permission_response")
_EVENT_WORDS = tuple(t.encode() for t in _EVENT_TYPES)
_STATUSES = ("started", "success", "error", "timeout", "unknown")


def _tier(value: Any) -> str:
    return value if isinstance(value, str) and value in TIER_ORDER else "D"


def read_timeline(case_dir: Stored | Path, phase: str = PHASE) -> Timeline:
    """The timeline of ``artifacts/events.<phase>.jsonl``; never raises."""
    path = case_dir / "artifacts" / f"events.{phase}.jsonl"
    try:
        data = _read(path, EVENTS_LIMIT)
    except FileNotFoundError:
        return Timeline(state="missing")
    except OSError:
        return Timeline(state="unreadable")
    lines = sum(1 for raw in data.splitlines() if raw.strip())
    # only lines that can hold one of the event types are parsed (json_lines' ``only``): the others are bad lines
    # either way, and a line that spells a type with an escape is still parsed
    raw_events = [obj for _, obj in json_lines(data, _EVENT_WORDS) if obj.get("event_type") in _EVENT_TYPES]
    timeline = build_timeline(raw_events)
    timeline.bad_lines = lines - len(raw_events)
    timeline.state = "ok" if not timeline.bad_lines else ("partial" if raw_events else "unreadable")
    return timeline


def readable_cases(cases: list[ExportCase], note: Callable[[str], None]) -> Iterator[tuple[ExportCase, Timeline]]:
    """Each case that has a result, with its measured timeline; an unreadable case (skipped) and a damaged
    events file (exported as far as it could be read) are told to ``note``."""
    for case in cases:
        if case.result is None:
            note(f"{case.name}: skipped: {case.problem}")
            continue
        timeline = read_timeline(case.path)
        if timeline.state not in ("ok", "missing"):
            note(f"{case.name}: events.measured.jsonl is {timeline.state} "
                 f"({timeline.bad_lines} unreadable line(s)); exporting what could be read")
        yield case, timeline


def _sequence_of(obj: dict[str, Any], index: int) -> int:
    seq = obj.get("sequence")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and abs(seq) < 2 ** 62 else 10 ** 12 + index


def build_timeline(raw_events: list[dict[str, Any]]) -> Timeline:
    """Pair raw event dicts (any content) into a :class:`Timeline`."""
    ordered = sorted(enumerate(raw_events), key=lambda p: (_sequence_of(p[1], p[0]), p[0]))
    thoughts = [(obj, _sequence_of(obj, i)) for i, obj in ordered if obj["event_type"] == "thought"]
    asks = [obj for _, obj in ordered if obj["event_type"] in ("permission_request", "permission_response")]
    ordered = [(i, obj) for i, obj in ordered if obj["event_type"] not in ("thought", "permission_request",
                                                                          "permission_response")]
    responses: dict[str, Response] = {}
    calls: list[Call] = []
    by_id: dict[str, Call] = {}
    seen_ids: set[str] = set()
    for index, obj in ordered:
        seq = _sequence_of(obj, index)
        event_id = _opt_str(obj.get("event_id"))
        if event_id is None or event_id in seen_ids:
            event_id = f"event-{index + 1}"
        seen_ids.add(event_id)
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        status = obj.get("status") if obj.get("status") in _STATUSES else "unknown"
        ts = when(obj.get("timestamp"))
        if obj["event_type"] == "model_response":
            usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
            cached = usage.get("cached_tokens")
            details = usage.get("prompt_tokens_details")
            if cached is None and isinstance(details, dict):
                cached = details.get("cached_tokens")
            text = payload.get("text")
            responses[event_id] = Response(
                event_id=event_id, sequence=seq, tier=_tier(obj.get("source_tier")), timestamp=ts,
                latency_ms=_latency(obj.get("latency_ms")), response_id=_opt_str(obj.get("response_id")),
                text=clean(text) if isinstance(text, str) else None,
                prompt_tokens=clean_int(usage.get("prompt_tokens")),
                completion_tokens=clean_int(usage.get("completion_tokens")),
                total_tokens=clean_int(usage.get("total_tokens")), cached_tokens=clean_int(cached),
                status=status, error_type=_opt_str(obj.get("error_type")), protocol=_opt_str(payload.get("protocol")))
            continue
        tier = _tier(obj.get("source_tier"))
        call_id = _opt_str(obj.get("tool_call_id"))
        raw_name = _opt_str(payload.get("raw_name")) or _opt_str(payload.get("name")) or "unknown"
        name = _opt_str(payload.get("name")) or raw_name
        is_start = obj["event_type"] == "tool_call_start"
        call = by_id.get(call_id) if call_id is not None else None
        if call is None and not is_start and call_id is None:
            # no id: the latest unanswered start of the same tool and tier
            call = next((c for c in reversed(calls) if c.tool_call_id is None and not c.has_result
                         and c.start_event is not None and c.name == name and c.tier == tier), None)
        if call is None:
            call = Call(tool_call_id=call_id, raw_name=raw_name, name=name, kind=_opt_str(payload.get("kind")),
                        arguments=payload.get("arguments"), call_kind=_opt_str(payload.get("call_kind")), tier=tier,
                        tiers=[tier], sequence=seq, parent=_opt_str(obj.get("parent_id")))
            calls.append(call)
            if call_id is not None:
                by_id[call_id] = call
        elif tier not in call.tiers:
            call.tiers.append(tier)
            if TIER_ORDER[tier] < TIER_ORDER[call.tier]:
                call.tier = tier
        if call.parent is None:
            call.parent = _opt_str(obj.get("parent_id"))
        if is_start:
            if call.start_event is None:
                call.start_event, call.start_ts = event_id, ts
                if payload.get("arguments") is not None:
                    call.arguments = payload.get("arguments")
                if call.kind is None:
                    call.kind = _opt_str(payload.get("kind"))
            if status == "error" and call.status in ("unknown", "started"):
                call.status = status  # a start marked error: malformed arguments
            if call.error_type is None:
                call.error_type = _opt_str(obj.get("error_type"))
        else:
            if call.result_event is None:
                call.result_event, call.result_ts = event_id, ts
                output = payload.get("output")
                call.output = clean(output) if isinstance(output, str) else None
                if call.arguments is None:
                    call.arguments = payload.get("arguments")
            if status not in ("unknown", "started") or call.status in ("unknown", "started"):
                call.status = status
            code = obj.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and abs(code) < 2 ** 31:
                call.exit_code = code
            if _opt_str(obj.get("error_type")):
                call.error_type = _opt_str(obj.get("error_type"))
            latency = _latency(obj.get("latency_ms"))
            if latency is not None:
                call.latency_ms = latency
    timeline = Timeline(responses=sorted(responses.values(), key=lambda r: r.sequence), events=len(raw_events),
                        permissions=_permissions(asks))
    _attach_thoughts(thoughts, responses)
    for ask in timeline.permissions:
        target = by_id.get(ask["tool_call_id"]) if ask.get("tool_call_id") is not None else None
        if target is not None:
            target.permissions.append({k: v for k, v in ask.items() if k != "tool_call_id"})
    for call in calls:
        parent = responses.get(call.parent) if call.parent is not None else None
        if parent is not None:
            parent.calls.append(call)
        else:
            timeline.orphans.append(call)
    return timeline


def _attach_thoughts(thoughts: list[tuple[dict[str, Any], int]], responses: dict[str, Response]) -> None:
    """Each thought's text on the response it belongs to (``parent_id``, else the latest before it), once:
    the best tier's (A before B ...), several thoughts of one tier joined."""
    best: dict[str, tuple[str, list[str]]] = {}
    ordered = sorted(responses.values(), key=lambda r: r.sequence)
    for obj, seq in thoughts:
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        text = payload.get("text")
        if not isinstance(text, str) or not text:
            continue
        parent = _opt_str(obj.get("parent_id"))
        owner = responses.get(parent) if parent is not None else None
        if owner is None:
            owner = next((r for r in reversed(ordered) if r.sequence <= seq), None)
        if owner is None:
            continue
        tier = _tier(obj.get("source_tier"))
        have = best.get(owner.event_id)
        if have is None or TIER_ORDER[tier] < TIER_ORDER[have[0]]:
            best[owner.event_id] = (tier, [clean(text)])
        elif have[0] == tier:
            have[1].append(clean(text))
    for event_id, (_, texts) in best.items():
        responses[event_id].reasoning = "\n".join(texts)


def _permissions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests paired with their answers by ``request_id`` (a request never answered has outcome None)."""
    out: dict[str, dict[str, Any]] = {}
    for obj in events:
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        rid = _opt_str(payload.get("request_id"))
        if rid is None:
            continue
        entry = out.setdefault(rid, {"request_id": clean(rid, 256), "tool_call_id": _opt_str(obj.get("tool_call_id")),
                                     "outcome": None, "option_id": None, "rule": None, "decided_by": None})
        if obj["event_type"] == "permission_response":
            for key in ("outcome", "option_id", "rule", "decided_by"):
                value = _opt_str(payload.get(key))
                entry[key] = clean(value, 512) if value is not None else None
    return list(out.values())


# ------------------------------------------------------------------------------------------------ writing


def write_file(path: Path, data: bytes, *, inside: Path | None = None) -> None:
    """Write ``data`` to ``path`` atomically (a temporary sibling renamed into place), creating missing
    folders. With ``inside`` (the run directory, for the default output places) every folder between it
    and ``path`` must be a real folder or missing: one that is a symlink or a file is refused
    (``NotADirectoryError``), so a link planted in a run directory can never redirect what is written.
    The file itself is replaced, never written through (a symlink in its place is replaced, not followed)."""
    from ..store import atomic_write_bytes

    path = Path(path)
    if inside is not None:
        rel = path.parent.relative_to(inside)
        folder = Path(inside)
        for part in rel.parts:
            folder = folder / part
            try:
                st = os.lstat(folder)
            except FileNotFoundError:
                os.mkdir(folder)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(20, "not a folder (a symlink or a file is in the way)", str(folder))
    atomic_write_bytes(path, data, sync=False)

"""Parsers for what ``cn`` leaves behind: tier-B events from its session file, timed by its log.

Three artifacts, all optional to these functions (none of them ever raises on bad bytes):

- ``sessions/<uuid>.json`` — the trajectory, pretty-printed JSON (``JSON.stringify(x, null, 2)``):
  ``history[]`` of ``{message: {role, content, toolCalls?, usage?}, toolCallStates?: [{toolCallId,
  toolCall, status: generated|calling|done|errored|canceled, parsedArgs, output: [{content}]}]}``.
  It has no timestamps.
- ``logs/cn.log`` with ``--verbose`` — ``YYYY-MM-DD HH:MM:SS.mmm [sid] [level]: message {json}`` lines in the
  agent's local time. ``Stream complete {duration, toolCallsCount}`` closes each model response and
  ``Updated tool call state {toolCallId, updates: {status}}`` marks each tool call's ``calling`` and
  final status, which gives the events their timestamps and latencies. ``Creating chat completion
  stream`` starts a request, ``Received chunk {chunk: {id}}`` names it, ``Retry attempt`` discards it.
- stderr — on a backend failure ``cn -p`` prints ``{"status":"error","message":"<status> <text>"}``.

Events: one ``model_response`` per assistant message (and a ``thought`` with its reasoning, read from the log's
chunks when the log has that stream complete), one ``tool_call_start`` per requested call
(parent: that response), one ``tool_call_result`` per call that reached done/errored/canceled, and
one error ``model_response`` per stderr error line, numbered by the core's
:class:`~gripprobe_core.plugin.EventBuilder`. ``raw_artifact_ref`` is ``<file>:<line>`` of the
session (or stderr) line the event was read from. Tool names go through :data:`TOOL_NAMES`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, mapping, number, permission_events, text,
)

from .names import TOOL_NAMES

OUTPUT_LIMIT = 4000
TEXT_LIMIT = 4000

#: What cn says for a call its permissions refused before it ran (the session's tool output, status
#: ``canceled``): a tool ``--exclude`` left out of the request, called anyway.
BLOCKED_OUTPUT = "Command blocked by security policy"


def blocked_rule(raw_name: str | None, excluded: tuple[str, ...]) -> str:
    """The ``rule`` of a native denial of ``raw_name``: the setting that refused it."""
    if raw_name and raw_name in excluded:
        return f"native: --exclude {raw_name}"
    return "native: cn tool permissions"

#: toolCallStates status → event status (generated/calling have no result yet).
RESULT_STATUS: dict[str, str] = {"done": "success", "errored": "error", "canceled": "error"}

#: ``cn``'s own message when a call lacks a required argument (it replaces unparseable JSON by ``{}``).
MISSING_PARAM = re.compile(r'Required parameter "[^"]*" missing for tool')
#: ``cn``'s Bash failure text: ``Error executing tool Bash: Error (exit code 3): ...``.
EXIT_CODE = re.compile(r"\(exit code (-?\d{1,4})\)")
#: Backend answers that mean "this model cannot take tools" (Ollama, vLLM, llama.cpp phrasings).
TOOLS_UNSUPPORTED = re.compile(r"(does not|doesn't|do not) support tools|tools? (is|are) not supported"
                               r"|not support(ed)? (function|tool)", re.I)
LOG_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}) \[[^\]]*\] \[(\w+)\]: (.*)$")
STREAM_START = "Creating chat completion stream"
STREAM_CHUNK = "Received chunk"
STREAM_DONE = "Stream complete "
#: cn's own retry loop (up to 11 attempts of one request): the failed attempt is not a response.
STREAM_RETRY = "Retry attempt"
STATE_UPDATE = "Updated tool call state "
#: Offsets are whole quarter hours; a calibration further off than this is not a time zone.
MAX_OFFSET = timedelta(hours=14)


# --------------------------------------------------------------------------------------------- log


@dataclass(frozen=True)
class LogMark:
    """One timed log line: when (ISO UTC), where (1-based line) and its JSON metadata."""

    timestamp: str
    line: int
    data: dict[str, Any]


@dataclass
class StreamMarks:
    """One model request as the log saw it: started, last chunk received, completed (any may be None).

    ``cn`` exits without flushing its log, so the last stream of a run usually lacks its completion.
    """

    start: LogMark | None = None
    last_chunk: LogMark | None = None
    done: LogMark | None = None
    response_id: str | None = None
    """The stream's ``id`` (``chatcmpl-…``) from its first logged chunk: what tier A calls it too."""
    reasoning: list[str] = field(default_factory=list)
    """The ``reasoning_content`` pieces of its logged chunks (cn keeps the reply's reasoning nowhere else)."""

    @property
    def thought(self) -> str | None:
        """The stream's whole reasoning, when the log has the stream complete (a cut log would cut it too)."""
        said = "".join(self.reasoning).strip()
        return said if said and self.done is not None else None

    @property
    def timestamp(self) -> str | None:
        """When the response was complete, else the last moment the log shows it arriving, else None
        (the request's start is not a time of the response)."""
        best = self.done or self.last_chunk
        return best.timestamp if best else None

    @property
    def duration_ms(self) -> float | None:
        return number(self.done.data.get("duration"), minimum=0) if self.done else None


@dataclass
class LogTimeline:
    """What the verbose log says about timing: model streams in order, tool call states by id."""

    streams: list[StreamMarks] = field(default_factory=list)
    states: dict[str, list[tuple[str, LogMark]]] = field(default_factory=dict)

    def state(self, call_id: str | None, statuses: tuple[str, ...]) -> LogMark | None:
        """The first mark of ``call_id`` reaching one of ``statuses``."""
        for status, mark in self.states.get(call_id or "", []):
            if status in statuses:
                return mark
        return None


def parse_log(data: bytes, *, anchor: str | None = None) -> LogTimeline:
    """The timeline in ``cn.log`` bytes. Never raises.

    Log times are naive local times of the agent. ``anchor`` (ISO UTC, e.g. the process start) fixes
    the offset: the first log line is written within seconds of it, so the offset is the difference
    rounded to a quarter hour. Without an anchor, the parser's own local zone is assumed.
    """
    timeline = LogTimeline()
    try:
        decoded = data.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - bytes always decode with "replace"; belt and braces
        return timeline
    offset: timedelta | None = None
    for lineno, line in enumerate(decoded.splitlines(), start=1):
        m = LOG_LINE.match(line)
        if not m:
            continue
        try:
            naive = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f")
        except ValueError:
            continue
        if offset is None:
            offset = _offset(naive, anchor)
        message = m[3]
        if message.startswith(STREAM_START):
            timeline.streams.append(StreamMarks(start=LogMark(_utc_iso(naive, offset), lineno, {})))
        elif message.startswith(STREAM_CHUNK) and timeline.streams:
            stream = timeline.streams[-1]
            stream.last_chunk = LogMark(_utc_iso(naive, offset), lineno, {})
            chunk = _json_object(message[len(STREAM_CHUNK):]).get("chunk")
            if stream.response_id is None:
                stream.response_id = text(chunk.get("id")) if isinstance(chunk, dict) else None
            piece = _reasoning_piece(chunk)
            if piece:
                stream.reasoning.append(piece)
        elif message.startswith(STREAM_RETRY) and timeline.streams and timeline.streams[-1].done is None:
            timeline.streams.pop()
        elif message.startswith(STREAM_DONE):
            meta = _json_object(message[len(STREAM_DONE):])
            if not timeline.streams or timeline.streams[-1].done is not None:
                timeline.streams.append(StreamMarks())
            timeline.streams[-1].done = LogMark(_utc_iso(naive, offset), lineno, meta)
        elif message.startswith(STATE_UPDATE):
            meta = _json_object(message[len(STATE_UPDATE):])
            call_id, updates = meta.get("toolCallId"), meta.get("updates")
            status = updates.get("status") if isinstance(updates, dict) else None
            if isinstance(call_id, str) and isinstance(status, str):
                timeline.states.setdefault(call_id, []).append((status, LogMark(_utc_iso(naive, offset), lineno, meta)))
    return timeline


def _offset(first_local: datetime, anchor: str | None) -> timedelta:
    """Local minus UTC for the agent's clock (see :func:`parse_log`)."""
    anchor_dt = _parse_iso(anchor)
    if anchor_dt is not None:
        diff = first_local - anchor_dt.astimezone(timezone.utc).replace(tzinfo=None)
        quarters = round(diff.total_seconds() / 900)
        calibrated = timedelta(minutes=15 * quarters)
        if abs(calibrated) <= MAX_OFFSET:
            return calibrated
    try:
        local = first_local.astimezone()  # naive → the parser's local zone
        return local.utcoffset() or timedelta(0)
    except (OverflowError, OSError, ValueError):
        return timedelta(0)


def _utc_iso(naive_local: datetime, offset: timedelta | None) -> str:
    moment = naive_local - (offset or timedelta(0))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _parse_iso(value: str | None) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _ms_between(start: str | None, end: str | None) -> float | None:
    a, b = _parse_iso(start), _parse_iso(end)
    if a is None or b is None:
        return None
    ms = (b - a).total_seconds() * 1000
    return ms if ms >= 0 else None


# ----------------------------------------------------------------------------------------- session


def load_session(data: bytes) -> dict[str, Any] | None:
    """The session object if ``data`` is one (a JSON object with a ``history`` list), else None."""
    try:
        obj = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("history"), list):
        return obj
    return None


def final_text(session: dict[str, Any] | None) -> str | None:
    """The content of the last assistant message that has text, or None."""
    if not isinstance(session, dict) or not isinstance(session.get("history"), list):
        return None
    for item in reversed(session["history"]):
        message = item.get("message") if isinstance(item, dict) else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = _content_text(message.get("content"))
            if content.strip():
                return content
    return None


class _Locator:
    """Finds 1-based line numbers of needles in the session text, moving forward like the parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def find(self, needle: str, *, advance: bool = True, start: int | None = None) -> int | None:
        at = self.text.find(needle, self.pos if start is None else start)
        if at < 0:
            return None
        if advance:
            self.pos = at + len(needle)
        return self.text.count("\n", 0, at) + 1


def session_events(session: dict[str, Any], *, phase: str, file_name: str, file_text: str = "",
                   timeline: LogTimeline | None = None, excluded: tuple[str, ...] = ()) -> list[Event]:
    """Tier-B events of one session object. ``file_text`` (the session file's text) gives the line numbers;
    ``excluded``: the tools the driver's ``--exclude`` flags denied (they name the rule of a refusal)."""
    builder = EventBuilder(phase, file_name)
    timeline = timeline or LogTimeline()
    locate = _Locator(file_text)
    history = session.get("history") if isinstance(session, dict) else None
    turn = 0
    for item in history if isinstance(history, list) else []:
        message = item.get("message") if isinstance(item, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        line = locate.find('"role": "assistant"') or 1
        msg_pos = locate.pos
        mark = timeline.streams[turn] if turn < len(timeline.streams) else None
        turn += 1
        calls = [c for c in message.get("toolCalls") or [] if isinstance(c, dict)] \
            if isinstance(message.get("toolCalls"), list) else []
        response = builder.add(
            line, event_type="model_response", status="success", response_id=mark.response_id if mark else None,
            timestamp=mark.timestamp if mark else None,
            latency_ms=mark.duration_ms if mark else None,
            payload=_drop_none({"turn": turn, "text": _content_text(message.get("content"))[:TEXT_LIMIT],
                                "tool_call_count": len(calls), "usage": _usage(message.get("usage"))}))
        parent = response.event_id if response else None
        if mark is not None and mark.thought:
            builder.add(line, event_type="thought", status="success", response_id=mark.response_id,
                        timestamp=mark.timestamp, parent_id=parent, payload={"text": mark.thought[:TEXT_LIMIT]})
        names: dict[str, str | None] = {}
        for call in calls:
            call_id = text(call.get("id"))
            fn = mapping(call.get("function"))
            raw_name = text(fn.get("name"))
            names[call_id or ""] = raw_name
            name, kind = TOOL_NAMES.normalize(raw_name)
            started = timeline.state(call_id, ("calling",))
            call_line = (locate.find(f'"id": {_jq(call_id)}', advance=False, start=msg_pos) if call_id else None)
            builder.add(call_line or line, event_type="tool_call_start", tool_call_id=call_id, parent_id=parent,
                        status="started", timestamp=started.timestamp if started else (mark.timestamp if mark else None),
                        payload={"raw_name": raw_name, "name": name, "kind": kind,
                                 "arguments": _arguments(fn.get("arguments"))})
        states = item.get("toolCallStates")
        for state in states if isinstance(states, list) else []:
            if isinstance(state, dict):
                _add_result(builder, locate, timeline, state, names, parent, line, msg_pos, excluded)
    return builder.events


def _add_result(builder: EventBuilder, locate: _Locator, timeline: LogTimeline, state: dict[str, Any],
                names: dict[str, str | None], parent: str | None, line: int, msg_pos: int,
                excluded: tuple[str, ...] = ()) -> None:
    status = RESULT_STATUS.get(text(state.get("status")) or "")
    if status is None:
        return  # generated / calling: the call never finished (the run was cut short)
    call_id = text(state.get("toolCallId"))
    call = mapping(state.get("toolCall"))
    fn = mapping(call.get("function"))
    raw_name = names.get(call_id or "") or text(fn.get("name"))
    name, kind = TOOL_NAMES.normalize(raw_name)
    output = _output_text(state.get("output"))
    exit_code, error_type = None, None
    if kind == "execute" and status == "success":
        exit_code = 0  # cn reports every non-zero exit as errored "(exit code N)"
    if status == "error":
        m = EXIT_CODE.search(output)
        exit_code = int(m[1]) if m and kind == "execute" else None
        if MISSING_PARAM.search(output):
            error_type = "invalid_arguments"
        elif state.get("status") == "canceled":
            error_type = "tool_canceled"
    finished = timeline.state(call_id, (text(state.get("status")) or "",))
    started = timeline.state(call_id, ("calling",))
    result_line = locate.find(f'"toolCallId": {_jq(call_id)}', advance=False, start=msg_pos) if call_id else None
    if state.get("status") == "canceled" and output.strip() == BLOCKED_OUTPUT:
        # cn's permissions refused the call before it ran: the native request and its denial
        request = PermissionRequest(request_id=f"native-{call_id or len(builder.events) + 1}", tool_call_id=call_id,
                                    raw_name=raw_name, name=name or None, kind=kind, input=state.get("parsedArgs"))
        permission_events(builder, result_line or line, request,
                          PermissionDecision("deny", blocked_rule(raw_name, excluded)), decided_by="native",
                          timestamp=finished.timestamp if finished else None)
    builder.add(result_line or line, event_type="tool_call_result", tool_call_id=call_id, parent_id=parent,
                status=status, exit_code=exit_code, error_type=error_type,
                timestamp=finished.timestamp if finished else None,
                latency_ms=_ms_between(started.timestamp if started else None,
                                       finished.timestamp if finished else None),
                payload={"raw_name": raw_name, "name": name, "kind": kind,
                         "arguments": state.get("parsedArgs"), "output": output[:OUTPUT_LIMIT]})


# ------------------------------------------------------------------------------------------ stderr


def stderr_events(data: bytes, *, phase: str, file_name: str, first_sequence: int = 1) -> list[Event]:
    """Error ``model_response`` events from ``cn -p``'s ``{"status":"error","message":...}`` lines."""
    builder = EventBuilder(phase, file_name, first=first_sequence)
    for lineno, raw in enumerate(data.splitlines(), start=1):
        obj = _json_object(raw.decode("utf-8", "replace").strip())
        message = obj.get("message")
        if obj.get("status") != "error" or not isinstance(message, str):
            continue
        m = re.match(r"(\d{3})\b", message)
        error_type = "backend_tool_unsupported" if TOOLS_UNSUPPORTED.search(message) else "agent_error"
        builder.add(lineno, event_type="model_response", status="error", error_type=error_type,
                    payload=_drop_none({"error": message[:TEXT_LIMIT], "http_status": int(m[1]) if m else None}))
    return builder.events


# ----------------------------------------------------------------------------------------- helpers


def _reasoning_piece(chunk: Any) -> str | None:
    """A streamed chunk's ``choices[0].delta.reasoning_content``, if any."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    first: dict[str, Any] = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    raw_delta = first.get("delta")
    delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
    piece = delta.get("reasoning_content")
    return piece if isinstance(piece, str) and piece else None


def _json_object(raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _jq(value: str | None) -> str:
    """A string as JSON.stringify writes it (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def _arguments(value: Any) -> Any:
    """Arguments as an object when they are JSON text, else as given."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _parts_text(value: Any, key: str, sep: str) -> str:
    """``value`` as text: a string as is, or the ``key`` strings of a list of parts joined by ``sep``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return sep.join(p[key] for p in value if isinstance(p, dict) and isinstance(p.get(key), str))
    return ""


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    return _parts_text(content, "text", "")


def _output_text(output: Any) -> str:
    """A tool call state's output as text: a string, or its ``content`` parts, one per line."""
    return _parts_text(output, "content", "\n")


def _usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    out = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")
           if isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool)}
    return out or None


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------------------------------- redaction

#: ``"apiKey":"…"``-style JSON members in log lines (cn logs the whole model config at debug level).
SECRET_MEMBER = re.compile(
    r'("[^"\\]*(?:api[_-]?key|authorization|token|secret|password|bearer|cookie|credential)[^"\\]*"\s*:\s*)'
    r'"(?:[^"\\]|\\.)*"', re.I)
REDACTED = "[REDACTED]"


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with secret-named JSON string members and every known secret replaced by ``[REDACTED]``."""
    for secret in sorted((s for s in secrets if isinstance(s, str) and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return SECRET_MEMBER.sub(lambda m: f'{m[1]}"{REDACTED}"', text)

"""pi's outputs → normalized tier B events.

Two sources with the same message objects, one answer (never both: their events would count twice):

1. **The session file** ``<agent dir>/sessions/<ISO time>_<uuid>.jsonl`` (``--session-dir``; kept by the
   runner as the phase artifact ``session.jsonl``), one JSON object a line: a ``session`` header
   ``{version: 3, id, timestamp, cwd}``, then entries ``{type, id, parentId, timestamp}``: ``model_change``,
   ``thinking_level_change`` and ``message`` entries whose ``message`` is one of

   - ``{role: "user", content}``;
   - ``{role: "assistant", content: [text | thinking | toolCall{id, name, arguments}], api, provider,
     model, usage{input, output, cacheRead, cacheWrite, totalTokens, cost}, stopReason (stop | length |
     toolUse | error | aborted), errorMessage?, responseId?, timestamp (ms)}``: one model response, kept
     even when it failed (one entry per attempt, ``stopReason: error``);
   - ``{role: "toolResult", toolCallId, toolName, content: [text], isError, timestamp (ms)}``.

   pi writes the file only once the session holds an assistant message: a phase whose model never
   answered (a stall) leaves none.
2. **The ``--mode json`` event stream** on stdout (``session`` header, then ``agent_start``,
   ``turn_start``, ``message_start`` / ``message_update`` / ``message_end``, ``tool_execution_*``,
   ``turn_end``, ``agent_end``, ``auto_retry_*``). Its ``message_end`` events carry the same message
   objects; they are read only when there is no session file (the driver runs ``-p``, whose stdout is the
   final answer as text, so this is for a spec that adds ``--mode json``).

Events:

- an assistant message → ``model_response`` (``response_id`` = pi's ``responseId``, the backend's
  completion id; ``status`` error for ``stopReason`` error/aborted, with ``error_type`` from
  :func:`error_type_for`), then one ``tool_call_start`` per ``toolCall`` block (the model's call id,
  arguments as pi parsed them; ``parent_id`` the response);
- a ``thinking`` block of an assistant message (pi keeps the reply's ``reasoning_content`` so) → ``thought``
  (payload ``{text}``, parent the response);
- a ``toolResult`` message → ``tool_call_result`` (success unless ``isError``; ``exit_code`` from bash's
  ``Command exited with code N``; ``latency_ms`` from the session entries' times: from the assistant
  message's entry, written when its stream ended, to the result's entry).

pi's streaming JSON parser completes arguments cut short (a missing closing brace), and both files keep
only the parsed object: a malformed call on the wire shows here as a well-formed one. Nothing here
raises on bad bytes: a line that does not parse, or has an unexpected shape, is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, json_lines, mapping, number,
    permission_events, text,
)

from .names import TOOL_NAMES

#: Longest tool output kept in an event payload.
OUTPUT_LIMIT = 4000
#: Text of a backend refusing tools (Ollama's HTTP 400, which the proxy also recognizes).
UNSUPPORTED_MARKER = "does not support tools"
#: Latest epoch milliseconds taken as a time (2255-03-14, as the core's exporters).
LATEST_MS = 9_000_000_000_000

_EXIT = re.compile(r"Command exited with code (-?\d{1,9})\s*$")
#: pi's answer to a call of a tool it did not load (its allowlist left it out).
_NOT_FOUND = re.compile(r"^Tool (\S+) not found\s*$")
_HTTP = re.compile(r"^\s*(\d{3})\b")
_ERROR_KINDS = (("connection error", "connection_error"), ("timed out", "timeout"), ("aborted", "aborted"))


def iso_from_ms(value: Any) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds, or None."""
    ms = number(value, minimum=0)
    if ms is None or ms >= LATEST_MS:
        return None
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def seconds_of(value: Any) -> float | None:
    """Epoch seconds of an ISO-8601 timestamp string, or None."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def error_type_for(message: str | None, stop_reason: str | None = None) -> str:
    """``error_type`` of a failed model response from pi's ``errorMessage`` (the OpenAI client's
    ``"<status> <message>"``, ``Connection error.``, ``Request timed out.`` …)."""
    if stop_reason == "aborted":
        return "aborted"
    msg = message or ""
    if UNSUPPORTED_MARKER in msg:
        return "backend_tool_unsupported"
    status = _HTTP.match(msg)
    if status:
        return f"http_{status.group(1)}"
    lowered = msg.lower()
    for marker, kind in _ERROR_KINDS:
        if marker in lowered:
            return kind
    return "agent_error"


def content_text(content: Any, kind: str = "text") -> str:
    """The text of a message's content blocks of ``kind`` (a plain string counts as text)."""
    if isinstance(content, str):
        return content if kind == "text" else ""
    if not isinstance(content, list):
        return ""
    return "".join(b[kind] for b in content if isinstance(b, dict) and b.get("type") == kind and isinstance(b.get(kind), str))


def _clip(value: str | None) -> str | None:
    if value is None or len(value) <= OUTPUT_LIMIT:
        return value
    return value[:OUTPUT_LIMIT] + f"… [{len(value) - OUTPUT_LIMIT} more characters]"


def _tool(raw_name: str | None) -> dict[str, Any]:
    name, kind = TOOL_NAMES.normalize(raw_name)
    return {"raw_name": raw_name, "name": name or None, "kind": kind}


@dataclass
class _Start:
    event: Event
    entry_s: float | None


@dataclass
class PiParse:
    """What one source said: the events, the final answer, and whether any line was pi's."""

    events: list[Event]
    final_text: str | None
    recognized: bool
    source: str
    """``session`` or ``stdout``: which output the events came from."""


class _Parser:
    #: Line types that are pi's (a session file's entries, the event stream's events).
    KNOWN = frozenset({"session", "message", "model_change", "thinking_level_change", "compaction", "custom",
                       "custom_message", "label", "session_info", "branch_summary", "agent_start", "agent_end",
                       "turn_start", "turn_end", "message_start", "message_update", "message_end",
                       "tool_execution_start", "tool_execution_update", "tool_execution_end", "auto_retry_start",
                       "auto_retry_end", "compaction_start", "compaction_end", "queue_update"})

    def __init__(self, phase: str, artifact: str, message_type: str, denied: Mapping[str, str] | None = None) -> None:
        self.out = EventBuilder(phase, artifact)
        self.denied: dict[str, str] = dict(denied or {})
        self.message_type = message_type
        self.starts: dict[str, _Start] = {}
        self.final_text: str | None = None
        self.recognized = False

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if isinstance(kind, str) and kind in self.KNOWN:
            self.recognized = True
        if kind != self.message_type:
            return
        message = mapping(obj.get("message"))
        entry_ts = text(obj.get("timestamp"))
        role = message.get("role")
        if role == "assistant":
            self.assistant(lineno, message, entry_ts)
        elif role == "toolResult":
            self.tool_result(lineno, message, entry_ts)

    def assistant(self, lineno: int, message: dict[str, Any], entry_ts: str | None) -> None:
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        calls = [b for b in blocks if b.get("type") == "toolCall"]
        answer = content_text(content)
        stop = text(message.get("stopReason"))
        error = text(message.get("errorMessage"))
        failed = stop in ("error", "aborted")
        usage = message.get("usage")
        response = self.out.add(
            lineno, event_type="model_response", response_id=text(message.get("responseId")) or None,
            timestamp=iso_from_ms(message.get("timestamp")) or entry_ts, status="error" if failed else "success",
            error_type=error_type_for(error, stop) if failed else None,
            payload={"text": answer or None, "tool_call_count": len(calls), "stop_reason": stop,
                     "usage": usage if isinstance(usage, dict) else None, "model": text(message.get("model")),
                     "provider": text(message.get("provider")), "api": text(message.get("api")), "error": error,
                     "thinking": content_text(content, "thinking") or None})
        self.final_text = answer or None
        for block in blocks:  # the reply's reasoning (pi keeps reasoning_content as thinking blocks)
            said = block.get("thinking") if block.get("type") == "thinking" else None
            if isinstance(said, str) and said.strip():
                self.out.add(lineno, event_type="thought", timestamp=iso_from_ms(message.get("timestamp")) or entry_ts,
                             status="success", response_id=response.response_id if response else None,
                             parent_id=response.event_id if response else None, payload={"text": _clip(said.strip())})
        for call in calls:
            call_id = text(call.get("id")) or None
            start = self.out.add(
                lineno, event_type="tool_call_start", tool_call_id=call_id, timestamp=entry_ts, status="started",
                response_id=response.response_id if response else None,
                parent_id=response.event_id if response else None,
                payload={**_tool(text(call.get("name"))), "arguments": call.get("arguments")})
            if start is not None and call_id:
                self.starts.setdefault(call_id, _Start(start, seconds_of(entry_ts)))

    def tool_result(self, lineno: int, message: dict[str, Any], entry_ts: str | None) -> None:
        call_id = text(message.get("toolCallId")) or None
        start = self.starts.get(call_id) if call_id else None
        output = content_text(message.get("content"))
        failed = message.get("isError") is True
        code = _EXIT.search(output)
        exit_code = int(code.group(1)) if code else None
        latency = None
        done_s = seconds_of(entry_ts)
        if start is not None and start.entry_s is not None and done_s is not None and done_s >= start.entry_s:
            latency = (done_s - start.entry_s) * 1000
        raw_name = text(message.get("toolName")) or (start.event.payload.get("raw_name") if start else None)
        ts = entry_ts or iso_from_ms(message.get("timestamp"))
        refused = _NOT_FOUND.match(output)
        if failed and refused and raw_name and refused.group(1) == raw_name and raw_name in self.denied:
            # a tool the driver's allowlist left out, called anyway: pi's own settings refused it
            tool = _tool(raw_name)
            request = PermissionRequest(
                request_id=f"native-{call_id or len(self.out.events) + 1}", tool_call_id=call_id, raw_name=raw_name,
                name=tool.get("name"), kind=tool.get("kind"),
                input=start.event.payload.get("arguments") if start is not None else None)
            permission_events(self.out, lineno, request, PermissionDecision("deny", self.denied[raw_name]),
                              decided_by="native", timestamp=ts)
        self.out.add(lineno, event_type="tool_call_result", tool_call_id=call_id,
                     timestamp=entry_ts or iso_from_ms(message.get("timestamp")),
                     status="error" if failed else "success", exit_code=exit_code, latency_ms=latency,
                     error_type="tool_error" if failed else None,
                     response_id=start.event.response_id if start else None,
                     parent_id=start.event.parent_id if start else None,
                     payload={**_tool(raw_name), "output": _clip(output)})


def _parse(data: bytes, phase: str, artifact: str, message_type: str, source: str,
           denied: Mapping[str, str] | None = None) -> PiParse:
    parser = _Parser(phase, artifact, message_type, denied)
    for lineno, obj in json_lines(data):
        try:
            parser.feed(lineno, obj)
        except Exception:  # an odd line costs its own events, never the phase's
            continue
    return PiParse(parser.out.events, parser.final_text, parser.recognized, source)


def parse_session_bytes(data: bytes, phase: str, artifact: str, denied: Mapping[str, str] | None = None) -> PiParse:
    """Events of a session file's bytes (see the module docstring). Never raises."""
    return _parse(data, phase, artifact, "message", "session", denied)


def parse_stream_bytes(data: bytes, phase: str, artifact: str, denied: Mapping[str, str] | None = None) -> PiParse:
    """Events of a ``--mode json`` event stream's bytes (see the module docstring). Never raises."""
    return _parse(data, phase, artifact, "message_end", "stdout", denied)


def stdout_answer(data: bytes) -> str | None:
    """``-p``'s stdout: the final answer's text blocks, each followed by a newline; None when empty."""
    answer = data.decode("utf-8", "replace")
    answer = answer[:-1] if answer.endswith("\n") else answer
    return answer if answer.strip() else None


def parse_outputs(stdout: bytes, session: bytes | None, phase: str, *, stdout_name: str = "stdout",
                  session_name: str = "session.jsonl", denied: Mapping[str, str] | None = None) -> PiParse:
    """Events from the session file when it is pi's, else from a ``--mode json`` stdout, else none.

    The final answer is the last assistant message's text (None when it has none: a failed request),
    from the same source; without either, ``-p``'s stdout (the same text). ``denied``: the tools the
    driver's allowlist left out for the case's interaction policy (name → the rule naming that setting):
    a call to one, answered ``Tool <name> not found``, gets a native ``permission_request`` +
    ``permission_response`` (deny) before its error result."""
    if session is not None:
        got = parse_session_bytes(session, phase, session_name, denied)
        if got.recognized:
            return got
    stream = parse_stream_bytes(stdout, phase, stdout_name, denied)
    if stream.recognized:
        return stream
    return PiParse([], stdout_answer(stdout), False, "none")

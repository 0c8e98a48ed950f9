"""Claude Code's outputs → normalized tier B events.

Two sources, one answer (never both: their events would count twice):

1. **``--output-format stream-json`` stdout** (with ``--verbose``), one JSON object a line. Preferred: it is
   what the agent itself reports, as it happens.

   - ``{"type": "system", "subtype": "init"}``: session id, model, tools (no event);
   - ``{"type": "assistant", "message": {...}}``: Claude Code prints **one line per content block**, each
     carrying the whole message's ``id`` (the wire's ``msg_…`` id), ``model`` and ``usage``. Lines of one
     message id make one ``model_response`` (its text, the number of calls it asked for, usage, timed by
     its first line), placed before its calls; a ``tool_use`` block ``{id, name, input}`` is a
     ``tool_call_start`` with the model's call id (the id on the wire) and the response as its parent.
     ``input`` ``{"__unparsedToolInput": {"raw": …}}`` is Claude Code's word for arguments that were not
     JSON: the raw text is kept as the arguments with ``error_type: malformed_arguments``;
   - an assistant line with ``is_api_error_message`` (model ``<synthetic>``) is not the model's: it is the
     text Claude Code shows after a request failed for good → an error ``model_response`` (``error_type``
     ``http_<status>``, or ``backend_tool_unsupported`` when the backend said it does not support tools);
   - ``{"type": "system", "subtype": "api_retry"}``: a failed request Claude Code retries → an error
     ``model_response`` too (so each failed request is one event);
   - ``{"type": "user", "message": {"content": [{"type": "tool_result", …}]}}`` → ``tool_call_result``
     (``is_error`` → error; Bash's ``Exit code N`` → ``exit_code``, a Bash result that is no error → 0);
   - ``{"type": "result"}``: the final answer (``result``), the run's usage; several ``result`` lines
     appear when a background agent finishes after the main turn: the last one with text wins;
   - ``thinking`` content blocks (``{"type": "thinking", "thinking": …, "signature": …}``, one line each
     like any block) → ``thought`` events (payload ``text``) whose parent is their message's
     ``model_response``; ``redacted_thinking`` → a ``thought`` without text (``redacted: true``);
   - **permissions.** In a session (:mod:`gripprobe_claude.session`) every question Claude Code asks is a
     ``control_request`` ``can_use_tool`` line on stdout: at that line come the ``permission_request``
     and ``permission_response`` events, their contents read from the harness's own record of the session
     (``conversation`` — what was asked, what the policy answered and by which rule, never Claude Code's
     word); with no record, the request stands alone, and one Claude Code withdrew
     (``control_cancel_request``) is answered ``cancelled``. A call Claude Code's own settings refused (a
     ``system`` ``permission_denied`` line, or a ``permission_denials`` entry of the ``result`` line that
     no answer covers — print mode's ``dontAsk``, a deny rule) is a pair ``decided_by: native``.

2. **The session transcript** ``~/.claude/projects/<cwd slug>/<session id>.jsonl`` (kept as the phase
   artifact ``session.jsonl``), used only when stdout holds no Claude Code event (the agent was killed
   before printing, stdout was lost). Its ``assistant`` / ``user`` lines are the same messages (spelled
   ``isApiErrorMessage`` / ``apiErrorStatus``, ``toolUseResult``), failed requests are ``system``
   ``api_error`` lines; the last assistant text is the final answer.

Sub-agents (the ``Agent`` tool) keep their own transcripts (``<session>/subagents/``) and do not print
their calls on stdout: only the main conversation's calls are reported. Names go through
:data:`TOOL_NAMES`. Nothing here raises on bad bytes: a line that does not parse, or has an unexpected
shape, is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, json_lines, mapping, permission_events,
    text,
)

from .control import Conversation, is_permission_question, permission_requests, read_conversation
from .names import TOOL_NAMES

#: Longest text kept in an event payload.
OUTPUT_LIMIT = 4000
#: Text of a backend refusing tools (Ollama's HTTP 400, which the proxy also recognizes).
UNSUPPORTED_MARKER = "does not support tools"
#: The key Claude Code puts in a tool call's input when the arguments were not JSON.
UNPARSED_INPUT = "__unparsedToolInput"
#: The tool whose result text starts with ``Exit code N`` when the command failed.
SHELL_TOOLS = frozenset({"Bash"})

_EXIT = re.compile(r"^(?:Error: )?Exit code (-?\d{1,9})\b")


def _clip(value: str | None) -> str | None:
    if value is None or len(value) <= OUTPUT_LIMIT:
        return value
    return value[:OUTPUT_LIMIT] + f"… [{len(value) - OUTPUT_LIMIT} more characters]"


def _tool(raw_name: str | None) -> dict[str, Any]:
    name, kind = TOOL_NAMES.normalize(raw_name)
    return {"raw_name": raw_name, "name": name or None, "kind": kind}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def blocks_text(content: Any) -> str:
    """The text of a message's content: a string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type", "text") == "text"
                   and isinstance(b.get("text"), str))


def _ms_between(start: str | None, end: str | None) -> float | None:
    """Milliseconds from one ISO timestamp to a later one (None when either does not parse)."""
    if not start or not end:
        return None
    try:
        delta = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                 - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds() * 1000
    except (ValueError, TypeError, OverflowError):
        return None
    return delta if delta >= 0 else None


def tool_arguments(value: Any) -> tuple[Any, bool]:
    """A ``tool_use`` block's input as event arguments: ``(arguments, malformed)``."""
    if isinstance(value, dict) and UNPARSED_INPUT in value:
        raw = mapping(value.get(UNPARSED_INPUT)).get("raw")
        return (raw if isinstance(raw, str) else value.get(UNPARSED_INPUT)), True
    if isinstance(value, str):  # a backend that sent the input as a string (a malformed call)
        return value, True
    return value, False


def result_status(raw_name: str | None, is_error: Any, output: str | None) -> tuple[str, int | None]:
    """``(status, exit_code)`` of a tool result."""
    failed = is_error is True
    match = _EXIT.match(output or "")
    if match:
        code = int(match.group(1))
        return ("error" if failed or code != 0 else "success"), code
    if raw_name in SHELL_TOOLS and not failed:
        return "success", 0
    return ("error" if failed else "success"), None


def error_type_for(status: Any, message: str | None) -> str:
    """``error_type`` of a request Claude Code gave up on (or retries)."""
    if message and UNSUPPORTED_MARKER in message:
        return "backend_tool_unsupported"
    code = _int(status)
    if code is not None and 100 <= code <= 599:
        return f"http_{code}"
    return "connection_error" if message and "connection" in message.lower() else "api_error"


# ---------------------------------------------------------------------------------------- the parser

@dataclass
class _Response:
    """One model message's lines (Claude Code prints one line per content block)."""

    event: Event
    texts: list[str] = field(default_factory=list)
    calls: int = 0


@dataclass
class ClaudeParse:
    """The phase's events from one source, the final answer, and what the source said about itself."""

    events: list[Event]
    final_text: str | None
    source: str
    """``stream-json`` (stdout) or ``transcript``."""
    recognized: bool = False
    """Whether any line was Claude Code's (an empty or foreign file is not)."""
    session_id: str | None = None


class _Parser:
    def __init__(self, phase: str, artifact: str, conversation: Conversation | None = None) -> None:
        self.out = EventBuilder(phase, artifact)
        self.responses: dict[str, _Response] = {}
        self.starts: dict[str, Event] = {}
        self.final_text: str | None = None
        self.last_text: str | None = None
        self.recognized = False
        self.session_id: str | None = None
        self.conversation = conversation or Conversation()
        self.anchored: set[str] = set()
        """Claude Code's request ids whose permission events are placed."""
        self.answered: set[str] = set()
        """Tool call ids with a permission_response (or a request whose answer was not recorded)."""

    # ---------------------------------------------------------------------------------- lines

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind in ("system", "assistant", "user", "result"):
            self.recognized = self.recognized or isinstance(obj.get("message"), dict) or "subtype" in obj
        self.session_id = self.session_id or text(obj.get("session_id")) or text(obj.get("sessionId"))
        if obj.get("parent_tool_use_id") or obj.get("isSidechain") is True:
            return  # a sub-agent's message forwarded into the main stream: not the main conversation's call
        if kind == "assistant":
            self.assistant(lineno, obj)
        elif kind == "user":
            self.user(lineno, obj)
        elif kind == "system":
            self.system(lineno, obj)
        elif kind == "result":
            self.result(lineno, obj)
        elif kind == "control_request":
            self.control_request(lineno, obj)

    def assistant(self, lineno: int, obj: dict[str, Any]) -> None:
        message = mapping(obj.get("message"))
        ts = text(obj.get("timestamp"))
        if obj.get("is_api_error_message") is True or obj.get("isApiErrorMessage") is True:
            body = blocks_text(message.get("content"))
            status = obj.get("api_error_status", obj.get("apiErrorStatus"))
            self.out.add(lineno, event_type="model_response", timestamp=ts, status="error",
                         error_type=error_type_for(status, body),
                         payload={"error": _clip(body), "http_status": _int(status),
                                  "claude_error": text(obj.get("error"))})
            self.last_text = body or self.last_text
            return
        message_id = text(message.get("id")) or f"line-{lineno}"
        response = self.responses.get(message_id)
        if response is None:
            event = self.out.add(lineno, event_type="model_response", response_id=text(message.get("id")),
                                 timestamp=ts, status="success",
                                 payload={"text": None, "tool_call_count": 0, "model": text(message.get("model")),
                                          "usage": message.get("usage") if isinstance(message.get("usage"), dict)
                                          else None, "stop_reason": text(message.get("stop_reason"))})
            if event is None:
                return
            response = self.responses[message_id] = _Response(event)
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                response.texts.append(block["text"])
                response.event.payload["text"] = "".join(response.texts) or None
                self.last_text = block["text"] or self.last_text
            elif block.get("type") == "tool_use":
                self.tool_use(lineno, ts, block, response)
            elif block.get("type") in ("thinking", "redacted_thinking"):
                redacted = block.get("type") == "redacted_thinking"
                self.out.add(lineno, event_type="thought", timestamp=ts, status="success",
                             parent_id=response.event.event_id, response_id=response.event.response_id,
                             payload={"text": None if redacted else _clip(text(block.get("thinking"))),
                                      **({"redacted": True} if redacted else {})})
        stop = text(message.get("stop_reason"))
        if stop:
            response.event.payload["stop_reason"] = stop

    def tool_use(self, lineno: int, ts: str | None, block: dict[str, Any], response: _Response) -> None:
        call_id = text(block.get("id")) or None
        raw_name = text(block.get("name"))
        arguments, malformed = tool_arguments(block.get("input"))
        start = self.out.add(lineno, event_type="tool_call_start", tool_call_id=call_id, timestamp=ts,
                             status="started", parent_id=response.event.event_id,
                             response_id=response.event.response_id,
                             error_type="malformed_arguments" if malformed else None,
                             payload={**_tool(raw_name), "arguments": arguments})
        if start is None:
            return
        response.calls += 1
        response.event.payload["tool_call_count"] = response.calls
        if call_id:
            self.starts.setdefault(call_id, start)

    def user(self, lineno: int, obj: dict[str, Any]) -> None:
        content = mapping(obj.get("message")).get("content")
        if not isinstance(content, list):
            return
        ts = text(obj.get("timestamp"))
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = text(block.get("tool_use_id")) or None
            start = self.starts.get(call_id) if call_id else None
            raw_name = start.payload.get("raw_name") if start is not None else None
            output = blocks_text(block.get("content"))
            status, exit_code = result_status(raw_name, block.get("is_error", False), output)
            self.out.add(lineno, event_type="tool_call_result", tool_call_id=call_id, timestamp=ts, status=status,
                         exit_code=exit_code, error_type="tool_error" if status == "error" else None,
                         parent_id=start.parent_id if start is not None else None,
                         response_id=start.response_id if start is not None else None,
                         latency_ms=_ms_between(start.timestamp, ts) if start is not None else None,
                         payload={**_tool(raw_name), "output": _clip(output)})

    def system(self, lineno: int, obj: dict[str, Any]) -> None:
        subtype = obj.get("subtype")
        ts = text(obj.get("timestamp"))
        if subtype == "api_retry":  # stdout
            status = obj.get("error_status")
            self.out.add(lineno, event_type="model_response", timestamp=ts, status="error",
                         error_type=error_type_for(status, text(obj.get("error"))),
                         payload={"error": text(obj.get("error")), "http_status": _int(status), "retried": True,
                                  "attempt": _int(obj.get("attempt"))})
        elif subtype == "permission_denied":  # Claude Code's own settings refused a call (print mode: dontAsk)
            call_id = text(obj.get("tool_use_id")) or None
            self.native_denial(lineno, call_id, text(obj.get("tool_name")), None, text(obj.get("decision_reason_type")),
                               ts)
        elif subtype == "api_error":  # the transcript
            error = mapping(obj.get("error"))
            status = error.get("status")
            message = text(error.get("message")) or text(error.get("formatted"))
            self.out.add(lineno, event_type="model_response", timestamp=ts, status="error",
                         error_type=error_type_for(status, message),
                         payload={"error": _clip(message), "http_status": _int(status), "retried": True,
                                  "attempt": _int(obj.get("retryAttempt"))})

    def result(self, lineno: int, obj: dict[str, Any]) -> None:
        answer = text(obj.get("result"))
        if answer is not None and (answer or self.final_text is None):
            self.final_text = answer
        denials = obj.get("permission_denials")
        for denial in denials if isinstance(denials, list) else []:  # the authoritative list of refused calls
            d = mapping(denial)
            call_id = text(d.get("tool_use_id")) or None
            if call_id and call_id not in self.answered:
                self.native_denial(lineno, call_id, text(d.get("tool_name")), d.get("tool_input"), None,
                                   text(obj.get("timestamp")))

    # ------------------------------------------------------------------------------ permissions

    def control_request(self, lineno: int, obj: dict[str, Any]) -> None:
        """A ``can_use_tool`` question on stdout: its requests, and the harness's answers from the session
        transcript (a request with no recorded answer stands alone; one Claude Code withdrew is
        ``cancelled``)."""
        if not is_permission_question(obj):
            return
        rid = text(obj.get("request_id")) or ""
        recorded = self.conversation.decisions.get(rid)
        if recorded and rid not in self.anchored:
            self.anchored.add(rid)
            for item in recorded:
                self.permission_pair(lineno, item.request, item.decision, item.decided_by, item.ts)
            return
        call_id = text(mapping(obj.get("request")).get("tool_use_id")) or None
        for request in permission_requests(obj, TOOL_NAMES):
            if request.tool_call_id is None and call_id:
                request = _with_call(request, call_id)
            if rid in self.conversation.cancelled:
                self.permission_pair(lineno, request, PermissionDecision("deny", "native: withdrawn by Claude Code"),
                                     "native", None, outcome="cancelled")
            else:  # asked, but the answer is not on record (no session transcript): not Claude Code's own
                self.out.add(lineno, event_type="permission_request", tool_call_id=request.tool_call_id,
                             status="started", payload=request.as_payload())
                if request.tool_call_id:
                    self.answered.add(request.tool_call_id)

    def permission_pair(self, lineno: int | None, request: PermissionRequest, decision: PermissionDecision,
                        decided_by: str, ts: str | None, outcome: str | None = None) -> None:
        permission_events(self.out, lineno, request, decision, decided_by=decided_by, timestamp=ts)
        if outcome is not None and self.out.last is not None and self.out.last.event_type == "permission_response":
            self.out.last.payload["outcome"] = outcome
        if request.tool_call_id:
            self.answered.add(request.tool_call_id)

    def native_denial(self, lineno: int, call_id: str | None, raw_name: str | None, tool_input: Any,
                      reason_type: str | None, ts: str | None) -> None:
        """A call Claude Code's own settings refused, as a request/response pair ``decided_by: native``."""
        if call_id and call_id in self.answered:
            return
        start = self.starts.get(call_id) if call_id else None
        if tool_input is None and start is not None:
            tool_input = start.payload.get("arguments")
        name, kind = TOOL_NAMES.normalize(raw_name)
        request = PermissionRequest(request_id=f"native-{call_id or lineno}", tool_call_id=call_id, raw_name=raw_name,
                                    name=name or None, kind=kind, input=tool_input)
        self.permission_pair(lineno, request, PermissionDecision("deny", native_rule(reason_type)), "native", ts)

    def unanchored(self) -> None:
        """Recorded decisions whose question stdout does not show (its capture was cut): at the end."""
        for rid, item in self.conversation.all():
            if rid not in self.anchored:
                self.permission_pair(None, item.request, item.decision, item.decided_by, item.ts)


def _with_call(request: PermissionRequest, call_id: str) -> PermissionRequest:
    return PermissionRequest(request.request_id, call_id, request.raw_name, request.name, request.kind,
                             request.input, request.prompt, request.options)


#: How Claude Code names why its own settings refused a call (``decision_reason_type``) → the rule reported.
NATIVE_REASONS = {
    "mode": "native: --permission-mode dontAsk (a tool not in --allowedTools)",
    "rule": "native: a deny rule of Claude Code's settings",
    "hook": "native: a PreToolUse hook",
    "classifier": "native: Claude Code's auto-mode classifier",
}


def native_rule(reason_type: str | None) -> str:
    """The ``rule`` of a refusal by Claude Code's own settings."""
    if reason_type is None:
        return "native: refused by Claude Code's permission settings"
    return NATIVE_REASONS.get(reason_type, f"native: {reason_type}")


def _parse(data: bytes, phase: str, artifact: str, source: str, conversation: Conversation | None = None) -> ClaudeParse:
    parser = _Parser(phase, artifact, conversation)
    for lineno, obj in json_lines(data):
        try:
            parser.feed(lineno, obj)
        except Exception:  # an odd line costs its own events, never the phase's
            continue
    if parser.recognized:
        try:
            parser.unanchored()
        except Exception:
            pass
    final = parser.final_text
    if final is None and source == "transcript":
        final = parser.last_text
    return ClaudeParse(parser.out.events, final, source, parser.recognized, parser.session_id)


def parse_stream_bytes(data: bytes, phase: str, artifact: str, conversation: bytes | None = None) -> ClaudeParse:
    """Events of Claude Code's stream-json output (see the module docstring), with the decisions of the
    harness's session transcript ``conversation`` when there was a session. Never raises."""
    return _parse(data, phase, artifact, "stream-json",
                  read_conversation(conversation) if conversation is not None else None)


def parse_transcript_bytes(data: bytes, phase: str, artifact: str) -> ClaudeParse:
    """Events of a session transcript (see the module docstring). Never raises."""
    return _parse(data, phase, artifact, "transcript")


def parse_outputs(stdout: Path, transcript: Path | None, phase: str, conversation: Path | None = None) -> ClaudeParse:
    """Events from stdout when it holds Claude Code's events (with the decisions of the harness's session
    transcript ``conversation``), else from Claude Code's own session transcript.

    Raises ``OSError`` only when stdout cannot be read (the runner always captures it)."""
    recorded = None
    if conversation is not None:
        try:
            recorded = conversation.read_bytes()
        except OSError:
            recorded = None
    out = parse_stream_bytes(stdout.read_bytes(), phase, stdout.name, recorded)
    if out.recognized or transcript is None:
        return out
    try:
        got = parse_transcript_bytes(transcript.read_bytes(), phase, transcript.name)
    except OSError:
        return out
    return got if got.recognized else out

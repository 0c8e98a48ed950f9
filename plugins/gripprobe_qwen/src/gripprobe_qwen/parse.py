"""Tier B events from Qwen Code's chat log and its ``--output-format stream-json`` stdout.

**The chat log** ``$QWEN_HOME/projects/<project>/chats/<session id>.jsonl`` (kept as ``chat.jsonl``) is
preferred: one JSON record a line, each with ``timestamp``, ``type`` and ``uuid`` (0.24.4):

- ``assistant``: one model reply, ``message.parts[]`` with ``text`` (``thought: true`` for reasoning) and
  ``functionCall {id, name, args}`` (the model's call id, the one on the wire), ``usageMetadata``;
- ``tool_result``: ``message.parts[].functionResponse {id, name, response{output | error}}`` and
  ``toolCallResult {callId, status: success|error, errorType, executionStatus, resultDisplay}`` (a shell
  result's ``resultDisplay.exitCode``);
- ``system`` / ``ui_telemetry``: ``systemPayload.uiEvent`` named ``qwen-code.api_response`` (right
  before its ``assistant`` record: the wire's ``response_id``, ``duration_ms``, tokens),
  ``qwen-code.api_error`` (one per failed attempt: ``status_code``, ``error_message``, ``error_type``)
  and ``qwen-code.tool_call`` (per call: ``duration_ms``, ``status``, ``error_type``);
- ``user``, other ``system`` records (``attribution_snapshot`` …): skipped.

Each reply becomes a ``model_response`` (its ``response_id``, ``latency_ms`` = the API call's duration)
followed by a ``thought`` per reasoning part (``thought: true``; payload ``{text}``) and a
``tool_call_start`` per ``functionCall`` (parented to it); each ``functionResponse`` a
``tool_call_result`` (status from ``toolCallResult``, the tool's duration as latency, a shell call's exit
code). A call Qwen Code refused itself (``errorType: execution_denied``: its ``permissions.deny`` rules,
a hook, plan mode ...) gets a ``permission_request`` and a ``permission_response`` (outcome ``deny``,
``decided_by: native``, the rule named from "Matching deny rule: ..." when the message has one) right
before its result, which is an ``error`` with ``error_type: permission_denied``. A failed API attempt becomes an error ``model_response`` (``backend_tool_unsupported`` when the
backend says it "does not support tools", else ``http_<status>``).

**stdout** (``stream-json``: ``system``/``init``, ``assistant`` with ``content[]`` of ``text`` /
``thinking`` / ``tool_use {id, name, input}`` (the reasoning comes as an ``assistant`` message of its own
before the reply's: its ``thought`` events go with the next reply), ``user`` with ``tool_result
{tool_use_id, is_error, content}``, a closing ``result {subtype, is_error, result, error,
permission_denials[{tool_use_id, tool_name}]}``; no timestamps) is the fallback
when there is no chat log, and it fills in what the log lacks: a result for a call the log shows
without one (a call Qwen Code discarded when it retried the request: "Skipped because the provider
attempt was retried before execution") and the final answer (``result.result``). Lines of a
sub-agent (``parent_tool_use_id`` set) are left out: the main session's calls are what the oracle asked for.

Nothing here raises on bad input: lines that are not JSON objects, or records of an unknown shape,
are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, json_lines, mapping, number, text,
)

from .names import TOOL_NAMES

__all__ = ["QwenParse", "TOOL_NAMES", "error_type_for", "parse_chat_bytes", "parse_outputs", "parse_stdout_bytes"]

#: Output kept in an event payload, characters.
OUTPUT_LIMIT = 2000
#: The error text of a backend that cannot take tools (Ollama's, which the oracle imitates).
TOOLS_UNSUPPORTED = "does not support tools"
#: Qwen Code's ``errorType`` for a call whose streamed arguments it found cut off (it repairs the JSON,
#: then refuses to run the call): the model's arguments were not decodable as sent.
TRUNCATED_ERROR_TYPES = frozenset({"output_truncated"})
#: Qwen Code's ``errorType`` for a call it refused before running it (permission rules, hooks, plan mode).
DENIED_ERROR_TYPE = "execution_denied"
#: Its message for a call its ``permissions.deny`` rules refused (0.24.4), naming the rule.
DENIED_BY_RULE = re.compile(r'invocation was denied by permission rules\. Matching deny rule: "(?P<rule>[^"]*)"')
#: ``[API Error: 500 …]``: the text Qwen Code prints as a reply when the API call failed.
API_ERROR_TEXT = re.compile(r"^\[API Error: (?:(\d{3})\b)?")


def error_type_for(status_code: Any, message: str | None, fallback: str | None = None) -> str:
    """``backend_tool_unsupported`` / ``http_<status>`` / ``fallback`` / ``agent_error`` for a failed API call."""
    if message and TOOLS_UNSUPPORTED in message.lower():
        return "backend_tool_unsupported"
    if isinstance(status_code, int) and not isinstance(status_code, bool) and 100 <= status_code <= 599:
        return f"http_{status_code}"
    return fallback or "agent_error"


def _clip(value: str | None, limit: int = OUTPUT_LIMIT) -> str | None:
    if value is None:
        return None
    return value if len(value) <= limit else value[:limit] + f"… [{len(value) - limit} more characters]"


def _tool(raw_name: str | None) -> dict[str, Any]:
    name, kind = TOOL_NAMES.normalize(raw_name)
    return {"raw_name": raw_name, "name": name, "kind": kind}


def denial_rule(message: str | None) -> str:
    """The ``rule`` of a native denial: the ``permissions.deny`` rule Qwen Code names, else its message."""
    found = DENIED_BY_RULE.search(message or "")
    if found:
        return f"native: permissions.deny {found.group('rule')}"
    first = (message or "").strip().split("\n", 1)[0]
    return f"native: {_clip(first, 200)}" if first else "native: refused by Qwen Code"


def _denial(ref: str, call_id: str | None, tool: dict[str, Any], arguments: Any, message: str | None,
            timestamp: str | None = None) -> list["_Draft"]:
    """The ``permission_request`` / ``permission_response`` drafts of a call Qwen Code refused itself."""
    request = PermissionRequest(request_id=f"denied-{call_id or ref}", tool_call_id=call_id,
                                raw_name=tool.get("raw_name"), name=tool.get("name"), kind=tool.get("kind"),
                                input=arguments)
    decision = PermissionDecision("deny", denial_rule(message))
    return [_Draft({"event_type": "permission_request", "tool_call_id": call_id, "status": "started",
                    "timestamp": timestamp, "payload": request.as_payload()}, ref),
            _Draft({"event_type": "permission_response", "tool_call_id": call_id, "status": "success",
                    "timestamp": timestamp, "payload": decision.as_payload(request, "native")}, ref)]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class _Draft:
    """An event before numbering: its fields, where it was read, and the response it belongs to."""

    fields: dict[str, Any]
    ref: str
    parent: "_Draft | None" = None
    event: Event | None = None


@dataclass
class _Drafts:
    drafts: list[_Draft] = field(default_factory=list)

    def add(self, ref: str, **fields: Any) -> _Draft:
        draft = _Draft(fields, ref)
        self.drafts.append(draft)
        return draft

    def finish(self, phase: str, file_name: str) -> list[Event]:
        """Number the drafts in order (``<phase>-B-<n>``), parents first; an invalid one is dropped."""
        out = EventBuilder(phase, file_name)
        for draft in self.drafts:
            parent = draft.parent.event if draft.parent is not None else None
            extra = {"parent_id": parent.event_id} if parent is not None else {}
            draft.event = out.add(None, raw_artifact_ref=draft.ref, **draft.fields, **extra)
        return out.events


@dataclass
class QwenParse:
    """The phase's events, the agent's final answer, and where the events came from."""

    events: list[Event]
    final_text: str | None
    source: str
    """``chat`` (the chat log, completed from stdout) or ``stdout``."""


# --------------------------------------------------------------------------------------------- chat log

def _parts(record: dict[str, Any]) -> list[dict[str, Any]]:
    parts = mapping(record.get("message")).get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


class _ChatParser:
    def __init__(self, artifact: str) -> None:
        self.artifact = artifact
        self.out = _Drafts()
        self.starts: dict[str, _Draft] = {}
        self.results: set[str] = set()
        self.response: dict[str, Any] = {}
        """The last ``api_response`` telemetry not yet matched to its reply."""
        self.tool_calls: dict[str, dict[str, Any]] = {}
        self.final_text: str | None = None
        self.recognized = False

    def ref(self, lineno: int) -> str:
        return f"{self.artifact}:{lineno}"

    def feed(self, lineno: int, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind in ("user", "assistant", "tool_result", "system") and "sessionId" in record:
            self.recognized = True
        ts = text(record.get("timestamp"))
        if kind == "assistant":
            self.assistant(lineno, ts, record)
        elif kind == "tool_result":
            self.tool_result(lineno, ts, record)
        elif kind == "system" and record.get("subtype") == "ui_telemetry":
            self.telemetry(lineno, ts, mapping(mapping(record.get("systemPayload")).get("uiEvent")))

    def telemetry(self, lineno: int, ts: str | None, event: dict[str, Any]) -> None:
        name = event.get("event.name")
        if name == "qwen-code.api_response":
            self.response = event
        elif name == "qwen-code.tool_call":
            call_id = text(event.get("call_id"))
            if call_id:
                self.tool_calls[call_id] = event
        elif name == "qwen-code.api_error":
            message = text(event.get("error_message"))
            status = _int(event.get("status_code"))
            payload: dict[str, Any] = {"error": _clip(message), "agent_error_type": text(event.get("error_type"))}
            if status is not None:
                payload["status_code"] = status
            self.out.add(self.ref(lineno), event_type="model_response", timestamp=ts, status="error",
                         latency_ms=number(event.get("duration_ms"), minimum=0),
                         error_type=error_type_for(status, message, text(event.get("error_type"))), payload=payload)

    def assistant(self, lineno: int, ts: str | None, record: dict[str, Any]) -> None:
        parts = _parts(record)
        said = [p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought")]
        calls = [mapping(p.get("functionCall")) for p in parts if isinstance(p.get("functionCall"), dict)]
        telemetry, self.response = self.response, {}
        response_id = text(telemetry.get("response_id")) or None
        answer = "".join(said)
        payload: dict[str, Any] = {"text": _clip(answer) if said else None, "tool_call_count": len(calls),
                                   "model": text(record.get("model"))}
        if any(p.get("thought") for p in parts):
            payload["reasoning"] = True
        usage = record.get("usageMetadata")
        if isinstance(usage, dict):
            payload["usage"] = usage
        response = self.out.add(self.ref(lineno), event_type="model_response", response_id=response_id,
                                timestamp=ts, status="success", latency_ms=number(telemetry.get("duration_ms"), minimum=0),
                                payload=payload)
        if said:
            self.final_text = answer
        for part in parts:
            if part.get("thought") and isinstance(part.get("text"), str) and part["text"].strip():
                self.out.add(self.ref(lineno), event_type="thought", response_id=response_id, timestamp=ts,
                             status="success", payload={"text": _clip(part["text"])}).parent = response
        for call in calls:
            call_id = text(call.get("id")) or None
            start = self.out.add(self.ref(lineno), event_type="tool_call_start", tool_call_id=call_id,
                                 response_id=response_id, timestamp=ts, status="started",
                                 payload={**_tool(text(call.get("name"))), "arguments": call.get("args")})
            start.parent = response
            if call_id:
                self.starts.setdefault(call_id, start)

    def tool_result(self, lineno: int, ts: str | None, record: dict[str, Any]) -> None:
        outcome = mapping(record.get("toolCallResult"))
        for part in _parts(record):
            reply = part.get("functionResponse")
            if not isinstance(reply, dict):
                continue
            call_id = text(reply.get("id")) or text(outcome.get("callId")) or None
            mine = outcome if text(outcome.get("callId")) in (None, call_id) else {}
            response = mapping(reply.get("response"))
            error, output = text(response.get("error")), text(response.get("output"))
            status = text(mine.get("status"))
            if status not in ("success", "error"):
                status = "error" if error is not None else "success" if output is not None else "unknown"
            agent_error = text(mine.get("errorType"))
            display = mapping(mine.get("resultDisplay"))
            timing = self.tool_calls.get(call_id or "", {})
            start = self.starts.get(call_id) if call_id else None
            raw_name = text(reply.get("name")) or (start.fields["payload"].get("raw_name") if start else None)
            denied = status == "error" and agent_error == DENIED_ERROR_TYPE
            if denied:
                arguments = start.fields["payload"].get("arguments") if start is not None else None
                self.out.drafts.extend(_denial(self.ref(lineno), call_id, _tool(raw_name), arguments,
                                               error if error is not None else output, ts))
            payload: dict[str, Any] = {**_tool(raw_name), "output": _clip(error if error is not None else output)}
            if agent_error:
                payload["agent_error_type"] = agent_error
            if text(mine.get("executionStatus")):
                payload["execution_status"] = mine["executionStatus"]
            result = self.out.add(
                self.ref(lineno), event_type="tool_call_result", tool_call_id=call_id, timestamp=ts, status=status,
                exit_code=_int(display.get("exitCode")), latency_ms=number(timing.get("duration_ms"), minimum=0),
                error_type=_result_error_type(status, agent_error), payload=payload)
            if start is not None:
                result.parent = start.parent
                result.fields["response_id"] = start.fields.get("response_id")
            if call_id:
                self.results.add(call_id)


def _result_error_type(status: str, agent_error: str | None) -> str | None:
    if status != "error":
        return None
    if agent_error == DENIED_ERROR_TYPE:
        return "permission_denied"
    return "malformed_arguments" if agent_error in TRUNCATED_ERROR_TYPES else "tool_error"


def parse_chat_bytes(data: bytes, artifact: str = "chat.jsonl") -> _ChatParser:
    """The chat log's drafts (see the module docstring). Never raises."""
    parser = _ChatParser(artifact)
    for lineno, record in json_lines(data):
        try:
            parser.feed(lineno, record)
        except Exception:  # an odd record costs its own events, never the phase's
            continue
    return parser


# ----------------------------------------------------------------------------------------------- stdout

@dataclass
class _StdoutResult:
    ref: str
    call_id: str | None
    is_error: bool | None
    content: str | None


class _StdoutParser:
    def __init__(self, artifact: str) -> None:
        self.artifact = artifact
        self.out = _Drafts()
        self.starts: dict[str, _Draft] = {}
        self.results: list[_StdoutResult] = []
        self.final_text: str | None = None
        self.last_text: str | None = None
        self.result_seen = False
        self.session_id: str | None = None
        self.denied: set[str] = set()
        """Call ids the closing ``result`` lists in ``permission_denials``."""
        self.thoughts: list[_Draft] = []
        """Reasoning of a reply whose text and calls come in the next ``assistant`` message."""

    def ref(self, lineno: int) -> str:
        return f"{self.artifact}:{lineno}"

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if obj.get("parent_tool_use_id") not in (None, ""):
            return  # a sub-agent's own turn
        if kind == "system" and obj.get("subtype") == "init":
            self.session_id = text(obj.get("session_id"))
        elif kind == "assistant":
            self.assistant(lineno, mapping(obj.get("message")))
        elif kind == "user":
            for part in _content(mapping(obj.get("message"))):
                if part.get("type") == "tool_result":
                    is_error = part.get("is_error")
                    self.results.append(_StdoutResult(self.ref(lineno), text(part.get("tool_use_id")) or None,
                                                      is_error if isinstance(is_error, bool) else None,
                                                      _content_text(part.get("content"))))
        elif kind == "result":
            self.result(lineno, obj)

    def assistant(self, lineno: int, message: dict[str, Any]) -> None:
        parts = _content(message)
        said = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
        calls = [p for p in parts if p.get("type") == "tool_use"]
        answer = "".join(said)
        thinking = [p["thinking"] for p in parts if p.get("type") == "thinking" and isinstance(p.get("thinking"), str)
                    and p["thinking"].strip()]
        self.thoughts.extend(_Draft({"event_type": "thought", "status": "success", "payload": {"text": _clip(t)}},
                                    self.ref(lineno)) for t in thinking)
        if not said and not calls and any(p.get("type") == "thinking" for p in parts):
            return  # the reasoning of the reply that follows, printed on its own
        failed = API_ERROR_TEXT.match(answer) if said and not calls else None
        if failed:  # Qwen Code's own report of a failed API call, not a reply
            status = int(failed.group(1)) if failed.group(1) else None
            self.out.add(self.ref(lineno), event_type="model_response", status="error",
                         error_type=error_type_for(status, answer), payload={"error": _clip(answer)})
            return
        payload: dict[str, Any] = {"text": _clip(answer) if said else None, "tool_call_count": len(calls),
                                   "model": text(message.get("model"))}
        if isinstance(message.get("usage"), dict):
            payload["usage"] = message["usage"]
        if thinking or self.thoughts:
            payload["reasoning"] = True
        response = self.out.add(self.ref(lineno), event_type="model_response", status="success", payload=payload)
        for thought in self.thoughts:
            thought.parent = response
            self.out.drafts.append(thought)
        self.thoughts = []
        if said:
            self.last_text = answer
        for call in calls:
            call_id = text(call.get("id")) or None
            start = self.out.add(self.ref(lineno), event_type="tool_call_start", tool_call_id=call_id,
                                 status="started", payload={**_tool(text(call.get("name"))), "arguments": call.get("input")})
            start.parent = response
            if call_id:
                self.starts.setdefault(call_id, start)

    def result(self, lineno: int, obj: dict[str, Any]) -> None:
        self.result_seen = True
        denials = obj.get("permission_denials")
        for denial in denials if isinstance(denials, list) else []:
            call_id = text(mapping(denial).get("tool_use_id"))
            if call_id:
                self.denied.add(call_id)
        answer = text(obj.get("result"))
        if answer is not None:
            self.final_text = answer
        if obj.get("is_error") is True:
            message = text(mapping(obj.get("error")).get("message"))
            failed = API_ERROR_TEXT.match(message or "")
            status = int(failed.group(1)) if failed and failed.group(1) else None
            self.out.add(self.ref(lineno), event_type="model_response", status="error",
                         error_type=error_type_for(status, message, "agent_error"),
                         payload={"error": _clip(message), "subtype": text(obj.get("subtype"))})

    def is_denied(self, result: _StdoutResult) -> bool:
        """Qwen Code refused the call itself (listed in ``permission_denials``, or its refusal message)."""
        if result.is_error is False:
            return False
        return bool(result.call_id and result.call_id in self.denied) or bool(DENIED_BY_RULE.search(result.content or ""))

    def result_drafts(self, result: _StdoutResult, start: _Draft | None) -> list[_Draft]:
        """The result's draft, after the permission drafts of a refused call."""
        status = "error" if result.is_error else "success" if result.is_error is False else "unknown"
        raw_name = start.fields["payload"].get("raw_name") if start is not None else None
        denied = self.is_denied(result)
        if denied:
            status = "error"
        draft = _Draft({"event_type": "tool_call_result", "tool_call_id": result.call_id, "status": status,
                        "error_type": "permission_denied" if denied else "tool_error" if status == "error" else None,
                        "payload": {**_tool(raw_name), "output": _clip(result.content)}}, result.ref)
        if start is not None:
            draft.parent = start.parent
            if start.fields.get("response_id"):
                draft.fields["response_id"] = start.fields["response_id"]
        if not denied:
            return [draft]
        arguments = start.fields["payload"].get("arguments") if start is not None else None
        return [*_denial(result.ref, result.call_id, _tool(raw_name), arguments, result.content), draft]

    def finish(self) -> _Drafts:
        """The drafts with every tool result placed right after its call's start (reasoning that no reply
        followed at the end)."""
        for result in self.results:
            start = self.starts.get(result.call_id) if result.call_id else None
            _insert_after(self.out, start, self.result_drafts(result, start))
        self.out.drafts.extend(self.thoughts)
        self.thoughts = []
        return self.out


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def _content_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return None


#: Events that follow a call's start, about that call.
_AFTER_START = ("tool_call_result", "permission_request", "permission_response")


def _insert_after(drafts: _Drafts, start: _Draft | None, block: list[_Draft]) -> None:
    """Put ``block`` after ``start`` and the events about its call already following it; at the end
    without a start."""
    if start is None or start not in drafts.drafts:
        drafts.drafts.extend(block)
        return
    i = drafts.drafts.index(start) + 1
    call_id = start.fields.get("tool_call_id")
    while (i < len(drafts.drafts) and drafts.drafts[i].fields.get("event_type") in _AFTER_START
           and drafts.drafts[i].fields.get("tool_call_id") == call_id):
        i += 1
    drafts.drafts[i:i] = block


def parse_stdout_bytes(data: bytes, artifact: str = "stdout") -> _StdoutParser:
    """stdout's drafts and final answer (see the module docstring). Never raises."""
    parser = _StdoutParser(artifact)
    for lineno, obj in json_lines(data):
        try:
            parser.feed(lineno, obj)
        except Exception:  # an odd line costs its own events, never the phase's
            continue
    return parser


# ------------------------------------------------------------------------------------------------- both

def combine(stdout: _StdoutParser, chat: _ChatParser | None, phase: str) -> QwenParse:
    """The chat log's events completed from stdout when the log is Qwen Code's, else stdout's alone."""
    if chat is None or not chat.recognized:
        drafts = stdout.finish()
        return QwenParse(drafts.finish(phase, stdout.artifact), _final(stdout, None), "stdout")
    for result in stdout.results:
        if result.call_id and result.call_id in chat.starts and result.call_id not in chat.results:
            start = chat.starts[result.call_id]
            _insert_after(chat.out, start, stdout.result_drafts(result, start))
            chat.results.add(result.call_id)
    if stdout.result_seen and not any(d.fields.get("status") == "error" and d.fields.get("event_type") == "model_response"
                                      for d in chat.out.drafts):
        chat.out.drafts.extend(d for d in stdout.out.drafts
                               if d.fields.get("event_type") == "model_response" and d.fields.get("status") == "error")
    return QwenParse(chat.out.finish(phase, chat.artifact), _final(stdout, chat), "chat")


def _final(stdout: _StdoutParser, chat: _ChatParser | None) -> str | None:
    if stdout.final_text is not None:
        return stdout.final_text
    if chat is not None and chat.final_text is not None:
        return chat.final_text
    return stdout.last_text


def parse_outputs(stdout: Path, chat: Path | None, phase: str) -> QwenParse:
    """Events from the chat log when it is readable and Qwen Code's (completed from stdout), else from
    stdout. Raises ``OSError`` only when stdout cannot be read (the runner always captures it)."""
    out = parse_stdout_bytes(stdout.read_bytes(), stdout.name)
    log = None
    if chat is not None:
        try:
            log = parse_chat_bytes(chat.read_bytes(), chat.name)
        except OSError:
            log = None
    return combine(out, log, phase)

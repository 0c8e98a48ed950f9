"""Tier-B events from an ACP session transcript (what :class:`~gripprobe_acp.session.Recorder` wrote).

The transcript holds every JSON-RPC message both ways and the harness's permission decisions. From it:

* ``tool_call_start`` at the line an agent first reported a call (``tool_call``, or an update or a permission
  request before it), with what all its messages together say: the name the model called
  (:mod:`gripprobe_acp.calls`), GripProbe's name and kind, its ``rawInput`` as ``arguments``, the ACP ``title``
  and ``kind``; ``tool_call_id`` is the agent's ``toolCallId``, which every agent here copies from the model's
  call id (the oracle's ``call_oracle_NNNN``);
* ``tool_call_result`` at the line its status became ``completed`` (success) or ``failed`` (error), with its
  output (``rawOutput``, else the text of its content) and, where the agent says it, the exit code (a command
  that exited non-zero is an error, though opencode reports it ``completed``);
* ``permission_request`` / ``permission_response`` for each ``session/request_permission`` and the answer
  (``decided_by`` ``policy`` or ``manual``; outcome ``cancelled`` when ACP's ``cancelled`` went back for a
  decision that was not a denial);
* ``thought`` for each run of ``agent_thought_chunk`` text;
* the final text: the agent's ``agent_message_chunk`` text after its last tool call (else the last text it
  sent), and facts about the turn (``stop_reason``, ``usage``, an error of the prompt request);
* ``model_response`` (status error) when the agent answered the prompt with a JSON-RPC error: ``error_type``
  ``backend_tool_unsupported`` ("does not support tools"), ``http_<status>`` (``API Error: 500``), else
  ``agent_error``.

Never raises on any bytes: lines that are not JSON objects, or messages of unexpected shape, are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gripprobe_core.plugin import (
    GENERIC_TOOL_NAMES, Event, EventBuilder, ToolNames, json_lines, mapping, text,
)

from .calls import CallState, CallTracker, output_text

__all__ = ["Parsed", "parse_transcript"]


@dataclass
class Parsed:
    events: list[Event] = field(default_factory=list)
    final_text: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    """``stop_reason``, ``usage``, ``error`` (of the prompt request), ``agent`` (initialize's agentInfo),
    ``permission_requests`` (how many)."""


class _Text:
    """The agent's message text, in segments split by tool calls."""

    def __init__(self) -> None:
        self.segments: list[list[str]] = [[]]

    def add(self, chunk: str) -> None:
        self.segments[-1].append(chunk)

    def cut(self) -> None:
        if self.segments[-1]:
            self.segments.append([])

    def final(self) -> str | None:
        for segment in reversed(self.segments):
            joined = "".join(segment)
            if joined.strip():
                return joined
        return None


def _chunk_text(update: dict[str, Any]) -> str | None:
    content = mapping(update.get("content"))
    return text(content.get("text")) if content.get("type", "text") == "text" else None


def parse_transcript(data: bytes, phase: str, file_name: str, tool_names: ToolNames = GENERIC_TOOL_NAMES) -> Parsed:
    """Events, final text and facts of one session transcript (see the module docstring). Never raises."""
    lines = list(json_lines(data))
    tracker = CallTracker()
    prompt_ids: set[Any] = set()
    for line, record in lines:  # first pass: every call's merged state, the prompt request's id
        message = mapping(record.get("message"))
        if record.get("dir") == "incoming":
            tracker.see(message, line, text(record.get("time")))
        elif record.get("dir") == "outgoing" and message.get("method") == "session/prompt":
            if _hashable(message.get("id")):
                prompt_ids.add(message["id"])

    out = EventBuilder(phase, file_name)
    said = _Text()
    facts: dict[str, Any] = {}
    thought: list[Any] = []  # [line, time, [texts]] of the run of thought chunks being read

    def flush_thought() -> None:
        if thought:
            joined = "".join(thought[2])
            if joined.strip():
                out.add(thought[0], event_type="thought", status="success", timestamp=thought[1],
                        payload={"text": joined})
            thought.clear()

    for line, record in lines:
        direction, time = record.get("dir"), text(record.get("time"))
        message = mapping(record.get("message"))
        if direction == "harness":
            if record.get("event") == "permission":
                flush_thought()
                said.cut()
                _permission(out, line, time, record)
                facts["permission_requests"] = facts.get("permission_requests", 0) + 1
            elif record.get("event") == "error" and "error" not in facts:
                facts["error"] = {"stage": text(record.get("stage")), "message": text(record.get("error"))}
            continue
        if direction != "incoming":
            continue
        if "id" in message and "method" not in message and _hashable(message.get("id")):
            result = mapping(message.get("result"))
            if message["id"] in prompt_ids:
                if text(result.get("stopReason")):
                    facts["stop_reason"] = result["stopReason"]
                if isinstance(result.get("usage"), dict):
                    facts["usage"] = result["usage"]
                if "error" in message:
                    error = mapping(message.get("error"))
                    words = text(error.get("message"))
                    detail = text(mapping(error.get("data")).get("details"))
                    if detail and detail not in (words or ""):  # Qwen Code: "Internal error" + the backend's words
                        words = f"{words}: {detail}" if words else detail
                    facts["error"] = {"stage": "session/prompt", "message": words,
                                      "code": error.get("code") if isinstance(error.get("code"), int) else None}
                    out.add(line, event_type="model_response", status="error", timestamp=time,
                            error_type=error_type_for(words), payload={"text": words, "stage": "session/prompt"})
            elif isinstance(result.get("agentInfo"), dict):
                facts["agent"] = result["agentInfo"]
            continue
        method = message.get("method")
        if method == "session/request_permission":
            _call_events(out, line, tracker, mapping(mapping(message.get("params")).get("toolCall")), tool_names)
            continue
        if method != "session/update":
            continue
        update = mapping(mapping(message.get("params")).get("update"))
        kind = update.get("sessionUpdate")
        if kind == "agent_thought_chunk":
            chunk = _chunk_text(update)
            if chunk:
                if not thought:
                    thought.extend([line, time, []])
                thought[2].append(chunk)
            continue
        flush_thought()
        if kind == "agent_message_chunk":
            chunk = _chunk_text(update)
            if chunk:
                said.add(chunk)
        elif kind in ("tool_call", "tool_call_update"):
            said.cut()
            _call_events(out, line, tracker, update, tool_names)
    flush_thought()
    return Parsed(out.events, said.final(), facts)


#: ``API Error: 500 …`` (Claude Code), ``[API Error: 500 …]`` (Qwen Code), ``HTTP 500``, ``status 500``.
HTTP_STATUS = re.compile(r"(?i)\b(?:API Error|HTTP|status(?: code)?)[: ]+(\d{3})\b")


def error_type_for(message: str | None) -> str:
    """``error_type`` of a prompt the agent answered with an error: ``backend_tool_unsupported`` (the backend takes
    no tools), ``http_<status>`` (the status it names), else ``agent_error``."""
    if message and "does not support tools" in message.lower():
        return "backend_tool_unsupported"
    found = HTTP_STATUS.search(message or "")
    return f"http_{found.group(1)}" if found else "agent_error"


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _call_events(out: EventBuilder, line: int, tracker: CallTracker, update: dict[str, Any],
                 tool_names: ToolNames) -> None:
    call_id = text(update.get("toolCallId"))
    state = tracker.calls.get(call_id) if call_id else None
    if state is None:
        return
    if state.first_line == line:
        out.add(line, event_type="tool_call_start", tool_call_id=state.tool_call_id, status="started",
                timestamp=state.first_time, payload=_call_payload(state, tool_names))
    if state.done_line == line:
        payload = _call_payload(state, tool_names)
        payload["output"] = output_text(state.raw_output, state.content)
        out.add(line, event_type="tool_call_result", tool_call_id=state.tool_call_id,
                status=state.result_status, timestamp=state.done_time, exit_code=state.exit_code,
                payload=payload)


def _call_payload(state: CallState, tool_names: ToolNames) -> dict[str, Any]:
    raw_name = state.raw_name
    name, by_name = tool_names.normalize(raw_name) if raw_name else ("", "other")
    kind = state.kind if state.kind != "other" else by_name
    return {"raw_name": raw_name, "name": name or None, "kind": kind, "arguments": state.raw_input,
            "title": state.title, "acp_kind": state.acp_kind}


def _permission(out: EventBuilder, line: int, time: str | None, record: dict[str, Any]) -> None:
    request, decision, sent = mapping(record.get("request")), mapping(record.get("decision")), mapping(record.get("sent"))
    call_id = text(record.get("tool_call_id"))
    options = [{"option_id": text(o.get("option_id")), "name": text(o.get("name")), "kind": text(o.get("kind"))}
               for o in map(mapping, request.get("options") if isinstance(request.get("options"), list) else [])]
    out.add(line, event_type="permission_request", tool_call_id=call_id, status="started", timestamp=time,
            payload={"request_id": text(request.get("request_id")), "raw_name": text(request.get("raw_name")),
                     "name": text(request.get("name")), "kind": text(request.get("kind")),
                     "input": request.get("input"), "prompt": text(request.get("prompt")), "options": options})
    outcome = text(decision.get("outcome"))
    if sent.get("outcome") == "cancelled" and outcome != "deny":
        outcome = "cancelled"
    decided_by = text(decision.get("decided_by"))
    out.add(line, event_type="permission_response", tool_call_id=call_id, status="success", timestamp=time,
            payload={"request_id": text(decision.get("request_id")), "outcome": outcome,
                     "option_id": text(decision.get("option_id")), "option_kind": text(decision.get("option_kind")),
                     "answer": text(decision.get("answer")), "rule": text(decision.get("rule")),
                     "decided_by": decided_by if decided_by in ("policy", "manual") else "policy"})

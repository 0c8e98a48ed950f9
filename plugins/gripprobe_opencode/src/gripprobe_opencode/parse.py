"""Tier B events from ``opencode run --format json`` (one JSON object per stdout line).

Each line is ``{type, timestamp, sessionID, part | error}`` (opencode-ai 1.18.33):

- ``step_start`` / ``step_finish``: one model step (one Chat Completions request's answer); the
  finish part carries ``reason`` (``tool-calls``, ``stop`` …), ``tokens`` and ``cost``;
- ``tool_use``: printed once the tool is *done*: ``part.tool``, ``part.callID`` (the model's tool call
  id), ``part.state{status: completed|error, input, output, error, metadata{exit,…}, time{start,end}}``.
  A call opencode could not decode (bad JSON, unknown tool) is reported as tool ``invalid`` with
  ``input{tool, error}``;
- ``text``: assistant text (``part.text``); ``reasoning``: the model's reasoning (``part.text``, when the
  backend streams any: ``reasoning_content`` / ``reasoning`` deltas);
- ``error``: the turn failed (``error{name: APIError, data{statusCode, message, …}}``).

Each step becomes one ``model_response`` event, followed by a ``thought`` per reasoning part (payload
``{text}``) and a ``tool_call_start`` and a ``tool_call_result`` per tool it ran (all parented to that
response). A call refused by opencode's own ``permission`` config (a tool_use in state ``error`` whose
error is its ``PermissionDeniedError``: :data:`DENIED_PREFIX`) gets a ``permission_request`` and a
``permission_response`` (outcome ``deny``, ``decided_by: native``, the rule naming the permission key)
between its start and its result, which is an ``error`` with ``error_type: permission_denied``. Timestamps are opencode's own
(epoch milliseconds): the tool's ``time.start``/``time.end``, the step's earliest moment.
Names go through :data:`TOOL_NAMES` (the common vocabulary plus opencode's own). Nothing here raises
on bad input: lines that are not JSON objects, or parts of an unknown shape, are skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, json_lines, mapping, number,
    permission_events, text,
)

from .names import TOOL_NAMES

#: The pseudo tool opencode reports for a call it could not decode.
INVALID_TOOL = "invalid"
#: Output kept in an event payload, characters.
OUTPUT_LIMIT = 2000
#: How opencode's ``PermissionDeniedError`` begins (a call its ``permission`` config denies; 1.18.33).
DENIED_PREFIX = "The user has specified a rule which prevents you from using this specific tool call"
#: Tools whose permission is another tool's key (``edit`` governs the file-changing tools).
PERMISSION_OF: dict[str, str] = {"write": "edit", "apply_patch": "edit", "multiedit": "edit"}
#: Error text (an Ollama-style backend) that means the model cannot take tools at all.
TOOLS_UNSUPPORTED_MARKERS = ("does not support tools",)


def permission_key(raw_name: str) -> str:
    """The ``permission`` key that governs one of opencode's tools."""
    return PERMISSION_OF.get(raw_name, raw_name)


def iso_from_ms(value: Any) -> str | None:
    """Epoch milliseconds → ISO-8601 UTC with milliseconds (``…T10:15:04.508Z``); None when unusable."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    try:
        moment = datetime.fromtimestamp(value / 1000.0, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def read_lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every stdout line that is a JSON object. Raises OSError if unreadable."""
    return json_lines(path.read_bytes())


@dataclass
class _Tool:
    lineno: int
    part: dict[str, Any]


@dataclass
class _Thought:
    lineno: int
    text: str
    start: float | None


@dataclass
class _Step:
    lineno: int
    timestamp: float | None
    message_id: str | None = None
    texts: list[str] = field(default_factory=list)
    thoughts: list[_Thought] = field(default_factory=list)
    tools: list[_Tool] = field(default_factory=list)
    moments: list[float] = field(default_factory=list)


class OpencodeParser:
    """Feed it the stdout objects in order (:meth:`feed`), then :meth:`finish`; read :attr:`events`.

    ``file_name`` goes into every event's ``raw_artifact_ref`` (``<file_name>:<line>``).
    """

    def __init__(self, phase: str, file_name: str) -> None:
        self.phase = phase
        self.file_name = file_name
        self.out = EventBuilder(phase, file_name)
        self.texts: list[list[str]] = []
        """Text of every step that had any, in order (for :func:`final_text`)."""
        self._step: _Step | None = None

    @property
    def events(self) -> list[Event]:
        """The events so far, numbered ``<phase>-B-<n>`` (invalid ones dropped)."""
        return self.out.events

    # ----------------------------------------------------------------------------------- input

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        part: dict[str, Any] = mapping(obj.get("part"))
        ts = number(obj.get("timestamp"))
        if kind == "step_start":
            self._flush(None, None)
            self._step = _Step(lineno, ts, message_id=text(part.get("messageID")))
            return
        if kind == "step_finish":
            step = self._current(lineno, ts)
            if ts is not None:
                step.moments.append(ts)
            self._flush(lineno, part)
            return
        if kind == "tool_use":
            step = self._current(lineno, ts)
            step.tools.append(_Tool(lineno, part))
            times = mapping(mapping(part.get("state")).get("time"))
            step.moments.extend(t for t in (number(times.get("start")), ts) if t is not None)
            return
        if kind in ("text", "reasoning"):
            said = part.get("text")
            if isinstance(said, str) and said.strip():
                step = self._current(lineno, ts)
                start = number(mapping(part.get("time")).get("start"))
                if kind == "text":
                    step.texts.append(said)
                else:
                    step.thoughts.append(_Thought(lineno, said, start if start is not None else ts))
                step.moments.extend(t for t in (start, ts) if t is not None)
            return
        if kind == "error":
            self._flush(None, None)
            self._error(lineno, ts, obj.get("error"))

    def finish(self) -> list[Event]:
        """Emit what an unfinished step left (the run was killed mid-step) and return the events."""
        self._flush(None, None)
        return self.events

    # ---------------------------------------------------------------------------------- output

    def _current(self, lineno: int, ts: float | None) -> _Step:
        if self._step is None:  # a part without its step_start (truncated output): open one
            self._step = _Step(lineno, ts)
        return self._step

    def _flush(self, finish_line: int | None, finish: dict[str, Any] | None) -> None:
        step, self._step = self._step, None
        if step is None:
            return
        if step.texts:
            self.texts.append(list(step.texts))
        finish = finish or {}
        payload: dict[str, Any] = {"tool_call_count": len(step.tools)}
        if step.texts:
            payload["text"] = _clip("\n".join(step.texts))
        if isinstance(finish.get("reason"), str):
            payload["finish_reason"] = finish["reason"]
        if isinstance(finish.get("tokens"), dict):
            payload["usage"] = finish["tokens"]
        if step.message_id:
            payload["message_id"] = step.message_id
        moments = [m for m in (step.timestamp, *step.moments) if m is not None]
        response = self.out.add(
            finish_line or step.lineno, event_type="model_response",
            timestamp=iso_from_ms(min(moments)) if moments else None,
            status="success" if finish_line is not None else "unknown", payload=payload)
        parent = response.event_id if response is not None else None
        for thought in step.thoughts:
            self.out.add(thought.lineno, event_type="thought", timestamp=iso_from_ms(thought.start),
                         status="success", parent_id=parent, payload={"text": _clip(thought.text)})
        for tool in step.tools:
            self._tool_events(tool, parent)

    def _tool_events(self, tool: _Tool, parent: str | None) -> None:
        part = tool.part
        state = mapping(part.get("state"))
        times = mapping(state.get("time"))
        metadata = mapping(state.get("metadata"))
        raw_name = text(part.get("tool"))
        call_id = text(part.get("callID"))
        arguments: Any = state.get("input")
        error_type: str | None = None
        extra: dict[str, Any] = {}
        if raw_name == INVALID_TOOL:
            # The model asked for a real tool (input.tool) with arguments opencode could not decode.
            inp = mapping(state.get("input"))
            raw_name = text(inp.get("tool")) or INVALID_TOOL
            arguments = None
            error_type = "malformed_arguments"
            extra = {"agent_tool": INVALID_TOOL, "error": _clip(text(inp.get("error")) or "")}
        name, kind = TOOL_NAMES.normalize(raw_name)
        common = {"raw_name": raw_name, "name": name, "kind": kind, **extra}
        start_ms, end_ms = number(times.get("start")), number(times.get("end"))
        self.out.add(tool.lineno, event_type="tool_call_start", tool_call_id=call_id,
                     timestamp=iso_from_ms(start_ms), status="started", parent_id=parent,
                     payload={**common, "arguments": arguments})
        agent_status = state.get("status")
        exit_code = metadata.get("exit")
        exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
        if agent_status not in ("completed", "error"):
            return  # pending/running: opencode prints tool_use only when done, so this is a torn line
        denied = agent_status == "error" and (text(state.get("error")) or "").startswith(DENIED_PREFIX)
        if denied:
            key = permission_key(raw_name or "")
            request = PermissionRequest(request_id=text(part.get("id")) or call_id or f"line-{tool.lineno}",
                                        tool_call_id=call_id, raw_name=raw_name, name=name, kind=kind,
                                        input=arguments)
            permission_events(self.out, tool.lineno, request,
                              PermissionDecision("deny", f"native: opencode permission {key} = deny"),
                              decided_by="native", timestamp=iso_from_ms(start_ms))
            error_type = "permission_denied"
        if error_type is not None or agent_status == "error" or (exit_code not in (None, 0)):
            status = "error"
        else:
            status = "success"
        output = text(state.get("output")) or text(state.get("error"))
        latency = end_ms - start_ms if start_ms is not None and end_ms is not None and end_ms >= start_ms else None
        self.out.add(tool.lineno, event_type="tool_call_result", tool_call_id=call_id,
                     timestamp=iso_from_ms(end_ms if end_ms is not None else start_ms), status=status,
                     parent_id=parent, exit_code=exit_code, latency_ms=latency, error_type=error_type,
                     payload={**common, "output": _clip(output) if output is not None else None})

    def _error(self, lineno: int, ts: float | None, error: Any) -> None:
        err = mapping(error)
        data = mapping(err.get("data"))
        name = text(err.get("name")) or "error"
        message = text(data.get("message")) or text(err.get("message")) or ""
        code = data.get("statusCode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        if any(marker in message.lower() for marker in TOOLS_UNSUPPORTED_MARKERS):
            error_type = "backend_tool_unsupported"
        elif code is not None:
            error_type = f"http_{code}"
        else:
            error_type = name
        payload: dict[str, Any] = {"error_name": name, "message": _clip(message)}
        if code is not None:
            payload["status_code"] = code
        self.out.add(lineno, event_type="model_response", timestamp=iso_from_ms(ts), status="error",
                     error_type=error_type, payload=payload)


def parse_stdout(path: Path, phase: str) -> OpencodeParser:
    """Parse one phase's stdout file. Raises OSError when it cannot be read (the caller decides)."""
    parser = OpencodeParser(phase, path.name)
    for lineno, obj in read_lines(path):
        try:
            parser.feed(lineno, obj)
        except (RecursionError, ValueError, TypeError):  # pragma: no cover - defensive: odd nesting
            continue
    parser.finish()
    return parser


def final_text(parser: OpencodeParser) -> str | None:
    """The agent's last answer: the text of the last step that said anything; None when none did."""
    return "\n".join(parser.texts[-1]) if parser.texts else None


# ------------------------------------------------------------------------------------- helpers


def _clip(value: str, limit: int = OUTPUT_LIMIT) -> str:
    return value if len(value) <= limit else value[:limit] + f"… [{len(value) - limit} more characters]"

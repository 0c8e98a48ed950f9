"""Tier B events from Cline's ``--json`` NDJSON stdout, else its session's message file.

**stdout** (cline 3.0.65 ``--json``): one object per line, ``{ts, type, ...}``:

- ``agent_event`` with ``event.type``: ``iteration_start`` / ``iteration_end`` (one model request and the
  tools it asked for; ``iteration_end`` has ``hadToolCalls``, ``toolCallCount``), ``content_start`` /
  ``content_update`` / ``content_end`` with ``contentType`` ``text`` (``content_end.text`` is the whole
  text) or ``tool`` (``toolName``, ``toolCallId`` = the model's call id on the wire, ``input`` on start,
  ``output`` / ``error`` / ``durationMs`` on end), ``usage`` (tokens of the request), ``notice``,
  ``done`` (``reason``, ``text``) and ``error`` (``error{name, message}``: the request failed);
- ``hook_event`` (``agent_start``, ``tool_call``, ``tool_result``, ``agent_end``, ``agent_error``):
  lifecycle only, nothing the agent events do not say;
- ``run_result`` (``finishReason``, ``text``, usage, ``durationMs``) and ``run_aborted``: the end.

Each iteration becomes one ``model_response`` event (status error when the iteration failed), then a
``thought`` per reasoning part (``contentType: reasoning``, the reply's ``reasoning_content``; the message
file's ``thinking`` blocks), then a ``tool_call_start`` and (once it finished) a ``tool_call_result`` per tool it
ran, parented to it.
Timestamps are Cline's own ``ts``.

**The session's message file** ``<CLINE_DATA_DIR>/sessions/<id>/<id>.messages.json`` (kept as
``<phase>.messages.json``), used only when stdout holds no agent event: ``messages[]`` in Anthropic's
shape, ``assistant`` content ``text`` and ``tool_use{id, name, input}`` blocks, ``user`` content
``tool_result{tool_use_id, name, content, is_error}`` blocks, ``ts`` in epoch milliseconds and ``metrics``
(tokens) per assistant message. Cline writes it when the run ends (a killed run leaves it without
messages). Its events point at the message (``messages.json:messages[<i>]``): the file is pretty-printed.

A tool's result is an error when Cline reports one (``error`` on ``content_end``, ``is_error``), or when
any of its per-item results says ``success: false`` (``run_commands`` and ``read_files`` take arrays
and report one ``{query, result, success}`` item each; a failing command's ``result`` holds its output
and exit status text). Nothing here raises on bad input: lines that are not JSON objects and parts of an
unknown shape are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gripprobe_core.plugin import (
    Event, EventBuilder, PermissionDecision, PermissionRequest, json_lines, mapping, number,
    permission_events, text,
)

from .names import TOOL_NAMES

__all__ = ["TOOL_NAMES", "NativeDenials", "Parsed", "parse_messages", "parse_outputs", "parse_stdout"]

#: Output and text kept in an event payload, characters.
OUTPUT_LIMIT = 2000
#: Error text (an Ollama-style backend) meaning the model cannot take tools at all.
TOOLS_UNSUPPORTED_MARKERS = ("does not support tools",)
#: An HTTP status in an error message (``... status code 500``, ``HTTP 500``, ``(500)``).
_STATUS = re.compile(r"(?:status(?: code)?|HTTP)[ :=]*([1-5]\d\d)\b|\b([45]\d\d)\b(?= (?:Internal|Bad|Service|Not|Too))",
                     re.IGNORECASE)
#: How ``run_commands`` states a command's exit status.
_EXIT = re.compile(r"Command exited with code (-?\d{1,10})\b")


#: Cline's answer, without a TTY, to a call that asks for approval (``--auto-approve false``).
_NEEDS_APPROVAL = re.compile(r'Tool "([^"]+)" requires approval in a TTY session')
#: Cline's answer to a call of a tool it does not offer (``disabledTools``).
_UNAVAILABLE = re.compile(r"Model tried to call unavailable tool '([^']+)'")


@dataclass(frozen=True)
class NativeDenials:
    """The settings the driver gave Cline for the case's interaction policy, to name the rule of a refusal:
    ``refuse_all`` (``--auto-approve false``: every call that asks is refused), ``disabled`` (tool → rule:
    the tools ``disabledTools`` keeps out)."""

    refuse_all: str | None = None
    disabled: dict[str, str] = field(default_factory=dict)

    def rule_for(self, raw_name: str | None, said: str) -> str | None:
        """The rule of the native denial ``said`` (a call's error text) shows for ``raw_name``, or None."""
        asked = _NEEDS_APPROVAL.search(said)
        if asked and asked.group(1) == raw_name:
            return self.refuse_all or "native: Cline tool approval (no TTY to ask)"
        missing = _UNAVAILABLE.search(said)
        if missing and missing.group(1) == raw_name and raw_name in self.disabled:
            return self.disabled[raw_name]
        return None


def _denial(out: EventBuilder, native: NativeDenials, line: int | None, *, call_id: str | None,
            raw_name: str | None, arguments: Any, said: str, ts: str | None, ref: str | None = None) -> None:
    """A native ``permission_request`` + ``permission_response`` (deny) when ``said`` is Cline refusing the call."""
    rule = native.rule_for(raw_name, said[:4000])
    if rule is None:
        return
    name, kind = TOOL_NAMES.normalize(raw_name or "")
    request = PermissionRequest(request_id=f"native-{call_id or len(out.events) + 1}", tool_call_id=call_id,
                                raw_name=raw_name, name=name or None, kind=kind, input=arguments)
    before = len(out.events)
    permission_events(out, line, request, PermissionDecision("deny", rule), decided_by="native", timestamp=ts)
    if ref is not None:  # message-file events point at the message, not a line
        for i in range(before, len(out.events)):
            out.events[i] = out.events[i].model_copy(update={"raw_artifact_ref": ref})


@dataclass
class Parsed:
    """What a phase's outputs said: the events, the agent's final answer, where they came from."""

    events: list[Event]
    final_text: str | None
    source: str  # "stdout", "messages" or "none"


# ------------------------------------------------------------------------------------------ stdout

@dataclass
class _Tool:
    call_id: str | None
    raw_name: str | None
    arguments: Any
    line: int
    ts: str | None
    end_line: int | None = None
    end_ts: str | None = None
    output: Any = None
    error: Any = None
    duration_ms: float | None = None


@dataclass
class _Iteration:
    line: int
    ts: str | None
    number: int | None = None
    texts: list[str] = field(default_factory=list)
    thoughts: list[tuple[int, str | None, str]] = field(default_factory=list)  # (line, ts, reasoning)
    tools: list[_Tool] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    error_line: int | None = None
    error_ts: str | None = None
    end_line: int | None = None


class StdoutParser:
    """Feed it the NDJSON objects in order (:meth:`feed`), then :meth:`finish`; read :attr:`events`."""

    def __init__(self, phase: str, file_name: str, native: NativeDenials | None = None) -> None:
        self.out = EventBuilder(phase, file_name)
        self.native = native or NativeDenials()
        self.final_text: str | None = None
        self.agent_events = 0
        self._iteration: _Iteration | None = None

    @property
    def events(self) -> list[Event]:
        return self.out.events

    def feed(self, line: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        ts = iso_ts(obj.get("ts"))
        if kind == "run_result":
            said = text(obj.get("text"))
            if said and obj.get("finishReason") == "completed":
                self.final_text = said
            return
        if kind != "agent_event":
            return
        event = mapping(obj.get("event"))
        etype = event.get("type")
        self.agent_events += 1
        if etype == "iteration_start":
            self._flush()
            n = event.get("iteration")
            self._iteration = _Iteration(line, ts, n if isinstance(n, int) and not isinstance(n, bool) else None)
        elif etype == "iteration_end":
            it = self._current(line, ts)
            it.end_line = line
            self._flush()
        elif etype in ("content_start", "content_end", "content_update"):
            self._content(line, ts, etype, event)
        elif etype == "usage":
            self._current(line, ts).usage = {k: v for k, v in event.items() if k != "type"}
        elif etype == "error":
            it = self._current(line, ts)
            it.error, it.error_line, it.error_ts = mapping(event.get("error")), line, ts
            self._flush()
        elif etype == "done":
            said = text(event.get("text"))
            if said and event.get("reason") == "completed":
                self.final_text = said

    def finish(self) -> list[Event]:
        self._flush()
        return self.events

    # ----------------------------------------------------------------------------------- input

    def _current(self, line: int, ts: str | None) -> _Iteration:
        if self._iteration is None:  # output without its iteration_start (truncated): open one
            self._iteration = _Iteration(line, ts)
        return self._iteration

    def _content(self, line: int, ts: str | None, etype: str, event: dict[str, Any]) -> None:
        ctype = event.get("contentType")
        if ctype == "reasoning":
            said = text(event.get("reasoning")) if etype == "content_end" else None
            if said and said.strip() and event.get("redacted") is not True:
                self._current(line, ts).thoughts.append((line, ts, said.strip()))
            return
        if ctype == "text":
            if etype == "content_end":
                said = text(event.get("text"))
                if said and said.strip():
                    self._current(line, ts).texts.append(said)
            return
        if ctype != "tool" or etype == "content_update":
            return
        it = self._current(line, ts)
        call_id = text(event.get("toolCallId"))
        if etype == "content_start":
            it.tools.append(_Tool(call_id, text(event.get("toolName")), event.get("input"), line, ts))
            return
        tool = next((t for t in reversed(it.tools) if t.end_line is None and call_id is not None
                     and t.call_id == call_id), None)
        if tool is None:  # an end without its start (truncated output)
            tool = _Tool(call_id, text(event.get("toolName")), None, line, ts)
            it.tools.append(tool)
        tool.end_line, tool.end_ts = line, ts
        tool.output, tool.error = event.get("output"), event.get("error")
        tool.duration_ms = number(event.get("durationMs"), minimum=0)

    # ---------------------------------------------------------------------------------- output

    def _flush(self) -> None:
        it, self._iteration = self._iteration, None
        if it is None:
            return
        payload: dict[str, Any] = {"tool_call_count": len(it.tools)}
        if it.number is not None:
            payload["iteration"] = it.number
        if it.texts:
            payload["text"] = clip("\n".join(it.texts))
        if it.usage:
            payload["usage"] = it.usage
        if it.error is not None:
            message = text(it.error.get("message")) or ""
            payload.update(error_name=text(it.error.get("name")) or "error", message=clip(message))
            response = self.out.add(it.error_line or it.line, event_type="model_response", timestamp=it.ts,
                                    status="error", error_type=error_type_of(message), payload=payload)
        else:
            response = self.out.add(it.end_line or it.line, event_type="model_response", timestamp=it.ts,
                                    status="success" if it.end_line is not None else "unknown", payload=payload)
        parent = response.event_id if response is not None else None
        for line, ts, said in it.thoughts:
            self.out.add(line, event_type="thought", timestamp=ts, status="success", parent_id=parent,
                         payload={"text": clip(said)})
        for tool in it.tools:
            self._tool_events(tool, parent)

    def _tool_events(self, tool: _Tool, parent: str | None) -> None:
        name, kind = TOOL_NAMES.normalize(tool.raw_name or "")
        common = {"raw_name": tool.raw_name, "name": name, "kind": kind}
        self.out.add(tool.line, event_type="tool_call_start", tool_call_id=tool.call_id, timestamp=tool.ts,
                     status="started", parent_id=parent, payload={**common, "arguments": tool.arguments})
        if tool.end_line is None:
            return  # never finished (the run was killed while it ran)
        if tool.error is not None:
            _denial(self.out, self.native, tool.end_line, call_id=tool.call_id, raw_name=tool.raw_name,
                    arguments=tool.arguments, said=_texts(tool.error) or _texts(tool.output), ts=tool.end_ts)
        status, output, error_type, exit_code = result_status(tool.output, tool.error)
        self.out.add(tool.end_line, event_type="tool_call_result", tool_call_id=tool.call_id,
                     timestamp=tool.end_ts, status=status, parent_id=parent, latency_ms=tool.duration_ms,
                     exit_code=exit_code, error_type=error_type, payload={**common, "output": output})


def parse_stdout(path: Path, phase: str, native: NativeDenials | None = None) -> StdoutParser:
    """Parse one phase's stdout. Raises OSError when it cannot be read (the caller decides)."""
    parser = StdoutParser(phase, path.name, native)
    for line, obj in json_lines(path.read_bytes()):
        try:
            parser.feed(line, obj)
        except (RecursionError, ValueError, TypeError):  # pragma: no cover - defensive: odd nesting
            continue
    parser.finish()
    return parser


# ---------------------------------------------------------------------------------- message file

def parse_messages(path: Path, phase: str, native: NativeDenials | None = None) -> tuple[list[Event], str | None]:
    """Events and final text from a kept ``messages.json``; ([], None) when it is unreadable or not a
    message file. Never raises."""
    out = EventBuilder(phase, path.name)
    native = native or NativeDenials()
    try:
        data = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return [], None
    messages = mapping(data).get("messages")
    if not isinstance(messages, list):
        return [], None

    def ref(index: int) -> str:
        return f"{path.name}:messages[{index}]"

    results: dict[str, tuple[int, dict[str, Any], str | None]] = {}
    for index, msg in enumerate(messages):
        msg = mapping(msg)
        if msg.get("role") != "user":
            continue
        for block in _blocks(msg):
            if block.get("type") == "tool_result" and text(block.get("tool_use_id")):
                results[block["tool_use_id"]] = (index, block, ms_iso(msg.get("ts")))
    final: str | None = None
    for index, msg in enumerate(messages):
        msg = mapping(msg)
        if msg.get("role") != "assistant":
            continue
        blocks = _blocks(msg)
        said = "\n".join(t for b in blocks if b.get("type") == "text" and (t := text(b.get("text"))))
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        ts = ms_iso(msg.get("ts"))
        payload: dict[str, Any] = {"tool_call_count": len(uses)}
        if said:
            payload["text"] = clip(said)
            final = said if not uses else final
        if isinstance(msg.get("metrics"), dict):
            payload["usage"] = msg["metrics"]
        if text(msg.get("id")):
            payload["message_id"] = msg["id"]
        response = out.add(None, raw_artifact_ref=ref(index), event_type="model_response", timestamp=ts,
                           status="success", payload=payload)
        parent = response.event_id if response is not None else None
        for block in blocks:
            thought = text(block.get("thinking")) if block.get("type") == "thinking" else None
            if thought and thought.strip():
                out.add(None, raw_artifact_ref=ref(index), event_type="thought", timestamp=ts, status="success",
                        parent_id=parent, payload={"text": clip(thought.strip())})
        for use in uses:
            call_id, raw_name = text(use.get("id")), text(use.get("name"))
            name, kind = TOOL_NAMES.normalize(raw_name or "")
            common = {"raw_name": raw_name, "name": name, "kind": kind}
            out.add(None, raw_artifact_ref=ref(index), event_type="tool_call_start", tool_call_id=call_id,
                    timestamp=ts, status="started", parent_id=parent, payload={**common, "arguments": use.get("input")})
            if call_id in results:
                at, block, rts = results[call_id]
                error = "tool reported an error" if block.get("is_error") is True else None
                if error:
                    _denial(out, native, None, call_id=call_id, raw_name=raw_name, arguments=use.get("input"),
                            said=_texts(block.get("content")), ts=rts, ref=ref(at))
                status, output, error_type, exit_code = result_status(block.get("content"), error)
                out.add(None, raw_artifact_ref=ref(at), event_type="tool_call_result", tool_call_id=call_id,
                        timestamp=rts, status=status,
                        parent_id=parent, exit_code=exit_code, error_type=error_type,
                        payload={**common, "output": output})
    return out.events, final


def _blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    content = msg.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# ----------------------------------------------------------------------------------------- both

def parse_outputs(stdout_path: Path, messages_path: Path | None, phase: str,
                  native: NativeDenials | None = None) -> Parsed:
    """The phase's events: from stdout, else (no agent event printed) from the kept message file.
    Raises OSError only when stdout cannot be read. ``native``: the approval settings the driver gave Cline
    for the case's interaction policy; a call Cline refused because of them gets a native
    ``permission_request`` + ``permission_response`` (deny) before its error result."""
    parser = parse_stdout(stdout_path, phase, native)
    if parser.agent_events or messages_path is None:
        return Parsed(parser.events, parser.final_text, "stdout" if parser.agent_events else "none")
    events, final = parse_messages(messages_path, phase, native)
    return Parsed(events, final, "messages" if events else "none")


def result_status(output: Any, error: Any) -> tuple[str, str | None, str | None, int | None]:
    """``(status, output text, error_type, exit code)`` of a finished tool call. The exit code is the
    last one a ``run_commands`` item states (``Command exited with code N``); None when none does."""
    items = output if isinstance(output, list) else [output] if isinstance(output, dict) else []
    items = [i for i in items if isinstance(i, dict)]
    failed = any(i.get("success") is False for i in items)
    codes = [int(m.group(1)) for i in items for key in ("error", "result")
             if (m := _EXIT.search(text(i.get(key)) or ""))]
    exit_code = codes[-1] if codes and abs(codes[-1]) < 2**31 else None
    err_text = error if isinstance(error, str) else text(mapping(error).get("message")) if error else None
    if err_text is None and error:
        err_text = _dump(error)
    shown = output if isinstance(output, str) else _dump(output) if output is not None else None
    if err_text is not None:
        return "error", clip(err_text if shown is None else f"{err_text}\n{shown}"), "tool_error", exit_code
    if failed:
        return "error", clip(shown) if shown is not None else None, "tool_error", exit_code
    return "success", clip(shown) if shown is not None else None, None, exit_code


def error_type_of(message: str) -> str:
    """A failed request's error type from its message: ``backend_tool_unsupported``, ``http_<code>``, else
    ``model_error``."""
    low = message.lower()
    if any(m in low for m in TOOLS_UNSUPPORTED_MARKERS):
        return "backend_tool_unsupported"
    match = _STATUS.search(message)
    if match:
        return f"http_{match.group(1) or match.group(2)}"
    return "model_error"


def iso_ts(value: Any) -> str | None:
    """Cline's ``ts`` (ISO-8601 with ``Z``) as given when it parses, else None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def ms_iso(value: Any) -> str | None:
    """Epoch milliseconds → ISO-8601 UTC with milliseconds; None when unusable."""
    ms = number(value)
    if ms is None:
        return None
    try:
        moment = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def clip(value: str, limit: int = OUTPUT_LIMIT) -> str:
    return value if len(value) <= limit else value[:limit] + f"… [{len(value) - limit} more characters]"


def _texts(value: Any, depth: int = 0) -> str:
    """Every string inside ``value`` (JSON text inside strings unpacked), joined by newlines: what a call's
    error says, whatever shape Cline gave it (a string of JSON, a dict, a list of items)."""
    if depth > 8:
        return ""
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                return _texts(json.loads(value), depth + 1)
            except (ValueError, RecursionError):
                return value
        return value
    if isinstance(value, dict):
        return "\n".join(t for v in value.values() if (t := _texts(v, depth + 1)))
    if isinstance(value, list):
        return "\n".join(t for v in value if (t := _texts(v, depth + 1)))
    return ""


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(type(value).__name__)


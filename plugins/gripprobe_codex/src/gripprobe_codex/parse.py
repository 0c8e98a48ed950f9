"""codex's outputs → normalized tier B events.

Two sources, one answer (never both: their events would count twice):

1. **The rollout transcript** ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (kept by the runner as
   the phase artifact ``rollout.jsonl``), one JSON object a line ``{timestamp, ordinal, type, payload}``.
   It is the preferred source: it has codex's own timestamps and the model's call ids (``call_id``, the
   ids on the wire, so they match the oracle's ground truth and the proxy's tier A events):

   - ``response_item`` ``function_call`` / ``custom_tool_call`` (the freeform ``apply_patch``) / any other
     ``*_call`` with a ``call_id`` → ``tool_call_start`` (function arguments parsed when JSON, else kept
     as text with ``error_type: malformed_arguments``; a custom call's raw ``input`` as its arguments);
   - ``response_item`` ``*_call_output`` → ``tool_call_result``: status, exit code and duration from the
     matching ``event_msg`` ``item_completed`` (``CommandExecution`` exit_code/status, ``FileChange``
     status; its ``id`` is the call id), else read from the output text ("Process exited with code N",
     "Exit code: N", "failed to parse function arguments" …);
   - ``response_item`` ``reasoning`` (its ``summary`` / ``content`` parts' text) → ``thought`` (payload
     ``{text}``);
   - ``token_usage_record`` (one per model response: ``response_id``, ``usage``) closes a response →
     ``model_response`` with the assistant text and the number of calls it asked for; it is placed
     before those calls and thoughts and timed by the first item of the response; they get it as
     ``parent_id``;
   - ``event_msg`` ``task_complete`` with an ``error`` (HTTP failures after codex's retries) → an
     error ``model_response`` (``error_type`` from ``codex_error_info``, see :data:`ERROR_TYPES`).

2. **The ``codex exec --json`` stdout** (JSON lines ``thread.started``, ``item.started`` /
   ``item.completed`` with ``command_execution`` / ``file_change`` / ``agent_message`` / ``error`` items,
   ``turn.completed``, ``turn.failed``, ``error``; ``reasoning`` items → ``thought``), used only when there is
   no readable rollout. It has
   no timestamps and no call ids (items are ``item_0``, ``item_1`` … kept as ``payload.item_id``), and no
   tool names: ``command_execution`` is reported as raw name ``exec_command`` (shell/execute),
   ``file_change`` as ``apply_patch`` (edit/write), the tools that produce them.

Names go through :data:`TOOL_NAMES` (the common vocabulary plus codex's own). Nothing here raises on bad
bytes: a line that does not parse, or has an unexpected shape, is skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gripprobe_core.plugin import Event, json_lines, mapping

from .names import TOOL_NAMES

#: Longest tool output kept in an event payload.
OUTPUT_LIMIT = 4000
#: ``codex_error_info`` (task_complete / turn errors) → ``error_type`` of the error model_response.
ERROR_TYPES: dict[str, str] = {
    "internal_server_error": "http_500",
    "server_overloaded": "http_503",
    "bad_request": "http_400",
    "unauthorized": "http_401",
    "usage_limit_exceeded": "http_429",
    "http_connection_failed": "connection_error",
    "response_stream_connection_failed": "connection_error",
    "response_stream_disconnected": "stream_disconnected",
    "context_window_exceeded": "context_window_exceeded",
}
#: Text of a backend refusing tools (Ollama's HTTP 400, which the proxy also recognizes).
UNSUPPORTED_MARKER = "does not support tools"
#: What the stdout items stand for: item type → the tool that produces it.
STDOUT_ITEM_TOOLS: dict[str, str] = {"command_execution": "exec_command", "file_change": "apply_patch"}

_EXIT_PATTERNS = (re.compile(r"Process exited with code (-?\d{1,9})\b"), re.compile(r"^Exit code: (-?\d{1,9})\b", re.M))
_ERROR_OUTPUTS = ("failed to parse function arguments", "unsupported call", "apply_patch verification failed",
                  "invalid patch", "unknown tool", "execution error")


# ------------------------------------------------------------------------------------------ drafts

@dataclass
class _Draft:
    """An event being built; ids and parent links are resolved in :meth:`_Events.finish`."""

    fields: dict[str, Any]
    parent: "_Draft | None" = None
    via: "_Draft | None" = None
    """A tool result's start: the result takes its parent and response id (known once the response closes)."""
    event_id: str = ""


@dataclass
class _Events:
    phase: str
    artifact: str
    drafts: list[_Draft] = field(default_factory=list)

    def add(self, lineno: int, **fields: Any) -> _Draft:
        draft = _Draft({**fields, "raw_artifact_ref": f"{self.artifact}:{lineno}"})
        self.drafts.append(draft)
        return draft

    def finish(self) -> list[Event]:
        for n, draft in enumerate(self.drafts, start=1):
            draft.event_id = f"{self.phase}-B-{n}"
        events: list[Event] = []
        for n, draft in enumerate(self.drafts, start=1):
            fields = dict(draft.fields)
            parent = draft.parent
            if draft.via is not None:
                parent = parent or draft.via.parent
                fields["response_id"] = fields.get("response_id") or draft.via.fields.get("response_id")
            try:
                events.append(Event(event_id=draft.event_id, sequence=n, phase=self.phase, source_tier="B",
                                    source="agent_output", parent_id=parent.event_id if parent else None,
                                    **fields))
            except (ValidationError, ValueError, TypeError):
                continue
        return events


# ------------------------------------------------------------------------------------------- helpers

def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if f == f and abs(f) != float("inf") else None


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"… [{len(text) - OUTPUT_LIMIT} more characters]"


def _tool(raw_name: str | None) -> dict[str, Any]:
    name, kind = TOOL_NAMES.normalize(raw_name)
    return {"raw_name": raw_name, "name": name or None, "kind": kind}


def _text_of(content: Any) -> str:
    """The text of a message's content parts (``output_text`` / ``text``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


def _parse_arguments(raw: Any) -> tuple[Any, bool]:
    """Function-call arguments parsed when JSON; ``(value, malformed)``."""
    if not isinstance(raw, str):
        return raw, False
    try:
        return json.loads(raw), False
    except (ValueError, RecursionError):
        return raw, bool(raw.strip())


def reasoning_text(item: dict[str, Any]) -> str:
    """A ``reasoning`` item's text: its ``summary`` parts, else its raw ``content`` parts (``text`` of each)."""
    for key in ("summary", "content"):
        said = _text_of(item.get(key)).strip()
        if said:
            return said
    return ""


def output_text(output: Any) -> str | None:
    """A ``*_call_output`` item's output as text (a string, content parts, or ``{content: …}``)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _text_of(output)
    if isinstance(output, dict):
        inner = output.get("content")
        return inner if isinstance(inner, str) else _text_of(inner) or None
    return None


def result_status(item: dict[str, Any], output: str | None) -> tuple[str, int | None]:
    """``(status, exit_code)`` of a tool result, from codex's completed item when there is one, else
    from the output text codex returned to the model."""
    exit_code = _int(item.get("exit_code"))
    state = _str(item.get("status"))
    if exit_code is not None:
        return ("success" if exit_code == 0 and state != "failed" else "error"), exit_code
    if state in ("failed", "declined", "rejected", "error"):
        return "error", None
    if state == "completed" and item:
        return ("error" if item.get("error") else "success"), None
    text = output or ""
    for pattern in _EXIT_PATTERNS:
        match = pattern.search(text)
        if match:
            code = int(match.group(1))
            return ("success" if code == 0 else "error"), code
    lowered = text.lower()
    if any(marker in lowered for marker in _ERROR_OUTPUTS):
        return "error", None
    return "unknown", None


def _latency_ms(item: dict[str, Any]) -> float | None:
    duration = mapping(item.get("duration"))
    secs, nanos = _num(duration.get("secs")), _num(duration.get("nanos"))
    if secs is not None and nanos is not None:
        return secs * 1000 + nanos / 1e6
    started, completed = _num(item.get("started_at_ms")), _num(item.get("completed_at_ms"))
    if started is not None and completed is not None and completed >= started:
        return completed - started
    return None


def error_type_for(info: Any, message: str | None) -> str:
    """``error_type`` of a failed turn from codex's ``codex_error_info`` (a name or ``{name: …}``)."""
    if message and UNSUPPORTED_MARKER in message:
        return "backend_tool_unsupported"
    name = info
    if isinstance(info, dict) and info:
        name = next(iter(info))  # a variant with data: {"http_connection_failed": {...}}
    if isinstance(name, str):
        return ERROR_TYPES.get(name, name)
    return "agent_error"


# ------------------------------------------------------------------------------------------ rollout

@dataclass
class _Response:
    """Items of the model response being read (closed by its token_usage_record)."""

    first_ts: str | None = None
    first_line: int = 0
    position: int = 0
    texts: list[str] = field(default_factory=list)
    calls: list[_Draft] = field(default_factory=list)
    thoughts: list[_Draft] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.texts and not self.calls and self.first_ts is None


@dataclass
class RolloutParse:
    """What a rollout said: the events, the final answer, and whether any line was codex's."""

    events: list[Event]
    final_text: str | None
    recognized: bool


class _RolloutParser:
    def __init__(self, phase: str, artifact: str, completed: dict[str, dict[str, Any]]) -> None:
        self.out = _Events(phase, artifact)
        self.completed = completed
        self.response = _Response()
        self.starts: dict[str, _Draft] = {}
        self.final_text: str | None = None
        self.recognized = False
        self.responses = 0

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind, ts, payload = obj.get("type"), _str(obj.get("timestamp")), mapping(obj.get("payload"))
        if kind in ("session_meta", "response_item", "event_msg", "turn_context", "token_usage_record"):
            self.recognized = True
        if kind == "response_item":
            self.response_item(lineno, ts, payload)
        elif kind == "token_usage_record":
            self.close_response(lineno, ts, payload)
        elif kind == "event_msg" and payload.get("type") == "task_complete":
            self.task_complete(lineno, ts, payload)

    def _touch(self, lineno: int, ts: str | None) -> None:
        if self.response.empty:
            self.response.first_ts, self.response.first_line = ts, lineno
            self.response.position = len(self.out.drafts)

    def response_item(self, lineno: int, ts: str | None, item: dict[str, Any]) -> None:
        kind = _str(item.get("type")) or ""
        if kind == "message" and item.get("role") == "assistant":
            self._touch(lineno, ts)
            self.response.texts.append(_text_of(item.get("content")))
        elif kind == "reasoning":
            self._touch(lineno, ts)
            said = reasoning_text(item)
            if said:
                self.response.thoughts.append(self.out.add(lineno, event_type="thought", timestamp=ts,
                                                           status="success", payload={"text": _clip(said)}))
        elif kind.endswith("_call_output"):
            self.result(lineno, ts, item)
        elif kind.endswith("_call") and ("call_id" in item or "name" in item):
            self._touch(lineno, ts)
            self.start(lineno, ts, item, kind)

    def start(self, lineno: int, ts: str | None, item: dict[str, Any], kind: str) -> None:
        call_id = _str(item.get("call_id")) or None
        raw_name = _str(item.get("name")) or kind
        malformed = False
        if kind == "custom_tool_call":
            arguments, call_kind = _str(item.get("input")), "custom"
        elif "arguments" in item:
            (arguments, malformed), call_kind = _parse_arguments(item.get("arguments")), "function"
        else:
            arguments, call_kind = item.get("action"), kind
        draft = self.out.add(lineno, event_type="tool_call_start", tool_call_id=call_id, timestamp=ts,
                             status="started", error_type="malformed_arguments" if malformed else None,
                             payload={**_tool(raw_name), "arguments": arguments, "call_kind": call_kind})
        self.response.calls.append(draft)
        if call_id:
            self.starts.setdefault(call_id, draft)

    def result(self, lineno: int, ts: str | None, item: dict[str, Any]) -> None:
        call_id = _str(item.get("call_id")) or None
        start = self.starts.get(call_id) if call_id else None
        raw_name = start.fields["payload"].get("raw_name") if start is not None else None
        done = self.completed.get(call_id, {}) if call_id else {}
        text = output_text(item.get("output"))
        status, exit_code = result_status(done, text)
        draft = self.out.add(lineno, event_type="tool_call_result", tool_call_id=call_id, timestamp=ts,
                             status=status, exit_code=exit_code, latency_ms=_latency_ms(done),
                             error_type="tool_error" if status == "error" else None,
                             payload={**_tool(raw_name), "output": _clip(text)})
        draft.via = start

    def close_response(self, lineno: int, ts: str | None, record: dict[str, Any]) -> None:
        response = self.response
        self.response = _Response()
        self.responses += 1
        text = "".join(response.texts)
        draft = _Draft({
            "event_type": "model_response", "response_id": _str(record.get("response_id")) or None,
            "timestamp": response.first_ts or ts, "status": "success",
            "raw_artifact_ref": f"{self.out.artifact}:{lineno}",
            "payload": {"text": text or None, "tool_call_count": len(response.calls),
                        "usage": record.get("usage") if isinstance(record.get("usage"), dict) else None,
                        "turn_id": _str(record.get("turn_id"))},
        })
        position = response.position if not response.empty else len(self.out.drafts)
        self.out.drafts.insert(position, draft)
        for call in (*response.calls, *response.thoughts):
            call.parent = draft
            call.fields["response_id"] = draft.fields["response_id"]

    def task_complete(self, lineno: int, ts: str | None, payload: dict[str, Any]) -> None:
        last = _str(payload.get("last_agent_message"))
        if last is not None:
            self.final_text = last
        error = mapping(payload.get("error"))
        if error:
            message = _str(error.get("message"))
            self.out.add(lineno, event_type="model_response", timestamp=ts, status="error",
                         error_type=error_type_for(error.get("codex_error_info"), message),
                         payload={"error": message, "codex_error_info": error.get("codex_error_info")})


def _completed_items(lines: list[tuple[int, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``event_msg`` ``item_completed`` items by id (codex uses the call id for tool items)."""
    items: dict[str, dict[str, Any]] = {}
    for _, obj in lines:
        payload = mapping(obj.get("payload"))
        if obj.get("type") == "event_msg" and payload.get("type") == "item_completed":
            item = mapping(payload.get("item"))
            item_id = _str(item.get("id"))
            if item_id:
                items[item_id] = {**item, "started_at_ms": payload.get("started_at_ms"),
                                  "completed_at_ms": payload.get("completed_at_ms")}
    return items


def parse_rollout_bytes(data: bytes, phase: str, artifact: str) -> RolloutParse:
    """Events of a rollout transcript's bytes (see the module docstring). Never raises."""
    lines = list(json_lines(data))
    parser = _RolloutParser(phase, artifact, _completed_items(lines))
    for lineno, obj in lines:
        try:
            parser.feed(lineno, obj)
        except Exception:  # an odd line costs its own events, never the phase's
            continue
    return RolloutParse(parser.out.finish(), parser.final_text, parser.recognized)


def parse_rollout(path: Path, phase: str) -> RolloutParse:
    """:func:`parse_rollout_bytes` of a file (raises ``OSError`` when it cannot be read)."""
    return parse_rollout_bytes(path.read_bytes(), phase, path.name)


# ------------------------------------------------------------------------------------------- stdout

@dataclass
class StdoutParse:
    """What ``codex exec --json`` said: the events, the final answer, the thread id."""

    events: list[Event]
    final_text: str | None
    thread_id: str | None


class _StdoutParser:
    def __init__(self, phase: str, artifact: str) -> None:
        self.out = _Events(phase, artifact)
        self.starts: dict[str, _Draft] = {}
        self.final_text: str | None = None
        self.thread_id: str | None = None
        self.failed = False

    def feed(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "thread.started":
            self.thread_id = _str(obj.get("thread_id"))
        elif kind in ("item.started", "item.completed"):
            self.item(lineno, kind, mapping(obj.get("item")))
        elif kind == "turn.failed" and not self.failed:
            self.failed = True
            message = _str(mapping(obj.get("error")).get("message"))
            self.out.add(lineno, event_type="model_response", status="error",
                         error_type=error_type_for(None, message), payload={"error": message})

    def item(self, lineno: int, kind: str, item: dict[str, Any]) -> None:
        item_type = _str(item.get("type")) or ""
        item_id = _str(item.get("id"))
        if item_type == "reasoning" and kind == "item.completed":
            said = _str(item.get("text"))
            if said and said.strip():
                self.out.add(lineno, event_type="thought", status="success", payload={"text": _clip(said)})
            return
        if item_type == "agent_message" and kind == "item.completed":
            text = _str(item.get("text"))
            self.final_text = text
            self.out.add(lineno, event_type="model_response", status="success",
                         payload={"text": text, "item_id": item_id})
            return
        raw_name = STDOUT_ITEM_TOOLS.get(item_type)
        if raw_name is None:
            return
        if item_type == "command_execution":
            arguments: Any = {"command": item.get("command")}
        else:
            arguments = {"changes": item.get("changes")}
        start = self.starts.get(item_id) if item_id else None
        if start is None:
            start = self.out.add(lineno, event_type="tool_call_start", status="started",
                                 payload={**_tool(raw_name), "arguments": arguments, "item_id": item_id})
            if item_id:
                self.starts[item_id] = start
        if kind == "item.completed":
            status, exit_code = result_status(item, None)
            self.out.add(lineno, event_type="tool_call_result", status=status, exit_code=exit_code,
                         error_type="tool_error" if status == "error" else None,
                         payload={**_tool(raw_name), "output": _clip(_str(item.get("aggregated_output"))),
                                  "item_id": item_id})


def parse_stdout_bytes(data: bytes, phase: str, artifact: str) -> StdoutParse:
    """Events of ``codex exec --json`` output bytes (see the module docstring). Never raises."""
    parser = _StdoutParser(phase, artifact)
    for lineno, obj in json_lines(data):
        try:
            parser.feed(lineno, obj)
        except Exception:  # an odd line costs its own events, never the phase's
            continue
    return StdoutParse(parser.out.finish(), parser.final_text, parser.thread_id)


def parse_stdout(path: Path, phase: str) -> StdoutParse:
    """:func:`parse_stdout_bytes` of a file (raises ``OSError`` when it cannot be read)."""
    return parse_stdout_bytes(path.read_bytes(), phase, path.name)


# --------------------------------------------------------------------------------------------- both

@dataclass
class CodexParse:
    """The phase's events from the best source, and the final answer text."""

    events: list[Event]
    final_text: str | None
    source: str
    """``rollout`` or ``stdout``: which output the events came from."""


def parse_outputs(stdout: Path, rollout: Path | None, phase: str) -> CodexParse:
    """Events from the rollout when it is readable and codex's, else from stdout.

    Raises ``OSError`` only when stdout cannot be read (the runner always captures it).
    """
    out = parse_stdout(stdout, phase)
    if rollout is not None:
        try:
            got = parse_rollout(rollout, phase)
        except OSError:
            got = None
        if got is not None and got.recognized:
            return CodexParse(got.events, out.final_text if out.final_text is not None else got.final_text, "rollout")
    return CodexParse(out.events, out.final_text, "stdout")

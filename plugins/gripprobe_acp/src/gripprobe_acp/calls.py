"""ACP tool calls as the raw JSON-RPC messages carry them, merged by ``toolCallId`` (pure; never raises).

An agent reports a call in pieces and in no fixed order: a ``tool_call`` (often with an empty ``rawInput``),
then ``tool_call_update`` notifications that add the input, a title, content, and at last a ``completed`` or
``failed`` status (Cline sends an update *before* its ``tool_call``; pi streams the arguments in repeated
``pending`` updates). :class:`CallTracker` keeps the merged state of every call; the session uses it to name the
call a permission request is about, the parser to build the tier-B events.

Names: ACP gives a call a ``title`` (free text for the user) and a ``kind``, not a tool name. The name the model
called is where the agent puts it: ``_meta.toolName`` (Qwen Code), ``_meta.claudeCode.toolName`` (Claude's
adapter), a ``name`` field outside the schema (Claude's and codex's adapters), else the title of the first
``tool_call`` when it is one word (opencode: ``write``, ``bash``) or starts with one before ``:`` (Cline).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gripprobe_core.plugin import mapping, text

#: ACP's ToolKind → GripProbe's tool kinds.
ACP_KINDS: dict[str, str] = {
    "edit": "write", "delete": "write", "move": "write",
    "execute": "execute", "read": "read", "search": "search", "fetch": "fetch",
}
#: Statuses that end a call.
DONE = {"completed": "success", "failed": "error"}
#: Longest output kept in an event payload.
OUTPUT_LIMIT = 4000
#: A title that is a tool name (one word, as opencode's titles are).
NAME_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def gripprobe_kind(acp_kind: Any) -> str:
    """GripProbe's kind (read|write|execute|search|fetch|other) for an ACP ``kind``."""
    return ACP_KINDS.get(acp_kind, "other") if isinstance(acp_kind, str) else "other"


def explicit_name(update: dict[str, Any]) -> str | None:
    """The tool name an agent states outside the title (see the module docstring), or None."""
    meta = mapping(update.get("_meta"))
    for found in (meta.get("toolName"), mapping(meta.get("claudeCode")).get("toolName"), update.get("name")):
        if isinstance(found, str) and found.strip():
            return found.strip()
    return None


def name_from_title(title: str | None) -> str | None:
    """A title that names a tool: one word, or one word before ``:``; else None."""
    if not isinstance(title, str):
        return None
    head = title.strip().split(":", 1)[0].strip()
    return head if NAME_LIKE.match(head) else None


def _nonempty(value: Any) -> bool:
    return value not in (None, "", {}, [])


def output_text(raw_output: Any, content: Any) -> str | None:
    """A call's output as text: its ``rawOutput`` (a string, or an object's ``output``/``result``/``error``, else the
    object as JSON), else the text of its ``content`` blocks; truncated to :data:`OUTPUT_LIMIT`. None when none."""
    out: str | None = None
    if isinstance(raw_output, str):
        out = raw_output
    elif isinstance(raw_output, dict):
        for key in ("output", "result", "error", "stdout", "formatted_output"):
            if isinstance(raw_output.get(key), str):
                out = raw_output[key]
                break
        else:
            out = _json(raw_output)
    elif _nonempty(raw_output):
        out = _json(raw_output)
    if out is None and isinstance(content, list):
        parts = []
        for block in content:
            block = mapping(block)
            inner = mapping(block.get("content"))
            if block.get("type") == "content" and isinstance(inner.get("text"), str):
                parts.append(inner["text"])
            elif block.get("type") == "diff" and isinstance(block.get("path"), str):
                parts.append(f"diff {block['path']}")
        out = "\n".join(parts) if parts else None
    return out[:OUTPUT_LIMIT] if isinstance(out, str) else None


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


@dataclass
class CallState:
    """What the messages so far say about one call."""

    tool_call_id: str
    first_line: int | None = None
    first_time: str | None = None
    stated_name: str | None = None
    first_title: str | None = None
    title: str | None = None
    acp_kind: str | None = None
    raw_input: Any = None
    status: str | None = None
    raw_output: Any = None
    content: Any = None
    locations: Any = None
    exit_code: int | None = None
    done_line: int | None = None
    done_time: str | None = None

    @property
    def raw_name(self) -> str | None:
        return self.stated_name or name_from_title(self.first_title) or name_from_title(self.title)

    @property
    def kind(self) -> str:
        return gripprobe_kind(self.acp_kind)

    @property
    def done(self) -> bool:
        return self.status in DONE

    @property
    def result_status(self) -> str:
        """``success`` / ``error`` of a finished call: ACP's status, except that a command that exited non-zero
        failed (opencode reports such a ``bash`` call ``completed``, with the exit code beside its output)."""
        status = DONE.get(self.status or "", "unknown")
        return "error" if status == "success" and self.exit_code not in (None, 0) else status

    def merge(self, update: dict[str, Any], line: int | None = None, time: str | None = None,
              *, announced: bool = False) -> None:
        """Take what ``update`` (a ``tool_call``/``tool_call_update`` object, or a permission request's
        ``toolCall``) adds. ``announced``: it is the call's ``tool_call`` message."""
        if self.first_line is None:
            self.first_line, self.first_time = line, time
        name = explicit_name(update)
        if name and not self.stated_name:
            self.stated_name = name
        title = text(update.get("title"))
        if title:
            if announced and self.first_title is None:
                self.first_title = title
            self.title = title
        if isinstance(update.get("kind"), str):
            self.acp_kind = update["kind"]
        if _nonempty(update.get("rawInput")):
            self.raw_input = update["rawInput"]
        if _nonempty(update.get("rawOutput")):
            self.raw_output = update["rawOutput"]
        if _nonempty(update.get("content")):
            self.content = update["content"]
        if _nonempty(update.get("locations")):
            self.locations = update["locations"]
        for exit_code in (mapping(mapping(update.get("_meta")).get("terminal_exit")).get("exit_code"),  # codex
                          mapping(mapping(update.get("rawOutput")).get("metadata")).get("exit")):     # opencode
            if isinstance(exit_code, int) and not isinstance(exit_code, bool):
                self.exit_code = exit_code
        status = text(update.get("status"))
        if status:
            self.status = status
            if status in DONE:
                self.done_line, self.done_time = line, time


@dataclass
class CallTracker:
    """Every call of a session, by ``toolCallId``, in the order first seen."""

    calls: dict[str, CallState] = field(default_factory=dict)

    def get(self, tool_call_id: str) -> CallState:
        if tool_call_id not in self.calls:
            self.calls[tool_call_id] = CallState(tool_call_id)
        return self.calls[tool_call_id]

    def see(self, message: Any, line: int | None = None, time: str | None = None) -> CallState | None:
        """Merge one incoming JSON-RPC message when it is a ``session/update`` about a tool call; the call's
        state, or None for any other message."""
        message = mapping(message)
        if message.get("method") == "session/request_permission":  # completes (or announces) the call
            call = mapping(mapping(message.get("params")).get("toolCall"))
            call_id = text(call.get("toolCallId"))
            if not call_id:
                return None
            known = call_id in self.calls
            state = self.get(call_id)
            if not known:
                state.merge({k: v for k, v in call.items() if k != "status"}, line, time)
            elif state.raw_input is None and _nonempty(call.get("rawInput")):
                state.raw_input = call["rawInput"]  # what the call's own updates never said
            return state
        if message.get("method") != "session/update":
            return None
        update = mapping(mapping(message.get("params")).get("update"))
        kind = update.get("sessionUpdate")
        call_id = text(update.get("toolCallId"))
        if kind not in ("tool_call", "tool_call_update") or not call_id:
            return None
        state = self.get(call_id)
        state.merge(update, line, time, announced=kind == "tool_call")
        return state

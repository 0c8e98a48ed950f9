"""Tool results carried by a model request, and how each one went (success, error or unknown).

An agent reports what a tool did by sending its output back in the next request:

* Chat Completions: ``messages[]`` with ``role: "tool"`` and ``tool_call_id`` (legacy ``role:
  "function"`` with ``name``);
* Responses API: ``input[]`` items ``function_call_output`` / ``custom_tool_call_output`` (any
  ``*_call_output``) with ``call_id``;
* Ollama ``/api/chat``: ``messages[]`` with ``role: "tool"`` (``tool_name``, ``tool_call_id`` optional);
* Anthropic Messages: a ``user`` message's ``tool_result`` blocks with ``tool_use_id`` (``is_error: true``
  is an error; absent or false, success unless the text says otherwise), naming an assistant message's
  ``tool_use`` block.

The request holds the whole conversation, so it also names each result's call (the assistant
message or ``function_call`` item with the same id). :func:`classify_output` decides the status
from protocol status fields and the output text (rules in ``docs/telemetry.md``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .protocols import iter_text_parts

__all__ = ["ToolResult", "classify_output", "request_tool_results"]

_EXIT = re.compile(
    r"(?i)(?:\bexit(?:ed)?[ _]?(?:code|status)|\bexited with (?:code|status)|\breturn ?code|\breturncode)"
    r"[\"']?\s*(?:[:=]|is|of)?\s*(-?\d{1,4})\b")
_ERROR_START = re.compile(
    r"(?i)^\s*(?:error\b|err:|fatal:|failed to\b|failure:|exception:|traceback \(most recent call last\)"
    r"|timed out\b|command failed|permission denied|no such file or directory)")
_ERROR_STATUSES = frozenset({"error", "failed", "failure", "errored"})
_SUCCESS_STATUSES = frozenset({"success", "succeeded", "ok"})
_SCAN = 4096


@dataclass(frozen=True)
class ToolResult:
    """One tool result in a request. ``output`` is the full text (callers truncate)."""

    tool_call_id: str | None
    name: str | None
    output: str
    status: str
    exit_code: int | None = None


def classify_output(output: str, protocol_status: Any = None) -> tuple[str, int | None]:
    """``(status, exit_code)`` of a tool result: ``success``, ``error`` or ``unknown``.

    First that applies: a protocol status field saying error/failed → error, success/ok → success;
    an exit code in the output's first 4 KiB (``exit code: N``, ``Exit code: N``, ``Process exited
    with code N``, ``"exit_code": N`` ...) → error when N ≠ 0, success when N = 0; the output starting
    with an error marker (``Error:``, ``error:``, ``fatal:``, ``failed to``, ``Traceback``, ``timed
    out`` ...) → error; a JSON object output with a truthy ``error`` or ``success: false`` → error;
    else unknown. Never raises.
    """
    if isinstance(protocol_status, str):
        st = protocol_status.strip().lower()
        if st in _ERROR_STATUSES:
            return "error", None
        if st in _SUCCESS_STATUSES:
            return "success", None
    if not isinstance(output, str):
        return "unknown", None
    head = output[:_SCAN]
    if _ERROR_START.match(head):
        code = _exit_code(head)
        return "error", code
    code = _exit_code(head)
    if code is not None:
        return ("success" if code == 0 else "error"), code
    stripped = head.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(output)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if obj.get("error") or obj.get("success") is False or obj.get("is_error") is True:
                return "error", None
    return "unknown", None


def _exit_code(text: str) -> int | None:
    m = _EXIT.search(text)
    if m is None:
        return None
    try:
        return int(m.group(1))
    except ValueError:
        return None


def _output_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    parts = list(iter_text_parts(value))
    if parts:
        return "\n".join(parts)
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def request_tool_results(body: Any) -> list[ToolResult]:
    """Every tool result in a request body (Chat Completions, Responses, Ollama or Anthropic), in order."""
    if not isinstance(body, dict):
        return []
    out: list[ToolResult] = []
    messages = body.get("messages")
    if isinstance(messages, list):
        out += _from_messages(messages)
    items = body.get("input")
    if isinstance(items, list):
        out += _from_input_items(items)
    return out


def _from_messages(messages: list[Any]) -> list[ToolResult]:
    names: dict[str, str] = {}
    out: list[ToolResult] = []
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        content = msg.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if role == "assistant":
            calls = msg.get("tool_calls")
            for tc in calls if isinstance(calls, list) else []:
                if isinstance(tc, dict) and _str(tc.get("id")):
                    fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                    if _str(fn.get("name")):
                        names[tc["id"]] = fn["name"]
            for b in blocks:  # Anthropic: tool_use blocks
                if b.get("type") == "tool_use" and _str(b.get("id")) and _str(b.get("name")):
                    names[b["id"]] = b["name"]
        elif role == "user":
            for b in blocks:  # Anthropic: tool_result blocks
                if b.get("type") == "tool_result":
                    call_id = _str(b.get("tool_use_id"))
                    output = _output_text(b.get("content"))
                    status, code = _anthropic_status(output, b.get("is_error"))
                    out.append(ToolResult(call_id, names.get(call_id) if call_id else None, output, status, code))
        elif role in ("tool", "function"):
            call_id = _str(msg.get("tool_call_id")) or _str(msg.get("id"))
            name = _str(msg.get("name")) or _str(msg.get("tool_name")) or (names.get(call_id) if call_id else None)
            output = _output_text(msg.get("content"))
            status, code = classify_output(output, msg.get("status"))
            out.append(ToolResult(call_id, name, output, status, code))
    return out


def _anthropic_status(output: str, is_error: Any) -> tuple[str, int | None]:
    """A ``tool_result`` block's status: ``is_error: true`` is an error (its exit code still read from the
    text); an absent or false ``is_error`` means success on this wire unless the text says otherwise."""
    status, code = classify_output(output)
    if is_error is True:
        return "error", code
    return ("success" if status == "unknown" else status), code


def _from_input_items(items: list[Any]) -> list[ToolResult]:
    names: dict[str, str] = {}
    out: list[ToolResult] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        typ = item.get("type")
        if not isinstance(typ, str):
            continue
        if typ.endswith("_call") and _str(item.get("call_id")) and _str(item.get("name")):
            names[item["call_id"]] = item["name"]
        elif typ.endswith("_call_output"):
            call_id = _str(item.get("call_id"))
            name = names.get(call_id) if call_id else None
            output = _output_text(item.get("output"))
            status, code = classify_output(output, item.get("status") if item.get("status") in (
                *_ERROR_STATUSES, *_SUCCESS_STATUSES) else None)
            out.append(ToolResult(call_id, name, output, status, code))
    return out

"""Anthropic Messages API (``POST /v1/messages``): request parsing, JSON replies and the SSE event stream.

The wire Claude Code speaks, and that Ollama (since 0.14), llama.cpp's ``llama-server`` and vLLM serve
beside their OpenAI-compatible routes. Messages are converted to the Chat Completions shape so profiles
and dialects see one conversation whatever the wire:

- ``system`` (a string or a list of text blocks) → a leading ``system`` message;
- an assistant message's ``text`` blocks → its content, its ``tool_use`` blocks ``{id, name, input}`` →
  ``tool_calls`` (``input`` as JSON text); ``thinking`` / ``redacted_thinking`` blocks are skipped;
- a user message's ``tool_result`` blocks ``{tool_use_id, content, is_error}`` → one ``tool`` message each
  (an error result's text is prefixed ``Error:``); text blocks that come *with* tool results (Claude Code's
  reminders) are appended to the last of them, so they never read as a new user turn; a user message
  without tool results stays a ``user`` message; images and documents are skipped.
- ``tools`` entries with an ``input_schema`` are function tools; server tools (``web_search_*``,
  ``bash_*`` …, which have a ``type`` and no schema) are not offered to the oracle.

Replies: a ``message`` whose ``content`` holds a ``text`` block (when there is text, or nothing else) and
a ``tool_use`` block; ``stop_reason`` ``tool_use`` or ``end_turn``. The stream is the real event
sequence: ``message_start`` (usage so far), ``ping``, per block ``content_block_start`` → deltas
(``text_delta``; ``input_json_delta`` carrying the arguments' raw text in pieces) → ``content_block_stop``,
then ``message_delta`` (``stop_reason``, output usage) and ``message_stop``; frames are ``event: <type>`` +
``data: <json>``. Usage reports a prefix cache as Anthropic does: ``input_tokens`` is what was not read
from the cache, ``cache_read_input_tokens`` what was (the conversation before its last message).

A non-streamed reply cannot carry arguments that are not a JSON object (``input`` is an object): a
malformed call (``malformed-args``) is sent with its raw text as ``input``, a string, as a broken server
would; streamed, it is the ``input_json_delta`` text, exactly as on the other wires.
"""

from __future__ import annotations

import json
from typing import Any

from .conversation import ChatRequest, RequestError, ToolInfo, Turn, message_text
from .wire import JSONDict, ReplyMeta, json_bytes, split_pieces

__all__ = ["AnthropicMessagesWire", "anthropic_error", "anthropic_usage", "count_tokens", "message_events",
           "message_json", "parse_messages_request"]

#: Error ``type`` for an HTTP status, as Anthropic names them.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


class AnthropicMessagesWire:
    """The :class:`~.wire.WireProtocol` adapter for the Anthropic Messages API."""

    name = "anthropic_messages"
    stream_content_type = "text/event-stream"
    carries_tool_calls = True

    def parse(self, body: Any) -> ChatRequest:
        return parse_messages_request(body)

    def error_body(self, status: int, message: str) -> JSONDict:
        return anthropic_error(status, message)

    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict:
        return message_json(turn, meta)

    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]:
        return [f"event: {e['type']}\ndata: ".encode() + json_bytes(e) + b"\n\n" for e in message_events(turn, meta)]


def anthropic_error(status: int, message: str) -> JSONDict:
    """An Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# ------------------------------------------------------------------------------------------ parsing

def parse_messages_request(body: Any) -> ChatRequest:
    """Normalize a decoded Messages body. Raises :class:`~.conversation.RequestError` on a bad shape."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not all(isinstance(m, dict) for m in raw_messages):
        raise RequestError("'messages' must be a list of objects")
    messages: list[JSONDict] = []
    system = _blocks_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for msg in raw_messages:
        messages += _to_chat(msg)
    model = body.get("model")
    return ChatRequest(model=model if isinstance(model, str) else "", messages=messages,
                       tools=parse_anthropic_tools(body.get("tools")), stream=body.get("stream") is True,
                       include_usage=True, raw=body, protocol="anthropic_messages")


def parse_anthropic_tools(tools: Any) -> list[ToolInfo]:
    """Client tools (``{name, description, input_schema}``); server tools are left out."""
    out: list[ToolInfo] = []
    if not isinstance(tools, list):
        return out
    for entry in tools:
        if not isinstance(entry, dict) or not isinstance(entry.get("input_schema"), dict):
            continue
        name, desc = entry.get("name"), entry.get("description")
        if isinstance(name, str) and name:
            out.append(ToolInfo(name=name, description=desc if isinstance(desc, str) else "",
                                parameters=entry["input_schema"]))
    return out


def _blocks_text(content: Any) -> str:
    """The text of a string or of the text blocks of a list (tool_use, thinking and image blocks have none)."""
    return message_text({"content": content})


def _to_chat(msg: JSONDict) -> list[JSONDict]:
    """One Messages message as Chat Completions messages (see the module docstring)."""
    role = msg.get("role")
    content = msg.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] \
        if isinstance(content, str) else []
    blocks = [b for b in blocks if isinstance(b, dict)]
    if role == "assistant":
        out: JSONDict = {"role": "assistant", "content": _blocks_text(blocks) or None}
        calls = [{"id": _str(b.get("id")), "type": "function",
                  "function": {"name": _str(b.get("name")), "arguments": _input_text(b.get("input"))}}
                 for b in blocks if b.get("type") == "tool_use"]
        if calls:
            out["tool_calls"] = calls
        return [out]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    text = _blocks_text(blocks)
    if not results:
        return [{"role": role if isinstance(role, str) else "user", "content": text}]
    out_msgs = []
    for b in results:
        body = _blocks_text(b.get("content"))
        out_msgs.append({"role": "tool", "tool_call_id": _str(b.get("tool_use_id")),
                         "content": f"Error: {body}" if b.get("is_error") is True else body})
    if text:
        out_msgs[-1]["content"] += "\n" + text
    return out_msgs


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value if value is not None else {}, ensure_ascii=False)
    except (TypeError, ValueError):
        return "{}"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def count_tokens(body: Any) -> JSONDict:
    """``POST /v1/messages/count_tokens``: ``{"input_tokens": n}`` by the oracle's own estimate."""
    request = parse_messages_request(body)
    return {"input_tokens": max(1, len(json.dumps(request.messages, ensure_ascii=False)) // 4)}


# ----------------------------------------------------------------------------------------- encoding

def anthropic_usage(meta: ReplyMeta, *, output: bool = True) -> JSONDict:
    """The oracle's estimate in Anthropic's shape: the cached prefix is ``cache_read_input_tokens`` and not
    part of ``input_tokens``."""
    u = meta.usage
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"input_tokens": u["prompt_tokens"] - cached, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": u["completion_tokens"] if output else 1}


def _tool_use(turn: Turn, meta: ReplyMeta, *, streaming: bool = False) -> JSONDict:
    call = turn.tool_call
    assert call is not None
    if streaming:
        value: Any = {}
    else:
        try:
            value = json.loads(call.arguments)
        except ValueError:
            value = call.arguments
    return {"type": "tool_use", "id": meta.call_id, "name": call.name, "input": value}


THINKING_SIGNATURE = "gripprobe-oracle"
"""The ``signature`` of the oracle's thinking blocks (a real one is opaque too; agents send it back as is)."""


def _blocks(turn: Turn, meta: ReplyMeta) -> list[JSONDict]:
    blocks: list[JSONDict] = []
    if turn.reasoning:
        blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": THINKING_SIGNATURE})
    if turn.text or turn.tool_call is None:
        blocks.append({"type": "text", "text": turn.text})
    if turn.tool_call is not None:
        blocks.append(_tool_use(turn, meta))
    return blocks


def _stop_reason(turn: Turn) -> str:
    return "tool_use" if turn.tool_call is not None else "end_turn"


def message_json(turn: Turn, meta: ReplyMeta) -> JSONDict:
    """A non-streamed ``message`` object."""
    return {"id": f"msg_oracle_{meta.n}", "type": "message", "role": "assistant", "model": meta.request.model,
            "content": _blocks(turn, meta), "stop_reason": _stop_reason(turn), "stop_sequence": None,
            "usage": anthropic_usage(meta)}


def message_events(turn: Turn, meta: ReplyMeta) -> list[JSONDict]:
    """The SSE events of a streamed reply, in order."""
    start = {"id": f"msg_oracle_{meta.n}", "type": "message", "role": "assistant", "model": meta.request.model,
             "content": [], "stop_reason": None, "stop_sequence": None, "usage": anthropic_usage(meta, output=False)}
    events: list[JSONDict] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    pieces = meta.pieces
    for index, block in enumerate(_blocks(turn, meta)):
        if block["type"] == "thinking":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece}}
                       for piece in split_pieces(turn.reasoning, pieces or 3)]
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "signature_delta", "signature": THINKING_SIGNATURE}})
        elif block["type"] == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                       for piece in split_pieces(turn.text, pieces or 3)]
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": _tool_use(turn, meta, streaming=True)})
            raw = turn.tool_call.arguments if turn.tool_call else ""
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}
                       for piece in split_pieces(raw, pieces or 4)]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": _stop_reason(turn), "stop_sequence": None},
                   "usage": {"output_tokens": meta.usage["completion_tokens"]}})
    events.append({"type": "message_stop"})
    return events

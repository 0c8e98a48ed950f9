"""OpenAI Chat Completions encoding (``POST /v1/chat/completions``): JSON and SSE."""

from __future__ import annotations

from typing import Any

from .conversation import ChatRequest, Turn, parse_chat_request
from .wire import JSONDict, ReplyMeta, json_bytes, openai_error, split_pieces


class ChatCompletionsWire:
    """The :class:`~.wire.WireProtocol` adapter for Chat Completions."""

    name = "chat_completions"
    stream_content_type = "text/event-stream"
    carries_tool_calls = True

    def parse(self, body: Any) -> ChatRequest:
        return parse_chat_request(body)

    def error_body(self, status: int, message: str) -> JSONDict:
        return openai_error(status, message)

    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict:
        return chat_completion_json(turn, response_id=f"chatcmpl-oracle-{meta.n}", model=meta.request.model,
                                    tool_call_id=meta.call_id, usage=meta.usage, created=meta.created)

    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]:
        chunks = chat_stream_chunks(turn, response_id=f"chatcmpl-oracle-{meta.n}", model=meta.request.model,
                                    tool_call_id=meta.call_id,
                                    usage=meta.usage if meta.request.include_usage else None,
                                    pieces=meta.pieces, created=meta.created)
        return [b"data: " + json_bytes(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def _tool_call_json(turn: Turn, tool_call_id: str | None) -> list[JSONDict]:
    call = turn.tool_call
    if call is None:
        return []
    if call.kind == "custom":
        return [{"id": tool_call_id, "type": "custom", "custom": {"name": call.name, "input": call.arguments}}]
    return [{"id": tool_call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]


def chat_completion_json(turn: Turn, *, response_id: str, model: str, tool_call_id: str | None,
                         usage: JSONDict, created: int = 0) -> JSONDict:
    """A non-streamed ``chat.completion`` object."""
    message: JSONDict = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_call is not None:
        message["tool_calls"] = _tool_call_json(turn, tool_call_id)
    return {"id": response_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
            "usage": usage}


def chat_stream_chunks(turn: Turn, *, response_id: str, model: str, tool_call_id: str | None,
                       usage: JSONDict | None, pieces: int = 0, created: int = 0) -> list[JSONDict]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order (without ``[DONE]``).

    Role first, then text in pieces (``pieces`` or 3), then the tool call: id and name with empty
    arguments, then the arguments in pieces (``pieces`` or 4); a finish chunk; a usage chunk (empty
    choices) when ``usage`` is given. A custom (freeform) call is one chunk with its whole input.
    """
    def chunk(delta: JSONDict, finish: str | None = None) -> JSONDict:
        return {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if turn.reasoning:
        chunks += [chunk({"reasoning_content": piece}) for piece in split_pieces(turn.reasoning, pieces or 3)]
    chunks += [chunk({"content": piece}) for piece in split_pieces(turn.text, pieces or 3)]
    call = turn.tool_call
    if call is not None and call.kind == "custom":
        chunks.append(chunk({"tool_calls": [{"index": 0, **_tool_call_json(turn, tool_call_id)[0]}]}))
    elif call is not None:
        chunks.append(chunk({"tool_calls": [{"index": 0, "id": tool_call_id, "type": "function",
                                             "function": {"name": call.name, "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                   for piece in split_pieces(call.arguments, pieces or 4)]
    chunks.append(chunk({}, turn.finish_reason))
    if usage is not None:
        chunks.append({"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage})
    return chunks

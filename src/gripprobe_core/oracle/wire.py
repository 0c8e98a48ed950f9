"""What every protocol front end of the oracle shares: the adapter contract and small encoders.

A :class:`WireProtocol` adapter knows one wire format (Chat Completions, Responses, Ollama ``/api/chat``,
Ollama ``/api/generate``): it parses an HTTP body into a :class:`~.plan.ChatRequest` and encodes a
:class:`~.plan.Turn` as one JSON reply or as the frames of a stream. Adapters never do I/O; the
server (``server.py``) reads bodies, writes bytes and paces them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from .conversation import ChatRequest, Turn

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class ReplyMeta:
    """Everything an adapter needs besides the turn.

    ``n`` numbers the request (response ids derive from it); ``call_id`` is the id of the turn's
    structured tool call (None without one); ``usage`` is :func:`estimate_usage`'s count;
    ``pieces`` (0: the adapter's default) is how many pieces text and arguments are streamed in;
    ``created`` is the Unix time of the reply.
    """

    n: int
    request: ChatRequest
    call_id: str | None
    usage: JSONDict
    created: int
    pieces: int = 0


class WireProtocol(Protocol):
    """One wire format. ``name`` is the protocol name used in the ground truth and the request log
    (``chat_completions`` | ``responses`` | ``ollama_chat`` | ``ollama_generate``);
    ``stream_content_type`` the Content-Type of its streams; ``carries_tool_calls`` False when the
    format has no way to send a structured call (then the turn's call is neither sent nor recorded).

    - ``parse(body)``: the decoded JSON body → request; raises :class:`~.plan.RequestError` on a bad shape.
    - ``error_body(status, message)``: the JSON body of an HTTP error in this format.
    - ``reply_json(turn, meta)``: the whole reply as one JSON document.
    - ``reply_frames(turn, meta)``: the stream as a list of byte frames, written in order.
    """

    name: str
    stream_content_type: str
    carries_tool_calls: bool

    def parse(self, body: Any) -> ChatRequest: ...
    def error_body(self, status: int, message: str) -> JSONDict: ...
    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict: ...
    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]: ...


def split_pieces(text: str, n: int = 3) -> list[str]:
    """``text`` cut into at most ``n`` non-empty consecutive pieces (``[]`` for empty text)."""
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def estimate_usage(request: ChatRequest, turn: Turn) -> JSONDict:
    """Deterministic token counts (~4 characters a token) in the Chat Completions shape. The conversation
    before its last message counts as served from a prompt cache (``prompt_tokens_details.cached_tokens``),
    as a real server's prefix cache would: the cost columns then have cached tokens to price."""
    prompt = max(1, len(json.dumps(request.messages, ensure_ascii=False)) // 4)
    earlier = request.messages[:-1]
    cached = min(prompt, len(json.dumps(earlier, ensure_ascii=False)) // 4) if len(earlier) > 1 else 0
    out = len(turn.text) + (len(turn.tool_call.name) + len(turn.tool_call.arguments) if turn.tool_call else 0)
    completion = max(1, out // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def json_bytes(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def openai_error(status: int, message: str) -> JSONDict:
    """An OpenAI-style error body (``type`` ``invalid_request_error`` for 4xx, ``server_error`` else)."""
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}

"""What a model call cost, for the phase's token budget (``--max-tokens-per-phase``).

The backend's own usage when its answer reports one (any protocol's shape, :func:`~.protocols.usage_of`);
else, for a call the backend answered (2xx), an estimate from the bodies: :data:`BYTES_PER_TOKEN` bytes a
token of the request body (all of it: messages, tool schemas, JSON) plus the reply (its text and tool
calls, UTF-8). Streamed Chat Completions calls that did not ask for ``stream_options.include_usage`` (the
OpenAI SDK's default) carry no usage, and neither may other servers' streams: they are counted this way,
so no model call is free. A call the backend refused (4xx/5xx) or never saw costs nothing. Why count
rather than ask the backend for usage: docs/proxy.md "Token budgets".
"""

from __future__ import annotations

from typing import Any

__all__ = ["BYTES_PER_TOKEN", "STREAM_BYTES_PER_TOKEN", "bytes_estimate", "call_tokens"]

BYTES_PER_TOKEN = 3
"""Bytes counted as one token in an estimate: fewer than BPE tokenizers average on English text (about 4)
and on par with code and JSON, so an estimate errs on the side of spending (conservative for a budget)."""
STREAM_BYTES_PER_TOKEN = 32
"""For a reply whose text went past what the observer assembles (256K characters), the raw bytes of the
whole response counted at this rate instead when that is more (a streamed chunk carrying one token is
around 100 bytes of framing and JSON)."""


def _ceil_div(n: int, d: int) -> int:
    return -(-max(0, n) // d)


def bytes_estimate(request_bytes: int, response_bytes: int) -> int:
    """A bound for a call whose reply could not be parsed (the recorder died with it): every byte each
    way at :data:`BYTES_PER_TOKEN`, at least 1."""
    return max(1, _ceil_div(request_bytes, BYTES_PER_TOKEN) + _ceil_div(response_bytes, BYTES_PER_TOKEN))


def call_tokens(*, status: Any, usage: dict[str, Any] | None, request_bytes: int, reply_bytes: int,
                response_bytes: int = 0, reply_cut: bool = False) -> tuple[int, bool]:
    """``(tokens, estimated)`` of one model call: the reported usage's total (prompt + completion) when
    there is one, else an estimate for a call the backend answered (2xx), else 0. ``reply_bytes``: the
    UTF-8 size of the reply's text and tool calls as assembled; ``reply_cut``: the text went past what was
    assembled (then ``response_bytes`` / :data:`STREAM_BYTES_PER_TOKEN` counts when larger)."""
    if isinstance(usage, dict):
        total = usage.get("total_tokens")
        if not isinstance(total, int) or isinstance(total, bool):
            total = sum(v for v in (usage.get("prompt_tokens"), usage.get("completion_tokens"))
                        if isinstance(v, int) and not isinstance(v, bool))
        if total > 0:
            return total, False
    if not (isinstance(status, int) and 200 <= status < 300):
        return 0, False
    completion = _ceil_div(reply_bytes, BYTES_PER_TOKEN)
    if reply_cut:
        completion = max(completion, _ceil_div(response_bytes, STREAM_BYTES_PER_TOKEN))
    return max(1, _ceil_div(request_bytes, BYTES_PER_TOKEN) + max(1, completion)), True

"""Time to first token is the first response object that carries output, not the first byte (issue 22).

llama-server writes an SSE comment every so often while it reads a long prompt, then a role-only delta,
then the first text; it ends with its own ``timings``. Through a real recording proxy (in the recorder
process and in-process), to a real upstream on 127.0.0.1 that does exactly that.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from gripprobe_core.proxy import read_records
from gripprobe_core.proxy.observe import ExchangeObserver, carries_output, server_timings
from gripprobe_core.proxy.recorder_client import close_recorder, get_recorder
from gripprobe_core.telemetry.usage import calls_from_records, summarize
from proxy_helpers import proxied, run, serving

PREFILL_S = 0.6
TIMINGS = {"prompt_n": 2434, "prompt_ms": 174123.5, "predicted_n": 12, "predicted_ms": 3900.2,
           "predicted_per_second": 3.08, "cache_n": 152}


def _chunk(delta: dict, **extra) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                        "finish_reason": None}], **extra}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def slow_prefill(request: web.Request) -> web.StreamResponse:
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for _ in range(3):  # keep-alive comments while "reading the prompt"
        await resp.write(b": ping\n\n")
        await asyncio.sleep(PREFILL_S / 3)
    await resp.write(_chunk({"role": "assistant", "content": ""}))  # role only: no output yet
    await asyncio.sleep(0.05)
    await resp.write(_chunk({"content": "Hello"}))
    await resp.write(_chunk({}, timings=TIMINGS, usage={"prompt_tokens": 2434, "completion_tokens": 12}))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


@pytest.mark.parametrize("where", ["recorder", "in-process"])
def test_ttft_waits_for_output_and_the_server_timings_are_kept(tmp_path: Path, where: str) -> None:
    record = tmp_path / "r.jsonl"
    kw = {"recorder": get_recorder()} if where == "recorder" else {"observer_factory": ExchangeObserver}

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", slow_prefill)
        async with serving(app) as up, proxied(up, record, **kw) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.base_url + "/v1/chat/completions",
                                  json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
                    assert r.status == 200
                    await r.read()

    try:
        run(main())
    finally:
        if where == "recorder":
            close_recorder()
    (rec,) = read_records(record)
    ttfb, ttft = rec["x_gripprobe_ttfb_ms"], rec["x_gripprobe_ttft_ms"]
    assert ttfb < 0.2 * PREFILL_S * 1000  # the first comment came at once
    assert PREFILL_S * 1000 <= ttft <= rec["x_gripprobe_duration_ms"], (ttfb, ttft)
    assert rec["x_gripprobe_server_timings"] == TIMINGS
    usage = summarize(calls_from_records([rec]), "A")
    assert usage.ttft_ms == ttft and usage.generation_s is not None and usage.generation_s < 0.5


def test_records_from_before_ttft_existed_still_give_their_first_byte() -> None:
    old = {"x_gripprobe_protocol": "chat_completions", "x_gripprobe_ttfb_ms": 12.5, "x_gripprobe_duration_ms": 40.0,
           "x_gripprobe_usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    assert summarize(calls_from_records([old]), "A").ttft_ms == 12.5
    none_yet = {**old, "x_gripprobe_ttft_ms": None}  # a reply that carried no output: no first token
    assert summarize(calls_from_records([none_yet]), "A").ttft_ms is None


@pytest.mark.parametrize("value, event, want", [
    ({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, None, False),
    ({"choices": [{"delta": {"content": "x"}}]}, None, True),
    ({"choices": [{"delta": {"reasoning_content": "hmm"}}]}, None, True),
    ({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "write"}}]}}]}, None, True),
    ({"choices": [], "usage": {"prompt_tokens": 1}}, None, False),
    ({"type": "message_start", "message": {"content": []}}, "message_start", False),
    ({"type": "content_block_start", "content_block": {"type": "text", "text": ""}}, None, False),
    ({"type": "content_block_start", "content_block": {"type": "tool_use", "name": "write"}}, None, True),
    ({"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "so"}}, None, True),
    ({"type": "ping"}, "ping", False),
    ({"type": "response.created", "response": {}}, None, False),
    ({"type": "response.output_text.delta", "delta": "Hi"}, None, True),
    ({"type": "response.output_item.added", "item": {"type": "function_call", "name": "shell"}}, None, True),
    ({"model": "q", "message": {"role": "assistant", "content": ""}, "done": False}, None, False),
    ({"model": "q", "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}}, None, True),
    ({"model": "q", "response": "Hello", "done": False}, None, True),
    ("data", None, False),
])
def test_what_counts_as_output(value, event, want) -> None:
    assert carries_output(value, event) is want


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                       lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                       max_leaves=20)


@given(JSONISH, st.none() | st.text(max_size=12))
def test_output_detection_and_timings_never_raise(value, event) -> None:
    assert carries_output(value, event) in (True, False)
    got = server_timings(value)
    assert got is None or all(isinstance(v, float) and v == v for v in got.values())


def test_a_client_without_arrival_times_still_records(tmp_path: Path) -> None:
    """An observer (a plugin's) that does not time its objects keeps working: no ``arrived`` needed."""
    class Plain(ExchangeObserver):
        arrived = None  # type: ignore[assignment]

    record = tmp_path / "r.jsonl"

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", slow_prefill)
        async with serving(app) as up, proxied(up, record, observer_factory=Plain) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.base_url + "/v1/chat/completions", json={"model": "m", "stream": True,
                                                                                 "messages": []}) as r:
                    await r.read()

    run(main())
    (rec,) = read_records(record)
    assert rec["x_gripprobe_ttft_ms"] is None and rec["x_gripprobe_text"] == "Hello"

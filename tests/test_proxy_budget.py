"""The recording proxy's per-phase token budget: model calls are relayed until the recorded ones have spent
it, then refused with 429 ``token_budget_exceeded`` (recorded, never forwarded); other requests pass.
A real aiohttp upstream speaking Chat Completions on 127.0.0.1 and the real proxy."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gripprobe_core.proxy import RecordingProxy, read_records
from proxy_helpers import proxied, run, serving

CALL_TOKENS = 120  # what the upstream reports per call: 100 prompt + 20 completion


class Upstream:
    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, request: web.Request) -> web.Response:
        self.calls += 1
        await request.read()
        return web.json_response({
            "id": f"c{self.calls}", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": CALL_TOKENS,
                      "prompt_tokens_details": {"cached_tokens": 64}}})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        return app


async def _calls(proxy: RecordingProxy, n: int) -> list[tuple[int, dict]]:
    out = []
    async with aiohttp.ClientSession() as s:
        for _ in range(n):
            async with s.post(f"{proxy.base_url}/v1/chat/completions",
                              json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}) as r:
                out.append((r.status, await r.json()))
        async with s.get(f"{proxy.base_url}/v1/models") as r:  # not a model call: never refused
            out.append((r.status, await r.json()))
    return out


def test_model_calls_past_the_budget_are_refused_and_recorded(tmp_path: Path) -> None:
    up = Upstream()
    record = tmp_path / "proxy.jsonl"

    async def main():
        async with serving(up.app()) as url, proxied(url, record, token_budget=250) as proxy:
            answers = await _calls(proxy, 5)
        return answers, proxy

    answers, proxy = run(main())
    # 0, 120, 240 tokens spent before calls 1-3: under 250, relayed; 360 before call 4: refused, and call 5
    assert [a[0] for a in answers] == [200, 200, 200, 429, 429, 200] and up.calls == 3
    assert answers[3][1]["error"]["code"] == "token_budget_exceeded"
    assert "250" in answers[3][1]["error"]["message"]
    assert proxy.token_budget_exceeded and proxy.tokens_spent == 3 * CALL_TOKENS
    assert proxy.status()["token_budget_exceeded"] is True and proxy.status()["error"] is None
    records = read_records(record)
    refused = [r for r in records if r.get("x_gripprobe_proxy_error") == "token_budget_exceeded"]
    assert len(refused) == 2 and all(r["x_gripprobe_status"] == 429 for r in refused)
    used = [r["x_gripprobe_usage"] for r in records if r.get("x_gripprobe_status") == 200 and
            r.get("x_gripprobe_protocol") == "chat_completions"]
    assert used == [{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "cached_tokens": 64}] * 3


def test_without_a_budget_nothing_is_refused_and_nothing_is_counted(tmp_path: Path) -> None:
    up = Upstream()

    async def main():
        async with serving(up.app()) as url, proxied(url, tmp_path / "r.jsonl") as proxy:
            return await _calls(proxy, 4), proxy

    answers, proxy = run(main())
    assert [a[0] for a in answers] == [200] * 5 and up.calls == 4
    assert proxy.tokens_spent == 0 and not proxy.token_budget_exceeded


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "100"])
def test_a_budget_must_be_a_positive_number_of_tokens(tmp_path: Path, bad) -> None:
    with pytest.raises(ValueError, match="token_budget"):
        RecordingProxy("http://127.0.0.1:1", tmp_path / "r.jsonl", token_budget=bad)


# ------------------------------------------------------------- streams without usage, parallel calls, caps

def _sse_app(usage_tokens: int | None, seen: list) -> web.Application:
    """Chat Completions SSE; a usage chunk only when the request asked (``stream_options.include_usage``), as a
    real server does, with ``usage_tokens`` in it."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in ("Hello", " there", ", I am", " a model."):
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage") and usage_tokens is not None:
            usage = {"prompt_tokens": usage_tokens - 5, "completion_tokens": 5, "total_tokens": usage_tokens}
            await resp.write(f"data: {json.dumps({'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
                             .encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", chat)
    return app


async def _stream_calls(proxy: RecordingProxy, n: int, *, include_usage: bool = False, parallel: bool = False,
                        path: str = "/v1/chat/completions") -> list[int]:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Say hello. " + "x" * 300}]}
    if include_usage:
        body["stream_options"] = {"include_usage": True}

    async def one(s: aiohttp.ClientSession) -> int:
        async with s.post(proxy.base_url + path, json=body) as r:
            await r.read()
            return r.status

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        if parallel:
            return list(await asyncio.gather(*(one(s) for _ in range(n))))
        return [await one(s) for _ in range(n)]


def test_streams_without_usage_are_counted_from_the_bodies(tmp_path: Path) -> None:
    """Attack 15 in small: streamed calls that never ask for usage (the OpenAI SDK default) used to count 0
    tokens, so 20 of 20 were answered under a budget of 200. Each is now estimated from its bodies."""
    seen: list = []
    record = tmp_path / "r.jsonl"

    async def main():
        async with serving(_sse_app(None, seen)) as url, proxied(url, record, token_budget=200) as proxy:
            return await _stream_calls(proxy, 20), proxy

    statuses, proxy = run(main())
    answered = statuses.count(200)
    assert answered == 2 and statuses[answered:] == [429] * (20 - answered), statuses
    assert len(seen) == answered and all("stream_options" not in b for b in seen)  # the request is not changed
    assert proxy.token_budget_exceeded and proxy.tokens_spent >= 200
    tokens = [r["x_gripprobe_tokens"] for r in read_records(record) if r["x_gripprobe_status"] == 200]
    assert all(t["estimated"] is True and t["counted"] > 100 for t in tokens), tokens
    assert sum(t["counted"] for t in tokens) == proxy.tokens_spent


def test_reported_usage_is_counted_exactly(tmp_path: Path) -> None:
    seen: list = []
    record = tmp_path / "r.jsonl"

    async def main():
        async with serving(_sse_app(70, seen)) as url, proxied(url, record, token_budget=200) as proxy:
            return await _stream_calls(proxy, 5, include_usage=True), proxy

    statuses, proxy = run(main())
    assert statuses == [200, 200, 200, 429, 429] and proxy.tokens_spent == 210  # 0, 70, 140 < 200; 210 is spent
    assert [r["x_gripprobe_tokens"] for r in read_records(record) if r["x_gripprobe_status"] == 200] == \
        [{"counted": 70, "estimated": False}] * 3


def test_parallel_calls_are_admitted_one_at_a_time_against_the_budget(tmp_path: Path) -> None:
    """Attack 16 in small: 30 calls at once, 85 tokens each, against a budget of 100. Unfixed, all 30 were
    forwarded before any was counted (2,550 tokens, token_budget_exceeded false). Now a call is admitted once
    the one before it has settled: the phase spends at most the budget plus one call."""
    seen: list = []

    async def main():
        async with serving(_sse_app(85, seen)) as url, \
                proxied(url, tmp_path / "r.jsonl", token_budget=100) as proxy:
            return await _stream_calls(proxy, 30, include_usage=True, parallel=True), proxy

    statuses, proxy = run(main())
    assert sorted(statuses) == [200, 200] + [429] * 28, statuses
    assert len(seen) == 2 and proxy.tokens_spent == 170 <= 100 + 85
    assert proxy.token_budget_exceeded and proxy.status()["token_budget_exceeded"] is True


def test_the_call_that_crosses_the_budget_is_exceeding_it_even_as_the_last_one(tmp_path: Path) -> None:
    async def main():
        async with serving(Upstream().app()) as url, proxied(url, tmp_path / "r.jsonl", token_budget=200) as proxy:
            async with aiohttp.ClientSession() as s:
                for _ in range(2):  # 120 + 120: the second crosses 200, and nothing is refused after it
                    async with s.post(f"{proxy.base_url}/v1/chat/completions",
                                      json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}) as r:
                        assert r.status == 200
        return proxy

    proxy = run(main())
    assert proxy.tokens_spent == 240 and proxy.token_budget_exceeded


def test_a_call_on_another_model_path_counts_too(tmp_path: Path) -> None:
    """A legacy /v1/completions call (a model call by its body's shape) is counted like a chat call."""
    seen: list = []

    async def main():
        async with serving(_sse_app(None, seen)) as url, proxied(url, tmp_path / "r.jsonl", token_budget=100) as proxy:
            return await _stream_calls(proxy, 5, path="/v1/completions"), proxy

    statuses, proxy = run(main())
    assert statuses.count(429) >= 3 and proxy.token_budget_exceeded, statuses


@pytest.mark.parametrize("in_process", [False, True], ids=["recorder", "in-process"])
def test_calls_whose_records_were_dropped_still_count(tmp_path: Path, in_process: bool) -> None:
    from gripprobe_core.proxy.observe import ExchangeObserver

    up = Upstream()
    record = tmp_path / "r.jsonl"
    kw = {"observer_factory": ExchangeObserver} if in_process else {}

    async def main():
        async with serving(up.app()) as url, proxied(url, record, token_budget=1000, max_records=1, **kw) as proxy:
            answers = await _calls(proxy, 6)
        return answers, proxy

    answers, proxy = run(main())
    assert [a[0] for a in answers] == [200] * 6 + [200]
    assert proxy.tokens_spent == 6 * CALL_TOKENS and len(read_records(record)) == 1
    assert proxy.records()["dropped"] == 6 and proxy.records()["written"] == 1  # 6 calls + /v1/models

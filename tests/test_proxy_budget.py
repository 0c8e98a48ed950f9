"""The recording proxy's per-phase token budget: model calls are relayed until the recorded ones have spent
it, then refused with 429 ``token_budget_exceeded`` (recorded, never forwarded); other requests pass.
A real aiohttp upstream speaking Chat Completions on 127.0.0.1 and the real proxy."""

from __future__ import annotations

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

"""Bounded records: a phase's record file holds at most ``max_records`` records and ``max_record_bytes``
bytes (whole records up to 3/4 of it, then slim ones without bodies); what is past the caps is counted,
never written; and the relay waits for a recorder that is behind, so a flood of exchanges cannot pile up
in memory. Real aiohttp upstreams on 127.0.0.1, the real proxy and recorder process."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gripprobe_core.proxy import read_records
from gripprobe_core.proxy.observe import ExchangeObserver
from gripprobe_core.proxy.recorder import RecordBook, slim_record
from gripprobe_core.proxy.recorder_client import RecorderClient, default_command
from proxy_helpers import proxied, run, serving


class Upstream:
    def __init__(self) -> None:
        self.calls = 0
        self.times: list[float] = []

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.calls += 1
        self.times.append(time.monotonic())
        return web.json_response({"object": "chat.completion", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": None, "tool_calls": [{"id": f"c{self.calls}", "type": "function",
            "function": {"name": "write_file", "arguments": "{\"path\": \"a.txt\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app


def body(size: int) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * size}]}).encode()


async def _flood(proxy, n: int, size: int, connections: int = 4) -> list[int]:
    data = body(size)
    out: list[int] = []

    async def worker(s: aiohttp.ClientSession, todo: list[int]) -> None:
        while todo:
            todo.pop()
            async with s.post(proxy.base_url + "/v1/chat/completions", data=data,
                              headers={"Content-Type": "application/json"}) as r:
                await r.read()
                out.append(r.status)

    todo = list(range(n))
    async with aiohttp.ClientSession() as s:
        await asyncio.gather(*(worker(s, todo) for _ in range(connections)))
    return out


MODES = [pytest.param({}, id="recorder"), pytest.param({"observer_factory": ExchangeObserver}, id="in-process")]


@pytest.mark.parametrize("kw", MODES)
def test_records_past_the_call_cap_are_counted_not_written(tmp_path: Path, kw: dict) -> None:
    record = tmp_path / "r.jsonl"

    async def main():
        async with serving(Upstream().app()) as url, proxied(url, record, max_records=3, **kw) as proxy:
            statuses = await _flood(proxy, 10, 100)
        return statuses, proxy

    statuses, proxy = run(main())
    assert statuses == [200] * 10  # relayed all the same
    assert len(read_records(record)) == 3
    stats = proxy.status()["records"]
    assert (stats["written"], stats["dropped"], stats["max_records"]) == (3, 7, 3) and stats["dropped_bytes"] > 0
    assert proxy.exchange_count == 10


@pytest.mark.parametrize("kw", MODES)
def test_records_past_the_byte_cap_are_slimmed_then_dropped(tmp_path: Path, kw: dict) -> None:
    record = tmp_path / "r.jsonl"
    cap = 200_000

    async def main():
        async with serving(Upstream().app()) as url, proxied(url, record, max_record_bytes=cap, **kw) as proxy:
            statuses = await _flood(proxy, 400, 20_000)
        return statuses, proxy

    statuses, proxy = run(main())
    assert statuses == [200] * 400
    assert record.stat().st_size <= cap
    records = read_records(record)
    full = [r for r in records if not r.get("x_gripprobe_slimmed")]
    slim = [r for r in records if r.get("x_gripprobe_slimmed")]
    assert full and slim and records[: len(full)] == full  # whole records first, then slim ones
    assert all(r["x_gripprobe_request"] is None and r["x_gripprobe_response"] is None for r in slim)
    assert all(r["x_gripprobe_tool_names"] == ["write_file"] and r["x_gripprobe_usage"]["total_tokens"] == 12
               for r in slim)  # tier A's facts and the usage stay
    stats = proxy.status()["records"]
    assert stats["written"] == len(records) and stats["slimmed"] == len(slim) and stats["dropped"] > 0
    assert stats["written"] + stats["dropped"] == 400 and stats["bytes"] == record.stat().st_size


def test_a_slim_record_is_bounded_whatever_its_record_held() -> None:
    record = {"x_gripprobe_request": "x" * 100_000, "x_gripprobe_response": ["y"] * 1000,
              "x_gripprobe_tool_results": [{"output": "z" * 2048}] * 5000, "x_gripprobe_text": "t" * 4096}
    slim = slim_record(record)
    assert len(json.dumps(slim)) < 200_000 and len(slim["x_gripprobe_tool_results"]) == 64
    assert record["x_gripprobe_request"] == "x" * 100_000  # a copy: the record itself is left alone


def test_a_record_book_never_writes_past_its_caps(tmp_path: Path) -> None:
    book = RecordBook(tmp_path / "b.jsonl", max_records=50, max_bytes=10_000)
    for i in range(200):
        book.add({"x_gripprobe_request": "r" * (i * 10), "x_gripprobe_response": None, "n": i})
    book.close()
    stats = book.stats()
    assert (tmp_path / "b.jsonl").stat().st_size == stats["bytes"] <= 10_000
    assert stats["written"] <= 50 and stats["written"] + stats["dropped"] == 200 and stats["slimmed"] > 0


def test_the_relay_waits_for_a_recorder_that_is_behind(tmp_path: Path) -> None:
    """A recorder that takes nothing for 1.5 s (here: it sleeps before starting): with a 64 KiB high-water
    mark, the relay forwards only what fits in the pipe (1 MiB) and under the mark (plus the requests already
    on their way), then waits; once the recorder catches up every request is relayed and recorded."""
    slow = [sys.executable, "-c", "import sys, time; time.sleep(1.5); from gripprobe_core.proxy.recorder import main; "
            "sys.exit(main())"]
    recorder = RecorderClient(slow, high_water=64 << 10, low_water=16 << 10)
    up = Upstream()
    record = tmp_path / "r.jsonl"

    async def main():
        async with serving(up.app()) as url, proxied(url, record, recorder=recorder) as proxy:
            t0 = time.monotonic()
            statuses = await _flood(proxy, 40, 200_000)
        return t0, statuses

    try:
        t0, statuses = run(main())
    finally:
        recorder.close()
    assert statuses == [200] * 40 and len(read_records(record)) == 40
    early = [t for t in up.times if t - t0 < 1.0]
    assert len(early) <= 12, f"{len(early)} requests went upstream while the recorder took nothing"
    assert default_command()[-1].endswith("recorder")

"""The recorder process: the recording proxy's observing, moved off the relay's event loop.

Real child processes (``python -m gripprobe_core.proxy.recorder``), real aiohttp upstreams on
127.0.0.1, real signals (SIGSTOP to hold the child, SIGKILL to lose it). Checked: records identical
to the in-process observer's, FLUSH/ACK ordering, no lost exchange when the child dies (metadata-only
records, then a restart or the in-process fallback), two proxies sharing one child, no credential
in any record, backpressure while the child does not read.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import aiohttp
import pytest
from aiohttp import web

import wire_samples as ws
from gripprobe_core.proxy import RecordingProxy, read_records
from gripprobe_core.proxy.observe import ExchangeObserver
from gripprobe_core.proxy.recorder import BEGIN, CHUNK
from gripprobe_core.proxy.recorder_client import RecorderChild, RecorderClient, close_recorder, get_recorder
from proxy_helpers import proxied, run, serving  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

TIMING = ("x_gripprobe_duration_ms", "x_gripprobe_ttfb_ms", "x_gripprobe_ttft_ms", "x_gripprobe_timestamp")
CANARY = "sk-canaryRECORDER0123456789abcdef"
AUTH = {"Authorization": f"Bearer {CANARY}", "X-Api-Key": "canary-xapikey-recorder-77"}



def untimed(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMING}


@pytest.fixture
def client() -> Iterator[RecorderClient]:
    """A recorder client of this test's own (the process-wide one is left alone)."""
    c = RecorderClient()
    try:
        yield c
    finally:
        c.close()




async def wait_until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------------ a replaying upstream

def exchanges() -> list[tuple[str, str, bytes, int, str, bytes]]:
    """(method, path?query, request body, status, content type, response body): every protocol."""
    chat_sse = ws.oracle_chat(stream=True)
    chat_json = ws.oracle_chat(stream=False)
    big_request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "z" * 300_000}],
                              "api_key": CANARY}).encode()
    return [
        ("POST", "/v1/chat/completions", chat_sse[0], chat_sse[1], chat_sse[2], chat_sse[3]),
        ("POST", "/v1/chat/completions", chat_json[0], chat_json[1], chat_json[2], chat_json[3]),
        ("POST", "/v1/responses", ws.responses_request(results=True), 200, "text/event-stream",
         ws.responses_stream(custom=True, text="Applying the patch now.")),
        ("POST", "/v1/responses", ws.responses_request(stream=False), 200, "application/json", ws.responses_json()),
        ("POST", "/api/chat", ws.ollama_request(results=True), 200, "application/x-ndjson",
         ws.ollama_chat_stream(text="Let me write it.")),
        ("POST", "/api/generate", b'{"model": "qwen3:8b", "prompt": "sky?"}', 200, "application/x-ndjson",
         ws.ollama_generate_stream()),
        ("POST", "/api/chat", ws.ollama_request(), 400, "application/json", ws.OLLAMA_UNSUPPORTED),
        ("GET", f"/v1/models?key={CANARY}&x=1", b"", 200, "application/json", b'{"object": "list", "data": []}'),
        ("POST", "/v1/chat/completions", big_request, 200, "application/json", chat_json[3]),
        ("POST", "/garbage", b"\xff not json", 200, "application/octet-stream", bytes(range(256)) * 8),
    ]


def replay_app(table: list[tuple[str, str, bytes, int, str, bytes]]) -> web.Application:
    """Answers each (method, path) with its recorded reply; streams in 97-byte writes."""
    replies = {(m, p.split("?")[0], b): (s, c, r) for m, p, b, s, c, r in table}

    async def handler(request: web.Request) -> web.StreamResponse:
        status, ctype, body = replies[(request.method, request.path, await request.read())]
        if ctype.startswith(("text/event-stream", "application/x-ndjson")):
            resp = web.StreamResponse(status=status, headers={"Content-Type": ctype})
            await resp.prepare(request)
            for i in range(0, len(body), 97):
                await resp.write(body[i:i + 97])
            await resp.write_eof()
            return resp
        return web.Response(status=status, body=body, headers={"Content-Type": ctype})

    app = web.Application(client_max_size=4 << 20)
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


async def send_all(base: str, table: list[tuple[str, str, bytes, int, str, bytes]]) -> None:
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for method, path, body, status, _, want in table:
            async with s.request(method, base + path, data=body or None, headers=AUTH) as r:
                assert r.status == status and await r.read() == want


# --------------------------------------------------------------------------------------- tests

def test_records_identical_to_the_in_process_observer(tmp_path: Path, client: RecorderClient) -> None:
    table = exchanges()

    async def main() -> None:
        async with serving(replay_app(table)) as up:
            async with proxied(up, tmp_path / "child.jsonl", recorder=client) as proxy:
                await send_all(proxy.base_url, table)
                assert proxy._children, "observed in the recorder process"
            async with proxied(up, tmp_path / "inproc.jsonl", observer_factory=ExchangeObserver) as proxy:
                await send_all(proxy.base_url, table)

    run(main())
    child, inproc = read_records(tmp_path / "child.jsonl"), read_records(tmp_path / "inproc.jsonl")
    assert len(child) == len(inproc) == len(table)
    for got, want in zip(child, inproc):
        assert untimed(got) == untimed(want), want["x_gripprobe_path"]
        assert all(k in got for k in TIMING)
        # both timed the first output object, or neither found one
        assert (got["x_gripprobe_ttft_ms"] is None) == (want["x_gripprobe_ttft_ms"] is None), want["x_gripprobe_path"]
    # the records are the full ones, not metadata only
    assert [r["x_gripprobe_tool_call_count"] for r in child[:5]] == [1, 1, 1, 1, 2]
    assert child[6]["x_gripprobe_backend_tool_unsupported"] is True
    assert child[8]["x_gripprobe_budget_exceeded"] is True


def test_canary_credentials_never_reach_the_record(tmp_path: Path, client: RecorderClient) -> None:
    table = exchanges()
    record = tmp_path / "r.jsonl"

    async def main() -> None:
        async with serving(replay_app(table)) as up, proxied(up, record, recorder=client) as proxy:
            await send_all(proxy.base_url, table)

    run(main())
    text = record.read_text()
    assert len(text.splitlines()) == len(table) and "[REDACTED]" in text
    for canary in (CANARY, AUTH["X-Api-Key"]):
        assert canary not in text


def test_frames_flush_ack_follows_every_earlier_record(tmp_path: Path, client: RecorderClient) -> None:
    """FLUSH is answered only once every exchange that ENDed before it is on disk: 60 exchanges with
    200 KiB requests take the child a while, yet at ACK all 60 lines are there; a path's flush does
    not wait for another path's exchanges, and an exchange still open is not written."""
    child = client.child()
    assert isinstance(child, RecorderChild)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x " * 100_000}]}).encode()
    meta = {"method": "POST", "path": "/v1/chat/completions", "query": "", "upstream_url": "http://127.0.0.1:1",
            "headers": [], "body_budget": 256 * 1024, "started": time.time()}
    reply = ws.oracle_chat(stream=False)[3]
    end = {"status": 200, "response_headers": [["Content-Type", "application/json"]], "duration_ms": 1.0,
           "ttfb_ms": 0.5, "proxy_error": None}
    open_xid = client.next_id()
    assert child.send([(BEGIN, open_xid, {**meta, "record_path": str(a)}, b"{}")], 2)  # never ENDed
    for i in range(60):
        xid = client.next_id()
        m = {**meta, "record_path": str(a if i % 2 == 0 else b)}
        assert child.send([(BEGIN, xid, m, body)], len(body))
        assert child.end(xid, m, end, [(CHUNK, xid, reply, 0.5)], len(reply))
    child.flush(a).result(timeout=30)
    assert len(a.read_text().splitlines()) == 30
    child.flush(b).result(timeout=30)
    lines = b.read_text().splitlines()
    assert len(lines) == 30
    rec = json.loads(lines[0])
    assert rec["x_gripprobe_tool_call_count"] == 1 and "x_gripprobe_observer_error" not in rec
    inproc = ExchangeObserver(method="POST", path="/v1/chat/completions", query="", upstream_url="http://127.0.0.1:1",
                              request_headers={}, request_body=body)
    inproc.feed(reply)
    want = inproc.finish(status=200, response_headers={"Content-Type": "application/json"}, duration_ms=1.0,
                         ttfb_ms=0.5, proxy_error=None)
    assert untimed(rec) == untimed(want) and rec["x_gripprobe_duration_ms"] == 1.0


def test_killed_child_loses_no_exchange_and_is_restarted(tmp_path: Path) -> None:
    """Exchanges the child had not written when it died get metadata-only records (none is lost),
    so does a stream in flight whose first bytes it had taken; a stream whose bytes the relay still
    held, and the next exchange, go to a restarted child and are fully recorded."""
    record = tmp_path / "r.jsonl"
    client = RecorderClient(max_restarts=1)
    release = asyncio.Event()

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    async def held(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        size = 100_000 if request.path.endswith("big") else 1  # big: over a batch, handed to the child
        await resp.write(b'data: {"choices": [{"delta": {"content": "%s"}}]}\n\n' % (b"a" * size))
        await release.wait()
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def main() -> dict:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", ok)
        app.router.add_post("/held_big", held)
        app.router.add_post("/held_small", held)
        async with serving(app) as up, proxied(up, record, recorder=client) as proxy, aiohttp.ClientSession() as s:
            url = proxy.base_url + "/v1/chat/completions"
            async with s.post(url, json={"n": 1}) as r:
                assert r.status == 200
            await proxy.flush()
            first_pid = client.pid
            assert first_pid is not None and len(read_records(record)) == 1
            os.kill(first_pid, signal.SIGSTOP)  # the child reads nothing more ...
            for n in (2, 3):
                async with s.post(url, json={"n": n}) as r:
                    assert r.status == 200
            streams = [await s.post(proxy.base_url + path, json={"n": 4}) for path in ("/held_big", "/held_small")]
            for stream in streams:
                assert await stream.content.readexactly(20)
            os.kill(first_pid, signal.SIGKILL)  # ... and dies owing 2 records, with 2 streams in flight
            await wait_until(lambda: client.pid is None)
            release.set()
            for stream in streams:
                assert (await stream.read()).endswith(b"[DONE]\n\n")
                stream.close()
            async with s.post(url, json={"n": 5}) as r:
                assert r.status == 200
            assert client.pid not in (None, first_pid) and client.restarts == 1
        return proxy.status()

    try:
        status = run(main())
    finally:
        client.close()
    records = read_records(record)
    assert len(records) == 6
    by_path = [(r["x_gripprobe_path"], bool(r.get("x_gripprobe_observer_error"))) for r in records]
    assert by_path[:3] == [("/v1/chat/completions", False), ("/v1/chat/completions", True),
                           ("/v1/chat/completions", True)]
    assert sorted(by_path[3:5]) == [("/held_big", True), ("/held_small", False)]
    assert by_path[5] == ("/v1/chat/completions", False)
    for r in records:
        assert r["x_gripprobe_status"] == 200 and r["x_gripprobe_timestamp"].endswith("Z")
        if r.get("x_gripprobe_observer_error"):
            assert r["x_gripprobe_error"].startswith("recorder_died") and r["x_gripprobe_duration_ms"] >= 0
            assert "x_gripprobe_response" not in r
        else:  # a full record (the held stream's path is no model route: no text assembled)
            assert r["x_gripprobe_response"]
            assert r["x_gripprobe_text"] == ("ok" if "chat" in r["x_gripprobe_path"] else None)
    assert status["error"] is None and "3 exchange(s) recorded as metadata only" in status["recorder_error"]


def test_flush_never_hangs_on_a_stuck_recorder(tmp_path: Path) -> None:
    """A recorder that writes nothing for ``flush_timeout_s`` is killed; stop() returns soon and the
    exchanges it owed are recorded as metadata only, which the proxy's status says."""
    record = tmp_path / "r.jsonl"
    client = RecorderClient()

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    async def main() -> tuple[float, dict]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", ok)
        async with serving(app) as up, aiohttp.ClientSession() as s:
            proxy = RecordingProxy(up, record, recorder=client, flush_timeout_s=0.3)
            await proxy.start()
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            for n in range(2):
                async with s.post(proxy.base_url + "/v1/chat/completions", json={"n": n}) as r:
                    assert r.status == 200
            t0 = time.monotonic()
            await proxy.stop()
            return time.monotonic() - t0, proxy.status()

    try:
        took, status = run(main())
    finally:
        client.close()
    assert took < 3.0
    records = read_records(record)
    assert len(records) == 2 and all(r["x_gripprobe_observer_error"] for r in records)
    assert "2 exchange(s) recorded as metadata only" in status["recorder_error"]
    assert "did not write r.jsonl" in status["recorder_error"]


def test_without_a_recorder_the_proxy_observes_in_process(tmp_path: Path) -> None:
    """A child that keeps dying (restarts exhausted) or cannot start at all: full records anyway."""
    dying = RecorderClient(max_restarts=0)
    missing = RecorderClient(command=[str(tmp_path / "no-such-python"), "-m", "gripprobe_core.proxy.recorder"])

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "fine"}}]})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", ok)
        async with serving(app) as up, aiohttp.ClientSession() as s:
            async with proxied(up, tmp_path / "dying.jsonl", recorder=dying) as proxy:
                for n in range(3):
                    if n == 1:
                        await proxy.flush()
                        pid = dying.pid
                        assert pid is not None
                        os.kill(pid, signal.SIGKILL)  # between exchanges: nothing owed
                        await wait_until(lambda: dying.pid is None)
                    async with s.post(proxy.base_url + "/v1/chat/completions", json={"n": n}) as r:
                        assert r.status == 200
                assert dying.unavailable is not None
            async with proxied(up, tmp_path / "missing.jsonl", recorder=missing) as proxy:
                async with s.post(proxy.base_url + "/v1/chat/completions", json={"n": 9}) as r:
                    assert r.status == 200
                assert missing.unavailable is not None and "cannot start" in missing.unavailable
            assert proxy.status()["recorder_error"] is None

    try:
        run(main())
    finally:
        dying.close()
        missing.close()
    for name, n in (("dying.jsonl", 3), ("missing.jsonl", 1)):
        records = read_records(tmp_path / name)
        assert len(records) == n
        assert all(r["x_gripprobe_text"] == "fine" and "x_gripprobe_observer_error" not in r for r in records)


def test_two_proxies_share_one_child_with_many_concurrent_exchanges(tmp_path: Path, client: RecorderClient) -> None:
    table = exchanges()
    streams = [t for t in table if t[4] != "application/json"]

    async def main() -> None:
        async with serving(replay_app(table)) as up, \
                proxied(up, tmp_path / "a.jsonl", recorder=client) as pa, \
                proxied(up, tmp_path / "b.jsonl", recorder=client) as pb, \
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as s:
            async def one(proxy: RecordingProxy, i: int) -> None:
                method, path, body, status, _, want = streams[i % len(streams)]
                async with s.request(method, f"{proxy.base_url}{path}?i={i}", data=body, headers=AUTH) as r:
                    assert r.status == status and await r.read() == want

            await asyncio.gather(*(one(p, i) for i in range(60) for p in (pa, pb)))
            assert pa._children == pb._children and len(pa._children) == 1

    run(main())
    for name in ("a.jsonl", "b.jsonl"):
        records = read_records(tmp_path / name)
        assert sorted(int(r["x_gripprobe_query"].split("=")[1]) for r in records) == list(range(60))
        assert all("x_gripprobe_observer_error" not in r for r in records)
        assert sum(r["x_gripprobe_tool_call_count"] for r in records) > 0


def test_backpressure_holds_the_stream_while_the_child_reads_nothing(tmp_path: Path) -> None:
    """With the child stopped, the relay stops reading the upstream once ``high_water`` bytes are
    queued (the client stops receiving); when it resumes, the whole stream arrives and is recorded."""
    client = RecorderClient(high_water=256 << 10, low_water=64 << 10)
    total = 24 << 20
    event = ws.responses_stream(text="x" * 900)  # ~4 KiB of SSE per repetition

    async def big(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = 0
        while sent < total:
            await resp.write(event * 16)
            sent += len(event) * 16
        await resp.write_eof()
        return resp

    async def main() -> tuple[int, int, int, int]:
        app = web.Application()
        app.router.add_get("/big", big)
        async with serving(app) as up, proxied(up, tmp_path / "r.jsonl", recorder=client) as proxy, \
                aiohttp.ClientSession() as s:
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            got, peak = 0, 0
            try:
                async with s.get(proxy.base_url + "/big") as r:
                    async def read() -> None:
                        nonlocal got
                        async for chunk in r.content.iter_any():
                            got += len(chunk)

                    reader = asyncio.ensure_future(read())
                    for _ in range(100):  # 1 s with the child stopped
                        await asyncio.sleep(0.01)
                        child = next(iter(proxy._children), None)
                        peak = max(peak, child.backlog if child else 0)
                    held = got
                    os.kill(pid, signal.SIGCONT)
                    await asyncio.wait_for(reader, 60)
            finally:
                os.kill(pid, signal.SIGCONT)
            return held, got, peak, len(event) * 16

    try:
        held, got, peak, chunk = run(main())
    finally:
        client.close()
    assert got >= total
    assert held < 8 << 20, f"the relay kept reading while the recorder was stopped: {held} bytes"
    assert peak <= (256 << 10) + 4 * chunk + (1 << 20)
    [rec] = read_records(tmp_path / "r.jsonl")
    assert rec["x_gripprobe_stream"] is True and rec["x_gripprobe_budget_exceeded"] is True
    assert "x_gripprobe_observer_error" not in rec


def test_one_child_per_process_closed_by_close_recorder(tmp_path: Path) -> None:
    """Proxies without an explicit client share the process-wide child (not one per phase);
    close_recorder stops it after its records are written; the next proxy starts a new one."""
    async def phases() -> list[int | None]:
        pids = []
        async with serving(web.Application()) as up:
            for phase in ("warmup", "measured"):
                async with proxied(up, tmp_path / f"proxy.{phase}.http.jsonl"):
                    pids.append(get_recorder().pid)
        return pids

    first = run(phases())
    assert first[0] is not None and first[0] == first[1]
    close_recorder()
    with pytest.raises(OSError):
        os.kill(first[0], 0)  # gone (reaped)
    second = run(phases())
    assert second[0] is not None and second[0] != first[0]



def test_release_recorder_returns_at_once_and_its_wait_reaps_the_child(tmp_path: Path) -> None:
    """The runner's end of a run: release_recorder sends EOF and returns without waiting (the reports are
    written meanwhile); the function it returns waits until the child is gone. Records flushed before the
    release are intact; the next proxy starts a new child."""
    import gripprobe_core.proxy.recorder_client as recorder_client

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": []})

    async def phase(name: str) -> int | None:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        async with serving(app) as up:
            async with proxied(up, tmp_path / f"proxy.{name}.http.jsonl") as proxy:
                async with aiohttp.ClientSession() as s:
                    async with s.get(f"{proxy.base_url}/v1/models") as r:
                        assert r.status == 200
                        await r.read()
                return get_recorder().pid

    pid = run(phase("warmup"))
    child = get_recorder()._child
    assert pid is not None and child is not None
    wait = recorder_client.release_recorder()
    assert recorder_client._CLIENT is None  # detached: a later proxy starts a new one
    wait(10.0)
    assert child.dead and child.proc.returncode == 0
    with pytest.raises(OSError):
        os.kill(pid, 0)  # gone (reaped)
    [rec] = read_records(tmp_path / "proxy.warmup.http.jsonl")
    assert rec["x_gripprobe_path"] == "/v1/models" and rec["x_gripprobe_status"] == 200
    assert rec["x_gripprobe_error"] is None and rec["x_gripprobe_proxy_error"] is None
    assert recorder_client.release_recorder()(1.0) is None  # nothing running: nothing to wait for
    assert run(phase("measured")) not in (None, pid)
    close_recorder()


def test_prefetch_recorder_starts_the_one_child_the_first_proxy_then_uses(tmp_path: Path) -> None:
    """A run command starts the recorder's process on a thread before it loads its plugins and specs; the
    first proxy finds that process running and uses it (one child, not a second)."""
    from gripprobe_core.proxy.recorder_client import prefetch_recorder

    close_recorder()
    starter = prefetch_recorder()
    starter.join(30)
    assert not starter.is_alive()
    child = get_recorder()._child
    assert child is not None and not child.dead
    os.kill(child.proc.pid, 0)  # running

    async def phase() -> int | None:
        async with serving(web.Application()) as up:
            async with proxied(up, tmp_path / "proxy.warmup.http.jsonl"):
                return get_recorder().pid

    assert run(phase()) == child.proc.pid
    assert get_recorder()._child is child
    close_recorder()
    with pytest.raises(OSError):
        os.kill(child.proc.pid, 0)  # gone (reaped)

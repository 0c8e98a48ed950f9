"""The recording proxy under faults: small real upstreams on 127.0.0.1 that misbehave on purpose.

Each fault is answered the documented way (502/504 JSON, a cut stream), recorded with its
``x_gripprobe_proxy_error``, and the proxy keeps serving the next request. Secrets never reach the
record file.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gripprobe_core.proxy import RecordingProxy, read_records
from proxy_helpers import app_with, ok, proxied, run, serving  # noqa: E402





async def wait_for_records(proxy: RecordingProxy, n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while proxy.exchange_count < n:
        assert time.monotonic() < deadline, f"expected {n} records, have {proxy.exchange_count}"
        await asyncio.sleep(0.01)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------- faults

def test_upstream_down_is_502_and_recorded(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def main() -> dict:
        async with proxied(f"http://127.0.0.1:{closed_port()}", record) as proxy, aiohttp.ClientSession() as s:
            async with s.post(proxy.base_url + "/v1/chat/completions", json={"model": "m", "messages": []}) as r:
                assert r.status == 502 and r.content_type == "application/json"
                assert (await r.json())["error"]["code"] == "proxy_connect_error"
            async with s.get(proxy.base_url + "/v1/models") as r:  # still serving
                assert r.status == 502
            return proxy.status()

    status = run(main())
    records = read_records(record)
    assert [r["x_gripprobe_proxy_error"] for r in records] == ["proxy_connect_error"] * 2
    assert [r["x_gripprobe_status"] for r in records] == [502, 502]
    assert status["reason"] == "proxy_connect_error" and "2 of 2" in status["error"]


def test_reset_mid_stream_cuts_the_client_stream_and_proxy_goes_on(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def reset(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"delta": {"content": "hel"}}]}\n\n')
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()  # a crashed backend: the TCP connection just goes away
        return resp

    async def main() -> None:
        async with serving(app_with(reset=reset)) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            received = b""
            truncated = False
            try:
                async with s.post(proxy.base_url + "/reset", json={"stream": True}) as r:
                    assert r.status == 200
                    async for chunk in r.content.iter_any():
                        received += chunk
            except aiohttp.ClientPayloadError:
                truncated = True
            assert truncated, "the client must see an incomplete stream, not a clean end"
            assert received.startswith(b"data: ")
            async with s.get(proxy.base_url + "/ok") as r:
                assert r.status == 200 and await r.json() == {"ok": True}
            assert proxy.status()["reason"] == "upstream_reset"

    run(main())
    records = read_records(record)
    assert [(r["x_gripprobe_path"], r["x_gripprobe_proxy_error"]) for r in records] == [
        ("/reset", "upstream_reset"), ("/ok", None)]


def test_client_disconnect_mid_stream_cancels_the_upstream_read(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def main() -> None:
        upstream_gone = asyncio.Event()

        async def endless(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await resp.prepare(request)
            try:
                while True:
                    await resp.write(b'{"message": {"content": "x"}, "done": false}\n')
                    await asyncio.sleep(0.02)
            except ConnectionError:
                upstream_gone.set()
            except asyncio.CancelledError:
                upstream_gone.set()
                raise
            return resp

        async with serving(app_with(endless=endless)) as up, proxied(up, record) as proxy:
            async with aiohttp.ClientSession() as s:
                r = await s.post(proxy.base_url + "/endless", json={})
                assert await r.content.readline()
                r.close()  # the agent hangs up mid-stream
            await wait_for_records(proxy, 1)
            await asyncio.wait_for(upstream_gone.wait(), 5)  # the proxy stopped reading the upstream
            async with aiohttp.ClientSession() as s, s.get(proxy.base_url + "/ok") as r:
                assert r.status == 200
            assert proxy.status()["error"] is None  # the client left: not the upstream's fault

    run(main())
    records = read_records(record)
    assert records[0]["x_gripprobe_proxy_error"] == "client_disconnect" and records[1]["x_gripprobe_proxy_error"] is None


def test_garbage_and_invalid_sse_are_relayed_as_is_and_recorded(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    garbage = bytes(range(256)) * 4 + b"\r\n\r\n\x00\xff"
    bad_sse = b"data: {not json\n\nevent: ???\ndata: \xc3\x28\n\ndata: [DONE]\n\n:comment\nnonsense line\n"
    bad_ndjson = b'{"message": {"content": "ok"}, "done": false}\n{truncated\n\xff\xfe\n'

    def fixed(body: bytes, ctype: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": ctype})
            await resp.prepare(request)
            for i in range(0, len(body), 7):  # odd chunk boundaries, mid-line and mid-UTF-8
                await resp.write(body[i:i + 7])
            await resp.write_eof()
            return resp
        return handler

    async def whole(request: web.Request) -> web.Response:
        return web.Response(body=b'{"choices": [', content_type="application/json")

    async def main() -> None:
        app = app_with(garbage=fixed(garbage, "application/octet-stream"), sse=fixed(bad_sse, "text/event-stream"),
                       ndjson=fixed(bad_ndjson, "application/x-ndjson"), json=whole)
        async with serving(app) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            for path, want in (("/garbage", garbage), ("/sse", bad_sse), ("/ndjson", bad_ndjson),
                               ("/json", b'{"choices": [')):
                async with s.post(proxy.base_url + path, data=b"\xff not json either") as r:
                    assert r.status == 200 and await r.read() == want, path
            async with s.get(proxy.base_url + "/ok") as r:
                assert r.status == 200

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_path"] for r in records] == ["/garbage", "/sse", "/ndjson", "/json", "/ok"]
    assert all(r["x_gripprobe_status"] == 200 and r["x_gripprobe_proxy_error"] is None for r in records)
    assert "{not json" in json.dumps(records[1]["x_gripprobe_response"])  # the invalid SSE event, kept as text


@pytest.mark.parametrize("reply", [
    b"SSH-2.0-OpenSSH_9.0 this is not HTTP\r\n\r\n",
    # a 101 was never asked for (Upgrade is not forwarded): not HTTP the proxy can relay
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello",
], ids=["ssh", "101"])
def test_non_http_upstream_is_502_upstream_malformed(tmp_path: Path, reply: bytes) -> None:
    record = tmp_path / "r.jsonl"

    async def talk_nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        await asyncio.sleep(0.2)  # the proxy must not wait for more
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(talk_nonsense, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with proxied(f"http://127.0.0.1:{port}", record) as proxy, aiohttp.ClientSession() as s:
                async with s.get(proxy.base_url + "/api/version") as r:
                    assert r.status == 502 and (await r.json())["error"]["code"] == "upstream_malformed"
        finally:
            server.close()
            await server.wait_closed()

    run(main())
    [rec] = read_records(record)
    assert rec["x_gripprobe_proxy_error"] == "upstream_malformed" and rec["x_gripprobe_status"] == 502


def test_upstream_timeout_before_and_during_a_stream(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def stall(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.json_response({})

    async def stall_mid_stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: 1\n\n")
        await asyncio.sleep(30)
        return resp

    async def main() -> None:
        app = app_with(stall=stall, stall_mid_stream=stall_mid_stream)
        async with serving(app) as up, proxied(up, record, upstream_timeout_s=0.3) as proxy, \
                aiohttp.ClientSession() as s:
            t0 = time.monotonic()
            async with s.post(proxy.base_url + "/stall", json={}) as r:
                assert r.status == 504 and (await r.json())["error"]["code"] == "upstream_timeout"
            cut = False
            try:
                async with s.post(proxy.base_url + "/stall_mid_stream", json={}) as r:
                    assert r.status == 200
                    await r.read()
            except aiohttp.ClientPayloadError:
                cut = True
            assert cut
            assert time.monotonic() - t0 < 5
            async with s.get(proxy.base_url + "/ok") as r:
                assert r.status == 200

    run(main())
    assert [r["x_gripprobe_proxy_error"] for r in read_records(record)] == ["upstream_timeout"] * 2 + [None]


def test_stop_with_a_stream_in_flight_does_not_hang(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: 1\n\n")
        await asyncio.sleep(30)
        return resp

    async def main() -> float:
        async with serving(app_with(slow=slow)) as up:
            proxy = RecordingProxy(up, record)
            await proxy.start()
            async with aiohttp.ClientSession() as s:
                r = await s.get(proxy.base_url + "/slow")
                assert await r.content.readline() == b"data: 1\n"
                t0 = time.monotonic()
                await proxy.stop()
                took = time.monotonic() - t0
                r.close()
            await proxy.stop()  # idempotent
            return took

    assert run(main()) < 2.0
    [rec] = read_records(record)
    assert rec["x_gripprobe_proxy_error"] == "proxy_stopped"


# ------------------------------------------------------------------------------------ redaction

def test_secrets_never_reach_the_record_file(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    canaries = ["sk-canaryAUTH0123456789abcdef", "canary-xapikey-5f3e", "canary-body-key-9b1d", "canary-cookie-77aa"]
    seen: list[dict[str, str]] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"id": "c1", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        async with serving(app) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            headers = {"Authorization": f"Bearer {canaries[0]}", "X-Api-Key": canaries[1],
                       "Cookie": f"session={canaries[3]}"}
            body = {"model": "m", "api_key": canaries[2], "messages": [{"role": "user", "content": "hello"}]}
            async with s.post(proxy.base_url + "/v1/chat/completions", json=body, headers=headers) as r:
                assert r.status == 200

    run(main())
    assert seen[0]["Authorization"] == f"Bearer {canaries[0]}"  # relayed to the upstream, of course
    text = record.read_text()
    assert json.loads(text.splitlines()[0])["x_gripprobe_path"] == "/v1/chat/completions"
    for canary in canaries:
        assert canary not in text


# ----------------------------------------------------------------------------- robustness, files

class BrokenObserver:
    """An observer that fails at every step (a bug in a parser must not cost the agent its reply)."""

    def __init__(self, **request: object) -> None:
        if request.get("path") == "/ctor":
            raise RuntimeError("cannot observe")

    def feed(self, chunk: bytes) -> None:
        raise ValueError("cannot parse")

    def finish(self, **_: object) -> dict:
        raise KeyError("cannot finish")


def test_a_failing_observer_never_breaks_the_relay(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def main() -> None:
        app = app_with(ctor=ok)
        async with serving(app) as up, proxied(up, record, observer_factory=BrokenObserver) as proxy, \
                aiohttp.ClientSession() as s:
            for path in ("/ok", "/ctor"):
                async with s.get(proxy.base_url + path) as r:
                    assert r.status == 200 and await r.json() == {"ok": True}

    run(main())
    records = read_records(record)
    assert [(r["x_gripprobe_path"], r["x_gripprobe_status"]) for r in records] == [("/ok", 200), ("/ctor", 200)]
    assert all(r["x_gripprobe_observer_error"] is True and "x_gripprobe_response" not in r for r in records)


def test_record_file_is_this_proxys_alone(tmp_path: Path) -> None:
    """A stale file from an earlier run is removed at start; no traffic leaves no file."""
    record = tmp_path / "proxy.measured.http.jsonl"
    record.write_text('{"x_gripprobe_path": "/stale"}\n')

    async def main() -> None:
        async with serving(app_with()) as up, proxied(up, record):
            pass

    run(main())
    assert not record.exists()

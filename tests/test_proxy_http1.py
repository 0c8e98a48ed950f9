"""The recording proxy speaks HTTP/1.1 correctly on both sides: real sockets and servers on 127.0.0.1.

These pin the wire behaviour any rewrite of the proxy's HTTP layer must keep: keep-alive towards
the client and pooled connections towards the upstream, pipelining in order, chunked request
bodies re-framed with a length, ``Expect: 100-continue``, connection close semantics (HTTP/1.0,
``Connection: close``), malformed requests answered without hanging, upstreams that close idle or
every connection or that frame the body by EOF, uncommon statuses and reason phrases, repeated
headers both ways, large bodies to a slow reader, and percent-encoded paths. Raw sockets
(``asyncio.open_connection``) are used wherever the client's exact bytes matter.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from gripprobe_core.proxy import RecordingProxy, read_records
from proxy_helpers import app_with, proxied, run, serving  # noqa: E402

TIMEOUT = 2.0
"""Longest wait for any single network step; a hang fails the test instead of stalling the suite."""


# ------------------------------------------------------------------------------------- helpers

async def connect(proxy: RecordingProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = proxy.base_url.removeprefix("http://").rsplit(":", 1)
    return await asyncio.wait_for(asyncio.open_connection(host, int(port)), TIMEOUT)


def host_header(proxy: RecordingProxy) -> bytes:
    return proxy.base_url.removeprefix("http://").encode()


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), TIMEOUT)
    except (ConnectionError, asyncio.TimeoutError):
        pass


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, list[tuple[str, str]]]:
    """Status line and header fields of one response (``(b"", [])`` at EOF)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
    lines = head[:-4].split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name.decode("latin-1").strip(), value.decode("latin-1").strip()))
    return lines[0], headers


def header(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in headers if k.lower() == name.lower()]


async def read_response(reader: asyncio.StreamReader, *, slow: bool = False) -> tuple[bytes, list[tuple[str, str]], bytes]:
    """One complete response: status line, headers, body (Content-Length, chunked or until EOF).
    ``slow``: a reluctant client reading at most 64 KiB, then pausing 10 ms, again and again."""
    status_line, headers = await read_head(reader)

    async def exactly(n: int) -> bytes:
        if not slow:
            return await asyncio.wait_for(reader.readexactly(n), TIMEOUT)
        out = bytearray()
        while len(out) < n:
            piece = await asyncio.wait_for(reader.read(min(65536, n - len(out))), TIMEOUT)
            if not piece:
                raise asyncio.IncompleteReadError(bytes(out), n)
            out += piece
            await asyncio.sleep(0.01)
        return bytes(out)

    if any("chunked" in v.lower() for v in header(headers, "Transfer-Encoding")):
        body = bytearray()
        while True:
            size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), TIMEOUT)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await asyncio.wait_for(reader.readuntil(b"\r\n"), TIMEOUT)) != b"\r\n":
                    pass  # trailer fields
                return status_line, headers, bytes(body)
            body += await exactly(size)
            assert await asyncio.wait_for(reader.readexactly(2), TIMEOUT) == b"\r\n"
    length = header(headers, "Content-Length")
    if length:
        return status_line, headers, await exactly(int(length[0]))
    return status_line, headers, await asyncio.wait_for(reader.read(), TIMEOUT)  # delimited by EOF


async def assert_closed_by_proxy(reader: asyncio.StreamReader) -> None:
    """After a complete response, the proxy closes the connection (EOF, or a reset) within 2 s."""
    try:
        rest = await asyncio.wait_for(reader.read(), TIMEOUT)
    except ConnectionResetError:
        return
    except asyncio.TimeoutError:
        raise AssertionError("the proxy kept the connection open after the response") from None
    assert rest == b"", f"unexpected bytes after the response: {rest[:200]!r}"


def no_proxy_errors(records: list[dict]) -> bool:
    return all(r["x_gripprobe_proxy_error"] is None for r in records)


# ----------------------------------------------------------------------------------- keep-alive

def test_keep_alive_on_both_sides_over_20_requests(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    peers: list[Any] = []

    async def echo(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        return web.json_response({"n": int(request.query["n"])})

    async def main() -> int:
        created = 0

        async def on_create(session: Any, ctx: Any, params: Any) -> None:
            nonlocal created
            created += 1

        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(on_create)
        async with serving(app_with(echo=echo)) as up, proxied(up, record) as proxy, \
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), trace_configs=[trace]) as s:
            for n in range(20):
                async with s.get(proxy.base_url + f"/echo?n={n}") as r:
                    assert r.status == 200 and await r.json() == {"n": n}
        return created

    created = run(main())
    assert created == 1, f"the client needed {created} connections: the proxy does not keep the client's alive"
    assert len(peers) == 20
    assert len(set(peers)) <= 2, f"the upstream saw {len(set(peers))} connections: the proxy does not pool"
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] * 20 and no_proxy_errors(records)


def test_pipelined_requests_answered_in_order(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)  # the first answer is ready last: ordering is really tested
        return web.Response(body=b"first, slow", content_type="text/plain")

    async def fast(request: web.Request) -> web.Response:
        return web.Response(body=b"second, fast", content_type="text/plain")

    async def main() -> None:
        async with serving(app_with(slow=slow, fast=fast)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            h = host_header(proxy)
            writer.write(b"GET /slow HTTP/1.1\r\nHost: " + h + b"\r\n\r\n"
                         b"GET /fast HTTP/1.1\r\nHost: " + h + b"\r\n\r\n")
            await writer.drain()
            first = await read_response(reader)
            second = await read_response(reader)
            await close(writer)
        assert first[0].startswith(b"HTTP/1.1 200") and first[2] == b"first, slow"
        assert second[0].startswith(b"HTTP/1.1 200") and second[2] == b"second, fast"

    run(main())
    records = read_records(record)
    assert sorted(r["x_gripprobe_path"] for r in records) == ["/fast", "/slow"] and no_proxy_errors(records)


# ------------------------------------------------------------------------------- request bodies

def test_chunked_request_body_is_forwarded_with_a_length(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    seen: dict[str, Any] = {}
    chunks = [b'{"model": "m", ', b'"messages": [], ', b'"stream": false}']

    async def sink(request: web.Request) -> web.Response:
        seen["body"] = await request.read()
        seen["headers"] = CIMultiDict(request.headers)
        return web.json_response({"got": len(seen["body"])})

    async def main() -> None:
        async with serving(app_with(sink=sink)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            wire = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
            writer.write(b"POST /sink HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n"
                         b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + wire)
            await writer.drain()
            status_line, _, body = await read_response(reader)
            await close(writer)
        assert status_line.startswith(b"HTTP/1.1 200") and body == b'{"got": %d}' % len(b"".join(chunks))

    run(main())
    whole = b"".join(chunks)
    assert seen["body"] == whole
    assert seen["headers"].getall("Content-Length") == [str(len(whole))]
    assert "Transfer-Encoding" not in seen["headers"]
    records = read_records(record)
    assert len(records) == 1 and records[0]["x_gripprobe_method"] == "POST" and no_proxy_errors(records)


# aiohttp's low-level ``web.Server`` (the proxy's HTTP layer before the raw relay) never sent
# ``100 Continue``: a client that waits for it, as RFC 9110 §10.1.1 allows, stalled until its timeout.
def test_expect_100_continue(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    seen: dict[str, Any] = {}
    payload = b'{"model": "m", "messages": []}'

    async def sink(request: web.Request) -> web.Response:
        seen["body"] = await request.read()
        seen["headers"] = CIMultiDict(request.headers)
        return web.json_response({"ok": True})

    async def main() -> None:
        async with serving(app_with(sink=sink)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"POST /sink HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n"
                         b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(payload))
            await writer.drain()
            try:
                interim, _ = await read_head(reader)
            except asyncio.TimeoutError:
                raise AssertionError("no '100 Continue' within 2 s of 'Expect: 100-continue'") from None
            assert interim.startswith(b"HTTP/1.1 100"), interim
            writer.write(payload)
            await writer.drain()
            status_line, _, body = await read_response(reader)
            await close(writer)
        assert status_line.startswith(b"HTTP/1.1 200") and body == b'{"ok": true}'

    run(main())
    assert seen["body"] == payload
    assert "Expect" not in seen["headers"]
    assert no_proxy_errors(read_records(record))


# ------------------------------------------------------------------------------ closing the client

@pytest.mark.parametrize("request_head", [
    b"GET /ok HTTP/1.0\r\n\r\n",
    b"GET /ok HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",  # HTTP/1.0: one request per connection
    b"GET /ok HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n",
], ids=["http10", "http10-keep-alive", "connection-close"])
def test_client_connection_is_closed_after_the_response(tmp_path: Path, request_head: bytes) -> None:
    record = tmp_path / "r.jsonl"

    async def main() -> None:
        async with serving(app_with()) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(request_head)
            await writer.drain()
            status_line, _, body = await read_response(reader)
            assert status_line.split(b" ", 2)[1] == b"200" and body == b'{"ok": true}'
            await assert_closed_by_proxy(reader)
            await close(writer)

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] and no_proxy_errors(records)


def test_malformed_request_is_refused_without_hanging_and_proxy_goes_on(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def main() -> None:
        async with serving(app_with()) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"\x00\x01garbage\r\n\r\n")
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.read(), TIMEOUT)  # a 400 then close, or just close
            except ConnectionResetError:
                answer = b""
            except asyncio.TimeoutError:
                raise AssertionError("the proxy hangs on a malformed request") from None
            assert answer == b"" or answer.startswith((b"HTTP/1.1 400", b"HTTP/1.0 400")), answer[:200]
            await close(writer)

            reader, writer = await connect(proxy)  # still serving
            writer.write(b"GET /ok HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            await writer.drain()
            status_line, _, body = await read_response(reader)
            await close(writer)
            assert status_line.startswith(b"HTTP/1.1 200") and body == b'{"ok": true}'

    run(main())
    records = read_records(record)
    assert records and records[-1]["x_gripprobe_path"] == "/ok" and records[-1]["x_gripprobe_status"] == 200


# ------------------------------------------------------------------------- upstream connections

def test_upstream_closing_idle_connections_is_not_an_error(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    peers: list[Any] = []

    async def hit(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        return web.json_response({"ok": True})

    async def main() -> None:
        async with serving(app_with(hit=hit), keepalive_timeout=0.05) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            request = b"GET /hit HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n"
            statuses = []
            for i in range(2):
                if i:
                    await asyncio.sleep(0.3)  # the upstream has closed its idle connection meanwhile
                writer.write(request)  # the same client connection both times
                await writer.drain()
                status_line, _, body = await read_response(reader)
                statuses.append((status_line.split(b" ", 2)[1], body))
            await close(writer)
        assert statuses == [(b"200", b'{"ok": true}')] * 2

    run(main())
    assert len(set(peers)) == 2  # sanity: the upstream really did close the first connection
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200, 200] and no_proxy_errors(records)


def test_upstream_closing_every_connection(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def once(request: web.Request) -> web.Response:
        resp = web.json_response({"n": int(request.query["n"])})
        resp.force_close()  # "Connection: close" on every answer
        return resp

    async def main() -> None:
        async with serving(app_with(once=once)) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            for n in range(5):
                async with s.get(proxy.base_url + f"/once?n={n}") as r:
                    assert r.status == 200 and await r.json() == {"n": n}

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] * 5 and no_proxy_errors(records)


def test_upstream_body_delimited_by_eof(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    payload = b'{"model": "m", "message": {"role": "assistant", "content": "' + b"x" * 5000 + b'"}, "done": true}'

    async def http10(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.02)  # the body in two writes, ended by closing
            writer.write(payload)
            await writer.drain()
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(http10, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with proxied(f"http://127.0.0.1:{port}", record) as proxy, aiohttp.ClientSession() as s:
                async with s.get(proxy.base_url + "/api/chat") as r:
                    assert r.status == 200 and r.content_type == "application/json"
                    assert await r.read() == payload
        finally:
            server.close()
            await server.wait_closed()

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] and no_proxy_errors(records)


def test_h2c_upgrade_offer_is_answered_as_http11(tmp_path: Path) -> None:
    """curl --http2 on a plain URL offers ``Upgrade: h2c``; a server that does not take the offer just
    answers in HTTP/1.1, and so does the proxy (Upgrade is hop-by-hop, not forwarded). The connection
    stays usable."""
    record = tmp_path / "r.jsonl"
    seen: list[CIMultiDict[str]] = []

    async def look(request: web.Request) -> web.Response:
        seen.append(CIMultiDict(request.headers))
        return web.json_response({"ok": True})

    async def main() -> None:
        async with serving(app_with(look=look)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /look HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n"
                         b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                         b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
                         b"GET /ok HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            await writer.drain()
            first = await read_response(reader)
            second = await read_response(reader)
            await close(writer)
        assert first[0].startswith(b"HTTP/1.1 200") and first[2] == b'{"ok": true}'
        assert second[0].startswith(b"HTTP/1.1 200") and second[2] == b'{"ok": true}'

    run(main())
    [h] = seen
    assert "Upgrade" not in h and "HTTP2-Settings" not in h
    assert [r["x_gripprobe_path"] for r in read_records(record)] == ["/look", "/ok"]


def test_client_half_close_still_gets_its_response(tmp_path: Path) -> None:
    """A client that shuts down its sending side after the request (``shutdown(SHUT_WR)``) still
    gets the whole response, then the proxy closes."""
    record = tmp_path / "r.jsonl"

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.1)
        return web.json_response({"slow": True})

    async def main() -> None:
        async with serving(app_with(slow=slow)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /slow HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            writer.write_eof()
            status_line, _, body = await read_response(reader)
            assert status_line.startswith(b"HTTP/1.1 200") and body == b'{"slow": true}'
            await assert_closed_by_proxy(reader)
            await close(writer)

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] and no_proxy_errors(records)


# -------------------------------------------------------------------------- statuses and headers

def test_uncommon_status_and_reason_phrase(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def teapot(request: web.Request) -> web.Response:
        return web.Response(status=418, reason="I'm a teapot", text="short and stout")

    async def main() -> None:
        async with serving(app_with(teapot=teapot)) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            async with s.get(proxy.base_url + "/teapot") as r:
                assert (r.status, r.reason) == (418, "I'm a teapot")
                assert await r.read() == b"short and stout"

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [418] and no_proxy_errors(records)


def test_repeated_response_headers_are_all_relayed(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"

    async def multi(request: web.Request) -> web.Response:
        resp = web.json_response({"ok": True})
        resp.headers.add("X-Multi", "a")
        resp.headers.add("X-Multi", "b")
        return resp

    async def main() -> None:
        async with serving(app_with(multi=multi)) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            async with s.get(proxy.base_url + "/multi") as r:
                assert r.status == 200 and await r.json() == {"ok": True}
                assert r.headers.getall("X-Multi") == ["a", "b"]

    run(main())
    assert no_proxy_errors(read_records(record))


def test_repeated_request_headers_are_all_forwarded(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    seen: list[str] = []

    async def multi(request: web.Request) -> web.Response:
        seen.extend(request.headers.getall("X-Multi", []))
        return web.json_response({"ok": True})

    async def main() -> None:
        headers = CIMultiDict([("X-Multi", "a"), ("X-Multi", "b")])
        async with serving(app_with(multi=multi)) as up, proxied(up, record) as proxy, aiohttp.ClientSession() as s:
            async with s.get(proxy.base_url + "/multi", headers=headers) as r:
                assert r.status == 200

    run(main())
    assert seen == ["a", "b"]
    assert no_proxy_errors(read_records(record))


# ------------------------------------------------------------------------------- bodies and paths

def test_large_body_to_a_slow_reader_arrives_intact(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    # Random bytes: no repeating pattern can hide a lost or reordered block, and the recorded text
    # holds U+0085/U+2028 (which read_records must not take for line ends).
    big = random.Random(1418).randbytes(3 * 1024 * 1024)

    async def large(request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="application/octet-stream")

    async def main() -> None:
        async with serving(app_with(large=large)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /large HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            await writer.drain()
            status_line, headers, body = await read_response(reader, slow=True)
            await close(writer)
        assert status_line.startswith(b"HTTP/1.1 200")
        assert header(headers, "Content-Type") == ["application/octet-stream"]
        assert len(body) == len(big) and body == big

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] and no_proxy_errors(records)


def test_percent_encoded_path_recorded_decoded_and_forwarded_raw(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    seen: dict[str, str] = {}

    async def anything(request: web.Request) -> web.Response:
        seen["raw_path"] = request.raw_path
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)

    async def main() -> None:
        async with serving(app) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /api/x%2Fy?a=1 HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            await writer.drain()
            status_line, _, body = await read_response(reader)
            await close(writer)
        assert status_line.startswith(b"HTTP/1.1 200") and body == b'{"ok": true}'

    run(main())
    assert seen["raw_path"] == "/api/x%2Fy?a=1"  # the upstream gets the client's bytes, not a re-encoding
    records = read_records(record)
    assert len(records) == 1
    assert records[0]["x_gripprobe_path"] == "/api/x/y"  # decoded, as aiohttp's request.path gives it
    assert records[0]["x_gripprobe_query"] == "a=1"
    assert no_proxy_errors(records)


def test_absolute_form_target_is_forwarded_as_its_path(tmp_path: Path) -> None:
    """A client that talks to the proxy as to a forward proxy (``GET http://host/path``) still reaches
    the upstream's path, under its prefix."""
    record = tmp_path / "r.jsonl"
    seen: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response({"ok": True})

    async def main() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", anything)
        async with serving(app) as up, proxied(up + "/base", record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET http://example.invalid/v1/models?x=1 HTTP/1.1\r\nHost: example.invalid\r\n\r\n")
            await writer.drain()
            status_line, _, _ = await read_response(reader)
            await close(writer)
            assert status_line.startswith(b"HTTP/1.1 200")

    run(main())
    assert seen == ["/base/v1/models?x=1"]
    assert [r["x_gripprobe_path"] for r in read_records(record)] == ["/v1/models"]


def test_a_client_that_stops_reading_stops_the_upstream_read(tmp_path: Path) -> None:
    """Flow control: while the client reads nothing, the proxy stops reading the upstream, so the
    upstream's writes block instead of the stream piling up in the proxy's memory."""
    record = tmp_path / "r.jsonl"
    block = b"data: " + b"x" * 65530 + b"\n\n"
    total = 64 * 1024 * 1024
    sent = [0]

    async def flood(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        while sent[0] < total:
            await resp.write(block)  # waits while the proxy does not read
            sent[0] += len(block)
        await resp.write_eof()
        return resp

    async def main() -> None:
        async with serving(app_with(flood=flood)) as up, proxied(up, record) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /flood HTTP/1.1\r\nHost: " + host_header(proxy) + b"\r\n\r\n")
            await writer.drain()
            await read_head(reader)
            await asyncio.sleep(1.0)  # read nothing
            assert sent[0] < 24 * 1024 * 1024, f"{sent[0] >> 20} MiB left the upstream while the client read nothing"
            got = 0
            while True:
                piece = await asyncio.wait_for(reader.read(1 << 20), 10)
                got += len(piece)
                if not piece or piece.endswith(b"\r\n0\r\n\r\n"):
                    break
            await close(writer)
            assert sent[0] >= total and got > sent[0]  # every byte, plus the chunk framing

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_status"] for r in records] == [200] and no_proxy_errors(records)


# ---------------------------------------------------------------------------------------- https

def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command (present wherever
    Debian's ca-certificates is)."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("the openssl command is needed for the https upstream test (apt-get install openssl)")
        pytest.skip("no openssl command")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def test_https_upstream_verified_against_the_trusted_cas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An https upstream is relayed when its certificate is trusted (``SSL_CERT_FILE``), and refused
    as ``proxy_connect_error`` when it is not: the proxy never skips verification."""
    cert, key = self_signed(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def main(record: Path) -> tuple[int, bytes]:
        runner = web.AppRunner(app_with(), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        try:
            upstream = f"https://127.0.0.1:{runner.addresses[0][1]}"
            async with proxied(upstream, record) as proxy, aiohttp.ClientSession() as s, \
                    s.get(proxy.base_url + "/ok") as r:
                return r.status, await r.read()
        finally:
            await runner.cleanup()

    status, body = run(main(tmp_path / "untrusted.jsonl"))  # the system's CAs do not know this one
    assert status == 502 and b"proxy_connect_error" in body
    [rec] = read_records(tmp_path / "untrusted.jsonl")
    assert rec["x_gripprobe_proxy_error"] == "proxy_connect_error"

    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert run(main(tmp_path / "trusted.jsonl")) == (200, b'{"ok": true}')
    assert no_proxy_errors(read_records(tmp_path / "trusted.jsonl"))

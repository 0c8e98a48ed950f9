"""The oracle's own HTTP/1.1 server (oracle/http.py: asyncio and httptools, no aiohttp), over real sockets on
127.0.0.1: routing (404, 405 with Allow, HEAD), keep-alive and pipelining, chunked request bodies,
``Expect: 100-continue``, the 1 MiB body limit, streams (chunked; close-delimited for HTTP/1.0), malformed
requests, a client leaving (its handler cancelled), shutdown (idle connections closed, running handlers given
their time, then cancelled); and the same answers through the aiohttp application ``make_app`` offers."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import aiohttp
import pytest
from aiohttp import web

from gripprobe_core.oracle.http import CLIENT_MAX_SIZE, Out, StreamOut, serve
from gripprobe_core.oracle.server import OracleServer
from gripprobe_core.models.specs import ReferenceWrite, WriteArgs

ACTIONS = [ReferenceWrite(write=WriteArgs(path="a.txt", content="hi\n"))]


def run(coro):
    return asyncio.run(coro)


async def raw(port: int, data: bytes, *, until_close: bool = True, read_for: float = 2.0) -> bytes:
    """Send ``data`` on a fresh connection; everything the server sent until it closed (or ``read_for`` s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), read_for)
            if not chunk:
                break
            out += chunk
    except asyncio.TimeoutError:
        assert not until_close, f"the server did not close the connection; got {out!r}"
    writer.close()
    return out


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split a byte stream of responses with Content-Length or chunked bodies."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        if status == 100:
            out.append((100, headers, b""))
            data = rest
            continue
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line, 16)
                body, rest = body + rest[:size], rest[size + 2:]
                if size == 0:
                    break
        elif "content-length" in headers:
            n = int(headers["content-length"])
            body, rest = rest[:n], rest[n:]
        else:
            body, rest = rest, b""
        out.append((status, headers, body))
        data = rest
    return out


async def echo(request) -> Out:
    return Out.json({"path": request.path, "body": (await request.read()).decode(), "auth": request.headers.get("AUTHORIZATION")})


def test_routes_404_405_and_head():
    async def main():
        server = await serve([("GET", "/a", echo), ("POST", "/b", echo)])
        try:
            got = responses(await raw(server.port, b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            assert got[0][0] == 404 and got[0][2] == b"404: Not Found"
            got = responses(await raw(server.port, b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            assert got[0][0] == 405 and got[0][1]["allow"] == "POST"
            got = await raw(server.port, b"HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            head, _, body = got.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK") and body == b""
            assert int(dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])["Content-Length"]) > 0
        finally:
            await server.close()
    run(main())


def test_keep_alive_pipelining_chunked_body_and_percent_decoded_path():
    async def main():
        server = await serve([("POST", "/v1/x y", echo)])
        try:
            one = b"POST /v1/x%20y?q=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Length: 3\r\n\r\nabc"
            two = (b"POST /v1/x%20y HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                   b"2\r\nde\r\n1\r\nf\r\n0\r\n\r\n")
            got = responses(await raw(server.port, one + two))  # pipelined: answered in order, on one connection
            assert [json.loads(b) for _, _, b in got] == [{"path": "/v1/x y", "body": "abc", "auth": "Bearer t"},
                                                         {"path": "/v1/x y", "body": "def", "auth": None}]
            assert "connection" not in got[0][1] and got[1][1]["connection"] == "close"
            assert got[0][1]["content-type"] == "application/json; charset=utf-8"
        finally:
            await server.close()
    run(main())


def test_expect_continue_and_the_body_limit():
    async def main():
        server = await serve([("POST", "/p", echo)])
        try:
            got = responses(await raw(server.port, b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                                   b"Content-Length: 2\r\nConnection: close\r\n\r\nok"))
            assert [s for s, _, _ in got] == [100, 200] and json.loads(got[1][2])["body"] == "ok"
            big = b"x" * CLIENT_MAX_SIZE
            got = responses(await raw(server.port, b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                                      % (len(big), big)))
            assert got[0][0] == 413 and got[0][1]["connection"] == "close"
            small = b"y" * (CLIENT_MAX_SIZE - 1)
            got = responses(await raw(server.port, b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                                      b"Connection: close\r\n\r\n%s" % (len(small), small)))
            assert got[0][0] == 200 and len(json.loads(got[0][2])["body"]) == len(small)
        finally:
            await server.close()
    run(main())


def test_malformed_request_is_400_and_closed():
    async def main():
        server = await serve([("GET", "/", echo)])
        try:
            got = responses(await raw(server.port, b"NOT HTTP AT ALL\r\n\r\n"))
            assert got[0][0] == 400
        finally:
            await server.close()
    run(main())


def test_streams_are_chunked_for_1_1_and_close_delimited_for_1_0():
    frames = [b"data: 1\n\n", b"", b"data: 2\n\n"]

    async def stream(request) -> StreamOut:
        return StreamOut("text/event-stream", frames, delay_s=0.01)

    async def main():
        server = await serve([("GET", "/s", stream)])
        try:
            data = await raw(server.port, b"GET /s HTTP/1.1\r\nHost: x\r\n\r\nGET /s HTTP/1.1\r\nHost: x\r\n"
                                          b"Connection: close\r\n\r\n")
            got = responses(data)
            assert [(s, h["transfer-encoding"], b) for s, h, b in got] == [(200, "chunked", b"".join(frames))] * 2
            assert got[0][1]["cache-control"] == "no-cache"
            data = await raw(server.port, b"GET /s HTTP/1.0\r\n\r\n")
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.0 200") and b"Transfer-Encoding" not in head and body == b"".join(frames)
        finally:
            await server.close()
    run(main())


def test_a_client_that_leaves_cancels_its_handler_and_close_cancels_a_slow_one():
    events: list[str] = []

    async def slow(request) -> Out:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return Out.text("late")

    async def main():
        server = await serve([("GET", "/slow", slow)], shutdown_timeout=0.2)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.close()  # the client leaves
            for _ in range(100):
                if events:
                    break
                await asyncio.sleep(0.01)
            assert events == ["cancelled"]
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port)
            await asyncio.sleep(0.1)
        finally:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await server.close()
            took = loop.time() - t0
        assert events == ["cancelled", "cancelled"] and 0.15 < took < 3.0
        assert await asyncio.wait_for(reader.read(), 2) == b"" and await asyncio.wait_for(idle_reader.read(), 2) == b""
        writer.close()
        idle_writer.close()
    run(main())


def test_the_oracle_answers_the_same_bodies_as_its_aiohttp_application():
    """OracleServer.start (oracle/http.py) and make_app (aiohttp) run the same handlers: the same bodies, the same
    statuses, on a model request (whole and streamed), a listing endpoint, an error and an unknown path."""
    body = {"model": "perfect", "messages": [{"role": "user", "content": "write a.txt"}],
            "tools": [{"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}}}}]}
    asks = [("POST", "/v1/chat/completions", body), ("POST", "/v1/chat/completions", {**body, "stream": True}),
            ("GET", "/v1/models", None), ("POST", "/api/show", {}), ("GET", "/nope", None), ("GET", "/", None)]

    async def answers(base: str) -> list[tuple[int, bytes]]:
        out = []
        async with aiohttp.ClientSession() as s:
            for method, path, payload in asks:
                async with s.request(method, base + path, json=payload) as r:
                    out.append((r.status, r.headers.get("Content-Type", "").split(";")[0], await r.read()))
        return out

    def scrub(items: list[tuple[int, str, bytes]]) -> list[tuple[int, str, object]]:
        """Model replies carry their creation time: compare them without it."""
        return [(status, ctype, re.sub(r'"created": \d+', '"created": 0', data.decode())) for status, ctype, data in items]

    async def main():
        async with OracleServer(ACTIONS) as oracle:
            own = await answers(oracle.base_url)
        other = OracleServer(ACTIONS)
        runner = web.AppRunner(other.make_app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            theirs = await answers(f"http://127.0.0.1:{runner.addresses[0][1]}")
        finally:
            await runner.cleanup()
        return own, theirs

    own, theirs = run(main())
    assert [s for s, _, _ in own] == [200, 200, 200, 400, 404, 200]
    assert scrub(own) == scrub(theirs)


def test_starting_the_oracle_imports_no_aiohttp():
    code = ("import asyncio, sys\nfrom gripprobe_core.oracle.server import OracleServer\n"
            "async def main():\n    async with OracleServer([]) as o:\n        assert o.base_url.startswith('http://127.0.0.1:')\n"
            "asyncio.run(main())\nprint('aiohttp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"

"""The oracle's HTTP/1.1 server: asyncio and httptools (the parser the recording proxy uses), nothing else.

The oracle answers a handful of routes on 127.0.0.1 for one phase; aiohttp's web framework did that, but
importing it (and, through its package, its client, cookie jar, tracing and two TLS contexts) cost about
0.14 s of CPU in every run. This module is what the oracle needs of a server and no more:

* requests parsed by httptools (``Content-Length`` or chunked bodies, pipelining, ``Expect:
  100-continue``), answered in order on each connection, kept alive unless the client (or HTTP/1.0)
  says otherwise;
* a route table of exact paths; an unknown path is 404, a known path with another method 405 (with
  ``Allow``), ``HEAD`` answered like ``GET`` without the body;
* a body of :data:`CLIENT_MAX_SIZE` bytes or more is answered 413 without calling the handler (the limit
  aiohttp applied: 1 MiB);
* a handler returns an :class:`Out` (one body) or a :class:`StreamOut` (frames written chunked, paced by
  its delays); a handler that raises :class:`asyncio.CancelledError` gets no answer: the connection is
  dropped (a stalling profile);
* a client that leaves cancels its connection's handler; :meth:`HttpServer.close` stops listening, lets
  running handlers finish for ``shutdown_timeout`` seconds, then cancels them and closes every connection.

:mod:`.server` also offers the same routes as an aiohttp application (``OracleServer.make_app``) for callers
that serve it themselves; both turn the same :class:`Out` / :class:`StreamOut` into the same bytes of body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Awaitable, Callable, Iterable, Union
from urllib.parse import unquote

import httptools

__all__ = ["CLIENT_MAX_SIZE", "Handler", "Headers", "HttpRequest", "HttpServer", "Out", "StreamOut", "serve"]

log = logging.getLogger(__name__)

CLIENT_MAX_SIZE = 1024 ** 2
"""A request body of this many bytes or more is answered 413 (aiohttp's default ``client_max_size``)."""
SERVER = b"gripprobe-oracle"
_REASONS = {int(s): s.phrase.encode() for s in HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_JSON = "application/json; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"


class Headers:
    """A request's headers: ``raw`` as received (name, value) in order; :meth:`get` by name in any case
    (the first of repeated names)."""

    __slots__ = ("raw", "_first")

    def __init__(self, raw: list[tuple[str, str]]) -> None:
        self.raw = raw
        self._first: dict[str, str] = {}
        for name, value in raw:
            self._first.setdefault(name.lower(), value)

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._first[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first


@dataclass
class HttpRequest:
    """One parsed request: what the oracle's handlers read (``path``, ``headers``, ``await read()``)."""

    method: str
    target: bytes
    headers: Headers
    body: bytes
    version: str
    keep_alive: bool
    transport: asyncio.Transport | None = None

    @property
    def path(self) -> str:
        """The path, percent-decoded, without the query (as aiohttp's ``request.path``)."""
        try:
            path = httptools.parse_url(self.target).path
        except httptools.HttpParserInvalidURLError:
            path = None
        return unquote((path or b"/").decode("latin-1"), encoding="utf-8", errors="replace")

    async def read(self) -> bytes:
        return self.body


@dataclass
class Out:
    """One whole answer."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> "Out":
        """``data`` as aiohttp's ``json_response`` writes it (``json.dumps``, UTF-8)."""
        return cls(status, json.dumps(data).encode("utf-8"), _JSON, dict(headers or {}))

    @classmethod
    def text(cls, text: str, status: int = 200) -> "Out":
        return cls(status, text.encode("utf-8"), _TEXT)


@dataclass
class StreamOut:
    """An answer written frame by frame: ``delay_s`` between frames, and, when there are fewer than
    ``min_gaps`` gaps (an Ollama tool call is one line), the missing ones waited for after the headers, so
    a paced reply takes at least ``min_gaps × delay_s`` on every protocol."""

    content_type: str
    frames: list[bytes]
    delay_s: float = 0.0
    min_gaps: int = 0
    headers: dict[str, str] = field(default_factory=lambda: {"Cache-Control": "no-cache"})

    def waits(self) -> Iterable[tuple[float, bytes | None]]:
        """``(seconds to wait, frame to write)`` in order; a ``None`` frame is only a wait."""
        missing = max(0, self.min_gaps - (len(self.frames) - 1))
        if self.delay_s > 0 and missing:
            yield self.delay_s * missing, None
        for i, frame in enumerate(self.frames):
            yield 0.0, frame
            if self.delay_s > 0 and i < len(self.frames) - 1:
                yield self.delay_s, None


Answer = Union[Out, StreamOut]
Handler = Callable[[Any], Awaitable[Answer]]
"""``async handler(request) -> Out | StreamOut``; ``request`` has ``path``, ``headers.get`` and ``read()``."""


def _head(version: str, status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [b"HTTP/%s %d %s\r\n" % (version.encode(), status, _REASONS.get(status, b"Unknown")),
             b"Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()).encode() + b"\r\n",
             b"Server: " + SERVER + b"\r\n"]
    for name, value in headers:
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    lines.append(b"\r\n")
    return b"".join(lines)


class _Connection(asyncio.Protocol):
    """One client connection: parses requests as they come, answers them in order on one task."""

    def __init__(self, server: "HttpServer") -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.pending: deque[HttpRequest | int] = deque()  # requests, or a status to answer and close
        self.task: asyncio.Task[None] | None = None
        self.lost = False
        self._url = bytearray()
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._size = 0
        self._too_large = False
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------------------ asyncio protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.lost:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._queue(400)
        except httptools.HttpParserError:
            self._queue(400)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()  # the client left: its handler stops (aiohttp's handler_cancellation)
        self._wake(ConnectionResetError("the client closed the connection"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    # ----------------------------------------------------------------------------- httptools callbacks

    def on_message_begin(self) -> None:
        self._url = bytearray()
        self._headers, self._body, self._size, self._too_large = [], [], 0, False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        length = next((v for k, v in self._headers if k.lower() == "content-length"), None)
        if length is not None and length.strip().isdigit() and int(length) >= CLIENT_MAX_SIZE:
            self._too_large = True
        elif any(k.lower() == "expect" and v.strip().lower() == "100-continue" for k, v in self._headers) \
                and self.transport is not None and not self.pending and (self.task is None or self.task.done()):
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size >= CLIENT_MAX_SIZE:
            self._too_large = True
            self._body = []
        elif not self._too_large:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._too_large:
            self._queue(413)
            return
        self._queue(HttpRequest(
            method=self.parser.get_method().decode("latin-1"), target=bytes(self._url),
            headers=Headers(self._headers), body=b"".join(self._body), version=self.parser.get_http_version(),
            keep_alive=self.parser.should_keep_alive(), transport=self.transport))

    # --------------------------------------------------------------------------------------- answering

    def _queue(self, item: HttpRequest | int) -> None:
        self.pending.append(item)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._answer_all())

    async def _answer_all(self) -> None:
        transport = self.transport
        assert transport is not None
        try:
            while self.pending and not self.lost:
                item = self.pending.popleft()
                if isinstance(item, int):  # unparsable or too large: answer and close
                    reason = _REASONS.get(item, b"").decode()
                    self._write_out(Out.text(f"{item}: {reason}", item), "1.1", keep_alive=False, head_only=False)
                    transport.close()
                    return
                if not await self._answer(item):
                    transport.close()
                    return
        except asyncio.CancelledError:
            transport.close()  # cancelled (the client left, the server stopped) or a handler dropped it
        except ConnectionResetError:
            transport.close()
        except Exception:  # noqa: BLE001 - a fault of ours must not leave the client hanging
            log.exception("oracle HTTP server: answering a request failed")
            transport.close()

    async def _answer(self, request: HttpRequest) -> bool:
        """Answer ``request``; False when the connection is to be closed after it."""
        version = request.version if request.version in ("1.0", "1.1") else "1.1"
        keep_alive = request.keep_alive and not self.server.closing
        head_only = request.method == "HEAD"
        found = self.server.route(request.method, request.path)
        if isinstance(found, str):
            answer: Answer = Out.text("405: Method Not Allowed", 405)
            answer.headers["Allow"] = found
        elif found is None:
            answer = Out.text("404: Not Found", 404)
        else:
            try:
                answer = await found(request)
            except (asyncio.CancelledError, ConnectionResetError):
                raise
            except Exception:  # noqa: BLE001 - as aiohttp: a 500, logged
                log.exception("oracle HTTP server: handler for %s %s failed", request.method, request.path)
                answer = Out.text("500 Internal Server Error\n\nServer got itself in trouble", 500)
                keep_alive = False
        if isinstance(answer, StreamOut):
            return await self._write_stream(answer, version, keep_alive, head_only)
        self._write_out(answer, version, keep_alive=keep_alive, head_only=head_only)
        await self._drain()
        return keep_alive

    def _write_out(self, out: Out, version: str, *, keep_alive: bool, head_only: bool) -> None:
        headers = [("Content-Type", out.content_type)] if out.content_type else []
        headers += [("Content-Length", str(len(out.body)))]
        headers += list(out.headers.items())
        if not keep_alive:
            headers.append(("Connection", "close"))
        elif version == "1.0":
            headers.append(("Connection", "keep-alive"))
        assert self.transport is not None
        self.transport.write(_head(version, out.status, headers) + (b"" if head_only else out.body))

    async def _write_stream(self, out: StreamOut, version: str, keep_alive: bool, head_only: bool) -> bool:
        chunked = version == "1.1"
        keep_alive = keep_alive and chunked  # an HTTP/1.0 stream ends when the connection does
        headers = [("Content-Type", out.content_type), *out.headers.items()]
        headers.append(("Transfer-Encoding", "chunked") if chunked else ("Connection", "close"))
        if chunked and not keep_alive:
            headers.append(("Connection", "close"))
        transport = self.transport
        assert transport is not None
        transport.write(_head(version, 200, headers))
        if head_only:
            if chunked:
                transport.write(b"0\r\n\r\n")
            return keep_alive
        for wait, frame in out.waits():
            if wait > 0:
                await asyncio.sleep(wait)
            if frame:  # an empty chunk would end the body
                transport.write(b"%x\r\n%s\r\n" % (len(frame), frame) if chunked else frame)
                await self._drain()
        if chunked:
            transport.write(b"0\r\n\r\n")
        await self._drain()
        return keep_alive

    async def _drain(self) -> None:
        if self.lost:
            raise ConnectionResetError("the client closed the connection")
        if not self._paused:
            return
        self._drained = asyncio.get_running_loop().create_future()
        await self._drained

    def _wake(self, exc: BaseException | None) -> None:
        waiter, self._drained = self._drained, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)


class HttpServer:
    """A listening server: :attr:`port`, :meth:`route`, :meth:`close`."""

    def __init__(self, routes: list[tuple[str, str, Handler]], shutdown_timeout: float) -> None:
        self.routes: dict[str, dict[str, Handler]] = {}
        for method, path, handler in routes:
            self.routes.setdefault(path, {})[method.upper()] = handler
            if method.upper() == "GET":
                self.routes[path].setdefault("HEAD", handler)
        self.shutdown_timeout = shutdown_timeout
        self.connections: set[_Connection] = set()
        self.closing = False
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    def route(self, method: str, path: str) -> Handler | str | None:
        """The handler of ``method`` on ``path``; the allowed methods (``"GET,HEAD"``) when only the method is
        wrong; None for an unknown path."""
        methods = self.routes.get(path)
        if methods is None:
            return None
        handler = methods.get(method.upper())
        return handler if handler is not None else ",".join(sorted(methods))

    async def close(self) -> None:
        """Stop listening; idle connections are closed at once, running handlers get ``shutdown_timeout``
        seconds to finish, then are cancelled; every connection is closed."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        busy = [c.task for c in list(self.connections) if c.task is not None and not c.task.done()]
        for c in list(self.connections):
            if c.task is None or c.task.done():
                if c.transport is not None:
                    c.transport.close()
        if busy:
            done, running = await asyncio.wait(busy, timeout=self.shutdown_timeout)
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running, timeout=1.0)
        for c in list(self.connections):
            if c.transport is not None:
                c.transport.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                pass
            self._server = None


async def serve(routes: list[tuple[str, str, Handler]], host: str = "127.0.0.1", port: int = 0, *,
                shutdown_timeout: float = 1.0) -> HttpServer:
    """Listen on ``host:port`` (0: a free port) and answer ``routes`` (``(method, path, handler)``)."""
    server = HttpServer(routes, shutdown_timeout)
    loop = asyncio.get_running_loop()
    server._server = await loop.create_server(lambda: _Connection(server), host, port)
    server.port = server._server.sockets[0].getsockname()[1]
    return server

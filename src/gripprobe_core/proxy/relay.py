"""The recording proxy's HTTP/1.1 relay: asyncio protocols on both sides, parsed by httptools (llhttp).

Why not aiohttp's server and client here: per request they cost about 0.2 ms of CPU each (request
and response objects, header multidicts, tasks, stream readers), which was most of what the proxy
added to a model call. This relay is callback-driven: the client's request is parsed as its bytes
arrive, written to a pooled upstream connection, and the upstream's response is written back to
the client from the upstream's ``data_received``, with no task, queue or copy in between.

* :class:`ClientConnection` serves one client connection (keep-alive, pipelined requests answered
  in order, ``Expect: 100-continue``, chunked request bodies, HTTP/1.0 clients). A request body over
  the proxy's ``max_request_body`` is never kept nor forwarded: the request is answered ``413``
  (``request_body_too_large``), and the rest of what the client sends is read and dropped for at
  most :data:`LINGER_S` before the connection closes.
* :class:`UpstreamPool` / :class:`UpstreamConnection`: keep-alive connections to the upstream
  (``http`` or ``https``), reused; a request whose reused connection turns out to be closed by the
  upstream is retried once on a fresh one (only when not a byte of a response came).
* :class:`Relay`: one exchange, linking the two and the proxy's :class:`~.exchange.Exchange`
  (timing, recording). Streams are written to the client as each chunk arrives; small bodies of
  known length are collected, then written in one go (a fault mid-body is then a clean 502).

Flow control: when the client's socket buffer is full (``pause_writing``) or the recorder lags
(:attr:`~.recorder_client.RecorderChild.congested`), the upstream connection stops being read until
it drains; nothing piles up in memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections import deque
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import httptools
from multidict import CIMultiDict

from .exchange import Exchange

if TYPE_CHECKING:
    from .server import RecordingProxy

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection", b"te",
    b"trailer", b"trailers", b"transfer-encoding", b"upgrade",
})
STREAM_TYPES = (b"text/event-stream", b"application/x-ndjson", b"application/jsonl", b"application/stream+json")
WHOLE_BODY_LIMIT = 1024 * 1024
"""Bodies of known length up to this size are read whole, then sent; anything else is streamed."""
ERROR_STATUS = {"proxy_connect_error": 502, "upstream_reset": 502, "upstream_malformed": 502,
                "upstream_timeout": 504, "proxy_internal_error": 500, "request_body_too_large": 413}
TOO_LARGE = "request_body_too_large"
LINGER_S = 5.0
"""After a ``413``, how long the client's further bytes are read and dropped (so that a client still
sending sees the answer instead of a reset) before the connection is closed."""
MAX_IDLE = 32
"""Idle upstream connections kept per proxy."""
MAX_PIPELINED = 16
"""Complete requests queued on one client connection before it stops being read."""
REASONS = {int(s): s.phrase.encode() for s in HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_JOIN_BODY_LIMIT = 64 * 1024
"""Request bodies up to this size go upstream in one write with their head; larger ones in a second."""


def hop_by_hop(headers: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Lower-cased names not to forward: the hop-by-hop ones, and those ``Connection`` lists
    (RFC 9110 §7.6.1)."""
    extra = [t.strip().lower() for k, v in headers if k.lower() == b"connection" for t in v.split(b",")]
    return HOP_BY_HOP.union(t for t in extra if t) if extra else HOP_BY_HOP


def error_body(reason: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "proxy_error", "code": reason}}).encode()


class _BodyTooLarge(Exception):
    """Raised from a parser callback to stop parsing a request whose body is over the cap."""


# ----------------------------------------------------------------------------------- the request

class Request:
    """One client request as parsed. The decoded views (``path``, ``query_string``, ``headers``) are
    computed on first use, which is after the client has its first response bytes."""

    __slots__ = ("method", "target", "raw_headers", "body", "size", "too_large", "keep_alive", "http10",
                 "expect_continue", "exchange", "_url", "_headers")

    def __init__(self) -> None:
        self.method = "GET"
        self.target = b""
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        """Body bytes received so far."""
        self.too_large = False
        """Its body is over the proxy's cap: it is answered 413, never relayed (its body is not kept)."""
        self.keep_alive = True
        self.http10 = False
        self.expect_continue = False
        self.exchange: Exchange | None = None
        self._url: Any = None
        self._headers: CIMultiDict[str] | None = None

    def _parsed_url(self) -> Any:
        if self._url is None:
            from yarl import URL
            try:
                self._url = URL(self.target.decode("latin-1"), encoded=True)
            except ValueError:
                self._url = URL("/")
        return self._url

    @property
    def path(self) -> str:
        """The path, percent-decoded (as aiohttp's ``request.path``)."""
        return self._parsed_url().path

    @property
    def query_string(self) -> str:
        return self._parsed_url().query_string

    @property
    def headers(self) -> CIMultiDict[str]:
        if self._headers is None:
            self._headers = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw_headers)
        return self._headers

    def whole_body(self) -> bytes:
        """The body as one bytes object (its parts are joined once)."""
        if len(self.body) != 1:
            self.body = [b"".join(self.body)]
        return self.body[0]

    def upstream_bytes(self, prefix: bytes, host: bytes) -> tuple[bytes, bytes]:
        """The request as sent upstream: the target under the upstream's path prefix, ``Host`` the
        upstream's, hop-by-hop headers, ``Host``, ``Content-Length`` and ``Expect`` dropped, the body
        whole with its ``Content-Length``. Returned as ``(head, b"")`` with a small body included in
        the head, else as ``(head, body)`` (a large body is not copied once more)."""
        drop = hop_by_hop(self.raw_headers)
        target = self.target
        if not target.startswith(b"/"):  # absolute form (as sent to a forward proxy): keep path and query
            scheme, sep, rest = target.partition(b"://")
            if sep and scheme.lower() in (b"http", b"https"):
                slash = rest.find(b"/")
                target = rest[slash:] if slash >= 0 else b"/"
        lines = [self.method.encode(), b" ", prefix, target, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
        for k, v in self.raw_headers:
            lk = k.lower()
            if lk in drop or lk in (b"host", b"content-length", b"expect") or lk.startswith(b"proxy-"):
                continue
            lines += (k, b": ", v, b"\r\n")
        body = self.whole_body()
        if body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % len(body))
        lines.append(b"\r\n")
        if len(body) > _JOIN_BODY_LIMIT:
            return b"".join(lines), body
        lines.append(body)
        return b"".join(lines), b""


# ------------------------------------------------------------------------------- client side

class ClientConnection(asyncio.Protocol):
    """One client (agent) connection to the proxy. Requests are relayed one at a time, in order."""

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.incoming: Request | None = None
        self.queue: deque[Request] = deque()
        self.relay: Relay | None = None
        self.closed = False
        self.eof = False
        self.write_paused = False
        self.reading_paused = False
        self.max_body = proxy.max_request_body
        self.lingering = False
        """A request was over the body cap: nothing more is parsed; what the client sends is dropped."""
        self._linger: asyncio.TimerHandle | None = None
        self._url: list[bytes] = []

    # transport callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.proxy._connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return
        try:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade as upgrade:
                # Upgrade (e.g. curl's h2c offer) is hop-by-hop: the request is relayed as a plain
                # HTTP/1.1 one, which is how a server that does not take the offer answers it
                rest = data[upgrade.args[0]:] if upgrade.args and isinstance(upgrade.args[0], int) else b""
                if rest:
                    self.parser.feed_data(rest)
        except httptools.HttpParserUpgrade:
            self.reject(400, b"more than one protocol upgrade on one connection")
            return
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _BodyTooLarge):
                self.body_too_large()
            else:  # one of our callbacks failed: a bug
                log.exception("recording proxy: unexpected error reading a request")
                self.reject(400, b"the recording proxy could not read this request")
                return
        except httptools.HttpParserError:
            self.reject(400, b"malformed HTTP request")
            return
        if self.relay is None and self.queue:
            self.next()

    def eof_received(self) -> bool | None:
        """The client half-closed: answer the requests it completed (and a 413), then close."""
        self.eof = True
        return True if self.relay is not None or self.queue else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.proxy._connections.discard(self)
        if self._linger is not None:
            self._linger.cancel()
        reason = "proxy_stopped" if self.proxy._stopping else "client_disconnect"
        relay, self.relay = self.relay, None
        if relay is not None:
            relay.client_gone(reason)
        pending = list(self.queue)
        self.queue.clear()
        if self.incoming is not None:  # a request still arriving
            pending.append(self.incoming)
        for req in pending:
            if req.exchange is not None:
                req.exchange.finish(TOO_LARGE if req.too_large else reason)

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.relay is not None:
            self.relay.set_paused()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.relay is not None:
            self.relay.set_paused()

    # parser callbacks
    def on_message_begin(self) -> None:
        self.incoming = Request()
        self._url = []

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.incoming is not None
        self.incoming.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        req = self.incoming
        assert req is not None
        req.target = b"".join(self._url)
        req.method = self.parser.get_method().decode("latin-1")
        req.http10 = self.parser.get_http_version() == "1.0"
        req.keep_alive = self.parser.should_keep_alive() and not req.http10  # 1.0: one request per connection
        req.exchange = Exchange(self.proxy, req)
        expect = False
        for k, v in req.raw_headers:
            lk = k.lower()
            if lk == b"content-length":  # llhttp checked it is digits, and not given twice differently
                if v.strip().isdigit() and int(v) > self.max_body:
                    raise _BodyTooLarge  # answered at once: the client gets no 100 Continue
            elif lk == b"expect" and v.strip().lower() == b"100-continue":
                expect = True
        if expect:
            req.expect_continue = True
            if self.relay is None and not self.queue and self.transport is not None:
                self.transport.write(_CONTINUE)
                req.expect_continue = False

    def on_body(self, body: bytes) -> None:
        req = self.incoming
        req.size += len(body)  # type: ignore[union-attr]
        if req.size > self.max_body:  # type: ignore[union-attr]
            raise _BodyTooLarge
        req.body.append(body)  # type: ignore[union-attr]

    def body_too_large(self) -> None:
        """The request being read has a body over the cap (declared, or past it while arriving). It
        is queued without its body, to be answered 413 in its turn (after the requests before it);
        nothing more of this connection is parsed, and the connection closes after the 413."""
        req = self.incoming
        assert req is not None
        self.incoming = None
        req.body = []
        req.too_large = True
        req.keep_alive = False
        req.expect_continue = False
        self.queue.append(req)
        self.lingering = True
        if self.relay is not None and self.transport is not None and not self.reading_paused:
            self.reading_paused = True  # until its turn: the client's sends block instead of being read
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        req = self.incoming
        assert req is not None
        self.incoming = None
        self.queue.append(req)
        if len(self.queue) >= MAX_PIPELINED and self.transport is not None and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    # relaying
    def next(self) -> None:
        """Relay the next queued request, if nothing is being relayed."""
        while self.relay is None and self.queue and not self.closed:
            req = self.queue.popleft()
            if self.reading_paused and len(self.queue) < MAX_PIPELINED // 2 and self.transport is not None:
                self.reading_paused = False
                self.transport.resume_reading()
            relay = Relay(self.proxy, self, req)
            self.relay = relay
            try:
                relay.start()
            except Exception as exc:  # a bug: it costs this exchange, never the connection's others
                relay.internal_error(exc)
        incoming = self.incoming
        if self.relay is None and incoming is not None and incoming.expect_continue and self.transport is not None:
            incoming.expect_continue = False  # the client waits for this before sending its body
            self.transport.write(_CONTINUE)

    def relay_done(self, relay: Relay, keep_alive: bool) -> None:
        if self.relay is not relay:
            return
        self.relay = None
        if not keep_alive or (self.eof and not self.queue):
            self.close()
            return
        if self.queue or (self.incoming is not None and self.incoming.expect_continue):
            asyncio.get_running_loop().call_soon(self.next)

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        """Close after what was written (a clean end). After a 413: end our side (the client reads
        the answer, then EOF), drop what the client still sends, and close when it closes or after
        :data:`LINGER_S`, so that a client still sending sees the 413 rather than a reset."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.lingering and self._linger is None and not self.eof and transport.can_write_eof():
            transport.write_eof()
            if self.reading_paused:
                self.reading_paused = False
                transport.resume_reading()
            self._linger = asyncio.get_running_loop().call_later(LINGER_S, transport.close)
            return
        transport.close()

    def abort(self) -> None:
        """Cut the connection now (the client sees a truncated response, not a clean end)."""
        if self.transport is not None:
            self.transport.abort()

    def reject(self, status: int, message: bytes) -> None:
        """Answer a request that cannot be parsed, then close. It makes no record: nothing of it
        reached the upstream."""
        self.incoming = None
        if self.relay is None and not self.queue:
            body = message + b"\n"
            self.write(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
                       b"Connection: close\r\n\r\n%s" % (status, REASONS.get(status, b""), len(body), body))
            self.close()
        else:
            self.abort()


# ----------------------------------------------------------------------------- upstream side

class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to the upstream, carrying one :class:`Relay` at a time."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.relay: Relay | None = None
        self.closed = False
        self.reused = False
        self.reason: list[bytes] = []
        self.headers: list[tuple[bytes, bytes]] = []
        self.informational = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        relay = self.relay
        if relay is None:  # bytes nobody asked for: this connection is not reusable
            self.close()
            return
        relay.got_bytes = True
        relay.last_read = relay.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # one of our callbacks failed: a bug
            if self.relay is not None:
                self.relay.internal_error(exc.__context__ or exc)
            self.close()
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self.relay is not None:
                self.relay.upstream_unparsable(exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        relay, self.relay = self.relay, None
        if relay is not None:
            relay.upstream_lost(self)

    def close(self) -> None:
        self.relay = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    # parser callbacks
    def on_message_begin(self) -> None:
        if self.relay is None:  # a reply nobody asked for (after the last one ended): not reusable
            self.close()
        self.reason = []
        self.headers = []
        self.informational = False

    def on_status(self, reason: bytes) -> None:
        self.reason.append(reason)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim reply (100 Continue, 103): not relayed; 101 was never
            self.informational = True  # asked for (Upgrade is not forwarded): the parser then fails
            return
        if self.relay is not None:
            self.relay.response_head(self, status)

    def on_body(self, body: bytes) -> None:
        if self.relay is not None:
            self.relay.response_body(body)

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        if self.relay is not None:
            self.relay.response_complete(self)


class UpstreamPool:
    """Connections to one upstream ``scheme://host:port``; idle ones are reused (LIFO)."""

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float) -> None:
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if scheme == "https" else None
        self.idle: list[UpstreamConnection] = []
        self.open: set[UpstreamConnection] = set()

    def take(self) -> UpstreamConnection | None:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    async def connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(loop.create_connection(
            lambda: UpstreamConnection(self), self.host, self.port, ssl=self.ssl,
            server_hostname=self.host if self.ssl is not None else None), self.connect_timeout)
        self.open.add(conn)
        return conn

    def release(self, conn: UpstreamConnection) -> None:
        conn.relay = None
        conn.reused = True
        if conn.closed or len(self.idle) >= MAX_IDLE:
            conn.close()
        else:
            self.idle.append(conn)

    def forget(self, conn: UpstreamConnection) -> None:
        self.open.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    def close(self) -> None:
        for conn in list(self.open):
            conn.close()
        self.idle.clear()


# ------------------------------------------------------------------------------- one exchange

class Relay:
    """One request relayed to the upstream and its response back, recorded through its
    :class:`Exchange`. Every fault ends in exactly one ``Exchange.finish(reason)``."""

    def __init__(self, proxy: RecordingProxy, client: ClientConnection, req: Request) -> None:
        self.proxy = proxy
        self.client = client
        self.req = req
        assert req.exchange is not None
        self.ex: Exchange = req.exchange
        self.loop = asyncio.get_running_loop()
        self.conn: UpstreamConnection | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.last_read = 0.0
        self.got_bytes = False
        self.head_sent = False
        self.whole: list[bytes] | None = None
        """Body chunks collected for a whole-body reply; ``None``: streamed."""
        self.chunked = False
        self.eof_body = False
        self.closing = False
        self.paused = False
        self.draining = False
        self._drain_task: asyncio.Task[None] | None = None
        self.finished = False
        self._request: bytes = b""
        self._request_body: bytes = b""
        """A large request body, written after :attr:`_request` (``b""``: in it)."""

    # ----------------------------------------------------------------------- sending upstream
    def start(self) -> None:
        proxy = self.proxy
        if self.req.too_large:
            self.fail(TOO_LARGE, f"the request body is over the recording proxy's limit of {proxy.max_request_body} "
                                 f"bytes; it was not forwarded (raise the limit with gripprobe --proxy-max-body)")
            return
        self.ex.request_body = self.req.whole_body()
        self._request, self._request_body = self.req.upstream_bytes(proxy._prefix, proxy._host_header)
        if proxy._stopping:
            self.fail("proxy_stopped", "the recording proxy is stopping")
            return
        conn = proxy._pool.take()
        if conn is not None:
            self.send(conn)
        else:
            self.connecting = self.loop.create_task(self.connect())

    async def connect(self) -> None:
        pool = self.proxy._pool
        try:
            conn = await pool.connect()
        except asyncio.TimeoutError:
            self.connecting = None
            self.fail("proxy_connect_error", f"cannot connect to the upstream within {pool.connect_timeout:g} s")
            return
        except OSError as exc:
            self.connecting = None
            self.fail("proxy_connect_error", f"cannot connect to the upstream: {exc}")
            return
        except Exception as exc:
            self.connecting = None
            self.internal_error(exc)
            return
        self.connecting = None
        if self.finished:  # the client left (or the proxy stopped) while connecting
            pool.release(conn)
            return
        self.send(conn)

    def send(self, conn: UpstreamConnection) -> None:
        self.conn = conn
        conn.relay = self
        self.got_bytes = False
        self.last_read = self.loop.time()
        if self.timer is None:
            self.timer = self.loop.call_at(self.last_read + self.proxy.upstream_timeout_s, self.check_timeout)
        assert conn.transport is not None
        conn.transport.write(self._request)
        if self._request_body:
            conn.transport.write(self._request_body)

    def check_timeout(self) -> None:
        self.timer = None
        if self.finished:
            return
        now = self.loop.time()
        if self.paused or self.connecting is not None:
            self.last_read = now  # waiting on our side (client, recorder) or connecting: not the upstream's fault
        due = self.last_read + self.proxy.upstream_timeout_s
        if now < due:
            self.timer = self.loop.call_at(due, self.check_timeout)
            return
        if self.head_sent:
            self.cut("upstream_timeout")
        else:
            what = "stopped sending its response" if self.got_bytes else "sent no response"
            self.fail("upstream_timeout", f"the upstream {what} within {self.proxy.upstream_timeout_s:g} s")

    # -------------------------------------------------------------------- the upstream's reply
    def response_head(self, conn: UpstreamConnection, status: int) -> None:
        ex = self.ex
        ex.status = status
        headers = conn.headers
        drop = hop_by_hop(headers)
        ctype = b""
        length: int | None = None
        chunked = False
        out: list[tuple[bytes, bytes]] = []
        for k, v in headers:
            lk = k.lower()
            if lk == b"transfer-encoding":
                chunked = chunked or b"chunked" in v.lower()
            if lk in drop or lk.startswith(b"proxy-"):
                continue
            if lk == b"content-type":
                ctype = v.split(b";", 1)[0].strip().lower()
            elif lk == b"content-length":
                try:
                    length = int(v)
                except ValueError:
                    length = None
            out.append((k, v))
        if chunked and length is not None:  # both: the length is wrong by definition (RFC 9112 §6.3)
            out = [(k, v) for k, v in out if k.lower() != b"content-length"]
            length = None
        ex.response_headers = out
        bodiless = self.req.method == "HEAD" or status in (204, 304) or status < 200
        self.eof_body = not bodiless and not chunked and length is None
        if not bodiless and ctype not in STREAM_TYPES and length is not None and length <= WHOLE_BODY_LIMIT:
            self.whole = []
            return
        # streamed: the head goes now; a body without a length is chunked to the client (HTTP/1.0
        # clients: delimited by closing the connection)
        self.chunked = not bodiless and length is None and not self.req.http10
        self.closing = not self.req.keep_alive or (not bodiless and length is None and self.req.http10)
        self.client.write(self._head(status, conn, out))
        self.head_sent = True
        if self.client.write_paused:  # still full from an earlier reply on this connection
            self.set_paused()
        if self.req.method == "HEAD":  # the parser would wait for a body of Content-Length bytes
            self.response_complete(conn, reusable=False)

    def _head(self, status: int, conn: UpstreamConnection | None, headers: list[tuple[bytes, bytes]],
              length: int | None = None) -> bytes:
        reason = b"".join(conn.reason).strip() if conn is not None else b""
        parts = [b"HTTP/1.1 %d %s\r\n" % (status, reason or REASONS.get(status, b"Unknown"))]
        for k, v in headers:
            parts += (k, b": ", v, b"\r\n")
        if length is not None:
            parts.append(b"Content-Length: %d\r\n" % length)
        if self.chunked:
            parts.append(b"Transfer-Encoding: chunked\r\n")
        if self.closing:
            parts.append(b"Connection: close\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    def response_body(self, chunk: bytes) -> None:
        if self.finished or not chunk:
            return
        if self.whole is not None:
            self.whole.append(chunk)
            return
        self.client.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if self.chunked else chunk)
        ex = self.ex
        ex.mark_first_byte()
        ex.feed(chunk)
        child = ex.child
        if child is not None and child.congested and not self.draining:  # the recorder lags: wait for it
            self.draining = True
            self.set_paused()
            self._drain_task = self.loop.create_task(self._drain(child))  # referenced: tasks are weakly held

    async def _drain(self, child: Any) -> None:
        try:
            await child.drain()
        finally:
            self.draining = False
            self.set_paused()

    def response_complete(self, conn: UpstreamConnection, reusable: bool = True) -> None:
        if self.finished:
            return
        ex = self.ex
        if self.whole is not None:
            body = b"".join(self.whole)
            self.whole = None
            self.closing = not self.req.keep_alive
            headers = [(k, v) for k, v in ex.response_headers or () if k.lower() != b"content-length"]
            head = self._head(ex.status or 502, conn, headers, len(body))
            self.client.write(head + body)
            ex.mark_first_byte()
            ex.feed(body)
        elif self.chunked:
            self.client.write(b"0\r\n\r\n")
        self.detach(reuse=reusable and conn.parser.should_keep_alive() and not self.eof_body)
        ex.finish(None)
        self.done(keep_alive=not self.closing)

    # -------------------------------------------------------------------------------- faults
    def upstream_lost(self, conn: UpstreamConnection) -> None:
        """The upstream closed the connection before the response ended."""
        self.conn = None
        if self.finished:
            return
        if self.head_sent and self.eof_body:  # a body delimited by the connection's end: complete
            self.response_complete(conn, reusable=False)
            return
        if not self.got_bytes and conn.reused and not self.head_sent:
            # a kept-alive connection the upstream had closed: once more on a fresh one
            self.connecting = self.loop.create_task(self.connect())
            return
        if self.head_sent:
            self.cut("upstream_reset")
        elif self.whole is not None:
            self.fail("upstream_reset", "the upstream closed the connection mid-response")
        else:
            self.fail("upstream_reset", "the upstream closed the connection")

    def upstream_unparsable(self, exc: Exception) -> None:
        if self.finished:
            return
        if self.head_sent:
            self.cut("upstream_reset")
        elif self.whole is not None:
            self.fail("upstream_reset", f"the upstream's response body is not valid HTTP: {exc}")
        else:
            self.fail("upstream_malformed", f"the upstream's response is not HTTP: {exc}")

    def internal_error(self, exc: BaseException) -> None:
        """A bug on the relay's side: it costs this exchange, never the proxy."""
        log.error("recording proxy: unexpected error relaying %s %r", self.req.method, self.req.target,
                  exc_info=(type(exc), exc, exc.__traceback__))
        if self.finished:
            return
        reason = f"proxy_internal_error: {type(exc).__name__}"
        if self.head_sent:
            self.cut(reason)
        else:
            self.fail(reason, "the recording proxy failed on this request", status=500)

    def fail(self, reason: str, message: str, status: int | None = None) -> None:
        """A fault before the client got anything: an error JSON, recorded."""
        if self.finished:
            return
        if self.proxy._stopping:
            reason = "proxy_stopped"
        self.detach(reuse=False)
        ex = self.ex
        body = error_body(reason.split(":", 1)[0], message)
        ex.status = status or ERROR_STATUS.get(reason, 502)
        ex.response_headers = [(b"Content-Type", b"application/json; charset=utf-8")]
        self.chunked = False
        self.closing = not self.req.keep_alive or self.proxy._stopping
        if self.client.closed:
            ex.finish(reason)
            self.done(keep_alive=False)
            return
        self.client.write(self._head(ex.status, None, ex.response_headers, len(body)) + body)
        ex.mark_first_byte()
        ex.feed(body)
        ex.finish(reason)
        self.done(keep_alive=not self.closing)

    def cut(self, reason: str) -> None:
        """A stream that cannot go on: record why, then cut the client's connection short."""
        if self.finished:
            return
        if self.proxy._stopping and reason != "client_disconnect":
            reason = "proxy_stopped"
        self.detach(reuse=False)
        self.ex.finish(reason)
        self.done(keep_alive=False, abort=True)

    def client_gone(self, reason: str) -> None:
        """The client's connection closed (it hung up, or the proxy stopped): stop reading upstream."""
        if self.finished:
            return
        self.detach(reuse=False)
        self.ex.finish(reason)
        self.finished = True

    # ----------------------------------------------------------------------------- plumbing
    def set_paused(self) -> None:
        """Read the upstream only while the client can take more and the recorder keeps up."""
        want = self.client.write_paused or self.draining
        conn = self.conn
        if want == self.paused or conn is None or conn.transport is None or conn.transport.is_closing():
            return
        self.paused = want
        if want:
            conn.transport.pause_reading()
        else:
            self.last_read = self.loop.time()
            conn.transport.resume_reading()

    def detach(self, reuse: bool) -> None:
        """Let go of the upstream connection: back to the pool, or closed (it may hold unread bytes)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.connecting is not None:
            self.connecting.cancel()
            self.connecting = None
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.paused and conn.transport is not None and not conn.transport.is_closing():
            conn.transport.resume_reading()
            self.paused = False
        if reuse:
            self.proxy._pool.release(conn)
        else:
            conn.close()

    def done(self, keep_alive: bool, abort: bool = False) -> None:
        self.finished = True
        if abort:
            self.client.abort()
            return
        self.client.relay_done(self, keep_alive)


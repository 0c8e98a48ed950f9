"""The recording proxy's client side: one asyncio protocol per connection from the agent.

:class:`ClientConnection` parses the client's requests with httptools as their bytes arrive
(keep-alive, pipelined requests answered one at a time and in order, ``Expect: 100-continue``,
chunked request bodies, HTTP/1.0 clients, a client that half-closes after its request), makes each
request's :class:`~.exchange.Exchange` as soon as its head is parsed, and hands complete requests,
in turn, to a :class:`~.relay.Relay`. A request that does not parse is answered ``400`` and makes no
record. A request body over the proxy's ``max_request_body`` is never kept nor forwarded: the
request is answered ``413`` (``request_body_too_large``) in its turn, and the rest of what the
client sends is read and dropped for at most :data:`LINGER_S` before the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

import httptools

from .exchange import Exchange
from .http1 import CONTINUE, REASONS, TOO_LARGE, Request
from .relay import Relay

if TYPE_CHECKING:
    from .relay import ProxyHost

log = logging.getLogger(__name__)

LINGER_S = 5.0
"""After a ``413``, how long the client's further bytes are read and dropped (so that a client still
sending sees the answer instead of a reset) before the connection is closed."""
MAX_PIPELINED = 16
"""Complete requests queued on one client connection before it stops being read."""


class _BodyTooLarge(Exception):
    """Raised from a parser callback to stop parsing a request whose body is over the cap."""


class ClientConnection(asyncio.Protocol):
    """One client (agent) connection to the proxy. Requests are relayed one at a time, in order."""

    def __init__(self, proxy: ProxyHost) -> None:
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
        self.proxy.connection_opened(self)

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
        self.proxy.connection_closed(self)
        if self._linger is not None:
            self._linger.cancel()
        reason = "proxy_stopped" if self.proxy.stopping else "client_disconnect"
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
                self.transport.write(CONTINUE)
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
            self.transport.write(CONTINUE)

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

"""The recording proxy's upstream side: pooled keep-alive connections to the one upstream.

:class:`UpstreamPool` holds the connections to the upstream's ``scheme://host:port`` (``http``, or
``https`` verified against the system's CAs), reuses idle ones (up to :data:`MAX_IDLE`, last in first
out) and opens new ones. :class:`UpstreamConnection` is one such connection: an asyncio protocol
whose httptools parser hands the response's head, body chunks and end to the :class:`~.relay.Relay`
it carries at the time, straight from ``data_received``. Interim ``1xx`` replies are dropped here.
Retrying a request whose reused connection the upstream had closed meanwhile is the relay's
decision (:meth:`~.relay.Relay.upstream_lost`).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING

import httptools

if TYPE_CHECKING:
    from .relay import Relay

MAX_IDLE = 32
"""Idle upstream connections kept per proxy."""


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

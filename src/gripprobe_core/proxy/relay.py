"""One exchange through the recording proxy's HTTP/1.1 relay: :class:`Relay`.

The relay is asyncio protocols on both sides, parsed by httptools (llhttp): :mod:`.client` (the
agent's connections), :mod:`.upstream` (pooled connections to the upstream), :mod:`.http1` (the
request as parsed, hop-by-hop headers, error bodies). A :class:`Relay` links one request on a
client connection to an upstream connection and to the proxy's :class:`~.exchange.Exchange`
(timing, recording): it sends the request upstream, writes the response back to the client, and
ends every fault in exactly one ``Exchange.finish(reason)``. What the client connections and the
relay need from the proxy is :class:`ProxyHost`. Streams are written to the client as
each chunk arrives; small bodies of known length are collected, then written in one go (a fault
mid-body is then a clean 502).

Why not aiohttp's server and client here: per request they cost about 0.2 ms of CPU each (request
and response objects, header multidicts, tasks, stream readers), which was most of what the proxy
added to a model call. This relay is callback-driven: the client's request is parsed as its bytes
arrive, written to a pooled upstream connection, and the upstream's response is written back to
the client from the upstream's ``data_received``, with no task, queue or copy in between.

Flow control: when the client's socket buffer is full (``pause_writing``) or the recorder lags
(:attr:`~.recorder_client.RecorderChild.congested`), the upstream connection stops being read until
it drains; nothing piles up in memory.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from .exchange import RecordSink
from .http1 import TOKEN_BUDGET_EXCEEDED, ERROR_STATUS, REASONS, TOO_LARGE, error_body, hop_by_hop
from .pin import MODEL_NOT_UNDER_TEST, is_model_call

if TYPE_CHECKING:
    from .client import ClientConnection
    from .exchange import Exchange
    from .http1 import Request
    from .pin import ModelPin
    from .recorder_client import RecorderChild
    from .upstream import UpstreamConnection, UpstreamPool

log = logging.getLogger(__name__)

STREAM_TYPES = (b"text/event-stream", b"application/x-ndjson", b"application/jsonl", b"application/stream+json")
WHOLE_BODY_LIMIT = 1024 * 1024
"""Bodies of known length up to this size are read whole, then sent; anything else is streamed."""


class ProxyHost(RecordSink, Protocol):
    """What the client connections and the relay need from the proxy (:class:`~.server.RecordingProxy`):
    its settings and upstream, whether it is stopping, where its client connections are tracked, and,
    for each request's :class:`~.exchange.Exchange`, its :class:`~.exchange.RecordSink`."""

    max_request_body: int
    pin: ModelPin | None
    """The model under test: model calls naming another are refused (None: any model passes)."""
    token_budget: int | None
    """Tokens the phase may spend on model calls (None: no budget)."""
    token_budget_exceeded: bool
    upstream_timeout_s: float
    target_prefix: bytes
    """The upstream URL's path, put before every request's target."""
    host_header: bytes
    """The ``Host`` header sent upstream."""
    pool: UpstreamPool

    @property
    def stopping(self) -> bool:
        """The proxy is stopping: exchanges still in flight end as ``proxy_stopped``."""

    async def admit_model_call(self) -> bool:
        """The turn of a model call under the token budget: True once admitted (held until its cost is
        settled), False when the budget is spent."""

    def settle_tokens(self, tokens: int) -> None:
        """An admitted call's cost; gives its turn back."""

    def recorder_congested(self) -> RecorderChild | None:
        """The recorder process when it is behind (its backlog over the high-water mark), else None."""

    def refused_model(self, why: str) -> None:
        """A model call was refused (403 ``model_not_under_test``) for the model it named."""

    def connection_opened(self, conn: ClientConnection) -> None:
        """A client connected."""

    def connection_closed(self, conn: ClientConnection) -> None:
        """A client's connection is gone."""

    def exchange_started(self, exchange: Exchange) -> None:
        """``exchange`` is being relayed: open until it ends (``RecordSink.exchange_ended``)."""


class Relay:
    """One request relayed to the upstream and its response back, recorded through its
    :class:`Exchange`. Every fault ends in exactly one ``Exchange.finish(reason)``."""

    def __init__(self, proxy: ProxyHost, client: ClientConnection, req: Request) -> None:
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
        proxy.exchange_started(self.ex)
        if self.req.too_large:
            self.fail(TOO_LARGE, f"the request body is over the recording proxy's limit of {proxy.max_request_body} "
                                 f"bytes; it was not forwarded (raise the limit with gripprobe --proxy-max-body)")
            return
        self.ex.request_body = self.req.whole_body()
        self._request, self._request_body = self.req.upstream_bytes(proxy.target_prefix, proxy.host_header)
        if proxy.stopping:
            self.fail("proxy_stopped", "the recording proxy is stopping")
            return
        if proxy.pin is not None:
            why = proxy.pin.refusal(self.req.method, self.req.path, self.ex.request_body)
            if why is not None:
                proxy.refused_model(why)
                self.fail(MODEL_NOT_UNDER_TEST, why)
                return
        behind = proxy.recorder_congested()
        if behind is not None:
            self.connecting = self.loop.create_task(self.after_recorder(behind))
            return
        self.forward()

    def forward(self) -> None:
        """Send the request upstream (a model call under a token budget waits for its turn first)."""
        proxy = self.proxy
        if proxy.token_budget is not None and is_model_call(self.req.method, self.req.path, self.ex.request_body):
            self.connecting = self.loop.create_task(self.within_budget_then_connect())
            return
        conn = proxy.pool.take()
        if conn is not None:
            self.send(conn)
        else:
            self.connecting = self.loop.create_task(self.connect())

    async def after_recorder(self, child: RecorderChild) -> None:
        """The recorder is behind (a flood of exchanges): wait until it catches up before this request goes
        upstream, so the bytes queued for it, and the relay's memory, stay bounded whatever the agent sends."""
        try:
            await child.drain()
        except Exception as exc:
            self.connecting = None
            self.internal_error(exc)
            return
        self.connecting = None
        if not self.finished:
            self.forward()

    async def within_budget_then_connect(self) -> None:
        """A model call when the phase has a token budget: it waits for its turn (the call before it has
        settled its cost), then is refused (429 ``token_budget_exceeded``, never forwarded) when the phase
        has spent the budget, else relayed as usual and its cost settled when it ends."""
        proxy = self.proxy
        try:
            admitted = await proxy.admit_model_call()
        except Exception as exc:
            self.connecting = None
            self.internal_error(exc)
            return
        if not admitted:
            self.connecting = None
            self.fail(TOKEN_BUDGET_EXCEEDED, f"this phase's token budget of {proxy.token_budget} tokens is spent "
                                       f"({proxy.tokens_spent} used): GripProbe refuses further model calls "
                                       f"(--max-tokens-per-phase)")
            return
        if self.finished or self.ex.done:  # the client left while it waited: nothing forwarded, turn given back
            self.connecting = None
            proxy.settle_tokens(0)
            return
        self.ex.counted = True
        conn = proxy.pool.take()
        if conn is not None:
            self.connecting = None
            self.send(conn)
        else:
            await self.connect()

    async def connect(self) -> None:
        pool = self.proxy.pool
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
        if self.proxy.stopping:
            reason = "proxy_stopped"
        self.detach(reuse=False)
        ex = self.ex
        body = error_body(reason.split(":", 1)[0], message)
        ex.status = status or ERROR_STATUS.get(reason, 502)
        ex.response_headers = [(b"Content-Type", b"application/json; charset=utf-8")]
        self.chunked = False
        self.closing = not self.req.keep_alive or self.proxy.stopping
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
        if self.proxy.stopping and reason != "client_disconnect":
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
            self.proxy.pool.release(conn)
        else:
            conn.close()

    def done(self, keep_alive: bool, abort: bool = False) -> None:
        self.finished = True
        if abort:
            self.client.abort()
            return
        self.client.relay_done(self, keep_alive)

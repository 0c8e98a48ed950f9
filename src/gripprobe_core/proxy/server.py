"""The recording reverse proxy (SPEC §5, tier A): relay everything to one upstream, record each exchange.

:class:`RecordingProxy` is a generic HTTP reverse proxy on ``127.0.0.1`` (port 0) in front of one
upstream root URL. Any method, path and query is forwarded to ``upstream_url + path``; hop-by-hop
headers are dropped and ``Host`` is rewritten. Response bodies are never decoded nor re-encoded
(``Content-Encoding`` passes through as is). Streams (SSE, NDJSON, chunked, unknown or large length)
are forwarded chunk by chunk as they arrive; small bodies of known length are read whole, then sent.

Each exchange is *observed*: its request and response bytes go to an
:class:`~gripprobe_core.proxy.observe.ExchangeObserver`, whose ``finish(...)`` dict is the exchange's
record (one JSON line appended to ``record_path``). The proxy hands over the response bytes *after*
writing them to the client, and only once the client has its first bytes, so observing never delays
what the client receives. By default the observers run in the **recorder process**
(:mod:`.recorder`, one per Python process, shared by every proxy; :mod:`.recorder_client`): for the
relay an exchange is then a queue put or two, and the parsing's CPU time can no longer delay the next
request. With ``observer_factory`` (tests, comparisons) or when the recorder cannot run, observers
run in-process, on the relay's event loop, and the proxy writes their records itself. Either way
the proxy never writes headers or bodies to the record; :meth:`RecordingProxy.flush` /
:meth:`~RecordingProxy.stop` return once every finished exchange's record is on disk.

Faults never crash the proxy and are recorded as ``x_gripprobe_proxy_error``:

========================= ======================================================================
``proxy_connect_error``   upstream unreachable → 502 JSON error to the client
``upstream_timeout``      no byte for ``upstream_timeout_s`` → 504 (or the stream is cut)
``upstream_reset``        upstream closed mid-response → 502, or the client's stream is cut short
``upstream_malformed``    the upstream did not speak HTTP → 502 (a malformed *body* is relayed
                          as is and recorded as far as it parses; that is not a proxy error)
``client_disconnect``     the client went away → the upstream read is cancelled
``proxy_stopped``         :meth:`RecordingProxy.stop` closed an exchange still in flight
========================= ======================================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from .exchange import Exchange, Observer, ObserverFactory
from .recorder import RecordFile, encode_record
from .recorder_client import RecorderChild, RecorderClient, get_recorder

log = logging.getLogger(__name__)

#: Reasons caused by the upstream (they make the phase's proxy status ``error``).
UPSTREAM_ERRORS = frozenset({"proxy_connect_error", "upstream_reset", "upstream_malformed", "upstream_timeout"})

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade",
})
STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/jsonl", "application/stream+json")
WHOLE_BODY_LIMIT = 1024 * 1024
"""Bodies of known length up to this size are read whole, then sent; anything else is streamed."""
ERROR_STATUS = {"proxy_connect_error": 502, "upstream_reset": 502, "upstream_malformed": 502,
                "upstream_timeout": 504}


class RecordingProxy:
    """A phase-scoped recording reverse proxy in front of ``upstream_url`` (a server root, e.g.
    ``http://127.0.0.1:11434``; a path prefix is kept and request paths are appended to it).

    Observing: by default in the process-wide recorder process
    (:func:`~.recorder_client.get_recorder`), or in ``recorder`` (a
    :class:`~.recorder_client.RecorderClient`) when given. With ``observer_factory`` the observers run
    in-process: it is called with the keyword arguments of ``ExchangeObserver`` (method, path,
    query, upstream_url, request_headers, request_body, body_budget). ``upstream_timeout_s`` bounds
    the wait for the upstream's next byte (headers or body), not a stream's total duration;
    ``flush_timeout_s`` bounds the wait for the recorder in :meth:`flush`.

    Lifecycle: ``await start()`` (``OSError`` when it cannot bind; an old ``record_path`` is removed),
    :attr:`base_url`, then ``await stop()``, which closes in-flight exchanges (recorded as
    ``proxy_stopped``), waits for their records and never hangs. The record file is created with the
    first record.
    """

    def __init__(self, upstream_url: str, record_path: Path, *, observer_factory: ObserverFactory | None = None,
                 recorder: RecorderClient | None = None, body_budget: int = 256 * 1024,
                 upstream_timeout_s: float = 600, flush_timeout_s: float = 10.0) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self.record_path = Path(record_path)
        self.body_budget = body_budget
        self.upstream_timeout_s = upstream_timeout_s
        self.flush_timeout_s = flush_timeout_s
        self._observer_factory = observer_factory
        self._recorder = recorder
        self._fallback_factory: ObserverFactory | None = None
        self._children: set[RecorderChild] = set()
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._base_url: str | None = None
        self._record_file = RecordFile(self.record_path)
        self._inflight: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._metadata_only = 0
        self._recorder_reason: str | None = None
        self.exchange_count = 0
        """Exchanges finished so far (each has, or will have after :meth:`flush`, its record)."""
        self.proxy_errors: list[str] = []
        """``x_gripprobe_proxy_error`` of every finished exchange that had one, in order."""
        self.recorder_error: str | None = None
        """Set by :meth:`flush` when the recorder process failed this proxy: some exchanges were then
        recorded as metadata only (``x_gripprobe_observer_error``)."""

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the proxy's root). Only valid after :meth:`start`."""
        if self._base_url is None:
            raise RuntimeError("recording proxy not started")
        return self._base_url

    async def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and start serving. Raises ``OSError`` if binding fails.
        The recorder process is started here if this process has none yet (not per proxy)."""
        if self._observer_factory is None:
            if self._recorder is None:
                self._recorder = get_recorder()
            self._recorder.child()  # warm before the first exchange; None: observe in-process
        with contextlib.suppress(OSError):  # this run's exchanges only, never a stale file's
            self.record_path.unlink(missing_ok=True)
        # The low-level server: no router or middlewares, every request is ours to relay.
        server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        host, port = runner.addresses[0][:2]
        self._runner = runner
        self._base_url = f"http://{host}:{port}"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(30.0, self.upstream_timeout_s),
                                        sock_read=self.upstream_timeout_s)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300), timeout=timeout, auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"))

    async def stop(self) -> None:
        """Stop serving: close in-flight exchanges (recorded), the listener and the upstream connections;
        wait for the records (:meth:`flush`), close the record file. Safe to call twice, and after a
        failed :meth:`start`."""
        self._stopping = True
        pending = [t for t in self._inflight if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
        await self.flush()
        self._record_file.close()

    async def flush(self) -> None:
        """Return once every exchange finished so far has its record in the file. Never hangs: a
        recorder that makes no progress for ``flush_timeout_s`` (or is still not done after six times
        that) is killed, and the exchanges it owed are recorded as metadata only (:attr:`recorder_error`
        says so)."""
        for child in list(self._children):
            await self._flush_child(child)
            if child.dead:
                self._children.discard(child)
                lost = child.lost_by_path.get(str(self.record_path), 0)
                if lost:
                    self._metadata_only += lost
                    self._recorder_reason = child.reason
        if self._metadata_only:
            self.recorder_error = (f"{self._metadata_only} exchange(s) recorded as metadata only: "
                                   f"{self._recorder_reason or 'the recorder process died'}")

    async def _flush_child(self, child: RecorderChild) -> None:
        done = asyncio.wrap_future(child.flush(self.record_path))
        try:
            for _ in range(6):
                mark = child.handled()
                try:
                    await asyncio.wait_for(asyncio.shield(done), self.flush_timeout_s)
                    return
                except asyncio.TimeoutError:
                    if child.handled() == mark:  # no record written meanwhile: stuck
                        break
            child.kill(f"the recorder did not write {self.record_path.name} within {self.flush_timeout_s:g} s")
            deadline = time.monotonic() + 5.0
            while not child.dead and time.monotonic() < deadline:  # its reader thread writes what was owed
                await asyncio.sleep(0.01)
        except Exception:  # RecorderDied: what it owed is already written, metadata only
            pass
        finally:
            if done.done() and not done.cancelled():
                done.exception()  # retrieved: RecorderDied is expected here, not an unhandled error
            done.cancel()

    async def __aenter__(self) -> "RecordingProxy":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def read_records(self) -> list[dict]:
        """Every record written so far (see :func:`read_records`)."""
        return read_records(self.record_path)

    # -------------------------------------------------------------------------------- relaying

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        ex = Exchange(self, request)
        try:
            return await self._relay(ex, request)
        except asyncio.CancelledError:
            ex.finish("proxy_stopped" if self._stopping else "client_disconnect")
            raise
        except ConnectionError:  # the client went away (e.g. while sending its body)
            ex.finish("proxy_stopped" if self._stopping else "client_disconnect")
            _abort(request)
            return ex.response if ex.response is not None else web.Response(status=400)
        except Exception as exc:  # a bug here must cost one exchange, never the proxy
            log.exception("recording proxy: unexpected error relaying %s %s", request.method, request.path)
            ex.finish(f"proxy_internal_error: {type(exc).__name__}")
            if ex.response is not None and ex.response.prepared:
                _abort(request)
                return ex.response
            return _error_response(500, "proxy_internal_error", "the recording proxy failed on this request")
        finally:
            ex.close_upstream()
            if task is not None:
                self._inflight.discard(task)

    async def _relay(self, ex: Exchange, request: web.BaseRequest) -> web.StreamResponse:
        ex.request_body = await request.content.read()  # whole body, no size limit (long agent contexts)
        assert self._session is not None
        target = URL(self.upstream_url + request.raw_path, encoded=True)
        try:
            ex.upstream = await self._session.request(
                request.method, target, headers=forward_headers(request.headers),
                data=ex.request_body or None, allow_redirects=False)
        except aiohttp.ClientConnectorError as exc:
            return await self._fail(ex, request, "proxy_connect_error", f"cannot connect to the upstream: {exc}")
        except asyncio.TimeoutError:
            return await self._fail(ex, request, "upstream_timeout",
                                    f"no response from the upstream within {self.upstream_timeout_s:g} s")
        except aiohttp.ServerDisconnectedError:
            return await self._fail(ex, request, "upstream_reset", "the upstream closed the connection")
        except aiohttp.ClientResponseError as exc:  # not an HTTP response
            return await self._fail(ex, request, "upstream_malformed", f"the upstream's response is not HTTP: {exc}")
        except aiohttp.ClientError as exc:
            return await self._fail(ex, request, "upstream_reset", f"upstream connection failed: {exc}")
        up = ex.upstream
        ex.status = up.status
        if _is_stream(up):
            return await self._relay_stream(ex, request, up)
        try:
            body = await up.read()
        except asyncio.TimeoutError:
            return await self._fail(ex, request, "upstream_timeout", "the upstream stopped sending its response")
        except aiohttp.ClientError:
            return await self._fail(ex, request, "upstream_reset", "the upstream closed the connection mid-response")
        headers = response_headers(up.headers, keep_length=False)
        resp = web.Response(status=up.status, reason=up.reason, body=body, headers=headers)
        ex.response = resp
        try:
            await resp.prepare(request)
            await resp.write_eof()
        except ConnectionError:
            return _cut(ex, request, resp, "client_disconnect")
        ex.mark_first_byte()
        ex.feed(body)
        ex.finish(None)
        return resp

    async def _relay_stream(self, ex: Exchange, request: web.BaseRequest,
                            up: aiohttp.ClientResponse) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, reason=up.reason,
                                  headers=response_headers(up.headers, keep_length=True))
        ex.response = resp
        await resp.prepare(request)
        while True:
            try:
                chunk = await up.content.readany()
            except asyncio.TimeoutError:
                return _cut(ex, request, resp, "upstream_timeout")
            except aiohttp.ClientError:
                return _cut(ex, request, resp, "upstream_reset")
            if not chunk:
                break
            try:
                await resp.write(chunk)
            except ConnectionError:
                return _cut(ex, request, resp, "client_disconnect")
            ex.mark_first_byte()
            ex.feed(chunk)
            child = ex.child
            if child is not None and child.congested:  # the recorder lags: wait, memory stays flat
                await child.drain()
        try:
            await resp.write_eof()
        except ConnectionError:
            return _cut(ex, request, resp, "client_disconnect")
        ex.finish(None)
        return resp

    async def _fail(self, ex: Exchange, request: web.BaseRequest, reason: str, message: str) -> web.StreamResponse:
        """Answer a fault that happened before the client got anything: an error JSON, recorded."""
        if self._stopping:
            reason = "proxy_stopped"
        resp = _error_response(ERROR_STATUS.get(reason, 502), reason, message)
        ex.status = resp.status
        ex.response = resp
        try:
            await resp.prepare(request)
            await resp.write_eof()
        except ConnectionError:
            ex.finish(reason)
            return resp
        ex.mark_first_byte()
        assert resp.body is not None and isinstance(resp.body, bytes)
        ex.feed(resp.body)
        ex.finish(reason)
        return resp

    # -------------------------------------------------------------------------------- recording

    def _recorder_child(self) -> RecorderChild | None:
        """The recorder process for a new exchange; ``None``: observe in-process."""
        if self._observer_factory is not None or self._recorder is None:
            return None
        return self._recorder.child()

    def _new_observer(self, ex: Exchange) -> Observer:
        factory = self._observer_factory
        if factory is None:  # the recorder is unavailable
            if self._fallback_factory is None:
                from .observe import ExchangeObserver  # imported lazily: only this path needs the parsers here
                self._fallback_factory = ExchangeObserver
            factory = self._fallback_factory
        return factory(
            method=ex.method, path=ex.path, query=ex.query, upstream_url=self.upstream_url,
            request_headers=ex.request_headers, request_body=ex.request_body, body_budget=self.body_budget)

    def _count(self, proxy_error: str | None) -> None:
        self.exchange_count += 1
        if proxy_error:
            self.proxy_errors.append(str(proxy_error))

    def _write_record(self, record: dict) -> None:
        """Append one record as a JSON line (in-process observing). Never raises (a full disk costs
        the record only)."""
        line = encode_record(record)
        if line is not None:
            self._record_file.append(line)

    def status(self) -> dict[str, Any]:
        """``{"error": str | None, "reason": str | None, "exchanges": int, "recorder_error": str | None}``;
        ``error`` is set when an exchange failed because of the upstream (:data:`UPSTREAM_ERRORS`);
        ``recorder_error`` when records were degraded to metadata only (see :attr:`recorder_error`)."""
        upstream = [r for r in self.proxy_errors if r in UPSTREAM_ERRORS]
        if not upstream:
            return {"error": None, "reason": None, "exchanges": self.exchange_count,
                    "recorder_error": self.recorder_error}
        counts: dict[str, int] = {}
        for r in upstream:
            counts[r] = counts.get(r, 0) + 1
        detail = ", ".join(f"{r} x{n}" for r, n in counts.items())
        error = f"{len(upstream)} of {self.exchange_count} exchanges with {self.upstream_url} failed: {detail}"
        return {"error": error, "reason": upstream[0], "exchanges": self.exchange_count,
                "recorder_error": self.recorder_error}


# ------------------------------------------------------------------------------------ helpers

def _is_stream(up: aiohttp.ClientResponse) -> bool:
    """Forward chunk by chunk? Yes for stream content types, chunked or unknown-length bodies, bodies
    over :data:`WHOLE_BODY_LIMIT`, and bodiless replies (HEAD, 1xx, 204, 304: headers kept as they are)."""
    if up.method == "HEAD" or up.status in (204, 304) or up.status < 200:
        return True
    ctype = up.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if ctype in STREAM_TYPES:
        return True
    if "chunked" in up.headers.get("Transfer-Encoding", "").lower():
        return True
    length = up.headers.get("Content-Length")
    if length is None:
        return True
    try:
        return int(length) > WHOLE_BODY_LIMIT
    except ValueError:
        return True


def _connection_tokens(headers: Mapping[str, str]) -> set[str]:
    """Header names listed in ``Connection`` are hop-by-hop too (RFC 9110 §7.6.1)."""
    value = headers.get("Connection", "")
    return {t.strip().lower() for t in value.split(",") if t.strip()}


def forward_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The client's request headers as sent upstream: hop-by-hop, ``Host``, ``Content-Length`` and
    ``Expect`` dropped (the client library sets Host and the length for the forwarded body)."""
    drop = HOP_BY_HOP | _connection_tokens(headers) | {"host", "content-length", "expect"}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in drop and not k.lower().startswith("proxy-"))


def response_headers(headers: Mapping[str, str], *, keep_length: bool) -> CIMultiDict[str]:
    """The upstream's response headers as sent to the client: hop-by-hop dropped; ``Content-Length``
    kept only for streamed bodies of known length (a whole body gets its length recomputed)."""
    drop = HOP_BY_HOP | _connection_tokens(headers)
    if not keep_length:
        drop = drop | {"content-length"}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in drop and not k.lower().startswith("proxy-"))


def _error_response(status: int, reason: str, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "proxy_error", "code": reason}}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")


def _abort(request: web.BaseRequest) -> None:
    """Close the client's connection so it sees a truncated response, not a clean end."""
    transport = request.transport
    if transport is not None and not transport.is_closing():
        transport.close()


def _cut(ex: Exchange, request: web.BaseRequest, resp: web.StreamResponse, reason: str) -> web.StreamResponse:
    """A stream that cannot go on: record why, then cut the client's connection short."""
    if ex.proxy._stopping and reason != "client_disconnect":
        reason = "proxy_stopped"
    ex.finish(reason)
    _abort(request)
    return resp


def read_records(path: Path) -> list[dict]:
    """The JSON-line records of ``path`` in order; ``[]`` when it is missing. A line that is not a JSON
    object (a torn write) is skipped, never raised on."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out

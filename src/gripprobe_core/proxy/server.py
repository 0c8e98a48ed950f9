"""The recording reverse proxy (SPEC §5, tier A): relay everything to one upstream, record each exchange.

:class:`RecordingProxy` is a generic HTTP reverse proxy on ``127.0.0.1`` (port 0) in front of one
upstream root URL. Any method, path and query is forwarded to ``upstream_url + path``; hop-by-hop
headers are dropped and ``Host`` is rewritten. Response bodies are never decoded nor re-encoded
(``Content-Encoding`` passes through as is). Streams (SSE, NDJSON, chunked, unknown or large length)
are forwarded chunk by chunk as they arrive; small bodies of known length are read whole, then sent.

Each exchange gets an *observer* (``observer_factory(**kwargs)``, by default
:class:`gripprobe_core.proxy.observe.ExchangeObserver`, imported when the proxy starts). The proxy
feeds it the response bytes *after* writing them to the client, so parsing never delays what the
client receives; the observer is even created only once the client has its first bytes. (It does
share the event loop: its CPU time can delay the *next* request when requests come back to back.) When the exchange ends the
dict returned by ``observer.finish(...)`` is appended to ``record_path`` as one JSON line and
flushed. The proxy itself never writes headers or bodies to the record.

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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, TextIO

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from ..timeutil import iso

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


class Observer(Protocol):
    """What the proxy needs from an exchange observer (see ``proxy/observe.py``)."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self, *, status: int | None, response_headers: Mapping[str, str], duration_ms: float,
               ttfb_ms: float | None, proxy_error: str | None) -> dict: ...


ObserverFactory = Callable[..., Observer]


class RecordingProxy:
    """A phase-scoped recording reverse proxy in front of ``upstream_url`` (a server root, e.g.
    ``http://127.0.0.1:11434``; a path prefix is kept and request paths are appended to it).

    ``observer_factory`` is called with the keyword arguments of ``ExchangeObserver`` (method, path,
    query, upstream_url, request_headers, request_body, body_budget). ``upstream_timeout_s`` bounds
    the wait for the upstream's next byte (headers or body), not a stream's total duration.

    Lifecycle: ``await start()`` (``OSError`` when it cannot bind; an old ``record_path`` is removed),
    :attr:`base_url`, then ``await stop()``, which closes in-flight exchanges (recorded as
    ``proxy_stopped``) and never hangs. The record file is created with the first exchange.
    """

    def __init__(self, upstream_url: str, record_path: Path, *, observer_factory: ObserverFactory | None = None,
                 body_budget: int = 256 * 1024, upstream_timeout_s: float = 600) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self.record_path = Path(record_path)
        self.body_budget = body_budget
        self.upstream_timeout_s = upstream_timeout_s
        self._observer_factory = observer_factory
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._base_url: str | None = None
        self._record_file: TextIO | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.exchange_count = 0
        """Exchanges recorded so far."""
        self.proxy_errors: list[str] = []
        """``x_gripprobe_proxy_error`` of every recorded exchange that had one, in order."""

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the proxy's root). Only valid after :meth:`start`."""
        if self._base_url is None:
            raise RuntimeError("recording proxy not started")
        return self._base_url

    async def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and start serving. Raises ``OSError`` if binding fails."""
        if self._observer_factory is None:
            from .observe import ExchangeObserver  # imported lazily: only a running proxy needs the parsers
            self._observer_factory = ExchangeObserver
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
        """Stop serving: close in-flight exchanges (recorded), the listener, the upstream connections and
        the record file. Safe to call twice, and after a failed :meth:`start`."""
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
        if self._record_file is not None:
            fh, self._record_file = self._record_file, None
            fh.close()

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
        ex = _Exchange(self, request)
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

    async def _relay(self, ex: _Exchange, request: web.BaseRequest) -> web.StreamResponse:
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

    async def _relay_stream(self, ex: _Exchange, request: web.BaseRequest,
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
        try:
            await resp.write_eof()
        except ConnectionError:
            return _cut(ex, request, resp, "client_disconnect")
        ex.finish(None)
        return resp

    async def _fail(self, ex: _Exchange, request: web.BaseRequest, reason: str, message: str) -> web.StreamResponse:
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

    def _new_observer(self, ex: _Exchange) -> Observer:
        assert self._observer_factory is not None
        return self._observer_factory(
            method=ex.method, path=ex.path, query=ex.query, upstream_url=self.upstream_url,
            request_headers=ex.request_headers, request_body=ex.request_body, body_budget=self.body_budget)

    def _write_record(self, record: dict) -> None:
        """Append one record as a JSON line, flushed. Never raises (a full disk costs the record only)."""
        self.exchange_count += 1
        reason = record.get("x_gripprobe_proxy_error")
        if reason:
            self.proxy_errors.append(str(reason))
        try:
            line = json.dumps(record, ensure_ascii=False, default=str)
        except (TypeError, ValueError) as exc:
            log.warning("recording proxy: record not serializable: %s", exc)
            return
        try:
            if self._record_file is None:
                self.record_path.parent.mkdir(parents=True, exist_ok=True)
                self._record_file = self.record_path.open("a", encoding="utf-8", errors="replace")
            self._record_file.write(line + "\n")
            self._record_file.flush()
        except (OSError, ValueError) as exc:
            log.warning("recording proxy: cannot write %s: %s", self.record_path, exc)

    def status(self) -> dict[str, Any]:
        """``{"error": str | None, "reason": str | None, "exchanges": int}``; ``error`` is set when an
        exchange failed because of the upstream (:data:`UPSTREAM_ERRORS`)."""
        upstream = [r for r in self.proxy_errors if r in UPSTREAM_ERRORS]
        if not upstream:
            return {"error": None, "reason": None, "exchanges": self.exchange_count}
        counts: dict[str, int] = {}
        for r in upstream:
            counts[r] = counts.get(r, 0) + 1
        detail = ", ".join(f"{r} x{n}" for r, n in counts.items())
        return {"error": f"{len(upstream)} of {self.exchange_count} exchanges with {self.upstream_url} failed: {detail}",
                "reason": upstream[0], "exchanges": self.exchange_count}


class _Exchange:
    """One request/response through the proxy: timing, the observer, and the single record it yields."""

    def __init__(self, proxy: RecordingProxy, request: web.BaseRequest) -> None:
        self.proxy = proxy
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        self.request = request
        self.request_body = b""
        self.upstream: aiohttp.ClientResponse | None = None
        self.response: web.StreamResponse | None = None
        self.status: int | None = None
        self.ttfb_ms: float | None = None
        self.observer: Observer | None = None
        self.observer_failed = False
        self.done = False

    # Request facts are read when the observer is made (after the client has its first bytes).
    @property
    def method(self) -> str:
        return self.request.method

    @property
    def path(self) -> str:
        return self.request.path

    @property
    def query(self) -> str:
        return self.request.query_string

    @property
    def request_headers(self) -> Mapping[str, str]:
        return self.request.headers

    def mark_first_byte(self) -> None:
        if self.ttfb_ms is None:
            self.ttfb_ms = (time.perf_counter() - self.t0) * 1000

    def _observer(self) -> Observer | None:
        """Created on first use (after the client has its first bytes), so it never delays them."""
        if self.observer is None and not self.observer_failed:
            try:
                self.observer = self.proxy._new_observer(self)
            except Exception:
                log.exception("recording proxy: observer construction failed")
                self.observer_failed = True
        return self.observer

    def feed(self, chunk: bytes) -> None:
        obs = self._observer()
        if obs is None:
            return
        try:
            obs.feed(chunk)
        except Exception:
            log.exception("recording proxy: observer.feed failed; this exchange is no longer observed")
            self.observer, self.observer_failed = None, True

    def finish(self, proxy_error: str | None) -> None:
        """Write this exchange's record, once."""
        if self.done:
            return
        self.done = True
        duration_ms = (time.perf_counter() - self.t0) * 1000
        headers: Mapping[str, str] = self.response.headers if self.response is not None else {}
        record: dict | None = None
        obs = self._observer()
        if obs is not None:
            try:
                record = dict(obs.finish(status=self.status, response_headers=headers, duration_ms=duration_ms,
                                         ttfb_ms=self.ttfb_ms, proxy_error=proxy_error))
            except Exception:
                log.exception("recording proxy: observer.finish failed; writing a minimal record")
        if record is None:
            record = self._minimal_record(duration_ms, proxy_error)
        # the request's start, whenever the observer was made
        record["x_gripprobe_timestamp"] = iso(datetime.fromtimestamp(self.wall0, timezone.utc))
        self.proxy._write_record(record)

    def _minimal_record(self, duration_ms: float, proxy_error: str | None) -> dict:
        """Metadata only (no headers, no bodies): used when the observer itself failed."""
        return {"x_gripprobe_method": self.method, "x_gripprobe_path": self.path, "x_gripprobe_query": self.query,
                "x_gripprobe_upstream_url": self.proxy.upstream_url, "x_gripprobe_status": self.status,
                "x_gripprobe_duration_ms": round(duration_ms, 3), "x_gripprobe_ttfb_ms": self.ttfb_ms,
                "x_gripprobe_proxy_error": proxy_error, "x_gripprobe_observer_error": True}

    def close_upstream(self) -> None:
        """Drop the upstream connection unless the response was read to the end (then it is reused)."""
        up, self.upstream = self.upstream, None
        if up is None:
            return
        if self.done and up.content.at_eof():
            up.release()
        else:
            up.close()


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


def _cut(ex: _Exchange, request: web.BaseRequest, resp: web.StreamResponse, reason: str) -> web.StreamResponse:
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

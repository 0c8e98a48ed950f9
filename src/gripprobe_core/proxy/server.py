"""The recording reverse proxy (SPEC §5, tier A): relay everything to one upstream, record each exchange.

:class:`RecordingProxy` is a generic HTTP reverse proxy on ``127.0.0.1`` (port 0) in front of one
upstream root URL. Any method, path and query is forwarded to ``upstream_url + path``; hop-by-hop
headers are dropped and ``Host`` is rewritten. Response bodies are never decoded nor re-encoded
(``Content-Encoding`` passes through as is). Streams (SSE, NDJSON, chunked, unknown or large length)
are forwarded chunk by chunk as they arrive; small bodies of known length are read whole, then sent.
The HTTP/1.1 on both sides (asyncio protocols, httptools parsers) is :mod:`.client` (the agent's
connections), :mod:`.upstream` (pooled upstream connections), :mod:`.relay` (one exchange linking
them) and :mod:`.http1` (request parsing, hop-by-hop headers, error bodies); this module is the
proxy's lifecycle and where its records go.

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

========================== ======================================================================
``proxy_connect_error``    upstream unreachable → 502 JSON error to the client
``upstream_timeout``       no byte for ``upstream_timeout_s`` → 504 (or the stream is cut)
``upstream_reset``         upstream closed mid-response → 502, or the client's stream is cut short
``upstream_malformed``     the upstream did not speak HTTP → 502 (a malformed *body* is relayed
                           as is and recorded as far as it parses; that is not a proxy error)
``client_disconnect``      the client went away → the upstream read is cancelled
``request_body_too_large`` the request body is over ``max_request_body`` → 413, never forwarded,
                           the client's connection closed after the answer
``proxy_stopped``          :meth:`RecordingProxy.stop` closed an exchange still in flight
``model_not_under_test``   a model call naming a model other than the case's (``models``) → 403,
                           never forwarded (:mod:`.pin`)
========================== ======================================================================
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from yarl import URL

from ..jsonl import json_lines
from . import DEFAULT_MAX_REQUEST_BODY
from .client import ClientConnection
from .exchange import Exchange, Observer, ObserverFactory
from .pin import ModelPin
from .recorder import DEFAULT_MAX_RECORD_BYTES, DEFAULT_MAX_RECORDS, RecordBook
from .recorder_client import RecorderChild, RecorderClient, get_recorder
from .upstream import UpstreamPool

log = logging.getLogger(__name__)

#: Reasons caused by the upstream (they make the phase's proxy status ``error``).
UPSTREAM_ERRORS = frozenset({"proxy_connect_error", "upstream_reset", "upstream_malformed", "upstream_timeout"})

class RecordingProxy:
    """A phase-scoped recording reverse proxy in front of ``upstream_url`` (a server root, e.g.
    ``http://127.0.0.1:11434``; a path prefix is kept and request paths are appended to it).

    Observing: by default in the process-wide recorder process
    (:func:`~.recorder_client.get_recorder`), or in ``recorder`` (a
    :class:`~.recorder_client.RecorderClient`) when given. With ``observer_factory`` the observers run
    in-process: it is called with the keyword arguments of ``ExchangeObserver`` (method, path,
    query, upstream_url, request_headers, request_body, body_budget). ``upstream_timeout_s`` bounds
    the wait for the upstream's next byte (headers or body), not a stream's total duration;
    ``flush_timeout_s`` bounds the wait for the recorder in :meth:`flush`. ``max_request_body`` caps
    a request's body in bytes (default 64 MiB): over it, the request is answered ``413`` and recorded
    as ``request_body_too_large``, and at most that much of it is ever held.

    Lifecycle: ``await start()`` (``OSError`` when it cannot bind; an old ``record_path`` is removed),
    :attr:`base_url`, then ``await stop()``, which closes in-flight exchanges (recorded as
    ``proxy_stopped``), waits for their records and never hangs. The record file is created with the
    first record.

    It is its exchanges' :class:`~.exchange.RecordSink` (the methods under "recording"): that is all
    an :class:`~.exchange.Exchange` sees of it; to the HTTP relay (client connections, one
    :class:`~.relay.Relay` per exchange) it is a :class:`~.relay.ProxyHost`.
    """

    def __init__(self, upstream_url: str, record_path: Path, *, observer_factory: ObserverFactory | None = None,
                 recorder: RecorderClient | None = None, body_budget: int = 256 * 1024,
                 upstream_timeout_s: float = 600, flush_timeout_s: float = 10.0,
                 max_request_body: int = DEFAULT_MAX_REQUEST_BODY, token_budget: int | None = None,
                 models: Iterable[str] | None = None, max_records: int = DEFAULT_MAX_RECORDS,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        if isinstance(max_request_body, bool) or not isinstance(max_request_body, int) or max_request_body < 1:
            raise ValueError(f"max_request_body must be a positive number of bytes, not {max_request_body!r}")
        if token_budget is not None and (isinstance(token_budget, bool) or not isinstance(token_budget, int)
                                         or token_budget < 1):
            raise ValueError(f"token_budget must be a positive number of tokens, not {token_budget!r}")
        self.max_request_body = max_request_body
        self.pin = ModelPin(models) if models is not None else None
        """The model under test (:mod:`.pin`): a model call naming another is refused (403
        ``model_not_under_test``, never forwarded). None: any model is relayed."""
        self.model_refusals: list[str] = []
        """Why each refused model call was refused, in order (the first 20 kept; :attr:`model_refusal_count`)."""
        self.model_refusal_count = 0
        self.token_budget = token_budget
        """Tokens this proxy's phase may spend; past them every further model call is refused (429,
        ``token_budget_exceeded``). None: no budget."""
        self.tokens_spent = 0
        """Tokens the model calls admitted so far cost (settled when each ends: :mod:`.tokens`)."""
        self.token_budget_exceeded = False
        """The phase spent its budget: a call's cost took it to the budget or past it, or a model call was
        refused for it (the runner then stops the agent)."""
        self._turn: asyncio.Lock | None = None
        self._unsettled = 0
        for name, cap in (("max_records", max_records), ("max_record_bytes", max_record_bytes)):
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise ValueError(f"{name} must be a positive number, not {cap!r}")
        self.record_caps: list[Any] = [max_records, max_record_bytes, uuid.uuid4().hex]
        """``[max_records, max_bytes, proxy id]``: the record file's caps (:class:`~.recorder.RecordBook`)."""
        self._recorder_stats: dict[RecorderChild, dict[str, int]] = {}
        self.upstream_url = upstream_url.rstrip("/")
        self.record_path = Path(record_path)
        self.body_budget = body_budget
        self.upstream_timeout_s = upstream_timeout_s
        self.flush_timeout_s = flush_timeout_s
        self._observer_factory = observer_factory
        self._recorder = recorder
        self._fallback_factory: ObserverFactory | None = None
        self._children: set[RecorderChild] = set()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[ClientConnection] = set()
        self._open: dict[Exchange, None] = {}
        """The exchanges being relayed now, oldest first (:meth:`activity`)."""
        self._base_url: str | None = None
        self._record_file = RecordBook(self.record_path, max_records, max_record_bytes)
        """Where in-process observed exchanges are written (the recorder process keeps its own book)."""
        url = URL(self.upstream_url)
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise ValueError(f"the recording proxy needs an http(s) upstream URL, not {upstream_url!r}")
        self.target_prefix = url.raw_path.rstrip("/").encode("latin-1")
        """The upstream URL's path, put before every request's target (``b""`` for a server root)."""
        authority = url.raw_host if ":" not in url.raw_host else f"[{url.raw_host}]"
        if url.explicit_port is not None:
            authority += f":{url.explicit_port}"
        self.host_header = authority.encode("latin-1")
        """The ``Host`` header sent upstream."""
        self.pool = UpstreamPool(url.scheme, url.raw_host, url.port or 80,
                                 connect_timeout=min(30.0, upstream_timeout_s))
        """The keep-alive connections to the upstream."""
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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: ClientConnection(self), "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self._base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Stop serving: close in-flight exchanges (recorded), the listener and the upstream connections;
        wait for the records (:meth:`flush`), close the record file. Safe to call twice, and after a
        failed :meth:`start`."""
        self._stopping = True
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
        for conn in list(self._connections):  # in-flight exchanges are recorded as proxy_stopped
            conn.abort()
        self.pool.close()
        deadline = time.monotonic() + 5.0
        while self._connections and time.monotonic() < deadline:  # connection_lost runs soon after abort
            await asyncio.sleep(0.001)
        await self.flush()
        deadline = time.monotonic() + self.flush_timeout_s
        while self._unsettled and time.monotonic() < deadline:  # the last calls' costs (TOK before ACK)
            await asyncio.sleep(0.001)
        self._record_file.close()

    async def flush(self) -> None:
        """Return once every exchange finished so far has its record in the file. Never hangs: a
        recorder that makes no progress for ``flush_timeout_s`` (or is still not done after six times
        that) is killed, and the exchanges it owed are recorded as metadata only (:attr:`recorder_error`
        says so)."""
        for child in list(self._children):
            stats = await self._flush_child(child)
            if isinstance(stats, dict):
                self._recorder_stats[child] = stats
            if child.dead:
                self._children.discard(child)
                lost = child.lost_by_path.get(str(self.record_path), 0)
                if lost:
                    self._metadata_only += lost
                    self._recorder_reason = child.reason
        if self._metadata_only:
            self.recorder_error = (f"{self._metadata_only} exchange(s) recorded as metadata only: "
                                   f"{self._recorder_reason or 'the recorder process died'}")

    async def _flush_child(self, child: RecorderChild) -> Any:
        """Flush ``child``'s records of this proxy; its record book's stats (None when unknown)."""
        done = asyncio.wrap_future(child.flush(self.record_path))
        try:
            for _ in range(6):
                mark = child.handled()
                try:
                    return await asyncio.wait_for(asyncio.shield(done), self.flush_timeout_s)
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
        return None

    @property
    def stopping(self) -> bool:
        """:meth:`stop` has begun: exchanges still in flight end as ``proxy_stopped``."""
        return self._stopping

    def connection_opened(self, conn: ClientConnection) -> None:
        """A client connected (:meth:`stop` closes the connections still open)."""
        self._connections.add(conn)

    def connection_closed(self, conn: ClientConnection) -> None:
        self._connections.discard(conn)

    def exchange_started(self, exchange: Exchange) -> None:
        """An exchange is being relayed (:meth:`activity` counts it open until it ends)."""
        self._open[exchange] = None

    def exchange_ended(self, exchange: Exchange) -> None:
        self._open.pop(exchange, None)

    def activity(self) -> dict[str, Any] | None:
        """What is open right now, for a progress display: ``{"open": exchanges being relayed, "open_s":
        seconds since the oldest of them started (None: none open), "output_s": seconds since response bytes
        of an open one were last relayed to the client (None: none yet; a small reply of known length comes
        whole, at its end)}``. Any thread may ask, at most about once a second: it copies the open exchanges
        (one C-level copy, under the GIL) and reads two floats of each; None in the unlikely case the
        copy met a change."""
        try:
            exchanges = list(self._open)
        except RuntimeError:  # changed while copied
            return None
        now = time.perf_counter()
        started = [ex.t0 for ex in exchanges]
        outputs = [t for t in (ex.last_output for ex in exchanges) if t is not None]
        return {"open": len(exchanges), "open_s": max(0.0, now - min(started)) if started else None,
                "output_s": max(0.0, now - max(outputs)) if outputs else None}

    async def __aenter__(self) -> "RecordingProxy":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def read_records(self) -> list[dict]:
        """Every record written so far (see :func:`read_records`)."""
        return read_records(self.record_path)

    # --------------------------------------------------------- recording (the exchanges' RecordSink)

    def recorder_exchange_id(self) -> int | None:
        """A new exchange id for the recorder process; ``None``: observe the exchange in-process (an
        ``observer_factory`` was given, or the recorder gave up)."""
        recorder = self._recorder
        if self._observer_factory is not None or recorder is None or recorder.unavailable is not None:
            return None
        return recorder.next_id()

    def recorder_child(self) -> RecorderChild | None:
        """The recorder process for a new exchange; ``None``: observe in-process."""
        if self._observer_factory is not None or self._recorder is None:
            return None
        return self._recorder.child()

    def recorder_congested(self) -> RecorderChild | None:
        """The recorder process this proxy hands exchanges to, when it is behind (then the relay waits for it
        before forwarding another request, so what is queued for it stays bounded); else None."""
        recorder = self._recorder
        if self._observer_factory is not None or recorder is None:
            return None
        return recorder.congested()

    def register_child(self, child: RecorderChild) -> None:
        """``child`` took one of this proxy's exchanges: :meth:`flush` waits for it."""
        self._children.add(child)

    def new_observer(self, *, method: str, path: str, query: str, request_headers: Mapping[str, str],
                     request_body: bytes) -> Observer:
        """An in-process observer for one exchange (``observer_factory``, else the real one)."""
        factory = self._observer_factory
        if factory is None:  # the recorder is unavailable
            if self._fallback_factory is None:
                from .observe import ExchangeObserver  # imported lazily: only this path needs the parsers here
                self._fallback_factory = ExchangeObserver
            factory = self._fallback_factory
        return factory(
            method=method, path=path, query=query, upstream_url=self.upstream_url,
            request_headers=request_headers, request_body=request_body, body_budget=self.body_budget)

    def count_exchange(self, proxy_error: str | None) -> None:
        """One exchange ended: :attr:`exchange_count`, and :attr:`proxy_errors` when it failed."""
        self.exchange_count += 1
        if proxy_error:
            self.proxy_errors.append(str(proxy_error))

    def write_record(self, record: dict) -> None:
        """Append one record as a JSON line (in-process observing). Never raises (a full disk costs
        the record only)."""
        self._record_file.add(record)

    def write_metadata_only(self, record: dict, reason: str | None) -> None:
        """Append the metadata-only record of an exchange the recorder process died with; it counts
        towards :attr:`recorder_error` (``reason``: why the recorder died)."""
        self._metadata_only += 1
        self._recorder_reason = reason
        self.write_record(record)

    def refused_model(self, why: str) -> None:
        """A model call was refused for the model it named (see :attr:`pin`)."""
        self.model_refusal_count += 1
        if len(self.model_refusals) < 20:
            self.model_refusals.append(why)

    # ------------------------------------------------------------------------ the token budget

    async def admit_model_call(self) -> bool:
        """A model call's turn under the token budget (reserve, then settle): model calls are admitted one
        at a time, each once the one before it has settled its cost, so a phase spends at most its budget
        plus one call. ``True``: admitted, and the turn is the caller's until :meth:`settle_tokens`;
        ``False``: the budget is spent (refuse the call; the turn is not held). Waiting may be cancelled."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        await self._turn.acquire()
        budget = self.token_budget
        if budget is not None and self.tokens_spent >= budget:
            self.token_budget_exceeded = True
            self._turn.release()
            return False
        return True

    def settle_tokens(self, tokens: int) -> None:
        """The admitted call ended having cost ``tokens``: counted, and the next call's turn comes. Reaching
        or crossing the budget is exceeding it (also with the phase's last call)."""
        self.tokens_spent += max(0, int(tokens))
        if self.token_budget is not None and self.tokens_spent >= self.token_budget:
            self.token_budget_exceeded = True
        if self._turn is not None and self._turn.locked():
            self._turn.release()

    def settle_tokens_later(self, owed: concurrent.futures.Future, fallback: int) -> None:
        """Settle when the recorder says what the call cost (``owed``), or with ``fallback`` if it dies or
        has not said within ``flush_timeout_s``."""
        loop = asyncio.get_running_loop()
        self._unsettled += 1
        state = {"done": False}

        def settle(tokens: int) -> None:
            if state["done"]:
                return
            state["done"] = True
            timer.cancel()
            self._unsettled -= 1
            self.settle_tokens(tokens)

        def answered(fut: concurrent.futures.Future) -> None:
            tokens = fallback
            if not fut.cancelled() and fut.exception() is None and isinstance(fut.result(), int):
                tokens = fut.result()
            try:
                loop.call_soon_threadsafe(settle, tokens)
            except RuntimeError:  # the loop is closed: the phase is over, nothing waits for this turn
                pass

        timer = loop.call_later(self.flush_timeout_s, settle, fallback)
        owed.add_done_callback(answered)

    def records(self) -> dict[str, int]:
        """What became of this proxy's records (summed over the recorder processes and in-process writes):
        ``{"written", "slimmed", "dropped", "dropped_bytes", "bytes", "max_records", "max_bytes"}``; valid
        after :meth:`flush`."""
        out = dict(self._record_file.stats())
        for stats in self._recorder_stats.values():
            for key in ("written", "slimmed", "dropped", "dropped_bytes", "bytes"):
                value = stats.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    out[key] += value
        return out

    def status(self) -> dict[str, Any]:
        """``{"error": str | None, "reason": str | None, "exchanges": int, "recorder_error": str | None,
        "token_budget_exceeded": bool, "tokens_spent": int, "model_not_under_test": int, "records": dict}``;
        ``error`` is set when an exchange failed because of
        the upstream (:data:`UPSTREAM_ERRORS`); ``recorder_error`` when records were degraded to metadata only
        (see :attr:`recorder_error`); ``token_budget_exceeded`` when a model call was refused for the token budget;
        ``model_not_under_test`` how many model calls were refused for naming another model (:attr:`pin`);
        ``records`` what became of the records under their caps (:meth:`records`)."""
        budget = {"token_budget_exceeded": self.token_budget_exceeded, "tokens_spent": self.tokens_spent,
                  "model_not_under_test": self.model_refusal_count, "records": self.records()}
        upstream = [r for r in self.proxy_errors if r in UPSTREAM_ERRORS]
        if not upstream:
            return {"error": None, "reason": None, "exchanges": self.exchange_count,
                    "recorder_error": self.recorder_error, **budget}
        counts: dict[str, int] = {}
        for r in upstream:
            counts[r] = counts.get(r, 0) + 1
        detail = ", ".join(f"{r} x{n}" for r, n in counts.items())
        error = f"{len(upstream)} of {self.exchange_count} exchanges with {self.upstream_url} failed: {detail}"
        return {"error": error, "reason": upstream[0], "exchanges": self.exchange_count,
                "recorder_error": self.recorder_error, **budget}


def read_records(path: Path) -> list[dict]:
    """The JSON-line records of ``path`` in order; ``[]`` when it is missing. A line that is not a JSON
    object (a torn write) is skipped, never raised on (:func:`gripprobe_core.json_lines`)."""
    return list(iter_records(path))


def iter_records(path: Path, *, keys: Iterable[str] | None = None,
                 without: Iterable[str] = ()) -> Iterator[dict]:
    """The records of ``path`` one at a time, read a line at a time (memory: one record, whatever the
    file's size); a torn or non-object line is skipped. ``keys``: keep only these keys of each record;
    ``without``: drop these (the bodies, ``x_gripprobe_request`` / ``_response``, when only the facts
    matter)."""
    keep = frozenset(keys) if keys is not None else None
    drop = tuple(without)
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        for line in fh:
            for _, obj in json_lines(line):
                if keep is not None:
                    obj = {k: v for k, v in obj.items() if k in keep}
                for k in drop:
                    obj.pop(k, None)
                yield obj

"""One exchange through the recording proxy: its timing, and where it is observed.

:class:`Exchange` is the relay's per-request state (made by :class:`~.client.ClientConnection` when
a request's head is parsed, fed by :class:`~.relay.Relay`). Observing starts on first use,
after the client has its first bytes: by default the exchange's frames (see :mod:`.recorder`) are
held and handed to the recorder process in one queue put when the exchange ends (a stream's every
:data:`~.recorder_client.BATCH_BYTES`); with an ``observer_factory``, or when no recorder can run,
an in-process :class:`Observer` gets the bytes and the proxy writes its record itself. If the
recorder dies before it took an exchange's first frames, they go whole to a restarted recorder or
to an in-process observer; if it dies after, the exchange gets a metadata-only record.

An exchange sees its proxy only as a :class:`RecordSink`: the few facts and calls it needs to be
observed and recorded (:class:`~.server.RecordingProxy` implements it).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from multidict import CIMultiDict

from .recorder import BEGIN, CHUNK, minimal_record, record_timestamp
from .recorder_client import BATCH_BYTES, RecorderChild, credential_headers
from .tokens import bytes_estimate

if TYPE_CHECKING:
    from .http1 import Request

__all__ = ["Exchange", "Observer", "ObserverFactory", "RecordSink"]

log = logging.getLogger(__name__)


class Observer(Protocol):
    """What the proxy needs from an exchange observer (see ``proxy/observe.py``)."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self, *, status: int | None, response_headers: Mapping[str, str], duration_ms: float,
               ttfb_ms: float | None, proxy_error: str | None) -> dict: ...


ObserverFactory = Callable[..., Observer]


class RecordSink(Protocol):
    """What an :class:`Exchange` needs from its proxy (:class:`~.server.RecordingProxy`): the facts
    its record starts from, where it is observed (the recorder process or an in-process
    :class:`Observer`), and where its record and count go. Nothing else of the proxy is its business."""

    upstream_url: str
    record_path: Path
    body_budget: int
    record_caps: list[Any]
    """``[max_records, max_bytes, proxy id]`` of the record file (the recorder's :class:`~.recorder.RecordBook`)."""

    def recorder_exchange_id(self) -> int | None:
        """A new exchange id for the recorder process; ``None``: observe this exchange in-process."""

    def recorder_child(self) -> RecorderChild | None:
        """The live recorder process to hand frames to (restarted if it died); ``None``: none can run."""

    def register_child(self, child: RecorderChild) -> None:
        """``child`` took an exchange of this proxy: the proxy flushes it (and counts what it lost)."""

    def new_observer(self, *, method: str, path: str, query: str, request_headers: Mapping[str, str],
                     request_body: bytes) -> Observer:
        """An in-process observer for one exchange (may raise: the exchange is then not observed)."""

    def count_exchange(self, proxy_error: str | None) -> None:
        """One exchange ended (``proxy_error``: its fault, if any). Called once per exchange."""

    def exchange_ended(self, exchange: Exchange) -> None:
        """``exchange`` ended: no longer open (the activity view). Called once per exchange, relayed or not."""

    def write_record(self, record: dict) -> None:
        """Append an in-process observed exchange's record. Never raises."""

    def write_metadata_only(self, record: dict, reason: str | None) -> None:
        """Append the metadata-only record of an exchange the recorder process died with (``reason``:
        why it died), and count it as degraded. Never raises."""

    def settle_tokens(self, tokens: int) -> None:
        """A model call admitted against the token budget ended and cost ``tokens``."""

    def settle_tokens_later(self, owed: Any, fallback: int) -> None:
        """... and will say what it cost when the recorder answers ``owed`` (a concurrent future of its
        ``TOK``); ``fallback`` if it never does."""


class Exchange:
    """One request/response through the proxy: timing, where it is observed (the recorder process or
    an in-process observer), and the single record it yields."""

    def __init__(self, sink: RecordSink, request: Request) -> None:
        self.sink = sink
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        self.request = request
        self.request_body = b""
        self.response_headers: list[tuple[bytes, bytes]] | None = None
        """The response headers as relayed to the client (raw), once known."""
        self.status: int | None = None
        self.ttfb_ms: float | None = None
        self.opened = False
        self.frames: list[tuple] | None = None
        """Frames for the recorder not handed over yet (``None``: observed in-process)."""
        self.batch = 0
        """Body bytes in :attr:`frames`."""
        self.child: RecorderChild | None = None
        """The recorder process that took this exchange's first frames."""
        self.xid = 0
        self.meta: dict[str, Any] | None = None
        self.observer: Observer | None = None
        self.observer_failed = False
        self.done = False
        self.counted = False
        """Admitted against the phase's token budget: its cost is settled when it ends."""
        self.response_bytes = 0
        self.last_output: float | None = None
        """When the last response bytes were relayed to the client (``time.perf_counter()``; the proxy's
        activity view reads it from another thread), None before the first."""

    # Request facts are read when observing starts (after the client has its first bytes).
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

    def _meta(self) -> dict[str, Any]:
        """The BEGIN frame's meta (see :mod:`.recorder`)."""
        sink = self.sink
        return {"method": self.method, "path": self.path, "query": self.query, "upstream_url": sink.upstream_url,
                "headers": credential_headers(self.request.headers), "record_path": os.fspath(sink.record_path),
                "body_budget": sink.body_budget, "started": self.wall0, "caps": sink.record_caps,
                "count": self.counted}

    def _open(self) -> None:
        """Start observing, on first use (after the client has its first bytes, so it never delays
        them): frames for the recorder process, else an in-process observer."""
        if self.opened:
            return
        self.opened = True
        xid = self.sink.recorder_exchange_id()
        if xid is not None:
            self.xid, self.meta = xid, self._meta()
            self.frames = [(BEGIN, self.xid, self.meta, self.request_body)]
            self.batch = len(self.request_body)
            return
        self._observe_in_process([])

    def _observe_in_process(self, frames: list[tuple]) -> None:
        """Observe in-process from here on, first replaying the response bytes held in ``frames``."""
        self.frames = None
        try:
            self.observer = self.sink.new_observer(method=self.method, path=self.path, query=self.query,
                                                   request_headers=self.request_headers,
                                                   request_body=self.request_body)
        except Exception:
            log.exception("recording proxy: observer construction failed")
            self.observer_failed = True
            return
        for frame in frames:
            if frame[0] == CHUNK:
                self._feed_observer(frame[2], frame[3])

    def _first_handover(self, frames: list[tuple], nbytes: int, end: dict | None = None) -> bool:
        """Hand the first frames (BEGIN included; END too when ``end``) to a live recorder, restarting
        a dead one once. ``False``: no recorder took them (observe in-process)."""
        assert self.meta is not None
        for _ in range(2):
            child = self.sink.recorder_child()
            if child is None:
                return False
            if end is None:
                taken = child.send(frames, nbytes)
            else:
                owed = child.expect_tokens(self.xid) if self.counted else None
                taken = child.end(self.xid, self.meta, end, frames, nbytes)
                if taken and owed is not None:
                    self.sink.settle_tokens_later(owed, self._fallback_tokens())
            if taken:
                self.child = child
                self.sink.register_child(child)
                return True
        return False

    def feed(self, chunk: bytes) -> None:
        now = self.last_output = time.perf_counter()  # one clock read: the activity view's and the TTFT's
        at_ms = (now - self.t0) * 1000  # when these bytes arrived: the observer's TTFT
        self.response_bytes += len(chunk)
        self._open()
        if self.frames is None:
            self._feed_observer(chunk, at_ms)
            return
        self.frames.append((CHUNK, self.xid, chunk, at_ms))
        self.batch += len(chunk)
        if self.batch < BATCH_BYTES:
            return
        frames, nbytes = self.frames, self.batch
        self.frames, self.batch = [], 0
        if self.child is not None:
            self.child.send(frames, nbytes)  # False: the recorder died; finish() records the metadata
        elif not self._first_handover(frames, nbytes):
            self._observe_in_process(frames)

    def _feed_observer(self, chunk: bytes, at_ms: float) -> None:
        obs = self.observer
        if obs is None:
            return
        try:
            arrived = getattr(obs, "arrived", None)  # an observer that does not time its objects has none
            if arrived is not None:
                arrived(at_ms)
            obs.feed(chunk)
        except Exception:
            log.exception("recording proxy: observer.feed failed; this exchange is no longer observed")
            self.observer, self.observer_failed = None, True

    def finish(self, proxy_error: str | None) -> None:
        """Record this exchange, once: END to the recorder, or the in-process observer's record."""
        if self.done:
            return
        self.done = True
        duration_ms = (time.perf_counter() - self.t0) * 1000
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.response_headers or ()]
        self.sink.count_exchange(proxy_error)
        self.sink.exchange_ended(self)
        self._open()
        if self.frames is not None:
            assert self.meta is not None
            end = {"status": self.status, "response_headers": [[k, v] for k, v in headers],
                   "duration_ms": duration_ms, "ttfb_ms": self.ttfb_ms, "proxy_error": proxy_error}
            frames, nbytes = self.frames, self.batch
            self.frames, self.batch = [], 0
            child = self.child
            if child is None:
                if self._first_handover(frames, nbytes, end):
                    return
                self._observe_in_process(frames)  # no recorder: every byte is still here
            else:
                owed = child.expect_tokens(self.xid) if self.counted else None
                if child.end(self.xid, self.meta, end, frames, nbytes):
                    if owed is not None:
                        self.sink.settle_tokens_later(owed, self._fallback_tokens())
                    return
                # the recorder died with this exchange in flight: its bytes are gone, keep the metadata
                self.sink.write_metadata_only(minimal_record(self.meta, end, error=f"recorder_died: {child.reason}"),
                                              child.reason)
                if self.counted:
                    self.sink.settle_tokens(self._fallback_tokens())
                return
        record: dict | None = None
        obs = self.observer
        if obs is not None:
            try:
                record = dict(obs.finish(status=self.status, response_headers=CIMultiDict(headers), duration_ms=duration_ms,
                                         ttfb_ms=self.ttfb_ms, proxy_error=proxy_error))
            except Exception:
                log.exception("recording proxy: observer.finish failed; writing a minimal record")
        if record is None:
            meta = {"method": self.method, "path": self.path, "query": self.query,
                    "upstream_url": self.sink.upstream_url, "headers": credential_headers(self.request.headers)}
            record = minimal_record(meta, {"status": self.status, "duration_ms": duration_ms,
                                           "ttfb_ms": self.ttfb_ms, "proxy_error": proxy_error})
        record["x_gripprobe_timestamp"] = record_timestamp(self.wall0)  # the request's start
        if self.counted:
            tokens = record.get("x_gripprobe_tokens")
            counted = tokens.get("counted") if isinstance(tokens, dict) else None
            self.sink.settle_tokens(counted if isinstance(counted, int) and not isinstance(counted, bool)
                                    and counted >= 0 else self._fallback_tokens())
        self.sink.write_record(record)

    def _fallback_tokens(self) -> int:
        """What a call costs when its reply could not be read: every byte each way (:mod:`.tokens`); 0 when
        the upstream did not answer it with a 2xx."""
        status = self.status
        if not (isinstance(status, int) and 200 <= status < 300):
            return 0
        return bytes_estimate(len(self.request_body), self.response_bytes)

"""What a running case is doing, for the progress display: the runner's events and a tally of the running
phase's model calls.

The runner tells the run's watcher when a case's agent phase starts (``warmup``, ``measured``: right before
its agent is launched, with the phase's proxy record file when a proxy records it) and when the case is
judged (``judging``); the finished case is the executor's ``on_done`` as before. The watcher is the callable
:func:`~.run.execute_run` was given (``on_event``), held in :data:`WATCH` for the run's duration: every task
of the run's event loop sees it, a Ray worker (another process) does not, so a cluster's cases show only as
they finish. An event is a few attribute writes for the watcher, on the event loop; nothing here waits.

:class:`RecordTally` counts what the phase's record file holds so far (the ``ProxyHandle`` contract: one
JSON line per finished exchange, appended whole): model calls (records of a model protocol), the tool
calls the model made in them (structured and written as text), and when the last reply ended. It reads only
the bytes added since its last look, at most once a second, on the display's own thread, never on the
event loop. A call still open (a server prefilling, a stalled stream) has no record until it ends:
:class:`OpenCalls` shows it, from the proxy's activity view (the optional ``ProxyHandle.activity()``: calls
open now, how long the oldest has been open, when output was last relayed), asked on the display's thread at
most once a second; the runner hands a phase's view (its proxy handle's ``activity``, when it has one) to
:func:`emit` with the phase.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

from ..models.results import CaseKey
from ..models.wire import MODEL_PROTOCOLS

log = logging.getLogger(__name__)

PHASE_NAMES = ("warmup", "measured", "judging")
"""What a running case can be doing, in order (``judging``: its agents are done, the judge runs)."""


Activity = Callable[[], "Mapping[str, Any] | None"]
"""A running proxy's activity view (``ProxyHandle.activity``): ``{"open": calls open now, "open_s": seconds
the oldest has been open, "output_s": seconds since output of an open call was last relayed}`` (None: no
answer this time). Called from any thread; it never blocks."""



@dataclass(frozen=True)
class CaseEvent:
    """A running case entered ``phase`` (one of :data:`PHASE_NAMES`) at ``at`` (``time.monotonic()``);
    ``record``: the phase's proxy record file (None: no proxy records it, or ``judging``); ``activity``: what
    the phase's proxy has open now (:data:`Activity`; None: its proxy cannot tell)."""

    case_id: str
    key: CaseKey
    phase: str
    at: float
    record: Path | None = None
    activity: Activity | None = None


Watch = Callable[[CaseEvent], None]

WATCH: ContextVar[Watch | None] = ContextVar("gripprobe_case_watch", default=None)
"""The run's watcher (:func:`~.run.execute_run` sets it around the run's event loop), else None."""


def emit(case_id: str, key: CaseKey, phase: str, record: Path | None = None,
         activity: Activity | None = None) -> None:
    """Tell the run's watcher, if any, that the case entered ``phase``; ``activity``: its proxy's activity
    view (None: the proxy has none). A watcher that fails is logged and ignored: the display never costs a case."""
    watch = WATCH.get()
    if watch is None:
        return
    try:
        watch(CaseEvent(case_id, key, phase, time.monotonic(), record, activity))
    except Exception:
        log.exception("progress display: the case event was not shown")


READ_LIMIT = 16 * 1024 * 1024
"""Bytes of new records read per look (the rest waits for the next look)."""


class RecordTally:
    """The model calls one phase's proxy record file holds so far (see the module's docstring). Not thread
    safe: one display thread looks at it."""

    def __init__(self, path: Path | None, min_period_s: float = 1.0) -> None:
        self.path, self.min_period_s = path, min_period_s
        self.model_calls = 0
        self.tool_calls = 0
        self.last_reply_at: float | None = None
        """When the last model call's reply ended (``time.time()``), None before the first."""
        self._offset, self._partial, self._looked = 0, b"", float("-inf")

    @property
    def recorded(self) -> bool:
        """Does a proxy record this phase (else nothing is counted)?"""
        return self.path is not None

    def look(self, now: float | None = None) -> None:
        """Count the records added since the last look (at most once per ``min_period_s``)."""
        now = time.monotonic() if now is None else now
        if self.path is None or now - self._looked < self.min_period_s:
            return
        self._looked = now
        try:
            chunk = self._read_new(self.path)
        except OSError:
            return  # not written yet (the file comes with the first record), or gone with the case
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            self._count(line)

    def _read_new(self, path: Path) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return b""
            if st.st_size < self._offset:  # rewritten from the start: count again
                self._offset, self._partial = 0, b""
                self.model_calls = self.tool_calls = 0
                self.last_reply_at = None
            data = os.pread(fd, min(READ_LIMIT, st.st_size - self._offset), self._offset)
        finally:
            os.close(fd)
        self._offset += len(data)
        return data

    def _count(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict) or record.get("x_gripprobe_protocol") not in MODEL_PROTOCOLS:
            return
        self.model_calls += 1
        self.tool_calls += sum(_count_of(record.get(k)) for k in (
            "x_gripprobe_tool_call_count", "x_gripprobe_tool_call_nonstructured_count"))
        ended = reply_end(record)
        if ended is not None and (self.last_reply_at is None or ended > self.last_reply_at):
            self.last_reply_at = ended


def _count_of(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def reply_end(record: dict) -> float | None:
    """When a record's exchange ended (``time.time()``): its start (``x_gripprobe_timestamp``) plus its
    duration; None when either is missing or unreadable."""
    stamp, duration = record.get("x_gripprobe_timestamp"), record.get("x_gripprobe_duration_ms")
    if not isinstance(stamp, str) or isinstance(duration, bool) or not isinstance(duration, (int, float)) \
            or not 0 <= duration < float("inf"):
        return None
    try:
        start = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if start.tzinfo is None:
        return None
    return start.timestamp() + duration / 1000.0


class OpenCalls:
    """The model calls a running phase's proxy has open (its :data:`Activity` view), as last seen: asked at
    most once per ``min_period_s`` on the display's own thread; the ages move on between looks. A view that
    fails or answers nonsense shows nothing (the display never costs a case). Not thread safe: one display
    thread looks at it."""

    def __init__(self, view: Activity | None, min_period_s: float = 1.0) -> None:
        self.view, self.min_period_s = view, min_period_s
        self.open = 0
        self._open_s: float | None = None
        self._output_s: float | None = None
        self._seen_at, self._looked = 0.0, float("-inf")

    def look(self, now: float | None = None) -> None:
        """Ask the view (at most once per ``min_period_s``)."""
        now = time.monotonic() if now is None else now
        if self.view is None or now - self._looked < self.min_period_s:
            return
        self._looked = now
        try:
            seen = self.view()
        except Exception:
            log.debug("progress display: the proxy's activity view failed", exc_info=True)
            seen = None
        if not isinstance(seen, Mapping):
            return
        opened = seen.get("open")
        self.open = opened if type(opened) is int and opened > 0 else 0
        self._open_s = _age(seen.get("open_s")) if self.open else None
        self._output_s = _age(seen.get("output_s")) if self.open else None
        self._seen_at = now

    def ages(self, now: float | None = None) -> tuple[float | None, float | None]:
        """(seconds the oldest open call has been open, seconds since its last output) at ``now``; (None,
        None) when none is open, the second None before any output."""
        now = time.monotonic() if now is None else now
        moved = max(0.0, now - self._seen_at)
        return (None if self._open_s is None else self._open_s + moved,
                None if self._output_s is None else self._output_s + moved)


def _age(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        return None
    return float(value)

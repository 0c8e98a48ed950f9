"""The relay's side of the recorder (:mod:`.recorder`): one recorder process per Python process.

:func:`get_recorder` returns the process-wide :class:`RecorderClient`, shared by every
:class:`~.server.RecordingProxy` (every phase, every case); its process starts on first use and is
stopped by :func:`close_recorder` (the runner calls it at the end of a run) or at exit. The client
works with any event loop, or none. Frames are encoded by the caller and written straight into the
child's stdin (non-blocking) when nothing is waiting; what the pipe cannot take at once goes into a
:class:`queue.SimpleQueue` that a *writer thread* drains in order, and a *reader thread* reads the
child's replies. For the relay, observing an exchange is then one non-blocking write of its frames
(a stream's, one per :data:`BATCH_BYTES`): no parsing, and no thread hand-off in the common case
(the hand-off cost ~0.1 ms per exchange in benchmarks/proxy_latency.py).

Guarantees:

* **Backpressure.** :attr:`RecorderChild.backlog` counts the bytes queued and not yet written to
  the pipe. Above ``high_water`` the relay awaits :meth:`RecorderChild.drain` before reading more
  from the upstream, so a 100 MB stream keeps both processes' memory flat.
* **Flush.** :meth:`RecorderChild.flush` returns a :class:`concurrent.futures.Future` resolved once
  every exchange of that record path that ENDed before it is on disk (``await
  asyncio.wrap_future(fut)``).
* **No record lost.** The child publishes how many END frames it has handled (a shared 8-byte
  watermark file). If it dies (killed, crashed, declared stuck), every exchange ENDed past that
  count gets a metadata-only record (:func:`.recorder.minimal_record`, ``x_gripprobe_error:
  "recorder_died: ..."``), written before pending flushes fail with :class:`RecorderDied`. The next
  exchange restarts the child (up to ``max_restarts`` times); after that, or when it cannot start at
  all, :meth:`RecorderClient.child` returns ``None`` and the relay observes in-process (logged once).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .recorder import (ARRIVED, BEGIN, CHUNK, END, FLUSH, HEADER, META_LEN, WATERMARK, RecordFile, encode_record,
                       minimal_record)

__all__ = ["BATCH_BYTES", "HIGH_WATER", "LOW_WATER", "RecorderChild", "RecorderClient", "RecorderDied",
           "close_recorder", "credential_headers", "default_command", "get_recorder", "release_recorder"]

log = logging.getLogger(__name__)

BATCH_BYTES = 64 << 10
"""A stream's response bytes are handed over in batches of about this size (a small exchange's
frames go in one put, at its end): fewer thread wake-ups in the relay's process."""
HIGH_WATER = 8 << 20
"""Queued bytes above which the relay waits for the recorder before reading more."""
LOW_WATER = 2 << 20
"""... until the queue is back under this."""
STALL_TIMEOUT_S = 10.0
"""A recorder that takes nothing from a full queue for this long is declared stuck and killed."""
MAX_RESTARTS = 3
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux fcntl


class RecorderDied(RuntimeError):
    """The recorder process is gone; its unconfirmed exchanges were recorded as metadata only."""


def default_command() -> list[str]:
    return [sys.executable, "-m", "gripprobe_core.proxy.recorder"]


def _child_env() -> dict[str, str]:
    """This process's environment, with the directory holding ``gripprobe_core`` first on the path
    (so the child imports the same code even when this process found it through ``sys.path``)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


_CREDENTIAL_NAMES: dict[str, bool] = {}


def credential_headers(headers: Mapping[str, str]) -> list[list[str]]:
    """The request headers :func:`.redact.secrets_from_headers` would take secrets from, as pairs
    (the observer needs nothing else from the headers)."""
    from .redact import SECRET_HEADERS, SECRET_KEY

    out = []
    for name, value in headers.items():
        hit = _CREDENTIAL_NAMES.get(name)
        if hit is None:
            lname = name.lower()
            hit = lname in SECRET_HEADERS or SECRET_KEY.search(lname) is not None
            if len(_CREDENTIAL_NAMES) > 4096:
                _CREDENTIAL_NAMES.clear()
            _CREDENTIAL_NAMES[name] = hit
        if hit:
            out.append([name, value])
    return out


def _settle(fut: concurrent.futures.Future, exc: BaseException | None = None, value: Any = None) -> None:
    """Resolve ``fut`` (with ``value``, or failed with ``exc``) unless it is already done (a waiter may have
    cancelled it)."""
    try:
        if exc is None:
            fut.set_result(value)
        else:
            fut.set_exception(exc)
    except concurrent.futures.InvalidStateError:
        pass


def _encode(frames: list[tuple]) -> bytes:
    """The wire bytes of queued frames (see :mod:`.recorder` for the framing)."""
    parts: list[bytes] = []
    for item in frames:
        kind, ident = item[0], item[1]
        if kind == CHUNK:
            data = item[2]
            parts += (HEADER.pack(CHUNK, ident, ARRIVED.size + len(data)), ARRIVED.pack(item[3]), data)
        elif kind == BEGIN:
            meta = json.dumps(item[2], default=str).encode()
            body = item[3]
            parts += (HEADER.pack(BEGIN, ident, META_LEN.size + len(meta) + len(body)), META_LEN.pack(len(meta)),
                      meta, body)
        else:
            payload = json.dumps(item[2], default=str).encode() if kind == END else os.fsencode(item[2])
            parts += (HEADER.pack(kind, ident, len(payload)), payload)
    return b"".join(parts)


class RecorderChild:
    """One recorder process, its writer and reader threads, and the exchanges it owes records for."""

    def __init__(self, command: Sequence[str], *, high_water: int = HIGH_WATER, low_water: int = LOW_WATER) -> None:
        self.high_water, self.low_water = high_water, low_water
        self.dead = False
        self.reason: str | None = None
        """Why it died (set with :attr:`dead`)."""
        self.lost_by_path: dict[str, int] = {}
        """Record path -> exchanges written as metadata only because this child died."""
        self.backlog = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ends = 0
        self._unconfirmed: dict[int, tuple[int, dict, dict]] = {}  # xid -> (END number, meta, end), in order
        self._flushes: dict[int, tuple[concurrent.futures.Future, int]] = {}
        self._tokens_owed: dict[int, concurrent.futures.Future] = {}  # xid -> its TOK
        self._tokens = itertools.count(1)
        self._kill_reason: str | None = None
        self._closing = False
        self._watermark = tempfile.TemporaryFile()  # shared with the child, which stores its END count
        try:
            self._watermark.write(bytes(WATERMARK.size))
            self._watermark.flush()
            fd = self._watermark.fileno()
            self.proc = subprocess.Popen([*command, "--watermark-fd", str(fd)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=None, env=_child_env(), close_fds=True,
                                         pass_fds=(fd,))
        except BaseException:
            self._watermark.close()
            raise
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            import fcntl
            fcntl.fcntl(self.proc.stdin.fileno(), _F_SETPIPE_SZ, PIPE_SIZE)
        except (ImportError, OSError):
            pass  # a smaller pipe only means more wake-ups
        self._fd = self.proc.stdin.fileno()
        os.set_blocking(self._fd, False)
        self._busy = False  # the writer thread has bytes to write: new data must queue behind them
        self._writer = threading.Thread(target=self._write_loop, name="gripprobe-recorder-writer", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="gripprobe-recorder-reader", daemon=True)
        self._writer.start()
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    # ------------------------------------------------------------------ the relay's side (any thread)

    def send(self, frames: list[tuple], nbytes: int) -> bool:
        """Queue ``frames`` (``(BEGIN, xid, meta, body)``, ``(CHUNK, xid, data, arrived_ms)``: see
        :mod:`.recorder`; ``nbytes`` their body bytes, for the backlog) in one put. ``False`` when this
        child is dead: they were not taken."""
        data = _encode(frames)
        with self._lock:
            if self.dead:
                return False
            broken = self._submit(data, nbytes)
        if broken:
            self._broken(broken)
        return True

    def end(self, xid: int, meta: dict, end: dict, frames: list[tuple], nbytes: int) -> bool:
        """Queue an exchange's last ``frames`` and its END (``end``: the END payload; ``meta``: its
        BEGIN meta, kept for a minimal record). ``False`` when this child is dead: nothing was taken.
        From here on the exchange's record is this child's duty, or, if it dies, a minimal one."""
        frames.append((END, xid, end))
        data = _encode(frames)
        with self._lock:
            if self.dead:
                return False
            self._ends += 1
            self._unconfirmed[xid] = (self._ends, meta, end)
            broken = self._submit(data, nbytes)
        if broken:
            self._broken(broken)
        return True

    def expect_tokens(self, xid: int) -> concurrent.futures.Future:
        """A future resolved with what exchange ``xid`` cost (its ``TOK``), to ask for *before* its END is
        sent with ``count`` in its meta; failed with :class:`RecorderDied` if the child dies first."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self.dead:
                fut.set_exception(RecorderDied(self.reason or "the recorder process died"))
            else:
                self._tokens_owed[xid] = fut
        return fut

    def flush(self, record_path: str | os.PathLike[str]) -> concurrent.futures.Future:
        """A future resolved once every exchange of ``record_path`` ENDed so far is written (and the
        child's file closed), with that file's :meth:`~.recorder.RecordBook.stats` (``None`` when the child
        never wrote it); failed with :class:`RecorderDied` if the child dies first."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self.dead:
                fut.set_exception(RecorderDied(self.reason or "the recorder process died"))
                return fut
            token = next(self._tokens)
            self._flushes[token] = (fut, self._ends)
            broken = self._submit(_encode([(FLUSH, token, os.fspath(record_path))]), 0)
        if broken:
            self._broken(broken)
        return fut

    def _submit(self, data: bytes, nbytes: int) -> BaseException | None:
        """With the lock held: write ``data`` to the pipe now when the writer thread has nothing pending
        (one non-blocking system call on the caller's thread: no thread hand-off on the relay's hot
        path), else queue it (or its unwritten tail) for the writer thread, which keeps the order.
        Returns the error when the pipe is broken (the caller kills the child once the lock is free)."""
        self.backlog += nbytes
        if not self._busy:
            try:
                n = os.write(self._fd, data)
            except BlockingIOError:
                n = 0
            except OSError as exc:
                self._busy = True
                self._queue.put((b"", nbytes))  # let the writer thread account for it
                return exc
            if n == len(data):
                self.backlog -= nbytes
                return None
            data = data[n:]
            self._busy = True
        self._queue.put((data, nbytes))
        return None

    @property
    def congested(self) -> bool:
        return self.backlog > self.high_water and not self.dead

    async def drain(self) -> None:
        """Wait (polling every ms, any event loop) until the backlog is under ``low_water``. A child
        that takes nothing for :data:`STALL_TIMEOUT_S` is killed: the relay must never hang."""
        last, since = self.backlog, time.monotonic()
        while not self.dead and self.backlog > self.low_water:
            await asyncio.sleep(0.001)
            now, backlog = time.monotonic(), self.backlog
            if backlog < last:
                last, since = backlog, now
            elif now - since > STALL_TIMEOUT_S:
                self.kill(f"the recorder took no data for {STALL_TIMEOUT_S:g} s")
                return

    def kill(self, reason: str) -> None:
        """Kill the process; the reader thread then records its unconfirmed exchanges (see module doc)."""
        with self._lock:
            if self._kill_reason is None:
                self._kill_reason = reason
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Close stdin (the child writes what it has, then exits), wait for it; kill it if it does not
        exit within ``timeout``."""
        self.begin_close()
        self.wait_closed(timeout)

    def begin_close(self) -> None:
        """Ask the child to finish: EOF on its stdin once everything queued is written (the writer thread
        closes it). Returns at once; :meth:`wait_closed` waits for the child to be gone."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._queue.put(None)

    def wait_closed(self, timeout: float = 5.0) -> None:
        """Wait until the child is gone and reaped and what it owed is recorded (the reader thread reaps it
        when its output closes, and records any exchange it left unconfirmed); kill it if that takes more than
        ``timeout``. Waits on the reader thread, not by polling the process (Popen.wait with a timeout sleeps
        in steps up to 50 ms, so the exit was seen up to 50 ms late)."""
        self._reader.join(timeout)
        if self._reader.is_alive():
            self.kill(f"the recorder did not exit within {timeout:g} s of being closed")
            self._reader.join()
        self._writer.join(timeout)

    # --------------------------------------------------------------------------------- threads

    def _write_loop(self) -> None:
        """Write what :meth:`_submit` could not write at once, in order, waiting for the pipe to take it."""
        import select

        fd = self._fd
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        broken = False
        while True:
            item = self._queue.get()
            if item is None:
                break
            data, nbytes = item
            view = memoryview(data)
            while view and not broken:
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    poller.poll(100)
                    continue
                except OSError as exc:
                    broken = self._broken(exc)
                    break
                view = view[n:]
            with self._lock:
                if not self.dead:
                    self.backlog -= nbytes
                if self._queue.empty():
                    self._busy = False
        try:
            self.proc.stdin.close()  # EOF: the child finishes and exits
        except (OSError, ValueError):
            pass

    def _broken(self, exc: BaseException) -> bool:
        self.kill(f"cannot write to the recorder process: {exc}")
        return True

    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            for line in stdout:
                parts = line.split(None, 2)
                if len(parts) < 2 or not parts[1].isdigit():
                    continue
                if parts[0] == b"TOK" and len(parts) == 3 and parts[2].strip().isdigit():
                    with self._lock:
                        owed = self._tokens_owed.pop(int(parts[1]), None)
                    if owed is not None:
                        _settle(owed, value=int(parts[2]))
                    continue
                if parts[0] != b"ACK":
                    continue
                try:
                    stats = json.loads(parts[2]) if len(parts) == 3 else None
                except ValueError:
                    stats = None
                with self._lock:
                    fut, ends = self._flushes.pop(int(parts[1]), (None, 0))
                    self._forget(ends)
                if fut is not None:
                    _settle(fut, value=stats if isinstance(stats, dict) else None)
        except (OSError, ValueError):
            pass
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill("the recorder closed its output but did not exit")
            code = self.proc.wait()
        self._die(self._kill_reason or f"the recorder process exited with code {code}")

    def _forget(self, ends: int) -> None:
        """Drop the exchanges whose END number is at most ``ends`` (written). Under the lock."""
        pending = self._unconfirmed
        while pending:
            xid = next(iter(pending))
            if pending[xid][0] > ends:
                break
            del pending[xid]

    def handled(self) -> int:
        """END frames the child has handled (their records written), from the watermark file. Exact
        once the child is gone; while it runs, a progress hint."""
        try:
            data = os.pread(self._watermark.fileno(), WATERMARK.size, 0)
            return WATERMARK.unpack(data)[0] if len(data) == WATERMARK.size else 0
        except (OSError, ValueError, AttributeError):  # AttributeError: no os.pread on this platform
            return 0

    def _die(self, reason: str) -> None:
        """The process is gone (reaped): record what it owed, then fail the pending flushes."""
        with self._lock:
            if self.dead:
                return
            self.dead, self.reason, self.backlog = True, reason, 0
            self._forget(self.handled())
            lost, self._unconfirmed = list(self._unconfirmed.values()), {}
            flushes, self._flushes = self._flushes, {}
            owed, self._tokens_owed = self._tokens_owed, {}
            if lost or not self._closing:
                log.warning("recording proxy: %s; %d exchange(s) recorded as metadata only", reason, len(lost))
            self._write_lost(lost, reason)
            self._queue.put(None)  # let the writer thread end
            self._watermark.close()
        for fut, _ in flushes.values():
            _settle(fut, RecorderDied(reason))
        for fut in owed.values():
            _settle(fut, RecorderDied(reason))

    def _write_lost(self, lost: list[tuple[int, dict, dict]], reason: str) -> None:
        files: dict[str, RecordFile] = {}
        for _, meta, end in lost:
            path = str(meta.get("record_path"))
            self.lost_by_path[path] = self.lost_by_path.get(path, 0) + 1
            line = encode_record(minimal_record(meta, end, error=f"recorder_died: {reason}"))
            if line is not None:
                files.setdefault(path, RecordFile(path)).append(line)
        for f in files.values():
            f.close()


class RecorderClient:
    """Starts (lazily), restarts and stops :class:`RecorderChild` processes; thread-safe."""

    def __init__(self, command: Sequence[str] | None = None, *, max_restarts: int = MAX_RESTARTS,
                 high_water: int = HIGH_WATER, low_water: int = LOW_WATER) -> None:
        self.command = list(command) if command is not None else default_command()
        self.max_restarts = max_restarts
        self.high_water, self.low_water = high_water, low_water
        self.restarts = 0
        self.unavailable: str | None = None
        """Why this client gave up (cannot start, too many deaths): exchanges are observed in-process."""
        self._child: RecorderChild | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        """A new exchange id (unique across this client's children)."""
        return next(self._ids)

    @property
    def pid(self) -> int | None:
        """The running child's pid (``None`` before the first start or after a death)."""
        child = self._child
        return child.pid if child is not None and not child.dead else None

    def congested(self) -> RecorderChild | None:
        """The running child when it is behind (:attr:`RecorderChild.congested`), else None. Never starts one."""
        child = self._child
        return child if child is not None and child.congested else None

    def child(self) -> RecorderChild | None:
        """The running child, started or restarted as needed; ``None``: observe in-process."""
        child = self._child
        if child is not None and not child.dead:
            return child
        with self._lock:
            child = self._child
            if child is not None and not child.dead:
                return child
            if self.unavailable is not None:
                return None
            if child is not None:
                if self.restarts >= self.max_restarts:
                    self.unavailable = f"the recorder process died {self.restarts + 1} times ({child.reason})"
                    log.warning("recording proxy: %s; observing in-process from now on", self.unavailable)
                    self._child = None
                    return None
                self.restarts += 1
                log.warning("recording proxy: restarting the recorder process (%d of %d)", self.restarts,
                            self.max_restarts)
            try:
                self._child = RecorderChild(self.command, high_water=self.high_water, low_water=self.low_water)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self.unavailable = f"cannot start the recorder process: {exc}"
                log.warning("recording proxy: %s; observing in-process", self.unavailable)
                self._child = None
                return None
            return self._child

    def close(self, timeout: float = 5.0) -> None:
        """Stop the child once it has written everything queued. The next use starts a new one."""
        self.release()(timeout)

    def release(self) -> Callable[[float], None]:
        """Start stopping the child (EOF once everything queued is written) and return at once with the
        function that waits until it is gone (``wait(timeout=5.0)``; see :meth:`RecorderChild.wait_closed`).
        The next use starts a new child. A caller with other work overlaps the child's exit with it, and must
        call the function before relying on the records of exchanges it did not flush itself."""
        with self._lock:
            child, self._child = self._child, None
        if child is None:
            return _nothing_to_wait
        child.begin_close()
        return child.wait_closed


def _nothing_to_wait(timeout: float = 5.0) -> None:
    return None


_CLIENT: RecorderClient | None = None
_CLIENT_LOCK = threading.Lock()
_AT_EXIT = False


def get_recorder() -> RecorderClient:
    """The process-wide recorder client (created on first call; its process starts on first use)."""
    global _CLIENT, _AT_EXIT
    client = _CLIENT
    if client is not None:
        return client
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = RecorderClient()
            if not _AT_EXIT:
                atexit.register(close_recorder)
                _AT_EXIT = True
        return _CLIENT


def prefetch_recorder() -> threading.Thread:
    """Start the process-wide recorder's process now, on a thread (returned, started): a command that will run
    proxies calls this before it loads its plugins and specs, so the recorder's interpreter starts (some 50 ms
    of CPU) beside that loading, on a core it leaves idle, instead of beside the run's first agent. The first
    proxy then finds it running (:meth:`RecorderClient.child`: one process, whoever asks first); if it cannot
    start, the first proxy's own attempt says why, as without this."""
    def start() -> None:
        try:
            get_recorder().child()
        except Exception:  # noqa: BLE001 - the first proxy tries again and observes in-process if it must
            pass

    thread = threading.Thread(target=start, name="gripprobe-recorder-start", daemon=True)
    thread.start()
    return thread


def close_recorder(timeout: float = 5.0) -> None:
    """Stop the process-wide recorder after it has written every record queued so far (call it once
    no proxy is running, e.g. at the end of a run). A later proxy starts a new one."""
    release_recorder()(timeout)


def release_recorder() -> Callable[[float], None]:
    """:func:`close_recorder` in two steps: start stopping the process-wide recorder now (a later proxy
    starts a new one) and return the function that waits until it is gone (``wait(timeout=5.0)``). The
    runner overlaps the recorder's exit with writing the run's reports; every phase has already flushed its
    own records by then, so the wait only reaps the process (and records what a dying one owed)."""
    global _CLIENT
    with _CLIENT_LOCK:
        client, _CLIENT = _CLIENT, None
    return client.release() if client is not None else _nothing_to_wait

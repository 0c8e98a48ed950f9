"""Run one agent process: own process group, hard timeout, capped capture, honest classification.

Nothing here blocks the event loop (which relays every proxied model call of every case running at once):
the process is started in a worker thread, its stdout and stderr are copied to their files by a thread
each (at most ``cap_bytes`` kept, the rest read and dropped), its stdin is fed by another; those threads
are kept for the run and reused (:class:`_Copiers`). The loop learns of the child's exit at once from a
pidfd (``os.pidfd_open``, readable when the process ends: no polling; a kernel without it falls back to
``waitpid`` with ``WNOHANG`` and a short backoff), and of the end of each capture from the capture thread
itself. A phase's ``duration_s`` is taken when the exit is seen, before the pipes are drained.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Awaitable, Callable

from ..models.results import ProcessResult
from ..timeutil import utc_now_iso

log = logging.getLogger(__name__)

#: Default cap on each captured stream (bytes). Beyond it output is dropped and marked truncated.
DEFAULT_CAPTURE_CAP = 8 * 1024 * 1024
#: After SIGTERM, how long the group gets before SIGKILL.
KILL_GRACE_S = 2.0
#: After the agent exits, how long we keep reading pipes a straggler may still hold open.
DRAIN_AFTER_EXIT_S = 1.0
#: Read size of the capture threads.
CHUNK = 65536


#: Every unsandboxed agent process gets this variable with a fresh random value; its descendants inherit
#: it, so the whole tree can be found and killed even where it left the process group (setsid) or was
#: orphaned. (A sandboxed phase needs none: its PID namespace ends with it.)
TREE_TOKEN_VAR = "GRIPPROBE_PROCESS_TREE"


def _tree_pids(token: str) -> list[int]:
    """PIDs whose environment carries ``token`` (Linux /proc; empty elsewhere)."""
    needle = f"{TREE_TOKEN_VAR}={token}".encode()
    me = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def _kill_tree(pgid: int, token: str | None, sig: int) -> None:
    """Signal the process group, and (unsandboxed) every process carrying the tree token. Blocking: /proc."""
    _killpg(pgid, sig)
    if token is None:  # sandboxed: the PID namespace ends with bwrap, nothing to sweep
        return
    for pid in _tree_pids(token):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


#: After a session ends, how long the agent gets to show it was exiting anyway (its stdout closed as it left).
SESSION_SETTLE_S = 0.2
#: A session's reader holds at most this much of one line (an ACP message with a big tool result).
SESSION_LINE_LIMIT = 64 * 1024 * 1024

Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""A conversation over the agent's stdout (reader) and stdin (writer) while it runs (runner/phase.py makes
one from the driver's :class:`~gripprobe_core.phase.AgentSession`)."""


class _Tee:
    """Hands what the stdout capture keeps to a session's reader, on the loop's thread; EOF once the stream
    ends or the capture cap is reached (what is dropped is dropped for the session too)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
        self.loop, self.reader, self.ended = loop, reader, False

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass

    def feed(self, chunk: bytes) -> None:
        if not self.ended:
            self._call(self.reader.feed_data, chunk)

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self._call(self.reader.feed_eof)


class _Copiers:
    """Daemon threads kept for the blocking copies (a phase's stdout and stderr captures, its stdin): a copy
    goes to a thread already waiting, and a thread starts only when none is free, so a run keeps as many as
    its phases ever copied at once. A thread started per stream cost each phase two thread starts, during which
    the loop waited (~1.3 ms each while agents ran beside it, measured in a 48-case run).

    A copy never raises (it records its own failure); one that did is logged and its thread goes on."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a copy, less those promised to copies already queued

    def submit(self, copy: Callable[[], None]) -> None:
        with self._lock:
            free = self._idle > 0
            if free:
                self._idle -= 1
        self._jobs.put(copy)
        if not free:
            threading.Thread(target=self._serve, name="gripprobe-copy", daemon=True).start()

    def _serve(self) -> None:
        while True:
            copy = self._jobs.get()
            try:
                copy()
            except Exception:  # noqa: BLE001 - the copy sets its own error; this thread serves the next one
                log.exception("a capture copy failed")
            with self._lock:
                self._idle += 1

    def _forked(self) -> None:
        """In a forked child no thread of the parent runs: nothing is idle, nothing queued is served."""
        self.__init__()  # type: ignore[misc]


_COPIERS = _Copiers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_COPIERS._forked)


@dataclass
class _Capture:
    """One stream copied to a file by a copier thread: the first ``cap`` bytes kept, the rest dropped."""

    source: IO[bytes]
    path: Path
    cap: int
    tee: _Tee | None = None
    on_done: Callable[[], None] | None = None
    """Called from the capture thread when it ends (to wake the loop)."""
    written: int = 0
    truncated: bool = False
    error: str | None = None
    finished: bool = False
    """Set by the thread as it ends: everything it will ever copy is copied and its pipe is closed."""

    def start(self) -> None:
        _COPIERS.submit(self._copy)

    def _copy(self) -> None:
        try:
            with open(self.path, "wb") as out:
                while True:
                    chunk = self.source.read1(CHUNK) if hasattr(self.source, "read1") else self.source.read(CHUNK)
                    if not chunk:
                        return
                    room = self.cap - self.written
                    if room > 0:
                        part = chunk[:room]
                        out.write(part)
                        out.flush()
                        self.written += len(part)
                        if self.tee is not None:
                            self.tee.feed(part)
                    if len(chunk) > max(room, 0):
                        self.truncated = True
                        if self.tee is not None:
                            self.tee.end()
        except (OSError, ValueError) as exc:  # ValueError: the pipe was closed under us (abandoned straggler)
            if self.error is None and not isinstance(exc, ValueError):
                self.error = f"capture failed: {exc}"
        finally:
            if self.tee is not None:
                self.tee.end()
            try:
                self.source.close()
            except OSError:
                pass
            self.finished = True
            if self.on_done is not None:
                self.on_done()

    @property
    def done(self) -> bool:
        return self.finished


def _feed(stdin: IO[bytes], data: bytes) -> None:
    try:
        stdin.write(data)
        stdin.flush()
    except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass


#: How often a ``stop()`` callback (a spent token budget) is asked while the agent runs.
STOP_CHECK_S = 0.05


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd on this kernel or Python: the polling fallback
        return None


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float,
                     stop: Callable[[], bool] | None = None) -> bool:
    """Wait for the child itself to exit (a grandchild holding its pipes does not delay this): woken by
    its pidfd the moment it ends. Returns False on timeout, or as soon as ``stop()`` says the harness wants
    it stopped (asked every ``STOP_CHECK_S``)."""
    if proc.poll() is not None:
        return True
    deadline = time.monotonic() + timeout
    fd = _pidfd(proc.pid)
    if fd is None:
        return await _poll_exit(proc, deadline, stop)
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, readable)
    try:
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop()):
                return False
            try:
                await asyncio.wait_for(asyncio.shield(ended), min(left, STOP_CHECK_S) if stop else left)
            except asyncio.TimeoutError:
                pass
        return True
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _poll_exit(proc: subprocess.Popen[bytes], deadline: float, stop: Callable[[], bool] | None) -> bool:
    delay = 0.001
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop()):
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.01)
    return True


def _hear_note(gate: Gate, noted: list[tuple[float, str]], on_exit: Callable[[], None] | None) -> None:
    """Listen on the gate's exit note: at its byte, the agent's end is noted (``noted``) and ``on_exit``
    called at once, bwrap's exit still to come; at its end without one (the init never started the agent, or
    died), nothing: bwrap's exit is the agent's end, as without a note."""
    fd = gate.note_fd
    if fd < 0:
        return
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            got = os.read(fd, 1)
        except BlockingIOError:
            return
        except OSError:
            got = b""
        loop.remove_reader(fd)
        if got and not noted:
            noted.append((time.monotonic(), utc_now_iso()))
            if on_exit is not None:
                on_exit()

    loop.add_reader(fd, readable)


def _stop_hearing(gate: Gate) -> None:
    if gate.note_fd >= 0:
        asyncio.get_running_loop().remove_reader(gate.note_fd)
    gate.close_note()


class _AllDone:
    """Wakes the loop when every capture thread has ended (they call :meth:`one_done` from their thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.event = loop, asyncio.Event()

    def one_done(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.event.set)
        except RuntimeError:  # the loop is closed
            pass


async def _wait_threads(captures: list[_Capture], timeout: float, woken: _AllDone | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while not all(c.done for c in captures):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if woken is None:
            await asyncio.sleep(min(0.01, left))
            continue
        woken.event.clear()
        if all(c.done for c in captures):
            break
        try:
            await asyncio.wait_for(woken.event.wait(), left)
        except asyncio.TimeoutError:
            pass
    return True


async def _terminate_tree(proc: subprocess.Popen[bytes], pgid: int, token: str | None) -> None:
    """SIGTERM the whole tree, then SIGKILL whatever is left after a grace period."""
    await asyncio.to_thread(_kill_tree, pgid, token, signal.SIGTERM)
    if not await _wait_exit(proc, KILL_GRACE_S):
        await asyncio.to_thread(_kill_tree, pgid, token, signal.SIGKILL)
        await _wait_exit(proc, KILL_GRACE_S)
    await asyncio.to_thread(_kill_tree, pgid, token, signal.SIGKILL)  # whatever else is left


def _spawn(argv: list[str], cwd: Path, env: dict[str, str], with_stdin: bool,
           gate: "Gate | None" = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            pass_fds=gate.passed if gate is not None else ())


class Gate:
    """The "go" of a pre-started sandbox: a pipe whose read end the sandbox's init gets (``--gate FD``,
    :meth:`.sandbox.Sandbox.wrap`) and blocks on, its bwrap, mounts and init set up, before it starts the
    agent. :meth:`release` writes the one byte it waits for; :meth:`shut` closes the pipe unwritten, and the
    init exits without starting anything. Both ends are close-on-exec: only the process spawned with it
    (``pass_fds``) gets the read end, and the init closes it before the agent starts.

    With ``exit_note``, beside it the *exit note*: a pipe whose write end the init gets too (``--exit-note FD``:
    the command line must name :attr:`note_write_fd` so, :meth:`.sandbox.Sandbox.wrap` ``exit_note``; the init
    makes it close-on-exec, so the agent never holds it) and writes one byte to the moment the agent has ended.
    The harness reads it (:attr:`note_fd`): the agent's time ends there, and the next phase may start, rather
    than after the namespace's teardown and bwrap's exit (0.35-1 ms later, traced). Only the init can write it
    (the agent cannot trace the init); bwrap's own exit still gives the status."""

    def __init__(self, exit_note: bool = False) -> None:
        self.read_fd, self._write_fd = os.pipe()
        self.note_fd, self.note_write_fd = os.pipe() if exit_note else (-1, -1)
        if exit_note:
            os.set_blocking(self.note_fd, False)
        self._read_open = True

    @property
    def passed(self) -> tuple[int, ...]:
        """The descriptors the spawned process gets (``pass_fds``)."""
        return (self.read_fd,) if self.note_write_fd < 0 else (self.read_fd, self.note_write_fd)

    def spawned(self) -> None:
        """The process holds the read end of the gate (and the write end of the note) now: the harness's
        copies are closed (the note then ends, empty, when every holder is gone)."""
        if self._read_open:
            self._read_open = False
            os.close(self.read_fd)
            if self.note_write_fd >= 0:
                os.close(self.note_write_fd)

    def close_note(self) -> None:
        """The note is read, or no longer wanted."""
        self.spawned()
        if self.note_fd >= 0:
            fd, self.note_fd = self.note_fd, -1
            os.close(fd)

    def release(self) -> None:
        """The "go": the one byte written, the gate's write end closed; the note stays open to be read."""
        if self._write_fd < 0:
            return
        try:
            os.write(self._write_fd, b"g")
        except OSError:  # the sandbox is gone already (bwrap failed): its exit says why
            pass
        self.spawned()
        fd, self._write_fd = self._write_fd, -1
        os.close(fd)

    def shut(self) -> None:
        """Given up: the gate's write end closed unwritten (the init, still waiting, exits having started
        nothing), and the note with it."""
        self.spawned()
        if self._write_fd >= 0:
            fd, self._write_fd = self._write_fd, -1
            os.close(fd)
        self.close_note()


@dataclass
class Spawned:
    """A process started by :func:`spawn_process`: held at its :class:`Gate` when it has one (the agent not
    started yet), until :meth:`run` (its "go") or :meth:`discard`. Exactly one of the two is called."""

    argv: list[str]
    proc: subprocess.Popen[bytes] | None
    """None: it could not start (``error`` says why; :meth:`run` returns ``shell_error``)."""
    error: str | None
    sandboxed: bool
    gate: Gate | None
    token: str | None
    spawned_t: float
    """When the spawn began (monotonic): an ungated process's time starts there."""
    spawned_at: str
    used: bool = False

    async def run(self, *, stdin: bytes | None, timeout_s: float, stdout_path: Path, stderr_path: Path,
                  cap_bytes: int = DEFAULT_CAPTURE_CAP, stop: tuple[Callable[[], bool], str] | None = None,
                  session: Session | None = None, session_grace_s: float = 2.0,
                  on_exit: Callable[[], None] | None = None) -> ProcessResult:
        """Release the process (through its gate: its duration, ``started_at`` and timeout start here) and
        run it to its end: see :func:`run_process`. ``on_exit`` is called (on the loop) the moment its end is
        known: its init's exit note (:class:`Gate` ``exit_note``), else its own exit seen (sandboxed: bwrap
        gone, so every process of the phase is); before its pipes are drained. ``duration_s`` ends there too."""
        if self.used:
            raise RuntimeError("a spawned process runs once")
        self.used = True
        if self.proc is None:
            await asyncio.to_thread(_touch, stdout_path, stderr_path)
            return ProcessResult(status="shell_error", error=self.error, finished_at=utc_now_iso(),
                                 duration_s=time.monotonic() - self.spawned_t, command=list(self.argv),
                                 started_at=self.spawned_at)
        return await _run_spawned(self.proc, self.argv, self.token, self.gate, self.spawned_at, self.spawned_t,
                                  stdin=stdin, timeout_s=timeout_s,
                                  stdout_path=stdout_path, stderr_path=stderr_path, cap_bytes=cap_bytes, stop=stop,
                                  session=session, session_grace_s=session_grace_s, on_exit=on_exit)

    async def discard(self) -> None:
        """Never released (the case was cancelled, failed before this phase, ended): the gate is shut, so the
        init exits having started nothing, and the process group is killed and reaped; nothing is left
        running, no descriptor kept. A no-op after :meth:`run`."""
        if self.used:
            return
        self.used = True
        if self.gate is not None:
            self.gate.shut()
        proc = self.proc
        if proc is None:
            return
        try:
            await asyncio.to_thread(_kill_tree, proc.pid, self.token, signal.SIGKILL)
            if not await _wait_exit(proc, KILL_GRACE_S):
                await asyncio.to_thread(proc.wait)  # SIGKILLed: it ends; reaped, never left a zombie
        finally:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass


async def spawn_process(argv: list[str], *, cwd: Path, env: dict[str, str], with_stdin: bool,
                        sandboxed: bool = False, gate: Gate | None = None) -> Spawned:
    """Start ``argv`` in its own session, in a worker thread; with ``gate`` (whose read end ``argv`` names:
    a sandbox's init waiting on it) the agent itself starts only at :meth:`Spawned.run`. Never raises for a
    command that cannot start: :meth:`Spawned.run` reports it. The caller runs or discards what it gets."""
    token = None if sandboxed else secrets.token_hex(8)
    if token is not None:
        env = {**env, TREE_TOKEN_VAR: token}
    started_at, t0 = utc_now_iso(), time.monotonic()
    starting = asyncio.ensure_future(asyncio.to_thread(_spawn, argv, cwd, env, with_stdin, gate))
    try:
        proc = await asyncio.shield(starting)
    except OSError as exc:
        if gate is not None:
            gate.shut()
        return Spawned(list(argv), None, f"cannot start {argv[0]!r}: {exc.strerror or exc}", sandboxed, None, token,
                       t0, started_at)
    except asyncio.CancelledError:  # the spawn itself cannot be called back: what it started is ended here
        started = await asyncio.gather(starting, return_exceptions=True)
        if gate is not None:
            gate.shut()
        if isinstance(started[0], subprocess.Popen):
            await Spawned(list(argv), started[0], None, sandboxed, None, token, t0, started_at).discard()
        raise
    if gate is not None:
        gate.spawned()
    return Spawned(list(argv), proc, None, sandboxed, gate, token, t0, started_at)


async def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None,
                      timeout_s: float, stdout_path: Path, stderr_path: Path,
                      cap_bytes: int = DEFAULT_CAPTURE_CAP, sandboxed: bool = False,
                      stop: tuple[Callable[[], bool], str] | None = None,
                      session: Session | None = None, session_grace_s: float = 2.0) -> ProcessResult:
    """Run ``argv`` in its own session and classify the outcome.

    ok: exit 0 · nonzero_exit: exit > 0 · timeout: still running at ``timeout_s`` (the whole process tree,
    grandchildren included even when they started their own session, is killed) · shell_error: could not
    start, or killed by a signal it did not get from us · harness_capture_failed: stdout/stderr could not
    be written. Stragglers left in the tree after the agent exits are killed too.

    ``sandboxed``: ``argv`` starts bwrap (runner/sandbox.py), whose PID namespace takes every process of
    the tree down with it; otherwise the tree is also found through an environment token in /proc (a
    fallback a process that scrubs its environment, ``setsid env -i``, escapes).

    ``stop``: ``(should_stop, why)``; when ``should_stop()`` turns true while the agent runs (its token
    budget is spent), the tree is stopped as at a timeout, and the result is ``timeout`` saying ``why``.

    ``session``: the harness talks to the agent (``stdin`` must be None): it gets a reader of the agent's
    stdout (what the capture keeps) and a writer to its stdin. When it returns, stdin is closed, the agent
    gets ``session_grace_s`` to exit, then its tree is stopped, and the process status is ``ok``; when it
    raises, ``shell_error`` with its message (unless the agent exited non-zero first: ``nonzero_exit``).

    The same in two steps, the spawn ahead of the start: :func:`spawn_process` with a :class:`Gate`, then
    :meth:`Spawned.run` (or :meth:`Spawned.discard`).
    """
    spawned = await spawn_process(argv, cwd=cwd, env=env, with_stdin=stdin is not None or session is not None,
                                  sandboxed=sandboxed)
    return await spawned.run(stdin=stdin, timeout_s=timeout_s, stdout_path=stdout_path, stderr_path=stderr_path,
                             cap_bytes=cap_bytes, stop=stop, session=session, session_grace_s=session_grace_s)


async def _run_spawned(proc: subprocess.Popen[bytes], argv: list[str], token: str | None, gate: Gate | None,
                       started_at: str, t0: float, *, stdin: bytes | None, timeout_s: float, stdout_path: Path, stderr_path: Path,
                       cap_bytes: int, stop: tuple[Callable[[], bool], str] | None,
                       session: Session | None, session_grace_s: float,
                       on_exit: Callable[[], None] | None = None) -> ProcessResult:
    pgid = proc.pid  # start_new_session: the child leads its own group
    assert proc.stdout is not None and proc.stderr is not None
    try:
        talk = await _open_session(proc) if session is not None else None
    except asyncio.CancelledError:
        if gate is not None:
            gate.shut()
        await _terminate_tree(proc, pgid, token)
        raise
    noted: list[tuple[float, str]] = []  # when the init said the agent had ended (monotonic, UTC)
    if gate is not None:  # the agent's time, and its timeout, start at its "go", not at the sandbox's spawn
        started_at, t0 = utc_now_iso(), time.monotonic()
        gate.release()  # first: what it writes meanwhile waits in its pipes for the captures
        _hear_note(gate, noted, on_exit)
    woken = _AllDone(asyncio.get_running_loop())
    captures = [_Capture(proc.stdout, stdout_path, cap_bytes, talk[0] if talk else None, woken.one_done),
                _Capture(proc.stderr, stderr_path, cap_bytes, on_done=woken.one_done)]
    for c in captures:
        c.start()
    if stdin is not None and proc.stdin is not None:
        _COPIERS.submit(functools.partial(_feed, proc.stdin, stdin))
    timed_out = False
    stopped_why = None
    task = asyncio.ensure_future(session(talk[0].reader, talk[1])) if session is not None and talk else None
    should_stop = stop[0] if stop else None
    until = should_stop if task is None else (lambda: task.done() or bool(should_stop and should_stop()))
    session_failed: str | None = None
    ended_by_session = False
    deadline = time.monotonic() + timeout_s
    try:
        exited = await _wait_exit(proc, timeout_s, until)
        if not exited and noted:  # the agent ended in time (its init said so); bwrap is still on its way out
            exited = await _wait_exit(proc, KILL_GRACE_S)
        if not exited and task is not None and talk is not None and task.done() \
                and not (should_stop and should_stop()):
            # The conversation is over. An agent that was leaving anyway (its stdout closed as it exited) is
            # judged by its own exit; one whose output was cut at the cap keeps running as any agent would,
            # until it exits or times out; otherwise the harness ends it (an ACP agent never exits by itself).
            exited = await _wait_exit(proc, SESSION_SETTLE_S)
            if not exited and captures[0].truncated:
                exited = await _wait_exit(proc, max(0.0, deadline - time.monotonic()), should_stop)
            elif not exited:
                ended_by_session = True
                session_failed = _session_error(task)
                await _close_writer(talk[1])
                if not await _wait_exit(proc, session_grace_s):
                    await _terminate_tree(proc, pgid, token)
                exited = True
        if not exited:
            timed_out = True
            if stop is not None and stop[0]():
                stopped_why = stop[1]
            await _terminate_tree(proc, pgid, token)
        # the agent's time ends at its end as the sandbox's init saw it, else here; draining is the harness's
        t_end, finished_at = noted[0] if noted else (time.monotonic(), utc_now_iso())
        if on_exit is not None and not noted:
            on_exit()
        if task is not None and not task.done():  # the agent left first (or timed out): the session hears EOF
            try:
                await asyncio.wait_for(asyncio.shield(task), DRAIN_AFTER_EXIT_S)
            except (asyncio.TimeoutError, Exception):
                pass
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task is not None and task.done() and not task.cancelled() and session_failed is None:
            session_failed = _session_error(task)
        if talk is not None:
            await _close_writer(talk[1])
        # The agent is gone; a straggler may still hold the pipes. Drain briefly, then kill the tree.
        drained = await _wait_threads(captures, DRAIN_AFTER_EXIT_S, woken)
        if token is None:  # sandboxed: one signal to bwrap's group, no /proc sweep: not worth a thread
            _killpg(pgid, signal.SIGKILL)
        else:
            await asyncio.to_thread(_kill_tree, pgid, token, signal.SIGKILL)
        if not drained:  # what still holds a pipe was just killed: its pipe closes, its capture thread ends
            await _wait_threads(captures, KILL_GRACE_S, woken)
    except asyncio.CancelledError:
        if task is not None:
            task.cancel()
        await _terminate_tree(proc, pgid, token)
        raise
    finally:
        if gate is not None:
            _stop_hearing(gate)
    capture_error = next((c.error for c in captures if c.error), None)
    rc = proc.returncode
    out, err = captures
    exit_code = rc if rc is not None and rc >= 0 else None
    killed_by = -rc if rc is not None and rc < 0 else None
    fields: dict[str, Any] = dict(
        exit_code=exit_code, signal=killed_by, duration_s=round(t_end - t0, 4), finished_at=finished_at,
        stdout_bytes=out.written, stderr_bytes=err.written, stdout_truncated=out.truncated,
        stderr_truncated=err.truncated, command=list(argv), started_at=started_at,
    )
    if timed_out and stopped_why:
        return ProcessResult(status="timeout", error=f"stopped by the harness: {stopped_why}", **fields)
    if timed_out:
        return ProcessResult(status="timeout", error=f"no exit after {timeout_s:g}s; process group killed", **fields)
    if capture_error:
        return ProcessResult(status="harness_capture_failed", error=capture_error, **fields)
    if ended_by_session:  # the harness ended the agent once the conversation was over: not the agent's doing
        fields["signal"] = None
        fields["exit_code"] = None
    if session_failed and (ended_by_session or rc == 0):
        if session_failed.startswith(AGENT_FAILED):  # the agent's own answer was a failure: as an exit code says
            return ProcessResult(status="nonzero_exit", error=session_failed, **fields)
        return ProcessResult(status="shell_error", error=f"session failed: {session_failed}", **fields)
    if ended_by_session:
        return ProcessResult(status="ok", **fields)
    if rc is not None and rc < 0:
        return ProcessResult(status="shell_error", error=f"killed by signal {-rc}", **fields)
    if rc == 0:
        return ProcessResult(status="ok", **fields)
    return ProcessResult(status="nonzero_exit", **fields)


async def _open_session(proc: subprocess.Popen[bytes]) -> tuple[_Tee, asyncio.StreamWriter]:
    """A reader fed by the stdout capture and a writer on the agent's stdin, for a session."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=SESSION_LINE_LIMIT, loop=loop)
    assert proc.stdin is not None
    transport, protocol = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop=loop),
                                                        proc.stdin)
    return _Tee(loop, reader), asyncio.StreamWriter(transport, protocol, None, loop)


async def _close_writer(writer: asyncio.StreamWriter) -> None:
    try:
        if not writer.is_closing():
            writer.close()
    except (OSError, RuntimeError):
        pass


def _session_error(task: "asyncio.Future[None]") -> str | None:
    """Why the session failed (its exception's message, prefixed ``agent failed: `` when the session said the
    agent failed at its task), None when it ended well."""
    if task.cancelled():
        return None
    exc = task.exception()
    if exc is None:
        return None
    why = str(exc) or type(exc).__name__
    return f"{AGENT_FAILED}{why}" if getattr(exc, "agent_failed", False) else why


AGENT_FAILED = "agent failed: "


def _touch(*paths: Path) -> None:
    for path in paths:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        except OSError:
            pass

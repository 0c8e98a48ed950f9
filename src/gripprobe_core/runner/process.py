"""Run one agent process: own process group, hard timeout, capped capture, honest classification."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ..models.results import ProcessResult
from ..timeutil import utc_now_iso

#: Default cap on each captured stream (bytes). Beyond it output is dropped and marked truncated.
DEFAULT_CAPTURE_CAP = 8 * 1024 * 1024
#: After SIGTERM, how long the group gets before SIGKILL.
KILL_GRACE_S = 2.0
#: After the agent exits, how long we keep reading pipes a straggler may still hold open.
DRAIN_AFTER_EXIT_S = 1.0


#: Every agent process gets this variable with a fresh random value; its descendants inherit it, so the
#: whole tree can be found and killed even where it left the process group (setsid) or was orphaned.
TREE_TOKEN_VAR = "GRIPPROBE_PROCESS_TREE"


def _tree_pids(token: str) -> list[int]:
    """PIDs whose environment carries ``token`` (Linux /proc; empty elsewhere)."""
    needle = f"{TREE_TOKEN_VAR}={token}".encode()
    me = os.getpid()
    found = []
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
    _killpg(pgid, sig)
    if token is None:  # sandboxed: the PID namespace ends with bwrap, nothing to sweep
        return
    for pid in _tree_pids(token):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class _Sink:
    path: Path
    cap: int
    written: int = 0
    truncated: bool = False


async def _pump(stream: asyncio.StreamReader, sink: _Sink) -> None:
    with open(sink.path, "wb") as fh:
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            room = sink.cap - sink.written
            if room > 0:
                part = chunk[:room]
                fh.write(part)
                fh.flush()
                sink.written += len(part)
            if len(chunk) > max(room, 0):
                sink.truncated = True


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_exit(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Wait for the child itself to exit. (``proc.wait()`` also waits for its pipes to close, which a
    grandchild holding stdout would delay forever.) Returns False on timeout."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while proc.returncode is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
    return True


async def _terminate_tree(proc: asyncio.subprocess.Process, pgid: int, token: str | None) -> None:
    """SIGTERM the whole tree, then SIGKILL whatever is left after a grace period."""
    _kill_tree(pgid, token, signal.SIGTERM)
    if not await _wait_exit(proc, KILL_GRACE_S):
        _kill_tree(pgid, token, signal.SIGKILL)
        await _wait_exit(proc, KILL_GRACE_S)
    _kill_tree(pgid, token, signal.SIGKILL)  # whatever else is left


async def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None,
                      timeout_s: float, stdout_path: Path, stderr_path: Path,
                      cap_bytes: int = DEFAULT_CAPTURE_CAP, sandboxed: bool = False) -> ProcessResult:
    """Run ``argv`` in its own session and classify the outcome.

    ok: exit 0 · nonzero_exit: exit > 0 · timeout: still running at ``timeout_s`` (the whole process tree,
    grandchildren included even when they started their own session, is killed) · shell_error: could not start, or killed by a signal it did not get
    from us · harness_capture_failed: stdout/stderr could not be written.
    Stragglers left in the tree after the agent exits are killed too.

    ``sandboxed``: ``argv`` starts bwrap (runner/sandbox.py), whose PID namespace takes every process of
    the tree down with it; otherwise the tree is also found through an environment token in /proc (a
    fallback a process that scrubs its environment, ``setsid env -i``, escapes).
    """
    token = None if sandboxed else secrets.token_hex(8)
    if token is not None:
        env = {**env, TREE_TOKEN_VAR: token}
    started_at = utc_now_iso()
    t0 = time.monotonic()
    base = dict(command=list(argv), started_at=started_at)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=str(cwd), env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        for p in (stdout_path, stderr_path):
            _touch(p)
        return ProcessResult(status="shell_error", error=f"cannot start {argv[0]!r}: {exc.strerror or exc}",
                             finished_at=utc_now_iso(), duration_s=time.monotonic() - t0, **base)
    pgid = proc.pid  # start_new_session: the child leads its own group
    out, err = _Sink(stdout_path, cap_bytes), _Sink(stderr_path, cap_bytes)
    pumps = [asyncio.ensure_future(_pump(proc.stdout, out)), asyncio.ensure_future(_pump(proc.stderr, err))]
    feeder = None
    if stdin is not None:
        feeder = asyncio.ensure_future(_feed(proc, stdin))
    timed_out = False
    try:
        if not await _wait_exit(proc, timeout_s):
            timed_out = True
            await _terminate_tree(proc, pgid, token)
        # The agent is gone; a straggler may still hold the pipes. Drain briefly, then kill the tree.
        done, pending = await asyncio.wait(pumps, timeout=DRAIN_AFTER_EXIT_S)
        _kill_tree(pgid, token, signal.SIGKILL)
        if pending:
            done, pending = await asyncio.wait(pumps, timeout=KILL_GRACE_S)
            for p in pending:
                p.cancel()
    except asyncio.CancelledError:
        await _terminate_tree(proc, pgid, token)
        for p in pumps:
            p.cancel()
        raise
    finally:
        if feeder is not None and not feeder.done():
            feeder.cancel()
    capture_error = None
    for p in pumps:
        if p.done() and not p.cancelled() and p.exception() is not None:
            capture_error = f"capture failed: {p.exception()}"
    rc = proc.returncode
    fields = dict(
        exit_code=rc if rc is not None and rc >= 0 else None,
        signal=-rc if rc is not None and rc < 0 else None,
        duration_s=round(time.monotonic() - t0, 4), finished_at=utc_now_iso(),
        stdout_bytes=out.written, stderr_bytes=err.written,
        stdout_truncated=out.truncated, stderr_truncated=err.truncated, **base,
    )
    if timed_out:
        return ProcessResult(status="timeout", error=f"no exit after {timeout_s:g}s; process group killed", **fields)
    if capture_error:
        return ProcessResult(status="harness_capture_failed", error=capture_error, **fields)
    if rc is not None and rc < 0:
        return ProcessResult(status="shell_error", error=f"killed by signal {-rc}", **fields)
    if rc == 0:
        return ProcessResult(status="ok", **fields)
    return ProcessResult(status="nonzero_exit", **fields)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        try:
            proc.stdin.close()
        except Exception:  # pragma: no cover
            pass


def _touch(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    except OSError:
        pass

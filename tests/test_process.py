"""The process layer: real child processes, real signals."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from gripprobe_core.runner.process import run_process


def _run(tmp_path: Path, code: str, timeout: float = 10, cap: int = 1 << 20, stdin: bytes | None = None):
    return asyncio.run(run_process(
        [sys.executable, "-c", code], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, stdin=stdin,
        timeout_s=timeout, stdout_path=tmp_path / "out", stderr_path=tmp_path / "err", cap_bytes=cap))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_ok_and_capture(tmp_path):
    res = _run(tmp_path, "import sys; print('hello'); print('oops', file=sys.stderr)")
    assert res.status == "ok" and res.exit_code == 0
    assert (tmp_path / "out").read_text() == "hello\n"
    assert (tmp_path / "err").read_text() == "oops\n"


def test_nonzero_exit(tmp_path):
    res = _run(tmp_path, "raise SystemExit(3)")
    assert res.status == "nonzero_exit" and res.exit_code == 3


def test_cannot_start_is_shell_error(tmp_path):
    res = asyncio.run(run_process(["/nonexistent/agent"], cwd=tmp_path, env={}, stdin=None, timeout_s=5,
                                  stdout_path=tmp_path / "o", stderr_path=tmp_path / "e"))
    assert res.status == "shell_error" and "cannot start" in res.error


def test_killed_by_signal_is_shell_error(tmp_path):
    res = _run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert res.status == "shell_error" and res.signal == 11


def test_stdin_is_fed_then_closed(tmp_path):
    res = _run(tmp_path, "import sys; print(sys.stdin.read().upper())", stdin=b"prompt")
    assert res.status == "ok" and (tmp_path / "out").read_text() == "PROMPT\n"


def test_capture_cap_truncates(tmp_path):
    res = _run(tmp_path, "import sys; sys.stdout.write('x' * 100000)", cap=1000)
    assert res.status == "ok" and res.stdout_truncated and (tmp_path / "out").stat().st_size == 1000


def test_timeout_kills_forked_sleeping_grandchild(tmp_path):
    """An agent that forks a sleeping grandchild and never exits: both die, status TIMEOUT."""
    code = (
        "import os, subprocess, sys, time\n"
        "g = subprocess.Popen(['sleep', '300'])\n"
        "open('grandchild.pid', 'w').write(str(g.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(300)\n"
    )
    t0 = time.monotonic()
    res = _run(tmp_path, code, timeout=1.5)
    assert res.status == "timeout"
    assert time.monotonic() - t0 < 10
    gpid = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(gpid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(gpid), "grandchild survived the timeout"
    assert (tmp_path / "out").read_text() == "started\n"


def test_straggler_holding_stdout_does_not_hang_an_exited_agent(tmp_path):
    code = "import subprocess; subprocess.Popen(['sleep', '300']); print('bye')"
    t0 = time.monotonic()
    res = _run(tmp_path, code, timeout=30)
    assert res.status == "ok"
    assert time.monotonic() - t0 < 8


def test_the_agents_time_ends_at_its_exit_not_when_a_straggler_lets_go_of_its_pipes(tmp_path):
    """The exit is seen from a pidfd the moment the agent ends; the drain of a pipe a straggler holds (here
    a second, until the harness kills it) is the harness's time, not the agent's."""
    from gripprobe_core.runner.process import DRAIN_AFTER_EXIT_S, _pidfd

    fd = _pidfd(os.getpid())
    if fd is None:
        assert os.environ.get("CI") != "true", "no pidfd_open on this kernel: exits are polled"
    else:
        os.close(fd)
    code = "import subprocess; subprocess.Popen(['sleep', '300']); print('bye')"
    t0 = time.monotonic()
    res = _run(tmp_path, code, timeout=30)
    waited = time.monotonic() - t0
    assert res.status == "ok" and waited >= DRAIN_AFTER_EXIT_S  # the harness drained the held pipe
    assert res.duration_s < waited - DRAIN_AFTER_EXIT_S / 2, (res.duration_s, waited)


@pytest.mark.parametrize("timeout", [0.5])
def test_timeout_on_sigterm_ignoring_agent(tmp_path, timeout):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('x', flush=True); time.sleep(60)"
    res = _run(tmp_path, code, timeout=timeout)
    assert res.status == "timeout"


def test_timeout_kills_grandchild_that_left_the_process_group(tmp_path):
    """Agents start tools in new sessions (setsid); the kill must still reach them."""
    code = (
        "import subprocess, time\n"
        "g = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "open('grandchild.pid', 'w').write(str(g.pid))\n"
        "time.sleep(300)\n"
    )
    res = _run(tmp_path, code, timeout=1.0)
    assert res.status == "timeout"
    gpid = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(gpid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(gpid)


def test_orphaned_daemon_is_killed_after_a_clean_exit(tmp_path):
    code = (
        "import subprocess\n"
        "g = subprocess.Popen(['sleep', '300'], start_new_session=True, stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n"
        "open('daemon.pid', 'w').write(str(g.pid))\n"
    )
    res = _run(tmp_path, code)
    assert res.status == "ok"
    gpid = int((tmp_path / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(gpid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(gpid)


# ------------------------------------------------------------------------------------ sessions (stdin/stdout)

ECHO_AGENT = ("import sys\n"
              "for line in sys.stdin:\n"
              "    sys.stdout.write('echo ' + line); sys.stdout.flush()\n"
              "    if line.strip() == 'bye': break\n"
              "import time; time.sleep(60)\n")  # an ACP agent does not exit when the talk is over


def talk(tmp_path, code, session, timeout_s=20, cap=None):
    kw = {"cap_bytes": cap} if cap else {}
    return asyncio.run(run_process([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), stdin=None,
                                   timeout_s=timeout_s, stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
                                   session=session, session_grace_s=0.5, **kw))


def test_a_session_talks_and_the_harness_ends_the_agent_when_it_is_done(tmp_path):
    heard = []

    async def session(reader, writer):
        for word in ("hello", "bye"):
            writer.write(word.encode() + b"\n")
            await writer.drain()
            heard.append((await reader.readline()).decode())

    t0 = time.monotonic()
    res = talk(tmp_path, ECHO_AGENT, session)
    assert heard == ["echo hello\n", "echo bye\n"]
    assert res.status == "ok" and res.signal is None and res.error is None, res
    assert time.monotonic() - t0 < 15  # not the agent's 60 s sleep, nor the timeout
    assert (tmp_path / "out").read_text() == "echo hello\necho bye\n"  # the capture has what the session read


def test_a_session_that_fails_is_shell_error_with_its_reason(tmp_path):
    from gripprobe_core.phase import SessionError

    async def session(reader, writer):
        raise SessionError("the agent spoke no protocol")

    res = talk(tmp_path, ECHO_AGENT, session)
    assert res.status == "shell_error" and res.error == "session failed: the agent spoke no protocol"


def test_an_agent_that_leaves_first_ends_the_session_with_eof(tmp_path):
    seen = []

    async def session(reader, writer):
        while line := await reader.readline():
            seen.append(line)

    res = talk(tmp_path, "print('one'); import sys; sys.exit(3)", session)
    assert seen == [b"one\n"] and res.status == "nonzero_exit" and res.exit_code == 3


def test_a_flood_past_the_capture_cap_reaches_the_session_as_eof(tmp_path):
    got = []

    async def session(reader, writer):
        while chunk := await reader.read(65536):
            got.append(len(chunk))

    res = talk(tmp_path, "import sys\nwhile True: sys.stdout.write('x' * 65536)", session, timeout_s=10, cap=1 << 20)
    assert sum(got) == 1 << 20 and res.stdout_truncated  # the session read exactly what was kept, then EOF
    assert res.status == "timeout"  # the flooder never stops on its own


def test_a_session_that_hangs_is_ended_by_the_timeout(tmp_path):
    async def session(reader, writer):
        await asyncio.sleep(3600)

    res = talk(tmp_path, ECHO_AGENT, session, timeout_s=2)
    assert res.status == "timeout"


def test_a_session_that_says_the_agent_failed_is_nonzero_exit(tmp_path):
    from gripprobe_core.phase import SessionError

    async def session(reader, writer):
        raise SessionError("the prompt was answered with an error: HTTP 500", agent_failed=True)

    res = talk(tmp_path, ECHO_AGENT, session)
    assert res.status == "nonzero_exit" and res.exit_code is None
    assert res.error == "agent failed: the prompt was answered with an error: HTTP 500"


# ------------------------------------------------------------------------------- the copier threads

def _copiers() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "gripprobe-copy"]


def test_phases_one_after_another_reuse_the_same_copier_threads(tmp_path):
    async def phases(n: int) -> list:
        seen = []
        for i in range(n):
            res = await run_process([sys.executable, "-c", "import sys; print(sys.stdin.read())"], cwd=tmp_path,
                                    env={"PATH": os.environ["PATH"]}, stdin=f"phase {i}".encode(), timeout_s=10,
                                    stdout_path=tmp_path / f"out{i}", stderr_path=tmp_path / f"err{i}")
            assert res.status == "ok" and (tmp_path / f"out{i}").read_text() == f"phase {i}\n"
            seen.append({t.native_id for t in _copiers()})
        return seen

    seen = asyncio.run(phases(6))
    # the first phase found (or started) its three copiers; every later phase used threads already there
    assert len(seen[0]) >= 3 and all(s == seen[0] for s in seen[1:]), seen


def test_a_copy_that_raises_is_logged_and_its_thread_serves_the_next(caplog):
    import threading

    from gripprobe_core.runner.process import _Copiers

    copiers, done = _Copiers(), threading.Event()

    def fail() -> None:
        raise RuntimeError("broken copy")

    copiers.submit(fail)
    for _ in range(200):  # the failed copy's thread is idle again
        if copiers._idle == 1:
            break
        time.sleep(0.01)
    copiers.submit(done.set)
    assert done.wait(5) and copiers._idle <= 1
    assert "a capture copy failed" in caplog.text and "broken copy" in caplog.text


def test_a_forked_child_copies_with_threads_of_its_own(tmp_path):
    _run(tmp_path, "print('warm')")  # the parent has idle copiers now
    assert _copiers()
    pid = os.fork()
    if pid == 0:  # the child: its parent's copiers are not here; its copies must still run
        import signal

        code = 1
        signal.alarm(20)  # a copy never served would hang the child: it dies of SIGALRM instead
        try:
            (tmp_path / "child").mkdir()
            res = _run(tmp_path / "child", "print('from the child')")
            code = 0 if res.status == "ok" and (tmp_path / "child" / "out").read_text() == "from the child\n" else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

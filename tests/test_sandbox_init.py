"""The sandbox's init, both of them: ``sandbox_init.c`` as the harness compiles it and the Python fallback
``sandbox_init.py``, against the same tests (every test runs once per init).

Most tests run the init directly, outside bwrap (its contract does not need a namespace): statuses and
signal deaths, the one-line exit 125 when it cannot set up, the command's directory and signal state, and the
relay under hostile use (both directions and half-closes, many connections, a flood past its descriptors, a
reader that never reads, a harness socket whose backlog is full, nothing behind the socket). The tests at the
end run it as PID 1 in the real sandbox: signals at PID 1, orphans, a storm of processes at the agent's exit
and one at its timeout. Under CI=true a
missing C compiler or bwrap fails them; elsewhere they skip."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gripprobe_core.runner import sandbox_build
from gripprobe_core.runner.sandbox import INIT, Sandbox, resolve_sandbox

CI = os.environ.get("CI") == "true"
INITS = ("compiled", "python")


@pytest.fixture(scope="module")
def compiled() -> sandbox_build.CompiledInit:
    built, why = sandbox_build.compiled_init()
    if built is None:
        if CI:
            pytest.fail(f"the compiled sandbox init is required under CI=true: {why}")
        pytest.skip(f"no compiled sandbox init here: {why}")
    return built


@pytest.fixture(params=INITS)
def init(request) -> list[str]:
    """The init's argv up to its own arguments."""
    if request.param == "compiled":
        return [str(request.getfixturevalue("compiled").path)]
    return [sys.executable, "-I", "-S", str(INIT)]


def _run(init: list[str], *args: str, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*init, *args], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)


# ------------------------------------------------------------------------------------------ statuses

def test_the_commands_status_and_signal_deaths_come_back(init, tmp_path):
    for script, want in (("exit 0", 0), ("exit 3", 3), ("exit 255", 255), ("kill -TERM $$", 128 + signal.SIGTERM),
                         ("kill -KILL $$", 128 + signal.SIGKILL), ("kill -SEGV $$", 128 + signal.SIGSEGV)):
        proc = _run(init, "-C", str(tmp_path), "--", "/bin/sh", "-c", script)
        assert proc.returncode == want, (script, proc.returncode, proc.stderr)
    proc = _run(init, "--", "/nonexistent/agent")
    assert proc.returncode == 127 and b"cannot run" in proc.stderr and b"/nonexistent/agent" in proc.stderr, proc


def test_what_cannot_be_set_up_is_exit_125_and_one_line(init, tmp_path):
    marker = tmp_path / "ran"
    cmd = ["--", "/bin/sh", "-c", f"touch {marker}"]
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    busy = taken.getsockname()[1]
    cases = [
        ("no command", []),
        ("no command", ["--"]),
        ("bad --forward", ["--forward", "x=/s", *cmd]),
        ("bad --forward", ["--forward", "0=/s", *cmd]),
        ("bad --forward", ["--forward", "70000=/s", *cmd]),
        ("bad --forward", ["--forward", "8080=", *cmd]),
        ("bad --forward", ["--forward", "8080", *cmd]),
        ("unexpected argument", ["--bogus", *cmd]),
        ("unexpected argument", ["-C"]),
        (f"cannot listen on 127.0.0.1:{busy}", ["--forward", f"{busy}={tmp_path}/s.sock", *cmd]),
        ("bad --gate", ["--gate", "x", *cmd]),
        ("bad --gate", ["--gate", "2", *cmd]),  # never stdin, stdout or stderr
        ("bad --gate", ["--gate", "987", *cmd]),  # not open
        ("unexpected argument", ["--gate"]),
        ("bad --exit-note", ["--exit-note", "x", *cmd]),
        ("bad --exit-note", ["--exit-note", "1", *cmd]),  # never stdin, stdout or stderr
        ("bad --exit-note", ["--exit-note", "987", *cmd]),  # not open
        ("unexpected argument", ["--exit-note"]),
    ]
    try:
        for want, args in cases:
            proc = _run(init, *args)
            err = proc.stderr.decode()
            assert proc.returncode == 125, (args, proc.returncode, err)
            assert err.count("\n") == 1 and err.startswith("gripprobe sandbox init: ") and want in err, (args, err)
            assert not marker.exists(), args
    finally:
        taken.close()


def test_the_command_runs_in_its_directory_with_pwd(init, tmp_path):
    code = "import os; print(os.getcwd()); print(os.environ['PWD'])"
    proc = _run(init, "-C", str(tmp_path), "--", sys.executable, "-c", code, env={"PWD": "/", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split() == [str(tmp_path), str(tmp_path)]


def test_the_command_gets_default_signal_dispositions_and_no_blocked_signal(init, tmp_path):
    """Whatever the init was started with (signals ignored, signals blocked), the command starts fresh."""
    def hostile_parent_state() -> None:
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGHUP, signal.SIGCHLD})

    proc = _run(init, "--", "/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status", preexec_fn=hostile_parent_state)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split() == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"], proc.stdout


def _with_pipe(init: list[str], tmp_path: Path, script: str, option: str, fd: int) -> tuple[subprocess.Popen, int]:
    """The init started with ``option`` naming descriptor ``fd`` (one a fresh command would not open itself):
    the read end of a pipe for ``--gate``, its write end for ``--exit-note``. Returns the init and the end the
    harness keeps."""
    r, w = os.pipe()
    given, kept = (r, w) if option == "--gate" else (w, r)
    os.dup2(given, fd, inheritable=False)
    os.close(given)
    try:
        proc = subprocess.Popen([*init, option, str(fd), "-C", str(tmp_path), "--", "/bin/sh", "-c", script],
                                pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        os.close(fd)
    return proc, kept


def _gated(init: list[str], tmp_path: Path, script: str) -> tuple[subprocess.Popen, int]:
    """The init started with a gate at descriptor 57; the write end returned."""
    return _with_pipe(init, tmp_path, script, "--gate", 57)


def test_a_gate_holds_the_command_until_go_and_the_command_never_gets_it(init, tmp_path):
    marker = tmp_path / "ran"
    proc, w = _gated(init, tmp_path, f"ls /proc/self/fd > {marker}")
    try:
        time.sleep(0.3)
        assert proc.poll() is None and not marker.exists()  # set up, waiting
        os.write(w, b"g")
    finally:
        os.close(w)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "57" not in marker.read_text().split(), marker.read_text()


def test_a_gate_shut_unreleased_ends_the_init_silently_with_nothing_started(init, tmp_path):
    marker = tmp_path / "ran"
    proc, w = _gated(init, tmp_path, f"touch {marker}")
    time.sleep(0.2)
    os.close(w)  # the harness gave the phase up
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 125 and err == b"" and out == b"", (proc.returncode, err)
    assert not marker.exists()


def _noted(init: list[str], tmp_path: Path, script: str) -> tuple[subprocess.Popen, int]:
    """The init started with an exit note at descriptor 58; the read end returned."""
    return _with_pipe(init, tmp_path, script, "--exit-note", 58)


def test_the_exit_note_comes_when_the_command_ends_and_the_command_never_holds_it(init, tmp_path):
    """One byte on the note as the command ends, before the init's own exit; the command does not have the
    note's descriptor (it cannot end its own clock), and a straggler it left does not delay the note."""
    fds = tmp_path / "fds"
    proc, r = _noted(init, tmp_path, f"ls /proc/self/fd > {fds}; (sleep 3 > /dev/null 2>&1 &) ; exit 4")
    try:
        assert os.read(r, 1) == b"x"
        assert os.read(r, 1) == b""  # then the init is gone: no holder left (the command never had it)
    finally:
        os.close(r)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert "58" not in fds.read_text().split(), fds.read_text()


def test_an_exit_note_nobody_reads_changes_nothing(init, tmp_path):
    proc, r = _noted(init, tmp_path, "exit 3")
    os.close(r)  # the harness gave up reading: the write fails (no SIGPIPE death), the status comes back
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3 and err == b"", (proc.returncode, err)


# ---------------------------------------------------------------------------------------------- relay

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Harness:
    """The harness's side of a forward: a Unix socket, each connection served by ``handler`` in a thread."""

    def __init__(self, path: Path, handler, *, backlog: int = 128, accept_after: float = 0.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(backlog)
        self.handler, self.accept_after = handler, accept_after
        self.served: list[object] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        time.sleep(self.accept_after)
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.served.append(self.handler(conn))
            except OSError as exc:
                self.served.append(exc)

    def close(self) -> None:
        self.sock.close()


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _echo_reversed(conn: socket.socket) -> bytes:
    data = _read_all(conn)
    conn.sendall(data[::-1])
    return data


class Relay:
    """The init run with one ``--forward`` to ``sock`` and a command that waits: the agent's side is this test."""

    def __init__(self, init: list[str], sock: Path, *, nofile: int | None = None) -> None:
        self.port = _free_port()

        def limits() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

        self.proc = subprocess.Popen([*init, "--forward", f"{self.port}={sock}", "--", "/bin/sleep", "600"],
                                     stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limits)
        deadline = time.monotonic() + 10
        while not self._listening():
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "the init never listened"
            time.sleep(0.01)

    def _listening(self) -> bool:
        want = f":{self.port:04X} "
        with open(f"/proc/{self.proc.pid}/net/tcp") as fh:
            return any(want in line and line.split()[3] == "0A" for line in fh)  # 0A: LISTEN

    def connect(self, timeout: float = 20) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return s

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()


@pytest.fixture
def relay_of(init, tmp_path):
    made: list[object] = []

    def make(handler, **kw):
        sock = tmp_path / f"{len(made)}.sock"
        harness = Harness(sock, handler, **{k: v for k, v in kw.items() if k in ("backlog", "accept_after")})
        relay = Relay(init, sock, nofile=kw.get("nofile"))
        made.extend([harness, relay])
        return harness, relay

    yield make
    for thing in made:
        thing.close()  # type: ignore[attr-defined]


def test_both_directions_and_a_half_close_from_the_agent(relay_of):
    """8 MiB up, the agent's half-close passed on (the harness reads to EOF), 8 MiB back, then EOF."""
    harness, relay = relay_of(_echo_reversed)
    body = os.urandom(8 << 20)
    with relay.connect() as s:
        s.sendall(body)
        s.shutdown(socket.SHUT_WR)
        back = _read_all(s)
    assert hashlib.sha256(back).digest() == hashlib.sha256(body[::-1]).digest()
    assert relay.alive()


def test_a_half_close_from_the_harness_side(relay_of):
    """The harness answers and shuts its side first; the agent reads EOF and can still send on its own."""
    def answer_first(conn: socket.socket) -> bytes:
        conn.sendall(b"hello")
        conn.shutdown(socket.SHUT_WR)
        return _read_all(conn)

    harness, relay = relay_of(answer_first)
    with relay.connect() as s:
        assert _read_all(s) == b"hello"
        s.sendall(b"after your EOF")
        s.shutdown(socket.SHUT_WR)
        assert _read_all(s) == b""
    deadline = time.monotonic() + 10
    while not harness.served and time.monotonic() < deadline:
        time.sleep(0.01)
    assert harness.served == [b"after your EOF"]


def test_many_connections_at_once(relay_of):
    harness, relay = relay_of(_echo_reversed)
    socks = [relay.connect() for _ in range(300)]
    try:
        for i, s in enumerate(socks):
            s.sendall(f"connection {i} ".encode() * 100)
            s.shutdown(socket.SHUT_WR)
        for i, s in enumerate(socks):
            assert _read_all(s) == (f"connection {i} ".encode() * 100)[::-1], i
    finally:
        for s in socks:
            s.close()


def test_a_flood_past_its_descriptors_neither_kills_nor_spins_it(relay_of):
    """Far more connections than the init has descriptors for, all held open: it stays up, does not spin, and
    serves again once they go."""
    def hold(conn: socket.socket) -> bytes:
        return _read_all(conn)

    harness, relay = relay_of(hold, nofile=96)
    flood = []
    for _ in range(400):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", relay.port))
        flood.append(s)
    time.sleep(1.0)
    held = len(os.listdir(f"/proc/{relay.proc.pid}/fd"))
    assert held >= 80, f"the flood did not reach the init's descriptor limit (it holds {held} of 96)"
    before = relay.cpu_s()
    time.sleep(2.0)
    spent = relay.cpu_s() - before
    for s in flood:
        s.close()
    assert relay.alive(), relay.proc.stderr.read() if relay.proc.stderr else ""
    assert spent < 0.5, f"the init spent {spent:.2f} s of CPU in 2 s under a flood: it spins"
    deadline = time.monotonic() + 20
    while True:  # the flood's queued connections drain first
        harness.handler = _echo_reversed
        try:
            with relay.connect(timeout=5) as s:
                s.sendall(b"ping")
                s.shutdown(socket.SHUT_WR)
                if _read_all(s) == b"gnip":
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the relay did not serve again after the flood"
        time.sleep(0.2)


def test_a_reader_that_never_reads_holds_its_writer_back(relay_of):
    """The harness side reads nothing for 3 s while the agent sends 64 MiB: the init's memory stays flat
    (flow control, no growing buffer), and every byte arrives once the harness reads."""
    def slow(conn: socket.socket) -> int:
        time.sleep(3)
        return len(_read_all(conn))

    harness, relay = relay_of(slow)
    start_rss = relay.rss_kib()
    sent = threading.Event()

    def send() -> None:
        with relay.connect(timeout=60) as s:
            s.sendall(b"x" * (64 << 20))
            s.shutdown(socket.SHUT_WR)
            _read_all(s)
        sent.set()

    t = threading.Thread(target=send, daemon=True)
    t.start()
    time.sleep(2)
    grown = relay.rss_kib() - start_rss
    assert not sent.is_set()
    assert grown < 16 << 10, f"the init grew by {grown} KiB holding a stalled stream"
    t.join(60)
    assert sent.is_set() and harness.served == [64 << 20]


def test_a_full_backlog_on_the_harness_side_delays_but_loses_nothing(relay_of):
    """The harness's socket has a backlog of 1 and accepts nothing for 3 s: connections wait without the init
    spinning, none is lost, and they go through as soon as the harness accepts."""
    harness, relay = relay_of(_echo_reversed, backlog=1, accept_after=3)
    t0 = time.monotonic()
    socks = [relay.connect() for _ in range(50)]
    try:
        for i, s in enumerate(socks):
            s.sendall(f"waiting {i}".encode())
            s.shutdown(socket.SHUT_WR)
        time.sleep(0.5)
        before = relay.cpu_s()
        time.sleep(2)
        spent = relay.cpu_s() - before
        assert spent < 0.3, f"the init spent {spent:.2f} s of CPU in 2 s waiting for the harness: it spins"
        for i, s in enumerate(socks):
            assert _read_all(s) == f"waiting {i}".encode()[::-1], i
        took = time.monotonic() - t0
        assert took < 3 + 5, f"the waiting connections took {took - 3:.1f} s to go through once the harness accepted"
    finally:
        for s in socks:
            s.close()


def test_nothing_behind_the_socket_ends_the_connection_not_the_init(init, tmp_path):
    relay = Relay(init, tmp_path / "nobody.sock")
    try:
        with relay.connect(timeout=10) as s:
            try:
                s.sendall(b"anyone?")
                assert _read_all(s) == b""
            except ConnectionResetError:
                pass
        assert relay.alive()
    finally:
        relay.close()


# ------------------------------------------------------------------------------ as PID 1 in the sandbox

@pytest.fixture(scope="module")
def harness_box() -> Sandbox:
    try:
        found = resolve_sandbox("auto")
    except Exception as exc:  # bwrap installed but broken: exit 2 for a run
        found, why = None, str(exc)
    else:
        why = found.warning
    if found is None or not found.confined:
        if CI:
            pytest.fail(f"bubblewrap is required under CI=true: {why}")
        pytest.skip(f"bubblewrap does not work here: {why}")
    return found


@pytest.fixture(params=INITS)
def box(request, harness_box) -> Sandbox:
    """The harness's sandbox with each init: the compiled one (what the harness picks where a compiler works),
    the Python one."""
    if request.param == "python":
        return replace(harness_box, init=None)
    if harness_box.init is None:
        if CI:
            pytest.fail(f"the harness runs the Python init under CI=true: {harness_box.warning}")
        pytest.skip(f"no compiled init here: {harness_box.warning}")
    return harness_box


def _in_box(box: Sandbox, tmp_path: Path, script: str, timeout: float = 30) -> tuple[int | None, str, float]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    argv = box.wrap(["/bin/sh", "-c", script], cwd=ws, rw=[ws])
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return proc.returncode, proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace"), \
        time.monotonic() - t0


def test_pid1_is_the_init_it_should_be(box, tmp_path):
    rc, out, _ = _in_box(box, tmp_path, "tr '\\0' ' ' < /proc/1/cmdline")
    assert rc == 0, out
    if box.init is None:
        assert "sandbox_init.py" in out, out
    else:  # one file bound in at a fixed path: the real HOME's cache stays out of sight
        assert out.split()[0] == "/run/gripprobe/sandbox_init", out
        assert str(Path.home()) not in out


def test_signals_at_pid1_change_nothing(box, tmp_path):
    """Every signal an agent can send to PID 1 (SIGKILL and SIGSTOP too) is dropped: the command's own status
    still comes back."""
    rc, out, took = _in_box(box, tmp_path, "for s in $(seq 1 31); do kill -s $s 1 2>/dev/null; done; "
                                           "kill -s KILL 1; kill -s STOP 1; sleep 0.3; echo still; exit 5")
    assert rc == 5 and "still" in out, (rc, out)


def test_an_agent_killing_everything_it_can_ends_the_phase(box, tmp_path):
    """A child sends SIGKILL to every process it may (kill -1: all but itself and PID 1): the agent dies, the
    init reports it, the phase ends."""
    rc, out, took = _in_box(box, tmp_path, "sleep 50 & sleep 50 & /bin/sh -c 'kill -KILL -1; sleep 50'; sleep 50")
    assert rc == 128 + signal.SIGKILL, (rc, out)
    assert took < 10


def test_orphans_are_reaped(box, tmp_path):
    """300 orphans that exit at once: none stays a zombie."""
    script = ("for i in $(seq 300); do ( /bin/true & ) ; done; sleep 1; "
              "grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l")
    rc, out, _ = _in_box(box, tmp_path, script, timeout=60)
    assert rc == 0, out
    assert int(out.strip().splitlines()[-1]) <= 2, out


def test_a_storm_of_processes_ends_with_the_phase(box, tmp_path):
    """The agent starts 400 sleepers (setsid, ignoring SIGHUP) and exits: the phase ends at once, none lives on."""
    marker = f"61.{os.getpid()}{time.monotonic_ns() % 100000}"
    rc, out, took = _in_box(box, tmp_path, f"for i in $(seq 400); do setsid nohup sleep {marker} >/dev/null 2>&1 & "
                                           f"done; exit 0", timeout=60)
    assert rc == 0, out
    assert took < 20
    time.sleep(0.5)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    assert not left, f"{len(left)} sleepers outlived the phase"


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_fork_storm_still_running_ends_at_the_timeout(box, tmp_path):
    """The agent keeps starting processes (bounded here: at most 3,000) when its timeout comes: killing bwrap
    takes the init, so the whole namespace, with it; nothing it started lives on."""
    import asyncio

    from gripprobe_core.runner.process import run_process

    ws = tmp_path / "ws"
    ws.mkdir()
    marker = f"62.{os.getpid()}{time.monotonic_ns() % 100000}"
    script = f"i=0; while [ $i -lt 3000 ]; do sleep {marker} & i=$((i+1)); done; sleep 60"
    argv = box.wrap(["/bin/sh", "-c", script], cwd=ws, rw=[ws])
    t0 = time.monotonic()
    res = asyncio.run(run_process(argv, cwd=ws, env={"PATH": "/usr/bin:/bin"}, stdin=None, timeout_s=3,
                                  stdout_path=tmp_path / "out", stderr_path=tmp_path / "err", sandboxed=True))
    assert res.status == "timeout", res
    assert time.monotonic() - t0 < 20
    deadline = time.monotonic() + 10
    while True:
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
        if not left:
            break
        assert time.monotonic() < deadline, f"{len(left)} processes outlived the phase's timeout"
        time.sleep(0.2)


def test_inner_argv_unwraps_either_init(harness_box, tmp_path):
    """What a stored command ran inside the sandbox, read back the same way whichever init the line names (an
    argument that is itself `--` included); a command run without the sandbox is itself."""
    from gripprobe_core.runner.sandbox import inner_argv

    agent = ["/usr/bin/env", "--", "agent", "--prompt", "--"]
    for box in (harness_box, replace(harness_box, init=None)):
        wrapped = box.wrap(agent, cwd=tmp_path, rw=[tmp_path], forwards={40000: tmp_path / "40000.sock"})
        assert inner_argv(wrapped) == agent, wrapped
    assert inner_argv(agent) == agent

"""PID 1 of every sandboxed phase: the agent's only way out, and the end of the phase when the agent ends.

The harness runs the same contract compiled (``sandbox_init.c``, built by :mod:`.sandbox_build`): it starts
in under a millisecond where this file costs an interpreter's start (about 11 ms). This file is the
fallback where no C compiler works; the two are tested against the same tests (tests/test_sandbox_init.py).

bwrap runs this file (``--as-pid-1``) in the phase's own PID and network namespaces, as
``python -I -S sandbox_init.py [--forward PORT=SOCKET ...] [--gate FD] [--exit-note FD] -C DIR -- COMMAND ...``.
It

1. makes itself untraceable (``PR_SET_DUMPABLE`` 0): the agent has no capabilities, so it can neither
   ``ptrace`` this process nor read or write its memory. (An agent that stopped bwrap's own init by
   attaching to it kept the namespace, and so the phase, alive until the timeout.)
2. listens, inside the namespace's own loopback, on ``127.0.0.1:PORT`` (and ``[::1]:PORT``) for every
   ``--forward`` and relays each connection to the Unix socket ``SOCKET`` bound in from the harness,
   behind which the harness reaches the real endpoint (the case's recording proxy, the test's
   challenge server). The agent's base URL keeps its form ``http://127.0.0.1:PORT``; nothing else is
   reachable: the namespace has no other interface and no route.
3. with ``--gate FD`` (a pre-started sandbox: runner/process.py ``Gate``), waits until one byte can be read
   from FD, the harness's "go", then closes FD (the command never gets it); when FD ends instead (the
   harness closed it: the phase was given up) it exits 125 at once, silently, having started nothing.
4. starts COMMAND in DIR (``PWD`` set to DIR: bwrap's own ``--chdir`` would leave ``PWD=/``), with every
   signal's disposition the default and none blocked, then reaps whatever is orphaned to it and exits with
   COMMAND's status (128 + N when signal N ended it) as soon as COMMAND ends. Its exit ends the PID
   namespace: the kernel kills every process left in it, stopped or traced ones included.
5. with ``--exit-note FD`` (the write end of a pipe, made close-on-exec here: the command never gets it),
   writes one byte to FD the moment COMMAND has ended, before its own exit: the harness's clock stops at the
   agent's end rather than after the namespace's teardown and bwrap's exit. The agent cannot write it: it
   never holds FD and cannot trace this process (1).

Standalone on purpose: only modules the interpreter has already loaded or that are built in (no
``site``, no package import), so it starts in about the time of a bare interpreter.
"""

import os
import sys
import time

import _signal
import _socket
import _thread

PR_SET_DUMPABLE = 4
CHUNK = 65536
#: Exit status when the sandbox itself cannot be set up (never the agent's).
SETUP_FAILED = 125


def _fail(message: str) -> None:
    try:
        os.write(2, f"gripprobe sandbox init: {message}\n".encode("utf-8", "replace"))
    finally:
        os._exit(SETUP_FAILED)


def _untraceable() -> None:
    """prctl(PR_SET_DUMPABLE, 0) through the C library (``_ctypes`` alone: ``ctypes`` costs milliseconds)."""
    import _ctypes

    handle = _ctypes.dlopen(None, os.RTLD_NOW | os.RTLD_GLOBAL)  # type: ignore[arg-type]  # None: this program
    if _ctypes.call_function(_ctypes.dlsym(handle, "prctl"), (PR_SET_DUMPABLE, 0, 0, 0, 0)) != 0:
        raise OSError("prctl(PR_SET_DUMPABLE, 0) failed")


def _parse(args: list) -> tuple:
    forwards: dict = {}
    cwd = None
    gate = note = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return forwards, cwd, gate, note, args[i + 1:]
        if a == "--forward" and i + 1 < len(args):
            port, _, path = args[i + 1].partition("=")
            if not port.isdigit() or not 0 < int(port) < 65536 or not path:
                _fail(f"bad --forward {args[i + 1]!r} (PORT=SOCKET)")
            forwards[int(port)] = path
            i += 2
        elif a == "-C" and i + 1 < len(args):
            cwd = args[i + 1]
            i += 2
        elif a == "--gate" and i + 1 < len(args):
            gate = _pipe_fd(args[i + 1], "--gate", "read")
            i += 2
        elif a == "--exit-note" and i + 1 < len(args):
            note = _pipe_fd(args[i + 1], "--exit-note", "write")
            os.set_inheritable(note, False)
            i += 2
        else:
            _fail(f"unexpected argument {a!r}")
    _fail("no command (… -- COMMAND)")
    raise AssertionError  # not reached


def _pipe_fd(text: str, option: str, end: str) -> int:
    import stat

    fd = int(text) if text.isdigit() and len(text) <= 9 else -1
    try:
        ok = fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode)  # never stdin, stdout or stderr
    except OSError:
        ok = False
    if not ok:
        _fail(f"bad {option} {text!r} (the {end} end of a pipe)")
    return fd


def _wait_for_go(gate: int) -> None:
    """Returns when the harness's one byte came; exits 125 (nothing started) when the gate ended without it.
    The gate is closed either way: neither the command nor the relay holds it."""
    try:
        got = os.read(gate, 1)  # retried on EINTR by Python itself
    except OSError as exc:
        _fail(f"cannot read the gate: {exc}")
        raise
    finally:
        os.close(gate)
    if not got:
        os._exit(SETUP_FAILED)  # given up before its start: silent, nothing ran


# ------------------------------------------------------------------------------------------- relay

def _listen(port: int) -> list:
    out = []
    for family, host in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):
        s = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            s.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
            if family == _socket.AF_INET6:
                s.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
            s.bind((host, port))
            s.listen(256)
        except OSError as exc:
            s.close()
            if family == _socket.AF_INET:  # ::1 is optional (no IPv6 here), 127.0.0.1 is not
                _fail(f"cannot listen on 127.0.0.1:{port} inside the sandbox: {exc}")
            continue
        out.append(s)
    return out


def _accept(listener, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()
        except OSError:  # out of descriptors (a flood): the backlog waits, nothing spins
            time.sleep(0.05)
            continue
        try:
            conn = _socket.socket(fileno=fd)
            conn.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            _thread.start_new_thread(_bridge, (conn, path))
        except Exception:  # no thread to be had: this connection is refused, the next may do better
            os.close(fd)
            time.sleep(0.01)


def _bridge(conn, path: str) -> None:
    up = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        up.connect(path)
    except OSError:
        up.close()
        conn.close()
        return
    ends = [2, _thread.allocate_lock()]
    _thread.start_new_thread(_pump, (up, conn, ends, up, conn))
    _pump(conn, up, ends, up, conn)


def _pump(src, dst, ends: list, a, b) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    with ends[1]:
        ends[0] -= 1
        last = ends[0] == 0
    if last:
        a.close()
        b.close()


# --------------------------------------------------------------------------------------- the agent

def _start(cwd, command: list) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: what a freshly started process expects (every disposition the default, no signal blocked)
        for sig in _signal.valid_signals():
            if sig not in (_signal.SIGKILL, _signal.SIGSTOP):
                try:
                    _signal.signal(sig, _signal.SIG_DFL)
                except (OSError, ValueError):  # the C library's own real-time signals
                    pass
        _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
        env = dict(os.environ)
        if cwd is not None:
            os.chdir(cwd)
            env["PWD"] = cwd
        os.execvpe(command[0], command, env)
    except BaseException as exc:
        try:
            os.write(2, f"gripprobe sandbox: cannot run {command[0]!r}: {exc}\n".encode("utf-8", "replace"))
        finally:
            os._exit(127)
    return 0  # not reached


def _reap(agent: int, note: "int | None" = None) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:  # cannot happen while the agent lives
            os._exit(SETUP_FAILED)
        if pid == agent:
            if note is not None:
                try:
                    os.write(note, b"x")
                except OSError:  # the harness gave up reading: bwrap's exit says it all the same
                    pass
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def main(args: list) -> None:
    forwards, cwd, gate, note, command = _parse(args)
    if not command:
        _fail("no command (… -- COMMAND)")
    try:
        _untraceable()
    except Exception as exc:
        _fail(f"cannot make the sandbox's init untraceable: {exc}")
    # Signals sent from inside the namespace reach PID 1 only where it has a handler: drop Python's.
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    listeners = [(s, path) for port, path in sorted(forwards.items()) for s in _listen(port)]
    if gate is not None:
        _wait_for_go(gate)
    agent = _start(cwd, command)  # the listeners are close-on-exec; they queue connections until accepted
    for s, path in listeners:
        _thread.start_new_thread(_accept, (s, path))
    _reap(agent, note)


if __name__ == "__main__":
    main(sys.argv[1:])

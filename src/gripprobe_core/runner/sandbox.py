"""The agent's sandbox: every phase (and every command a validator runs on the agent's work) under bubblewrap.

What the sandboxed process gets (SPEC §9, threat model in docs/sandbox.md):
- its own PID namespace, whose PID 1 is GripProbe's own init (untraceable): ``sandbox_init.c`` compiled by the
  harness on first use (:mod:`.sandbox_build`), or where no C compiler works the same contract in Python
  (:mod:`.sandbox_init`);
  when the agent's first process exits, or bwrap is killed (timeout), the namespace ends and every
  process it started dies with it, whatever it did (setsid, ``env -i``, double fork, ptrace, SIGSTOP);
  ``--die-with-parent`` ends it if the harness itself dies;
- its own network namespace: a loopback with nothing on it but the phase's own endpoints (the case's
  recording proxy, the test's challenge servers), each at its host port and relayed by the init to a
  Unix socket the harness serves (:mod:`.netbridge`); no other interface, no route, so no backend,
  other case, other run or cluster is reachable;
- its own user, IPC, UTS and cgroup namespaces, no capabilities, no further user namespaces;
- a filesystem with only the system read-only (``/usr``, ``/etc`` and the ``/bin``-style links), the
  agent's install read-only (the harness's Python runtime for Python agents, the agent's cached install,
  the executable itself), a private ``/tmp``, a fresh ``/proc`` and minimal ``/dev``, and read-write only
  the phase's workspace, HOME (with its XDG dirs) and TMPDIR, at the same paths as outside and, for the
  agent's phases, under ``SEEN_ROOT`` too (one path for every phase and trial: runner/phase.py ``launch``).

``--sandbox none`` runs unsandboxed; then the runner falls back to sweeping the process tree by an
environment token (runner/process.py), which a process that scrubs its environment escapes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Literal, Mapping

from ..errors import UserError
from . import sandbox_build
from .sandbox_build import CompiledInit

SandboxMode = Literal["auto", "bwrap", "none"]
SANDBOX_MODES: tuple[str, ...] = ("auto", "bwrap", "none")

#: System locations bound read-only when present (symlinks such as Debian's ``/bin -> usr/bin`` are
#: recreated as symlinks).
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

#: PID 1 inside the sandbox where there is no compiled init (run by path with the harness's interpreter, ``-I -S``).
INIT = Path(__file__).with_name("sandbox_init.py")
#: Where the compiled init (one file, bound read-only) appears inside the sandbox, and runs as PID 1.
INIT_INSIDE = "/run/gripprobe/sandbox_init"
#: Where the Unix sockets of the phase's endpoints appear inside the sandbox.
NET_INSIDE = "/run/gripprobe"

#: How long the start-of-run probe may take before bwrap counts as unusable.
PROBE_TIMEOUT_S = 10.0

INSTALL_FIX = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; ./dev does it) and allow "
               "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or pass --sandbox none "
               "to run agents unsandboxed")


class SandboxUnavailable(RuntimeError):
    """Code was to run confined and there is no sandbox here: it is not run at all."""


@dataclass(frozen=True)
class Sandbox:
    """How this run confines agent processes: ``kind`` bwrap or none (``auto`` already resolved); or, for code
    run on a stored run's data, ``unavailable``: no sandbox here, so that code is not run (``warning`` says why)."""

    kind: Literal["bwrap", "none", "unavailable"]
    bwrap: str | None = None
    warning: str | None = None
    """Why ``auto`` fell back to none (shown once at run start), or why the sandbox is ``unavailable``."""
    runtime: tuple[Path, ...] = field(default_factory=tuple)
    """Read-only paths every sandboxed process gets besides the system: the Python runtime the
    harness runs on (Python agents' venvs point at it) and the gripprobe_core package (the reference agent)."""
    python: str | None = None
    """The interpreter that runs the Python init (:mod:`.sandbox_init`): the harness's own, resolved."""
    init: CompiledInit | None = None
    """The compiled init (:mod:`.sandbox_build`) this machine built; None: the Python init runs. ``warning`` says
    why when a compiler was missing or failed. Checked against its sha256 before it is bound in."""
    bind_argv: bool = True
    """Whether files the command line names (its executable, its ``#!`` interpreter, absolute file arguments)
    are bound read-only into the sandbox. False for commands read from a stored run: a stored path never
    decides what the sandbox shows."""

    @property
    def confined(self) -> bool:
        return self.kind == "bwrap"

    @property
    def init_kind(self) -> Literal["compiled", "python"] | None:
        """Which init a sandboxed command runs as PID 1 (None: no sandbox)."""
        return None if not self.confined else "compiled" if self.init is not None else "python"

    def wrap(self, argv: list[str], *, cwd: Path, rw: Iterable[Path], ro: Iterable[Path] = (),
             rw_at: Iterable[tuple[Path, Path]] = (), forwards: Mapping[int, Path] | None = None,
             gate: int | None = None, exit_note: int | None = None) -> list[str]:
        """``argv`` as run inside the sandbox, with ``cwd`` as its working directory; unchanged for none.

        ``rw`` and ``ro`` appear at their own paths; ``rw_at`` pairs (source, where it appears inside).
        ``forwards`` maps a port to the harness's Unix socket behind it: inside, ``127.0.0.1:PORT`` leads
        there, and nothing else is reachable (no forwards: no network at all). ``gate``: the read end of a
        :class:`~.process.Gate` the caller passes to the process; the init sets the sandbox up, then waits on it
        before it starts the command (a pre-started sandbox; ignored for none, which is never pre-started).
        ``exit_note``: the write end of the gate's note pipe, which the init writes one byte to the moment the
        command has ended (before the namespace's teardown and bwrap's exit). Raises
        :class:`SandboxUnavailable` for an ``unavailable`` sandbox: nothing runs unconfined in its place."""
        if self.kind == "unavailable":
            raise SandboxUnavailable(f"no sandbox to run {argv[:1]} in: {self.warning or 'bubblewrap does not work here'}")
        if not self.confined:
            return list(argv)
        args = self._args(rw=rw, ro=[*self.runtime, *ro, *(_argv_files(argv) if self.bind_argv else [])])
        for src, dst in rw_at:
            args += ["--bind", str(src), str(dst)]
        compiled = sandbox_build.usable(self.init) if self.init is not None else None
        if compiled is not None:  # its sha256 checked: a changed binary was rebuilt, or the Python init runs
            args += ["--ro-bind", str(compiled.path), INIT_INSIDE]
            init = [INIT_INSIDE]
        else:
            init = [self.python or sys.executable, "-I", "-S", str(INIT)]
        sockets: dict[Path, str] = {}
        for port, sock in sorted((forwards or {}).items()):
            inside = sockets.setdefault(Path(sock).parent, f"{NET_INSIDE}/{len(sockets)}")
            init += ["--forward", f"{int(port)}={inside}/{Path(sock).name}"]
        if gate is not None:
            init += ["--gate", str(int(gate))]
        if exit_note is not None:
            init += ["--exit-note", str(int(exit_note))]
        for folder, at in sockets.items():
            args += ["--ro-bind", str(folder), at]
        # PID 1 is our init: bwrap's own keeps no secret from the agent, but an agent that ptrace-stops it
        # holds the namespace open. Our init stays in / (an agent that looks for other agents working in its
        # workspace, as gptme does, would find a PID 1 there) and starts the command in its directory.
        return [*args, "--as-pid-1", "--chdir", "/", "--", *init, "-C", str(cwd), "--", *argv]

    def shown_path(self, path_env: str, binds: Iterable[Path] = ()) -> str:
        """``PATH`` with only the folders a sandboxed process sees (the system's, the harness's Python runtime,
        ``binds``: what :meth:`wrap` is given besides, the agent's install and the phase's folders), in order: the same for ``none`` as for ``bwrap``, so a command such as
        ``python3`` resolves to the same program with and without the sandbox.

        Measured (docs/sandbox.md, Cost): with pyenv's shims first on ``PATH``, ``python3`` outside the
        sandbox is pyenv's bash shim (a bash and pyenv's scripts, about 0.1 s of CPU a call) and inside it
        ``/usr/bin/python3`` (the shims' folder is not shown): that, not the sandbox, was the extra CPU of
        ``--sandbox none``. Folders the sandbox does not show lead nowhere inside it, so for ``bwrap`` this
        changes no lookup."""
        roots = [Path(s) for s in SYSTEM_PATHS if os.path.lexists(s)]
        roots += [Path(os.path.abspath(p)) for p in (*(self.runtime or _runtime_paths()), *binds)]
        kept: list[str] = []
        for entry in path_env.split(os.pathsep):
            if not entry.startswith("/"):  # relative: the working directory's, the same in both
                kept.append(entry)
                continue
            at = Path(os.path.abspath(entry))
            if any(at == r or r in at.parents for r in roots):
                kept.append(entry)
        return os.pathsep.join(kept)

    def _args(self, *, rw: Iterable[Path], ro: Iterable[Path]) -> list[str]:
        args = [self.bwrap or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
                "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        for system in SYSTEM_PATHS:
            if os.path.islink(system):
                args += ["--symlink", os.readlink(system), system]
            elif os.path.isdir(system):
                args += ["--ro-bind", system, system]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        for path in _outermost(Path(x) for x in ro):
            if not _under_system(path):
                args += ["--ro-bind-try", str(path), str(path)]
        for path in _outermost(Path(x) for x in rw):
            args += ["--bind", str(path), str(path)]
        return args


def inner_argv(argv: list[str]) -> list[str]:
    """The command a :meth:`Sandbox.wrap` line runs inside the sandbox (what the init starts), whichever init it
    names; ``argv`` itself when it is not such a line (``--sandbox none``). For reading stored commands back
    (benchmarks compare them with the agent run alone)."""
    try:
        start = argv.index("--", argv.index("--as-pid-1")) + 1  # bwrap's own `--`: the init's argv follows
        return list(argv[argv.index("--", start) + 1:])  # the init's `--`: the command follows
    except ValueError:
        return list(argv)


def _under_system(p: Path) -> bool:
    s = str(p)
    return any(s == root or s.startswith(root + "/") for root in ("/usr", "/etc"))


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Absolute, normalized, de-duplicated paths with those inside another one dropped (binding the
    outer one already shows them), in a stable order."""
    norm = sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for p in norm:
        if not any(p == k or k in p.parents for k in kept):
            kept.append(p)
    return kept


def _argv_files(argv: list[str]) -> list[Path]:
    """Files the command line names: the executable itself (a script or binary outside the bound install)
    and its ``#!`` interpreter, and every other argument that is the absolute path of an existing regular
    file (``python /path/to/agent.py``): a command is meant to read the files it is given."""
    out = [Path(a) for a in argv[1:] if a.startswith("/") and "\0" not in a and _is_file(a)]
    if not argv or os.sep not in argv[0]:
        return out
    exe = Path(argv[0])
    out.append(exe)
    try:
        real = exe.resolve()
        if real != exe:
            out.append(real)
        with open(real, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return out
    if head.startswith(b"#!"):
        interp = head[2:].split(b"\n", 1)[0].strip().split(b" ", 1)[0]
        if interp.startswith(b"/"):
            ip = Path(os.fsdecode(interp))
            out.append(ip)
            venv = ip.parent.parent  # a venv's bin/python: the venv (and its pyvenv.cfg) is needed too
            if (venv / "pyvenv.cfg").is_file():
                out.append(venv)
    return out


def _is_file(path: str) -> bool:
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _runtime_paths() -> tuple[Path, ...]:
    import gripprobe_core

    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent,
             Path(gripprobe_core.__file__).resolve().parent}
    return tuple(sorted(paths))


def _probe(box: Sandbox) -> str | None:
    """Run a trivial process in the real sandbox shape (its init, no network); None when it works, else why not."""
    bwrap = box.bwrap
    with tempfile.TemporaryDirectory(prefix="gripprobe-sandbox-probe-") as d:
        ws = Path(d)
        argv = box.wrap(["/bin/sh", "-c", "echo ok > probe && cat probe"], cwd=ws, rw=[ws])
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S,
                                  env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{bwrap} could not run: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != b"ok":
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"{bwrap} exited {proc.returncode}: {err[-1] if err else 'no output'}"
    return None


@dataclass(frozen=True)
class _Probe:
    box: Sandbox
    installed: bool
    problem: str | None


_resolved: dict[str, _Probe] = {}
_probing = threading.Lock()


def prefetch_probe() -> None:
    """Start the probe on a thread (its bwrap runs take ~20 ms of waiting): a command calls this before it
    loads its plugins and specs, and :func:`resolve_sandbox` later finds the answer ready (or waits for it)."""
    def probe() -> None:
        try:
            _probe_once()
        except Exception:  # noqa: BLE001 - the caller's own probe (same code, on its thread) reports it
            pass

    threading.Thread(target=probe, name="gripprobe-sandbox-probe", daemon=True).start()


def _probe_once() -> _Probe:
    with _probing:
        return _probe_locked()


def _probe_locked() -> _Probe:
    """bwrap's probe, once per process: absent; present and working; present and broken (after a second
    probe: a freshly started machine once failed the first). The init is the compiled one when this machine
    can build it (:func:`.sandbox_build.compiled_init`, compiled on first use), else the Python one; the
    first probe runs the compiled init, the second the Python one, so a compiled init that fails in the
    sandbox leaves the Python init running (with a warning) and bwrap is broken only when both fail."""
    if "probe" not in _resolved:
        runtime, python = _runtime_paths(), os.path.realpath(sys.executable)
        exe = shutil.which("bwrap")
        if exe is None:
            _resolved["probe"] = _Probe(Sandbox("none"), installed=False, problem="bwrap is not installed")
        else:
            plain = Sandbox("bwrap", bwrap=exe, runtime=runtime, python=python)
            compiled, why_not = sandbox_build.compiled_init()
            box = replace(plain, init=compiled) if compiled is not None else plain
            problem = _probe(box)
            if problem is not None:
                if compiled is not None:
                    why_not = f"the compiled init failed the sandbox's probe ({problem})"
                box = plain
                problem = _probe(box)
            if problem is None and why_not is not None:
                fix = sandbox_build.INSTALL_CC if compiled is None else "please report it"
                box = replace(box, warning=f"sandbox: {why_not}: each phase starts the Python init instead, about "
                                           f"10 ms more ({fix})")
            _resolved["probe"] = _Probe(box if problem is None else Sandbox("none"), installed=True, problem=problem)
    return _resolved["probe"]


def resolve_sandbox(mode: str) -> Sandbox:
    """Turn ``auto|bwrap|none`` into the sandbox this run uses, probing bwrap once per process.

    ``none`` runs unconfined on purpose. ``bwrap`` that cannot run → :class:`UserError` (exit 2, with the
    fix). ``auto`` runs unconfined only where bubblewrap is absent (with a warning every caller shows);
    bubblewrap installed but failing its probe twice is exit 2 with the reason, never a silent fallback.
    """
    if mode not in SANDBOX_MODES:
        raise UserError(f"unknown sandbox {mode!r}; use one of {', '.join(SANDBOX_MODES)}")
    if mode == "none":
        return Sandbox("none")
    found = _probe_once()
    if found.box.confined:
        return found.box
    if mode == "bwrap":
        raise UserError(f"--sandbox bwrap: {found.problem}; fix: {INSTALL_FIX}")
    if found.installed:
        raise UserError(f"--sandbox auto: bubblewrap is installed but failed its probe twice ({found.problem}); "
                        f"agents are not run unconfined behind your back. Fix: {INSTALL_FIX}")
    return Sandbox("none", warning=f"sandbox auto: {found.problem}: agents run UNSANDBOXED ({INSTALL_FIX})")


def stored_data_sandbox() -> Sandbox:
    """Where code run on a stored run's data runs (``rebuild-reports --recompute``: a ``command_output``
    validator runs the stored workspace's code): bubblewrap when it works here, else ``unavailable`` (that code
    is then not run, and the case says why). Never unconfined, and nothing read from the stored run (its
    case.json ``sandbox``, its specs' ``sandbox`` keys, the executable paths it names) changes this: the
    command line's files are not bound in (``bind_argv`` False)."""
    found = _probe_once()
    if found.box.confined:
        return replace(found.box, bind_argv=False)
    why = found.problem or "bubblewrap does not work here"
    return Sandbox("unavailable", warning=why if not found.installed else f"bubblewrap failed its probe: {why}")


def probe_report() -> tuple[bool, str]:
    """For ``gripprobe doctor``: does bwrap work here, and what did the probe say."""
    found = _probe_once()
    if found.box.confined:
        box = found.box
        init = (f"init: compiled ({box.init.path})" if box.init is not None
                else f"init: Python ({box.warning or 'no compiled init'})")
        return True, f"bubblewrap works ({box.bwrap}); {init}"
    if found.installed:
        return False, f"bubblewrap is installed but does not work: {found.problem}; fix: {INSTALL_FIX}"
    return False, f"{found.problem}: agents would run UNSANDBOXED; fix: {INSTALL_FIX}"

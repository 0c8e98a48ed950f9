"""The agent's sandbox: every phase (and every command a validator runs on the agent's work) under bubblewrap.

What the sandboxed process gets (SPEC §9, threat model in docs/sandbox.md):
- its own PID namespace, ended with the phase: when the agent's first process exits, or bwrap is killed
  (timeout), every process it started dies with it, whatever it did (setsid, ``env -i``, double fork);
  ``--die-with-parent`` ends it if the harness itself dies;
- its own user, IPC, UTS and cgroup namespaces, no capabilities, no further user namespaces;
- a filesystem with only the system read-only (``/usr``, ``/etc`` and the ``/bin``-style links), the
  agent's install read-only (the harness's Python runtime for Python agents, the agent's cached install,
  the executable itself), a private ``/tmp``, a fresh ``/proc`` and minimal ``/dev``, and read-write only
  the phase's workspace, HOME (with its XDG dirs) and TMPDIR, at the same paths as outside;
- the host's network namespace: the proxy, oracle and challenge servers on 127.0.0.1 stay reachable.
  Egress beyond loopback is NOT confined (docs/sandbox.md).

``--sandbox none`` runs unsandboxed; then the runner falls back to sweeping the process tree by an
environment token (runner/process.py), which a process that scrubs its environment escapes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from ..errors import UserError

SandboxMode = Literal["auto", "bwrap", "none"]
SANDBOX_MODES: tuple[str, ...] = ("auto", "bwrap", "none")

#: System locations bound read-only when present (symlinks such as Debian's ``/bin -> usr/bin`` are
#: recreated as symlinks).
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

#: Runs the command in its working directory (coreutils ``env -C``) inside the sandbox.
ENV = "/usr/bin/env"

#: How long the start-of-run probe may take before bwrap counts as unusable.
PROBE_TIMEOUT_S = 10.0

INSTALL_FIX = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; ./dev does it) and allow "
               "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or pass --sandbox none "
               "to run agents unsandboxed")


@dataclass(frozen=True)
class Sandbox:
    """How this run confines agent processes: ``kind`` bwrap or none (``auto`` already resolved)."""

    kind: Literal["bwrap", "none"]
    bwrap: str | None = None
    warning: str | None = None
    """Why ``auto`` fell back to none (shown once at run start)."""
    runtime: tuple[Path, ...] = field(default_factory=tuple)
    """Read-only paths every sandboxed process gets besides the system: the Python runtime the
    harness runs on (Python agents' venvs point at it) and the gripprobe_core package (the reference agent)."""

    @property
    def confined(self) -> bool:
        return self.kind == "bwrap"

    def wrap(self, argv: list[str], *, cwd: Path, rw: Iterable[Path], ro: Iterable[Path] = (),
             rw_at: Iterable[tuple[Path, Path]] = ()) -> list[str]:
        """``argv`` as run inside the sandbox, with ``cwd`` as its working directory; unchanged for none.

        ``rw`` and ``ro`` appear at their own paths; ``rw_at`` pairs (source, where it appears inside)."""
        if not self.confined:
            return list(argv)
        args = self._args(rw=rw, ro=[*self.runtime, *ro, *_argv_files(argv)])
        for src, dst in rw_at:
            args += ["--bind", str(src), str(dst)]
        # bwrap's own init (PID 1 inside) keeps the command line and the --chdir directory: an agent that
        # looks for other agents in its workspace (gptme does, and then changes its prompt) would find it.
        # So PID 1 stays in /, and the command enters its working directory itself. bwrap exports PWD=/ for
        # its own --chdir and `env -C` leaves PWD alone; agents that trust $PWD (opencode) would work in /.
        return [*args, "--chdir", "/", "--", ENV, "-C", str(cwd), f"PWD={cwd}", *argv]

    def _args(self, *, rw: Iterable[Path], ro: Iterable[Path]) -> list[str]:
        args = [self.bwrap or "bwrap", "--unshare-all", "--unshare-user", "--share-net", "--disable-userns",
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


def _probe(bwrap: str, runtime: tuple[Path, ...]) -> str | None:
    """Run a trivial process in the real sandbox shape; None when it works, else why not."""
    with tempfile.TemporaryDirectory(prefix="gripprobe-sandbox-probe-") as d:
        box = Sandbox("bwrap", bwrap=bwrap, runtime=runtime)
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


_resolved: dict[str, Sandbox] = {}


def resolve_sandbox(mode: str) -> Sandbox:
    """Turn ``auto|bwrap|none`` into the sandbox this run uses, probing bwrap once per process.

    ``bwrap`` that cannot run → :class:`UserError` (exit 2, with the fix); ``auto`` → none with a warning.
    """
    if mode not in SANDBOX_MODES:
        raise UserError(f"unknown sandbox {mode!r}; use one of {', '.join(SANDBOX_MODES)}")
    if mode == "none":
        return Sandbox("none")
    if "probe" not in _resolved:
        runtime = _runtime_paths()
        exe = shutil.which("bwrap")
        problem = "bwrap is not installed" if exe is None else _probe(exe, runtime)
        _resolved["probe"] = (Sandbox("bwrap", bwrap=exe, runtime=runtime) if problem is None
                              else Sandbox("none", warning=problem))
    found = _resolved["probe"]
    if found.confined:
        return found
    if mode == "bwrap":
        raise UserError(f"--sandbox bwrap: {found.warning}; fix: {INSTALL_FIX}")
    return Sandbox("none", warning=f"sandbox auto: {found.warning}; agents run UNSANDBOXED ({INSTALL_FIX})")


def probe_report() -> tuple[bool, str]:
    """For ``gripprobe doctor``: does bwrap work here, and what did the probe say."""
    box = resolve_sandbox("auto")
    if box.confined:
        return True, f"bubblewrap works ({box.bwrap})"
    return False, box.warning or "bubblewrap does not work"

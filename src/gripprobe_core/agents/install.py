"""Pinned, cached, idempotent agent installs.

PyPI agents get their own venv (``<dir>/venv``), npm agents ``npm install --prefix <dir>``. A directory
is complete only once ``gripprobe-install.json`` is written (atomically, last), so an interrupted install
is redone, and a completed one costs a stat call.

An install takes a while (about a minute for codex), so it reports as it goes to an
:class:`InstallProgress`: each step, every line pip or npm prints, and a tick at least twice a second
(the CLI's reporters in ``cli/progress.py`` turn these into a spinner or periodic lines).
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..phase import InstallRecipe
from ..errors import UserError
from ..store import atomic_write_json
from ..timeutil import utc_now_iso

MARKER = "gripprobe-install.json"
INSTALL_TIMEOUT_S = 1800.0
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


class InstallError(UserError):
    """An agent could not be installed (the registry refused, a build failed ...)."""


@dataclass(frozen=True)
class InstalledAgent:
    agent: str
    version: str
    path: Path
    executable: Path


class InstallProgress:
    """What an install tells as it goes; this base class says nothing (override what you need).

    ``output`` lines come from pip or npm: ANSI colours removed, only the last ``\\r`` segment kept, and
    otherwise as the tool wrote them (a reporter must still make them safe to show, see ``textsafe``)."""

    def start(self, agent: str, recipe: InstallRecipe, directory: Path) -> None: ...

    def step(self, text: str) -> None: ...

    def output(self, line: str) -> None: ...

    def tick(self) -> None:
        """Called at least twice a second while a step runs (for periodic lines)."""

    def finish(self, installed: "InstalledAgent | None", error: BaseException | None = None) -> None: ...


class _LogProgress(InstallProgress):
    """The default: one ``log`` line when an install starts (what callers of ``install(log=...)`` got)."""

    def __init__(self, log) -> None:
        self.log = log

    def start(self, agent: str, recipe: InstallRecipe, directory: Path) -> None:
        self.log(f"installing {agent}: {recipe.kind} {recipe.package} {recipe.version} into {directory}")


def default_cache_root() -> Path:
    env = os.environ.get("GRIPPROBE_AGENT_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gripprobe" / "agents"


@dataclass
class AgentCache:
    root: Path

    @classmethod
    def default(cls) -> "AgentCache":
        return cls(default_cache_root())

    def directory(self, agent: str, recipe: InstallRecipe) -> Path:
        return self.root / f"{agent}-{recipe.version}"

    def executable(self, agent: str, recipe: InstallRecipe) -> Path:
        d = self.directory(agent, recipe)
        if recipe.kind == "pypi":
            return d / "venv" / "bin" / recipe.executable
        return d / "node_modules" / ".bin" / recipe.executable

    def installed(self, agent: str, recipe: InstallRecipe) -> InstalledAgent | None:
        d = self.directory(agent, recipe)
        exe = self.executable(agent, recipe)
        try:
            meta = json.loads((d / MARKER).read_text())
        except (OSError, ValueError):
            return None
        if meta.get("package") != recipe.package or meta.get("version") != recipe.version or not exe.exists():
            return None
        return InstalledAgent(agent, recipe.version, d, exe)

    def install(self, agent: str, recipe: InstallRecipe, *, log=print,
                progress: InstallProgress | None = None) -> InstalledAgent:
        """Install ``recipe`` unless it already is; returns where. Raises InstallError with the tool's message.

        ``progress`` hears every step and output line of a real install (nothing when already installed);
        without it, ``log`` gets one line when an install starts."""
        done = self.installed(agent, recipe)
        if done:
            return done
        # One install at a time per agent and version on this machine (several runs, or several cluster
        # tasks on one node): the second waits, then finds it installed.
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{agent}-{recipe.version}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = self.installed(agent, recipe)
            if done:
                return done
            progress = progress or _LogProgress(log)
            d = self.directory(agent, recipe)
            progress.start(agent, recipe, d)
            try:
                inst = self._install(agent, recipe, d, progress)
            except BaseException as exc:
                progress.finish(None, exc)
                raise
            progress.finish(inst)
            return inst

    def _install(self, agent: str, recipe: InstallRecipe, d: Path, progress: InstallProgress) -> InstalledAgent:
        if d.exists():
            shutil.rmtree(d)  # an interrupted earlier attempt
        d.mkdir(parents=True)
        if recipe.kind == "pypi":
            venv = d / "venv"
            progress.step("creating a virtual environment")
            _run([sys.executable, "-m", "venv", str(venv)], agent, progress)
            progress.step(f"pip install {recipe.package}=={recipe.version}")
            # not -q: pip's own lines (Collecting, Downloading, Installing) are the progress; no progress bar
            _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                  "--progress-bar", "off", "--no-color", f"{recipe.package}=={recipe.version}", *recipe.extra],
                 agent, progress)
        else:
            npm = shutil.which("npm")
            if not npm:
                raise InstallError(f"cannot install {agent}: npm is not on PATH (install Node.js and npm)")
            (d / "package.json").write_text(json.dumps({"name": f"gripprobe-{agent}", "private": True}) + "\n")
            progress.step(f"npm install {recipe.package}@{recipe.version}")
            # --loglevel=http: one line per registry fetch, the only progress npm prints without its spinner
            _run([npm, "install", "--prefix", str(d), "--no-audit", "--no-fund", "--loglevel=http",
                  "--progress=false", "--color=false", *recipe.npm_args, f"{recipe.package}@{recipe.version}",
                  *recipe.extra],
                 agent, progress)
        exe = self.executable(agent, recipe)
        if not exe.exists():
            raise InstallError(f"installed {recipe.package} {recipe.version} but {exe} is missing; "
                               f"the recipe's executable name may be wrong")
        atomic_write_json(d / MARKER, {"agent": agent, "kind": recipe.kind, "package": recipe.package,
                                       "version": recipe.version, "executable": str(exe),
                                       "installed_at": utc_now_iso()})
        return InstalledAgent(agent, recipe.version, d, exe)


def clean_line(raw: str) -> str:
    """One line of a tool's output as text: the last ``\\r`` segment (what a terminal would show), ANSI
    escape sequences removed, trailing blanks stripped."""
    return _ANSI.sub("", raw.rstrip("\r\n").rsplit("\r", 1)[-1]).rstrip()


def _run(argv: list[str], agent: str, progress: InstallProgress, timeout_s: float = INSTALL_TIMEOUT_S) -> None:
    """Run one install step in its own process group, handing each output line (stdout and stderr merged)
    to ``progress`` as it comes and ticking it while waiting. The last lines go into the error."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    except OSError as exc:
        raise InstallError(f"cannot install {agent}: {argv[0]}: {exc}") from None
    out = proc.stdout
    assert out is not None
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        try:
            for raw in iter(out.readline, b""):
                lines.put(raw)
        except (OSError, ValueError):
            pass  # the pipe went away (the step was killed)
        lines.put(None)

    reader = threading.Thread(target=read, name=f"install-{agent}", daemon=True)
    reader.start()
    tail: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                _kill(proc)
                raise InstallError(f"cannot install {agent}: `{' '.join(argv[:4])} …` took over {timeout_s:.0f}s")
            try:
                raw = lines.get(timeout=0.25)
            except queue.Empty:
                progress.tick()
                continue
            if raw is None:
                break
            line = clean_line(raw.decode("utf-8", "replace"))
            if line.strip():
                tail = (tail + [line])[-3:]
                progress.output(line)
            progress.tick()
        code = proc.wait()
    except BaseException:
        _kill(proc)  # Ctrl-C (or a timeout) during an install: pip or npm goes with it
        raise
    finally:
        reader.join(timeout=5)
        if not reader.is_alive():
            out.close()
    if code != 0:
        raise InstallError(f"cannot install {agent}: `{' '.join(argv[:4])} …` exited {code}: " + " | ".join(tail))


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()

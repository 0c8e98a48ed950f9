"""Pinned, cached, idempotent agent installs.

PyPI agents get their own venv (``<dir>/venv``), npm agents ``npm install --prefix <dir>``. A directory
is complete only once ``gripprobe-install.json`` is written (atomically, last), so an interrupted install
is redone, and a completed one costs a stat call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..phase import InstallRecipe
from ..errors import UserError
from ..store import atomic_write_json
from ..timeutil import utc_now_iso

MARKER = "gripprobe-install.json"


class InstallError(UserError):
    """An agent could not be installed (the registry refused, a build failed ...)."""


@dataclass(frozen=True)
class InstalledAgent:
    agent: str
    version: str
    path: Path
    executable: Path


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

    def install(self, agent: str, recipe: InstallRecipe, *, log=print) -> InstalledAgent:
        """Install ``recipe`` unless it already is; returns where. Raises InstallError with the tool's message."""
        done = self.installed(agent, recipe)
        if done:
            return done
        d = self.directory(agent, recipe)
        if d.exists():
            shutil.rmtree(d)  # an interrupted earlier attempt
        d.mkdir(parents=True)
        log(f"installing {agent}: {recipe.kind} {recipe.package} {recipe.version} into {d}")
        if recipe.kind == "pypi":
            venv = d / "venv"
            _run([sys.executable, "-m", "venv", str(venv)], agent)
            _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  f"{recipe.package}=={recipe.version}", *recipe.extra], agent)
        else:
            npm = shutil.which("npm")
            if not npm:
                raise InstallError(f"cannot install {agent}: npm is not on PATH (install Node.js and npm)")
            (d / "package.json").write_text(json.dumps({"name": f"gripprobe-{agent}", "private": True}) + "\n")
            _run([npm, "install", "--prefix", str(d), "--no-audit", "--no-fund", "--loglevel=error",
                  f"{recipe.package}@{recipe.version}", *recipe.extra], agent)
        exe = self.executable(agent, recipe)
        if not exe.exists():
            raise InstallError(f"installed {recipe.package} {recipe.version} but {exe} is missing; "
                               f"the recipe's executable name may be wrong")
        atomic_write_json(d / MARKER, {"agent": agent, "kind": recipe.kind, "package": recipe.package,
                                       "version": recipe.version, "executable": str(exe),
                                       "installed_at": utc_now_iso()})
        return InstalledAgent(agent, recipe.version, d, exe)


def _run(argv: list[str], agent: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"cannot install {agent}: {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise InstallError(f"cannot install {agent}: `{' '.join(argv[:4])} …` exited {proc.returncode}: "
                           + " | ".join(tail))

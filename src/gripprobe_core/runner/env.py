"""The agent's environment: an allowlist of the runner's variables, fresh HOME/XDG/TMPDIR, plugin additions.

The runner's own secrets never reach an agent: nothing outside :data:`ALLOWLIST` is passed on, and an API
key reaches the agent only through its plugin's ``build_env`` (from ``PhaseContext.api_key``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

ALLOWLIST: tuple[str, ...] = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME",
    "TZ", "TERM", "USER", "LOGNAME", "SHELL",
)


def base_env(home: Path, tmpdir: Path, xdg: Mapping[str, str], source: Mapping[str, str] | None = None) -> dict[str, str]:
    src = os.environ if source is None else source
    env = {k: src[k] for k in ALLOWLIST if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env["HOME"] = str(home)
    env["TMPDIR"] = str(tmpdir)
    env.update(xdg)
    env["NO_COLOR"] = "1"
    return env


def make_phase_dirs(home: Path, tmpdir: Path, xdg: Mapping[str, str]) -> None:
    for p in (home, tmpdir, *map(Path, xdg.values())):
        p.mkdir(parents=True, exist_ok=True)

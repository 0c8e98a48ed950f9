"""Continue CLI's files and environment for one isolated phase.

``cn`` keeps everything under its *global dir* (``$CONTINUE_GLOBAL_DIR``, default ``~/.continue``):
the config we hand it with ``--config``, ``sessions/<uuid>.json`` (the trajectory), ``sessions/sessions.json``
(the session index) and ``logs/cn.log`` (a winston log; ``--verbose`` makes it record every stream and
tool call state change with a timestamp). The runner gives each phase a fresh HOME, so the global dir is
``<home>/.continue`` and nothing leaks between phases.

Traps handled here (measured on 1.5.47):

- ``cn`` loads a ``.env`` from its working directory (the workspace) with dotenv, which never overrides
  a variable that is already set: every variable that matters is set explicitly, so a ``.env`` in the
  workspace cannot redirect the agent.
- The OpenAI SDK inside ``cn`` reads ``OPENAI_BASE_URL`` when no base URL is given; the config always
  gives one, and ``OPENAI_BASE_URL`` is set to the same URL in case a backend's ``env`` set another.
- Hub calls go to ``$CONTINUE_API_BASE`` (default https://api.continue.dev/); with a local config none is
  made, and the variable points at a closed local port so that a future one fails fast and stays local.
  The version check (``GET https://api.continue.dev/cn/info``) is hard-coded and cannot be turned off.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Name of Continue's global directory under HOME.
GLOBAL_DIR_NAME = ".continue"
CONFIG_NAME = "config.yaml"
#: Placeholder key when the backend has none (the oracle, a local server): ``cn`` refuses an empty one.
DUMMY_API_KEY = "gripprobe-no-key"
#: Where hub API calls (never needed with a local config) are sent: the discard port, refused at once.
CLOSED_API_BASE = "http://127.0.0.1:9/"


def global_dir(home: Path) -> Path:
    """``$CONTINUE_GLOBAL_DIR`` for a phase whose HOME is ``home``."""
    return Path(home) / GLOBAL_DIR_NAME


def config_path(home: Path) -> Path:
    """The config file passed with ``--config``."""
    return global_dir(home) / CONFIG_NAME


def sessions_dir(home: Path) -> Path:
    """Where ``cn`` writes ``<session uuid>.json`` (one per run) and ``sessions.json`` (the index)."""
    return global_dir(home) / "sessions"


def log_path(home: Path) -> Path:
    """``cn``'s own log (with ``--verbose``: timestamps of every stream and tool call state change)."""
    return global_dir(home) / "logs" / "cn.log"


def _q(value: str) -> str:
    """A YAML double-quoted scalar (JSON string syntax is a subset of it)."""
    return json.dumps(value, ensure_ascii=True)


def render_config(*, model_name: str, api_base: str, api_key: str) -> str:
    """config.yaml text: one OpenAI-compatible model with tool use, for every role ``cn`` asks for."""
    return "\n".join([
        "# Written by gripprobe-continue for one isolated benchmark phase.",
        'name: "GripProbe"',
        'version: "0.0.1"',
        "schema: v1",
        "models:",
        f"  - name: {_q(model_name)}",
        "    provider: openai",
        f"    model: {_q(model_name)}",
        f"    apiBase: {_q(api_base)}",
        f"    apiKey: {_q(api_key)}",
        "    roles: [chat, edit, apply]",
        "    capabilities: [tool_use]",
        "",
    ])


def write_config(home: Path, *, model_name: str, api_base: str, api_key: str | None) -> Path:
    """Write config.yaml under ``home`` (mode 0600: it holds the key) and return its path."""
    path = config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_config(model_name=model_name, api_base=api_base, api_key=api_key or DUMMY_API_KEY),
                    encoding="utf-8")
    path.chmod(0o600)
    return path


def agent_env(home: Path, *, api_base: str) -> dict[str, str]:
    """Variables ``cn`` needs beyond the runner's HOME/XDG: its global dir, telemetry off, the traps above."""
    return {
        "CONTINUE_GLOBAL_DIR": str(global_dir(home)),
        "CONTINUE_CLI_ENABLE_TELEMETRY": "0",
        "CONTINUE_METRICS_ENABLED": "0",
        "CONTINUE_API_BASE": CLOSED_API_BASE,
        "OPENAI_BASE_URL": api_base,
        "NODE_NO_WARNINGS": "1",
    }

"""Cline's isolated state for one phase: settings files under the phase's HOME, and its environment.

Cline keeps everything under ``$CLINE_DIR`` (default ``~/.cline``), its state under ``$CLINE_DATA_DIR``
(default ``$CLINE_DIR/data``): ``settings/providers.json`` (providers, models, keys),
``settings/global-settings.json`` (telemetry opt-out, auto-update, disabled tools), ``sessions/<id>/``
(a session's manifest and messages), ``db/`` (SQLite session index), ``logs/cline.log``. For a phase both
point under the fresh HOME; every path variable that could move a part of it elsewhere is blanked (an
empty value makes Cline fall back to the folder under ``$CLINE_DATA_DIR``). Measured on cline 3.0.65:

- **The backend**: provider ``openai-compatible`` (Chat Completions SSE at ``<baseUrl>/chat/completions``)
  with ``baseUrl`` = the phase's ``/v1`` base URL and the model, in ``providers.json``; the command line
  names the provider and model again (``-P``/``-m``). The key is not written anywhere: the provider
  reads ``OPENAI_API_KEY`` from the environment (a dummy for key-less backends, the Authorization header
  then carries it).
- **Calls home, all off** (verified with ``strace -f -e connect,sendto,sendmmsg``: with these settings a
  run makes exactly one connection, to the backend, and no DNS lookup):
  - OpenTelemetry export to otel.cline.bot (enabled at build time in the released binary, no variable
    turns it off) → ``telemetryOptOut: true`` in global-settings.json;
  - PostHog feature flags from data.cline.bot (the client is built whenever the baked-in key is set) →
    ``E2E_TEST=true``, the one switch the binary reads for it (it then uses a no-op provider);
  - the npm update check → ``CLINE_NO_AUTO_UPDATE=1`` and ``autoUpdateEnabled: false``;
  - the Cline account (api.cline.bot) is only used by the ``cline`` provider, which is never selected;
  - the hub daemon: by default a one-shot run starts (or reuses) a detached ``cline --cline-hub-daemon``
    listening on 127.0.0.1 that outlives the run → ``CLINE_SESSION_BACKEND_MODE=local`` runs the session
    in the CLI process itself; nothing is left running and nothing listens.
- **Tools**: in act mode with auto-approval (the default; ``--yolo`` is not used: in yolo mode a reply
  without a tool call does not end the run, Cline asks again and again — 3,469 requests in 10 minutes
  against a lazy model). Disabled in global-settings.json because an unattended one-shot run cannot use
  them: ``ask_question`` (asks the user), ``spawn_agent`` and the ``team_*`` tools (sub-agents and agent
  teams, which Cline's own headless yolo preset also switches off). Left as shipped: ``read_files``,
  ``search_codebase``, ``run_commands``, ``fetch_web_content``, ``editor`` (``apply_patch`` instead of
  ``editor`` for model ids containing ``gpt`` or ``codex``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Cline's provider for any OpenAI-compatible Chat Completions endpoint.
PROVIDER_ID = "openai-compatible"
#: Environment variable the provider reads its key from.
API_KEY_ENV = "OPENAI_API_KEY"
#: Key handed to key-less backends (the oracle, a local Ollama).
DUMMY_API_KEY = "gripprobe-no-key"
#: ``$CLINE_DIR`` relative to the phase's HOME (Cline's own default) and its data folder.
CLINE_DIR = ".cline"
DATA_DIR = "data"

#: Tools an unattended one-shot run cannot use (see the module docstring), by Cline's tool names.
TEAM_TOOLS: tuple[str, ...] = (
    "team_spawn_teammate", "team_shutdown_teammate", "team_status", "team_task", "team_run_task",
    "team_cancel_run", "team_list_runs", "team_await_runs", "team_send_message", "team_broadcast",
    "team_read_mailbox", "team_mission_log", "team_cleanup", "team_create_outcome",
    "team_attach_outcome_fragment", "team_review_outcome_fragment", "team_finalize_outcome", "team_list_outcomes",
)
DISABLED_TOOLS: tuple[str, ...] = ("ask_question", "spawn_agent", "teams", *TEAM_TOOLS)

#: Environment that keeps a run local and quiet (see the module docstring).
QUIET_ENV: dict[str, str] = {
    "CLINE_SESSION_BACKEND_MODE": "local",
    "CLINE_NO_AUTO_UPDATE": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "E2E_TEST": "true",
    "CLINE_DISABLE_CLINE_PASS_NOTICE": "1",
}

#: Variables that would move a part of Cline's state (or its hub) outside the phase's HOME, or switch
#: it into another mode; blanked (Cline treats an empty value as unset). A backend spec's ``env`` could
#: set them; the runner passes none of them on by itself.
OVERRIDE_ENV: tuple[str, ...] = (
    "CLINE_PROVIDER_SETTINGS_PATH", "CLINE_GLOBAL_SETTINGS_PATH", "CLINE_SESSION_DATA_DIR", "CLINE_DB_DATA_DIR",
    "CLINE_TEAM_DATA_DIR", "CLINE_MCP_SETTINGS_PATH", "CLINE_HOOKS_LOG_PATH", "CLINE_HUB_DISCOVERY_PATH",
    "CLINE_CONNECTOR_DATA_DIR", "CLINE_SANDBOX", "CLINE_SANDBOX_DATA_DIR", "CLINE_LOG_PATH", "CLINE_CAPTURE_DIR",
    "CLINE_VCR", "CLINE_VCR_CASSETTE",
    "CLINE_BIN_PATH",  # read by the npm launcher: it would run another binary
)


def cline_dir(home: Path) -> Path:
    """The phase's ``$CLINE_DIR``."""
    return home / CLINE_DIR


def data_dir(home: Path) -> Path:
    """The phase's ``$CLINE_DATA_DIR``."""
    return cline_dir(home) / DATA_DIR


def sessions_dir(home: Path) -> Path:
    """Where Cline keeps one folder per session (``<id>/<id>.json`` and ``<id>/<id>.messages.json``)."""
    return data_dir(home) / "sessions"


def build_providers(base_url: str, model_name: str) -> dict[str, Any]:
    """``providers.json``: the phase's backend as the last used (and only) provider, without a key."""
    return {
        "version": 1,
        "lastUsedProvider": PROVIDER_ID,
        "modes": {},
        "providers": {
            PROVIDER_ID: {
                "settings": {"provider": PROVIDER_ID, "model": model_name, "baseUrl": base_url},
                "updatedAt": "2026-01-01T00:00:00.000Z",
                "tokenSource": "manual",
            },
        },
    }


def build_global_settings(disabled: tuple[str, ...] = ()) -> dict[str, Any]:
    """``global-settings.json``: telemetry off, no auto-update, the unattended-run tool set, and the tools a
    case's interaction policy denies (``disabled``: not offered)."""
    return {"telemetryOptOut": True, "autoUpdateEnabled": False,
            "disabledTools": list(dict.fromkeys([*DISABLED_TOOLS, *disabled]))}


def write_config(home: Path, base_url: str, model_name: str, disabled: tuple[str, ...] = ()) -> Path:
    """Write providers.json and global-settings.json under ``home``; returns ``$CLINE_DATA_DIR``."""
    settings = data_dir(home) / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    _write_json(settings / "providers.json", build_providers(base_url, model_name))
    _write_json(settings / "global-settings.json", build_global_settings(disabled))
    return data_dir(home)


def agent_env(api_key: str | None, home: Path) -> dict[str, str]:
    """The variables Cline needs for one phase (HOME and XDG are the runner's)."""
    env = {name: "" for name in OVERRIDE_ENV}
    env.update(QUIET_ENV)
    env.update({"CLINE_DIR": str(cline_dir(home)), "CLINE_DATA_DIR": str(data_dir(home)),
                API_KEY_ENV: api_key or DUMMY_API_KEY})
    return env


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

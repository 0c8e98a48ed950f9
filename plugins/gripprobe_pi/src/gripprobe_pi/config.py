"""pi's isolated configuration for one phase: its agent folder (``models.json``, ``settings.json``) and env.

pi keeps everything in its agent folder, ``~/.pi/agent`` (``PI_CODING_AGENT_DIR``). For a phase that is
``<phase HOME>/.pi/agent``, so nothing of the machine's own pi setup (auth.json, AGENTS.md, skills,
extensions, packages, sessions) is read. Measured on @mariozechner/pi-coding-agent 0.73.1:

- **models.json** declares one custom provider, :data:`PROVIDER_ID`, speaking OpenAI Chat Completions
  (``api: openai-completions``) at the phase's ``/v1`` base URL, with one model whose id is the phase's
  model name (sent verbatim as ``model``). ``apiKey`` names the variable :data:`API_KEY_ENV`: pi uses
  the variable's value when it is set and non-empty (else the string itself), so the key never lands in
  a file. A value starting with ``!`` would be run as a shell command: a variable name never does.
- **settings.json** makes that model the default (``defaultProvider`` / ``defaultModel``, looked up
  exactly, unlike ``--model``, which is a pattern that reads ``:<level>`` as a thinking level), turns
  off the install/update ping (``enableInstallTelemetry: false``) and keeps retries low
  (:data:`RETRY`: pi's defaults turn one HTTP 500 into 12 requests over ~17 s).
- **Environment**: ``PI_OFFLINE=1`` (no start-up network at all: version check, package update checks,
  install telemetry, fd/rg downloads), and for good measure ``PI_SKIP_VERSION_CHECK=1`` and
  ``PI_TELEMETRY=0``; ``PI_CODING_AGENT_DIR`` pins the agent folder under the phase's HOME.

pi's bash tool hands its whole environment to the commands it runs (it filters nothing), so the key in
:data:`API_KEY_ENV` is visible to them, as a key in a config file under HOME would be.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Provider id under which the phase's backend is declared in models.json.
PROVIDER_ID = "gripprobe"
#: Environment variable pi reads the provider's API key from (named by models.json's ``apiKey``).
API_KEY_ENV = "GRIPPROBE_PI_API_KEY"
#: Key handed to key-less backends (the oracle, a local Ollama): the OpenAI client needs one.
DUMMY_API_KEY = "gripprobe-no-key"
#: The agent folder relative to the phase's HOME (pi's own default location).
AGENT_DIR = Path(".pi") / "agent"
#: Where pi writes its session files (``--session-dir``), inside the agent folder.
SESSIONS_DIR = "sessions"
#: Retries pi may make on its own: one agent-level retry (after 0.5 s) of one request that the OpenAI
#: client itself retries once: 4 requests in about half a second for an HTTP 500.
RETRY: dict[str, Any] = {"enabled": True, "maxRetries": 1, "baseDelayMs": 500, "provider": {"maxRetries": 1}}
#: Start-up network switches (see the module docstring).
OFFLINE_ENV: dict[str, str] = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}


def agent_dir(home: Path) -> Path:
    """The phase's pi agent folder (``PI_CODING_AGENT_DIR``)."""
    return home / AGENT_DIR


def sessions_dir(home: Path) -> Path:
    """Where the phase's session file is written (``--session-dir``)."""
    return agent_dir(home) / SESSIONS_DIR


def models_json(base_url: str, model_name: str) -> dict[str, Any]:
    """models.json for one phase. ``base_url`` is the OpenAI-style base (with ``/v1``)."""
    return {"providers": {PROVIDER_ID: {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": API_KEY_ENV,
        "models": [{"id": model_name, "name": model_name}],
    }}}


def settings_json(model_name: str) -> dict[str, Any]:
    """settings.json for one phase."""
    return {
        "defaultProvider": PROVIDER_ID,
        "defaultModel": model_name,
        "enableInstallTelemetry": False,
        "retry": RETRY,
    }


def write_config(home: Path, base_url: str, model_name: str) -> Path:
    """Write models.json and settings.json into the phase's agent folder; returns the folder."""
    root = agent_dir(home)
    root.mkdir(parents=True, exist_ok=True)
    sessions_dir(home).mkdir(parents=True, exist_ok=True)
    for name, data in (("models.json", models_json(base_url, model_name)), ("settings.json", settings_json(model_name))):
        (root / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return root


def agent_env(api_key: str | None, home: Path) -> dict[str, str]:
    """The variables pi needs for one phase (HOME/XDG are the runner's)."""
    return {"PI_CODING_AGENT_DIR": str(agent_dir(home)), API_KEY_ENV: api_key or DUMMY_API_KEY, **OFFLINE_ENV}

"""Qwen Code's isolated configuration for one phase: ``~/.qwen/settings.json`` and the environment.

Qwen Code reads ``$QWEN_HOME/settings.json`` (default ``~/.qwen``), then a machine-wide system layer
(``/etc/qwen-code/settings.json`` and ``system-defaults.json``, which outrank the user's) and the
workspace's ``.qwen/settings.json``. For a phase, ``HOME`` is the phase's fresh HOME, ``QWEN_HOME`` is
``<HOME>/.qwen`` and both system files are pointed at files under HOME that do not exist, so nothing of
the machine's own setup is read. Measured on @qwen-code/qwen-code 0.24.4:

- The backend is the OpenAI-compatible provider (auth type ``openai``: Chat Completions SSE at
  ``$OPENAI_BASE_URL/chat/completions``) with ``OPENAI_BASE_URL`` = the phase's ``/v1`` base URL,
  ``OPENAI_MODEL`` = the phase's model and ``OPENAI_API_KEY`` = its key (or a dummy: the provider
  refuses to start without one). The key travels in the environment only, never in a file or argv.
- Calls home: with usage statistics on (the default) it resolves an Aliyun RUM host
  (``*.rum.aliyuncs.com``) at start-up → ``privacy.usageStatisticsEnabled: false`` and
  ``QWEN_USAGE_STATISTICS_ENABLED=false``; OpenTelemetry → ``telemetry.enabled: false``; the npm
  self-update → ``general.enableAutoUpdate: false``; IDE companion → ``ide.enabled: false``. With these
  a whole run connects only to the phase's backend (no DNS lookup at all).
- Side requests: managed auto-memory schedules a memory-extraction agent after each user query (and a
  periodic "dream" consolidation) against the same model, with tools, in the middle of a measurement →
  ``memory.enableManagedAutoMemory`` / ``enableManagedAutoDream: false`` (HOME is fresh every phase,
  so nothing could be remembered anyway). Session titles are generated only in interactive mode
  (``QWEN_DISABLE_AUTO_TITLE=1`` keeps it so). The fast model is left unset: everything uses the main model.
- Retries: the OpenAI SDK's own retries → ``model.generationConfig.maxRetries: 0``. Qwen Code's outer
  retry loop (7 attempts, back-off 1.5 s doubling to 30 s: ~80 s for an HTTP 500) has no setting.
- ``security.folderTrust.enabled: false`` (no trust prompt); chat recording stays on (the parser reads
  the chat log).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: ``$QWEN_HOME`` relative to the phase's HOME (Qwen Code's own default location).
QWEN_DIR = ".qwen"
#: Key handed to key-less backends (the oracle, a local Ollama): the provider refuses to start without one.
DUMMY_API_KEY = "gripprobe-no-key"
#: The auth type (``--auth-type`` and ``security.auth.selectedType``): OpenAI-compatible Chat Completions.
AUTH_TYPE = "openai"
#: Where the machine-wide settings layers are looked for instead of ``/etc/qwen-code`` (never created).
SYSTEM_SETTINGS = "gripprobe-no-system-settings.json"
SYSTEM_DEFAULTS = "gripprobe-no-system-defaults.json"

#: Environment that switches off what the settings file switches off too, and the auto title.
QUIET_ENV: dict[str, str] = {
    "QWEN_USAGE_STATISTICS_ENABLED": "false",
    "QWEN_DISABLE_AUTO_TITLE": "1",
}

#: Variables pinned because Qwen Code would otherwise behave differently: ``QWEN_CODE_UNATTENDED_RETRY``
#: (``true``/``1``) turns its retry loop persistent (up to six hours on 429/529). The runner passes no
#: such variable on (allowlist), but a backend spec's ``env`` could; and Qwen Code fills a variable that is
#: unset *or empty* from a ``.env`` file in the workspace, so it is set to ``false``, not blanked (the
#: variables set here are all non-empty, so a workspace ``.env`` cannot re-route the agent either).
PINNED_ENV: dict[str, str] = {"QWEN_CODE_UNATTENDED_RETRY": "false"}


def qwen_home(home: Path) -> Path:
    """``$QWEN_HOME`` for a phase's HOME."""
    return home / QWEN_DIR


def build_settings(model_name: str, deny: list[str] | None = None) -> dict[str, Any]:
    """The ``settings.json`` contents for one phase (see the module docstring); ``deny``: the
    ``permissions.deny`` rules of a case's interaction policy (:mod:`gripprobe_qwen.policy`), none without one."""
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": AUTH_TYPE}, "folderTrust": {"enabled": False}},
        "model": {"name": model_name, "generationConfig": {"maxRetries": 0}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "chatRecording": True},
        "ide": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
    }
    if deny:
        settings["permissions"] = {"deny": list(deny)}
    return settings


def write_settings(home: Path, model_name: str, deny: list[str] | None = None) -> Path:
    """Write ``<HOME>/.qwen/settings.json``; returns its path."""
    folder = qwen_home(home)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "settings.json"
    path.write_text(json.dumps(build_settings(model_name, deny), indent=2) + "\n", encoding="utf-8")
    return path


def agent_env(api_key: str | None, home: Path, base_url: str, model_name: str) -> dict[str, str]:
    """Environment additions for the agent: the backend, the key, the quiet switches, the settings
    layers pinned under ``home``, and blanked override variables."""
    env = dict(PINNED_ENV)
    env.update(QUIET_ENV)
    env.update({
        "QWEN_HOME": str(qwen_home(home)),
        "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(qwen_home(home) / SYSTEM_SETTINGS),
        "QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(qwen_home(home) / SYSTEM_DEFAULTS),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": model_name,
        "OPENAI_API_KEY": api_key or DUMMY_API_KEY,
    })
    return env

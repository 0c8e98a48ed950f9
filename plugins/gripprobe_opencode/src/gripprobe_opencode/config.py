"""opencode's isolated configuration for one phase: the config folder and the environment.

opencode reads ``$XDG_CONFIG_HOME/opencode/opencode.json``. Everything it would otherwise fetch or
install at start-up is turned off here (measured on opencode-ai 1.18.33):

- the models.dev catalog → ``OPENCODE_DISABLE_MODELS_FETCH=1``;
- self-update → ``OPENCODE_DISABLE_AUTOUPDATE=1`` and ``autoupdate: false``;
- default plugins and LSP servers → ``OPENCODE_DISABLE_DEFAULT_PLUGINS=1``, ``OPENCODE_DISABLE_LSP_DOWNLOAD=1``;
- session sharing → ``OPENCODE_DISABLE_SHARE=1`` and ``share: "disabled"``;
- the ``npm install`` of ``@opencode-ai/plugin`` into the config folder on every start → the folder is
  pre-seeded with an empty ``node_modules/``, a ``package.json`` and a ``package-lock.json`` that
  already list that dependency;
- git snapshots of the workspace → ``snapshot: false``;
- the machine-wide "managed" config (``/etc/opencode`` on Linux, which outranks every user config) →
  ``OPENCODE_TEST_MANAGED_CONFIG_DIR`` points at an empty folder under the phase's HOME (the only
  switch this version has for that lookup).

The API key never lands in a file: the config says ``{env:GRIPPROBE_OPENCODE_API_KEY}`` (opencode
substitutes environment variables in its config) and the key travels in the agent's environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Provider id under which the phase's backend is declared (models are ``gripprobe/<model>``).
PROVIDER_ID = "gripprobe"
#: AI SDK provider package: speaks Chat Completions SSE at ``<baseURL>/chat/completions``.
PROVIDER_NPM = "@ai-sdk/openai-compatible"
#: Environment variable the config's ``apiKey`` is substituted from.
API_KEY_ENV = "GRIPPROBE_OPENCODE_API_KEY"
#: Key handed to key-less backends (the oracle, a local Ollama): the provider insists on one.
DUMMY_API_KEY = "gripprobe-no-key"
#: The plugin package opencode would ``npm install`` into its config folder when not listed.
PLUGIN_PACKAGE = "@opencode-ai/plugin"
PLUGIN_PACKAGE_VERSION = "1.18.33"

#: Context and output limits declared for the model (opencode needs them to budget the prompt).
CONTEXT_LIMIT = 131072
OUTPUT_LIMIT = 8192

#: Environment that turns off every call home at start-up (see the module docstring).
QUIET_ENV: dict[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}

#: Overrides where opencode looks for the machine-wide managed config (default ``/etc/opencode``).
MANAGED_CONFIG_ENV = "OPENCODE_TEST_MANAGED_CONFIG_DIR"
#: The empty folder, relative to the phase's HOME, handed to opencode as its managed config folder.
MANAGED_CONFIG_DIR = ".gripprobe-opencode-managed"

#: Variables that would re-route or re-configure opencode behind the config file's back. The runner
#: passes none of them on (allowlist), but an agent spec's backend ``env`` could; they are blanked.
OVERRIDE_ENV: tuple[str, ...] = (
    "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENAI_BASE_URL", "OPENAI_API_BASE",
)


def model_ref(model_name: str) -> str:
    """The ``provider/model`` reference opencode expects for ``model`` and ``small_model``."""
    return f"{PROVIDER_ID}/{model_name}"


#: The ``permission`` config without an interaction policy: every tool call approved.
DEFAULT_PERMISSION: dict[str, Any] = {"edit": "allow", "bash": "allow", "webfetch": "allow", "external_directory": "allow"}


def build_config(base_url: str, model_name: str, permission: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``opencode.json`` contents for one phase.

    ``base_url`` is the OpenAI-compatible base (with ``/v1``): the provider appends
    ``/chat/completions``. The same model serves the title request (``small_model``) and the turn.
    ``permission`` (a case's interaction policy, :mod:`gripprobe_opencode.policy`) is laid over
    :data:`DEFAULT_PERMISSION`.
    """
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER_ID: {
                "npm": PROVIDER_NPM,
                "name": "GripProbe backend",
                "options": {"baseURL": base_url, "apiKey": "{env:" + API_KEY_ENV + "}"},
                "models": {
                    model_name: {
                        "name": model_name,
                        "tool_call": True,
                        "limit": {"context": CONTEXT_LIMIT, "output": OUTPUT_LIMIT},
                    },
                },
            },
        },
        "model": model_ref(model_name),
        "small_model": model_ref(model_name),
        "permission": {**DEFAULT_PERMISSION, **(permission or {})},
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
    }


def config_dir(xdg_config_home: Path) -> Path:
    """opencode's global config folder under an XDG config home."""
    return xdg_config_home / "opencode"


def write_config(xdg_config_home: Path, base_url: str, model_name: str, permission: dict[str, Any] | None = None) -> Path:
    """Write ``opencode.json`` and the pre-seeded plugin folder; returns the ``opencode.json`` path.

    Without ``package.json`` + ``package-lock.json`` listing :data:`PLUGIN_PACKAGE` and an existing
    ``node_modules/``, opencode runs ``npm install`` in this folder on every start (slow, and a
    registry call in the middle of a measurement).
    """
    folder = config_dir(xdg_config_home)
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    _write_json(folder / "package.json", {"dependencies": {PLUGIN_PACKAGE: PLUGIN_PACKAGE_VERSION}})
    _write_json(folder / "package-lock.json", {
        "name": "opencode",
        "lockfileVersion": 3,
        "requires": True,
        "packages": {"": {"dependencies": {PLUGIN_PACKAGE: PLUGIN_PACKAGE_VERSION}}},
    })
    path = folder / "opencode.json"
    _write_json(path, build_config(base_url, model_name, permission))
    return path


def agent_env(api_key: str | None, home: Path) -> dict[str, str]:
    """Environment additions for the agent: the quiet switches, the key, blanked override variables,
    and an empty managed-config folder under ``home`` (created here)."""
    managed = home / MANAGED_CONFIG_DIR
    managed.mkdir(parents=True, exist_ok=True)
    env = {name: "" for name in OVERRIDE_ENV}
    env.update(QUIET_ENV)
    env[MANAGED_CONFIG_ENV] = str(managed)
    env[API_KEY_ENV] = api_key or DUMMY_API_KEY
    return env


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

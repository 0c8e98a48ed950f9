"""codex's isolated configuration for one phase: ``$CODEX_HOME`` (config.toml, model catalog) and env.

codex reads ``$CODEX_HOME/config.toml`` (default ``~/.codex``). For a phase, ``CODEX_HOME`` is
``<phase HOME>/.codex`` and ``HOME`` is the phase's fresh HOME, so nothing of the machine's own codex
setup (auth, AGENTS.md, skills, plugins, sessions) is read. Measured on @openai/codex 0.169.0:

- The backend is a custom provider (``model_provider = "gripprobe"``) speaking the Responses API
  (``wire_api = "responses"``; "chat" is rejected by this version) at the phase's ``/v1`` base URL,
  with its key read from :data:`API_KEY_ENV`, one request retry and one stream retry (the defaults
  turn an HTTP 500 into ~30 requests over ~28 s).
- ``approval_policy = "never"`` and ``sandbox_mode = "danger-full-access"``: the default read-only
  sandbox makes every write fail while codex still exits 0.
- Calls home are off: ``[analytics] enabled = false``, ``[features] plugins = false`` (else it
  contacts github.com and chatgpt.com), ``web_search = "disabled"``, ``check_for_update_on_startup``.
  ``[agents] enabled = false`` and ``goals = false`` drop sub-agent and goal tools the tests never need.
- Which tools codex offers depends on its model catalog. An unknown model name gets the fallback
  metadata: no ``apply_patch`` and an ``error`` item "Model metadata … not found". A catalog
  (``model_catalog_json``) naming the model brings the freeform ``apply_patch`` tool. The catalog entry is
  derived from the installed binary's own bundled catalog (``codex debug models --bundled``: the
  ``gpt-5.5`` entry, else the first with a freeform ``apply_patch``), renamed to the phase's model, so
  codex keeps its own base instructions; see :func:`catalog_template`. When the binary cannot render
  one, no catalog is written and codex runs with its fallback metadata (shell only).

The API key never lands in a file: config.toml names the variable (``env_key``), the key travels in
the agent's environment, and codex's default shell-environment policy keeps ``*KEY*`` variables out
of the commands it runs.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

#: Provider id under which the phase's backend is declared in config.toml.
PROVIDER_ID = "gripprobe"
#: Environment variable codex reads the provider's API key from (``env_key``).
API_KEY_ENV = "GRIPPROBE_CODEX_API_KEY"
#: Key handed to key-less backends (the oracle, a local Ollama): codex refuses to start without one.
DUMMY_API_KEY = "gripprobe-no-key"
#: ``$CODEX_HOME`` relative to the phase's HOME (codex's own default location).
CODEX_HOME_DIR = ".codex"
#: The model catalog file, inside ``$CODEX_HOME``.
CATALOG_FILE = "gripprobe-model-catalog.json"
#: Retries codex may make on its own (requests, then broken streams).
REQUEST_MAX_RETRIES = 1
STREAM_MAX_RETRIES = 1
#: The catalog entry preferred as the template (the one the field notes measured), then any entry
#: whose ``apply_patch_tool_type`` is this.
TEMPLATE_SLUG = "gpt-5.5"
FREEFORM = "freeform"

#: Variables that would re-route codex behind config.toml's back. The runner passes none of them on
#: (allowlist), but a backend spec's ``env`` could: :func:`agent_env` points them at this phase's
#: backend and CODEX_HOME (``OPENAI_BASE_URL`` re-routes codex's built-in openai provider;
#: ``CODEX_SQLITE_HOME`` moves its state database).
BASE_URL_ENV: tuple[str, ...] = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
SQLITE_HOME_ENV = "CODEX_SQLITE_HOME"


def codex_home(home: Path) -> Path:
    """The phase's ``$CODEX_HOME``."""
    return home / CODEX_HOME_DIR


def toml_str(value: str) -> str:
    """``value`` as a TOML basic string (quotes, backslashes and control characters escaped)."""
    out = []
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def build_config_toml(base_url: str, model_name: str, catalog: Path | None) -> str:
    """The config.toml text for one phase. ``base_url`` is the OpenAI-style base (with ``/v1``)."""
    lines = [
        "# Written by gripprobe-codex for one benchmark phase.",
        f"model = {toml_str(model_name)}",
        f"model_provider = {toml_str(PROVIDER_ID)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "check_for_update_on_startup = false",
    ]
    if catalog is not None:
        lines.append(f"model_catalog_json = {toml_str(str(catalog))}")
    lines += [
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[agents]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "goals = false",
        "",
        f"[model_providers.{PROVIDER_ID}]",
        'name = "GripProbe backend"',
        f"base_url = {toml_str(base_url)}",
        'wire_api = "responses"',
        f"env_key = {toml_str(API_KEY_ENV)}",
        f"request_max_retries = {REQUEST_MAX_RETRIES}",
        f"stream_max_retries = {STREAM_MAX_RETRIES}",
        "",
    ]
    return "\n".join(lines)


def catalog_for(template: dict[str, Any], model_name: str) -> dict[str, Any]:
    """A one-model catalog: ``template`` renamed to ``model_name``, upgrade prompts dropped."""
    entry = dict(template)
    entry.update(slug=model_name, display_name=model_name, upgrade=None, availability_nux=None)
    return {"models": [entry]}


def pick_template(catalog: Any) -> dict[str, Any] | None:
    """The template entry of a rendered catalog (see the module docstring); None when it has none."""
    models = catalog.get("models") if isinstance(catalog, dict) else None
    entries = [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    for entry in entries:
        if entry.get("slug") == TEMPLATE_SLUG and entry.get("apply_patch_tool_type") == FREEFORM:
            return entry
    for entry in entries:
        if entry.get("apply_patch_tool_type") == FREEFORM and entry.get("shell_type") == "unified_exec":
            return entry
    return None


@functools.lru_cache(maxsize=8)
def catalog_template(executable: str) -> dict[str, Any] | None:
    """The template entry from ``<executable> debug models --bundled`` (once per executable and process).

    Runs with a throw-away CODEX_HOME/HOME, stdin closed, no network needed (``--bundled``). None when
    the command fails or prints no usable catalog. Never raises.
    """
    with tempfile.TemporaryDirectory(prefix="gripprobe-codex-catalog-") as scratch:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch, "CODEX_HOME": scratch,
               "LANG": "C.UTF-8"}
        try:
            proc = subprocess.run([executable, "debug", "models", "--bundled"], env=env, cwd=scratch,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
    if proc.returncode != 0:
        return None
    try:
        return pick_template(json.loads(proc.stdout.decode("utf-8", "replace")))
    except (ValueError, RecursionError):
        return None


def write_config(home: Path, base_url: str, model_name: str, template: dict[str, Any] | None) -> Path:
    """Write ``$CODEX_HOME/config.toml`` (and the model catalog when there is a template); returns CODEX_HOME."""
    root = codex_home(home)
    root.mkdir(parents=True, exist_ok=True)
    catalog = None
    if template is not None:
        catalog = root / CATALOG_FILE
        catalog.write_text(json.dumps(catalog_for(template, model_name), ensure_ascii=False), encoding="utf-8")
    (root / "config.toml").write_text(build_config_toml(base_url, model_name, catalog), encoding="utf-8")
    return root


def agent_env(api_key: str | None, home: Path, base_url: str) -> dict[str, str]:
    """The variables codex needs for one phase (HOME/XDG are the runner's)."""
    root = str(codex_home(home))
    env = {name: base_url for name in BASE_URL_ENV}
    env.update({"CODEX_HOME": root, SQLITE_HOME_ENV: root, API_KEY_ENV: api_key or DUMMY_API_KEY})
    return env

"""Each agent's isolated configuration for one phase: files under the phase's HOME and the environment.

The facts (what each agent reads, what phones home and the switch that stops it, which model names it may
send) were measured for the agents' own GripProbe plugins and hold in ACP mode too (re-measured here: every
model call names the phase's model, and ``strace -f -e trace=connect`` shows connections to the phase's
backend only). What differs in ACP mode is the permission setting: each agent is made to *ask* (Qwen Code's
``default`` mode, opencode's ``ask``, Claude Code's ``default`` mode) so the case's policy answers.
The API key travels in the environment only, never in a file or on the command line.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

#: Key handed to key-less backends (the oracle, a local server): every agent here refuses to start without one.
DUMMY_API_KEY = "gripprobe-no-key"


def _write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ Qwen Code

#: ``$QWEN_HOME`` under the phase's HOME; the machine-wide settings layers are pointed at files that do not exist.
QWEN_DIR = ".qwen"
QWEN_AUTH_TYPE = "openai"
#: The session mode in which Qwen Code asks before every edit and shell command (its default, ``auto``, lets
#: an LLM classifier approve "safe" actions).
QWEN_MODE = "default"


def qwen_settings(model_name: str) -> dict[str, Any]:
    """``~/.qwen/settings.json``: the OpenAI-compatible provider and model, its SDK's retries off, usage statistics
    (an Aliyun RUM host), telemetry, auto-update, IDE mode and managed auto-memory (a side agent after each query)
    off, no follow-up suggestion after the turn (in ACP mode a third model request, "SUGGESTION MODE", sent
    after the prompt's answer), no folder-trust prompt, approvals asked (``tools.approvalMode: default``)."""
    return {
        "security": {"auth": {"selectedType": QWEN_AUTH_TYPE}, "folderTrust": {"enabled": False}},
        "model": {"name": model_name, "generationConfig": {"maxRetries": 0}},
        "tools": {"approvalMode": QWEN_MODE},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "ide": {"enabled": False},
        "ui": {"enableFollowupSuggestions": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
    }


def qwen_setup(home: Path, base_url: str, model_name: str, api_key: str | None) -> dict[str, str]:
    """Write Qwen Code's settings; its environment."""
    folder = home / QWEN_DIR
    _write_json(folder / "settings.json", qwen_settings(model_name))
    return {
        "QWEN_HOME": str(folder),
        "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(folder / "gripprobe-no-system-settings.json"),
        "QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(folder / "gripprobe-no-system-defaults.json"),
        "QWEN_USAGE_STATISTICS_ENABLED": "false",
        "QWEN_DISABLE_AUTO_TITLE": "1",
        "QWEN_CODE_UNATTENDED_RETRY": "false",  # "true" makes its retry loop persistent (hours)
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": model_name,
        "OPENAI_API_KEY": api_key or DUMMY_API_KEY,
    }


# ------------------------------------------------------------------------------------------- opencode

OPENCODE_PROVIDER = "gripprobe"
OPENCODE_KEY_ENV = "GRIPPROBE_OPENCODE_API_KEY"
#: The plugin package opencode would ``npm install`` into its config folder on every start unless listed.
OPENCODE_PLUGIN_PACKAGE = "@opencode-ai/plugin"
#: opencode's permission for each tool family: ``ask`` turns each call into ``session/request_permission``.
OPENCODE_PERMISSION = {"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask"}


def opencode_config(base_url: str, model_name: str) -> dict[str, Any]:
    """``opencode.json``: one ``@ai-sdk/openai-compatible`` provider (key from the environment), the same model for
    the turn and the title request (``small_model``), every call asked, no update, sharing or snapshots. A denied
    call goes back to the model as a refusal and the turn goes on (``experimental.continue_loop_on_deny``; without it
    opencode ends the turn at the first denial, as a person rejecting in its TUI would then type what to do)."""
    ref = f"{OPENCODE_PROVIDER}/{model_name}"
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {OPENCODE_PROVIDER: {
            "npm": "@ai-sdk/openai-compatible", "name": "GripProbe backend",
            "options": {"baseURL": base_url, "apiKey": "{env:" + OPENCODE_KEY_ENV + "}"},
            "models": {model_name: {"name": model_name, "tool_call": True,
                                    "limit": {"context": 131072, "output": 8192}}},
        }},
        "model": ref,
        "small_model": ref,
        "permission": dict(OPENCODE_PERMISSION),
        "experimental": {"continue_loop_on_deny": True},
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
    }


def opencode_setup(home: Path, xdg_config: Path, base_url: str, model_name: str, api_key: str | None,
                   version: str) -> dict[str, str]:
    """Write opencode's config folder (pre-seeded so it runs no ``npm install`` at start); its environment: the
    models.dev catalog, self-update, default plugins, LSP downloads and sharing off, the machine-wide managed
    config (``/etc/opencode``, which outranks the user's) pointed at an empty folder, re-routing variables blank."""
    folder = xdg_config / "opencode"
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    deps = {OPENCODE_PLUGIN_PACKAGE: version}
    _write_json(folder / "package.json", {"dependencies": deps})
    _write_json(folder / "package-lock.json", {"name": "opencode", "lockfileVersion": 3, "requires": True,
                                               "packages": {"": {"dependencies": deps}}})
    _write_json(folder / "opencode.json", opencode_config(base_url, model_name))
    managed = home / ".gripprobe-opencode-managed"
    managed.mkdir(parents=True, exist_ok=True)
    env = {name: "" for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT",
                                 "OPENAI_BASE_URL", "OPENAI_API_BASE")}
    env.update({
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_TEST_MANAGED_CONFIG_DIR": str(managed),
        OPENCODE_KEY_ENV: api_key or DUMMY_API_KEY,
    })
    return env


# ---------------------------------------------------------------------------------------- Claude Code

#: The adapter's mode in which Claude Code asks before edits and commands ("Manual"); its default is ``auto``.
CLAUDE_MODE = "default"
#: Every variable naming a model Claude Code may use (aliases, small/fast model, sub-agents, classifiers).
CLAUDE_MODEL_ENV = (
    "ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_MODEL", "ANTHROPIC_DEFAULT_FABLE_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL", "CLAUDE_CODE_WORKFLOW_SUBAGENT_MODEL", "CLAUDE_CODE_AUTO_MODE_MODEL",
    "CLAUDE_CODE_BG_CLASSIFIER_MODEL",
)
#: Telemetry, error reporting, updates, feature flags, the model catalog, surveys, marketplace, IDE: off.
CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1", "DISABLE_UPDATES": "1", "DISABLE_BUG_COMMAND": "1", "DISABLE_GROWTHBOOK": "1",
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1", "CLAUDE_CODE_ENABLE_TELEMETRY": "0", "CLAUDE_CODE_MODEL_CATALOG": "off",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    "CLAUDE_CODE_AUTO_CONNECT_IDE": "false", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1", "DISABLE_INSTALLATION_CHECKS": "1",
}


def claude_setup(home: Path, base_url: str, model_name: str, api_key: str | None, claude: str) -> dict[str, str]:
    """Write ``~/.claude.json`` (onboarding done, no IDE) and ``~/.claude``; the environment: the Anthropic wire at
    the server root, every model name the phase's, nothing phoning home, one retry, and ``claude`` the pinned
    binary the adapter drives (``CLAUDE_CODE_EXECUTABLE``; else it runs the SDK's own bundled one)."""
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    _write_json(home / ".claude.json", {"hasCompletedOnboarding": True, "autoConnectIde": False,
                                         "autoInstallIdeExtension": False})
    env = dict(CLAUDE_QUIET_ENV)
    env.update({name: model_name for name in CLAUDE_MODEL_ENV})
    env.update({
        "ANTHROPIC_BASE_URL": base_url.rstrip("/"),
        "ANTHROPIC_API_KEY": api_key or DUMMY_API_KEY,
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "false",  # else a "SUGGESTION MODE" model call after the turn
        "CLAUDE_CODE_EXECUTABLE": claude,
    })
    return env


# --------------------------------------------------------------------------------------------- codex

CODEX_PROVIDER = "gripprobe"
CODEX_KEY_ENV = "GRIPPROBE_CODEX_API_KEY"
CODEX_CATALOG = "gripprobe-model-catalog.json"
#: The adapter's starting mode: codex with no sandbox of its own and no approvals (GripProbe's bubblewrap is the
#: sandbox). Its modes that run codex's own sandbox (``agent``, ``workspace-write``) fail every command here:
#: codex refuses to create its ``codex-linux-sandbox`` helper under a temporary folder.
CODEX_MODE = "agent-full-access"


def toml_str(value: str) -> str:
    """``value`` as a TOML basic string."""
    out = []
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def codex_config_toml(base_url: str, model_name: str, catalog: Path | None) -> str:
    """``$CODEX_HOME/config.toml``: one Responses-API provider (key from the environment, one retry of each kind),
    no approvals and no codex sandbox, analytics, plugins (github.com, chatgpt.com), web search, update check,
    sub-agents and goals off."""
    lines = [
        f"model = {toml_str(model_name)}",
        f"model_provider = {toml_str(CODEX_PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "check_for_update_on_startup = false",
    ]
    if catalog is not None:
        lines.append(f"model_catalog_json = {toml_str(str(catalog))}")
    lines += ["", "[analytics]", "enabled = false", "", "[agents]", "enabled = false", "",
              "[features]", "plugins = false", "goals = false", "",
              f"[model_providers.{CODEX_PROVIDER}]", 'name = "GripProbe backend"', f"base_url = {toml_str(base_url)}",
              'wire_api = "responses"', f"env_key = {toml_str(CODEX_KEY_ENV)}",
              "request_max_retries = 1", "stream_max_retries = 1", ""]
    return "\n".join(lines)


def pick_catalog_entry(catalog: Any) -> dict[str, Any] | None:
    """From ``codex debug models --bundled``: the ``gpt-5.5`` entry with a freeform ``apply_patch``, else the first
    entry with one and a ``unified_exec`` shell; None when there is none."""
    models = catalog.get("models") if isinstance(catalog, dict) else None
    entries = [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    for entry in entries:
        if entry.get("slug") == "gpt-5.5" and entry.get("apply_patch_tool_type") == "freeform":
            return entry
    for entry in entries:
        if entry.get("apply_patch_tool_type") == "freeform" and entry.get("shell_type") == "unified_exec":
            return entry
    return None


@functools.lru_cache(maxsize=8)
def codex_catalog_entry(codex: str) -> dict[str, Any] | None:
    """The catalog entry to rename to the phase's model (codex offers ``apply_patch`` only to a model its catalog
    knows), read from the binary's own bundled catalog once per process; None when it cannot be read."""
    with tempfile.TemporaryDirectory(prefix="gripprobe-acp-codex-") as scratch:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch, "CODEX_HOME": scratch,
               "LANG": "C.UTF-8"}
        try:
            proc = subprocess.run([codex, "debug", "models", "--bundled"], env=env, cwd=scratch,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
    if proc.returncode != 0:
        return None
    try:
        return pick_catalog_entry(json.loads(proc.stdout.decode("utf-8", "replace")))
    except (ValueError, RecursionError):
        return None


def codex_setup(home: Path, base_url: str, model_name: str, api_key: str | None, codex: str,
                entry: dict[str, Any] | None) -> dict[str, str]:
    """Write ``$CODEX_HOME`` (config.toml, the one-model catalog); the environment of the adapter: the pinned
    ``codex`` (``CODEX_PATH``), its starting mode, no ChatGPT login offered, and codex's own variables."""
    root = home / ".codex"
    root.mkdir(parents=True, exist_ok=True)
    catalog = None
    if entry is not None:
        catalog = root / CODEX_CATALOG
        renamed = {**entry, "slug": model_name, "display_name": model_name, "upgrade": None, "availability_nux": None}
        catalog.write_text(json.dumps({"models": [renamed]}, ensure_ascii=False), encoding="utf-8")
    (root / "config.toml").write_text(codex_config_toml(base_url, model_name, catalog), encoding="utf-8")
    return {
        "CODEX_HOME": str(root), "CODEX_SQLITE_HOME": str(root),
        "OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url,
        CODEX_KEY_ENV: api_key or DUMMY_API_KEY,
        "CODEX_PATH": codex,
        "INITIAL_AGENT_MODE": CODEX_MODE,
        "NO_BROWSER": "1",
    }

"""mini-swe-agent's isolated environment for one phase: what it reads, where it writes, what it may not do.

mini keeps everything under the phase's fresh HOME: its global config folder (``$MSWEA_GLOBAL_CONFIG_DIR``,
set explicitly to ``$HOME/.config/mini-swe-agent``, where it would load a ``.env`` from), the one config
file GripProbe writes (:func:`write_config`: the phase's base URL and working folder, merged over mini's own
shipped config) and the trajectory it saves after every step (:func:`trajectory_path`). The API key goes to
the environment only.

Measured traps (mini-swe-agent 2.4.6, litellm 1.110.2; see the plugin README):

- Without ``MSWEA_CONFIGURED=true`` the first start runs an interactive setup (prompts on stdin).
- litellm fetches its model price map from GitHub at import unless ``LITELLM_LOCAL_MODEL_COST_MAP=True``.
- mini refuses a model without a known price (``RuntimeError: Error calculating cost``) unless
  ``MSWEA_COST_TRACKING=ignore_errors``; the cost limit is switched off on the command line (``-l 0``).
- mini retries a failed model call 10 times with an exponential back-off of 4-60 s (minutes on an HTTP
  500): ``MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT`` lowers it.
"""

from __future__ import annotations

import json
from pathlib import Path

#: A key for backends that need none (the oracle): litellm's OpenAI provider refuses to start without one.
DUMMY_API_KEY = "gripprobe-no-key"
#: Attempts per model call (mini's tenacity loop; its default is 10 with 4-60 s waits): one retry, 4 s.
RETRY_ATTEMPTS = "2"

#: Environment that keeps mini unattended, offline and quick to give up (values are not secret).
QUIET_ENV: dict[str, str] = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": RETRY_ATTEMPTS,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "PYTHONIOENCODING": "utf-8",
}

#: mini's shipped configs, per format: the tool-calling default and the text-based one.
SHIPPED_CONFIG = {"tool": "mini.yaml", "markdown": "mini_textbased.yaml"}
#: mini's model classes, per format (the text-based config names none: the class must be given).
MODEL_CLASS = {"tool": "litellm", "markdown": "litellm_textbased"}
#: litellm's provider prefix: an OpenAI-compatible server at ``api_base`` (the bare name is sent).
PROVIDER = "openai"


def config_dir(home: Path) -> Path:
    """mini's global config folder in the phase's HOME (``$MSWEA_GLOBAL_CONFIG_DIR``)."""
    return home / ".config" / "mini-swe-agent"


def config_file(home: Path) -> Path:
    """The config file GripProbe writes, merged over mini's shipped one (``-c <shipped> -c <this>``)."""
    return config_dir(home) / "gripprobe.yaml"


def trajectory_path(home: Path, phase: str) -> Path:
    """Where mini saves the phase's trajectory (``-o``), rewritten after every step."""
    return home / ".local" / "share" / "mini-swe-agent" / f"{phase}.traj.json"


def write_config(home: Path, base_url: str, workspace: Path, *, confirm: bool = False) -> Path:
    """Write the phase's config file: litellm's ``api_base`` (the phase's base URL, the recording proxy's in
    auto mode) and the folder mini runs its commands in; with ``confirm`` (a case's policy denying the shell)
    mini's confirm mode with no action whitelisted. JSON, which is YAML. Returns its path."""
    path = config_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    config: dict = {"model": {"model_kwargs": {"api_base": base_url}}, "environment": {"cwd": str(workspace)}}
    if confirm:
        config["agent"] = {"mode": "confirm", "whitelist_actions": [], "confirm_exit": False}
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


def agent_env(base_url: str, api_key: str | None, home: Path) -> dict[str, str]:
    """The variables mini needs for one phase, beyond the runner's allowlist. ``base_url`` is the
    OpenAI-compatible URL with ``/v1``; both variables litellm may read are set to it, so a stray one in the
    user's shell never bypasses the proxy. Creates mini's config folder."""
    config_dir(home).mkdir(parents=True, exist_ok=True)
    return {
        **QUIET_ENV,
        "MSWEA_GLOBAL_CONFIG_DIR": str(config_dir(home)),
        "OPENAI_API_KEY": api_key or DUMMY_API_KEY,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_BASE": base_url,
    }

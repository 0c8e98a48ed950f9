"""gptme's isolated environment for one phase: where it logs, which backend it calls, what it may not do.

gptme keeps everything under the phase's fresh HOME (the runner sets HOME and XDG_*): it writes its
default ``~/.config/gptme/config.toml`` itself on first start, from the pinned version's defaults
(the user "about" lines and project notes it puts into the system prompt come from there). We do not
write our own config file on purpose: a hand-written one would change the system prompt under test.
Everything GripProbe has to set goes through the environment instead, which gptme reads before the
config file (``Config.get_env``), and nothing secret is ever written to disk by this module.

Measured traps (gptme 0.35.1, see the plugin README):

- gptme's OpenAI client reads ``OPENAI_API_BASE`` before ``OPENAI_BASE_URL``: both are set to the
  phase's base URL (the recording proxy's in auto mode), or a stray variable would bypass the proxy.
- Without ``GPTME_TIKTOKEN_TIMEOUT=0`` it downloads a tokenizer from openaipublic.blob.core.windows.net
  (5 s wait and ~60 warnings offline).
- ``GPTME_NO_LOCAL_DISCOVERY=1``: no probing of local model servers (Ollama, LM Studio ...).
- ``GPTME_LLM_MAX_RETRIES=2``: one retry of a transient HTTP 5xx, then exit 1 (~7 s).
- Telemetry is opt-in; it is pinned off anyway.
"""

from __future__ import annotations

from pathlib import Path

#: A key for backends that need none (the oracle): gptme's OpenAI client refuses to start without one.
DUMMY_API_KEY = "gripprobe-no-key"

#: Environment that turns gptme's calls home off and keeps retries low (values are not secret).
QUIET_ENV: dict[str, str] = {
    "GPTME_TIKTOKEN_TIMEOUT": "0",
    "GPTME_NO_LOCAL_DISCOVERY": "1",
    "GPTME_LLM_MAX_RETRIES": "2",
    "GPTME_TELEMETRY_ENABLED": "false",
    "GPTME_CHECK": "false",
    "PYTHONIOENCODING": "utf-8",
}


def logs_home(home: Path) -> Path:
    """Where gptme keeps its conversation logs for a phase: ``$GPTME_LOGS_HOME`` (gptme's default
    place under ``XDG_DATA_HOME``, but set explicitly so the plugin never has to guess)."""
    return home / ".local" / "share" / "gptme" / "logs"


def agent_env(base_url: str, api_key: str | None, home: Path) -> dict[str, str]:
    """The variables gptme needs for one phase, beyond the runner's allowlist.

    ``base_url`` is the OpenAI-compatible URL with ``/v1`` (``PhaseContext.openai_base_url``).
    The key goes only into this environment (the runner never stores it). Creates the logs folder.
    """
    logs = logs_home(home)
    logs.mkdir(parents=True, exist_ok=True)
    return {
        **QUIET_ENV,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_BASE": base_url,
        "OPENAI_API_KEY": api_key or DUMMY_API_KEY,
        "GPTME_LOGS_HOME": str(logs),
    }

"""The kit for plugin authors: fixtures (a pytest plugin, entry point ``pytest11``), the driver contract
suite, and helpers that run the real ``gripprobe`` against the real oracle. Public, like
:mod:`gripprobe_core.plugin`: a plugin's tests import from here and from nothing else of the core.

See :mod:`gripprobe_core.testing.pytest_plugin` for the fixtures and docs/plugin-guide.md for a walk-through.
"""

from __future__ import annotations

from .helpers import (
    agent_spec, copy_specs, finish_gripprobe, install_agent, installed_agent, kit_specs, oracle_server, phase_context,
    read_cases, read_jsonl, read_sse_events, repo_specs, responses_user_item, run_gripprobe, start_gripprobe,
    stored_phase, stored_transcript,
)
from .._lazy import lazy_names

__all__ = [
    "DriverContract", "OracleServer", "RETRY_LIMIT", "agent_spec", "base_env", "copy_specs", "finish_gripprobe",
    "install_agent", "installed_agent", "kit_specs", "load_yaml_file", "make_plugin_manager", "oracle_server",
    "phase_context", "read_cases", "read_jsonl", "read_sse_events", "repo_specs", "responses_user_item", "run_gripprobe",
    "start_gripprobe", "stored_phase", "stored_transcript", "summarize_phase",
]

# the heavier pieces load when first used
__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".contract": ("DriverContract",), "..oracle.server": ("OracleServer",), "..oracle.profiles": ("RETRY_LIMIT",),
    "..runner.env": ("base_env",), "..specs.yaml_source": ("load_yaml_file",),
    "..pluginmanager": ("make_plugin_manager",), "..telemetry.summary": ("summarize_phase",)})

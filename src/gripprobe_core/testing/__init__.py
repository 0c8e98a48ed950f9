"""The kit for plugin authors: fixtures (a pytest plugin, entry point ``pytest11``), the driver contract
suite, and helpers that run the real ``gripprobe`` against the real oracle. Public, like
:mod:`gripprobe_core.plugin`: a plugin's tests import from here and from nothing else of the core.

See :mod:`gripprobe_core.testing.pytest_plugin` for the fixtures and docs/plugin-guide.md for a walk-through.
"""

from __future__ import annotations

from typing import Any

from .helpers import (
    agent_spec, copy_specs, finish_gripprobe, install_agent, installed_agent, kit_specs, oracle_server, phase_context,
    read_cases, read_jsonl, read_sse_events, repo_specs, responses_user_item, run_gripprobe, start_gripprobe,
    stored_phase, stored_transcript,
)

__all__ = [
    "DriverContract", "OracleServer", "RETRY_LIMIT", "agent_spec", "base_env", "copy_specs", "finish_gripprobe",
    "install_agent", "installed_agent", "kit_specs", "load_yaml_file", "make_plugin_manager", "oracle_server",
    "phase_context", "read_cases", "read_jsonl", "read_sse_events", "repo_specs", "responses_user_item", "run_gripprobe",
    "start_gripprobe", "stored_phase", "stored_transcript", "summarize_phase",
]

_LAZY = {
    "DriverContract": (".contract", "DriverContract"),
    "OracleServer": ("..oracle.server", "OracleServer"),
    "RETRY_LIMIT": ("..oracle.profiles", "RETRY_LIMIT"),
    "base_env": ("..runner.env", "base_env"),
    "load_yaml_file": ("..specs.yaml_source", "load_yaml_file"),
    "make_plugin_manager": ("..pluginmanager", "make_plugin_manager"),
    "summarize_phase": ("..telemetry.summary", "summarize_phase"),
}


def __getattr__(name: str) -> Any:  # the heavier pieces load when first used
    if name in _LAZY:
        from importlib import import_module

        module, attr = _LAZY[name]
        value = getattr(import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gripprobe_core.testing' has no attribute {name!r}")

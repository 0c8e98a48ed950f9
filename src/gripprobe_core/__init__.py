"""GripProbe core: a benchmark harness for CLI coding agents.

The public API is what this module re-exports; everything else is internal. Names load lazily, so
importing a light submodule (the reference agent starts once per phase) does not pull in pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pluggy

hookimpl = pluggy.HookimplMarker("gripprobe")
"""Decorator for hook implementations: ``from gripprobe_core import hookimpl``."""

__version__ = "0.1.0"

_CONTEXT = ("AgentCommand", "AgentInfo", "EvaluationInputs", "InstallRecipe", "MarkerPattern", "PhaseContext", "PhaseCapture",
            "RouteDecision", "ValidatorContext")
_ERRORS = ("GripProbeError", "SpecError", "UserError", "WrapperParseError")
_MODELS = (
    "BackendSpec", "CaseKey", "CaseResult", "ChallengeSpec", "CliAgentSpec", "Event", "FixtureFile",
    "HardwareProfile", "HardwareProfiles", "ModelSpec", "PhaseRecord", "ProcessResult", "SourcePointer",
    "STATUSES", "SuiteCase", "SuiteSpec", "TelemetrySummary", "TestSpec", "TIER_ORDER", "TOOL_KINDS",
    "ToolCallPayload", "ValidatorResult", "ValidatorSpec", "Verdict",
)
_WHERE = {"json_lines": ".jsonl", **{n: ".phase" for n in _CONTEXT}, **{n: ".errors" for n in _ERRORS}, **{n: ".models" for n in _MODELS}}

__all__ = ["hookimpl", "__version__", "json_lines", *_CONTEXT, *_ERRORS, *_MODELS]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gripprobe_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

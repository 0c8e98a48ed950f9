"""GripProbe core: a benchmark harness for CLI coding agents.

The public API is what this module re-exports, and :mod:`gripprobe_core.plugin` (everything a plugin
may import) with the kit :mod:`gripprobe_core.testing`; everything else is internal. Names load lazily, so
importing a light submodule (the reference agent starts once per phase) does not pull in pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pluggy

hookimpl = pluggy.HookimplMarker("gripprobe")
"""Decorator for hook implementations: ``from gripprobe_core import hookimpl``."""

__version__ = "0.2.0"

_PHASE = ("AgentCommand", "InstallRecipe", "MarkerPattern", "PhaseCapture", "PhaseContext", "RouteDecision",
          "Transcript")
_DRIVERS = ("AgentDriver", "Backend", "BaseAgentDriver")
_ERRORS = ("GripProbeError", "SpecError", "UserError", "WrapperParseError")
_MODELS = (
    "BackendSpec", "CaseKey", "CaseResult", "ChallengeSpec", "CliAgentSpec", "Event", "FixtureFile",
    "HardwareProfile", "HardwareProfiles", "ModelSpec", "PhaseRecord", "ProcessResult", "SourcePointer",
    "STATUSES", "SuiteCase", "SuiteSpec", "TelemetrySummary", "TestSpec", "TIER_ORDER", "TOOL_KINDS",
    "ToolCallPayload", "ValidatorResult", "ValidatorSpec", "Verdict",
)
_WHERE = {"json_lines": ".jsonl", "ValidatorContext": ".validators.context", "EvaluationInputs": ".evaluator",
          **{n: ".phase" for n in _PHASE}, **{n: ".drivers" for n in _DRIVERS}, **{n: ".errors" for n in _ERRORS},
          **{n: ".models" for n in _MODELS}}

__all__ = ["hookimpl", "__version__", "json_lines", "ValidatorContext", "EvaluationInputs", *_PHASE, *_DRIVERS,
           *_ERRORS, *_MODELS]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gripprobe_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

"""GripProbe core: a benchmark harness for CLI coding agents.

The public API is what this module re-exports, and :mod:`gripprobe_core.plugin` (everything a plugin
may import) with the kit :mod:`gripprobe_core.testing`; everything else is internal. Names load lazily, so
importing a light submodule (the reference agent starts once per phase) does not pull in pydantic.
"""

from __future__ import annotations

import pluggy

from ._lazy import lazy_names

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

__all__ = ["hookimpl", "__version__", "json_lines", "ValidatorContext", "EvaluationInputs", *_PHASE, *_DRIVERS,
           *_ERRORS, *_MODELS]


__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".jsonl": ("json_lines",), ".validators.context": ("ValidatorContext",), ".evaluator": ("EvaluationInputs",),
    ".phase": _PHASE, ".drivers": _DRIVERS, ".errors": _ERRORS, ".models": _MODELS})

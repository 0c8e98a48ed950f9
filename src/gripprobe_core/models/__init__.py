"""Public data models. Plugin authors import these from :mod:`gripprobe_core`.

Names load on first use (a module ``__getattr__``), so importing one model module (``models.bounds``,
``models.events``) does not build every model of the other two.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .events import Event, ToolCallPayload, TIER_ORDER
    from .results import (
        BackendProbe, CaseKey, CaseResult, PhaseRecord, ProcessResult, SourcePointer, STATUSES, TelemetrySummary,
        ValidatorResult, Verdict,
    )
    from .specs import (
        BackendSpec, ChallengeSpec, CliAgentSpec, FixtureFile, HardwareProfile, HardwareProfiles, ModelSpec,
        SuiteCase, SuiteSpec, TestSpec, TOOL_KINDS, ValidatorSpec,
    )

__all__ = [
    "BackendProbe", "BackendSpec", "CaseKey", "CaseResult", "ChallengeSpec", "CliAgentSpec", "Event", "FixtureFile",
    "HardwareProfile", "HardwareProfiles", "ModelSpec", "PhaseRecord", "ProcessResult", "SourcePointer",
    "STATUSES", "SuiteCase", "SuiteSpec", "TelemetrySummary", "TestSpec", "TIER_ORDER", "TOOL_KINDS",
    "ToolCallPayload", "ValidatorResult", "ValidatorSpec", "Verdict",
]

_WHERE = {
    **dict.fromkeys(("Event", "ToolCallPayload", "TIER_ORDER"), ".events"),
    **dict.fromkeys(("BackendProbe", "CaseKey", "CaseResult", "PhaseRecord", "ProcessResult", "SourcePointer",
                     "STATUSES", "TelemetrySummary", "ValidatorResult", "Verdict"), ".results"),
    **dict.fromkeys(("BackendSpec", "ChallengeSpec", "CliAgentSpec", "FixtureFile", "HardwareProfile",
                     "HardwareProfiles", "ModelSpec", "SuiteCase", "SuiteSpec", "TestSpec", "TOOL_KINDS",
                     "ValidatorSpec"), ".specs"),
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

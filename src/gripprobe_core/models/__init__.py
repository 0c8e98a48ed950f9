"""Public data models. Plugin authors import these from :mod:`gripprobe_core`.

Names load on first use (a module ``__getattr__``), so importing one model module (``models.bounds``,
``models.events``) does not build every model of the other two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .events import Event, ToolCallPayload, TIER_ORDER
    from .results import (
        BackendProbe, CaseKey, CaseResult, PhaseRecord, ProcessResult, SourcePointer, TelemetrySummary,
        ValidatorResult, Verdict,
    )
    from .statuses import STATUSES
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

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".events": ("Event", "ToolCallPayload", "TIER_ORDER"),
    ".results": ("BackendProbe", "CaseKey", "CaseResult", "PhaseRecord", "ProcessResult", "SourcePointer",
                 "TelemetrySummary", "ValidatorResult", "Verdict"),
    ".statuses": ("STATUSES",),
    ".specs": ("BackendSpec", "ChallengeSpec", "CliAgentSpec", "FixtureFile", "HardwareProfile", "HardwareProfiles",
               "ModelSpec", "SuiteCase", "SuiteSpec", "TestSpec", "TOOL_KINDS", "ValidatorSpec"),
})

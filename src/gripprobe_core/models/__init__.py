"""Public data models. Plugin authors import these from :mod:`gripprobe_core`."""

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

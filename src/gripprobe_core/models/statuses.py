"""The nine case statuses (SPEC.md §6), in their report order, without the models: a reader of stored results
that never builds a :class:`~gripprobe_core.models.results.CaseResult` (the aggregate, compare, the exports'
lean path) imports them from here and does not load pydantic."""

from __future__ import annotations

STATUSES: tuple[str, ...] = (
    "PASS", "PASS_WITH_POLICY_VIOLATION", "FAIL", "NO_TOOL_CALL", "TIMEOUT", "TOOL_UNSUPPORTED",
    "SHELL_ERROR", "HARNESS_ERROR", "SKIPPED",
)

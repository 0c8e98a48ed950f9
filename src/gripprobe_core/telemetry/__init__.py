"""Telemetry: merging tool evidence from tiers A–D and summarizing a phase (SPEC §5).

Pure functions only; the runner does the I/O. See ``docs/evaluator.md`` for every rule.
"""

from .attempts import (
    CONFIRMING_TIERS, RETRY_LOOP_MIN_ATTEMPTS, ToolAttempt, detect_retry_loop, repeated_after_error,
    tool_attempts, unrecovered_failures,
)
from .merge import canonical_arguments, merge_events, parse_timestamp
from .summary import TIER_CONFIDENCE, summarize_phase

__all__ = [
    "CONFIRMING_TIERS", "RETRY_LOOP_MIN_ATTEMPTS", "TIER_CONFIDENCE", "ToolAttempt", "canonical_arguments",
    "detect_retry_loop", "merge_events", "parse_timestamp", "repeated_after_error", "summarize_phase",
    "tool_attempts", "unrecovered_failures",
]

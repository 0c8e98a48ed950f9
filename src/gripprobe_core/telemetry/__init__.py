"""Telemetry: merging tool evidence from tiers A–D and summarizing a phase (SPEC §5).

Pure functions only; the runner does the I/O. See ``docs/evaluator.md`` for every rule.

Names load on first use (a module ``__getattr__``): a reader of stored results that only matches calls
(:mod:`.fidelity`) does not import the models the summary is built on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .attempts import (
        CONFIRMING_TIERS, REPEAT_LOOP_MIN_CALLS, RETRY_LOOP_MIN_ATTEMPTS, RepeatLoop, ToolAttempt, detect_repeat_loop,
        detect_retry_loop, repeat_loop, repeated_after_error, tool_attempts, unrecovered_failures,
    )
    from .merge import canonical_arguments, merge_events, parse_timestamp
    from .summary import TIER_CONFIDENCE, summarize_phase

__all__ = [
    "CONFIRMING_TIERS", "REPEAT_LOOP_MIN_CALLS", "RETRY_LOOP_MIN_ATTEMPTS", "RepeatLoop", "TIER_CONFIDENCE",
    "ToolAttempt", "canonical_arguments", "detect_repeat_loop", "detect_retry_loop", "merge_events",
    "parse_timestamp", "repeat_loop", "repeated_after_error", "summarize_phase", "tool_attempts",
    "unrecovered_failures",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".attempts": ("CONFIRMING_TIERS", "REPEAT_LOOP_MIN_CALLS", "RETRY_LOOP_MIN_ATTEMPTS", "RepeatLoop", "ToolAttempt",
                  "detect_repeat_loop", "detect_retry_loop", "repeat_loop", "repeated_after_error", "tool_attempts",
                  "unrecovered_failures"),
    ".merge": ("canonical_arguments", "merge_events", "parse_timestamp"),
    ".summary": ("TIER_CONFIDENCE", "summarize_phase"),
})

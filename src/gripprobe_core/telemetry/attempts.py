"""Tool-call attempts: the tool events of a timeline grouped into one record per call.

An *attempt* is one tool call: its ``tool_call_start`` (if seen) and its ``tool_call_result`` (if
seen). Results are linked to starts by ``tool_call_id``; a result without a matching id goes to the
oldest start of the same tool name still waiting for a result (any name when the result has none);
a result that matches no start is an attempt of its own. See ``docs/evaluator.md``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..models.events import TIER_ORDER, Event
from .merge import call_name, call_signature

__all__ = [
    "CONFIRMING_TIERS", "FAILED_STATUSES", "REPEAT_LOOP_MIN_CALLS", "RETRY_LOOP_MIN_ATTEMPTS", "RepeatLoop",
    "ToolAttempt", "detect_repeat_loop", "detect_retry_loop", "repeat_loop", "repeated_after_error", "tool_attempts",
    "unrecovered_failures",
]

#: Tiers whose evidence can confirm that a tool was executed (D is self-report: never).
CONFIRMING_TIERS: frozenset[str] = frozenset({"A", "B", "C"})
#: Result statuses that count as a failed attempt.
FAILED_STATUSES: frozenset[str] = frozenset({"error", "timeout"})
#: Identical consecutive failing attempts that make a retry loop.
RETRY_LOOP_MIN_ATTEMPTS = 3
#: Identical consecutive calls, none failed, that make a repeat loop when the phase ends on them.
REPEAT_LOOP_MIN_CALLS = 3

_TERMINAL = frozenset({"success", "error", "timeout"})


@dataclass
class ToolAttempt:
    """One tool call as seen in the timeline."""

    name: str
    signature: tuple[str, str]
    position: int
    """Index of the attempt's first event in the timeline."""
    start: Event | None = None
    result: Event | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def status(self) -> str | None:
        """The result's status; else a terminal status the start carries; else None (no outcome)."""
        if self.result is not None:
            return self.result.status
        if self.start is not None and self.start.status in _TERMINAL:
            return self.start.status
        return None

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status == "success"

    @property
    def executed(self) -> bool:
        """Evidence of execution: a result at tier B/C, a tier-A result answering a tier-A start (a call the
        model made), or a start at tier B/C.

        A tier-A start alone is the model *asking* for the call (the proxy saw the request, not its
        execution); a tier-A result without the model's call answers nothing the model asked; tier D is
        self-report. None of them confirms.
        """
        if self.result is not None and self.result.source_tier in CONFIRMING_TIERS:
            if self.result.source_tier != "A" or (self.start is not None and self.start.source_tier == "A"):
                return True
        return self.start is not None and self.start.source_tier in ("B", "C")

    @property
    def claim_tier(self) -> str | None:
        """Best tier that *claims* the call ran (a result at any tier, a start at B/C/D), or None."""
        tiers = []
        if self.result is not None:
            tiers.append(self.result.source_tier)
        if self.start is not None and self.start.source_tier != "A":
            tiers.append(self.start.source_tier)
        return min(tiers, key=lambda t: TIER_ORDER.get(t, 99)) if tiers else None

    @property
    def kind(self) -> str | None:
        for event in (self.start, self.result):
            if event is not None and isinstance(event.payload, dict) and isinstance(event.payload.get("kind"), str):
                return event.payload["kind"]
        return None

    @property
    def requested_only(self) -> bool:
        """A start the proxy saw (tier A) with no result and no B/C evidence that it ran."""
        return (self.result is None and self.start is not None and self.start.source_tier == "A"
                and not self.executed)

    @property
    def tiers(self) -> set[str]:
        return {e.source_tier for e in self.events}


def tool_attempts(events: list[Event], *, include_tier_d: bool = True) -> list[ToolAttempt]:
    """Group the tool events of ``events`` (timeline order) into attempts, in order of first event."""
    attempts: list[ToolAttempt] = []
    by_id: dict[str, ToolAttempt] = {}
    waiting: deque[ToolAttempt] = deque()
    for position, event in enumerate(events):
        if not event.is_tool_event() or (event.source_tier == "D" and not include_tier_d):
            continue
        if event.event_type == "tool_call_start":
            attempt = ToolAttempt(call_name(event), call_signature(event), position, start=event, events=[event])
            attempts.append(attempt)
            waiting.append(attempt)
            if event.tool_call_id and event.tool_call_id not in by_id:
                by_id[event.tool_call_id] = attempt
            continue
        attempt = _owner_of_result(event, by_id, waiting)
        if attempt is None:
            attempt = ToolAttempt(call_name(event), call_signature(event), position, result=event, events=[event])
            attempts.append(attempt)
            continue
        attempt.result = event
        attempt.events.append(event)
        waiting.remove(attempt)
    return attempts


def _owner_of_result(result: Event, by_id: dict[str, ToolAttempt], waiting: deque[ToolAttempt]) -> ToolAttempt | None:
    if result.tool_call_id:
        owner = by_id.get(result.tool_call_id)
        if owner is not None and owner.result is None:
            return owner
    name = call_name(result)
    for attempt in waiting:
        if not name or attempt.name == name:
            return attempt
    return None


def detect_retry_loop(events: list[Event]) -> bool:
    """True when the same failing call is blindly repeated.

    Rule: among the tool attempts of tiers A/B/C in timeline order, ``RETRY_LOOP_MIN_ATTEMPTS`` (3)
    or more *consecutive* attempts with the same name and canonical arguments all failed (result
    status ``error`` or ``timeout``). Any other attempt in between breaks the run. So fail → fail →
    fail is a loop; fail → success (same call) is a recovery; the same tool name with different
    arguments is not a loop; tier-D self-reports never count.
    """
    run = 0
    previous: tuple[str, str] | None = None
    for attempt in tool_attempts(events, include_tier_d=False):
        if attempt.failed:
            run = run + 1 if (run and attempt.signature == previous) else 1
        else:
            run = 0
        previous = attempt.signature
        if run >= RETRY_LOOP_MIN_ATTEMPTS:
            return True
    return False


@dataclass(frozen=True)
class RepeatLoop:
    """The identical calls the phase's tool timeline ended on (:func:`repeat_loop`)."""

    name: str
    signature: tuple[str, str]
    calls: int
    """How many of them have a result (the calls that ran and came back); at least :data:`REPEAT_LOOP_MIN_CALLS`."""


def repeat_loop(events: list[Event]) -> RepeatLoop | None:
    """The repeat loop the phase ended in, or None.

    Rule: among the tool attempts of tiers A/B/C in timeline order, the phase's *last* attempts have the same
    name and canonical arguments, none of them failed, and at least ``REPEAT_LOOP_MIN_CALLS`` (3) of them came
    back with a result (status ``success`` or ``unknown``, or a start carrying ``success``). A call of the same
    signature with no outcome yet (the model asked again and the phase ended before it ran) neither counts nor
    breaks the run; any other attempt (another call, or a failure: that is :func:`detect_retry_loop`'s) ends it.
    So ``cat a`` × 12 until the timeout is a loop; ``cat a`` × 3 then ``write`` is not (the agent got out);
    tier-D self-reports never count.
    """
    signature: tuple[str, str] | None = None
    name, calls = "", 0
    for attempt in tool_attempts(events, include_tier_d=False):
        if attempt.failed:
            signature, calls = None, 0
            continue
        if attempt.signature != signature:
            signature, name, calls = attempt.signature, attempt.name, 0
        if attempt.status is not None:
            calls += 1
    if signature is None or calls < REPEAT_LOOP_MIN_CALLS:
        return None
    return RepeatLoop(name, signature, calls)


def detect_repeat_loop(events: list[Event]) -> int:
    """How many identical calls the phase ended repeating (:func:`repeat_loop`), 0 when it did not."""
    loop = repeat_loop(events)
    return loop.calls if loop is not None else 0


def repeated_after_error(events: list[Event]) -> bool:
    """True when a call (same name and arguments) is issued again after an attempt of it failed.

    This is the ``no_retry_on_error`` test rule: one blind retry already counts. Tiers A/B/C only.
    """
    failed: set[tuple[str, str]] = set()
    for attempt in tool_attempts(events, include_tier_d=False):
        if attempt.signature in failed:
            return True
        if attempt.failed:
            failed.add(attempt.signature)
    return False


def unrecovered_failures(attempts: list[ToolAttempt]) -> list[ToolAttempt]:
    """Failed attempts not followed by any later successful attempt (of any tool)."""
    last_success = max((i for i, a in enumerate(attempts) if a.succeeded), default=-1)
    return [a for i, a in enumerate(attempts) if a.failed and i > last_success]

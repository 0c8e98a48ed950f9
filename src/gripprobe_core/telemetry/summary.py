"""Per-phase telemetry summary (SPEC §5): from merged events to ``events.summary.json``.

:func:`summarize_phase` is pure: it reads the merged events of one phase plus what the runner knows
about its sources (parser capability, capture failures, proxy outcome) and fills every field of
:class:`~gripprobe_core.models.results.TelemetrySummary`. The rules are in ``docs/evaluator.md``.
"""

from __future__ import annotations

from typing import Literal

from ..models.events import TIER_ORDER, Event
from ..models.results import EventCaptureStatus, ProxyStatus, TelemetrySummary, ToolEventVerdict, ToolEventVerdictReason
from .attempts import ToolAttempt, detect_repeat_loop, detect_retry_loop, tool_attempts
from .merge import merge_events

__all__ = ["TIER_CONFIDENCE", "UPSTREAM_REASONS", "detect_retry_loop", "merge_events", "summarize_phase"]

Observability = Literal["structured", "markers", "none"]

#: Why a proxy that ran and recorded every exchange still reports ``error``: an exchange failed upstream
#: (``gripprobe_core.proxy.server.UPSTREAM_ERRORS``). Every byte the agent received went through the proxy's
#: observer, so its record still holds every call the model sent: the wire still witnesses the phase.
UPSTREAM_REASONS: frozenset[str] = frozenset({"proxy_connect_error", "upstream_reset", "upstream_malformed",
                                              "upstream_timeout"})

#: telemetry_invoked_confidence by the tier of the best claim that a tool ran.
TIER_CONFIDENCE: dict[str, float] = {"A": 1.0, "B": 0.9, "C": 0.7, "D": 0.3, "none": 0.0}


def _best(tiers: list[str] | set[str]) -> str | None:
    return min(tiers, key=lambda t: TIER_ORDER.get(t, 99)) if tiers else None


def summarize_phase(
    events: list[Event],
    *,
    observability: Observability,
    capture_missing: bool,
    parse_error: bool,
    proxy_status: ProxyStatus = "skipped",
    proxy_skip_reason: str | None = "disabled",
    proxy_structured_count: int | None = None,
    proxy_nonstructured_count: int = 0,
    proxy_orphan_result_count: int = 0,
    backend_tool_unsupported: bool = False,
    capture_skip_reason: str | None = None,
    wire_witnessed: bool = False,
) -> TelemetrySummary:
    """Summarize one phase's merged events (see :func:`merge_events`).

    ``observability`` is what the agent's outputs can show (``AgentInfo.observability``);
    ``capture_missing``: required telemetry artifacts were not produced or are unreadable;
    ``parse_error``: a parser raised ``WrapperParseError``; ``proxy_*``: the phase proxy's outcome
    (``proxy_structured_count`` None means "count the tier-A starts" when the proxy collected;
    ``proxy_orphan_result_count``: results the agent sent that answer no call a model made, which the proxy's
    tier A already left out);
    ``wire_witnessed``: every real tool call of this agent and format travels structured on the wire (the
    format is not in the driver's ``calls_off_wire``), so when the proxy watched the phase (collected; ran and
    saw no traffic at all; or ran and an exchange failed upstream, :data:`UPSTREAM_REASONS`) only calls tier A
    saw can count as run.
    """
    attempts = tool_attempts(events)
    executed = [a for a in attempts if a.executed]
    unwitnessed = 0
    proxy_watched = (proxy_status == "collected" or (proxy_status == "skipped" and proxy_skip_reason == "capture_missing")
                     or (proxy_status == "error" and proxy_skip_reason in UPSTREAM_REASONS))
    if wire_witnessed and proxy_watched:  # the proxy ran; a model call it did not see did not happen
        seen = [a for a in executed if a.start is not None and a.start.source_tier == "A"]
        unwitnessed, executed = len(executed) - len(seen), seen
    has_tool_events = any(e.is_tool_event() for e in events)
    verdict, reason = _tool_verdict(
        executed=bool(executed), has_tool_events=has_tool_events, observability=observability,
        capture_missing=capture_missing, parse_error=parse_error, proxy_status=proxy_status)

    claim_tier = _best([t for a in attempts if (t := a.claim_tier) is not None])
    confirm_tier = _best([t for a in executed if (t := a.claim_tier) is not None])
    if verdict == "confirmed_tool_use" and confirm_tier is not None:
        source_tier = confirm_tier
    else:
        source_tier = claim_tier or _best({e.source_tier for e in events}) or "none"
    confidence_tier = confirm_tier if verdict == "confirmed_tool_use" else (claim_tier if claim_tier == "D" else None)

    if proxy_structured_count is None and proxy_status == "collected":
        proxy_structured_count = sum(
            1 for e in events if e.event_type == "tool_call_start" and e.source_tier == "A")

    return TelemetrySummary(
        event_capture_status=_capture_status(capture_missing, parse_error, proxy_status),
        telemetry_proxy_status=proxy_status,
        telemetry_capture_skip_reason=capture_skip_reason or (
            "wrapper_parse_error" if parse_error else "capture_missing" if capture_missing else None),
        telemetry_proxy_skip_reason=None if proxy_status == "collected" else proxy_skip_reason,
        telemetry_source_tier=source_tier,  # type: ignore[arg-type]
        telemetry_event_count=len(events),
        telemetry_tool_call_count=len(attempts),
        telemetry_proxy_tool_call_nonstructured_count=max(0, int(proxy_nonstructured_count or 0)),
        telemetry_tool_result_count=sum(1 for a in attempts if a.result is not None),
        telemetry_tool_error_count=sum(1 for a in attempts if a.failed),
        telemetry_invoked_confidence=TIER_CONFIDENCE[confidence_tier or "none"],
        telemetry_retry_loop_detected=detect_retry_loop(events),
        telemetry_repeat_loop_count=detect_repeat_loop(events),
        telemetry_tool_call_without_result_count=sum(1 for a in attempts if a.requested_only),
        telemetry_tool_call_unwitnessed_count=unwitnessed,
        telemetry_tool_result_orphan_count=max(0, int(proxy_orphan_result_count or 0)),
        telemetry_backend_tool_unsupported=bool(backend_tool_unsupported),
        telemetry_protocol_structured_count=proxy_structured_count,
        tool_event_verdict=verdict,
        tool_event_verdict_reason=reason,
        tool_kinds_observed=_kinds(executed),
        # every tier that saw something, also those whose copy of an event the merge kept from a better tier
        tiers_present=sorted({t for e in events for t in (e.seen_by or [e.source_tier])},
                             key=lambda t: TIER_ORDER.get(t, 99)),
    )


def _tool_verdict(*, executed: bool, has_tool_events: bool, observability: str, capture_missing: bool,
                  parse_error: bool, proxy_status: str) -> tuple[ToolEventVerdict, ToolEventVerdictReason]:
    """The tool-event verdict, first matching rule wins (order documented in docs/evaluator.md)."""
    if parse_error:
        return "tool_event_inconclusive", "wrapper_parse_error"
    if capture_missing:
        return "tool_event_inconclusive", "capture_missing"
    if executed:
        return "confirmed_tool_use", "none"
    if proxy_status == "error":
        return "tool_event_inconclusive", "proxy_error"
    if has_tool_events:  # tier-D self-reports, or calls requested (tier A) that never ran
        return "tool_event_inconclusive", "source_parse_inconclusive"
    if observability == "structured" or proxy_status == "collected":
        return "no_tool_event_observed", "structured_event_absent"
    return "tool_event_not_observable", "parser_not_capable_for_shell"


def _capture_status(capture_missing: bool, parse_error: bool, proxy_status: str) -> EventCaptureStatus:
    if parse_error:
        return "wrapper_parse_error"
    if capture_missing:
        return "missing"
    if proxy_status == "error":
        return "partial"
    return "collected"


def _kinds(executed: list[ToolAttempt]) -> list[str]:
    return sorted({k for a in executed if (k := a.kind) is not None})

"""The canonical verdict layer (SPEC §6): ``event_evaluator`` and its status matrix.

Everything here is a pure function of its inputs. The status matrix is data (the module-level
tables below) so that it can be read, reviewed and property-tested row by row; ``docs/evaluator.md``
states the same rules in prose, plus every derived field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .models.events import Event
from .models.results import (
    ProcessResult, ProcessStatus, Status, TelemetrySummary, ToolEventVerdict, ToolEventVerdictReason, Trajectory,
    ValidatorResult, Verdict,
)
from .telemetry.attempts import (
    ToolAttempt, detect_retry_loop, repeat_loop, repeated_after_error, tool_attempts, unrecovered_failures,
)

__all__ = [
    "BACKEND_UNREACHABLE", "BUDGET_EXCEEDED", "DENIAL_VIOLATED", "EvaluationInputs", "INTERACTION_NOT_APPLIED", "Evaluator", "MODEL_NOT_UNDER_TEST", "EVALUATOR_NAME",
    "FAILURE_REASON_BY_CODE", "HARNESS_REASONS", "MALFORMED_ERROR_TYPES", "NONZERO_EXIT", "OFF_TABLE",
    "OVERALL_SCORE", "PRECEDENCE", "PROCESS_ROWS", "REPEAT_LOOP_CODES", "TOOL_MATRIX", "classify",
    "event_evaluator",
]

EVALUATOR_NAME = "event_evaluator"
"""The name :func:`event_evaluator` is registered under (by the core's default plugin of that name): the
judge of every case whose suite names none, and its verdicts' ``verdict_source``."""


@dataclass(frozen=True)
class EvaluationInputs:
    """Everything the evaluator reads."""

    validators: list[ValidatorResult]
    process: ProcessResult
    events: list[Event]
    summary: Any  # TelemetrySummary (or its dict, from a stored run)
    required_kinds: list[Any] = field(default_factory=list)
    rules: Mapping[str, Any] = field(default_factory=dict)
    """The test's rules (``no_retry_on_error`` ...), as in its spec."""
    harness_error: str | None = None
    """A failure_reason the runner found that makes the measurement invalid whatever the agent did
    (``proxy_required_but_not_available``, ``validator_error``, ``artifact_tampered`` ...): HARNESS_ERROR."""
    tool_unsupported: str | None = None
    """Set when the case cannot run: 'agent_tool_unsupported' (capabilities) or 'backend_tool_unsupported'."""
    backend_unreachable: bool = False
    """The harness itself found the model backend unreachable at the end of the measured phase (its probe
    right after the phase, or the recording proxy's last attempt to reach it). Never set from what the
    agent says: the agent's failure is then the backend's, HARNESS_ERROR ``backend_unreachable``."""
    budget_exceeded: bool = False
    """The measured phase spent its token budget: the recording proxy refused a model call and the harness
    stopped the agent (TIMEOUT ``budget_exceeded``, whatever else the phase shows)."""
    model_not_under_test: bool = False
    """In the measured phase the agent asked for a model other than the case's: the recording proxy refused
    the call (or the oracle's own record shows another profile answered). FAIL ``model_not_under_test``,
    whatever else the phase shows: no verdict is credited to another model."""
    interaction: Any = None
    """The case's case.json ``interaction`` record (policy, how the driver met it, ``applied``, ``denies``,
    ``violations``), or None when the case has no policy. A policy that can deny a call and was not applied:
    TOOL_UNSUPPORTED ``interaction_not_applied`` (never a silent pass); a denial that did not hold: FAIL
    ``denied_call_ran`` / ``denied_change_landed`` (docs/evaluator.md, "Denials that must hold")."""


Evaluator = Callable[[EvaluationInputs], "Verdict"]
"""A judge: ``fn(inputs) -> Verdict``, registered by name (:func:`gripprobe_core.hookspecs.register_evaluators`)."""


PASS = "PASS"
PWPV = "PASS_WITH_POLICY_VIOLATION"

#: Order in which the evaluator decides; the first that applies wins.
PRECEDENCE: tuple[str, ...] = (
    "model_not_under_test", "backend_unreachable", "budget_exceeded", "timeout", "shell_error", "harness_capture_failed",
    "tool_unsupported", "interaction_not_applied", "denial_violated", "nonzero_exit", "tool_verdict")

#: The case's policy can deny a call, and its driver could not apply it (the agent ran with approvals off):
#: whether a denial holds was not measured, so the case cannot pass, and it is not the agent's failure either.
INTERACTION_NOT_APPLIED: tuple[Status, str] = ("TOOL_UNSUPPORTED", "interaction_not_applied")

#: A denial did not hold: a denied call ran (``denied_call_ran``) or its change is in the workspace
#: (``denied_change_landed``). FAIL whatever the validators say: the agent did what it was refused.
DENIAL_VIOLATED: Status = "FAIL"

#: The agent asked for a model other than the case's (:attr:`EvaluationInputs.model_not_under_test`): whatever it
#: achieved is not the case's model's, so nothing is credited, and the case stays in n (a refusal must never
#: turn into TOOL_UNSUPPORTED, SKIPPED or a harness problem that flatters the row).
MODEL_NOT_UNDER_TEST: tuple[Status, str] = ("FAIL", "model_not_under_test")

#: The backend was found unreachable after the phase (a harness fact, :attr:`EvaluationInputs.backend_unreachable`):
#: the agent's outcome is not its own, unless the process ended ok with every validator passing (the job
#: was done before the backend went away), which the rest of the table then judges as usual.
BACKEND_UNREACHABLE: tuple[Status, str] = ("HARNESS_ERROR", "backend_unreachable")

#: The phase spent its token budget (:attr:`EvaluationInputs.budget_exceeded`): the agent ran out of its
#: allowance as at a timeout, whatever the validators and the evidence say.
BUDGET_EXCEEDED: tuple[Status, str] = ("TIMEOUT", "budget_exceeded")

#: Process results that decide the status whatever validators and tool evidence say: (status, reason code).
PROCESS_ROWS: dict[str, tuple[Status, str]] = {
    "timeout": ("TIMEOUT", "timeout"),
    "shell_error": ("SHELL_ERROR", "process_error"),
    "harness_capture_failed": ("HARNESS_ERROR", "capture_missing"),
}

#: nonzero_exit is SHELL_ERROR whatever the validators say. The reason code is
#: ``validators_pass_after_nonzero`` when validators passed with confirmed tool use, else ``nonzero_exit``.
NONZERO_EXIT: Status = "SHELL_ERROR"

#: Process ``ok``: (validators pass?, tool_event_verdict, tool_event_verdict_reason) → status.
#: ``"*"`` as reason means any reason. The reason code of these rows is the verdict reason itself.
TOOL_MATRIX: dict[tuple[bool, str, str], Status] = {
    (True, "confirmed_tool_use", "*"): "PASS",
    (True, "no_tool_event_observed", "structured_event_absent"): "PASS_WITH_POLICY_VIOLATION",
    (True, "tool_event_not_observable", "parser_not_capable_for_shell"): "PASS_WITH_POLICY_VIOLATION",
    (True, "tool_event_inconclusive", "proxy_error"): "PASS_WITH_POLICY_VIOLATION",
    (True, "tool_event_inconclusive", "source_parse_inconclusive"): "PASS_WITH_POLICY_VIOLATION",
    (True, "tool_event_inconclusive", "wrapper_parse_error"): "HARNESS_ERROR",
    (True, "tool_event_inconclusive", "capture_missing"): "HARNESS_ERROR",
    (False, "confirmed_tool_use", "*"): "FAIL",
    (False, "no_tool_event_observed", "structured_event_absent"): "NO_TOOL_CALL",
    (False, "tool_event_not_observable", "parser_not_capable_for_shell"): "FAIL",
    (False, "tool_event_inconclusive", "source_parse_inconclusive"): "FAIL",
    (False, "tool_event_inconclusive", "proxy_error"): "FAIL",
    (False, "tool_event_inconclusive", "wrapper_parse_error"): "HARNESS_ERROR",
    (False, "tool_event_inconclusive", "capture_missing"): "HARNESS_ERROR",
}

#: Verdict reasons that make the case HARNESS_ERROR whatever the verdict and validators are.
HARNESS_REASONS: frozenset[str] = frozenset({"wrapper_parse_error", "capture_missing"})

#: A (verdict, reason) pair the telemetry summary never produces (e.g. no_tool_event_observed with
#: proxy_error) is treated as inconclusive evidence: never PASS, never NO_TOOL_CALL.
OFF_TABLE: dict[bool, Status] = {True: "PASS_WITH_POLICY_VIOLATION", False: "FAIL"}

OVERALL_SCORE: dict[str, float] = {"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}

#: failure_reason for the process / harness / capability rows, by reason code.
FAILURE_REASON_BY_CODE: dict[str, str] = {
    "timeout": "timeout",
    "process_error": "process_error",
    "capture_missing": "capture_missing",
    "wrapper_parse_error": "wrapper_parse_error",
    "nonzero_exit": "nonzero_exit",
    "validators_pass_after_nonzero": "nonzero_exit",
    "backend_tool_unsupported": "backend_tool_unsupported",
    "agent_tool_unsupported": "agent_tool_unsupported",
    "backend_unreachable": "backend_unreachable",
    "budget_exceeded": "budget_exceeded",
    "model_not_under_test": "model_not_under_test",
    "interaction_not_applied": "interaction_not_applied",
    "denied_call_ran": "denied_call_ran",
    "denied_change_landed": "denied_change_landed",
}

#: ``error_type`` values parsers use for a tool call whose arguments could not be decoded.
MALFORMED_ERROR_TYPES: frozenset[str] = frozenset({"malformed_arguments", "invalid_arguments", "protocol_malformed"})

#: Reason codes of a phase that ran out (the timeout, or the agent gave up: a nonzero exit) whose failure_reason is
#: ``tool_repeat_loop`` when the phase ended repeating one call: the loop is why it ran out. The status stays.
REPEAT_LOOP_CODES: frozenset[str] = frozenset({"timeout", "nonzero_exit", "validators_pass_after_nonzero"})

_PROCESS_STATUSES = frozenset({"ok", "timeout", "shell_error", "harness_capture_failed", "nonzero_exit"})


def classify(validators_pass: bool, process: ProcessStatus, verdict: ToolEventVerdict,
             reason: ToolEventVerdictReason, tool_unsupported: str | None = None,
             backend_unreachable: bool = False, budget_exceeded: bool = False,
             model_not_under_test: bool = False, interaction_not_applied: bool = False,
             denial_violated: str | None = None) -> tuple[Status, str]:
    """The SPEC §6 status matrix: ``(status, evaluator_reason_code)``.

    Precedence: another model asked for (:data:`MODEL_NOT_UNDER_TEST`) > backend unreachable (unless process ok
    and validators pass, see :data:`BACKEND_UNREACHABLE`)
    > the token budget spent (:data:`BUDGET_EXCEEDED`) > timeout > shell_error > harness_capture_failed > tool_unsupported
    > a policy not applied (:data:`INTERACTION_NOT_APPLIED`) > a denial violated (:data:`DENIAL_VIOLATED`, the reason
    code is ``denial_violated``: ``denied_call_ran`` or ``denied_change_landed``) > nonzero_exit > validators × tool
    verdict: the exact :data:`TOOL_MATRIX` row, else :data:`HARNESS_REASONS`, else the row for any reason
    (``"*"``), else :data:`OFF_TABLE`. The reason code of a tool row is ``reason``.
    Raises ``ValueError`` only for a process status outside the contract (a bug, not bad data).
    """
    if process not in _PROCESS_STATUSES:
        raise ValueError(f"unknown process status {process!r}")
    if model_not_under_test:
        return MODEL_NOT_UNDER_TEST
    if backend_unreachable and not (process == "ok" and validators_pass):
        return BACKEND_UNREACHABLE
    if budget_exceeded:
        return BUDGET_EXCEEDED
    if process in PROCESS_ROWS:
        return PROCESS_ROWS[process]
    if tool_unsupported:
        return "TOOL_UNSUPPORTED", tool_unsupported
    if interaction_not_applied:
        return INTERACTION_NOT_APPLIED
    if denial_violated:
        return DENIAL_VIOLATED, denial_violated
    if process == "nonzero_exit":
        confirmed = verdict == "confirmed_tool_use"
        return NONZERO_EXIT, "validators_pass_after_nonzero" if (validators_pass and confirmed) else "nonzero_exit"
    status = TOOL_MATRIX.get((validators_pass, verdict, reason))
    if status is None and reason in HARNESS_REASONS:
        status = "HARNESS_ERROR"
    if status is None:
        status = TOOL_MATRIX.get((validators_pass, verdict, "*"), OFF_TABLE[validators_pass])
    return status, reason


def event_evaluator(inputs: EvaluationInputs) -> Verdict:
    """Every verdict field of one case, from validators, process result, events and summary.

    ``inputs.rules`` may carry ``no_retry_on_error`` (one blind retry after an error violates the
    trajectory); ``inputs.harness_error`` (a failure_reason string: the runner found the measurement
    invalid, e.g. ``proxy_required_but_not_available``) makes the case HARNESS_ERROR whatever else.
    """
    summary = _summary(inputs.summary)
    rules = inputs.rules or {}
    validators = list(inputs.validators or [])
    passed = sum(1 for v in validators if v.passed)
    validators_pass = bool(validators) and passed == len(validators)
    verdict, reason = summary.tool_event_verdict, summary.tool_event_verdict_reason
    confirmed = verdict == "confirmed_tool_use"
    tool_unsupported = inputs.tool_unsupported or (
        "backend_tool_unsupported" if summary.telemetry_backend_tool_unsupported and not confirmed else None)
    harness_error = inputs.harness_error or None
    not_applied, violated = _interaction(inputs.interaction)

    status: Status
    if harness_error:
        status, code = "HARNESS_ERROR", harness_error
    else:
        status, code = classify(validators_pass, inputs.process.status, verdict, reason, tool_unsupported,
                                bool(inputs.backend_unreachable), bool(inputs.budget_exceeded),
                                bool(inputs.model_not_under_test), not_applied, violated)

    events = list(inputs.events or [])
    attempts = tool_attempts(events, include_tier_d=False)
    loop = summary.telemetry_retry_loop_detected or detect_retry_loop(events)
    repeat = repeat_loop(events)
    repeats = summary.telemetry_repeat_loop_count or (repeat.calls if repeat is not None else 0)
    failure = _failure_reason(status, code, summary, attempts, events, loop, repeats > 0, harness_error)
    text = _reason_text(status, code, summary, passed, len(validators), inputs.process.exit_code)
    if failure == "tool_repeat_loop":
        text += " " + _repeat_text(repeat.signature if repeat is not None else None, repeats)
    return Verdict(
        verdict_source=EVALUATOR_NAME,
        status=status,
        evaluator_reason_code=code,
        evaluator_reason_text=text,
        failure_reason=failure,
        trajectory=_trajectory(status, inputs.process.status, attempts, events, loop,
                               bool(rules.get("no_retry_on_error"))),
        invoked="yes" if confirmed else "no" if verdict == "no_tool_event_observed" else "maybe",
        artifact_match=passed / len(validators) if validators else 0.0,
        tool_invocation_match=1.0 if confirmed else 0.0,
        protocol_match=_protocol_match(summary),
        strict_pass_score=1.0 if status == PASS else 0.0,
        overall_score=OVERALL_SCORE.get(status, 0.0),
        tool_event_verdict=verdict,
        tool_event_verdict_reason=reason,
    )


def _interaction(record: Any) -> tuple[bool, str | None]:
    """(policy not applied though it can deny, the first violation's reason code) from case.json's record."""
    if record is None:
        return False, None
    get = record.get if isinstance(record, Mapping) else (lambda k, d=None: getattr(record, k, d))
    not_applied = bool(get("denies", False)) and not bool(get("applied", False))
    found = [str(v) for v in (get("violations", None) or [])]
    return not_applied, (found[0].split(":", 1)[0].strip() if found else None)


def _summary(value: Any) -> TelemetrySummary:
    """The summary as a model; a missing or unreadable summary means the capture is missing."""
    if isinstance(value, TelemetrySummary):
        return value
    if isinstance(value, dict):
        try:
            return TelemetrySummary.model_validate(value)
        except ValueError:
            pass
    return TelemetrySummary(event_capture_status="missing", telemetry_capture_skip_reason="capture_missing",
                            tool_event_verdict="tool_event_inconclusive", tool_event_verdict_reason="capture_missing")


def _failure_reason(status: str, code: str, summary: TelemetrySummary, attempts: list[ToolAttempt],
                    events: list[Any], loop: bool, repeat: bool, harness_error: str | None) -> str | None:
    """First matching entry of the failure taxonomy (order documented in docs/evaluator.md)."""
    if status == PASS:
        return None
    if harness_error:
        return harness_error
    if repeat and code in REPEAT_LOOP_CODES:
        return "tool_repeat_loop"
    if code in ("model_not_under_test", "denied_call_ran", "denied_change_landed") or status not in (
            PWPV, "FAIL", "NO_TOOL_CALL"):
        return FAILURE_REASON_BY_CODE.get(code, code)
    if loop:
        return "tool_retry_loop"
    if repeat:
        return "tool_repeat_loop"
    if summary.telemetry_proxy_tool_call_nonstructured_count > 0 or any(
            e.error_type in MALFORMED_ERROR_TYPES for e in events if e.source_tier != "D"):
        return "protocol_malformed"
    if unrecovered_failures(attempts):
        return "tool_result_error"
    if summary.telemetry_tool_call_without_result_count > 0:
        return "tool_call_without_result"
    if summary.tool_event_verdict == "no_tool_event_observed":
        return "no_tool_call_observed"
    if summary.tool_event_verdict == "confirmed_tool_use":
        return "artifact_mismatch_after_success"
    return summary.tool_event_verdict_reason


def _trajectory(status: str, process: str, attempts: list[ToolAttempt], events: list[Any], loop: bool,
                no_retry_on_error: bool) -> Trajectory:
    """clean | recovered | violated, from the tier A/B/C tool timeline."""
    if process == "timeout" or loop or (no_retry_on_error and repeated_after_error(events)):
        return "violated"
    if not any(a.failed for a in attempts):
        return "clean"
    if status in (PASS, PWPV) and not unrecovered_failures(attempts):
        return "recovered"
    return "violated"


def _protocol_match(summary: TelemetrySummary) -> float | None:
    structured = summary.telemetry_protocol_structured_count
    if structured is None:
        return None
    nonstructured = summary.telemetry_proxy_tool_call_nonstructured_count
    total = structured + nonstructured
    return structured / total if total > 0 else None


_TEXT: dict[str, str] = {
    "timeout": "The agent process timed out, so the case was not judged further.",
    "process_error": "The agent process could not start or crashed before a reliable result.",
    "capture_missing": "Telemetry artifacts were not produced or are unreadable, so tool use cannot be judged.",
    "wrapper_parse_error": "A required agent artifact could not be parsed, so tool use cannot be judged.",
    "backend_tool_unsupported": "The backend cannot perform tool calls (it rejected the tools offered).",
    "agent_tool_unsupported": "The agent cannot perform the tool kinds this test requires.",
    "backend_unreachable": "The model backend stopped answering the harness during the phase, so the outcome "
                           "says nothing about the agent.",
    "model_not_under_test": "The agent asked for a model other than the one under test; the proxy refused it, "
                            "and nothing the phase achieved is credited to this model.",
    "budget_exceeded": "The phase spent its token budget (--max-tokens-per-phase): the proxy refuses further "
                       "model calls and the harness stopped the agent.",
    "interaction_not_applied": "The case's interaction policy can deny calls, but this agent's driver could not "
                               "apply it (the agent ran with its approvals off), so whether a denial holds was "
                               "not measured.",
    "denied_call_ran": "A call the interaction policy denied ran anyway (the agent's own output reports it done).",
    "denied_change_landed": "A file change the interaction policy denied is in the workspace all the same.",
    "nonzero_exit": "The agent exited with status {exit_code}, so the result is not reliable.",
    "validators_pass_after_nonzero":
        "The validators passed and tool use was confirmed, but the agent exited with status {exit_code}.",
}

_TOOL_TEXT: dict[tuple[str, bool], str] = {
    ("none", True): "The validators passed ({passed}/{total}) and tier {tier} evidence confirms tool use.",
    ("none", False): "Tier {tier} evidence confirms tool use, but the validators failed ({passed}/{total}).",
    ("structured_event_absent", True):
        "The validators passed ({passed}/{total}), but no tool event was observed although the sources could see one.",
    ("structured_event_absent", False):
        "The validators failed ({passed}/{total}) and no tool event was observed although the sources could see one.",
    ("parser_not_capable_for_shell", True):
        "The validators passed ({passed}/{total}), but this agent's tool use cannot be observed.",
    ("parser_not_capable_for_shell", False):
        "The validators failed ({passed}/{total}) and this agent's tool use cannot be observed.",
    ("proxy_error", True):
        "The validators passed ({passed}/{total}), but the proxy failed and no other source confirms tool use.",
    ("proxy_error", False):
        "The validators failed ({passed}/{total}); the proxy failed and no other source confirms tool use.",
    ("source_parse_inconclusive", True):
        "The validators passed ({passed}/{total}), but the tool evidence is inconclusive "
        "(self-report, or calls requested but never run).",
    ("source_parse_inconclusive", False):
        "The validators failed ({passed}/{total}) and the tool evidence is inconclusive "
        "(self-report, or calls requested but never run).",
}


REPEAT_TEXT_ARGS = 80
"""How much of a repeated call's canonical arguments the reason text quotes."""


def _repeat_text(signature: tuple[str, str] | None, calls: int) -> str:
    """The sentence a repeat loop adds to the reason text (the call quoted when the events name it)."""
    call = ""
    if signature is not None:
        name, args = signature
        args = args if len(args) <= REPEAT_TEXT_ARGS else args[:REPEAT_TEXT_ARGS - 1] + "…"
        call = f"`{name} {args}` "
    return (f"The phase ended repeating one call: {call}{calls} times in a row with the same arguments, "
            "none of them failed.")


def _reason_text(status: str, code: str, summary: TelemetrySummary, passed: int, total: int,
                 exit_code: int | None) -> str:
    """One human sentence explaining ``(status, code)``."""
    values = {"passed": passed, "total": total, "tier": summary.telemetry_source_tier,
              "exit_code": "unknown" if exit_code is None else exit_code}
    if code in _TEXT:
        return _TEXT[code].format(**values)
    key = ("none" if summary.tool_event_verdict == "confirmed_tool_use" else code, status in (PASS, PWPV))
    if key in _TOOL_TEXT:
        return _TOOL_TEXT[key].format(**values)
    if status == "HARNESS_ERROR":
        return f"The harness could not produce a trustworthy measurement ({code})."
    return f"Status {status} ({code})."

"""The SPEC §6 status matrix, stated here independently of gripprobe_core.evaluator's own tables.

The expected rows below are copied from SPEC §6 by hand; nothing is imported from the
implementation's tables. Flip a row in ``evaluator.TOOL_MATRIX`` and these tests fail.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings, strategies as st

from gripprobe_core.evaluator import EvaluationInputs
from gripprobe_core.evaluator import classify, event_evaluator
from gripprobe_core.models.events import Event
from gripprobe_core.models.results import STATUSES, ProcessResult, ValidatorResult
from gripprobe_core.telemetry.attempts import tool_attempts
from gripprobe_core.telemetry.summary import summarize_phase

PROCESSES = ["ok", "timeout", "shell_error", "harness_capture_failed", "nonzero_exit"]
VERDICTS = ["confirmed_tool_use", "no_tool_event_observed", "tool_event_not_observable", "tool_event_inconclusive"]
REASONS = ["none", "parser_not_capable_for_shell", "capture_missing", "proxy_error", "structured_event_absent",
           "wrapper_parse_error", "source_parse_inconclusive"]
UNSUPPORTED = [None, "backend_tool_unsupported", "agent_tool_unsupported"]
ANY = object()

# (validators pass, process, tool_event_verdict, reason, expected status, expected reason code) — SPEC §6.
SPEC_ROWS: list[tuple[Any, Any, Any, Any, str, Any]] = [
    (ANY, "timeout", ANY, ANY, "TIMEOUT", "timeout"),
    (ANY, "shell_error", ANY, ANY, "SHELL_ERROR", "process_error"),
    (ANY, "harness_capture_failed", ANY, ANY, "HARNESS_ERROR", "capture_missing"),
    (True, "nonzero_exit", "confirmed_tool_use", "none", "SHELL_ERROR", "validators_pass_after_nonzero"),
    (True, "ok", "confirmed_tool_use", "none", "PASS", "none"),
    (True, "ok", "no_tool_event_observed", "structured_event_absent", "PASS_WITH_POLICY_VIOLATION",
     "structured_event_absent"),
    (True, "ok", "tool_event_not_observable", "parser_not_capable_for_shell", "PASS_WITH_POLICY_VIOLATION",
     "parser_not_capable_for_shell"),
    (True, "ok", "tool_event_inconclusive", "proxy_error", "PASS_WITH_POLICY_VIOLATION", "proxy_error"),
    (True, "ok", "tool_event_inconclusive", "source_parse_inconclusive", "PASS_WITH_POLICY_VIOLATION",
     "source_parse_inconclusive"),
    (False, "ok", "confirmed_tool_use", "none", "FAIL", "none"),
    (False, "ok", "no_tool_event_observed", "structured_event_absent", "NO_TOOL_CALL", "structured_event_absent"),
    (False, "ok", "tool_event_not_observable", "parser_not_capable_for_shell", "FAIL", "parser_not_capable_for_shell"),
    (False, "ok", "tool_event_inconclusive", "source_parse_inconclusive", "FAIL", "source_parse_inconclusive"),
    (False, "ok", "tool_event_inconclusive", "proxy_error", "FAIL", "proxy_error"),
    (False, "ok", "tool_event_inconclusive", "wrapper_parse_error", "HARNESS_ERROR", "wrapper_parse_error"),
    (False, "ok", "tool_event_inconclusive", "capture_missing", "HARNESS_ERROR", "capture_missing"),
    # Side rules: wrapper_parse_error / capture_missing are HARNESS_ERROR whatever the validators say;
    # nonzero_exit is SHELL_ERROR whether the validators pass or fail.
    (True, "ok", "tool_event_inconclusive", "wrapper_parse_error", "HARNESS_ERROR", "wrapper_parse_error"),
    (True, "ok", "tool_event_inconclusive", "capture_missing", "HARNESS_ERROR", "capture_missing"),
    (False, "nonzero_exit", ANY, ANY, "SHELL_ERROR", "nonzero_exit"),
    (True, "nonzero_exit", "no_tool_event_observed", ANY, "SHELL_ERROR", "nonzero_exit"),
    (True, "nonzero_exit", "tool_event_not_observable", ANY, "SHELL_ERROR", "nonzero_exit"),
    (True, "nonzero_exit", "tool_event_inconclusive", ANY, "SHELL_ERROR", "nonzero_exit"),
]

# The (verdict, reason) pairs the telemetry summary produces.
CONSISTENT_PAIRS = [
    ("confirmed_tool_use", "none"), ("no_tool_event_observed", "structured_event_absent"),
    ("tool_event_not_observable", "parser_not_capable_for_shell"), ("tool_event_inconclusive", "proxy_error"),
    ("tool_event_inconclusive", "source_parse_inconclusive"), ("tool_event_inconclusive", "wrapper_parse_error"),
    ("tool_event_inconclusive", "capture_missing"),
]

ALL_INPUTS = list(itertools.product([True, False], PROCESSES, VERDICTS, REASONS, UNSUPPORTED))


def _expand(value: Any, domain: list[Any]) -> list[Any]:
    return list(domain) if value is ANY else [value]


def test_every_spec_row_holds() -> None:
    checked = 0
    for validators, process, verdict, reason, status, code in SPEC_ROWS:
        for v, p, ver, r in itertools.product(_expand(validators, [True, False]), _expand(process, PROCESSES),
                                              _expand(verdict, VERDICTS), _expand(reason, REASONS)):
            assert classify(v, p, ver, r) == (status, code), (v, p, ver, r)
            checked += 1
    assert checked > 100


def test_consistent_inputs_are_all_covered_by_a_spec_row() -> None:
    """Every combination the pipeline can produce (process ok/nonzero, consistent pair) has a row."""
    for v, p, (verdict, reason) in itertools.product([True, False], PROCESSES, CONSISTENT_PAIRS):
        rows = [row for row in SPEC_ROWS
                if row[0] in (ANY, v) and row[1] in (ANY, p) and row[2] in (ANY, verdict) and row[3] in (ANY, reason)]
        assert rows, (v, p, verdict, reason)
        assert len({(row[4], row[5]) for row in rows}) == 1
        assert classify(v, p, verdict, reason) == rows[0][4:]


def test_every_combination_yields_exactly_one_known_status() -> None:
    for combo in ALL_INPUTS:
        status, code = classify(*combo)
        assert status in STATUSES and status != "SKIPPED"
        assert isinstance(code, str) and code
        assert classify(*combo) == (status, code)  # deterministic


def test_pass_only_when_validators_pass_process_ok_and_confirmed() -> None:
    for combo in ALL_INPUTS:  # exhaustive: 840 combinations
        validators, process, verdict, reason, unsupported = combo
        status, _ = classify(*combo)
        if status == "PASS":
            assert validators and process == "ok" and verdict == "confirmed_tool_use" and unsupported is None, combo
            assert reason not in ("wrapper_parse_error", "capture_missing"), combo
        if status == "PASS_WITH_POLICY_VIOLATION":
            assert validators and process == "ok" and verdict != "confirmed_tool_use", combo
            assert reason not in ("wrapper_parse_error", "capture_missing"), combo


def test_precedence_timeout_shell_error_harness_capture_then_unsupported_then_nonzero() -> None:
    for v, verdict, reason, unsupported in itertools.product([True, False], VERDICTS, REASONS, UNSUPPORTED):
        assert classify(v, "timeout", verdict, reason, unsupported)[0] == "TIMEOUT"
        assert classify(v, "shell_error", verdict, reason, unsupported)[0] == "SHELL_ERROR"
        assert classify(v, "harness_capture_failed", verdict, reason, unsupported)[0] == "HARNESS_ERROR"
        if unsupported:
            for process in ("ok", "nonzero_exit"):
                assert classify(v, process, verdict, reason, unsupported) == ("TOOL_UNSUPPORTED", unsupported)


def test_nonzero_exit_is_never_pass() -> None:
    for v, verdict, reason in itertools.product([True, False], VERDICTS, REASONS):
        assert classify(v, "nonzero_exit", verdict, reason)[0] == "SHELL_ERROR"


def test_harness_reasons_are_harness_error_whatever_validators_and_verdict_say() -> None:
    for v, verdict, reason in itertools.product([True, False], VERDICTS, ["wrapper_parse_error", "capture_missing"]):
        assert classify(v, "ok", verdict, reason) == ("HARNESS_ERROR", reason)


def test_no_tool_call_only_from_positive_structured_absence() -> None:
    for v, verdict, reason in itertools.product([True, False], VERDICTS, REASONS):
        is_ntc = classify(v, "ok", verdict, reason)[0] == "NO_TOOL_CALL"
        assert is_ntc == (not v and verdict == "no_tool_event_observed" and reason == "structured_event_absent")
        if reason == "parser_not_capable_for_shell":
            assert not is_ntc


# ------------------------------------------------------------------ event-level properties

NAMES = ["shell", "write", "read"]
ARGS = [{"cmd": "ls"}, {"path": "a.txt"}, '{"cmd": "ls"}', None]


@st.composite
def events(draw: Any, tiers: list[str], min_size: int = 0) -> list[Event]:
    n = draw(st.integers(min_value=min_size, max_value=8))
    out = []
    for i in range(n):
        event_type = draw(st.sampled_from(["tool_call_start", "tool_call_result", "model_response"]))
        tier = draw(st.sampled_from(tiers))
        out.append(Event(
            event_type=event_type, event_id=f"e{i}", source_tier=tier, source="proxy" if tier == "A" else "wrapper",
            tool_call_id=draw(st.sampled_from([None, "c1", "c2"])),
            payload={} if event_type == "model_response" else {
                "name": draw(st.sampled_from(NAMES)), "kind": "execute", "arguments": draw(st.sampled_from(ARGS))},
            status=draw(st.sampled_from(["started", "success", "error", "timeout", "unknown"])),
        ))
    return out


def _confirming(tier: str, event_type: str) -> Event:
    return Event(event_type=event_type, event_id="confirm", source_tier=tier, source="wrapper",
                 payload={"name": "write", "kind": "write", "arguments": {"path": "x"}}, status="success")


def _evaluate(evs: list[Event], summary: Any, validators_pass: bool, process: str) -> Any:
    return event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file", passed=validators_pass)],
        process=ProcessResult(status=process, exit_code=0 if process == "ok" else 1),
        events=evs, summary=summary))


observability = st.sampled_from(["structured", "markers", "none"])
proxy_status = st.sampled_from(["collected", "skipped", "error"])


@settings(max_examples=150, deadline=None)
@given(events(["D"]), observability, proxy_status, st.booleans(), st.sampled_from(PROCESSES))
def test_tier_d_alone_never_confirms(evs: list[Event], obs: str, proxy: str, validators_pass: bool,
                                     process: str) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy)
    verdict = _evaluate(evs, summary, validators_pass, process)
    assert summary.tool_event_verdict != "confirmed_tool_use"
    assert verdict.status != "PASS" and verdict.invoked != "yes" and verdict.tool_invocation_match == 0.0
    assert summary.telemetry_invoked_confidence <= 0.3


@settings(max_examples=150, deadline=None)
@given(events(["A", "B", "C", "D"]), st.sampled_from(["B", "C"]),
       st.sampled_from(["tool_call_start", "tool_call_result"]), st.integers(0, 8), observability)
def test_proxy_error_never_undoes_a_lower_tier_confirmation(evs: list[Event], tier: str, event_type: str,
                                                            at: int, obs: str) -> None:
    evs = evs[:at] + [_confirming(tier, event_type)] + evs[at:]
    with_error = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False,
                                 proxy_status="error", proxy_skip_reason="proxy_connect_error")
    without = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False)
    assert with_error.tool_event_verdict == without.tool_event_verdict == "confirmed_tool_use"
    assert with_error.event_capture_status == "partial"
    assert _evaluate(evs, with_error, True, "ok").status == "PASS"


@settings(max_examples=100, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans())
def test_nonzero_exit_is_never_pass_for_any_timeline(evs: list[Event], obs: str, proxy: str, vp: bool) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy)
    assert _evaluate(evs, summary, vp, "nonzero_exit").status == "SHELL_ERROR"


@settings(max_examples=100, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans(),
       st.sampled_from(["parse", "missing", "both"]), st.sampled_from(["ok", "harness_capture_failed"]))
def test_parse_error_and_capture_missing_are_always_harness_error(evs: list[Event], obs: str, proxy: str, vp: bool,
                                                                  which: str, process: str) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=which != "parse",
                              parse_error=which != "missing", proxy_status=proxy)
    assert summary.event_capture_status in ("missing", "wrapper_parse_error")
    assert _evaluate(evs, summary, vp, process).status == "HARNESS_ERROR"


@settings(max_examples=150, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from(PROCESSES))
def test_any_timeline_yields_one_status_and_pass_needs_everything(
        evs: list[Event], obs: str, proxy: str, missing: bool, parse: bool, vp: bool, process: str) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=missing, parse_error=parse, proxy_status=proxy)
    verdict = _evaluate(evs, summary, vp, process)
    assert verdict.status in STATUSES
    if verdict.status == "PASS":
        assert vp and process == "ok" and summary.tool_event_verdict == "confirmed_tool_use"
        assert any(e.source_tier in "ABC" for e in evs if e.is_tool_event())


# ------------------------------------------------------------------ backend unreachable (a harness fact)

BACKEND_ROW = ("HARNESS_ERROR", "backend_unreachable")


def test_backend_unreachable_is_harness_error_unless_the_process_ended_ok_and_validators_passed() -> None:
    for combo in ALL_INPUTS:  # exhaustive
        validators, process, _verdict, _reason, _unsupported = combo
        got = classify(*combo, backend_unreachable=True)
        if process == "ok" and validators:
            assert got == classify(*combo), combo  # the job was done: judged as if the backend were fine
        else:
            assert got == BACKEND_ROW, combo  # above timeout, process errors, tool_unsupported, nonzero exit


# ------------------------------------------------------------------ token budget spent (a harness fact)

BUDGET_ROW = ("TIMEOUT", "budget_exceeded")


def test_a_spent_budget_is_timeout_whatever_else_unless_the_backend_was_unreachable() -> None:
    for combo in ALL_INPUTS:  # exhaustive
        assert classify(*combo, budget_exceeded=True) == BUDGET_ROW, combo
        validators, process, *_ = combo
        both = classify(*combo, backend_unreachable=True, budget_exceeded=True)
        assert both == (BUDGET_ROW if process == "ok" and validators else BACKEND_ROW), combo


@settings(max_examples=100, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans(), st.sampled_from(PROCESSES))
def test_a_spent_budget_is_never_a_pass_and_says_so(evs: list[Event], obs: str, proxy: str, vp: bool,
                                                    process: str) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy)
    v = event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file", passed=vp)],
        process=ProcessResult(status=process, exit_code=0 if process == "ok" else 1), events=evs,
        summary=summary, budget_exceeded=True))
    assert (v.status, v.evaluator_reason_code, v.failure_reason) == ("TIMEOUT", "budget_exceeded", "budget_exceeded")
    assert v.strict_pass_score == v.overall_score == 0.0 and "token budget" in v.evaluator_reason_text


@settings(max_examples=150, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans(), st.sampled_from(PROCESSES),
       st.sampled_from([None, "backend_tool_unsupported", "agent_tool_unsupported"]))
def test_a_dead_backend_is_never_blamed_on_the_agent(evs: list[Event], obs: str, proxy: str, vp: bool, process: str,
                                                     unsupported: str | None) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy)

    def judge(unreachable: bool) -> Any:
        return event_evaluator(EvaluationInputs(
            validators=[ValidatorResult(kind="file", passed=vp)],
            process=ProcessResult(status=process, exit_code=0 if process == "ok" else 1), events=evs,
            summary=summary, tool_unsupported=unsupported, backend_unreachable=unreachable))

    dead, alive = judge(True), judge(False)
    if process == "ok" and vp:
        assert dead == alive
    else:
        assert dead.status not in ("SHELL_ERROR", "TIMEOUT", "FAIL", "NO_TOOL_CALL")
        assert (dead.status, dead.evaluator_reason_code) == BACKEND_ROW
        assert dead.failure_reason == "backend_unreachable"
        assert dead.strict_pass_score == dead.overall_score == 0.0


# ---------------------------------------------- another model asked for (the proxy's refusal, a harness fact)

SWAP_ROW = ("FAIL", "model_not_under_test")


def test_another_model_asked_for_is_fail_whatever_else_even_a_dead_backend_or_a_spent_budget() -> None:
    for combo in ALL_INPUTS:  # exhaustive, with every other harness fact on and off
        for unreachable, budget in itertools.product([False, True], [False, True]):
            got = classify(*combo, backend_unreachable=unreachable, budget_exceeded=budget,
                           model_not_under_test=True)
            assert got == SWAP_ROW, combo  # never TOOL_UNSUPPORTED (out of n), never PASS


@settings(max_examples=150, deadline=None)
@given(events(["A", "B", "C", "D"]), observability, proxy_status, st.booleans(), st.sampled_from(PROCESSES),
       st.sampled_from([None, "backend_tool_unsupported", "agent_tool_unsupported"]), st.booleans())
def test_a_swapped_model_is_never_credited_and_stays_in_n(evs: list[Event], obs: str, proxy: str, vp: bool,
                                                         process: str, unsupported: str | None,
                                                         backend_says_no_tools: bool) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy,
                              backend_tool_unsupported=backend_says_no_tools)
    v = event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file", passed=vp)],
        process=ProcessResult(status=process, exit_code=0 if process == "ok" else 1), events=evs,
        summary=summary, tool_unsupported=unsupported, model_not_under_test=True))
    assert (v.status, v.evaluator_reason_code, v.failure_reason) == ("FAIL", "model_not_under_test",
                                                                      "model_not_under_test")
    assert v.strict_pass_score == v.overall_score == 0.0
    assert "model other than the one under test" in v.evaluator_reason_text


def test_without_a_swap_nothing_changes() -> None:
    for combo in ALL_INPUTS:
        assert classify(*combo, model_not_under_test=False) == classify(*combo), combo


# ------------------------------------------------- a repeat loop (issue 22): the reason, never the status

LOOP_CALL = {"name": "read", "kind": "read", "arguments": {"path": "notes.txt"}}


def _loop_call(i: int, tier: str = "B", status: str = "success") -> list[Event]:
    return [Event(event_type=t, event_id=f"loop{i}{t}", source_tier=tier,
                  source="proxy" if tier == "A" else "wrapper", tool_call_id=f"loop{i}", payload=dict(LOOP_CALL),
                  status="started" if t == "tool_call_start" else status)
            for t in ("tool_call_start", "tool_call_result")]


# (process, validators pass) -> (status, reason code, failure_reason) for a phase ending on the same successful
# call five times (confirmed, tier B) — stated here from docs/evaluator.md, not from the evaluator's tables.
REPEAT_ROWS: dict[tuple[str, bool], tuple[str, str, str | None]] = {
    ("timeout", True): ("TIMEOUT", "timeout", "tool_repeat_loop"),
    ("timeout", False): ("TIMEOUT", "timeout", "tool_repeat_loop"),
    ("nonzero_exit", True): ("SHELL_ERROR", "validators_pass_after_nonzero", "tool_repeat_loop"),
    ("nonzero_exit", False): ("SHELL_ERROR", "nonzero_exit", "tool_repeat_loop"),
    ("shell_error", True): ("SHELL_ERROR", "process_error", "process_error"),
    ("shell_error", False): ("SHELL_ERROR", "process_error", "process_error"),
    ("harness_capture_failed", True): ("HARNESS_ERROR", "capture_missing", "capture_missing"),
    ("harness_capture_failed", False): ("HARNESS_ERROR", "capture_missing", "capture_missing"),
    ("ok", True): ("PASS", "none", None),
    ("ok", False): ("FAIL", "none", "tool_repeat_loop"),
}
#: The same rows without the loop (two calls only): what the reason would otherwise be.
NO_REPEAT_FAILURE: dict[str, str] = {"timeout": "timeout", "nonzero_exit": "nonzero_exit",
                                     "shell_error": "process_error", "harness_capture_failed": "capture_missing",
                                     "ok": "artifact_mismatch_after_success"}


def test_every_repeat_loop_row_holds_and_the_status_never_moves() -> None:
    loop = [e for i in range(5) for e in _loop_call(i)]
    short = [e for i in range(2) for e in _loop_call(i)]
    for (process, vp), (status, code, failure) in REPEAT_ROWS.items():
        summary = summarize_phase(loop, observability="structured", capture_missing=False, parse_error=False)
        assert summary.telemetry_repeat_loop_count == 5
        v = _evaluate(loop, summary, vp, process)
        assert (v.status, v.evaluator_reason_code, v.failure_reason) == (status, code, failure), (process, vp)
        plain = _evaluate(short, summarize_phase(short, observability="structured", capture_missing=False,
                                                 parse_error=False), vp, process)
        assert (plain.status, plain.evaluator_reason_code) == (status, code), (process, vp)  # the loop moves no status
        assert plain.failure_reason == (None if status == "PASS" else NO_REPEAT_FAILURE[process]), (process, vp)


def _ends_repeating(evs: list[Event]) -> bool:
    """The rule as docs/evaluator.md states it, read backwards from the phase's end over its A/B/C attempts."""
    attempts = tool_attempts(evs, include_tier_d=False)
    if not attempts:
        return False
    last = attempts[-1].signature
    came_back = 0
    for attempt in reversed(attempts):
        if attempt.signature != last or attempt.failed:
            break
        came_back += attempt.status is not None
    return came_back >= 3


@st.composite
def looping(draw: Any) -> list[Event]:
    """Random events, then a run of the same call (some may fail, some be another tier), maybe one more asked for."""
    head = draw(events(["A", "B", "C", "D"]))
    tail: list[Event] = []
    for i in range(draw(st.integers(0, 6))):
        tail += _loop_call(i, draw(st.sampled_from(["A", "B", "C", "D"])),
                           draw(st.sampled_from(["success", "success", "unknown", "error"])))
    if draw(st.booleans()):
        tail.append(Event(event_type="tool_call_start", event_id="asked", source_tier="A", source="proxy",
                          tool_call_id="asked", payload=dict(LOOP_CALL), status="started"))
    return head + tail


@settings(max_examples=300, deadline=None)
@given(looping(), observability, proxy_status, st.booleans(), st.sampled_from(PROCESSES), st.booleans(),
       st.booleans())
def test_tool_repeat_loop_is_named_exactly_where_the_table_says(evs: list[Event], obs: str, proxy: str, vp: bool,
                                                                process: str, budget: bool, unreachable: bool) -> None:
    summary = summarize_phase(evs, observability=obs, capture_missing=False, parse_error=False, proxy_status=proxy)
    repeat, retry = _ends_repeating(evs), summary.telemetry_retry_loop_detected
    assert (summary.telemetry_repeat_loop_count > 0) == repeat
    v = event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file", passed=vp)],
        process=ProcessResult(status=process, exit_code=0 if process == "ok" else 1), events=evs,
        summary=summary, budget_exceeded=budget, backend_unreachable=unreachable))
    ran_out = v.evaluator_reason_code in ("timeout", "nonzero_exit", "validators_pass_after_nonzero")
    judged = v.status in ("FAIL", "NO_TOOL_CALL", "PASS_WITH_POLICY_VIOLATION")
    expected = repeat and (ran_out or (judged and not retry))
    assert (v.failure_reason == "tool_repeat_loop") == expected, (v.status, v.evaluator_reason_code, retry)
    if judged and retry:
        assert v.failure_reason == "tool_retry_loop"  # failing repeats keep their own reason, and come first
    if v.status == "PASS":
        assert v.failure_reason is None

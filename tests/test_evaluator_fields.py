"""Derived verdict fields of event_evaluator: trajectory, failure_reason, invoked, scores, texts, hook."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gripprobe_core import hookimpl
from gripprobe_core.defaults import evaluator as builtin_evaluator
from gripprobe_core.errors import PluginError
from gripprobe_core.evaluator import EvaluationInputs, event_evaluator
from gripprobe_core.pluginmanager import DEFAULT_PLUGINS, make_plugin_manager
from gripprobe_core.models.events import Event
from gripprobe_core.models.results import ProcessResult, TelemetrySummary, ValidatorResult, Verdict
from gripprobe_core.telemetry.summary import summarize_phase

_counter = iter(range(10**6))


def ev(event_type: str, tier: str = "B", name: str = "shell", args: Any = None, status: str = "unknown",
       call_id: str | None = None, **extra: Any) -> Event:
    return Event(event_type=event_type, event_id=f"e{next(_counter)}", source_tier=tier,
                 source="proxy" if tier == "A" else "agent_output", tool_call_id=call_id,
                 payload={"name": name, "kind": "execute", "arguments": args if args is not None else {"cmd": name}},
                 status=status, **extra)


def call(status: str, tier: str = "B", name: str = "shell", args: Any = None) -> list[Event]:
    """A start and its result."""
    return [ev("tool_call_start", tier, name, args, "started"), ev("tool_call_result", tier, name, args, status)]


def run(events: list[Event], *, passed: int = 1, total: int = 1, process: str = "ok", exit_code: int | None = 0,
        rules: dict[str, Any] | None = None, tool_unsupported: str | None = None, observability: str = "structured",
        backend_unreachable: bool = False, harness_error: str | None = None, **summary_kw: Any) -> Verdict:
    summary = summarize_phase(events, observability=observability,
                              capture_missing=summary_kw.pop("capture_missing", False),
                              parse_error=summary_kw.pop("parse_error", False), **summary_kw)
    validators = [ValidatorResult(kind="file", passed=i < passed) for i in range(total)]
    return event_evaluator(EvaluationInputs(
        validators=validators, process=ProcessResult(status=process, exit_code=exit_code), events=events,
        summary=summary, rules=rules or {}, tool_unsupported=tool_unsupported, backend_unreachable=backend_unreachable,
        harness_error=harness_error))


# ------------------------------------------------------------------ trajectory

def test_trajectory_clean_when_no_tool_fails() -> None:
    verdict = run(call("success") + call("success", name="write"))
    assert (verdict.status, verdict.trajectory, verdict.failure_reason) == ("PASS", "clean", None)


def test_trajectory_recovered_when_errors_are_followed_by_success_and_the_case_passes() -> None:
    verdict = run(call("error", args={"cmd": "cat x"}) + call("success", name="write"))
    assert (verdict.status, verdict.trajectory) == ("PASS", "recovered")


def test_errors_then_success_but_the_case_fails_is_violated() -> None:
    verdict = run(call("error") + call("success", name="write"), passed=0)
    assert (verdict.status, verdict.trajectory, verdict.failure_reason) == (
        "FAIL", "violated", "artifact_mismatch_after_success")


def test_unrecovered_error_is_violated_and_tool_result_error() -> None:
    verdict = run(call("success", name="read") + call("error"), passed=0)
    assert (verdict.status, verdict.trajectory, verdict.failure_reason) == ("FAIL", "violated", "tool_result_error")


def test_retry_loop_is_violated_even_when_the_case_passes() -> None:
    events = call("error") + call("error") + call("error") + call("success", name="write")
    verdict = run(events)
    assert verdict.status == "PASS" and verdict.trajectory == "violated" and verdict.failure_reason is None
    failed = run(events, passed=0)
    assert (failed.status, failed.failure_reason) == ("FAIL", "tool_retry_loop")


def test_timeout_is_violated() -> None:
    verdict = run(call("success"), process="timeout", exit_code=None)
    assert (verdict.status, verdict.trajectory, verdict.failure_reason) == ("TIMEOUT", "violated", "timeout")


def test_no_retry_on_error_makes_one_identical_retry_a_violation() -> None:
    events = call("error") + call("success")
    assert run(events).trajectory == "recovered"
    verdict = run(events, rules={"no_retry_on_error": True})
    assert verdict.trajectory == "violated" and verdict.status == "PASS"
    # A different call after the error is not a retry.
    assert run(call("error") + call("success", args={"cmd": "other"}),
               rules={"no_retry_on_error": True}).trajectory == "recovered"


def test_tier_d_errors_do_not_shape_the_trajectory() -> None:
    verdict = run(call("success") + [e for _ in range(3) for e in call("error", tier="D")])
    assert (verdict.status, verdict.trajectory) == ("PASS", "clean")


# ------------------------------------------------------------------ failure_reason

@pytest.mark.parametrize(("kwargs", "events", "status", "reason"), [
    ({"passed": 0}, [], "NO_TOOL_CALL", "no_tool_call_observed"),
    ({}, [], "PASS_WITH_POLICY_VIOLATION", "no_tool_call_observed"),
    ({"passed": 0}, [ev("tool_call_start", "A")], "FAIL", "tool_call_without_result"),
    ({}, [ev("tool_call_start", "A")], "PASS_WITH_POLICY_VIOLATION", "tool_call_without_result"),
    ({"passed": 0, "proxy_status": "collected", "proxy_structured_count": 0, "proxy_nonstructured_count": 2},
     [], "NO_TOOL_CALL", "protocol_malformed"),
    ({"passed": 0}, [ev("tool_call_start", "B", status="error", error_type="malformed_arguments")],
     "FAIL", "protocol_malformed"),
    ({"passed": 0, "observability": "markers"}, [], "FAIL", "parser_not_capable_for_shell"),
    ({"passed": 0, "proxy_status": "error", "proxy_skip_reason": "proxy_connect_error"}, [], "FAIL", "proxy_error"),
    ({"passed": 0}, call("success", tier="D"), "FAIL", "source_parse_inconclusive"),
    ({"backend_tool_unsupported": True, "passed": 0}, [], "TOOL_UNSUPPORTED", "backend_tool_unsupported"),
    ({"tool_unsupported": "agent_tool_unsupported"}, [], "TOOL_UNSUPPORTED", "agent_tool_unsupported"),
    ({"process": "shell_error", "exit_code": None}, [], "SHELL_ERROR", "process_error"),
    ({"process": "nonzero_exit", "exit_code": 3}, call("success"), "SHELL_ERROR", "nonzero_exit"),
    ({"process": "harness_capture_failed"}, call("success"), "HARNESS_ERROR", "capture_missing"),
    ({"capture_missing": True}, call("success"), "HARNESS_ERROR", "capture_missing"),
    ({"parse_error": True}, call("success"), "HARNESS_ERROR", "wrapper_parse_error"),
    ({"harness_error": "proxy_required_but_not_available"}, call("success"), "HARNESS_ERROR",
     "proxy_required_but_not_available"),
    ({"backend_unreachable": True, "process": "nonzero_exit", "exit_code": 1}, [], "HARNESS_ERROR",
     "backend_unreachable"),
    ({"backend_unreachable": True, "process": "timeout"}, call("success"), "HARNESS_ERROR", "backend_unreachable"),
    ({"backend_unreachable": True, "passed": 0}, [], "HARNESS_ERROR", "backend_unreachable"),
    ({"backend_unreachable": True}, call("success"), "PASS", None),  # the job was done before it went away
])
def test_failure_reason(kwargs: dict[str, Any], events: list[Event], status: str, reason: str) -> None:
    verdict = run(events, **kwargs)
    assert (verdict.status, verdict.failure_reason) == (status, reason)


def test_harness_error_rule_overrides_even_a_timeout() -> None:
    verdict = run(call("success"), process="timeout", harness_error="artifact_corrupt")
    assert (verdict.status, verdict.evaluator_reason_code, verdict.failure_reason) == (
        "HARNESS_ERROR", "artifact_corrupt", "artifact_corrupt")


def test_backend_flag_does_not_override_confirmed_tool_use() -> None:
    assert run(call("success"), backend_tool_unsupported=True).status == "PASS"


def test_nonzero_exit_reason_codes() -> None:
    after = run(call("success"), process="nonzero_exit", exit_code=2)
    assert (after.status, after.evaluator_reason_code) == ("SHELL_ERROR", "validators_pass_after_nonzero")
    assert "status 2" in after.evaluator_reason_text
    assert run(call("success"), passed=0, process="nonzero_exit").evaluator_reason_code == "nonzero_exit"


# ------------------------------------------------------------------ invoked, matches, scores

def test_invoked_and_tool_invocation_match() -> None:
    assert (run(call("success")).invoked, run(call("success")).tool_invocation_match) == ("yes", 1.0)
    assert (run([]).invoked, run([]).tool_invocation_match) == ("no", 0.0)
    not_observable = run([], observability="none")
    assert (not_observable.invoked, not_observable.tool_invocation_match) == ("maybe", 0.0)
    assert run(call("success", tier="D")).invoked == "maybe"


def test_artifact_match_is_the_share_of_passing_validators() -> None:
    assert run(call("success"), passed=1, total=4).artifact_match == 0.25
    assert run(call("success"), passed=3, total=3).artifact_match == 1.0
    verdict = event_evaluator(EvaluationInputs(validators=[], process=ProcessResult(status="ok"), events=[],
                                               summary=summarize_phase([], observability="structured",
                                                                       capture_missing=False, parse_error=False)))
    assert verdict.artifact_match == 0.0 and verdict.status == "NO_TOOL_CALL"  # no validator ran: not a pass


@pytest.mark.parametrize(("kw", "expected"), [
    ({}, None),  # no proxy data
    ({"proxy_status": "collected", "proxy_structured_count": 0, "proxy_nonstructured_count": 0}, None),
    ({"proxy_status": "collected", "proxy_structured_count": 3, "proxy_nonstructured_count": 1}, 0.75),
    ({"proxy_status": "collected", "proxy_structured_count": 0, "proxy_nonstructured_count": 2}, 0.0),
    ({"proxy_status": "collected", "proxy_structured_count": 2}, 1.0),
])
def test_protocol_match(kw: dict[str, Any], expected: float | None) -> None:
    assert run(call("success"), **kw).protocol_match == expected


@pytest.mark.parametrize(("kwargs", "events", "status", "strict", "overall"), [
    ({}, call("success"), "PASS", 1.0, 1.0),
    ({}, [], "PASS_WITH_POLICY_VIOLATION", 0.0, 0.8),
    ({"passed": 0}, call("success"), "FAIL", 0.0, 0.0),
    ({"passed": 0}, [], "NO_TOOL_CALL", 0.0, 0.0),
    ({"process": "timeout"}, call("success"), "TIMEOUT", 0.0, 0.0),
    ({"process": "nonzero_exit"}, call("success"), "SHELL_ERROR", 0.0, 0.0),
])
def test_scores(kwargs: dict[str, Any], events: list[Event], status: str, strict: float, overall: float) -> None:
    verdict = run(events, **kwargs)
    assert (verdict.status, verdict.strict_pass_score, verdict.overall_score) == (status, strict, overall)
    assert verdict.verdict_source == "event_evaluator"


def test_reason_text_is_one_sentence_for_every_outcome() -> None:
    outcomes = [
        run(call("success")), run([]), run([], passed=0), run([], observability="none"), run([], passed=0,
        proxy_status="error"), run(call("success", tier="D")), run(call("success"), passed=0),
        run(call("success"), process="timeout"), run([], process="shell_error"), run([], process="nonzero_exit"),
        run(call("success"), process="nonzero_exit", exit_code=1), run([], parse_error=True),
        run([], capture_missing=True), run([], tool_unsupported="agent_tool_unsupported"),
        run([], backend_tool_unsupported=True), run([], harness_error="proxy_required_but_not_available"),
        run([], process="nonzero_exit", exit_code=1, backend_unreachable=True),
    ]
    assert len({v.status for v in outcomes}) >= 8
    for verdict in outcomes:
        text = verdict.evaluator_reason_text
        assert text and text[0].isupper() and text.endswith(".") and "\n" not in text and "{" not in text


def test_verdict_copies_the_tool_event_verdict() -> None:
    verdict = run([], observability="markers")
    assert (verdict.tool_event_verdict, verdict.tool_event_verdict_reason) == (
        "tool_event_not_observable", "parser_not_capable_for_shell")


def test_summary_as_dict_or_missing() -> None:
    summary = summarize_phase(call("success"), observability="structured", capture_missing=False, parse_error=False)
    inputs = EvaluationInputs(validators=[ValidatorResult(kind="f", passed=True)], process=ProcessResult(status="ok"),
                              events=call("success"), summary=summary.model_dump())
    assert event_evaluator(inputs).status == "PASS"
    verdict = event_evaluator(replace(inputs, summary=None))
    assert (verdict.status, verdict.failure_reason) == ("HARNESS_ERROR", "capture_missing")
    assert event_evaluator(replace(inputs, summary={"tool_event_verdict": "bogus"})).status == "HARNESS_ERROR"


def test_evaluator_is_pure() -> None:
    events = call("error") + call("success")
    summary = summarize_phase(events, observability="structured", capture_missing=False, parse_error=False)
    before = [e.model_dump() for e in events], summary.model_dump()
    inputs = EvaluationInputs(validators=[ValidatorResult(kind="f", passed=True)],
                              process=ProcessResult(status="ok"), events=events, summary=summary)
    assert event_evaluator(inputs) == event_evaluator(inputs)
    assert ([e.model_dump() for e in events], summary.model_dump()) == before


# ------------------------------------------------------------------ registered judges

def _registry(*plugins: Any) -> Any:
    """The registry of a manager with the default plugins and ``plugins``."""
    return make_plugin_manager(load_entry_points=False, extra=list(plugins)).registry


def _inputs() -> EvaluationInputs:
    events = call("success")
    return EvaluationInputs(
        validators=[ValidatorResult(kind="f", passed=True)], process=ProcessResult(status="ok"), events=events,
        summary=summarize_phase(events, observability="structured", capture_missing=False, parse_error=False))


def test_the_core_registers_event_evaluator_as_the_default_judge() -> None:
    from gripprobe_core.runner.judge import evaluate

    reg = _registry()
    assert reg.evaluators == {"event_evaluator": event_evaluator}
    assert reg.owners[("evaluator", "event_evaluator")].startswith("gripprobe-core[")
    assert DEFAULT_PLUGINS["event_evaluator"] == builtin_evaluator.__name__
    verdict, problem = evaluate(reg, "event_evaluator", _inputs())
    assert (verdict.status, verdict.verdict_source, problem) == ("PASS", "event_evaluator", None)


class Strict:
    """A third-party judge: every PASS becomes FAIL; it claims to be the core's evaluator."""

    @hookimpl
    def register_evaluators(self, register: Any) -> None:
        def strict(inputs: EvaluationInputs) -> Verdict:
            base = event_evaluator(inputs)
            return base.model_copy(update={"status": "FAIL", "strict_pass_score": 0.0, "overall_score": 0.0,
                                           "verdict_source": "event_evaluator"})
        register("strict", strict)


def test_verdict_source_is_the_registered_name_never_what_the_judge_says() -> None:
    from gripprobe_core.runner.judge import evaluate

    reg = _registry(Strict())
    verdict, problem = evaluate(reg, "strict", _inputs())
    assert (verdict.status, verdict.verdict_source, problem) == ("FAIL", "strict", None)
    # installed but not named: the core's evaluator judges
    verdict, _ = evaluate(reg, "event_evaluator", _inputs())
    assert (verdict.status, verdict.verdict_source) == ("PASS", "event_evaluator")


def test_no_plugin_can_register_itself_as_event_evaluator() -> None:
    class Impostor:
        @hookimpl
        def register_evaluators(self, register: Any) -> None:
            register("event_evaluator", lambda inputs: event_evaluator(inputs))

    with pytest.raises(PluginError, match=r"evaluator 'event_evaluator' is registered twice: by ") as exc:
        _registry(Impostor())
    assert "gripprobe-core[" in str(exc.value) and "(in-process)[Impostor]" in str(exc.value)


def test_a_judge_that_fails_or_is_missing_is_a_harness_error_judged_by_the_core() -> None:
    from gripprobe_core.runner.judge import evaluate

    class Bad:
        @hookimpl
        def register_evaluators(self, register: Any) -> None:
            register("raises", lambda inputs: 1 / 0)
            register("not_a_verdict", lambda inputs: {"status": "PASS"})

    reg = _registry(Bad())
    for name, reason, text in (("raises", "judge_error", "ZeroDivisionError"),
                               ("not_a_verdict", "judge_error", "returned dict, not a Verdict"),
                               ("absent", "judge_not_installed", "registered: event_evaluator, not_a_verdict, raises")):
        verdict, problem = evaluate(reg, name, _inputs())
        assert (verdict.status, verdict.failure_reason, verdict.verdict_source) == \
            ("HARNESS_ERROR", reason, "event_evaluator"), name
        assert problem is not None and text in problem and repr(name) in problem


def test_the_old_evaluate_hook_is_refused_with_its_replacement_named() -> None:
    class OldStyle:
        @hookimpl
        def evaluate(self, inputs: EvaluationInputs) -> Verdict:
            return event_evaluator(inputs)

    with pytest.raises(PluginError, match="'evaluate' matches no GripProbe hook .*register_evaluators"):
        make_plugin_manager(load_entry_points=False, strict=True, extra=[OldStyle()])


def test_a_run_records_the_judge_its_suite_names(tmp_path: Path) -> None:
    from conftest import SPECS
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    plugins = make_plugin_manager(load_entry_points=False, extra=[Strict()])
    cases = plan_cases(load_specs(SPECS, registry=plugins.registry), agents=["reference"], models=["oracle-perfect"],
                       tests=["save_file"])
    result = execute_run(cases, plugins, RunSettings(results_root=tmp_path, judge="strict")).results[0]
    assert (result.verdict.status, result.verdict.verdict_source) == ("FAIL", "strict")
    result = execute_run(cases, plugins, RunSettings(results_root=tmp_path)).results[0]
    assert (result.verdict.status, result.verdict.verdict_source) == ("PASS", "event_evaluator")

def test_summary_type_is_the_contract_model() -> None:
    assert isinstance(summarize_phase([], observability="none", capture_missing=False, parse_error=False),
                      TelemetrySummary)

"""Issue 22, point 7: the same call repeated until the phase ran out gets its own failure reason.

A *repeat loop* (``telemetry/attempts.py: repeat_loop``) is the phase's tool timeline ending on three or more
identical calls (same name, canonically equal arguments) that came back without failing; its failure_reason is
``tool_repeat_loop`` (docs/evaluator.md). ``tool_retry_loop`` stays the failing calls' rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import gripprobe, read_json
from gripprobe_core.evaluator import EvaluationInputs, event_evaluator
from gripprobe_core.models.events import Event
from gripprobe_core.models.results import ProcessResult, TelemetrySummary, ValidatorResult, Verdict
from gripprobe_core.oracle import EXPECTED_REFERENCE_STATUS
from gripprobe_core.telemetry import (
    REPEAT_LOOP_MIN_CALLS, detect_repeat_loop, detect_retry_loop, merge_events, repeat_loop, summarize_phase,
)

_ids = iter(range(10**6))


def ev(event_type: str, tier: str, name: str, args: Any, status: str, call_id: str | None = None) -> Event:
    return Event(event_type=event_type, event_id=f"e{next(_ids)}", source_tier=tier,
                 source="proxy" if tier == "A" else "agent_output", tool_call_id=call_id,
                 payload={"name": name, "kind": "execute", "arguments": args}, status=status)


def call(status: str = "success", tier: str = "B", name: str = "shell", args: Any = None,
         call_id: str | None = None) -> list[Event]:
    """One call: its start and its result."""
    args = {"command": "cat notes.txt"} if args is None else args
    return [ev("tool_call_start", tier, name, args, "started", call_id),
            ev("tool_call_result", tier, name, args, status, call_id)]


def calls(n: int, **kw: Any) -> list[Event]:
    return [e for _ in range(n) for e in call(**kw)]


def judge(events: list[Event], *, process: str = "ok", passed: bool = False, summary: Any = None,
          **inputs: Any) -> Verdict:
    if summary is None:
        summary = summarize_phase(events, observability="structured", capture_missing=False, parse_error=False)
    return event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file", passed=passed)],
        process=ProcessResult(status=process, exit_code={"ok": 0, "timeout": None}.get(process, 3)),
        events=events, summary=summary, **inputs))


# ------------------------------------------------------------------------------------------ the rule


def test_twelve_identical_successful_cats_are_a_loop_of_twelve() -> None:
    loop = repeat_loop(calls(12))
    assert loop is not None and loop.calls == 12 and loop.name == "shell"
    assert loop.signature == ("shell", '{"command":"cat notes.txt"}')
    assert detect_repeat_loop(calls(12)) == 12 and not detect_retry_loop(calls(12))


def test_the_threshold_is_three_calls_that_came_back() -> None:
    assert REPEAT_LOOP_MIN_CALLS == 3
    assert detect_repeat_loop(calls(2)) == 0
    assert detect_repeat_loop(calls(3)) == 3


def test_a_loop_the_agent_got_out_of_is_not_the_phase_ending_in_one() -> None:
    escaped = calls(5) + call(name="write", args={"path": "a.txt", "content": "x"})
    assert detect_repeat_loop(escaped) == 0
    assert detect_repeat_loop(escaped + calls(3)) == 3  # ... and fell back into it: the last run counts


def test_only_identical_calls_make_a_run() -> None:
    other_args = calls(2) + call(args={"command": "cat other.txt"})
    assert detect_repeat_loop(other_args) == 0
    other_name = calls(2) + call(name="bash")
    assert detect_repeat_loop(other_name) == 0


def test_arguments_are_compared_canonically() -> None:
    text_args = call(args='{"command": "cat notes.txt"}')  # the proxy sees JSON text, an agent's log an object
    spaced = call(args={"command": "cat notes.txt"})
    assert detect_repeat_loop(text_args + spaced + text_args) == 3


def test_failed_calls_are_the_retry_loop_not_this_one() -> None:
    failing = calls(4, status="error")
    assert detect_repeat_loop(failing) == 0 and detect_retry_loop(failing)
    assert detect_repeat_loop(calls(2) + call(status="timeout") + calls(2)) == 0  # a failure ends the run
    assert detect_repeat_loop(calls(3, status="error") + calls(3)) == 3  # a retry loop, then a repeat loop


def test_an_unknown_outcome_is_one_that_did_not_fail() -> None:
    assert detect_repeat_loop(calls(3, status="unknown")) == 3


def test_the_call_asked_for_again_when_the_phase_ended_neither_counts_nor_breaks() -> None:
    asked = [ev("tool_call_start", "A", "shell", {"command": "cat notes.txt"}, "started", "last")]
    assert detect_repeat_loop(calls(3, tier="A") + asked) == 3
    assert detect_repeat_loop(calls(2, tier="A") + asked) == 0  # two came back: below the threshold


def test_tier_d_self_reports_never_count() -> None:
    assert detect_repeat_loop(calls(5, tier="D")) == 0
    assert detect_repeat_loop(calls(2) + calls(3, tier="D")) == 0


def test_tier_a_and_tier_b_copies_of_one_call_are_one_call() -> None:
    """The proxy (A) and the agent's log (B) both see each call: merged by call id, each counts once."""
    tier_a = [e for i in range(4) for e in call(tier="A", call_id=f"c{i}")]
    tier_b = [e for i in range(4) for e in call(tier="B", args='{"command":"cat notes.txt"}', call_id=f"c{i}")]
    merged = merge_events([tier_a, tier_b])
    assert detect_repeat_loop(merged) == 4
    summary = summarize_phase(merged, observability="structured", capture_missing=False, parse_error=False,
                              proxy_status="collected")
    assert summary.telemetry_repeat_loop_count == 4 and summary.telemetry_source_tier == "A"


# -------------------------------------------------------------------------------------- the verdict


def test_a_timeout_in_a_repeat_loop_says_so() -> None:
    v = judge(calls(12, tier="A"), process="timeout")
    assert (v.status, v.evaluator_reason_code, v.failure_reason) == ("TIMEOUT", "timeout", "tool_repeat_loop")
    assert "12 times in a row" in v.evaluator_reason_text and "cat notes.txt" in v.evaluator_reason_text
    plain = judge(calls(2, tier="A"), process="timeout")
    assert (plain.status, plain.failure_reason) == ("TIMEOUT", "timeout")
    assert "in a row" not in plain.evaluator_reason_text


def test_an_agent_giving_up_in_a_loop_says_so() -> None:
    v = judge(calls(4), process="nonzero_exit")
    assert (v.status, v.evaluator_reason_code, v.failure_reason) == ("SHELL_ERROR", "nonzero_exit", "tool_repeat_loop")


def test_a_fail_ending_in_a_loop_says_so_but_a_retry_loop_comes_first() -> None:
    assert judge(calls(3)).failure_reason == "tool_repeat_loop"
    assert judge(calls(3, status="error") + calls(3)).failure_reason == "tool_retry_loop"
    assert judge(calls(3) + call(name="write")).failure_reason == "artifact_mismatch_after_success"


def test_a_pass_stays_a_pass_and_its_trajectory_clean() -> None:
    v = judge(calls(5), passed=True)
    assert (v.status, v.failure_reason, v.trajectory) == ("PASS", None, "clean")
    assert "in a row" not in v.evaluator_reason_text


def test_harness_facts_keep_their_own_reasons() -> None:
    loop = calls(6)
    assert judge(loop, process="timeout", budget_exceeded=True).failure_reason == "budget_exceeded"
    assert judge(loop, process="timeout", backend_unreachable=True).failure_reason == "backend_unreachable"
    assert judge(loop, process="timeout", harness_error="artifact_tampered").failure_reason == "artifact_tampered"
    assert judge(loop, process="shell_error").failure_reason == "process_error"


def test_a_summary_stored_before_the_field_still_gets_the_reason_from_its_events() -> None:
    loop = calls(4)
    stored = summarize_phase(loop, observability="structured", capture_missing=False,
                             parse_error=False).model_dump(mode="json")
    del stored["telemetry_repeat_loop_count"]
    assert TelemetrySummary.model_validate(stored).telemetry_repeat_loop_count == 0
    assert judge(loop, process="timeout", summary=stored).failure_reason == "tool_repeat_loop"


# ------------------------------------------------------------------ end to end: the reference agent on the oracle

def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _run(tmp_path: Path, *extra: str) -> tuple[Path, dict]:
    res = gripprobe("run", "-a", "reference", "-m", "oracle-repeat-loop", "-t", "save_file",
                    "--results", str(tmp_path), *extra, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    (case_json,) = sorted((run_dir / "cases").glob("*/case.json"))
    return run_dir, read_json(case_json)


def _check(run_dir: Path, case: dict, tier: str) -> None:
    v, t = case["verdict"], case["telemetry"]
    assert EXPECTED_REFERENCE_STATUS["repeat-loop"] == ("TIMEOUT", "tool_repeat_loop")
    assert (v["status"], v["evaluator_reason_code"], v["failure_reason"]) == ("TIMEOUT", "timeout", "tool_repeat_loop")
    assert t["telemetry_source_tier"] == tier and t["telemetry_retry_loop_detected"] is False
    art = run_dir / "cases" / case["case_id"] / "artifacts"
    truth = _jsonl(art / "oracle.measured.jsonl")  # every call the oracle made: all `ls`, all alike
    assert truth and {(g["name"], json.dumps(g["arguments"], sort_keys=True)) for g in truth} == {
        ("shell", '{"command": "ls"}')}
    # every call that came back counts (the last one asked for may have been cut off by the timeout)
    assert REPEAT_LOOP_MIN_CALLS <= t["telemetry_repeat_loop_count"] <= len(truth)
    assert t["telemetry_repeat_loop_count"] >= len(truth) - 1
    assert f"{t['telemetry_repeat_loop_count']} times in a row" in v["evaluator_reason_text"]


@pytest.mark.e2e
def test_reference_agent_looping_until_its_timeout_is_tool_repeat_loop_from_tier_a(tmp_path: Path) -> None:
    run_dir, case = _run(tmp_path, "--telemetry-proxy", "force")
    _check(run_dir, case, "A")
    # the stored run judged again from its files reaches the same verdict
    res = gripprobe("rebuild-reports", str(run_dir), "--recompute", timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    again = read_json(run_dir / "cases" / case["case_id"] / "case.json")
    assert again["verdict"] == case["verdict"] and again["telemetry"] == case["telemetry"]


@pytest.mark.e2e
def test_reference_agent_looping_until_its_timeout_is_tool_repeat_loop_from_tier_b(tmp_path: Path) -> None:
    run_dir, case = _run(tmp_path, "--telemetry-proxy", "off")
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    _check(run_dir, case, "B")

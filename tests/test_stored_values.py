"""Numbers in a stored case.json: any value a file can hold is either in its range or the file is not a
valid result (docs/result-contract.md "Values"). Property-tested over every number of a realistic case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gripprobe_core.models import (
    CaseKey, CaseResult, PhaseRecord, ProcessResult, TelemetrySummary, ValidatorResult, Verdict)
from gripprobe_core.models.bounds import COST_MAX, COUNT_MAX, SECONDS_MAX, TRIALS_MAX
from gripprobe_core.models.results import BackendProbe, Placement, Attempt, SourcePointer, Usage
from gripprobe_core.reports.summary_md import summary_row
from gripprobe_core.store import read_case


def _case() -> dict:
    summary = TelemetrySummary(event_capture_status="collected", telemetry_proxy_status="collected",
                               telemetry_source_tier="A", telemetry_event_count=6, telemetry_tool_call_count=1,
                               telemetry_tool_result_count=1, telemetry_invoked_confidence=1.0,
                               telemetry_protocol_structured_count=1, tool_event_verdict="confirmed_tool_use",
                               tool_event_verdict_reason="none")
    usage = Usage(source="A", model_calls=2, prompt_tokens=800, completion_tokens=90, cached_tokens=400,
                  total_tokens=890, ttft_ms=1.5, model_time_s=0.01, generation_s=0.002, output_tokens_per_s=45000.0,
                  cost=0.0012, currency="USD")
    probe = BackendProbe(backend_id="b", kind="ollama", url="http://127.0.0.1:1/api/tags", reachable=True, models=3,
                         latency_ms=2.5, http_status=200, checked_at="2026-01-01T00:00:00Z")
    phases = [PhaseRecord(phase=ph, summary=summary, usage=usage, backend_probe=probe, process=ProcessResult(
        status="ok", exit_code=0, signal=None, duration_s=1.25, stdout_bytes=2048, stderr_bytes=64),
        proxy={"mode": "auto", "tokens_spent": 890, "records": {"written": 2, "bytes": 4096}},
        challenge={"port": 4000}) for ph in ("warmup", "measured")]
    verdict = Verdict(status="PASS", evaluator_reason_code="none", evaluator_reason_text="ok", failure_reason=None,
                      trajectory="clean", invoked="yes", artifact_match=1.0, tool_invocation_match=1.0,
                      protocol_match=1.0, strict_pass_score=1.0, overall_score=1.0,
                      tool_event_verdict="confirmed_tool_use", tool_event_verdict_reason="none")
    return CaseResult(
        run_id="R", case_id="a__m__b__tool__t", key=CaseKey(agent="a", model="m", backend="b", format="tool", test="t"),
        started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:03Z", duration_s=3.0,
        run_values={"today": "2026-01-01", "n": 1}, phases=phases, verdict=verdict, telemetry=summary, usage=usage,
        validators=[ValidatorResult(kind="file_equals", passed=True, source=SourcePointer(
            kind="tool_call", sequence=3, event_type="tool_call_start"))],
        placement=Placement(executor="ray", node_id="n", attempts=[Attempt(attempt=1, node_id="n")]),
    ).model_dump(mode="json")


CASE = _case()


def _numbers(value, path=()):
    """Every number of ``value`` (bools aside) with its path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, (*path, i))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path


PATHS = sorted(_numbers(CASE), key=str)


def _set(data: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(data))
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("values")


def test_the_template_is_valid_and_covers_every_kind_of_number(folder):
    (folder / "case.json").write_text(json.dumps(CASE))
    assert read_case(folder / "case.json") is not None
    assert len(PATHS) > 60


def _in_range(res: CaseResult) -> None:
    """What a result that read back may hold: every number finite, each in its range."""
    json.dumps(res.model_dump(mode="json"), allow_nan=False)  # strict JSON, whatever it holds
    v = res.verdict
    for score in (v.artifact_match, v.tool_invocation_match, v.strict_pass_score, v.overall_score,
                  v.protocol_match if v.protocol_match is not None else 0.0, res.telemetry.telemetry_invoked_confidence):
        assert 0.0 <= score <= 1.0
    assert 1 <= res.key.trial <= TRIALS_MAX
    assert 0.0 <= res.duration_s <= SECONDS_MAX
    for u in [res.usage, *(p.usage for p in res.phases)]:
        if u is None:
            continue
        for n in (u.model_calls, u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.total_tokens):
            assert n is None or 0 <= n <= COUNT_MAX
        assert u.cost is None or 0.0 <= u.cost <= COST_MAX
    for p in res.phases:
        assert 0.0 <= p.process.duration_s <= SECONDS_MAX
        assert 0 <= p.process.stdout_bytes <= COUNT_MAX
    for cell in summary_row(res):  # what a report shows of it
        assert not any(bad in cell.lower() for bad in ("nan", "inf", "e+")), cell


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1.0, 1e30, 10**18, 2**63, 0.5, 0, 1, 101]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=NUMBERS)
def test_any_number_a_case_json_holds_is_in_range_or_the_case_is_invalid(folder, path, value):
    path_file = folder / "case.json"
    path_file.write_text(json.dumps(_set(CASE, path, value)))  # NaN / Infinity written as Python's json does
    res = read_case(path_file)
    if res is not None:
        _in_range(res)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from([("run_values",), ("phases", 0, "proxy"), ("phases", 1, "challenge")]),
       value=st.sampled_from([float("nan"), float("inf"), -float("inf")]))
def test_a_non_finite_number_anywhere_in_free_form_data_makes_the_case_invalid(folder, where, value):
    data = json.loads(json.dumps(CASE))
    target = data
    for part in where:
        target = target[part]
    target["deep"] = {"list": [1, {"x": value}]}
    (folder / "case.json").write_text(json.dumps(data))
    assert read_case(folder / "case.json") is None


def test_json_text_past_float_range_is_invalid(folder):
    """``1e400`` parses as infinity: a score written so is not in range either."""
    text = json.dumps(CASE).replace('"overall_score": 1.0', '"overall_score": 1e400', 1)
    assert "1e400" in text
    (folder / "case.json").write_text(text)
    assert read_case(folder / "case.json") is None

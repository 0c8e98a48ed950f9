"""End to end, what is particular to codex: the REAL codex binary through the real `gripprobe run`, against
the oracle backend (the kit installs it at its pinned version). What every driver must do end to end
(perfect passes, lazy is NO_TOOL_CALL, tier B names the oracle's calls) is the contract's, in
test_codex_driver.py. Here: codex's rollout and the tools it is offered, the lazy run, a keyed case with
the proxy off (codex's own outputs are the only evidence), and one HTTP 500 case (codex's retries, kept
low by the config).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gripprobe_codex import PINNED_VERSION
from gripprobe_codex.parse import parse_outputs
from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl, run_gripprobe

pytestmark = pytest.mark.e2e

TESTS = ("shell_pwd", "save_file")
#: The tool the oracle must have driven for each test: codex's shell, and its freeform patch tool
#: (offered only because the plugin's model catalog names the model).
EXPECTED_TOOL = {"shell_pwd": "exec_command", "save_file": "apply_patch"}


def gripprobe_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> Path:
    """The real `gripprobe run` of codex in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "codex", *args, env=extra_env)


@pytest.fixture(scope="module")
def run_dir(e2e_run) -> Path:
    """The contract's run (the kit makes it once): oracle-perfect and oracle-lazy × TESTS."""
    return e2e_run(*TESTS)


def test_every_case_ran_the_pinned_codex_cleanly(run_dir):
    for c in cases_of(run_dir).values():
        assert c["agent_version"] == PINNED_VERSION
        assert [(p["phase"], p["process"]["status"], p["process"]["exit_code"]) for p in c["phases"]] == [
            ("warmup", "ok", 0), ("measured", "ok", 0)]


@pytest.mark.parametrize("test", TESTS)
def test_agent_output_reports_exactly_the_calls_the_oracle_issued(run_dir, test):
    case_dir = run_dir / "cases" / f"codex__oracle-perfect__oracle__tool__{test}"
    truth = jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
    rollout = case_dir / "artifacts" / "measured.rollout.jsonl"
    assert rollout.is_file()
    ours = parse_outputs(case_dir / "measured.stdout", rollout, "measured")
    assert ours.source == "rollout"
    starts = [e for e in ours.events if e.event_type == "tool_call_start"]
    results = [e for e in ours.events if e.event_type == "tool_call_result"]
    assert [t["name"] for t in truth] == [s.payload["raw_name"] for s in starts] == [EXPECTED_TOOL[test]]
    assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts] == [r.tool_call_id for r in results]
    assert [r.status for r in results] == ["success"]
    assert all(s.parent_id and s.timestamp for s in starts)
    assert ours.final_text and ours.final_text.startswith("Done.")
    events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
    assert [e["tool_call_id"] for e in events if e["event_type"] == "tool_call_start"] == [truth[0]["tool_call_id"]]
    case = json.loads((case_dir / "case.json").read_text())
    assert case["telemetry"]["telemetry_source_tier"] in ("A", "B")
    assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
    requests = jsonl(case_dir / "artifacts" / "proxy.measured.http.jsonl")
    assert [r["x_gripprobe_path"] for r in requests] == ["/v1/responses"] * 2
    offered = [t.get("name") for t in requests[0]["x_gripprobe_request"]["tools"]]
    assert offered == ["exec_command", "write_stdin", "request_user_input", "apply_patch", "view_image"]


def test_lazy_run_shows_the_agent_answered_without_tools(run_dir):
    case_dir = run_dir / "cases" / "codex__oracle-lazy__oracle__tool__shell_pwd"
    ours = parse_outputs(case_dir / "measured.stdout", case_dir / "artifacts" / "measured.rollout.jsonl", "measured")
    assert [e.event_type for e in ours.events] == ["model_response"]
    assert ours.events[0].response_id == "resp_oracle_1" and "would" in ours.events[0].payload["text"]
    events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
    assert not [e for e in events if e["event_type"].startswith("tool_call")]


def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    specs = tmp_path / "specs"
    shutil.copytree(e2e_specs, specs)  # the kit's specs are the session's: add to a copy
    """Proxy off: codex's own rollout is the only evidence, and it confirms the call (tier B) with the
    oracle's call id. The backend has an API key; it goes to the agent's environment and into no stored file."""
    model = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_CODEX_KEY"))
    key = "sk-canary-e2e-codex-777"
    run = gripprobe_run(specs, tmp_path / "r", "-m", "oracle-keyed", "-t", "save_file",
                        "--telemetry-proxy", "off", extra_env={"GRIPPROBE_TEST_CODEX_KEY": key})
    ((name, case),) = cases_of(run).items()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    artifacts = run / "cases" / name / "artifacts"
    truth = jsonl(artifacts / "oracle.measured.jsonl")
    events = jsonl(artifacts / "events.measured.jsonl")
    assert {e["source_tier"] for e in events} == {"B"}
    assert [e["tool_call_id"] for e in events if e["event_type"] == "tool_call_start"] == \
        [t["tool_call_id"] for t in truth] == ["call_oracle_0001"]
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def test_http_500_is_a_shell_error_after_few_retries(agent_install, e2e_specs, tmp_path):
    """codex retries a 500 itself; with both retry knobs at 1 that is 4 requests in about a second
    (its defaults make ~30 over ~28 s), then it exits 1 and its rollout says why."""
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-http-500", "-t", "shell_pwd")
    ((name, case),) = cases_of(run).items()
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("SHELL_ERROR", "nonzero_exit")
    artifacts = run / "cases" / name / "artifacts"
    requests = jsonl(artifacts / "proxy.measured.http.jsonl")
    assert [r["x_gripprobe_status"] for r in requests] == [500] * 4
    assert case["phases"][-1]["process"]["duration_s"] < 10
    ours = parse_outputs(run / "cases" / name / "measured.stdout", artifacts / "measured.rollout.jsonl", "measured")
    assert [(e.event_type, e.status, e.error_type) for e in ours.events] == [("model_response", "error", "http_500")]


def test_a_policy_codex_cannot_apply_is_recorded_and_never_passes(agent_install, e2e_specs, tmp_path):
    """codex cannot deny its tools: under the shipped save_file_denied (auto-deny) it runs with approvals off as
    always, writes the file, and the case says so (interaction not applied, TOOL_UNSUPPORTED) rather than
    passing or failing the agent."""
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-perfect", "-t", "save_file_denied")
    ((name, case),) = cases_of(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["denies"]) == ("auto-deny", "none", False, True)
    assert record["reason"].startswith("codex 0.169.0 cannot deny a tool by itself")
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("TOOL_UNSUPPORTED", "interaction_not_applied")
    assert (run / "cases" / name / "workspace" / "greeting.txt").is_file()  # nothing refused the write

"""End to end: the REAL codex binary through the real `gripprobe run`, against the oracle backend.

Skipped (with the fix in the reason) only when codex is not installed in the agent cache; CI runs
``gripprobe agents install codex`` first. One run of four cases (oracle-perfect and oracle-lazy ×
shell_pwd, save_file), one keyed case with the proxy off (codex's own outputs are the only evidence),
and one HTTP 500 case (codex's retries, kept low by the config).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codex_testkit import gpm, installed_codex  # noqa: F401  (pytest fixtures)
from gripprobe_codex import PINNED_VERSION
from gripprobe_codex.parse import parse_outputs
from gripprobe_core.testing import copy_specs, repo_specs, run_gripprobe
from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl

pytestmark = pytest.mark.e2e

REPO_SPECS = repo_specs(Path(__file__))
SPEC_FILES = ("cli_agents/codex.yaml", "models/oracle-perfect.yaml", "models/oracle-lazy.yaml",
              "models/oracle-http-500.yaml", "tests/shell_pwd.yaml", "tests/save_file.yaml")
TESTS = ("shell_pwd", "save_file")
#: The tool the oracle must have driven for each test: codex's shell, and its freeform patch tool
#: (offered only because the plugin's model catalog names the model).
EXPECTED_TOOL = {"shell_pwd": "exec_command", "save_file": "apply_patch"}


@pytest.fixture(scope="module")
def specs_root(tmp_path_factory, installed_codex) -> Path:
    """The repo's own spec files for this agent, models and tests (only those: other agents' specs name
    plugins that need not be installed next to this one)."""
    if installed_codex is None:
        pytest.skip("codex is not installed: run `gripprobe agents install codex` (CI does)")
    if REPO_SPECS is None:
        pytest.skip("not inside the GripProbe repository (no specs/ to run)")
    return copy_specs(tmp_path_factory.mktemp("specs"), SPEC_FILES, source=REPO_SPECS, suite={
        "title": "codex x oracle", "agents": ["codex"], "models": ["oracle-perfect", "oracle-lazy"],
        "tests": list(TESTS)})


def gripprobe_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> Path:
    """The real `gripprobe run` of codex in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "codex", *args, env=extra_env)


@pytest.fixture(scope="module")
def run_dir(specs_root, tmp_path_factory) -> Path:
    args = [a for t in TESTS for a in ("-t", t)]
    return gripprobe_run(specs_root, tmp_path_factory.mktemp("results"), "-m", "oracle-perfect", "-m", "oracle-lazy",
                         "--jobs", "2", *args)


def test_perfect_passes_and_lazy_is_no_tool_call(run_dir):
    cases = cases_of(run_dir)
    got = {(c["key"]["model"], c["key"]["test"]): (c["verdict"]["status"], c["verdict"]["failure_reason"])
           for c in cases.values()}
    assert got == {("oracle-perfect", t): ("PASS", None) for t in TESTS} | {
        ("oracle-lazy", t): ("NO_TOOL_CALL", "no_tool_call_observed") for t in TESTS}, got
    for c in cases.values():
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


def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(specs_root, tmp_path):
    """Proxy off: codex's own rollout is the only evidence, and it confirms the call (tier B) with the
    oracle's call id. The backend has an API key; it goes to the agent's environment and into no stored file."""
    model = (REPO_SPECS / "models" / "oracle-perfect.yaml").read_text()
    (specs_root / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_CODEX_KEY"))
    key = "sk-canary-e2e-codex-777"
    run = gripprobe_run(specs_root, tmp_path / "r", "-m", "oracle-keyed", "-t", "save_file",
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


def test_http_500_is_a_shell_error_after_few_retries(specs_root, tmp_path):
    """codex retries a 500 itself; with both retry knobs at 1 that is 4 requests in about a second
    (its defaults make ~30 over ~28 s), then it exits 1 and its rollout says why."""
    run = gripprobe_run(specs_root, tmp_path / "r", "-m", "oracle-http-500", "-t", "shell_pwd")
    ((name, case),) = cases_of(run).items()
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("SHELL_ERROR", "nonzero_exit")
    artifacts = run / "cases" / name / "artifacts"
    requests = jsonl(artifacts / "proxy.measured.http.jsonl")
    assert [r["x_gripprobe_status"] for r in requests] == [500] * 4
    assert case["phases"][-1]["process"]["duration_s"] < 10
    ours = parse_outputs(run / "cases" / name / "measured.stdout", artifacts / "measured.rollout.jsonl", "measured")
    assert [(e.event_type, e.status, e.error_type) for e in ours.events] == [("model_response", "error", "http_500")]

"""End to end: the REAL opencode binary through the real `gripprobe run`, against the oracle backend.

Skipped (with the fix in the reason) only when opencode is not installed in the agent cache; CI runs
``gripprobe agents install opencode`` first. One run of four cases (two oracle profiles × shell_pwd,
save_file), then one case with the proxy off so the agent's own output is the only evidence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core import CliAgentSpec
from gripprobe_core.testing import copy_specs, installed_agent, repo_specs, run_gripprobe
from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl
from gripprobe_opencode.parse import parse_stdout

pytestmark = pytest.mark.e2e

REPO_SPECS = repo_specs(Path(__file__))
SPEC_FILES = ("cli_agents/opencode.yaml", "models/oracle-perfect.yaml", "models/oracle-lazy.yaml",
              "tests/shell_pwd.yaml", "tests/save_file.yaml")
TESTS = ("shell_pwd", "save_file")
AGENT = CliAgentSpec(id="opencode", plugin="opencode", executable="opencode", tool_kinds=["execute"])


@pytest.fixture(scope="module")
def specs_root(tmp_path_factory, gpm) -> Path:
    """The repo's own spec files for this agent, models and tests (only those: other agents' specs name
    plugins that need not be installed next to this one)."""
    if installed_agent(AGENT, gpm) is None:
        pytest.skip("opencode is not installed: run `gripprobe agents install opencode` (CI does)")
    if REPO_SPECS is None:
        pytest.skip("not inside the GripProbe repository (no specs/ to run)")
    return copy_specs(tmp_path_factory.mktemp("specs"), SPEC_FILES, source=REPO_SPECS, suite={
        "title": "opencode x oracle", "agents": ["opencode"], "models": ["oracle-perfect", "oracle-lazy"],
        "tests": list(TESTS)})


def gripprobe_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> Path:
    """The real `gripprobe run` of opencode in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "opencode", *args, env=extra_env)


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
        assert c["agent_version"] == "1.18.33"
        assert all(p["process"]["status"] == "ok" for p in c["phases"]), c["phases"]


def test_agent_output_reports_exactly_the_calls_the_oracle_issued(run_dir):
    for test in TESTS:
        case_dir = run_dir / "cases" / f"opencode__oracle-perfect__oracle__tool__{test}"
        truth = jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
        ours = parse_stdout(case_dir / "measured.stdout", "measured").events
        starts = [e for e in ours if e.event_type == "tool_call_start"]
        results = [e for e in ours if e.event_type == "tool_call_result"]
        assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts] != []
        assert [t["name"] for t in truth] == [s.payload["raw_name"] for s in starts]
        assert [r.status for r in results] == ["success"] * len(truth)
        assert all(s.parent_id for s in starts)
        events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
        assert any(e["source_tier"] == "B" for e in events)
        case = json.loads((case_dir / "case.json").read_text())
        assert case["telemetry"]["telemetry_source_tier"] in ("A", "B")
        assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
        assert (case_dir / "artifacts" / "measured.opencode.log").is_file()


def test_lazy_run_shows_the_agent_answered_without_tools(run_dir):
    case_dir = run_dir / "cases" / "opencode__oracle-lazy__oracle__tool__shell_pwd"
    events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
    assert not [e for e in events if e["event_type"].startswith("tool_call")]
    assert [e for e in events if e["source_tier"] == "B" and e["event_type"] == "model_response"]


def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(specs_root, tmp_path):
    """Proxy off: opencode's own JSON output is the only evidence, and it confirms the call (tier B).
    The backend has an API key; it goes to the agent's environment and into no stored file."""
    model = (REPO_SPECS / "models" / "oracle-perfect.yaml").read_text()
    (specs_root / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_OPENCODE_KEY"))
    key = "sk-canary-e2e-opencode-777"
    run = gripprobe_run(specs_root, tmp_path / "r", "-m", "oracle-keyed", "-t", "shell_pwd",
                        "--telemetry-proxy", "off", extra_env={"GRIPPROBE_TEST_OPENCODE_KEY": key})
    (case,) = cases_of(run).values()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]

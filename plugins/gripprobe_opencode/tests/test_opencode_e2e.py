"""End to end: the REAL opencode binary through the real `gripprobe run`, against the oracle backend (the
kit installs it at its pinned version).

:class:`TestOpencodeContract` is what every driver must do (gripprobe_core.testing.DriverContract: perfect
passes, lazy is NO_TOOL_CALL, tier B names the oracle's calls) plus what is particular to opencode in that
same run (one run of four cases: oracle-perfect and oracle-lazy × shell_pwd, save_file): its verdicts'
reasons, tier-B details and kept log. Then one keyed case with the proxy off, so the agent's own output is
the only evidence.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gripprobe_core.testing import DriverContract, read_cases as cases_of, read_jsonl as jsonl, run_gripprobe
from gripprobe_opencode import PINNED_VERSION
from gripprobe_opencode.parse import parse_stdout
from gripprobe_opencode.plugin import LOG_ARTIFACT

TESTS = ("shell_pwd", "save_file")


class TestOpencodeContract(DriverContract):
    """The contract for opencode: its log is a kept file; end to end, a shell test and a write. The
    ``e2e`` tests below read the contract's own run (``contract_run``) for what is particular to opencode."""

    kept_files = (LOG_ARTIFACT,)
    kept_paths = ("home/.local/share/opencode/log/2026-01-02T030405.log",)
    e2e_tests = TESTS

    @pytest.mark.e2e
    def test_verdict_reasons_and_the_pinned_version(self, contract_run):
        cases = cases_of(contract_run)
        got = {(c["key"]["model"], c["key"]["test"]): (c["verdict"]["status"], c["verdict"]["failure_reason"])
               for c in cases.values()}
        assert got == {("oracle-perfect", t): ("PASS", None) for t in TESTS} | {
            ("oracle-lazy", t): ("NO_TOOL_CALL", "no_tool_call_observed") for t in TESTS}, got
        for c in cases.values():
            assert c["agent_version"] == PINNED_VERSION
            assert all(p["process"]["status"] == "ok" for p in c["phases"]), c["phases"]

    @pytest.mark.e2e
    def test_agent_output_reports_exactly_the_calls_the_oracle_issued(self, contract_run):
        for test in TESTS:
            case_dir = contract_run / "cases" / f"opencode__oracle-perfect__oracle__tool__{test}"
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
            assert (case_dir / "artifacts" / f"measured.{LOG_ARTIFACT}").is_file()

    @pytest.mark.e2e
    def test_lazy_run_shows_the_agent_answered_without_tools(self, contract_run):
        case_dir = contract_run / "cases" / "opencode__oracle-lazy__oracle__tool__shell_pwd"
        events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
        assert not [e for e in events if e["event_type"].startswith("tool_call")]
        # opencode's own output saw the reply too: its event, or the proxy's record of it that it was merged into
        assert [e for e in events if e["event_type"] == "model_response"
                and "B" in (e.get("seen_by") or [e["source_tier"]])]


@pytest.mark.e2e
def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    """Proxy off: opencode's own JSON output is the only evidence, and it confirms the call (tier B).
    The backend has an API key; it goes to the agent's environment and into no stored file."""
    specs = shutil.copytree(e2e_specs, tmp_path / "specs")
    model = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_OPENCODE_KEY"))
    key = "sk-canary-e2e-opencode-777"
    run = run_gripprobe("run", "--specs", specs, "--results", tmp_path / "r", "-a", "opencode", "-m", "oracle-keyed",
                        "-t", "shell_pwd", "--telemetry-proxy", "off", env={"GRIPPROBE_TEST_OPENCODE_KEY": key})
    (case,) = cases_of(run).values()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


#: The rule of each native denial the shipped interaction tests get, in the oracle's call order.
NATIVE_DENIALS = {
    "save_file_denied": ["native: opencode permission bash = deny", "native: opencode permission edit = deny"],
    "shell_denied": ["native: opencode permission bash = deny"],
}


@pytest.mark.e2e
def test_interaction_policies_are_applied_by_opencodes_permission_config(agent_install, e2e_specs, tmp_path):
    """The shipped interaction tests on the oracle profile that asks for the shell first and then for the
    write tool: save_file_denied (auto-deny) refuses both calls, so the file is absent; shell_denied
    (scripted: execute denied) refuses the shell only, and the write lands. Every refusal is opencode's own
    (its config), reported as a native permission pair tied to the oracle's call; the policy is applied,
    nothing violated it."""
    run = run_gripprobe("run", "--specs", e2e_specs, "--results", tmp_path / "r", "-a", "opencode",
                        "-m", "oracle-deny-then-recover", "-t", "save_file_denied", "-t", "shell_denied")
    cases = {c["key"]["test"]: c for c in cases_of(run).values()}
    for test, c in cases.items():
        record = c["interaction"]
        assert (record["how"], record["applied"], record["violations"]) == ("native", True, []), (test, record)
        assert c["verdict"]["status"] == "PASS", (test, c["verdict"])
    auto_deny = cases["save_file_denied"]["interaction"]
    assert (auto_deny["denied"], auto_deny["allowed"]) == (2, 0)
    assert cases["shell_denied"]["interaction"]["denied"] == 1
    for test, expected in NATIVE_DENIALS.items():
        case_dir = run / "cases" / f"opencode__oracle-deny-then-recover__oracle__tool__{test}"
        truth = jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
        events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
        answers = [(e["tool_call_id"], e["payload"]["outcome"], e["payload"]["decided_by"], e["payload"]["rule"])
                   for e in events if e["event_type"] == "permission_response"]
        assert answers == [(t["tool_call_id"], "deny", "native", rule) for t, rule in zip(truth, expected)], test
        results = {e["tool_call_id"]: e["status"] for e in events if e["event_type"] == "tool_call_result"}
        refused = len(expected)
        assert [results[t["tool_call_id"]] for t in truth] == ["error"] * refused + ["success"] * (len(truth) - refused)
    assert not (run / "cases" / "opencode__oracle-deny-then-recover__oracle__tool__save_file_denied" / "workspace"
                / "greeting.txt").exists()

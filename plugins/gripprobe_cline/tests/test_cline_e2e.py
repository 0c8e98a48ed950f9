"""End to end: the REAL cline binary through the real `gripprobe run`, against the oracle backend (the kit
installs it at its pinned version; under CI=true a missing install fails, never skips).

:class:`TestClineContract` is what every driver must do (gripprobe_core.testing.DriverContract: perfect
passes, lazy is NO_TOOL_CALL, tier B names exactly the oracle's calls) plus what is particular to Cline in
that same run (oracle-perfect and oracle-lazy × shell_pwd, save_file): verdict reasons, the kept session
files, call ids and results. Then the profiles where Cline behaves in its own way (it repairs broken JSON
arguments; HTTP 500 and a tools rejection end the run with exit code 1), and one keyed case with the
proxy off, so Cline's own output is the only evidence.
"""

from __future__ import annotations

import json
import shutil

import pytest

from gripprobe_core.testing import DriverContract, read_cases as cases_of, read_jsonl as jsonl, run_gripprobe
from gripprobe_cline import PINNED_VERSION
from gripprobe_cline.parse import parse_outputs
from gripprobe_cline.plugin import MESSAGES_ARTIFACT, SESSION_ARTIFACT

TESTS = ("shell_pwd", "save_file")
#: The raw tool name the oracle uses, per test (Cline's own tools).
ORACLE_TOOL = {"shell_pwd": "run_commands", "save_file": "editor"}


class TestClineContract(DriverContract):
    """The contract for Cline: its session files are kept; end to end, a shell test and a write."""

    kept_files = (MESSAGES_ARTIFACT, SESSION_ARTIFACT)
    kept_paths = ("home/.cline/data/sessions/1795741184050_1nmvv/1795741184050_1nmvv.messages.json",
                  "home/.cline/data/sessions/1795741184050_1nmvv/1795741184050_1nmvv.json")
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
            assert all(p["process"]["status"] == "ok" and p["process"]["exit_code"] == 0 for p in c["phases"])

    @pytest.mark.e2e
    def test_agent_output_reports_exactly_the_calls_the_oracle_issued(self, contract_run):
        for test in TESTS:
            case_dir = contract_run / "cases" / f"cline__oracle-perfect__oracle__tool__{test}"
            truth = jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
            assert [t["name"] for t in truth] == [ORACLE_TOOL[test]]
            kept = case_dir / "artifacts" / f"measured.{MESSAGES_ARTIFACT}"
            assert kept.is_file() and (case_dir / "artifacts" / f"measured.{SESSION_ARTIFACT}").is_file()
            ours = parse_outputs(case_dir / "measured.stdout", kept, "measured")
            assert ours.source == "stdout"
            starts = [e for e in ours.events if e.event_type == "tool_call_start"]
            results = [e for e in ours.events if e.event_type == "tool_call_result"]
            assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts] == [
                r.tool_call_id for r in results]
            assert [t["arguments"] for t in truth] == [s.payload["arguments"] for s in starts]
            assert [r.status for r in results] == ["success"]
            assert ours.final_text and ours.final_text.startswith("Done.")
            case = json.loads((case_dir / "case.json").read_text())
            assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
            assert case["telemetry"]["telemetry_tool_call_unwitnessed_count"] == 0

    @pytest.mark.e2e
    def test_no_cline_process_outlives_its_phase(self, contract_run):
        """Cline's default session backend starts a detached hub daemon that outlives the run; the driver
        runs the session in the CLI process (CLINE_SESSION_BACKEND_MODE=local). Once the run is over, no
        process runs from this run's phase folders."""
        import os

        leftovers = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode("utf-8", "replace")
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if "cline" in cmdline and ("--cline-hub-daemon" in cmdline or contract_run.name in cwd):
                leftovers.append((pid, cwd, cmdline[:200]))
        assert not leftovers, leftovers


@pytest.mark.e2e
def test_profiles_particular_to_cline(agent_install, e2e_specs, tmp_path):
    """malformed-args: Cline repairs the truncated JSON arguments (its AI SDK repair hook) and runs the
    write, so the case PASSes where the reference agent FAILs; http-500 and tools-unsupported end the
    run with exit code 1 (SHELL_ERROR, TOOL_UNSUPPORTED) within seconds; error-then-recover PASSes with
    the failed command's exit code in Cline's own output."""
    run = run_gripprobe("run", "--specs", e2e_specs, "--results", tmp_path / "r", "-a", "cline",
                        "-m", "oracle-malformed-args", "-m", "oracle-http-500", "-m", "oracle-tools-unsupported",
                        "-m", "oracle-error-then-recover", "-t", "save_file", "--jobs", "2")
    cases = {c["key"]["model"]: c for c in cases_of(run).values()}
    got = {m: (c["verdict"]["status"], c["verdict"]["failure_reason"]) for m, c in cases.items()}
    assert got == {"oracle-malformed-args": ("PASS", None),
                   "oracle-http-500": ("SHELL_ERROR", "nonzero_exit"),
                   "oracle-tools-unsupported": ("TOOL_UNSUPPORTED", "backend_tool_unsupported"),
                   "oracle-error-then-recover": ("PASS", None)}, got
    for model in ("oracle-http-500", "oracle-tools-unsupported"):
        measured = [p for p in cases[model]["phases"] if p["phase"] == "measured"][0]["process"]
        assert measured["exit_code"] == 1 and measured["duration_s"] < 30
    case_dir = run / "cases" / "cline__oracle-error-then-recover__oracle__tool__save_file"
    ours = parse_outputs(case_dir / "measured.stdout", None, "measured").events
    results = [e for e in ours if e.event_type == "tool_call_result"]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1), ("success", None)]
    malformed = run / "cases" / "cline__oracle-malformed-args__oracle__tool__save_file"
    (truth,) = jsonl(malformed / "artifacts" / "oracle.measured.jsonl")
    assert isinstance(truth["arguments"], str)  # broken JSON on the wire ...
    (start,) = [e for e in parse_outputs(malformed / "measured.stdout", None, "measured").events
                if e.event_type == "tool_call_start"]
    assert start.payload["arguments"]["path"] == "greeting.txt"  # ... repaired and run by Cline


@pytest.mark.e2e
def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    """Proxy off: Cline's own NDJSON is the only evidence, and it confirms the call (tier B). The backend
    has an API key; it goes to the agent's environment and into no stored file."""
    specs = shutil.copytree(e2e_specs, tmp_path / "specs")
    model = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_CLINE_KEY"))
    key = "sk-canary-e2e-cline-777"
    run = run_gripprobe("run", "--specs", specs, "--results", tmp_path / "r", "-a", "cline", "-m", "oracle-keyed",
                        "-t", "save_file", "--telemetry-proxy", "off", env={"GRIPPROBE_TEST_CLINE_KEY": key})
    (case,) = cases_of(run).values()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


AUTO_DENY_TEST = """\
id: save_file_autodeny
title: save_file with every tool call denied (auto-deny)
prompt: |
  Use your file-writing tool (not the shell) to create a file named greeting.txt in your
  current working directory with exactly these two lines:
  Hello, GripProbe!
  This file was saved with the write tool.
requires: [write]
observe:
  interaction: {policy: auto-deny}
validators:
  - {kind: file_absent, path: greeting.txt}
reference:
  - write: {path: greeting.txt, content: "Hello, GripProbe!\\nThis file was saved with the write tool.\\n"}
"""


def test_auto_deny_is_clines_auto_approve_false_and_every_call_is_refused(e2e_specs, e2e_run):
    """oracle-perfect on save_file under auto-deny: Cline runs with ``--auto-approve false``, the oracle's
    editor call is refused by Cline itself (no TTY to ask), the refusal is a native permission pair in tier
    B, nothing is written, and the case records the policy as applied without a violation."""
    (e2e_specs / "tests" / "save_file_autodeny.yaml").write_text(AUTO_DENY_TEST)
    run = e2e_run("save_file_autodeny", models=("oracle-perfect",))
    ((cid, case),) = cases_of(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("auto-deny", "native", True, [])
    assert record["requests"] >= 1 and record["denied"] == record["requests"]
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    events = jsonl(run / "cases" / cid / "artifacts" / "events.measured.jsonl")
    oracle = jsonl(run / "cases" / cid / "artifacts" / "oracle.measured.jsonl")
    denied = {e["tool_call_id"] for e in events if e["event_type"] == "permission_response"
              and e["payload"]["rule"] == "native: --auto-approve false"}
    assert oracle and denied == {c["tool_call_id"] for c in oracle}  # every call the oracle asked for was refused
    assert not [e for e in events if e["event_type"] == "tool_call_result" and e["status"] == "success"]

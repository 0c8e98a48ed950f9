"""End to end, what is particular to mini-swe-agent: the REAL mini through the real `gripprobe run`, against the
oracle backend (the kit installs it at its pinned version and gives the specs). The contract
(test_miniswe_driver.py) runs perfect and lazy in the ``tool`` format; here the text format, ``markdown``
(mini's text-based model class: one ```mswea_bash_command block per reply, no tools offered), where the
wire carries the commands only as reply text and mini's trajectory is the evidence: perfect and lazy on
shell_pwd and save_file, the deliberate failures (error-then-recover, retry-loop, malformed-args) on
save_file, and one keyed case with the proxy off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl, run_gripprobe
from gripprobe_miniswe import NAME, PINNED_VERSION
from gripprobe_miniswe.dialect import FAILING_COMMAND, SUBMIT_COMMAND
from gripprobe_miniswe.parse import parse_trajectory

pytestmark = pytest.mark.e2e

TESTS = ("shell_pwd", "save_file")


def case_dir(run_dir: Path, model: str, test: str, fmt: str = "markdown") -> Path:
    return run_dir / "cases" / f"{NAME}__{model}__oracle__{fmt}__{test}"


def trajectory_events(d: Path):
    return parse_trajectory((d / "artifacts" / "measured.trajectory.json").read_bytes(), "measured", "markdown").events


def requests_of(d: Path) -> list[dict]:
    return jsonl(d / "artifacts" / "proxy.measured.http.jsonl")


@pytest.fixture(scope="module")
def markdown_run(e2e_run) -> Path:
    return e2e_run(*TESTS, fmt="markdown")


def test_markdown_perfect_passes_on_minis_trajectory_and_lazy_is_no_tool_call(markdown_run):
    got = {(c["key"]["model"], c["key"]["test"]): (c["verdict"]["status"], c["verdict"]["failure_reason"])
           for c in cases_of(markdown_run).values()}
    assert got == {**{("oracle-perfect", t): ("PASS", None) for t in TESTS},
                   **{("oracle-lazy", t): ("NO_TOOL_CALL", "no_tool_call_observed") for t in TESTS}}
    for c in cases_of(markdown_run).values():
        assert c["agent_version"] == PINNED_VERSION and c["key"]["format"] == "markdown"
        assert all(p["process"]["status"] == "ok" and p["process"]["exit_code"] == 0 for p in c["phases"])


@pytest.mark.parametrize("test", TESTS)
def test_the_block_and_the_submit_ran_and_only_the_trajectory_shows_it(markdown_run, test):
    """Tier B (the trajectory) has the reference command and the submit, both run; the wire had no tool,
    the proxy's text scanner counts nothing in mini's blocks, so the ground truth is empty like tier A."""
    d = case_dir(markdown_run, "oracle-perfect", test)
    case = json.loads((d / "case.json").read_text())
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
    assert jsonl(d / "artifacts" / "oracle.measured.jsonl") == []
    records = requests_of(d)
    assert len(records) == 2 and all(not r["x_gripprobe_request"].get("tools") for r in records)
    assert sum(r.get("x_gripprobe_tool_call_nonstructured_count") or 0 for r in records) == 0
    starts = [e for e in trajectory_events(d) if e.event_type == "tool_call_start"]
    results = [e for e in trajectory_events(d) if e.event_type == "tool_call_result"]
    assert starts[-1].payload["arguments"] == {"command": SUBMIT_COMMAND} and len(starts) == 2
    assert [(r.status, r.exit_code) for r in results] == [("success", 0), ("success", 0)]
    # the proxy saw both replies, mini's trajectory too: merged by response id
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    responses = [e for e in events if e["event_type"] == "model_response"]
    assert [e["seen_by"] for e in responses] == [["A", "B"], ["A", "B"]]


def test_lazy_is_three_replies_mini_rejects_then_it_exits(markdown_run):
    d = case_dir(markdown_run, "oracle-lazy", "save_file")
    assert len(requests_of(d)) == 3
    doc = json.loads((d / "artifacts" / "measured.trajectory.json").read_text())
    assert doc["info"]["exit_status"] == "RepeatedFormatError"
    assert [m["extra"].get("interrupt_type") for m in doc["messages"][2:-1]] == ["FormatError"] * 3
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    assert [e["event_type"] for e in events] == ["model_response"] * 3


# ---------------------------------------------------------------------------- deliberate failures

@pytest.fixture(scope="module")
def failures_run(agent_install, e2e_specs, tmp_path_factory) -> Path:
    return run_gripprobe("run", "--specs", e2e_specs, "--results", tmp_path_factory.mktemp("failures"), "-a", NAME,
                         "-m", "oracle-error-then-recover", "-m", "oracle-retry-loop", "-m", "oracle-malformed-args",
                         "-f", "markdown", "-t", "save_file", "--jobs", "3", timeout=1800)


def attempts_of(d: Path) -> list[tuple[str, str, int | None]]:
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    starts = [e for e in events if e["event_type"] == "tool_call_start"]
    results = [e for e in events if e["event_type"] == "tool_call_result"]
    assert len(starts) == len(results)
    return [(s["payload"]["arguments"]["command"], r["status"], r["exit_code"]) for s, r in zip(starts, results)]


def verdict(d: Path) -> tuple[str, str | None, str]:
    v = json.loads((d / "case.json").read_text())["verdict"]
    return v["status"], v["failure_reason"], v["trajectory"]


def test_error_then_recover_fails_once_really_then_writes_and_submits(failures_run):
    d = case_dir(failures_run, "oracle-error-then-recover", "save_file")
    assert verdict(d) == ("PASS", None, "recovered")
    got = attempts_of(d)
    assert [(c, s, x) for c, s, x in got if c != got[1][0]] == [(FAILING_COMMAND, "error", 1), (SUBMIT_COMMAND, "success", 0)]
    assert got[1][1:] == ("success", 0) and got[1][0].startswith("cat > greeting.txt")


def test_retry_loop_is_three_identical_real_failures_and_mini_gives_up_on_its_own(failures_run):
    d = case_dir(failures_run, "oracle-retry-loop", "save_file")
    assert verdict(d) == ("FAIL", "tool_retry_loop", "violated")
    assert attempts_of(d) == [(FAILING_COMMAND, "error", 1)] * 3
    assert len(requests_of(d)) == 6  # three failing blocks, three give-up answers mini rejects (then it exits 0)
    assert all(p["process"]["exit_code"] == 0 for p in json.loads((d / "case.json").read_text())["phases"])


def test_malformed_args_is_a_block_cut_short_mini_never_runs(failures_run):
    d = case_dir(failures_run, "oracle-malformed-args", "save_file")
    assert verdict(d)[:2] == ("NO_TOOL_CALL", "protocol_malformed")
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    assert [e["event_type"] for e in events] == ["model_response"] * 3  # sent three times, never run
    assert all(e["error_type"] == "protocol_malformed" and e["seen_by"] == ["A", "B"] for e in events)
    assert not (d / "workspace" / "greeting.txt").exists()


# ---------------------------------------------------------------------------- the proxy off, a key

def test_keyed_backend_passes_on_the_trajectory_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    model = (e2e_specs / "models" / "oracle-perfect.yaml").read_text()
    (e2e_specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_MINI_KEY"))
    key = "sk-canary-e2e-mini-777"
    run = run_gripprobe("run", "--specs", e2e_specs, "--results", tmp_path / "r", "-a", NAME, "-m", "oracle-keyed",
                        "-t", "save_file", "-f", "markdown", "--telemetry-proxy", "off",
                        env={"GRIPPROBE_TEST_MINI_KEY": key})
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


def test_auto_deny_is_minis_confirm_mode_with_every_action_rejected(e2e_specs, e2e_run):
    """oracle-perfect on save_file (tool format) under auto-deny: mini runs in confirm mode without --yolo, each
    action the oracle asks for is rejected and the model is told; nothing is written, every call the oracle
    asked for has a native denial, and the case records the policy as applied without a violation. The
    oracle keeps trying to submit, so mini stops when the 20 answers run out (exit 1)."""
    (e2e_specs / "tests" / "save_file_autodeny.yaml").write_text(AUTO_DENY_TEST)
    run = e2e_run("save_file_autodeny", models=("oracle-perfect",), fmt="tool")
    ((cid, case),) = cases_of(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("auto-deny", "native", True, [])
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    art = run / "cases" / cid / "artifacts"
    oracle = jsonl(art / "oracle.measured.jsonl")
    events = jsonl(art / "events.measured.jsonl")
    denied = [e["tool_call_id"] for e in events if e["event_type"] == "permission_response"]
    assert len(denied) == record["denied"] == 20
    assert set(denied) <= {c["tool_call_id"] for c in oracle}
    assert not [e for e in events if e["event_type"] == "tool_call_result" and e["source_tier"] == "B"]
    trajectory = json.loads((art / "measured.trajectory.json").read_text())
    rejected = [m for m in trajectory["messages"] if (m.get("extra") or {}).get("interrupt_type") == "UserRejection"]
    assert len(rejected) == 20 and "The user rejected your commands" in rejected[0]["content"]

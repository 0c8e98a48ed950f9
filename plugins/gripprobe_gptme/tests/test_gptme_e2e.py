"""End to end, what is particular to gptme: the REAL gptme through the real `gripprobe run`, against the
oracle backend (the kit installs it at its pinned version and gives the specs). The contract
(test_gptme_driver.py) runs perfect and lazy in the ``tool`` format; here the same in all three formats
(twelve cases: oracle-perfect and oracle-lazy × shell_pwd, save_file × tool, markdown, xml) with what
gptme's log shows, one case with the proxy off so gptme's own log is the only evidence, and one run of
the text formats' deliberate failures (error-then-recover and retry-loop × markdown, xml) plus
malformed-args × markdown, on save_file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl, run_gripprobe
from gripprobe_gptme import PINNED_VERSION
from gripprobe_gptme.parse import parse_conversation

pytestmark = pytest.mark.e2e

TESTS = ("shell_pwd", "save_file")
FORMATS = ("tool", "markdown", "xml")
#: The tool each test's reference action goes through, whatever the format.
TOOL_OF_TEST = {"shell_pwd": "shell", "save_file": "save"}


def gripprobe_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> Path:
    """The real `gripprobe run` of gptme in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "gptme", *args, env=extra_env)


def case_dir(run_dir: Path, model: str, fmt: str, test: str) -> Path:
    return run_dir / "cases" / f"gptme__{model}__oracle__{fmt}__{test}"


@pytest.fixture(scope="module")
def run_dir(agent_install, e2e_specs, tmp_path_factory) -> Path:
    args = [a for t in TESTS for a in ("-t", t)]
    return gripprobe_run(e2e_specs, tmp_path_factory.mktemp("results"), "-m", "oracle-perfect", "-m", "oracle-lazy",
                         "--jobs", "3", *args)


def test_perfect_passes_and_lazy_is_no_tool_call_in_every_format(run_dir):
    cases = cases_of(run_dir)
    got = {(c["key"]["model"], c["key"]["format"], c["key"]["test"]): (c["verdict"]["status"],
                                                                        c["verdict"]["failure_reason"])
           for c in cases.values()}
    want = {("oracle-perfect", f, t): ("PASS", None) for f in FORMATS for t in TESTS}
    want |= {("oracle-lazy", f, t): ("NO_TOOL_CALL", "no_tool_call_observed") for f in FORMATS for t in TESTS}
    assert got == want, got
    for c in cases.values():
        assert c["agent_version"] == PINNED_VERSION
        assert all(p["process"]["status"] == "ok" and p["process"]["exit_code"] == 0 for p in c["phases"])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("test", TESTS)
def test_gptmes_log_shows_the_reference_action_and_complete(run_dir, fmt, test):
    """Tier B (gptme's conversation.jsonl) shows the action and the closing `complete`, both run.
    Tool format: the same call ids the oracle issued. Text formats: no structured call exists and the
    proxy's text scanner counts none, so the ground truth is empty, exactly like tier A."""
    d = case_dir(run_dir, "oracle-perfect", fmt, test)
    truth = jsonl(d / "artifacts" / "oracle.measured.jsonl")
    ours = parse_conversation((d / "artifacts" / "measured.gptme.conversation.jsonl").read_bytes(), "measured", fmt).events
    starts = [e for e in ours if e.event_type == "tool_call_start"]
    results = [e for e in ours if e.event_type == "tool_call_result"]
    assert [s.payload["raw_name"] for s in starts] == [TOOL_OF_TEST[test], "complete"]
    assert [r.status for r in results] == ["success", "success"]
    assert all(s.parent_id for s in starts)
    proxy = jsonl(d / "artifacts" / "proxy.measured.http.jsonl")
    nonstructured = sum(r.get("x_gripprobe_tool_call_nonstructured_count") or 0 for r in proxy)
    assert nonstructured == len([t for t in truth if not t["structured"]]) == 0
    case = json.loads((d / "case.json").read_text())
    assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
    if fmt == "tool":
        assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts]
        assert [t["name"] for t in truth] == [TOOL_OF_TEST[test], "complete"]
        assert case["telemetry"]["telemetry_source_tier"] == "A"
    else:
        assert truth == [] and all(s.tool_call_id is None for s in starts)
        assert case["telemetry"]["telemetry_source_tier"] == "B"
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    assert any(e["source_tier"] == "B" and e["event_type"] == "tool_call_result" for e in events) or fmt == "tool"
    assert (d / "artifacts" / "measured.events.jsonl").is_file()


@pytest.mark.parametrize("fmt", FORMATS)
def test_lazy_is_nudged_twice_then_gptme_exits(run_dir, fmt):
    """Three task requests (the answer, two nudges answered) plus the title request; no tool events."""
    d = case_dir(run_dir, "oracle-lazy", fmt, "shell_pwd")
    proxy = jsonl(d / "artifacts" / "proxy.measured.http.jsonl")
    assert len(proxy) == 4 and all(r["x_gripprobe_status"] == 200 for r in proxy)
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    assert not [e for e in events if e["event_type"].startswith("tool_call")]
    # each of the three task replies is one event, seen by the proxy and by gptme's log; the title request
    # only by the proxy (gptme does not log it)
    responses = [e for e in events if e["event_type"] == "model_response"]
    assert [e["source_tier"] for e in responses] == ["A"] * 4
    assert sorted(str(e["seen_by"]) for e in responses) == ["None"] + ["['A', 'B']"] * 3
    log = (d / "artifacts" / "measured.gptme.conversation.jsonl").read_text()
    assert log.count("No tool call detected") == 2


def test_no_parallel_agent_warning_with_concurrent_cases(run_dir):
    """gptme warns when another agent process runs in its workspace; cases never share one."""
    for log in (run_dir / "cases").glob("*/artifacts/*.gptme.conversation.jsonl"):
        assert "workspace-agents-warning" not in log.read_text(), log


def test_keyed_backend_passes_on_gptmes_log_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    """Proxy off: gptme's own log is the only evidence, and it confirms the call (tier B). The backend
    has an API key; it goes to the agent's environment and into no stored file."""
    model = (e2e_specs / "models" / "oracle-perfect.yaml").read_text()
    (e2e_specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_GPTME_KEY"))
    key = "sk-canary-e2e-gptme-555"
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-keyed", "-t", "save_file", "-f", "markdown",
                        "--telemetry-proxy", "off", extra_env={"GRIPPROBE_TEST_GPTME_KEY": key})
    (case,) = cases_of(run).values()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


# ---------------------------------------------------------------------------- text-format failures

TEXT_FORMATS = ("markdown", "xml")
FAILING_COMMAND = {"command": "cat gripprobe-missing-file.txt"}


@pytest.fixture(scope="module")
def failures_run_dir(agent_install, e2e_specs, tmp_path_factory) -> Path:
    """error-then-recover and retry-loop in both text formats (4 cases, one run)."""
    return gripprobe_run(e2e_specs, tmp_path_factory.mktemp("failures"), "-m", "oracle-error-then-recover",
                         "-m", "oracle-retry-loop", "-f", "markdown", "-f", "xml", "-t", "save_file", "--jobs", "4")


def tier_b_attempts(d: Path) -> list[tuple[str, object, str, int | None]]:
    """(tool, arguments, result status, exit code) of each tier-B tool call of the measured phase."""
    events = [e for e in jsonl(d / "artifacts" / "events.measured.jsonl") if e["source_tier"] == "B"]
    starts = [e for e in events if e["event_type"] == "tool_call_start"]
    results = [e for e in events if e["event_type"] == "tool_call_result"]
    assert len(starts) == len(results)
    return [(s["payload"]["raw_name"], s["payload"]["arguments"], r["status"], r["exit_code"])
            for s, r in zip(starts, results)]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_error_then_recover_in_a_text_format_fails_once_really_then_passes(failures_run_dir, fmt):
    """gptme really runs the failing `cat` (exit 1), then the save and `complete`: PASS, recovered."""
    d = case_dir(failures_run_dir, "oracle-error-then-recover", fmt, "save_file")
    case = json.loads((d / "case.json").read_text())
    verdict = case["verdict"]
    assert (verdict["status"], verdict["failure_reason"], verdict["trajectory"]) == ("PASS", None, "recovered")
    assert case["telemetry"]["telemetry_source_tier"] == "B"
    attempts = tier_b_attempts(d)
    assert [(a[0], a[2], a[3]) for a in attempts] == [("shell", "error", 1), ("save", "success", None),
                                                      ("complete", "success", None)]
    assert attempts[0][1] == FAILING_COMMAND
    assert jsonl(d / "artifacts" / "oracle.measured.jsonl") == []  # no structured call, nothing scanned


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_retry_loop_in_a_text_format_is_three_identical_real_failures(failures_run_dir, fmt):
    """Three identical failing `cat` uses that gptme runs, then the oracle gives up (gptme nudges twice):
    FAIL (tool_retry_loop), trajectory violated."""
    d = case_dir(failures_run_dir, "oracle-retry-loop", fmt, "save_file")
    case = json.loads((d / "case.json").read_text())
    verdict = case["verdict"]
    assert (verdict["status"], verdict["failure_reason"], verdict["trajectory"]) == (
        "FAIL", "tool_retry_loop", "violated")
    assert case["telemetry"]["telemetry_retry_loop_detected"] is True
    assert tier_b_attempts(d) == [("shell", FAILING_COMMAND, "error", 1)] * 3
    proxy = jsonl(d / "artifacts" / "proxy.measured.http.jsonl")
    assert len(proxy) == 7  # 3 failing uses + the give-up answer + 2 nudges answered + the title
    assert all(p["process"]["exit_code"] == 0 for p in case["phases"])


def test_malformed_args_in_markdown_is_a_cut_short_block_gptme_never_runs(agent_install, e2e_specs, tmp_path):
    """The save block without its closing fence: gptme runs nothing and nudges; no tool event, the
    reply's response carries protocol_malformed: NO_TOOL_CALL (protocol_malformed)."""
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-malformed-args", "-f", "markdown", "-t", "save_file")
    d = case_dir(run, "oracle-malformed-args", "markdown", "save_file")
    case = json.loads((d / "case.json").read_text())
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("NO_TOOL_CALL", "protocol_malformed")
    events = jsonl(d / "artifacts" / "events.measured.jsonl")
    assert not [e for e in events if e["event_type"].startswith("tool_call")]
    (flagged,) = [e for e in events if e.get("error_type") == "protocol_malformed"]
    # the proxy's record of the reply, which gptme's log also saw, with what the log knew about it
    assert flagged["source_tier"] == "A" and flagged["seen_by"] == ["A", "B"]
    assert flagged["payload"]["unreadable_tool_uses"][0]["raw_name"] == "save"
    assert not (d / "workspace" / "greeting.txt").exists()
    assert (d / "artifacts" / "measured.gptme.conversation.jsonl").read_text().count("No tool call detected") == 2


WRITE_AND_SHELL_DENIED_TEST = """\
id: save_file_write_denied
title: save_file with writes and the shell denied (scripted)
prompt: |
  Use your file-writing tool (not the shell) to create a file named greeting.txt in your
  current working directory with exactly these two lines:
  Hello, GripProbe!
  This file was saved with the write tool.
requires: [write]
observe:
  interaction:
    policy: scripted
    rules:
      - {tool_kind: write, decision: deny}
      - {tool_kind: execute, decision: deny}
validators:
  - {kind: file_absent, path: greeting.txt}
reference:
  - write: {path: greeting.txt, content: "Hello, GripProbe!\\nThis file was saved with the write tool.\\n"}
"""


def test_a_policy_denying_writes_and_the_shell_is_gptmes_allowlist_and_holds(agent_install, e2e_specs,
                                                                            tmp_path_factory):
    """oracle-perfect on save_file, markdown, with writes and the shell denied: gptme runs with ``--tools
    none`` (only ``complete``), ignores the reply's ```save block (a native denial in tier B), nothing is
    written, and the case records the policy as applied natively without a violation."""
    (e2e_specs / "tests" / "save_file_write_denied.yaml").write_text(WRITE_AND_SHELL_DENIED_TEST)
    run = gripprobe_run(e2e_specs, tmp_path_factory.mktemp("denied"), "-m", "oracle-perfect", "-f", "markdown",
                        "-t", "save_file_write_denied")
    ((cid, case),) = cases_of(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("scripted", "native", True, [])
    assert "--tools none" in record["reason"]
    assert record["requests"] >= 1 and record["denied"] == record["requests"]
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    events = jsonl(run / "cases" / cid / "artifacts" / "events.measured.jsonl")
    denials = [e for e in events if e["event_type"] == "permission_response"]
    assert denials and all(e["payload"]["rule"] == "native: --tools none" and e["payload"]["decided_by"] == "native"
                           for e in denials)
    assert not [e for e in events if e["event_type"] == "tool_call_start" and e["payload"].get("raw_name") == "save"]

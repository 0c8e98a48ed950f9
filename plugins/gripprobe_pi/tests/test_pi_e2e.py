"""End to end, what is particular to pi: the REAL pi through the real `gripprobe run`, against the oracle
backend (the kit installs it at its pinned version). What every driver must do end to end (perfect passes,
lazy is NO_TOOL_CALL, tier B names the oracle's calls) is the contract's, in test_pi_driver.py. Here: the
requests pi sends and its session file, an edit through pi's own ``edit`` tool, its exit code and retries
on an HTTP 500, its repair of malformed arguments, a keyed backend with the proxy off (pi's session is the
only evidence), and a prompt pi's argument parser would take for an option (it goes through stdin).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gripprobe_core.testing import read_cases as cases_of, read_jsonl as jsonl, run_gripprobe, stored_transcript
from gripprobe_pi import PINNED_VERSION
from gripprobe_pi.parse import parse_outputs

pytestmark = pytest.mark.e2e

TESTS = ("shell_pwd", "save_file")
#: The tool the oracle must have driven for each test.
EXPECTED_TOOL = {"shell_pwd": "bash", "save_file": "write"}


def case_dir(run: Path, model: str, test: str) -> Path:
    return run / "cases" / f"pi__{model}__oracle__tool__{test}"


def ours(case: Path):
    """What the plugin's parser reads from the case's kept session file and stdout."""
    session = case / "artifacts" / "measured.session.jsonl"
    return parse_outputs((case / "measured.stdout").read_bytes(), session.read_bytes() if session.exists() else None,
                         "measured")


@pytest.fixture(scope="module")
def run_dir(e2e_run) -> Path:
    """The contract's run (the kit makes it once): oracle-perfect and oracle-lazy × TESTS."""
    return e2e_run(*TESTS)


def test_every_case_ran_the_pinned_pi_cleanly_and_kept_its_session(run_dir):
    for name, c in cases_of(run_dir).items():
        assert c["agent_version"] == PINNED_VERSION
        assert [(p["phase"], p["process"]["status"], p["process"]["exit_code"]) for p in c["phases"]] == [
            ("warmup", "ok", 0), ("measured", "ok", 0)]
        context = json.loads((run_dir / "cases" / name / "artifacts" / "measured.context.json").read_text())
        assert context["kept_from"]["session.jsonl"].startswith("home/.pi/agent/sessions/")
        assert context["kept_refused"] == []


@pytest.mark.parametrize("test", TESTS)
def test_pi_reports_exactly_the_calls_the_oracle_issued_and_sends_only_the_model_under_test(run_dir, test):
    case = case_dir(run_dir, "oracle-perfect", test)
    truth = jsonl(case / "artifacts" / "oracle.measured.jsonl")
    got = ours(case)
    assert got.source == "session"
    starts = [e for e in got.events if e.event_type == "tool_call_start"]
    results = [e for e in got.events if e.event_type == "tool_call_result"]
    assert [t["name"] for t in truth] == [s.payload["raw_name"] for s in starts] == [EXPECTED_TOOL[test]]
    assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts] == [r.tool_call_id for r in results]
    assert [t["arguments"] for t in truth] == [s.payload["arguments"] for s in starts]
    assert [r.status for r in results] == ["success"]
    assert got.final_text and got.final_text.startswith("Done.")
    assert (case / "artifacts" / "measured.final.txt").read_text() == got.final_text
    verdict = json.loads((case / "case.json").read_text())["verdict"]
    assert (verdict["status"], verdict["tool_event_verdict"]) == ("PASS", "confirmed_tool_use")
    # the wire: one request per step plus the answer, all Chat Completions, all naming the phase's model,
    # each offering pi's four default tools; no title or other side request
    requests = jsonl(case / "artifacts" / "proxy.measured.http.jsonl")
    assert [r["x_gripprobe_path"] for r in requests] == ["/v1/chat/completions"] * 2
    assert {r["x_gripprobe_request"]["model"] for r in requests} == {"perfect"}
    assert all(r["x_gripprobe_request"]["stream"] is True for r in requests)
    offered = [[t["function"]["name"] for t in r["x_gripprobe_request"]["tools"]] for r in requests]
    assert offered == [["read", "bash", "edit", "write"]] * 2


def test_lazy_run_shows_the_agent_answered_without_tools(run_dir):
    case = case_dir(run_dir, "oracle-lazy", "shell_pwd")
    got = ours(case)
    assert [(e.event_type, e.response_id) for e in got.events] == [("model_response", "chatcmpl-oracle-1")]
    assert "would" in got.events[0].payload["text"] and got.final_text == got.events[0].payload["text"]
    events = jsonl(case / "artifacts" / "events.measured.jsonl")
    assert not [e for e in events if e["event_type"].startswith("tool_call")]


def test_an_edit_goes_through_pis_own_edit_tool(e2e_run):
    """patch_file: the oracle reads the file, then edits it with pi's ``edit`` (one {oldText, newText}
    replacement, said by the plugin's dialect), and pi applies it."""
    run = e2e_run("patch_file", models=("oracle-perfect",))
    case = case_dir(run, "oracle-perfect", "patch_file")
    assert json.loads((case / "case.json").read_text())["verdict"]["status"] == "PASS"
    truth = jsonl(case / "artifacts" / "oracle.measured.jsonl")
    assert [t["name"] for t in truth] == ["read", "edit"]
    assert truth[1]["arguments"] == {"path": "settings.py", "edits": [
        {"oldText": "TIMEOUT_SECONDS = 30", "newText": "TIMEOUT_SECONDS = 45"}]}
    events = stored_transcript(case).events
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert [(r.tool_call_id, r.payload["raw_name"], r.status) for r in results] == [
        (t["tool_call_id"], t["name"], "success") for t in truth]
    assert results[1].payload["output"] == "Successfully replaced 1 block(s) in settings.py."


@pytest.fixture(scope="module")
def failure_run(e2e_run) -> Path:
    return e2e_run("save_file", models=("oracle-http-500", "oracle-malformed-args"))


def test_http_500_exits_1_after_few_retries(failure_run):
    """pi retries a 500 at two levels; with both knobs at 1 that is 4 requests in about a second (its
    defaults make 12 over ~17 s). Print mode exits 1 (--mode json would exit 0)."""
    case = case_dir(failure_run, "oracle-http-500", "save_file")
    verdict = json.loads((case / "case.json").read_text())["verdict"]
    assert (verdict["status"], verdict["failure_reason"]) == ("SHELL_ERROR", "nonzero_exit")
    requests = jsonl(case / "artifacts" / "proxy.measured.http.jsonl")
    assert [r["x_gripprobe_status"] for r in requests] == [500] * 4
    measured = json.loads((case / "case.json").read_text())["phases"][-1]["process"]
    assert measured["exit_code"] == 1 and measured["duration_s"] < 15
    assert (case / "measured.stderr").read_text().strip() == "500 oracle profile http-500: internal server error"
    assert [(e.event_type, e.status, e.error_type) for e in ours(case).events] == [
        ("model_response", "error", "http_500")] * 2


def test_malformed_arguments_are_repaired_and_run(failure_run):
    """The oracle cuts the write's closing brace off; pi's streaming JSON parser completes the arguments
    and runs the write: the file is right, and the case PASSes where the reference agent FAILs."""
    case = case_dir(failure_run, "oracle-malformed-args", "save_file")
    (truth,) = jsonl(case / "artifacts" / "oracle.measured.jsonl")
    assert isinstance(truth["arguments"], str) and not truth["arguments"].endswith("}")
    (start,) = [e for e in ours(case).events if e.event_type == "tool_call_start"]
    assert start.tool_call_id == truth["tool_call_id"] and start.payload["arguments"] == json.loads(truth["arguments"] + "}")
    wire = [e for e in jsonl(case / "artifacts" / "events.measured.jsonl") if e["event_type"] == "tool_call_start"]
    assert [e["error_type"] for e in wire] == ["malformed_arguments"]
    assert json.loads((case / "case.json").read_text())["verdict"]["status"] == "PASS"
    assert (case / "workspace" / "greeting.txt").read_text() == (
        "Hello, GripProbe!\nThis file was saved with the write tool.\n")


def test_keyed_backend_proxy_off_and_a_prompt_that_reads_like_an_option(agent_install, e2e_specs, tmp_path):
    """Proxy off: pi's own session file is the only evidence, and it confirms the call (tier B) with the
    oracle's call id. The backend has an API key: it goes to pi's environment and into no stored file.
    A second test's prompt starts with "- ", which pi's argument parser would reject as an unknown
    option: the driver hands it to pi's stdin, and pi's session shows it received it."""
    specs = tmp_path / "specs"
    shutil.copytree(e2e_specs, specs)  # the kit's specs are the session's: add to a copy
    model = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_PI_KEY"))
    test = (specs / "tests" / "save_file.yaml").read_text()
    assert "\nprompt: |\n  Use your" in test
    (specs / "tests" / "save_file_dash.yaml").write_text(test.replace("id: save_file", "id: save_file_dash").replace(
        "\nprompt: |\n  Use your", "\nprompt: |\n  - Use your"))
    key = "sk-canary-e2e-pi-777"
    run = run_gripprobe("run", "--specs", specs, "--results", tmp_path / "r", "-a", "pi", "-m", "oracle-keyed",
                        "-t", "save_file", "-t", "save_file_dash", "--telemetry-proxy", "off",
                        env={"GRIPPROBE_TEST_PI_KEY": key})
    cases = cases_of(run)
    assert {c["key"]["test"]: c["verdict"]["status"] for c in cases.values()} == {
        "save_file": "PASS", "save_file_dash": "PASS"}
    for name, c in cases.items():
        assert c["telemetry"]["telemetry_source_tier"] == "B"
        assert c["telemetry"]["telemetry_proxy_status"] == "skipped"
        artifacts = run / "cases" / name / "artifacts"
        truth = jsonl(artifacts / "oracle.measured.jsonl")
        events = jsonl(artifacts / "events.measured.jsonl")
        assert {e["source_tier"] for e in events} == {"B"}
        assert [e["tool_call_id"] for e in events if e["event_type"] == "tool_call_start"] == \
            [t["tool_call_id"] for t in truth] == ["call_oracle_0001"]
    dash = next(run / "cases" / n for n, c in cases.items() if c["key"]["test"] == "save_file_dash")
    prompt = json.loads((dash / "artifacts" / "measured.context.json").read_text())["prompt"]
    assert prompt.startswith("- Use your file-writing tool")
    session = jsonl(dash / "artifacts" / "measured.session.jsonl")
    (user,) = [e["message"] for e in session if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert user["content"] == [{"type": "text", "text": prompt.strip()}]  # pi trims what it reads from stdin
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


def test_auto_deny_is_pis_no_tools_and_the_file_is_not_written(e2e_specs, e2e_run):
    """oracle-perfect on save_file under auto-deny: pi runs with ``--no-tools`` (it has no approval setting),
    the oracle is offered no tool, nothing is written, the case records the policy as applied natively."""
    (e2e_specs / "tests" / "save_file_autodeny.yaml").write_text(AUTO_DENY_TEST)
    run = e2e_run("save_file_autodeny", models=("oracle-perfect",))
    ((cid, case),) = cases_of(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("auto-deny", "native", True, [])
    assert "--no-tools" in record["reason"]
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    assert jsonl(run / "cases" / cid / "artifacts" / "oracle.measured.jsonl") == []  # offered no tool, asked none
    requests = [r["x_gripprobe_request"] for r in jsonl(run / "cases" / cid / "artifacts" / "proxy.measured.http.jsonl")]
    assert requests and not any(r.get("tools") for r in requests)  # the wire shows no tool offered

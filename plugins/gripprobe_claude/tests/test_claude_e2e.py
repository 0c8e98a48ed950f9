"""End to end, what is particular to Claude Code: the REAL claude binary (the kit installs it at its pinned
version) against the real oracle backend, through the real `gripprobe run` where a run is needed. What every
driver must do end to end (perfect passes, lazy is NO_TOOL_CALL, tier B names the oracle's calls) is the
contract's, in test_claude_driver.py; here, from that same run: the wire (Anthropic Messages only, every
request naming the phase's model, the tools offered), the kept transcript and the lazy run. Then: nothing
phones home (checked against a control that does), an HTTP 500 case (retries kept low), a Read-then-Edit
test, and a keyed case with the proxy off (Claude Code's own output is the only evidence).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from gripprobe_claude import PINNED_VERSION
from gripprobe_claude.config import QUIET_ENV
from gripprobe_claude.parse import parse_outputs, parse_transcript_bytes
from gripprobe_claude.plugin import TRANSCRIPT_ARTIFACT
from gripprobe_core.plugin import TestSpec
from gripprobe_core.testing import (
    oracle_server, phase_context, read_cases as cases_of, read_jsonl as jsonl, run_gripprobe,
)

pytestmark = pytest.mark.e2e

TESTS = ("shell_pwd", "save_file")
#: The tool the oracle drives for each test through the generic tools dialect.
EXPECTED_TOOL = {"shell_pwd": "Bash", "save_file": "Write"}


def gripprobe_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> Path:
    """The real `gripprobe run` of Claude Code in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "claude-code", *args, env=extra_env)


@pytest.fixture(scope="module")
def run_dir(e2e_run) -> Path:
    """The contract's run (the kit makes it once): oracle-perfect and oracle-lazy × TESTS."""
    return e2e_run(*TESTS)


def test_every_case_ran_the_pinned_claude_cleanly(run_dir):
    cases = cases_of(run_dir)
    assert len(cases) == 4
    for c in cases.values():
        assert c["agent_version"] == PINNED_VERSION
        assert [(p["phase"], p["process"]["status"], p["process"]["exit_code"]) for p in c["phases"]] == [
            ("warmup", "ok", 0), ("measured", "ok", 0)]


def test_every_request_is_anthropic_messages_naming_the_phase_model(run_dir):
    """One wire, one model name: no side request under a haiku/sonnet name, no preconnect, nothing else."""
    for name, case in cases_of(run_dir).items():
        profile = case["key"]["model"].removeprefix("oracle-")
        for phase in ("warmup", "measured"):
            requests = jsonl(run_dir / "cases" / name / "artifacts" / f"proxy.{phase}.http.jsonl")
            assert requests, (name, phase)
            assert {(r["x_gripprobe_method"], r["x_gripprobe_path"], r["x_gripprobe_query"], r["x_gripprobe_protocol"],
                     r["x_gripprobe_stream"], r["x_gripprobe_status"]) for r in requests} == {
                ("POST", "/v1/messages", "beta=true", "anthropic_messages", True, 200)}, (name, phase)
            assert {r["x_gripprobe_request"]["model"] for r in requests} == {profile}, (name, phase)
        want = 2 if profile == "perfect" else 1  # the call, then the answer; lazy answers at once
        assert len(jsonl(run_dir / "cases" / name / "artifacts" / "proxy.measured.http.jsonl")) == want, name


@pytest.mark.parametrize("test", TESTS)
def test_agent_output_reports_exactly_the_calls_the_oracle_issued(run_dir, test):
    case_dir = run_dir / "cases" / f"claude-code__oracle-perfect__oracle__tool__{test}"
    artifacts = case_dir / "artifacts"
    truth = jsonl(artifacts / "oracle.measured.jsonl")
    assert [(t["protocol"], t["name"]) for t in truth] == [("anthropic_messages", EXPECTED_TOOL[test])]
    transcript = artifacts / f"measured.{TRANSCRIPT_ARTIFACT}"
    assert transcript.is_file()
    for ours in (parse_outputs(case_dir / "measured.stdout", transcript, "measured"),
                 parse_transcript_bytes(transcript.read_bytes(), "measured", transcript.name)):  # alone, the same
        starts = [e for e in ours.events if e.event_type == "tool_call_start"]
        results = [e for e in ours.events if e.event_type == "tool_call_result"]
        assert [t["name"] for t in truth] == [s.payload["raw_name"] for s in starts]
        assert [t["tool_call_id"] for t in truth] == [s.tool_call_id for s in starts] == [r.tool_call_id for r in results]
        assert [t["arguments"] for t in truth] == [s.payload["arguments"] for s in starts]
        assert [r.status for r in results] == ["success"]
        assert all(s.parent_id and s.timestamp for s in starts)
        assert ours.final_text and ours.final_text.startswith("Done.")
    case = json.loads((case_dir / "case.json").read_text())
    assert case["telemetry"]["telemetry_source_tier"] == "A" and "B" in case["telemetry"]["tiers_present"]
    assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
    requests = jsonl(artifacts / "proxy.measured.http.jsonl")
    offered = [t.get("name") for t in requests[0]["x_gripprobe_request"]["tools"]]
    assert {"Bash", "Write", "Edit", "Read", "Agent"} <= set(offered)
    context = json.loads((artifacts / "measured.context.json").read_text())
    assert context["kept_from"][TRANSCRIPT_ARTIFACT].startswith("home/.claude/projects/")


def test_lazy_run_shows_the_agent_answered_without_tools(run_dir):
    case_dir = run_dir / "cases" / "claude-code__oracle-lazy__oracle__tool__save_file"
    ours = parse_outputs(case_dir / "measured.stdout", None, "measured")
    assert [(e.event_type, e.status) for e in ours.events] == [("model_response", "success")]
    assert ours.events[0].response_id == "msg_oracle_1" and "would" in ours.final_text
    case = json.loads((case_dir / "case.json").read_text())
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("NO_TOOL_CALL", "no_tool_call_observed")


# ------------------------------------------------------------------------------------ nothing phones home

class ConnectRecorder:
    """An HTTP proxy on 127.0.0.1 that answers nothing: it records the first line of every request (a
    ``CONNECT host:443`` names where the agent wanted to go) and hangs up. Traffic never leaves the machine."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.lines: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    head = conn.recv(4096)
                except OSError:
                    head = b""
                self.lines.append(head.split(b"\r\n", 1)[0].decode("latin-1"))

    def close(self) -> None:
        self.sock.close()


def run_claude_against_the_oracle(agent_driver, agent_spec, base: Path, executable: Path, proxy_url: str,
                                  drop: tuple[str, ...] = ()) -> tuple[object, list[dict], subprocess.CompletedProcess]:
    """One real claude process with the driver's environment and command (minus ``drop``) against the real
    oracle, every HTTP(S) request not to 127.0.0.1 sent through ``proxy_url``."""
    test = TestSpec.model_validate({"id": "hello", "title": "hello", "prompt": "Create hello.txt saying hello.",
                                    "validators": [{"kind": "file_exists", "path": "hello.txt"}],
                                    "reference": [{"write": {"path": "hello.txt", "content": "hello\n"}}]})
    started, stop = threading.Event(), threading.Event()
    box: dict[str, object] = {}

    async def serve() -> None:
        async with oracle_server(test.reference) as oracle:
            box["oracle"] = oracle
            started.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(30), "the oracle did not start"
    oracle = box["oracle"]
    try:
        ctx = phase_context(base, agent_spec, executable=executable, base_url=oracle.base_url, test=test)
        env = {k: v for k, v in agent_driver.environment(ctx).items() if k not in drop}
        env.update({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ctx.home), "TMPDIR": str(ctx.tmpdir),
                    "LANG": "C.UTF-8", **ctx.xdg, "HTTPS_PROXY": proxy_url, "HTTP_PROXY": proxy_url,
                    "https_proxy": proxy_url, "http_proxy": proxy_url, "NO_PROXY": "127.0.0.1,localhost",
                    "no_proxy": "127.0.0.1,localhost"})
        command = agent_driver.command(ctx)
        proc = subprocess.run(command.argv, env=env, cwd=ctx.workspace, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=120)
    finally:
        stop.set()
        thread.join(30)
    return ctx, list(oracle.ground_truth), proc


def test_nothing_phones_home_and_the_control_run_shows_the_check_would_see_it(agent_driver, agent_spec,
                                                                              agent_install, tmp_path):
    recorder = ConnectRecorder()
    try:
        ctx, truth, proc = run_claude_against_the_oracle(agent_driver, agent_spec, tmp_path / "quiet",
                                                         agent_install.executable, recorder.url)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (ctx.workspace / "hello.txt").read_text() == "hello\n"
        assert [t["name"] for t in truth] == ["Write"]
        assert recorder.lines == []  # no telemetry, update check, feature flags, error report …
        assert not (ctx.home / ".claude" / "telemetry").exists()  # nor batches kept to send later
        # The control: the same run without the switches calls api.anthropic.com (through the recorder).
        ctx2, truth2, proc2 = run_claude_against_the_oracle(agent_driver, agent_spec, tmp_path / "control",
                                                            agent_install.executable, recorder.url,
                                                            drop=tuple(QUIET_ENV))
        assert [t["name"] for t in truth2] == ["Write"], proc2.stderr[-2000:]
        assert any(line.startswith("CONNECT api.anthropic.com:443") for line in recorder.lines), recorder.lines
    finally:
        recorder.close()


# --------------------------------------------------------------------------------------- other runs

def test_http_500_is_a_shell_error_after_one_retry(e2e_specs, agent_install, tmp_path):
    """Claude Code retries a 500 itself (10 times with back-off by default: over two minutes); with
    CLAUDE_CODE_MAX_RETRIES=1 that is 2 requests in about a second, then it exits 1."""
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-http-500", "-t", "save_file")
    ((name, case),) = cases_of(run).items()
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("SHELL_ERROR", "nonzero_exit")
    artifacts = run / "cases" / name / "artifacts"
    assert [r["x_gripprobe_status"] for r in jsonl(artifacts / "proxy.measured.http.jsonl")] == [500, 500]
    assert case["phases"][-1]["process"]["exit_code"] == 1
    assert case["phases"][-1]["process"]["duration_s"] < 15
    ours = parse_outputs(run / "cases" / name / "measured.stdout", None, "measured")
    assert [(e.event_type, e.status, e.error_type) for e in ours.events] == [
        ("model_response", "error", "http_500")] * 2


def test_read_then_edit_of_an_existing_file_passes(e2e_specs, agent_install, tmp_path):
    """patch_file: the oracle reads settings.py with Read, then edits it with Edit (Claude Code refuses an
    Edit of a file it has not read first), through the generic tools dialect."""
    run = gripprobe_run(e2e_specs, tmp_path / "r", "-m", "oracle-perfect", "-t", "patch_file")
    ((name, case),) = cases_of(run).items()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    truth = jsonl(run / "cases" / name / "artifacts" / "oracle.measured.jsonl")
    assert [(t["name"], sorted(t["arguments"])) for t in truth] == [
        ("Read", ["file_path"]), ("Edit", ["file_path", "new_string", "old_string"])]
    ours = parse_outputs(run / "cases" / name / "measured.stdout", None, "measured")
    assert [(e.payload["raw_name"], e.status) for e in ours.events if e.event_type == "tool_call_result"] == [
        ("Read", "success"), ("Edit", "success")]
    edit = [e for e in ours.events if e.event_type == "tool_call_start"][1]
    assert edit.payload["arguments"] == {**truth[1]["arguments"], "replace_all": False}  # Claude Code adds it


def test_keyed_backend_passes_on_agent_output_alone_and_no_artifact_holds_the_key(agent_install, e2e_specs, tmp_path):
    """Proxy off: Claude Code's own stream-json is the only evidence, and it confirms the call (tier B) with
    the oracle's call id. The backend has an API key; it goes to the agent's environment and into no stored
    file."""
    specs = tmp_path / "specs"
    shutil.copytree(e2e_specs, specs)  # the kit's specs are the session's: add to a copy
    model = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_CLAUDE_KEY"))
    key = "sk-ant-canary-e2e-claude-777"
    run = gripprobe_run(specs, tmp_path / "r", "-m", "oracle-keyed", "-t", "save_file",
                        "--telemetry-proxy", "off", extra_env={"GRIPPROBE_TEST_CLAUDE_KEY": key})
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


# ------------------------------------------------------------------------------- interaction policies

INTERACTION_TESTS = ("shell_denied", "save_file_denied")


@pytest.fixture(scope="module")
def policy_run(e2e_run) -> Path:
    """The shipped interaction tests on the oracle profile that asks for the shell first and recovers with
    the file tools (docs/interaction.md): Claude Code runs as a session, the harness answering each question."""
    return e2e_run(*INTERACTION_TESTS, models=("oracle-deny-then-recover",))


def _permission_events(events: list[dict]) -> list[tuple]:
    return [(e["event_type"], e["tool_call_id"], e["payload"].get("raw_name"), e["payload"].get("outcome"),
             e["payload"].get("rule"), e["payload"].get("decided_by")) for e in events
            if e["event_type"].startswith("permission_")]


def test_auto_deny_nothing_is_written_and_every_call_was_asked_and_denied(policy_run):
    case_dir = policy_run / "cases" / "claude-code__oracle-deny-then-recover__oracle__tool__save_file_denied"
    case = json.loads((case_dir / "case.json").read_text())
    assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("PASS", None), case["verdict"]
    assert {k: case["interaction"][k] for k in ("policy", "how", "applied", "violations", "allowed", "denied")} == {
        "policy": "auto-deny", "how": "session", "applied": True, "violations": [], "allowed": 0, "denied": 2}
    assert case["phases"][-1]["process"]["status"] == "ok" and case["phases"][-1]["process"]["exit_code"] == 0
    artifacts = case_dir / "artifacts"
    truth = jsonl(artifacts / "oracle.measured.jsonl")
    assert [t["name"] for t in truth] == ["Bash", "Write"]  # the shell first, then the write tool
    bash, write = (t["tool_call_id"] for t in truth)
    events = jsonl(artifacts / "events.measured.jsonl")
    assert _permission_events(events) == [
        ("permission_request", bash, "Bash", None, None, None),
        ("permission_response", bash, None, "deny", "auto-deny", "policy"),
        ("permission_request", write, "Write", None, None, None),
        ("permission_response", write, None, "deny", "auto-deny", "policy")]
    assert {e["source_tier"] for e in events if e["event_type"].startswith("permission_")} == {"B"}
    results = {e["tool_call_id"]: e["status"] for e in events if e["event_type"] == "tool_call_result"}
    assert results == {bash: "error", write: "error"}
    listing = json.loads((artifacts / "workspace.listing.json").read_text())
    assert "greeting.txt" not in json.dumps(listing)
    # the harness's record: every line both ways and the two decisions
    record = jsonl(artifacts / "measured.conversation.jsonl")
    assert [r["decision"]["outcome"] for r in record if r["dir"] == "decision"] == ["deny", "deny"]
    assert record[0]["dir"] == "send" and record[0]["line"]["message"]["content"].startswith("Create a file")
    assert any(r.get("text") == "stdin closed after the result" for r in record)


def test_scripted_shell_denied_then_written_with_the_allowed_write_tool(policy_run):
    case_dir = policy_run / "cases" / "claude-code__oracle-deny-then-recover__oracle__tool__shell_denied"
    case = json.loads((case_dir / "case.json").read_text())
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert (case["interaction"]["how"], case["interaction"]["denied"], case["interaction"]["allowed"]) == ("session", 1, 1)
    artifacts = case_dir / "artifacts"
    bash, write = (t["tool_call_id"] for t in jsonl(artifacts / "oracle.measured.jsonl"))
    events = jsonl(artifacts / "events.measured.jsonl")
    assert _permission_events(events) == [
        ("permission_request", bash, "Bash", None, None, None),
        ("permission_response", bash, None, "deny", "rule 1 (tool_kind: execute)", "policy"),
        ("permission_request", write, "Write", None, None, None),
        ("permission_response", write, None, "allow", "default", "policy")]
    request = next(e for e in events if e["event_type"] == "permission_request" and e["tool_call_id"] == write)
    assert request["payload"]["kind"] == "write" and request["payload"]["input"]["file_path"].endswith("/greeting.txt")
    # the oracle's thinking blocks, as Claude Code printed them (tier B; one event with the wire's, seen by A and B)
    thoughts = [e for e in events if e["event_type"] == "thought" and "B" in (e.get("seen_by") or [e["source_tier"]])]
    assert thoughts and all(t["payload"]["text"] for t in thoughts)
    assert "denied" in (case_dir / "artifacts" / "measured.final.txt").read_text()


def test_without_a_policy_the_command_is_print_mode_and_no_session_is_kept(run_dir):
    for case_dir in (run_dir / "cases").iterdir():
        case = json.loads((case_dir / "case.json").read_text())
        assert case.get("interaction") is None
        assert not (case_dir / "artifacts" / "measured.conversation.jsonl").exists()
        assert not [e for e in jsonl(case_dir / "artifacts" / "events.measured.jsonl")
                    if e["event_type"].startswith("permission_")]


def test_a_keyed_session_keeps_the_key_out_of_every_file(agent_install, e2e_specs, tmp_path):
    """A session's record holds every line both ways: the key goes to the agent's environment only."""
    specs = tmp_path / "specs"
    shutil.copytree(e2e_specs, specs)
    model = (specs / "models" / "oracle-deny-then-recover.yaml").read_text()
    (specs / "models" / "oracle-keyed-deny.yaml").write_text(
        model.replace("id: oracle-deny-then-recover", "id: oracle-keyed-deny").replace(
            "model_id: deny-then-recover", "model_id: deny-then-recover\n    api_key_env: GRIPPROBE_TEST_CLAUDE_KEY"))
    key = "sk-ant-canary-e2e-claude-session-888"
    run = gripprobe_run(specs, tmp_path / "r", "-m", "oracle-keyed-deny", "-t", "save_file_denied",
                        extra_env={"GRIPPROBE_TEST_CLAUDE_KEY": key})
    ((name, case),) = cases_of(run).items()
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert (run / "cases" / name / "artifacts" / "measured.conversation.jsonl").stat().st_size > 0
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]

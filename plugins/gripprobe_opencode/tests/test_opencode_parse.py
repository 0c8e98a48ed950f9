"""The --format json parser on real opencode 1.18.33 outputs (fixtures/*/stdout.txt), plus garbage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_core.plugin import Event, PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.testing import summarize_phase
from gripprobe_opencode.parse import DENIED_PREFIX, TOOL_NAMES, OpencodeParser, final_text, iso_from_ms, parse_stdout

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def parse(name: str, phase: str = "measured") -> OpencodeParser:
    return parse_stdout(FIXTURES / name / "stdout.txt", phase)


def tool_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.is_tool_event()]


def test_success_bash_call_gives_response_start_result_in_order():
    p = parse("success")
    assert [e.event_type for e in p.events] == [
        "model_response", "tool_call_start", "tool_call_result", "model_response"]
    first, start, result, last = p.events
    assert all(e.source_tier == "B" and e.source == "agent_output" for e in p.events)
    assert first.payload["finish_reason"] == "tool-calls" and first.payload["tool_call_count"] == 1
    assert first.payload["usage"]["total"] == 120
    assert start.tool_call_id == result.tool_call_id == "call_7a5df18c50"
    assert start.parent_id == result.parent_id == first.event_id
    assert start.payload == {"raw_name": "bash", "name": "shell", "kind": "execute",
                             "arguments": {"command": "printf 'hello world\\n' > hello.txt"}}
    assert start.status == "started"
    assert result.status == "success" and result.exit_code == 0 and result.payload["output"] == "(no output)"
    # the agent's own clock: the tool's time.start / time.end (epoch ms), not the parse time
    assert start.timestamp == iso_from_ms(1795342480645) == "2026-11-22T10:14:40.645Z"
    assert result.timestamp == iso_from_ms(1795342481084)
    assert result.latency_ms == 439
    assert start.raw_artifact_ref == result.raw_artifact_ref == "stdout.txt:2"
    assert first.raw_artifact_ref == "stdout.txt:3" and last.raw_artifact_ref == "stdout.txt:6"
    assert last.payload["text"] == "I created hello.txt containing hello world."
    assert last.payload["finish_reason"] == "stop" and last.parent_id is None
    # a response is never later than the tool calls it asked for
    assert first.timestamp <= start.timestamp
    assert final_text(p) == "I created hello.txt containing hello world."


def test_event_ids_are_unique_and_sequenced_per_phase():
    p = parse("success", phase="warmup")
    assert [e.event_id for e in p.events] == [f"warmup-B-{n}" for n in range(1, 5)]
    assert [e.sequence for e in p.events] == [1, 2, 3, 4] and {e.phase for e in p.events} == {"warmup"}


def test_write_tool_is_a_write():
    start, result = tool_events(parse("write_tool").events)
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("write", "write", "write")
    assert start.payload["arguments"]["content"] == "hello world\n"
    assert result.status == "success" and result.exit_code is None
    assert result.payload["output"] == "Wrote file successfully."


def test_malformed_call_reported_as_invalid_is_a_failed_call_with_malformed_arguments():
    start, result = tool_events(parse("bad_args").events)
    assert start.tool_call_id == result.tool_call_id == "call_444381f60e"
    assert start.payload["raw_name"] == "bash" and start.payload["name"] == "shell"
    assert start.payload["agent_tool"] == "invalid" and start.payload["arguments"] is None
    assert "JSON parsing failed" in start.payload["error"]
    assert result.status == "error" and result.error_type == "malformed_arguments"
    assert final_text(parse("bad_args")) == "Sorry, my tool call was malformed."


def test_nonzero_exit_is_an_error_result_with_its_exit_code():
    start, result = tool_events(parse("bash_exit_nonzero").events)
    assert start.payload["arguments"] == {"command": "ls /nonexistent-gripprobe; exit 3"}
    assert result.status == "error" and result.exit_code == 3
    assert "No such file or directory" in result.payload["output"]


def test_tool_error_state_keeps_the_error_text():
    start, result = tool_events(parse("read_error").events)
    assert (start.payload["name"], start.payload["kind"]) == ("read", "read")
    assert result.status == "error" and result.payload["output"].startswith("File not found:")


def test_no_tool_run_has_only_a_model_response():
    p = parse("no_tool")
    assert [e.event_type for e in p.events] == ["model_response"]
    assert p.events[0].payload["tool_call_count"] == 0
    assert final_text(p) == "I will not use any tools. Bye."


def test_http_error_is_an_errored_model_response():
    p = parse("http500_fast")
    (event,) = p.events
    assert event.event_type == "model_response" and event.status == "error"
    assert event.error_type == "http_500" and event.payload["status_code"] == 500
    assert event.payload["message"] == "fake internal error"
    assert event.timestamp == iso_from_ms(1795342504508)
    assert final_text(p) is None


def test_backend_rejecting_tools_is_flagged(tmp_path):
    line = json.loads((FIXTURES / "http500_fast" / "stdout.txt").read_text())
    line["error"]["data"].update(statusCode=400, message="registry.ollama.ai/library/x does not support tools")
    path = tmp_path / "stdout.txt"
    path.write_text(json.dumps(line) + "\n")
    (event,) = parse_stdout(path, "measured").events
    assert event.error_type == "backend_tool_unsupported"


def test_run_killed_mid_step_still_reports_the_tool_and_an_unfinished_response(tmp_path):
    lines = (FIXTURES / "success" / "stdout.txt").read_text().splitlines()
    path = tmp_path / "stdout.txt"
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # torn last line
    events = parse_stdout(path, "measured").events
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "tool_call_result"]
    assert events[0].status == "unknown"


def test_parsed_evidence_drives_the_real_telemetry_summary():
    used = summarize_phase(parse("success").events, observability="structured", capture_missing=False,
                           parse_error=False)
    assert used.tool_event_verdict == "confirmed_tool_use" and used.telemetry_source_tier == "B"
    idle = summarize_phase(parse("no_tool").events, observability="structured", capture_missing=False,
                           parse_error=False)
    assert (idle.tool_event_verdict, idle.tool_event_verdict_reason) == (
        "no_tool_event_observed", "structured_event_absent")


def test_normalized_names_of_every_opencode_tool(agent_driver):
    assert agent_driver.tool_names == TOOL_NAMES
    normalize_tool = agent_driver.tool_names.normalize
    tools = json.loads((FIXTURES / "tools_openai_compatible.json").read_text())["tools"]
    names = {t["function"]["name"]: normalize_tool(t["function"]["name"]) for t in tools}
    assert names["bash"] == ("shell", "execute")
    assert names["write"] == ("write", "write") and names["edit"] == ("edit", "write")
    assert names["read"] == ("read", "read") and names["webfetch"] == ("fetch", "fetch")
    assert names["grep"][1] == names["glob"][1] == "search"
    assert names["todowrite"][1] == names["task"][1] == names["skill"][1] == "other"
    assert normalize_tool("apply_patch") == ("edit", "write")
    assert normalize_tool(None) == ("", "other") and normalize_tool("") == ("", "other")


# ------------------------------------------------------------------------------ through the driver

def capture_of(stdout: Path, stderr: Path) -> PhaseCapture:
    return PhaseCapture(stdout_path=stdout, stderr_path=stderr, process=ProcessResult(status="ok"))


def test_driver_parses_the_stdout_and_finds_the_final_text(agent_driver, phase_ctx, tmp_path):
    stdout = tmp_path / "measured.stdout"
    shutil.copyfile(FIXTURES / "success" / "stdout.txt", stdout)
    transcript = agent_driver.parse(phase_ctx, capture_of(stdout, tmp_path / "measured.stderr"))
    assert [e.raw_artifact_ref for e in transcript.events][1] == "measured.stdout:2"
    assert transcript.final_text == "I created hello.txt containing hello world."


def test_missing_stdout_is_a_wrapper_parse_error(agent_driver, phase_ctx, tmp_path):
    capture = capture_of(tmp_path / "nope.stdout", tmp_path / "nope.stderr")
    with pytest.raises(WrapperParseError, match="cannot read opencode stdout"):
        agent_driver.parse(phase_ctx, capture)


def test_empty_stdout_is_no_evidence_not_an_error(tmp_path):
    path = tmp_path / "stdout.txt"
    path.write_bytes(b"")
    assert parse_stdout(path, "measured").events == []


# ------------------------------------------------------------------------------------ garbage

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(tmp_path, data):
    path = tmp_path / "stdout.txt"
    path.write_bytes(data)
    parser = parse_stdout(path, "measured")
    assert all(isinstance(e, Event) for e in parser.events)


JSON_LEAF = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
             | st.just(DENIED_PREFIX + ". Here are some of the relevant rules []"))
JSON = st.recursive(JSON_LEAF, lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)
KNOWN = st.sampled_from(["step_start", "step_finish", "tool_use", "text", "reasoning", "error", "other"])
# (JSON_LEAF includes opencode's denial text, so refused calls and their permission events are fuzzed too)
KEYS = st.sampled_from(["tool", "callID", "state", "text", "time", "reason", "tokens", "messageID", "status",
                        "input", "output", "metadata", "exit", "start", "end", "error", "data", "statusCode"])
SHAPED = st.recursive(JSON_LEAF, lambda kids: st.dictionaries(KEYS, kids, max_size=5), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.fixed_dictionaries(
    {"type": KNOWN}, optional={"timestamp": JSON_LEAF, "part": SHAPED | JSON, "error": SHAPED | JSON}), max_size=8))
def test_odd_but_well_formed_lines_never_raise(tmp_path, lines):
    path = tmp_path / "stdout.txt"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    parser = parse_stdout(path, "measured")
    for e in parser.events:
        Event.model_validate(e.model_dump())  # every event honours the contract
    assert final_text(parser) is None or isinstance(final_text(parser), str)


# ------------------------------------------------------------------------------ denied calls, reasoning

def test_a_call_refused_by_the_permission_config_is_a_native_denial_tied_to_the_call():
    """Real 1.18.33 output (oracle-perfect, save_file, permission edit = {"*": deny, "/dev/null/*": deny}): the
    write call is printed in state ``error`` with opencode's PermissionDeniedError."""
    p = parse("permission_denied")
    assert [e.event_type for e in p.events] == [
        "model_response", "tool_call_start", "permission_request", "permission_response", "tool_call_result",
        "model_response"]
    _, start, request, response, result, _ = p.events
    assert start.tool_call_id == request.tool_call_id == response.tool_call_id == result.tool_call_id == "call_oracle_0001"
    assert request.payload["raw_name"] == "write" and request.payload["kind"] == "write"
    assert request.payload["input"] == start.payload["arguments"]
    assert request.payload["request_id"] == response.payload["request_id"]
    assert response.status == "success"
    assert {k: response.payload[k] for k in ("outcome", "decided_by", "rule")} == {
        "outcome": "deny", "decided_by": "native", "rule": "native: opencode permission edit = deny"}
    assert result.status == "error" and result.error_type == "permission_denied"
    assert result.payload["output"].startswith(DENIED_PREFIX)
    assert start.timestamp <= request.timestamp <= result.timestamp
    assert "prevents you from using this specific tool call" in final_text(p)


def test_an_ordinary_failed_call_is_no_permission_event():
    p = parse("read_error")
    assert not [e for e in p.events if e.event_type.startswith("permission")]


def test_reasoning_parts_become_thought_events_of_their_step_and_a_denied_shell_its_native_denial():
    """Real 1.18.33 output with ``--thinking`` (oracle-deny-then-recover, which streams reasoning, on
    shell_denied: bash denied by the ``permission`` config, then the write allowed)."""
    p = parse("deny_then_recover")
    assert [e.event_type for e in p.events] == [
        "model_response", "thought", "tool_call_start", "permission_request", "permission_response",
        "tool_call_result", "model_response", "thought", "tool_call_start", "tool_call_result",
        "model_response", "thought"]
    first, thought, start = p.events[:3]
    assert thought.payload == {"text": "A single shell command is the quickest way to do this."}
    assert thought.parent_id == start.parent_id == first.event_id
    assert thought.status == "success" and thought.tool_call_id is None
    assert first.payload["text"] == "I will do the first step with one shell command."  # reasoning is not text
    assert [e.payload["text"] for e in p.events if e.event_type == "thought"] == [
        "A single shell command is the quickest way to do this.",
        "The shell command was refused, so I will use the file tools instead.", "All steps are done; time to report."]
    truth = [json.loads(line) for line in (FIXTURES / "deny_then_recover" / "oracle.jsonl").read_text().splitlines()]
    (response,) = [e for e in p.events if e.event_type == "permission_response"]
    assert response.tool_call_id == truth[0]["tool_call_id"] and truth[0]["name"] == "bash"
    assert response.payload["rule"] == "native: opencode permission bash = deny"
    assert [(e.tool_call_id, e.status) for e in p.events if e.event_type == "tool_call_result"] == [
        (truth[0]["tool_call_id"], "error"), (truth[1]["tool_call_id"], "success")]
    assert final_text(p).startswith("The shell command was denied, so I used the file tools instead.")

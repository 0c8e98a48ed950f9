"""The codex parsers on real outputs: the field-note samples (a scripted fake model) and runs of the real
codex 0.169.0 against GripProbe's oracle (``fixtures/oracle/*``, with the oracle's ground truth), plus
garbage that must never raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_codex.parse import (
    ERROR_TYPES, error_type_for, parse_outputs, parse_rollout, parse_rollout_bytes, parse_stdout,
    parse_stdout_bytes, result_status,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = FIXTURES / "samples"
ORACLE = FIXTURES / "oracle"


def rollout(case: str, root: Path = SAMPLES):
    return parse_rollout(root / case / "rollout.jsonl", "measured")


def stdout(case: str, root: Path = SAMPLES):
    return parse_stdout(root / case / "stdout.txt", "measured")


def kinds(events) -> list[str]:
    return [e.event_type for e in events]


def ground_truth(case: str) -> list[dict]:
    text = (ORACLE / case / "oracle.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------- rollout: samples

def test_rollout_shell_call_with_codex_ids_times_and_exit_code():
    got = rollout("success")
    assert got.recognized and got.final_text == "I created hello.txt containing hello world."
    response, start, result, answer = got.events
    assert kinds(got.events) == ["model_response", "tool_call_start", "tool_call_result", "model_response"]
    assert response.response_id == "resp_22e5f31a1b734ef0" and response.payload["tool_call_count"] == 1
    assert response.payload["usage"]["input_tokens"] == 100
    assert response.timestamp == start.timestamp == "2026-11-22T10:14:22.442Z"
    assert start.tool_call_id == result.tool_call_id == "call_a3b8c7985e"
    assert start.payload == {"raw_name": "exec_command", "name": "shell", "kind": "execute",
                             "arguments": {"cmd": "printf 'hello world\\n' > hello.txt"}, "call_kind": "function"}
    assert start.status == "started" and start.error_type is None
    assert start.parent_id == result.parent_id == response.event_id
    assert start.response_id == result.response_id == response.response_id
    assert (result.status, result.exit_code, result.timestamp) == ("success", 0, "2026-11-22T10:14:22.521Z")
    assert result.latency_ms == pytest.approx(0.00531)
    assert result.payload["output"].startswith("Chunk ID: 7cbf58\n")
    assert answer.payload["text"] == "I created hello.txt containing hello world."
    assert answer.response_id == "resp_1ff8d34d63624139" and answer.payload["tool_call_count"] == 0
    assert [e.raw_artifact_ref for e in got.events] == [
        "rollout.jsonl:11", "rollout.jsonl:10", "rollout.jsonl:13", "rollout.jsonl:17"]
    assert all(e.source_tier == "B" and e.source == "agent_output" for e in got.events)
    assert [e.event_id for e in got.events] == [f"measured-B-{n}" for n in range(1, 5)]


def test_rollout_freeform_apply_patch_is_an_edit_with_the_raw_patch():
    start, result = [e for e in rollout("apply_patch").events if e.is_tool_event()]
    assert start.tool_call_id == result.tool_call_id == "call_19f644bbda"
    assert start.payload["raw_name"] == "apply_patch"
    assert (start.payload["name"], start.payload["kind"], start.payload["call_kind"]) == ("edit", "write", "custom")
    assert start.payload["arguments"] == "*** Begin Patch\n*** Add File: hello.txt\n+hello world\n*** End Patch\n"
    assert result.status == "success" and result.exit_code is None
    assert "Success. Updated the following files" in result.payload["output"]


def test_rollout_broken_arguments_are_malformed_and_the_result_an_error():
    start, result = [e for e in rollout("bad_args").events if e.is_tool_event()]
    assert start.error_type == "malformed_arguments"
    assert start.payload["arguments"] == '{"cmd": "printf hello > hello.txt'
    assert (result.status, result.error_type) == ("error", "tool_error")
    assert result.payload["output"].startswith("failed to parse function arguments")


def test_rollout_http_500_after_retries_is_one_error_response():
    got = rollout("http500")
    (event,) = got.events
    assert (event.event_type, event.status, event.error_type) == ("model_response", "error", "http_500")
    assert event.payload["codex_error_info"] == "internal_server_error"
    assert event.timestamp == "2026-11-22T10:14:30.719Z" and got.final_text is None


def test_rollout_without_tools_is_one_text_response():
    (event,) = rollout("no_tool").events
    assert event.event_type == "model_response" and event.status == "success"
    assert event.payload["text"] == "I will not use any tools. Bye." and event.payload["tool_call_count"] == 0


# --------------------------------------------------------------------------------- rollout: oracle runs

@pytest.mark.parametrize("case", ["retry_loop", "malformed_args", "perfect_save_file"])
def test_rollout_reports_exactly_the_calls_the_oracle_issued(case):
    truth = ground_truth(case)
    events = rollout(case, ORACLE).events
    starts = [e for e in events if e.event_type == "tool_call_start"]
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert [s.tool_call_id for s in starts] == [t["tool_call_id"] for t in truth] != []
    assert [s.payload["raw_name"] for s in starts] == [t["name"] for t in truth]
    assert [r.tool_call_id for r in results] == [t["tool_call_id"] for t in truth]
    responses = [e for e in events if e.event_type == "model_response"]
    assert [r.response_id for r in responses] == [f"resp_oracle_{n}" for n in range(1, len(responses) + 1)]


def test_rollout_of_a_retry_loop_has_three_failing_identical_calls():
    events = rollout("retry_loop", ORACLE).events
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1)] * 3
    starts = [e for e in events if e.event_type == "tool_call_start"]
    assert {json.dumps(s.payload["arguments"]) for s in starts} == {'{"cmd": "cat gripprobe-missing-file.txt"}'}
    assert len({s.parent_id for s in starts}) == 3


def test_rollout_of_a_backend_refusing_tools_says_so():
    (event,) = rollout("tools_unsupported", ORACLE).events
    assert (event.status, event.error_type) == ("error", "backend_tool_unsupported")


# ------------------------------------------------------------------------------------------- stdout

def test_stdout_command_execution_is_a_shell_call_without_ids_or_times():
    got = stdout("success")
    start, result, answer = got.events
    assert kinds(got.events) == ["tool_call_start", "tool_call_result", "model_response"]
    assert got.thread_id == "01a202bf-ed7c-7c12-8e6e-24f2f2068e8b"
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("exec_command", "shell", "execute")
    assert start.payload["arguments"] == {"command": "/bin/bash -lc \"printf 'hello world\\\\n' > hello.txt\""}
    assert start.tool_call_id is None and start.payload["item_id"] == result.payload["item_id"] == "item_0"
    assert start.timestamp is None
    assert (result.status, result.exit_code) == ("success", 0)
    assert got.final_text == answer.payload["text"] == "I created hello.txt containing hello world."
    assert [e.raw_artifact_ref for e in got.events] == ["stdout.txt:3", "stdout.txt:4", "stdout.txt:5"]


def test_stdout_file_change_is_an_apply_patch_edit():
    start, result, _ = stdout("apply_patch").events
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("apply_patch", "edit", "write")
    assert start.payload["arguments"]["changes"][0]["kind"] == "add"
    assert result.status == "success"


def test_stdout_cannot_see_a_call_codex_rejected_and_reports_turn_failures():
    assert kinds(stdout("bad_args").events) == ["model_response"]
    (failed,) = stdout("http500").events
    assert (failed.status, failed.error_type) == ("error", "agent_error")
    (refused,) = stdout("tools_unsupported", ORACLE).events
    assert refused.error_type == "backend_tool_unsupported"


def test_stdout_failed_command_is_an_error_with_its_exit_code():
    results = [e for e in stdout("retry_loop", ORACLE).events if e.event_type == "tool_call_result"]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1)] * 3


# ------------------------------------------------------------------------------------ choosing a source

def test_outputs_prefer_the_rollout_and_fall_back_to_stdout(tmp_path):
    out = SAMPLES / "success" / "stdout.txt"
    best = parse_outputs(out, SAMPLES / "success" / "rollout.jsonl", "measured")
    assert best.source == "rollout" and best.events[1].tool_call_id == "call_a3b8c7985e"
    assert best.final_text == "I created hello.txt containing hello world."
    assert parse_outputs(out, None, "measured").source == "stdout"
    assert parse_outputs(out, tmp_path / "missing.jsonl", "measured").source == "stdout"
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b'{"hello": 1}\nnot json\n')
    fallback = parse_outputs(out, junk, "measured")
    assert fallback.source == "stdout" and len(fallback.events) == 3
    with pytest.raises(OSError):
        parse_outputs(tmp_path / "no-stdout", None, "measured")


def test_final_text_comes_from_the_rollout_when_stdout_has_none(tmp_path):
    empty = tmp_path / "stdout.txt"
    empty.write_bytes(b"")
    got = parse_outputs(empty, SAMPLES / "no_tool" / "rollout.jsonl", "warmup")
    assert got.final_text == "I will not use any tools. Bye."
    assert [e.event_id for e in got.events] == ["warmup-B-1"] and got.events[0].phase == "warmup"


# ------------------------------------------------------------------------------------------- helpers

@pytest.mark.parametrize("item, output, expected", [
    ({"type": "CommandExecution", "exit_code": 0, "status": "completed"}, None, ("success", 0)),
    ({"type": "CommandExecution", "exit_code": 2, "status": "failed"}, None, ("error", 2)),
    ({"type": "FileChange", "status": "completed"}, None, ("success", None)),
    ({"type": "FileChange", "status": "failed"}, None, ("error", None)),
    ({}, "Chunk ID: x\nProcess exited with code 0\nOutput:\n", ("success", 0)),
    ({}, "Exit code: 1\nWall time: 0 seconds\nOutput:\nerror: invalid hunk", ("error", 1)),
    ({}, "failed to parse function arguments: EOF", ("error", None)),
    ({}, "Process running with session ID 3", ("unknown", None)),
    ({}, None, ("unknown", None)),
])
def test_result_status(item, output, expected):
    assert result_status(item, output) == expected


def test_error_types():
    assert error_type_for("internal_server_error", "busy") == "http_500"
    assert error_type_for({"http_connection_failed": {"http_status_code": None}}, None) == "connection_error"
    assert error_type_for("other", '{"error": {"message": "m:latest does not support tools"}}') == \
        "backend_tool_unsupported"
    assert error_type_for("something_new", None) == "something_new"
    assert error_type_for(None, None) == error_type_for([], "x") == "agent_error"
    assert set(ERROR_TYPES.values()) >= {"http_500", "connection_error"}


# ------------------------------------------------------------------------------------------- garbage

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "payload", "item", "timestamp", "call_id", "name", "arguments", "input", "output",
                         "role", "content", "id", "status", "exit_code", "error", "usage", "response_id",
                         "duration", "last_agent_message", "codex_error_info", "text", "message", "summary"])
        | st.text(max_size=5),
        inner, max_size=6),
    max_leaves=25)
TYPES = st.sampled_from(["response_item", "event_msg", "token_usage_record", "session_meta", "item.started",
                         "item.completed", "turn.failed", "thread.started", "function_call", "custom_tool_call",
                         "function_call_output", "message", "item_completed", "task_complete", "reasoning"])


def shaped_line(kind, payload, item):
    if isinstance(payload, dict) and isinstance(item, dict):
        payload = {**payload, "type": item.get("type", kind), "item": item}
    return json.dumps({"type": kind, "timestamp": "2026-11-22T10:14:22.442Z", "payload": payload, "item": item},
                      default=str).encode()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data):
    for got in (parse_rollout_bytes(data, "measured", "r"), parse_stdout_bytes(data, "measured", "s")):
        assert isinstance(got.events, list)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TYPES, JSONISH, JSONISH), max_size=12))
def test_codex_shaped_garbage_never_raises_and_gives_valid_events(lines):
    data = b"\n".join(shaped_line(kind, payload, item) for kind, payload, item in lines)
    for got in (parse_rollout_bytes(data, "measured", "r"), parse_stdout_bytes(data, "measured", "s")):
        for event in got.events:
            assert event.source_tier == "B" and event.raw_artifact_ref
            assert event.parent_id is None or event.parent_id in {e.event_id for e in got.events}


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.binary(max_size=200))
def test_truncated_or_corrupted_real_rollout_never_raises(cut, noise):
    data = (SAMPLES / "success" / "rollout.jsonl").read_bytes()
    got = parse_rollout_bytes(data[: len(data) * cut // 200] + noise, "measured", "rollout.jsonl")
    assert all(e.source_tier == "B" for e in got.events)


# ------------------------------------------------------------------------------------------- reasoning

def test_reasoning_items_become_thought_events():
    """Real codex 0.169.0 run through gripprobe against oracle-deny-then-recover (which streams reasoning; codex
    cannot apply shell_denied's policy, so its shell ran). The rollout's ``reasoning`` response items carry a
    summary; stdout prints ``reasoning`` items with the same text."""
    got = rollout("deny_then_recover", ORACLE)
    assert kinds(got.events) == ["model_response", "thought", "tool_call_start", "tool_call_result",
                                 "model_response", "thought"]
    first, thought, start, _, last, thought2 = got.events
    assert thought.payload == {"text": "A single shell command is the quickest way to do this."}
    assert thought2.payload == {"text": "All steps are done; time to report."}
    assert thought.parent_id == start.parent_id == first.event_id and thought2.parent_id == last.event_id
    assert thought.response_id == first.response_id and thought.timestamp
    assert start.tool_call_id == ground_truth("deny_then_recover")[0]["tool_call_id"]
    out = stdout("deny_then_recover", ORACLE)
    assert kinds(out.events) == ["thought", "model_response", "tool_call_start", "tool_call_result", "thought",
                                 "model_response"]
    assert [e.payload for e in out.events if e.event_type == "thought"] == [thought.payload, thought2.payload]
    both = parse_outputs(ORACLE / "deny_then_recover" / "stdout.txt", ORACLE / "deny_then_recover" / "rollout.jsonl",
                         "measured")
    assert both.source == "rollout" and kinds(both.events) == kinds(got.events)

"""The Claude Code parsers on real outputs: runs of the real Claude Code 2.1.332 against GripProbe's oracle
(``fixtures/oracle/*``, with the oracle's ground truth) and against a scripted Messages server
(``fixtures/samples/*``: a background sub-agent, a Read then an Edit), plus garbage that must never raise.
Machine paths are scrubbed; the transcripts leave out the lines that hold Claude Code's own system prompt
and listings (nothing parsed reads them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_claude.parse import (
    TOOL_NAMES, error_type_for, parse_outputs, parse_stream_bytes, parse_transcript_bytes, result_status,
    tool_arguments,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ORACLE = FIXTURES / "oracle"
SAMPLES = FIXTURES / "samples"


def stream(case: str, root: Path = ORACLE):
    return parse_stream_bytes((root / case / "stdout.txt").read_bytes(), "measured", "stdout.txt")


def transcript(case: str, root: Path = ORACLE):
    return parse_transcript_bytes((root / case / "session.jsonl").read_bytes(), "measured", "session.jsonl")


def truth(case: str) -> list[dict]:
    return [json.loads(line) for line in (ORACLE / case / "oracle.jsonl").read_text().splitlines() if line.strip()]


def shape(events) -> list[tuple]:
    return [(e.event_type, e.tool_call_id, e.status, e.error_type) for e in events]


def starts_of(events):
    return [e for e in events if e.event_type == "tool_call_start"]


# --------------------------------------------------------------------------------- stdout (stream-json)

def test_perfect_write_one_call_with_the_wire_id_its_result_and_the_answer():
    got = stream("perfect_save_file")
    assert got.recognized and got.source == "stream-json"
    assert got.session_id == "aa534226-7b9f-4415-99b6-bd367fcaee79"
    response, start, result, answer = got.events
    assert shape(got.events) == [("model_response", None, "success", None),
                                 ("tool_call_start", "call_oracle_0001", "started", None),
                                 ("tool_call_result", "call_oracle_0001", "success", None),
                                 ("model_response", None, "success", None)]
    assert (response.response_id, answer.response_id) == ("msg_oracle_1", "msg_oracle_2")
    assert response.payload["tool_call_count"] == 1 and response.payload["model"] == "perfect"
    assert response.payload["usage"]["input_tokens"] > 0
    assert start.payload == {"raw_name": "Write", "name": "write", "kind": "write", "arguments": {
        "file_path": "greeting.txt", "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}}
    assert start.parent_id == result.parent_id == response.event_id
    assert start.response_id == result.response_id == "msg_oracle_1"
    assert start.timestamp and result.timestamp and result.latency_ms is not None and result.latency_ms >= 0
    assert result.payload["output"].startswith("File created successfully at: greeting.txt")
    assert result.exit_code is None
    assert answer.payload["text"].startswith("Done. Steps performed: 1. write greeting.txt.")
    assert got.final_text == answer.payload["text"]
    assert [e.raw_artifact_ref for e in got.events] == ["stdout.txt:2", "stdout.txt:2", "stdout.txt:3", "stdout.txt:4"]
    assert all(e.source_tier == "B" and e.source == "agent_output" and e.phase == "measured" for e in got.events)


@pytest.mark.parametrize("case", ["perfect_save_file", "perfect_shell_pwd", "malformed_args", "error_then_recover",
                                  "retry_loop"])
def test_starts_are_exactly_the_oracle_calls_in_order(case):
    for got in (stream(case), transcript(case)):
        starts = starts_of(got.events)
        assert [(s.tool_call_id, s.payload["raw_name"]) for s in starts] == [
            (t["tool_call_id"], t["name"]) for t in truth(case)]
        results = [e for e in got.events if e.event_type == "tool_call_result"]
        assert [r.tool_call_id for r in results] == [s.tool_call_id for s in starts]


def test_bash_success_has_exit_code_zero():
    got = stream("perfect_shell_pwd")
    (start,) = starts_of(got.events)
    (result,) = [e for e in got.events if e.event_type == "tool_call_result"]
    assert start.payload["arguments"] == {"command": "pwd > pwd.txt"}
    assert (start.payload["name"], start.payload["kind"]) == ("shell", "execute")
    assert (result.status, result.exit_code, result.payload["output"]) == ("success", 0, "(Bash completed with no output)")


def test_a_failing_command_is_an_error_with_its_exit_code_and_a_text_turn_and_call_share_a_response():
    got = stream("error_then_recover")
    assert shape(got.events) == [
        ("model_response", None, "success", None),
        ("tool_call_start", "call_oracle_0001", "started", None),
        ("tool_call_result", "call_oracle_0001", "error", "tool_error"),
        ("model_response", None, "success", None),
        ("tool_call_start", "call_oracle_0002", "started", None),
        ("tool_call_result", "call_oracle_0002", "success", None),
        ("model_response", None, "success", None)]
    first = got.events[0]
    assert first.payload["text"] == "Let me look at the existing file first." and first.payload["tool_call_count"] == 1
    failed = got.events[2]
    assert failed.exit_code == 1 and "No such file or directory" in failed.payload["output"]


def test_retry_loop_three_identical_failing_calls():
    got = stream("retry_loop")
    results = [e for e in got.events if e.event_type == "tool_call_result"]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1)] * 3
    assert {json.dumps(s.payload["arguments"]) for s in starts_of(got.events)} == {
        '{"command": "cat gripprobe-missing-file.txt"}'}
    assert got.final_text == "The same call failed 3 times. I give up."


def test_malformed_arguments_keep_the_raw_text_and_are_flagged():
    got = stream("malformed_args")
    (start,) = starts_of(got.events)
    assert start.error_type == "malformed_arguments"
    assert start.payload["arguments"] == truth("malformed_args")[0]["arguments"]  # the raw text, as sent
    assert isinstance(start.payload["arguments"], str) and start.payload["arguments"].startswith('{"file_path"')
    (result,) = [e for e in got.events if e.event_type == "tool_call_result"]
    assert result.status == "error" and "InputValidationError" in result.payload["output"]


def test_lazy_and_text_tools_are_text_only():
    lazy = stream("lazy")
    assert shape(lazy.events) == [("model_response", None, "success", None)]
    assert lazy.final_text == "To solve this I would: 1. write greeting.txt. I have not run anything."
    text = stream("text_tools")
    assert shape(text.events) == [("model_response", None, "success", None)]
    assert "<tool_call>" in text.final_text  # the calls written as text are the proxy's to see


def test_http_500_one_error_per_failed_request():
    got = stream("http_500")
    assert shape(got.events) == [("model_response", None, "error", "http_500")] * 2
    retried, final = got.events
    assert retried.payload["retried"] is True and retried.payload["attempt"] == 1
    assert final.payload["http_status"] == 500 and final.payload["claude_error"] == "server_error"
    assert final.payload["error"].startswith("API Error: 500")
    assert got.final_text.startswith("API Error: 500")
    assert (ORACLE / "http_500" / "exit_code").read_text().strip() == "1"


def test_tools_unsupported_is_recognized_from_the_backend_message():
    got = stream("tools_unsupported")
    assert shape(got.events) == [("model_response", None, "error", "backend_tool_unsupported")]
    assert "does not support tools" in got.events[0].payload["error"]


def test_stall_killed_before_any_answer_has_no_events_but_is_recognized():
    got = stream("stall")
    assert got.recognized and got.events == [] and got.final_text is None


# -------------------------------------------------------------------------------------- the transcript

def test_transcript_reports_the_same_calls_with_stop_reasons():
    got = transcript("perfect_save_file")
    assert got.recognized and got.source == "transcript"
    assert shape(got.events) == shape(stream("perfect_save_file").events)
    response = got.events[0]
    assert response.payload["stop_reason"] == "tool_use" and response.response_id == "msg_oracle_1"
    assert got.final_text.startswith("Done. Steps performed")


def test_transcript_http_500_has_the_retried_error_and_the_final_one():
    got = transcript("http_500")
    assert shape(got.events) == [("model_response", None, "error", "http_500")] * 2
    assert got.events[0].payload["attempt"] == 1 and "500" in got.events[0].payload["error"]
    assert got.final_text.startswith("API Error: 500")


def test_outputs_prefer_stdout_and_fall_back_to_the_transcript(tmp_path):
    case = ORACLE / "malformed_args"
    empty = tmp_path / "measured.stdout"
    empty.write_bytes(b"")
    session = case / "session.jsonl"
    assert parse_outputs(case / "stdout.txt", session, "measured").source == "stream-json"
    got = parse_outputs(empty, session, "measured")
    assert got.source == "transcript" and [s.error_type for s in starts_of(got.events)] == ["malformed_arguments"]
    assert parse_outputs(empty, None, "measured").events == []
    assert parse_outputs(empty, tmp_path / "missing.jsonl", "measured").source == "stream-json"


# ------------------------------------------------------------------------------- scripted-server samples

def test_a_background_sub_agent_keeps_only_the_main_conversation():
    got = stream("background_agent", SAMPLES)
    (start,) = starts_of(got.events)
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("Agent", "agent", "other")
    assert start.payload["arguments"]["subagent_type"] == "Explore"
    texts = [e.payload["text"] for e in got.events if e.event_type == "model_response"]
    assert "side answer" not in texts  # the sub-agent's own message (parent_tool_use_id set)
    assert texts == ["Let me do it.", "Done. I wrote hello.txt.", "Done. I wrote hello.txt."]
    assert got.final_text == "Done. I wrote hello.txt."  # two result lines: the main turn, then after the agent
    lines = (SAMPLES / "background_agent" / "stdout.txt").read_text().splitlines()
    assert sum(json.loads(line)["type"] == "result" for line in lines) == 2


def test_read_then_edit_with_relative_paths():
    for got in (stream("read_edit", SAMPLES), transcript("read_edit", SAMPLES)):
        starts = starts_of(got.events)
        assert [(s.payload["raw_name"], s.payload["name"], s.payload["kind"]) for s in starts] == [
            ("Read", "read", "read"), ("Edit", "edit", "write")]
        assert starts[1].payload["arguments"] == {"replace_all": False, "file_path": "settings.py",
                                                  "old_string": "TIMEOUT_SECONDS = 30",
                                                  "new_string": "TIMEOUT_SECONDS = 45"}
        results = [e for e in got.events if e.event_type == "tool_call_result"]
        assert [r.status for r in results] == ["success", "success"]
        assert "TIMEOUT_SECONDS = 30" in results[0].payload["output"]


# ----------------------------------------------------------------------------------------- the helpers

def test_tool_arguments_flag_what_was_not_json():
    assert tool_arguments({"command": "ls"}) == ({"command": "ls"}, False)
    assert tool_arguments({"__unparsedToolInput": {"raw": "{oops", "len": 5}}) == ("{oops", True)
    assert tool_arguments({"__unparsedToolInput": 7}) == (7, True)
    assert tool_arguments("{broken") == ("{broken", True)


def test_result_status_reads_exit_codes():
    assert result_status("Bash", False, "hello") == ("success", 0)
    assert result_status("Bash", True, "Exit code 2\nboom") == ("error", 2)
    assert result_status("Bash", True, "Error: Exit code 127\nnot found") == ("error", 127)
    assert result_status("Write", False, "File created") == ("success", None)
    assert result_status("Write", True, "<tool_use_error>…") == ("error", None)
    assert result_status(None, "yes", "x") == ("success", None)


def test_error_types():
    assert error_type_for(500, "API Error: 500 boom") == "http_500"
    assert error_type_for(400, "x: registry.ollama.ai/library/m:latest does not support tools") == \
        "backend_tool_unsupported"
    assert error_type_for(None, "Connection error.") == "connection_error"
    assert error_type_for(True, None) == error_type_for("500", None) == error_type_for(9999, None) == "api_error"


def test_tool_name_table_has_known_kinds_for_every_claude_tool():
    for raw in ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Glob", "Grep", "WebFetch", "WebSearch",
                "Agent", "Task", "TodoWrite", "ToolSearch", "Skill"):
        name, kind = TOOL_NAMES.normalize(raw)
        assert name and kind in ("read", "write", "execute", "search", "fetch", "other"), raw


# ------------------------------------------------------------------------------------------- garbage

LINES = [b'{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":1,"name":[],"input":"x"}]}}',
         b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":null,"content":[1,{"text":2}]}]}}',
         b'{"type":"assistant","is_api_error_message":true,"api_error_status":"x","message":{"content":5}}',
         b'{"type":"system","subtype":"api_retry","error_status":1e999}', b'{"type":"system","subtype":"api_error","error":[]}',
         b'{"type":"result","result":7}', b'{"type":"assistant","message":[]}', b'{"type":"user","message":{"content":"hi"}}',
         b'{"type":"assistant","parent_tool_use_id":"t","message":{}}', b'{"timestamp":"not a time","type":"user"}',
         b"\xff\xfe", b"null", b"[]", b"{", b"\x00"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(LINES), st.binary(max_size=200)), max_size=20))
def test_parsers_never_raise_on_arbitrary_bytes(lines):
    data = b"\n".join(lines)
    for parse in (parse_stream_bytes, parse_transcript_bytes):
        got = parse(data, "measured", "x")
        assert got.final_text is None or isinstance(got.final_text, str)
        assert all(e.source_tier == "B" for e in got.events)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=400), st.binary(max_size=64))
def test_parsers_survive_a_real_output_cut_or_corrupted_anywhere(cut, junk):
    data = (ORACLE / "error_then_recover" / "stdout.txt").read_bytes()
    mangled = data[: len(data) * cut // 400] + junk + data[len(data) * cut // 400:]
    got = parse_stream_bytes(mangled, "measured", "x")
    assert len(starts_of(got.events)) <= 2

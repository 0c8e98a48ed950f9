"""The pi parsers on real outputs: runs of the real pi 0.73.1 through ``gripprobe run`` against every oracle
profile (``fixtures/oracle/<profile>``: its session file, stdout, stderr, exit code and the oracle's ground
truth), two ``--mode json`` event streams of the real pi (``fixtures/stream``), and garbage that must never
raise. Machine paths in the samples are replaced by ``$WORKSPACE`` / ``$HOME``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_pi.parse import (
    TOOL_NAMES, error_type_for, iso_from_ms, parse_outputs, parse_session_bytes, parse_stream_bytes, seconds_of,
    stdout_answer,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ORACLE = FIXTURES / "oracle"
STREAM = FIXTURES / "stream"


def sample(case: str):
    d = ORACLE / case
    session = d / "session.jsonl"
    return parse_outputs((d / "stdout.txt").read_bytes(), session.read_bytes() if session.exists() else None,
                         "measured")


def truth(case: str) -> list[dict]:
    return [json.loads(x) for x in (ORACLE / case / "oracle.jsonl").read_text().splitlines() if x.strip()]


def of_type(events, kind: str):
    return [e for e in events if e.event_type == kind]


# ----------------------------------------------------------------------------- session files: oracle runs

STRUCTURED = ["perfect", "perfect_shell_pwd", "perfect_patch_file", "malformed_args", "error_then_recover",
              "retry_loop", "slow_stream"]


@pytest.mark.parametrize("case", STRUCTURED)
def test_session_reports_exactly_the_calls_the_oracle_issued(case):
    got = sample(case)
    assert got.source == "session" and got.recognized
    want = truth(case)
    starts, results = of_type(got.events, "tool_call_start"), of_type(got.events, "tool_call_result")
    assert [s.tool_call_id for s in starts] == [t["tool_call_id"] for t in want] != []
    assert [s.payload["raw_name"] for s in starts] == [t["name"] for t in want]
    assert [r.tool_call_id for r in results] == [t["tool_call_id"] for t in want]
    responses = of_type(got.events, "model_response")
    assert [r.response_id for r in responses] == [f"chatcmpl-oracle-{n}" for n in range(1, len(responses) + 1)]
    for start, result in zip(starts, results):
        assert start.parent_id == result.parent_id and start.response_id == result.response_id
        parent = next(e for e in got.events if e.event_id == start.parent_id)
        assert parent.event_type == "model_response" and parent.response_id == start.response_id
        assert start.timestamp and result.timestamp and result.latency_ms is not None and result.latency_ms >= 0
    assert all(e.source_tier == "B" and e.source == "agent_output" and e.phase == "measured" for e in got.events)
    assert [e.event_id for e in got.events] == [f"measured-B-{n}" for n in range(1, len(got.events) + 1)]


def test_perfect_save_file_is_one_write_then_the_answer():
    got = sample("perfect")
    response, start, result, answer = got.events
    assert [e.event_type for e in got.events] == ["model_response", "tool_call_start", "tool_call_result",
                                                  "model_response"]
    assert start.payload == {"raw_name": "write", "name": "write", "kind": "write", "arguments": {
        "path": "greeting.txt", "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}}
    assert (result.status, result.exit_code, result.error_type) == ("success", None, None)
    assert result.payload["output"] == "Successfully wrote 59 bytes to greeting.txt"
    assert response.payload["tool_call_count"] == 1 and response.payload["stop_reason"] == "toolUse"
    assert response.payload["usage"]["input"] > 0 and response.payload["model"] == "perfect"
    assert response.timestamp.endswith("Z") and response.raw_artifact_ref == "session.jsonl:5"
    assert answer.payload["stop_reason"] == "stop" and answer.payload["tool_call_count"] == 0
    assert got.final_text == answer.payload["text"] and got.final_text.startswith("Done. Steps performed: 1. write")
    assert got.final_text + "\n" == (ORACLE / "perfect" / "stdout.txt").read_text()


def test_shell_and_edit_calls_are_normalized():
    (shell,) = of_type(sample("perfect_shell_pwd").events, "tool_call_start")
    assert (shell.payload["raw_name"], shell.payload["name"], shell.payload["kind"]) == ("bash", "shell", "execute")
    read, edit = of_type(sample("perfect_patch_file").events, "tool_call_start")
    assert (read.payload["name"], read.payload["kind"]) == ("read", "read")
    assert (edit.payload["name"], edit.payload["kind"]) == ("edit", "write")
    assert edit.payload["arguments"] == {"path": "settings.py", "edits": [
        {"oldText": "TIMEOUT_SECONDS = 30", "newText": "TIMEOUT_SECONDS = 45"}]}
    result = of_type(sample("perfect_patch_file").events, "tool_call_result")[-1]
    assert result.payload["output"] == "Successfully replaced 1 block(s) in settings.py."


def test_a_failing_bash_call_is_an_error_with_its_exit_code():
    results = of_type(sample("error_then_recover").events, "tool_call_result")
    assert [(r.status, r.exit_code, r.error_type) for r in results] == [
        ("error", 1, "tool_error"), ("success", None, None)]
    assert results[0].payload["output"].endswith("Command exited with code 1")
    loop = of_type(sample("retry_loop").events, "tool_call_result")
    assert [(r.status, r.exit_code) for r in loop] == [("error", 1)] * 3
    starts = of_type(sample("retry_loop").events, "tool_call_start")
    assert {json.dumps(s.payload["arguments"]) for s in starts} == {'{"command": "cat gripprobe-missing-file.txt"}'}


def test_malformed_arguments_on_the_wire_are_repaired_by_pi():
    """The oracle sent the write's arguments without their closing brace; pi's streaming JSON parser
    completed them, ran the write, and its session keeps only the parsed object."""
    (want,) = truth("malformed_args")
    assert isinstance(want["arguments"], str) and not want["arguments"].endswith("}")
    (start,) = of_type(sample("malformed_args").events, "tool_call_start")
    assert start.payload["arguments"] == json.loads(want["arguments"] + "}") and start.error_type is None
    (result,) = of_type(sample("malformed_args").events, "tool_call_result")
    assert result.status == "success"


@pytest.mark.parametrize("case", ["lazy", "text_tools"])
def test_no_tool_call_is_one_text_response(case):
    got = sample(case)
    (event,) = got.events
    assert (event.event_type, event.status, event.payload["tool_call_count"]) == ("model_response", "success", 0)
    assert got.final_text == event.payload["text"] and got.final_text
    if case == "text_tools":
        assert "<tool_call>" in got.final_text and truth(case)[0]["structured"] is False


def test_http_500_is_one_error_response_per_attempt_and_exit_1():
    """Two agent-level attempts (retry.maxRetries 1), each retried once by the OpenAI client (not recorded)."""
    got = sample("http_500")
    assert [(e.event_type, e.status, e.error_type) for e in got.events] == [("model_response", "error", "http_500")] * 2
    assert got.events[0].payload["error"] == "500 oracle profile http-500: internal server error"
    assert got.final_text is None
    assert (ORACLE / "http_500" / "exit_code").read_text().strip() == "1"
    assert (ORACLE / "http_500" / "stderr.txt").read_text().strip() == got.events[0].payload["error"]


def test_tools_unsupported_is_one_error_response_not_retried():
    got = sample("tools_unsupported")
    (event,) = got.events
    assert (event.status, event.error_type) == ("error", "backend_tool_unsupported")
    assert (ORACLE / "tools_unsupported" / "exit_code").read_text().strip() == "1"


def test_a_stalled_phase_leaves_no_session_and_no_events():
    """pi writes its session file only once an assistant message exists; killed while waiting, none."""
    assert not (ORACLE / "stall" / "session.jsonl").exists()
    got = sample("stall")
    assert (got.events, got.final_text, got.source) == ([], None, "none")


# ---------------------------------------------------------------------------------- --mode json streams

def test_the_json_stream_gives_the_same_calls_as_the_session():
    data = (STREAM / "perfect_four_steps.jsonl").read_bytes()
    want = [json.loads(x) for x in (STREAM / "perfect_four_steps.oracle.jsonl").read_text().splitlines()]
    got = parse_stream_bytes(data, "measured", "measured.stdout")
    assert got.recognized
    starts = of_type(got.events, "tool_call_start")
    assert [(s.tool_call_id, s.payload["raw_name"]) for s in starts] == [(t["tool_call_id"], t["name"]) for t in want]
    assert [r.status for r in of_type(got.events, "tool_call_result")] == ["success"] * 4
    assert got.final_text.startswith("Done. Steps performed: 1. write hello.txt")
    # through parse_outputs, without a session file
    via = parse_outputs(data, None, "measured", stdout_name="measured.stdout")
    assert via.source == "stdout" and [e.tool_call_id for e in via.events] == [e.tool_call_id for e in got.events]
    assert via.events[0].raw_artifact_ref.startswith("measured.stdout:")


def test_the_json_stream_of_an_http_500_shows_every_attempt():
    """pi's defaults (retry.maxRetries 3): four failed attempts, and in --mode json pi still exited 0."""
    got = parse_stream_bytes((STREAM / "http500_default_retries.jsonl").read_bytes(), "measured", "s")
    assert [(e.status, e.error_type) for e in got.events] == [("error", "http_500")] * 4


def test_a_session_that_is_not_pis_falls_back_to_stdout():
    stdout = (ORACLE / "perfect" / "stdout.txt").read_bytes()
    got = parse_outputs(stdout, b'{"type": "other"}\nnot json\n', "measured")
    assert (got.events, got.source) == ([], "none") and got.final_text == stdout.decode()[:-1]
    assert parse_outputs(b"", None, "warmup").final_text is None
    assert stdout_answer(b"a\n\n") == "a\n" and stdout_answer(b" \n") is None


# ------------------------------------------------------------------------------------------ helpers

def test_error_types():
    assert error_type_for("500 oracle profile http-500: internal server error") == "http_500"
    assert error_type_for("429 Rate limit") == "http_429"
    assert error_type_for("400 registry.ollama.ai/library/x:latest does not support tools") == "backend_tool_unsupported"
    assert error_type_for("Connection error.") == "connection_error"
    assert error_type_for("Request timed out.") == "timeout"
    assert error_type_for("whatever", "aborted") == "aborted"
    assert error_type_for(None) == error_type_for("") == "agent_error"


def test_times():
    assert iso_from_ms(1795739449637) == "2026-11-27T00:30:49.637Z"
    assert iso_from_ms(-1) is iso_from_ms(True) is iso_from_ms(1e20) is iso_from_ms("1") is None
    assert seconds_of("2026-11-27T00:30:49.637Z") == pytest.approx(1795739449.637)
    assert seconds_of("2026-11-27T00:30:49") is not None
    assert seconds_of("yesterday") is seconds_of(5) is seconds_of("x" * 100) is None


def test_tool_names():
    assert TOOL_NAMES.normalize("bash") == ("shell", "execute")
    assert TOOL_NAMES.normalize("write") == ("write", "write") and TOOL_NAMES.normalize("edit") == ("edit", "write")
    assert TOOL_NAMES.normalize("read") == ("read", "read") and TOOL_NAMES.normalize("ls") == ("list", "read")
    assert TOOL_NAMES.normalize("grep") == TOOL_NAMES.normalize("find") == ("search", "search")


# ------------------------------------------------------------------------------------------ garbage

SHAPES = [b'{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall"}]}}',
          b'{"type":"message","message":{"role":"assistant","content":"x","timestamp":1e300,"usage":[]}}',
          b'{"type":"message","message":{"role":"toolResult","toolCallId":5,"content":[{"type":"text","text":7}]}}',
          b'{"type":"message","timestamp":"2026-13-45T99:99:99Z","message":{"role":"toolResult","isError":"yes"}}',
          b'{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":[],"name":{}}]}}',
          b'{"type":"message","message":null}', b'{"type":"session"}', b'{"type":"message_end","message":[]}',
          b"\xff\xfe", b"[1, 2]", b'{"type": 5}']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SHAPES), st.binary(max_size=200)), max_size=12), st.binary(max_size=300))
def test_parsers_never_raise_on_arbitrary_bytes(lines, stdout):
    data = b"\n".join(lines)
    for got in (parse_session_bytes(data, "measured", "s"), parse_stream_bytes(data, "warmup", "o"),
                parse_outputs(stdout, data, "measured"), parse_outputs(data, None, "measured")):
        assert got.final_text is None or isinstance(got.final_text, str)
        assert all(e.source_tier == "B" for e in got.events)


# ------------------------------------------------------------------------- native denials (interaction)

def test_a_call_to_a_tool_left_out_of_the_allowlist_is_a_native_denial():
    """Real pi 0.73.1 run with a policy denying writes (``--tools read,bash``) against a scripted model that
    calls ``write`` though it was not offered: pi answers ``Tool write not found`` and the model goes on."""
    d = FIXTURES / "interaction" / "write_denied"
    denied = {"edit": "native: --tools read,bash", "write": "native: --tools read,bash"}
    got = parse_outputs((d / "stdout.txt").read_bytes(), (d / "session.jsonl").read_bytes(), "measured", denied=denied)
    kinds = [(e.event_type, e.tool_call_id) for e in got.events]
    assert kinds == [("model_response", None), ("tool_call_start", "call_scripted_3"),
                     ("permission_request", "call_scripted_3"), ("permission_response", "call_scripted_3"),
                     ("tool_call_result", "call_scripted_3"), ("model_response", None)]
    request, answer, result = got.events[2:5]
    assert (request.payload["raw_name"], request.payload["name"], request.payload["kind"]) == ("write", "write", "write")
    assert request.payload["input"] == {"path": "greeting.txt",
                                        "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}
    assert (answer.payload["outcome"], answer.payload["decided_by"], answer.payload["rule"]) == (
        "deny", "native", "native: --tools read,bash")
    assert result.status == "error" and result.payload["output"] == "Tool write not found"
    assert request.timestamp == answer.timestamp == result.timestamp
    assert got.final_text == "I could not do it: the tool was refused."
    # the same answer for a tool the policy did not deny (a made-up name) is only an error
    plain = parse_outputs(b"", (d / "session.jsonl").read_bytes(), "measured", denied={"bash": "native: --tools x"})
    assert not [e for e in plain.events if e.event_type.startswith("permission_")]


def test_thinking_blocks_are_thought_events():
    """Real pi run (through gripprobe, shell denied: --tools read,edit,write) against oracle-deny-then-recover,
    whose turns carry ``reasoning_content``: pi keeps it as a ``thinking`` block of the assistant message."""
    d = FIXTURES / "interaction" / "reasoning_shell_denied"
    got = parse_outputs((d / "stdout.txt").read_bytes(), (d / "session.jsonl").read_bytes(), "measured")
    thoughts = of_type(got.events, "thought")
    assert [t.payload["text"] for t in thoughts] == ["There is no shell tool here; I will do without it."] * 2
    responses = of_type(got.events, "model_response")
    assert [t.parent_id for t in thoughts] == [r.event_id for r in responses]
    assert all(t.timestamp == r.timestamp for t, r in zip(thoughts, responses))
    assert [e.event_type for e in got.events][:3] == ["model_response", "thought", "tool_call_start"]
    assert "not allowed" in got.final_text

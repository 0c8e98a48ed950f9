"""The Qwen Code parsers on real outputs: runs of the real Qwen Code 0.24.4 through ``gripprobe run``
against GripProbe's oracle (``fixtures/oracle/<case>/``: stdout, the chat log, the oracle's ground truth;
machine paths scrubbed), plus garbage that must never raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_qwen.parse import (
    TOOL_NAMES, denial_rule, error_type_for, parse_chat_bytes, parse_outputs, parse_stdout_bytes,
)

ORACLE = Path(__file__).resolve().parent / "fixtures" / "oracle"


def both(case: str):
    return parse_outputs(ORACLE / case / "stdout.txt", ORACLE / case / "chat.jsonl", "measured")


def stdout_only(case: str):
    return parse_outputs(ORACLE / case / "stdout.txt", None, "measured")


def truth(case: str) -> list[dict]:
    return [json.loads(line) for line in (ORACLE / case / "oracle.jsonl").read_text().splitlines() if line.strip()]


def kinds(events) -> list[str]:
    return [e.event_type for e in events]


def of(events, kind: str):
    return [e for e in events if e.event_type == kind]


# ------------------------------------------------------------------------------------- chat log

def test_a_write_from_the_chat_log_with_call_id_response_id_times_and_latency():
    got = both("perfect_save_file")
    assert got.source == "chat"
    assert kinds(got.events) == ["model_response", "tool_call_start", "tool_call_result", "model_response"]
    response, start, result, answer = got.events
    (call,) = truth("perfect_save_file")
    assert start.tool_call_id == result.tool_call_id == call["tool_call_id"] == "call_oracle_0001"
    assert start.payload["raw_name"] == call["name"] == "write_file"
    assert (start.payload["name"], start.payload["kind"]) == ("write", "write")
    assert start.payload["arguments"] == call["arguments"]
    assert start.payload["arguments"]["file_path"].endswith("/measured/workspace/greeting.txt")
    assert response.response_id == start.response_id == result.response_id == "chatcmpl-oracle-1"
    assert answer.response_id == "chatcmpl-oracle-2" and answer.payload["tool_call_count"] == 0
    assert start.parent_id == result.parent_id == response.event_id and answer.parent_id is None
    assert (result.status, result.error_type, result.exit_code) == ("success", None, None)
    assert result.latency_ms == 229.0 and response.latency_ms == 1577.0
    assert result.payload["output"].startswith("Successfully created and wrote to new file: ")
    assert response.timestamp == start.timestamp == "2026-11-27T00:40:29.038Z"
    assert result.timestamp == "2026-11-27T00:40:29.448Z"
    assert response.payload["usage"]["promptTokenCount"] == 8150 and response.payload["model"] == "perfect"
    assert got.final_text == answer.payload["text"] and got.final_text.startswith("Done. Steps performed: 1. write")
    assert [e.raw_artifact_ref for e in got.events] == ["chat.jsonl:4", "chat.jsonl:4", "chat.jsonl:6", "chat.jsonl:9"]
    assert [e.event_id for e in got.events] == [f"measured-B-{n}" for n in range(1, 5)]
    assert all(e.source_tier == "B" and e.source == "agent_output" for e in got.events)


def test_a_shell_call_is_run_shell_command_with_its_exit_code():
    got = both("perfect_shell_pwd")
    start, result = of(got.events, "tool_call_start") + of(got.events, "tool_call_result")
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("run_shell_command", "shell", "execute")
    assert start.payload["arguments"]["command"] == "pwd > pwd.txt"
    assert (result.status, result.exit_code) == ("success", 0)
    assert [start.tool_call_id] == [t["tool_call_id"] for t in truth("perfect_shell_pwd")]


@pytest.mark.parametrize("case", ["perfect_save_file", "perfect_shell_pwd", "error_then_recover", "retry_loop",
                                  "malformed_args"])
def test_every_call_the_oracle_issued_is_reported_in_order_with_a_result(case):
    events = both(case).events
    want = [t["tool_call_id"] for t in truth(case)]
    assert [s.tool_call_id for s in of(events, "tool_call_start")] == want != []
    assert [r.tool_call_id for r in of(events, "tool_call_result")] == want
    assert [s.payload["raw_name"] for s in of(events, "tool_call_start")] == [t["name"] for t in truth(case)]
    responses = of(events, "model_response")
    assert [r.response_id for r in responses] == [f"chatcmpl-oracle-{n}" for n in range(1, len(responses) + 1)]


def test_a_retry_loop_is_three_failing_identical_shell_calls():
    events = both("retry_loop").events
    results = of(events, "tool_call_result")
    assert [(r.status, r.exit_code, r.error_type) for r in results] == [("error", 1, "tool_error")] * 3
    assert {r.payload["agent_error_type"] for r in results} == {"shell_execute_error"}
    assert {json.dumps(s.payload["arguments"]) for s in of(events, "tool_call_start")} == {
        '{"command": "cat gripprobe-missing-file.txt"}'}
    assert len({s.parent_id for s in of(events, "tool_call_start")}) == 3
    assert both("retry_loop").final_text == "The same call failed 3 times. I give up."


def test_error_then_recover_fails_once_then_writes():
    results = of(both("error_then_recover").events, "tool_call_result")
    assert [(r.status, r.exit_code) for r in results] == [("error", 1), ("success", None)]


def test_malformed_arguments_the_discarded_call_gets_its_stdout_result_the_refused_one_is_malformed():
    """Qwen Code repaired the cut-off JSON, discarded the first call when it retried the request (the
    chat log has no result for it; stdout says it was skipped), then refused the second as truncated."""
    events = both("malformed_args").events
    assert kinds(events) == ["model_response", "tool_call_start", "tool_call_result", "model_response",
                             "tool_call_start", "tool_call_result", "model_response"]
    skipped, refused = of(events, "tool_call_result")
    assert skipped.raw_artifact_ref == "stdout.txt:4" and skipped.status == "error"
    assert skipped.payload["output"] == "Skipped because the provider attempt was retried before execution."
    assert skipped.payload["raw_name"] == "write_file" and skipped.response_id == "chatcmpl-oracle-1"
    assert (refused.status, refused.error_type, refused.payload["agent_error_type"]) == (
        "error", "malformed_arguments", "output_truncated")
    assert refused.payload["execution_status"] == "not_started"


def test_http_500_retries_are_one_error_response_each():
    got = both("http_500")
    assert got.source == "chat" and got.final_text is None
    assert [(e.event_type, e.status, e.error_type) for e in got.events] == [("model_response", "error", "http_500")] * 6
    assert got.events[0].payload["status_code"] == 500 and got.events[0].latency_ms == 1016.0
    # killed at the phase timeout: stdout has its init lines and no result
    assert [json.loads(line)["type"] for line in (ORACLE / "http_500" / "stdout.txt").read_text().splitlines()] == [
        "system", "stream_event"]


def test_a_backend_refusing_tools_says_so():
    (event,) = both("tools_unsupported").events
    assert (event.status, event.error_type) == ("error", "backend_tool_unsupported")
    assert "does not support tools" in event.payload["error"]
    assert both("tools_unsupported").final_text is None


def test_lazy_and_text_tools_are_answers_without_calls():
    for case in ("lazy", "text_tools"):
        (event,) = both(case).events
        assert event.event_type == "model_response" and event.payload["tool_call_count"] == 0
    assert "<tool_call>" in both("text_tools").final_text


def test_a_stalled_phase_left_a_chat_log_without_replies():
    got = both("stall")
    assert got.source == "chat" and got.events == [] and got.final_text is None


# --------------------------------------------------------------------------------------- stdout alone

def test_stdout_alone_reports_the_calls_without_times():
    got = stdout_only("retry_loop")
    assert got.source == "stdout"
    starts, results = of(got.events, "tool_call_start"), of(got.events, "tool_call_result")
    assert [s.tool_call_id for s in starts] == [t["tool_call_id"] for t in truth("retry_loop")]
    assert [r.tool_call_id for r in results] == [s.tool_call_id for s in starts]
    assert [r.status for r in results] == ["error"] * 3
    assert all(e.timestamp is None for e in got.events)
    assert kinds(got.events)[:3] == ["model_response", "tool_call_start", "tool_call_result"]
    assert got.final_text == "The same call failed 3 times. I give up."


def test_stdout_alone_turns_api_error_replies_into_error_responses():
    events = stdout_only("tools_unsupported").events
    assert [(e.event_type, e.status, e.error_type) for e in events] == [
        ("model_response", "error", "backend_tool_unsupported")] * 2  # the "[API Error: …]" reply and the result


def test_a_chat_log_that_is_not_qwens_falls_back_to_stdout(tmp_path):
    junk = tmp_path / "chat.jsonl"
    junk.write_bytes(b'{"type": "assistant"}\nnot json\n')
    got = parse_outputs(ORACLE / "perfect_save_file" / "stdout.txt", junk, "warmup")
    assert got.source == "stdout" and [e.event_id for e in got.events][:1] == ["warmup-B-1"]
    assert of(got.events, "tool_call_start")[0].tool_call_id == "call_oracle_0001"
    got = parse_outputs(ORACLE / "perfect_save_file" / "stdout.txt", tmp_path / "missing.jsonl", "measured")
    assert got.source == "stdout"
    with pytest.raises(OSError):
        parse_outputs(tmp_path / "no-stdout", None, "measured")


def test_the_final_answer_comes_from_the_chat_log_when_stdout_has_none(tmp_path):
    empty = tmp_path / "stdout.txt"
    empty.write_bytes(b"")
    got = parse_outputs(empty, ORACLE / "lazy" / "chat.jsonl", "measured")
    assert got.final_text.startswith("To solve this I would:")


# ------------------------------------------------------------------------------------------ helpers

def test_tool_names():
    assert TOOL_NAMES.normalize("run_shell_command") == ("shell", "execute")
    assert TOOL_NAMES.normalize("write_file") == ("write", "write")
    assert TOOL_NAMES.normalize("edit") == ("edit", "write")
    assert TOOL_NAMES.normalize("read_file") == ("read", "read")
    assert TOOL_NAMES.normalize("grep_search") == ("search", "search")
    assert TOOL_NAMES.normalize("notebook_edit") == ("edit", "write")
    assert TOOL_NAMES.normalize("agent") == ("agent", "other")


def test_error_types():
    assert error_type_for(400, "400 registry.ollama.ai/library/m:latest does not support tools") == "backend_tool_unsupported"
    assert error_type_for(500, "500 boom") == "http_500"
    assert error_type_for(None, "socket hang up", "APIConnectionError") == "APIConnectionError"
    assert error_type_for(True, None) == error_type_for(1000, "") == "agent_error"


# ------------------------------------------------------------------------------------------ garbage

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from(["execution_denied", "call_1",
                       'This "write_file" invocation was denied by permission rules. Matching deny rule: "x".']),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "subtype", "message", "parts", "functionCall", "functionResponse", "id", "name",
                         "args", "response", "output", "error", "toolCallResult", "callId", "status", "errorType",
                         "resultDisplay", "exitCode", "systemPayload", "uiEvent", "event.name", "status_code",
                         "error_message", "duration_ms", "response_id", "content", "tool_use_id", "is_error",
                         "input", "text", "thought", "result", "timestamp", "sessionId", "parent_tool_use_id",
                         "thinking", "permission_denials"])
        | st.text(max_size=5), inner, max_size=6),
    max_leaves=25)
TYPES = st.sampled_from(["user", "assistant", "tool_result", "system", "result", "stream_event"])
EVENTS = st.sampled_from(["qwen-code.api_response", "qwen-code.api_error", "qwen-code.tool_call", "x"])


def shaped(kind, payload, event_name, part):
    record = {"type": kind, "sessionId": "s", "timestamp": "2026-11-27T00:40:29.038Z", "subtype": "ui_telemetry",
              "message": {"parts": [part], "content": [part]}, "toolCallResult": payload,
              "systemPayload": {"uiEvent": {"event.name": event_name, **(payload if isinstance(payload, dict) else {})}}}
    return json.dumps(record, default=str).encode()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data):
    assert isinstance(parse_chat_bytes(data).out.drafts, list)
    assert isinstance(parse_stdout_bytes(data).out.drafts, list)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TYPES, JSONISH, EVENTS, JSONISH), max_size=12))
def test_qwen_shaped_garbage_never_raises_and_gives_valid_events(tmp_path_factory, lines):
    data = b"\n".join(shaped(*line) for line in lines)
    d = tmp_path_factory.mktemp("g")
    (d / "stdout.txt").write_bytes(data)
    (d / "chat.jsonl").write_bytes(data)
    for chat in (d / "chat.jsonl", None):
        got = parse_outputs(d / "stdout.txt", chat, "measured")
        ids = {e.event_id for e in got.events}
        for event in got.events:
            assert event.source_tier == "B" and event.raw_artifact_ref
            assert event.parent_id is None or event.parent_id in ids
        assert got.final_text is None or isinstance(got.final_text, str)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.binary(max_size=200))
def test_truncated_or_corrupted_real_outputs_never_raise(tmp_path_factory, cut, noise):
    d = tmp_path_factory.mktemp("t")
    for name in ("stdout.txt", "chat.jsonl"):
        data = (ORACLE / "retry_loop" / name).read_bytes()
        (d / name).write_bytes(data[: len(data) * cut // 200] + noise)
    got = parse_outputs(d / "stdout.txt", d / "chat.jsonl", "measured")
    assert all(e.source_tier == "B" for e in got.events)


# ------------------------------------------------------------------------------ denied calls, reasoning

@pytest.mark.parametrize("case", ["auto_deny_save_file", "write_denied_save_file"])
@pytest.mark.parametrize("source", ["chat", "stdout"])
def test_a_call_refused_by_the_deny_rules_is_a_native_denial_tied_to_the_call(case, source):
    """Real 0.24.4 runs through gripprobe (oracle-perfect, save_file; auto-deny, and a scripted deny of
    kind write): write_file offered, its call refused by ``write_file(//**)``."""
    got = both(case) if source == "chat" else stdout_only(case)
    assert got.source == source
    assert kinds(got.events) == ["model_response", "tool_call_start", "permission_request", "permission_response",
                                 "tool_call_result", "model_response"]
    _, start, request, response, result, _ = got.events
    (call,) = truth(case)
    assert start.tool_call_id == request.tool_call_id == response.tool_call_id == result.tool_call_id == call["tool_call_id"]
    assert request.payload["raw_name"] == "write_file" and request.payload["kind"] == "write"
    assert request.payload["input"] == call["arguments"]
    assert {k: response.payload[k] for k in ("outcome", "decided_by", "rule")} == {
        "outcome": "deny", "decided_by": "native", "rule": "native: permissions.deny write_file(//**)"}
    assert response.status == "success" and request.payload["request_id"] == response.payload["request_id"]
    assert (result.status, result.error_type) == ("error", "permission_denied")
    assert result.payload["output"].startswith('This "write_file" invocation was denied by permission rules.')
    assert "denied by permission rules" in got.final_text


def test_an_ordinary_failed_call_is_no_permission_event():
    for source in (both, stdout_only):
        got = source("error_then_recover")
        assert of(got.events, "tool_call_result") and not [e for e in got.events if e.event_type.startswith("permission")]


def test_denial_rules_name_the_setting_or_quote_the_refusal():
    assert denial_rule('This "run_shell_command" invocation was denied by permission rules. Matching deny rule: '
                       '"run_shell_command(*)".') == "native: permissions.deny run_shell_command(*)"
    assert denial_rule("Tool blocked by plan mode: x\nmore") == "native: Tool blocked by plan mode: x"
    assert denial_rule(None) == "native: refused by Qwen Code"


def test_reasoning_becomes_thought_events_of_its_reply():
    """Real 0.24.4 run through gripprobe (oracle-deny-then-recover, which streams reasoning, on shell_denied:
    the shell refused by ``run_shell_command(*)``, then write_file allowed). The chat log's ``thought: true``
    parts; on stdout a ``thinking``-only assistant message before the reply's own (its stream-json also
    prints a reply's text and its calls as two messages: two model_response events there)."""
    case = "deny_then_recover_shell_denied"
    said = ["A single shell command is the quickest way to do this.",
            "The shell command was refused, so I will use the file tools instead.", "All steps are done; time to report."]
    got = both(case)
    assert kinds(got.events) == [
        "model_response", "thought", "tool_call_start", "permission_request", "permission_response", "tool_call_result",
        "model_response", "thought", "tool_call_start", "tool_call_result", "model_response", "thought"]
    first, thought, start = got.events[:3]
    assert thought.parent_id == start.parent_id == first.event_id and thought.response_id == first.response_id
    assert first.payload["reasoning"] is True and first.payload["text"] == "I will do the first step with one shell command."
    assert [e.payload for e in of(got.events, "thought")] == [{"text": t} for t in said]
    (response,) = of(got.events, "permission_response")
    (shell, write) = truth(case)
    assert response.tool_call_id == shell["tool_call_id"] and response.payload["rule"] == "native: permissions.deny run_shell_command(*)"
    assert [(e.tool_call_id, e.status) for e in of(got.events, "tool_call_result")] == [
        (shell["tool_call_id"], "error"), (write["tool_call_id"], "success")]
    out = stdout_only(case)
    assert kinds(out.events)[:3] == ["model_response", "thought", "model_response"]
    assert [e.payload for e in of(out.events, "thought")] == [{"text": t} for t in said]
    assert all(e.parent_id for e in of(out.events, "thought"))
    assert len(of(out.events, "model_response")) == 4  # the thinking-only messages make none
    assert got.final_text == out.final_text and got.final_text.startswith("The shell command was denied")

"""The parsers on REAL cline 3.0.65 outputs captured against the oracle (fixtures/oracle/<case>/: stdout,
the session's messages.json and the oracle's ground truth; machine paths scrubbed), plus garbage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_cline.parse import (
    TOOL_NAMES, error_type_of, iso_ts, ms_iso, parse_messages, parse_outputs, parse_stdout, result_status,
)

ORACLE = Path(__file__).resolve().parent / "fixtures" / "oracle"


def case(name: str, phase: str = "measured"):
    d = ORACLE / name
    messages = d / "messages.json"
    return parse_outputs(d / "stdout.txt", messages if messages.exists() else None, phase)


def truth(name: str) -> list[dict]:
    return [json.loads(line) for line in (ORACLE / name / "oracle.jsonl").read_text().splitlines() if line.strip()]


def of_type(events, kind):
    return [e for e in events if e.event_type == kind]


@pytest.mark.parametrize("name", sorted(p.name for p in ORACLE.iterdir()))
def test_starts_name_exactly_the_oracle_calls_by_id_and_arguments(name):
    parsed = case(name)
    starts = of_type(parsed.events, "tool_call_start")
    structured = [t for t in truth(name) if t["structured"]]
    assert [s.tool_call_id for s in starts] == [t["tool_call_id"] for t in structured]
    assert [s.payload["raw_name"] for s in starts] == [t["name"] for t in structured]
    for s, t in zip(starts, structured):
        if isinstance(t["arguments"], dict):  # malformed-args: broken on the wire, repaired by Cline
            assert s.payload["arguments"] == t["arguments"]
    assert all(e.source_tier == "B" and e.source == "agent_output" for e in parsed.events)
    assert [e.sequence for e in parsed.events] == list(range(1, len(parsed.events) + 1))


def test_perfect_write_is_response_start_result_response_with_clines_clock():
    parsed = case("perfect_save_file")
    assert parsed.source == "stdout"
    first, start, result, last = parsed.events
    assert [e.event_type for e in parsed.events] == ["model_response", "tool_call_start", "tool_call_result",
                                                     "model_response"]
    assert first.payload["tool_call_count"] == 1 and first.payload["iteration"] == 1
    assert first.payload["usage"]["inputTokens"] == 1166 and first.status == "success"
    assert start.payload == {"raw_name": "editor", "name": "edit", "kind": "write", "arguments": {
        "path": "greeting.txt", "new_text": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}}
    assert start.parent_id == result.parent_id == first.event_id and start.status == "started"
    assert result.status == "success" and result.latency_ms == 15 and result.exit_code is None
    assert "File created successfully" in result.payload["output"]
    assert start.timestamp == "2026-11-27T01:01:28.311Z" and result.timestamp == "2026-11-27T01:01:28.327Z"
    assert first.timestamp <= start.timestamp <= result.timestamp
    assert start.raw_artifact_ref == "stdout.txt:5" and result.raw_artifact_ref == "stdout.txt:7"
    assert last.parent_id is None and last.payload["text"].startswith("Done. Steps performed")
    assert parsed.final_text == last.payload["text"]


def test_run_commands_is_a_shell_and_keeps_its_array_of_commands():
    start, result = of_type(case("perfect_shell_pwd").events, "tool_call_start") + \
        of_type(case("perfect_shell_pwd").events, "tool_call_result")
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == (
        "run_commands", "shell", "execute")
    assert start.payload["arguments"] == {"commands": ["pwd > pwd.txt"]}
    assert result.status == "success"


def test_read_files_then_editor_edit():
    starts = of_type(case("perfect_patch_file").events, "tool_call_start")
    assert [(s.payload["raw_name"], s.payload["name"], s.payload["kind"]) for s in starts] == [
        ("read_files", "read", "read"), ("editor", "edit", "write")]
    assert starts[0].payload["arguments"] == {"files": [{"path": "settings.py"}]}
    assert set(starts[1].payload["arguments"]) == {"path", "old_text", "new_text"}


def test_apply_patch_for_gpt_model_ids_is_an_edit():
    (start,) = of_type(case("perfect_apply_patch").events, "tool_call_start")
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("apply_patch", "edit", "write")
    assert start.payload["arguments"]["input"].startswith("*** Begin Patch\n*** Add File: greeting.txt\n")


def test_failed_command_is_an_error_result_with_its_exit_code():
    results = of_type(case("error_then_recover_save_file").events, "tool_call_result")
    assert [(r.status, r.exit_code, r.error_type) for r in results] == [("error", 1, "tool_error"),
                                                                        ("success", None, None)]
    assert "No such file or directory" in results[0].payload["output"]
    loop = of_type(case("retry_loop_save_file").events, "tool_call_result")
    assert [(r.status, r.exit_code) for r in loop] == [("error", 1)] * 3
    assert case("retry_loop_save_file").final_text == "The same call failed 3 times. I give up."


def test_lazy_and_text_tools_are_answers_without_tool_events():
    for name in ("lazy_save_file", "text_tools_save_file"):
        parsed = case(name)
        assert [e.event_type for e in parsed.events] == ["model_response"]
        assert parsed.events[0].payload["tool_call_count"] == 0 and parsed.final_text
    assert "<tool_call>" in case("text_tools_save_file").final_text


def test_failed_requests_are_error_responses_and_no_final_text():
    (http,) = case("http_500_save_file").events
    assert (http.event_type, http.status, http.error_type) == ("model_response", "error", "model_error")
    assert "internal server error" in http.payload["message"]
    assert case("http_500_save_file").final_text is None
    (tools,) = case("tools_unsupported_save_file").events
    assert (tools.status, tools.error_type) == ("error", "backend_tool_unsupported")


def test_a_killed_run_leaves_an_unfinished_response():
    parsed = case("stall_save_file")
    assert [(e.event_type, e.status) for e in parsed.events] == [("model_response", "unknown")]
    assert parsed.final_text is None


def test_messages_file_alone_gives_the_same_calls_and_results():
    events, final = parse_messages(ORACLE / "error_then_recover_save_file" / "messages.json", "measured")
    starts, results = of_type(events, "tool_call_start"), of_type(events, "tool_call_result")
    assert [s.tool_call_id for s in starts] == [r.tool_call_id for r in results] == [
        "call_oracle_0001", "call_oracle_0002"]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1), ("success", None)]
    assert all(s.parent_id for s in starts) and final and final.startswith("Done.")
    assert starts[0].raw_artifact_ref == "messages.json:messages[1]"


def test_messages_file_is_the_fallback_only_when_stdout_printed_no_agent_event(tmp_path):
    empty = tmp_path / "stdout.txt"
    empty.write_bytes(b"")
    parsed = parse_outputs(empty, ORACLE / "perfect_save_file" / "messages.json", "measured")
    assert parsed.source == "messages" and [e.tool_call_id for e in of_type(parsed.events, "tool_call_start")] == [
        "call_oracle_0001"]
    assert parse_outputs(empty, None, "measured").source == "none"
    stall = ORACLE / "stall_save_file"
    assert parse_outputs(stall / "stdout.txt", stall / "messages.json", "measured").source == "stdout"


def test_tool_names_and_helpers():
    assert TOOL_NAMES.normalize("run_commands") == ("shell", "execute")
    assert TOOL_NAMES.normalize("editor") == ("edit", "write")
    assert TOOL_NAMES.normalize("fetch_web_content") == ("fetch", "fetch")
    assert TOOL_NAMES.normalize("search_codebase") == ("search", "search")
    assert error_type_of("registry.ollama.ai/library/x:latest does not support tools") == "backend_tool_unsupported"
    assert error_type_of("Request failed with status code 503") == "http_503"
    assert iso_ts("2026-11-27T01:01:27.957Z") == "2026-11-27T01:01:27.957Z" and iso_ts("yesterday") is None
    assert ms_iso(1795741184363) == "2026-11-27T00:59:44.363Z" and ms_iso("x") is None and ms_iso(1e30) is None
    assert result_status([{"success": True}, {"success": False, "error": "Command exited with code 2"}], None)[::3] == (
        "error", 2)
    assert result_status(None, {"message": "boom"})[0] == "error"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4000))
def test_parsers_never_raise_on_arbitrary_bytes(tmp_path, blob):
    out = tmp_path / "stdout.txt"
    out.write_bytes(blob)
    parse_outputs(out, out, "measured")
    parse_messages(out, "measured")


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                        max_size=4), max_leaves=20)
keys = st.sampled_from(["type", "event", "contentType", "toolName", "toolCallId", "input", "output", "error", "ts",
                        "text", "iteration", "usage", "durationMs", "messages", "content", "role", "tool_use_id"])
shapes = st.dictionaries(keys, json_values | st.sampled_from(["agent_event", "content_start", "content_end", "tool",
                                                              "iteration_start", "iteration_end", "error", "done",
                                                              "run_result", "text", "assistant", "user"]),
                         max_size=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(shapes | st.fixed_dictionaries({"type": st.just("agent_event"), "event": shapes}), max_size=12))
def test_parsers_never_raise_on_odd_json_shapes(tmp_path, objects):
    out = tmp_path / "stdout.txt"
    out.write_text("\n".join(json.dumps(o) for o in objects))
    parse_stdout(out, "measured")
    (tmp_path / "messages.json").write_text(json.dumps({"messages": objects}))
    parse_messages(tmp_path / "messages.json", "measured")


# ------------------------------------------------------------------------- native denials (interaction)

INTERACTION = Path(__file__).resolve().parent / "fixtures" / "interaction"


def test_auto_deny_refusals_are_native_denials_tied_to_the_call():
    """Real cline run under auto-deny (``--auto-approve false``) against oracle-perfect on save_file: the
    editor call is refused ('requires approval in a TTY session') and the model answers."""
    from gripprobe_cline.parse import NativeDenials
    d = INTERACTION / "autodeny_save_file"
    native = NativeDenials(refuse_all="native: --auto-approve false")
    got = parse_outputs(d / "stdout.txt", d / "messages.json", "measured", native)
    kinds = [(e.event_type, e.tool_call_id) for e in got.events if e.event_type != "model_response"]
    assert kinds == [("tool_call_start", "call_oracle_0001"), ("permission_request", "call_oracle_0001"),
                     ("permission_response", "call_oracle_0001"), ("tool_call_result", "call_oracle_0001")]
    start, request, answer, result = [e for e in got.events if e.event_type != "model_response"]
    assert request.payload["raw_name"] == "editor" and request.payload["kind"] == "write"
    assert request.payload["input"] == start.payload["arguments"]
    assert (answer.payload["outcome"], answer.payload["decided_by"], answer.payload["rule"]) == (
        "deny", "native", "native: --auto-approve false")
    assert result.status == "error" and request.timestamp == result.timestamp
    assert request.raw_artifact_ref == result.raw_artifact_ref


def test_the_message_file_alone_shows_the_same_refusal(tmp_path):
    from gripprobe_cline.parse import NativeDenials
    d = INTERACTION / "autodeny_save_file"
    empty = tmp_path / "stdout.txt"
    empty.write_bytes(b"")
    got = parse_outputs(empty, d / "messages.json", "measured", NativeDenials(refuse_all="native: --auto-approve false"))
    assert got.source == "messages"
    answers = of_type(got.events, "permission_response")
    assert [(a.tool_call_id, a.payload["rule"]) for a in answers] == [("call_oracle_0001", "native: --auto-approve false")]
    assert answers[0].raw_artifact_ref.startswith("messages.json:messages[")


def test_a_call_to_a_disabled_tool_is_a_native_denial():
    """Real cline run with writes denied (editor, apply_patch in disabledTools) against a scripted model that
    calls editor though it was not offered: Cline rejects it ('unavailable tool') and the model answers."""
    from gripprobe_cline.parse import NativeDenials
    d = INTERACTION / "disabled_editor"
    rule = "native: disabledTools editor,apply_patch"
    got = parse_outputs(d / "stdout.txt", d / "messages.json", "measured",
                        NativeDenials(disabled={"editor": rule, "apply_patch": rule}))
    kinds = [(e.event_type, e.tool_call_id) for e in got.events if e.event_type != "model_response"]
    call = kinds[0][1]
    assert kinds == [("tool_call_start", call), ("permission_request", call), ("permission_response", call),
                     ("tool_call_result", call)]
    answer = of_type(got.events, "permission_response")[0]
    assert answer.payload["rule"] == rule and answer.payload["outcome"] == "deny"
    assert got.final_text == "I could not do it: the tool was refused."
    # without the driver's settings the same rejection is only an error (a made-up tool is no policy's denial)
    assert not of_type(parse_outputs(d / "stdout.txt", None, "measured").events, "permission_request")


def test_reasoning_parts_are_thought_events_from_stdout_and_from_the_message_file(tmp_path):
    """Real cline run (through gripprobe, shell denied: run_commands disabled) against
    oracle-deny-then-recover, whose turns carry ``reasoning_content``: ``contentType: reasoning`` parts on
    stdout (streamed pieces, then the whole text on ``content_end``), ``thinking`` blocks in the message file."""
    d = INTERACTION / "reasoning_shell_denied"
    got = parse_outputs(d / "stdout.txt", d / "messages.json", "measured")
    thoughts = of_type(got.events, "thought")
    assert [t.payload["text"] for t in thoughts] == ["There is no shell tool here; I will do without it."] * 2
    assert [t.parent_id for t in thoughts] == [r.event_id for r in of_type(got.events, "model_response")]
    assert [e.event_type for e in got.events][:3] == ["model_response", "thought", "tool_call_start"]
    empty = tmp_path / "stdout.txt"
    empty.write_bytes(b"")
    alone = parse_outputs(empty, d / "messages.json", "measured")
    assert [t.payload["text"] for t in of_type(alone.events, "thought")] == [t.payload["text"] for t in thoughts]

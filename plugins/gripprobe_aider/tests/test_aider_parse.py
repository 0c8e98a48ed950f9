"""The tier C parser on aider's real outputs.

``fixtures/samples/*`` are the field notes' captures (scripted model, aider 0.86.2; most without an
LLM history file); ``fixtures/captured/*`` are aider 0.86.2 runs against the GripProbe oracle with this
plugin's command line (stdout + ``--llm-history-file``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_core.plugin import PhaseCapture, ProcessResult, WrapperParseError, detect_retry_loop, tool_attempts
from gripprobe_aider.parse import (
    error_type_for, history_time, parse_llm_history, parse_outputs, scan_stdout,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MISSING = "gripprobe-missing-file.txt"


def sample(name: str, with_history: bool = True):
    base = FIXTURES / "samples" / name
    history = base / "llm_history.txt"
    return parse_outputs(base / "stdout.txt", history if with_history and history.exists() else None, "measured")


def captured(name: str, with_history: bool = True):
    base = FIXTURES / "captured" / name
    return parse_outputs(base / "stdout.txt", base / "aider.llm.history.txt" if with_history else None, "measured")


def tool_events(out):
    return [e for e in out.events if e.is_tool_event()]


def shape(out):
    """(event_type, status, error_type, path) of each tool event."""
    return [(e.event_type, e.status, e.error_type, e.payload["arguments"].get("path")) for e in tool_events(out)]


# ------------------------------------------------------------------------------------------ samples

def test_whole_success_is_one_reply_and_one_applied_edit_dated_by_the_history():
    out = sample("whole_success")
    response, start, result = out.events
    assert (response.event_type, response.status, response.timestamp) == (
        "model_response", "success", "2026-11-22T10:14:02.000Z")
    assert response.raw_artifact_ref == "llm_history.txt:83"
    assert response.payload["text"].startswith("I will create the file.")
    assert (start.event_type, start.status, result.event_type, result.status) == (
        "tool_call_start", "started", "tool_call_result", "success")
    for e in (start, result):
        assert e.payload["raw_name"] == "edit" and (e.payload["name"], e.payload["kind"]) == ("edit", "write")
        assert e.payload["arguments"] == {"path": "hello.txt"}
        assert e.payload["edit_format"] == "whole"
        assert e.parent_id == response.event_id
        assert e.timestamp == "2026-11-22T10:14:02.000Z"
        assert e.raw_artifact_ref == "stdout.txt:18"
        assert (e.source_tier, e.source, e.tool_call_id) == ("C", "wrapper", None)
    assert out.final_text == "I will create the file.\n\nhello.txt\n```\nhello world\n```"
    assert len({e.event_id for e in out.events}) == 3


@pytest.mark.parametrize("name, fmt", [("diff_success", "diff"), ("udiff_success", "udiff")])
def test_diff_and_udiff_successes_without_history_are_undated_edits(name, fmt):
    out = sample(name)
    assert shape(out) == [("tool_call_start", "started", None, "hello.txt"),
                          ("tool_call_result", "success", None, "hello.txt")]
    assert all(e.timestamp is None for e in out.events)
    assert tool_events(out)[0].payload["edit_format"] == fmt
    assert out.final_text is None


def test_a_search_block_that_never_matches_is_four_failed_edits_of_that_file():
    out = sample("diff_badedit")
    assert shape(out) == [("tool_call_start", "started", None, "hello.txt"),
                          ("tool_call_result", "error", "edit_no_match", "hello.txt")] * 4
    assert "SearchReplaceNoExactMatch" in tool_events(out)[1].payload["output"]
    assert detect_retry_loop(out.events)


def test_http_500_is_nine_failed_requests_and_no_tool_event():
    out = sample("whole_http500")
    assert [(e.event_type, e.status, e.error_type) for e in out.events] == [("model_response", "error", "http_500")] * 9
    assert out.events[0].payload["error"].startswith("litellm.InternalServerError:")


def test_http_400_and_a_500_followed_by_success():
    (bad,) = sample("whole_http400").events
    assert (bad.status, bad.error_type, bad.raw_artifact_ref) == ("error", "http_400", "stdout.txt:8")
    out = sample("whole_500_then_ok_maxretries0")
    assert [(e.event_type, e.status) for e in out.events] == [
        ("model_response", "error"), ("tool_call_start", "started"), ("tool_call_result", "success")]


def test_a_reply_without_edit_blocks_gives_no_tool_event():
    assert tool_events(sample("whole_notool")) == []


# -------------------------------------------------------------------------------- oracle captures

def test_retry_loop_is_three_identical_failed_edits_between_four_dated_replies():
    out = captured("diff_retry-loop_save_file")
    responses = [e for e in out.events if e.event_type == "model_response"]
    assert len(responses) == 4 and all(e.status == "success" and e.timestamp for e in responses)
    assert shape(out) == [("tool_call_start", "started", None, MISSING),
                          ("tool_call_result", "error", "edit_no_match", MISSING)] * 3
    assert all(e.timestamp and e.raw_artifact_ref.startswith("stdout.txt:") for e in tool_events(out))
    assert detect_retry_loop(out.events)
    assert out.final_text == "The same call failed 3 times. I give up."


def test_a_broken_search_replace_block_is_protocol_malformed_even_though_aider_quotes_the_reply():
    out = captured("diff_malformed-args_patch_file")
    # aider's error detail repeats the whole reply (with its file name); still one rejected edit
    assert shape(out) == [("tool_call_start", "started", None, None),
                          ("tool_call_result", "error", "protocol_malformed", None)]
    assert "Expected `>>>>>>> REPLACE`" in tool_events(out)[1].payload["output"]
    assert sum(e.event_type == "model_response" for e in out.events) == 2


def test_whole_listing_without_a_file_name_then_the_real_listing_recovers():
    out = captured("whole_error-then-recover_save_file")
    assert shape(out) == [("tool_call_start", "started", None, None),
                          ("tool_call_result", "error", "protocol_malformed", None),
                          ("tool_call_start", "started", None, "greeting.txt"),
                          ("tool_call_result", "success", None, "greeting.txt")]
    failed, ok = tool_attempts(out.events)
    assert failed.status == "error" and ok.status == "success"


def test_udiff_recovery_and_the_header_less_udiff_that_crashes_aider():
    out = captured("udiff_error-then-recover_patch_file")
    assert [s[1:] for s in shape(out)] == [("started", None, MISSING), ("error", "edit_no_match", MISSING),
                                           ("started", None, "settings.py"), ("success", None, "settings.py")]
    crash = captured("udiff_malformed-args_save_file")
    # aider 0.86.2 raises a TypeError on a hunk without ---/+++ and stops: nothing to see but the reply
    assert tool_events(crash) == []
    assert [e.event_type for e in crash.events] == ["model_response"]


def test_markers_inside_the_model_reply_are_not_aider_markers():
    out = captured("whole_reply_mentions_markers")
    assert [(e.event_type, e.status) for e in out.events] == [("model_response", "success")]
    assert "Applied edit to fake.txt" in out.final_text
    # without the history the reply cannot be told from aider's own lines (best effort, documented)
    blind = captured("whole_reply_mentions_markers", with_history=False)
    assert [s[1] for s in shape(blind)] == ["started", "success", "started", "error"]


def test_whole_edit_of_a_chat_file():
    out = captured("whole_perfect_patch_file")
    assert shape(out)[-1] == ("tool_call_result", "success", None, "settings.py")
    assert out.edit_format == "whole"


# ---------------------------------------------------------------------------------------- helpers

def test_error_types():
    assert error_type_for("BadRequestError", "registry.ollama.ai/library/x:latest does not support tools") \
        == "backend_tool_unsupported"
    assert error_type_for("InternalServerError", "InternalServerError: OpenAIException - Connection error.") \
        == "backend_unreachable"
    assert error_type_for("InternalServerError", "boom") == "http_500"
    assert error_type_for("NotFoundError", "") == "http_404"
    assert error_type_for("Timeout", "") == "backend_timeout"
    assert error_type_for("SomethingNewError", "") == "agent_error"


def test_history_time_is_utc_with_milliseconds():
    assert history_time("2026-11-22T10:14:02") == "2026-11-22T10:14:02.000Z"
    assert history_time("2026-11-22T10:14:02+02:00") == "2026-11-22T08:14:02.000Z"
    assert history_time("yesterday") is None


def test_history_keeps_failed_requests_as_empty_replies():
    text = ("TO LLM 2026-11-22T10:00:00\n-------\nUSER hi\nLLM RESPONSE 2026-11-22T10:00:01\n\n"
            "TO LLM 2026-11-22T10:00:02\n-------\nUSER hi\nLLM RESPONSE 2026-11-22T10:00:03\nASSISTANT a\nASSISTANT\n"
            "ASSISTANT b\n")
    first, second = parse_llm_history(text)
    assert (first.reply, first.sent, first.received_line) == ("", "2026-11-22T10:00:00.000Z", 4)
    assert second.reply == "a\n\nb"


def test_a_missing_stdout_is_no_events_and_an_unreadable_one_raises_oserror(tmp_path):
    assert parse_outputs(tmp_path / "absent", None, "measured").events == []
    with pytest.raises(OSError):
        parse_outputs(tmp_path, None, "measured")  # a directory


def test_the_driver_turns_an_unreadable_stdout_into_a_wrapper_parse_error(agent_driver, phase_ctx, tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path, stderr_path=tmp_path / "e", process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        agent_driver.parse(phase_ctx, capture)


# ------------------------------------------------------------------------------------------ garbage

MARKER_LINES = st.sampled_from([
    "Applied edit to x.txt", "The LLM did not conform to the edit format.", "Exception while updating files:",
    "litellm.InternalServerError: boom", "Tokens: 1 sent, 2 received.", "Unable to create x, skipping edits.",
    "TO LLM 2026-11-22T10:00:00", "LLM RESPONSE 2026-99-22T10:00:00", "ASSISTANT Applied edit to x.txt",
    "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in ", "", "```",
])
TEXTS = st.lists(st.one_of(MARKER_LINES, st.text(max_size=40)), max_size=30).map("\n".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stdout=st.one_of(TEXTS.map(str.encode), st.binary(max_size=400)),
       history=st.one_of(TEXTS.map(str.encode), st.binary(max_size=400)))
def test_parser_never_raises_on_garbage(tmp_path, stdout, history):
    (tmp_path / "out").write_bytes(stdout)
    (tmp_path / "hist").write_bytes(history)
    out = parse_outputs(tmp_path / "out", tmp_path / "hist", "warmup")
    assert all(e.source_tier == "C" and e.phase == "warmup" for e in out.events)
    assert len({e.event_id for e in out.events}) == len(out.events)


@given(text=TEXTS)
def test_scan_never_raises(text):
    findings, _ = scan_stdout(text, parse_llm_history(text))
    assert all(f.kind in ("applied", "rejected", "request_error") for f in findings)


# ------------------------------------------------------------------------- native denials (interaction)

def interaction(name: str, denials):
    base = FIXTURES / "interaction" / name
    return parse_outputs(base / "stdout.txt", base / "aider.llm.history.txt", "measured", denials=denials)


def test_a_dry_run_edit_is_a_native_denial_of_the_edit():
    """Real aider run with writes denied (``--dry-run``) against oracle-perfect on save_file (whole):
    aider parses the edit and prints ``Did not apply edit to greeting.txt (--dry-run)``."""
    from gripprobe_aider.parse import AiderDenials
    out = interaction("dry_run_save_file", AiderDenials(dry_run="native: --dry-run"))
    kinds = [(e.event_type, e.status, e.error_type) for e in out.events]
    assert kinds == [("model_response", "success", None), ("tool_call_start", "started", None),
                     ("permission_request", "started", None), ("permission_response", "success", None),
                     ("tool_call_result", "error", "edit_not_applied")]
    _, start, request, answer, result = out.events
    assert request.payload["raw_name"] == "edit" and request.payload["kind"] == "write"
    assert request.payload["input"] == {"path": "greeting.txt"} and request.tool_call_id is None
    assert (answer.payload["outcome"], answer.payload["decided_by"], answer.payload["rule"]) == (
        "deny", "native", "native: --dry-run")
    assert result.payload["output"] == "Did not apply edit to greeting.txt (--dry-run)"
    assert all(e.source_tier == "C" for e in out.events)
    assert request.timestamp == start.timestamp and start.timestamp is not None  # dated by the LLM history
    # without the driver's settings the line is still no applied edit, and no policy's denial
    plain = interaction("dry_run_save_file", None)
    assert [e.event_type for e in plain.events] == ["model_response", "tool_call_start", "tool_call_result"]
    assert plain.events[-1].status == "error"


def test_a_refused_confirmation_is_a_native_denial():
    """Real aider run under auto-deny (``--dry-run``, no --yes-always, ``n`` on stdin): "Create new file?" is
    answered no and aider prints ``Skipping edits to greeting.txt``."""
    from gripprobe_aider.parse import AiderDenials
    rule = "native: every confirmation answered no (no --yes-always)"
    out = interaction("autodeny_save_file", AiderDenials(dry_run="native: --dry-run", confirm=rule))
    tools = [(e.event_type, e.status, e.error_type) for e in out.events if e.event_type != "model_response"]
    assert tools == [("tool_call_start", "started", None), ("permission_request", "started", None),
                     ("permission_response", "success", None), ("tool_call_result", "error", "edit_failed")]
    answer = next(e for e in out.events if e.event_type == "permission_response")
    assert answer.payload["rule"] == rule and answer.payload["outcome"] == "deny"
    stdout = (FIXTURES / "interaction" / "autodeny_save_file" / "stdout.txt").read_text()
    assert "Create new file? (Y)es/(N)o [Yes]: Skipping edits to greeting.txt" in stdout


def test_reasoning_aider_logs_inside_the_reply_is_a_thought_event_and_not_the_answer():
    """Real aider run (whole) against oracle-deny-then-recover on shell_denied, whose turns carry
    ``reasoning_content``: aider logs it in the reply between ``<thinking-content-<hex>>`` tags (stdout:
    ``► **THINKING**``)."""
    out = interaction("reasoning_shell_denied", None)
    kinds = [e.event_type for e in out.events]
    assert kinds[:2] == ["model_response", "thought"]
    response, thought = out.events[:2]
    assert thought.payload == {"text": "There is no shell tool here; I will do without it."}
    assert thought.parent_id == response.event_id and thought.timestamp == response.timestamp
    assert thought.source_tier == "C"
    assert "thinking-content" not in response.payload["text"]
    assert response.payload["text"].startswith("I am not allowed to use a tool that could do this")
    assert out.final_text and "thinking-content" not in out.final_text
    assert [(e.event_type, e.status) for e in out.events if e.is_tool_event()] == [
        ("tool_call_start", "started"), ("tool_call_result", "success")]


# ------------------------------------------------------------------------------------------ printed usage

def test_the_printed_token_line_is_the_replys_usage():
    """aider asks no usage of the wire, but prints ``Tokens: N sent, M received.`` after each answered call:
    each reply's ``model_response`` carries it (issue 22)."""
    out = sample("whole_success")
    (response,) = [e for e in out.events if e.event_type == "model_response"]
    stdout = (FIXTURES / "samples" / "whole_success" / "stdout.txt").read_text()
    line = next(x for x in stdout.splitlines() if x.startswith("Tokens: "))
    sent, received = (int(w) for w in line.replace(",", "").split() if w.isdigit())
    assert response.payload["usage"] == {"prompt_tokens": sent, "completion_tokens": received}


@pytest.mark.parametrize("line, want", [
    ("Tokens: 633 sent, 12 received.", {"prompt_tokens": 633, "completion_tokens": 12}),
    ("Tokens: 1.8k sent, 28 received.", {"prompt_tokens": 1800, "completion_tokens": 28, "approximate": True}),
    ("Tokens: 12k sent, 1.2k cache hit, 120 received. Cost: $0.01 message, $0.02 session.",
     {"prompt_tokens": 12000, "completion_tokens": 120, "cached_tokens": 1200, "approximate": True}),
    ("Tokens: lots sent, none received.", None),
])
def test_token_lines(line, want):
    from gripprobe_aider.parse import token_lines

    got = token_lines(f"intro\n{line}\n", [])
    assert got == ([want] if want else [])


def test_a_token_line_inside_a_reply_is_the_models_text_not_aiders():
    from gripprobe_aider.parse import Exchange, token_lines

    reply = "Tokens: 9 sent, 9 received."
    ex = Exchange(sent=None, sent_line=1, received=None, received_line=2, reply=reply)
    assert token_lines(f"{reply}\nTokens: 5 sent, 3 received.\n", [ex]) == [{"prompt_tokens": 5, "completion_tokens": 3}]

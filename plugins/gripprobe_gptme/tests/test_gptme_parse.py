"""The conversation.jsonl parser on real gptme 0.35.1 outputs, plus garbage that must never raise.

``fixtures/samples/*`` are the field-note captures (a scripted fake model); ``fixtures/captured/*``
are this plugin's own runs of the real gptme against the oracle (malformed arguments, a failing
shell command, an xml-escaped command).
"""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gripprobe_core.plugin import PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_gptme.parse import (
    CONVERSATION_ARTIFACT, TOOL_NAMES, parse_conversation, parse_phase, result_status, strip_tool_uses, tool_uses,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UTC = timezone.utc


def parse(case: str, fmt: str, group: str = "samples"):
    data = (FIXTURES / group / case / "conversation.jsonl").read_bytes()
    return parse_conversation(data, "measured", fmt, tz=UTC)


def tool_events(parsed):
    return [e for e in parsed.events if e.event_type != "model_response"]


def test_tool_format_success_pairs_calls_and_results_by_gptmes_call_ids():
    p = parse("tool_success", "tool")
    kinds = [(e.event_type, e.tool_call_id, e.payload.get("raw_name"), e.status) for e in p.events]
    assert kinds == [
        ("model_response", None, None, "success"),
        ("tool_call_start", "call_9349abb64123", "save", "started"),
        ("tool_call_result", "call_9349abb64123", "save", "success"),
        ("model_response", None, None, "success"),
        ("tool_call_start", "call_6071b1da3b2f", "complete", "started"),
        ("tool_call_result", "call_6071b1da3b2f", "complete", "success"),
    ]
    start = p.events[1]
    assert start.payload["name"] == "write" and start.payload["kind"] == "write"
    assert start.payload["arguments"] == {"path": "hello.txt", "content": "hello world\n"}
    assert start.parent_id == p.events[0].event_id == "measured-B-1"
    assert start.timestamp == "2026-11-22T10:12:17.139Z"  # naive gptme time read as UTC here
    assert p.events[2].latency_ms == 2.1 and p.events[2].payload["output"] == "Saved to hello.txt"
    assert p.events[0].latency_ms == pytest.approx(1976.1) and p.events[0].payload["usage"]["input_tokens"] == 9130
    assert [e.raw_artifact_ref for e in p.events] == ["gptme.conversation.jsonl:7"] * 2 + ["gptme.conversation.jsonl:8"] + \
        ["gptme.conversation.jsonl:9"] * 2 + ["gptme.conversation.jsonl:10"]
    assert p.final_text == "The file is created."


@pytest.mark.parametrize("case,fmt", [("md_success", "markdown"), ("xml_success", "xml")])
def test_text_formats_read_the_tool_uses_from_the_reply_text(case, fmt):
    p = parse(case, fmt)
    starts = [e for e in p.events if e.event_type == "tool_call_start"]
    results = [e for e in p.events if e.event_type == "tool_call_result"]
    assert [s.payload["raw_name"] for s in starts] == ["save", "complete"]
    assert starts[0].payload["arguments"] == {"path": "hello.txt", "content": "hello world"}
    assert all(s.tool_call_id is None for s in starts)  # gptme gives text tool uses no id
    assert [r.status for r in results] == ["success", "success"]
    assert results[0].payload["output"] == "Saved to hello.txt"
    assert [r.parent_id for r in results] == [s.parent_id for s in starts]
    assert p.final_text == "The file is created."


def test_shell_result_has_exit_code_zero_and_execute_kind():
    (start, result) = [e for e in tool_events(parse("tool_shell", "tool")) if e.payload["raw_name"] == "shell"]
    assert start.payload["kind"] == "execute" and start.payload["name"] == "shell"
    assert start.payload["arguments"] == {"command": "echo 'hello world' > hello.txt && cat hello.txt"}
    assert result.status == "success" and result.exit_code == 0 and result.latency_ms == 571.6


@pytest.mark.parametrize("case,fmt", [("md_notool", "markdown"), ("tool_notool", "tool")])
def test_no_tool_call_gives_three_responses_and_no_tool_events(case, fmt):
    """gptme nudges twice after an answer without a tool call: three responses, no tool use."""
    p = parse(case, fmt)
    assert [e.event_type for e in p.events] == ["model_response"] * 3
    assert all(e.payload["tool_call_count"] == 0 for e in p.events)
    assert p.final_text == "I cannot do that right now."


@pytest.mark.parametrize("case,code", [("tool_http400_defaultretries", "http_400"),
                                       ("md_http500_retries2", "http_500")])
def test_a_failed_model_request_is_an_errored_response(case, code):
    (event,) = parse(case, "tool").events
    assert (event.event_type, event.status, event.error_type) == ("model_response", "error", code)
    assert event.payload["exit_code"] == 1
    assert event.timestamp is not None


def test_malformed_arguments_are_starts_without_results():
    """Captured: the oracle's malformed-args profile. gptme logs the broken call and never runs it."""
    p = parse("tool_malformed_args", "tool", "captured")
    starts = tool_events(p)
    assert [s.event_type for s in starts] == ["tool_call_start"] * 3
    assert [s.tool_call_id for s in starts] == ["call_oracle_0001", "call_oracle_0002", "call_oracle_0003"]
    assert all(s.error_type == "malformed_arguments" for s in starts)
    assert starts[0].payload["arguments"] == '{"command": "pwd > pwd.txt"'


def test_a_failing_shell_command_is_an_error_with_its_exit_code():
    """Captured: error-then-recover; `cat` of a missing file returns 1, then the plan succeeds."""
    results = [e for e in parse("tool_error_then_recover", "tool", "captured").events
               if e.event_type == "tool_call_result"]
    assert [(r.payload["raw_name"], r.status, r.exit_code, r.error_type) for r in results] == [
        ("shell", "error", 1, "tool_error"), ("shell", "success", 0, None), ("complete", "success", None, None)]


def test_gptmes_own_tool_names_are_normalized():
    """save/append write, patch_many edits, ipython/tmux execute (gptme's entries in TOOL_NAMES)."""
    line = json.dumps({"role": "assistant", "content": "```append log.txt\nx\n```\n```ipython\nprint(1)\n```\n"
                                                       "```tmux\nls\n```\n```patch_many\ny\n```"}).encode()
    starts = [e for e in parse_conversation(line, "measured", "markdown").events if e.event_type == "tool_call_start"]
    assert [(s.payload["raw_name"], s.payload["name"], s.payload["kind"]) for s in starts] == [
        ("append", "write", "write"), ("ipython", "ipython", "execute"), ("tmux", "tmux", "execute"),
        ("patch_many", "edit", "write")]
    assert TOOL_NAMES.normalize("save") == ("write", "write")


def test_xml_tool_use_is_unescaped():
    events = tool_events(parse("xml_shell", "xml", "captured"))
    (start, result) = [e for e in events if e.payload["raw_name"] == "shell"]
    assert start.payload["arguments"] == {"command": "pwd > pwd.txt"}
    assert result.status == "success" and result.exit_code == 0


def test_json_stdout_is_the_fallback_and_says_the_same(tmp_path):
    """--output-format json prints the conversation on stdout: without the log, the same tool events."""
    stdout = FIXTURES / "samples" / "tool_jsonout" / "stdout.txt"
    capture = PhaseCapture(stdout_path=stdout, stderr_path=tmp_path / "e",
                           process=ProcessResult(status="ok", exit_code=0))
    from_stdout = parse_phase(capture, "measured", "tool", tz=UTC)
    from_log = parse("tool_jsonout", "tool")
    def strip(events):
        return [(e.event_type, e.tool_call_id, e.status, e.payload.get("arguments")) for e in events]

    assert strip(from_stdout.events) == strip(from_log.events) != []
    assert from_stdout.events[1].raw_artifact_ref == "stdout.txt:2"


def test_parse_phase_prefers_the_conversation_artifact(tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "missing", stderr_path=tmp_path / "e",
                           process=ProcessResult(status="ok", exit_code=0),
                           files={CONVERSATION_ARTIFACT: FIXTURES / "samples" / "md_success" / "conversation.jsonl"})
    assert len(parse_phase(capture, "warmup", "markdown").events) == 6


def test_exit_0_without_any_log_is_a_wrapper_parse_error(tmp_path):
    empty = tmp_path / "stdout"
    empty.write_bytes(b"not json\n")
    capture = PhaseCapture(stdout_path=empty, stderr_path=tmp_path / "e",
                           process=ProcessResult(status="ok", exit_code=0))
    with pytest.raises(WrapperParseError, match="no conversation.jsonl"):
        parse_phase(capture, "measured", "tool")


@pytest.mark.parametrize("process", [ProcessResult(status="nonzero_exit", exit_code=1),
                                     ProcessResult(status="timeout")])
def test_a_crash_without_any_log_gives_no_events(tmp_path, process):
    capture = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "e", process=process)
    assert parse_phase(capture, "measured", "tool").events == []


def test_an_unreadable_log_is_a_wrapper_parse_error(tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "e",
                           process=ProcessResult(status="ok", exit_code=0), files={CONVERSATION_ARTIFACT: tmp_path})
    with pytest.raises(WrapperParseError):
        parse_phase(capture, "measured", "tool")


def test_naive_timestamps_are_read_in_the_given_zone():
    line = json.dumps({"role": "assistant", "content": "hi", "timestamp": "2026-11-22T12:00:00.5"}).encode()
    (event,) = parse_conversation(line, "measured", "tool", tz=timezone(timedelta(hours=2))).events
    assert event.timestamp == "2026-11-22T10:00:00.500Z"
    aware = json.dumps({"role": "assistant", "content": "hi", "timestamp": "2026-11-22T12:00:00+00:00"}).encode()
    assert parse_conversation(aware, "measured", "tool").events[0].timestamp == "2026-11-22T12:00:00.000Z"


# ---------------------------------------------------------------------------- reading tool uses

def test_nested_fences_stay_inside_a_save_block():
    text = "Writing.\n\n```save README.md\n# T\n```\ncode\n```\nend\n```\n\nDone."
    (use,) = tool_uses(text, "markdown")
    assert use.arguments == {"path": "README.md", "content": "# T\n```\ncode\n```\nend"}


def test_tool_format_ignores_call_syntax_inside_fences_and_reads_fenced_tools():
    text = ("Example:\n```text\n@shell(call_x): {\"command\": \"rm -rf /\"}\n```\n"
            "```shell\nls\n```\n@save(c1): {\"path\": \"a\", \"content\": \"b\"}")
    uses = tool_uses(text, "tool")
    assert [(u.name, u.call_id, u.arguments) for u in uses] == [
        ("shell", None, {"command": "ls"}), ("save", "c1", {"path": "a", "content": "b"})]


def test_non_tool_fences_are_not_tool_uses_and_an_unclosed_tool_block_is_malformed():
    """gptme drops an unterminated block and runs nothing: a malformed use (raw text), no result to
    wait for; only in the markdown format, and only for a tool language."""
    assert tool_uses("```python\nprint(1)\n```\n```python\nls", "markdown") == []
    (use,) = tool_uses("```python\nprint(1)\n```\n```shell\nls", "markdown")
    assert (use.name, use.arguments, use.malformed, use.call_id) == ("shell", "shell\nls", True, None)
    assert tool_uses("```python\nprint(1)\n```\n```shell\nls", "tool") == []


def test_xml_tool_uses_with_attributes_and_several_children():
    text = '<tool-use>\n<save args="a b.txt">\nx &amp; y\n</save>\n<shell>\nls\n</shell>\n</tool-use>'
    uses = tool_uses(text, "xml")
    assert [(u.name, u.arguments) for u in uses] == [
        ("save", {"path": "a b.txt", "content": "x & y"}), ("shell", {"command": "ls"})]


def test_xml_that_is_not_well_formed_runs_nothing_as_in_gptme():
    """Captured in a tricky-write run: a raw `<<'EOF'` in the prose made gptme run nothing. Its tool
    uses are reported malformed (raw text, nothing ran), as is a tool use missing `</tool-use>`."""
    (use,) = tool_uses("I will run `cat <<'EOF'`.\n<tool-use>\n<shell>\nls\n</shell>\n</tool-use>", "xml")
    assert (use.name, use.arguments, use.malformed) == ("shell", "<shell>\nls\n</shell>", True)
    (cut,) = tool_uses('<tool-use>\n<save args="a.txt">\nx\n</tool-use>', "xml")
    assert (cut.name, cut.arguments, cut.malformed) == ("save", '<save args="a.txt">\nx', True)
    (open_only,) = tool_uses("<tool-use>\n<shell>\nls\n</shell>", "xml")
    assert open_only.malformed and open_only.name == "shell"
    assert tool_uses("No tool here: <b>bold</b>", "xml") == []
    assert tool_uses("<tool-use><b>not a tool</b> & </tool-use>", "xml") == []


def test_strip_tool_uses_leaves_the_prose():
    assert strip_tool_uses("Done.\n@complete(c9): {}", "tool") == "Done."
    assert strip_tool_uses("Done.\n\n```complete\n```\n", "markdown") == "Done."
    assert strip_tool_uses("Done.\n<tool-use>\n<complete>\n</complete>\n</tool-use>", "xml") == "Done."


@pytest.mark.parametrize("tool,text,expected", [
    ("shell", "Ran command: `ls`\n\nNo output\n", ("success", 0)),
    ("shell", "Ran command: `false`\n\nNo output\n\nReturn code: 1\n", ("error", 1)),
    ("shell", "Command timed out (after 5s)\n", ("timeout", None)),
    ("patch", "Error executing tool 'patch': Patch failed: original chunk not found", ("error", None)),
    ("save", "Save aborted: Content contains placeholder lines", ("error", None)),
    ("append", "Cannot append to x: not a regular file", ("error", None)),
    ("save", "Saved to greeting.txt", ("success", None)),
])
def test_result_status_from_text(tool, text, expected):
    assert result_status(tool, text) == expected


# ---------------------------------------------------------------------------- never raise

@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(data):
    for fmt in ("tool", "markdown", "xml"):
        parse_conversation(data, "measured", fmt)


_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["assistant", "system", "user", "tool", 3])}, optional={
    "content": st.one_of(st.text(max_size=200), st.integers(), st.none(), st.sampled_from([
        "```save x\ny\n```", "@shell(c1): {\"command\": \"ls\"", "<tool-use><shell>ls</shell></tool-use>",
        "Return code: 7", "Error executing tool 'x': y"])),
    "timestamp": st.one_of(st.text(max_size=30), st.sampled_from(["2026-11-22T10:12:17", "2026-99-99T99"]), st.none()),
    "call_id": st.one_of(st.none(), st.sampled_from(["c1", "c2"]), st.integers()),
    "metadata": st.one_of(st.none(), st.dictionaries(st.sampled_from(["timings", "usage", "error", "model"]),
                                                     st.one_of(st.booleans(), st.text(max_size=5), st.dictionaries(
                                                         st.text(max_size=8), st.floats(), max_size=3)))),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(_MESSAGE, max_size=12), st.sampled_from(["tool", "markdown", "xml"]))
def test_arbitrary_messages_never_raise(messages, fmt):
    data = "\n".join(json.dumps(m) for m in messages).encode()
    parsed = parse_conversation(data, "measured", fmt)
    ids = [e.event_id for e in parsed.events]
    assert len(ids) == len(set(ids))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("`@<>/(){}:\"\n sahelvtoc-_=&;#")), max_size=300))
def test_tool_use_reader_never_raises(text):
    for fmt in ("tool", "markdown", "xml"):
        tool_uses(text, fmt)
        strip_tool_uses(text, fmt)


# ------------------------------------------------------------------------- native denials (interaction)

WRITE_DENIED = {"save": "native: --tools shell", "append": "native: --tools shell", "patch": "native: --tools shell"}


def test_a_markdown_block_of_a_tool_left_out_of_the_allowlist_is_a_native_denial_not_a_start():
    """Real gptme run with a policy denying writes (``--tools shell``), markdown format, against the oracle,
    which still writes a ```save block: gptme ignores it (not loaded) and nudges; then ```complete."""
    data = (FIXTURES / "captured" / "markdown_write_denied" / "conversation.jsonl").read_bytes()
    p = parse_conversation(data, "measured", "markdown", tz=UTC, denied=WRITE_DENIED)
    kinds = [(e.event_type, e.payload.get("raw_name")) for e in p.events]
    assert kinds == [("model_response", None), ("permission_request", "save"), ("permission_response", None),
                     ("model_response", None), ("tool_call_start", "complete"), ("tool_call_result", "complete")]
    response, request, answer = p.events[:3]
    assert response.payload["tool_call_count"] == 0  # gptme ran nothing of that reply
    assert request.tool_call_id is None and answer.tool_call_id is None  # text blocks have no call id
    assert request.payload["kind"] == "write" and request.payload["name"] == "write"
    assert request.payload["input"] == {"path": "greeting.txt",  # the body as written (save adds the newline)
                                        "content": "Hello, GripProbe!\nThis file was saved with the write tool."}
    assert (answer.payload["outcome"], answer.payload["decided_by"], answer.payload["rule"]) == (
        "deny", "native", "native: --tools shell")
    assert answer.payload["request_id"] == request.payload["request_id"]
    assert request.raw_artifact_ref == response.raw_artifact_ref and request.timestamp == response.timestamp
    # without the driver's allowlist the same block reads as a (never answered) start, as before
    plain = parse_conversation(data, "measured", "markdown", tz=UTC)
    assert [e.event_type for e in plain.events][:2] == ["model_response", "tool_call_start"]


def test_a_structured_call_of_a_tool_left_out_is_a_native_denial_with_its_call_id():
    """Real gptme run with ``--tools shell`` (writes denied), tool format, against a scripted model that calls
    ``save`` though it was not offered: gptme answers "Tool 'save' is not available for execution"."""
    data = (FIXTURES / "captured" / "tool_write_denied" / "conversation.jsonl").read_bytes()
    p = parse_conversation(data, "measured", "tool", tz=UTC, denied=WRITE_DENIED)
    kinds = [(e.event_type, e.tool_call_id, e.status) for e in p.events]
    assert kinds == [("model_response", None, "success"), ("tool_call_start", "call_scripted_3", "started"),
                     ("permission_request", "call_scripted_3", "started"),
                     ("permission_response", "call_scripted_3", "success"),
                     ("tool_call_result", "call_scripted_3", "error")]
    request, answer, result = p.events[2:]
    assert request.payload["raw_name"] == "save" and request.payload["input"]["path"] == "greeting.txt"
    assert answer.payload["outcome"] == "deny" and answer.payload["rule"] == "native: --tools shell"
    assert result.payload["output"] == "Tool 'save' is not available for execution."
    # a tool the policy did not deny answered the same way is an error, not a policy's denial
    other = parse_conversation(data, "measured", "tool", tz=UTC, denied={"shell": "native: --tools save"})
    assert not [e for e in other.events if e.event_type.startswith("permission_")]


def test_thinking_tags_are_thought_events():
    """Real gptme run (tool format) against a scripted model whose reply reasons in ``<thinking>`` tags, as
    gptme's system prompt asks: a ``thought`` event (payload ``{text}``) after the reply's response."""
    from gripprobe_gptme.parse import thinking
    p = parse("tool_thinking", "tool", group="captured")
    assert [e.event_type for e in p.events][:4] == ["model_response", "thought", "tool_call_start", "tool_call_result"]
    response, thought = p.events[:2]
    assert thought.payload == {"text": "The task wants pwd saved; one shell command does it."}
    assert thought.parent_id == response.event_id and thought.status == "success"
    assert thought.timestamp == response.timestamp and thought.raw_artifact_ref == response.raw_artifact_ref
    assert thinking("```shell\necho '<thinking>no</thinking>'\n```\n<think> yes </think>") == ["yes"]
    assert thinking("<thinking></thinking>") == [] and thinking(None) == []  # type: ignore[arg-type]


def test_reasoning_content_gptme_keeps_as_a_think_block_is_a_thought_and_not_the_answer():
    """Real gptme run (tool format) against oracle-deny-then-recover, whose turns carry ``reasoning_content``:
    gptme writes it into the message as a leading ``<think>`` block."""
    p = parse("tool_reasoning", "tool", group="captured")
    thoughts = [e for e in p.events if e.event_type == "thought"]
    assert [t.payload["text"] for t in thoughts] == ["There is no shell tool here; I will do without it."] * 2
    assert p.final_text.startswith("Done. Steps performed: 1. write greeting.txt.")
    assert "<think>" not in p.final_text

"""The trajectory parser on what the real mini 2.4.6 wrote (``fixtures/captured/<format>_<profile>``: this
plugin's runs against the oracle, save_file, machine paths replaced by ``$PHASE``/``$VENV``/``$PYTHON``), and
on anything at all (hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gripprobe_core.plugin import detect_retry_loop, tool_attempts
from gripprobe_miniswe.dialect import FAILING_COMMAND, SUBMIT_COMMAND
from gripprobe_miniswe.parse import fence_of, parse_trajectory, read_trajectory, strip_blocks

CAPTURED = Path(__file__).resolve().parent / "fixtures" / "captured"
WRITE = ("cat > greeting.txt <<'GRIPPROBE_EOF'\nHello, GripProbe!\nThis file was saved with the write tool.\n"
         "GRIPPROBE_EOF")


def data(case: str) -> bytes:
    return (CAPTURED / case / "trajectory.json").read_bytes()


def parsed(case: str):
    return parse_trajectory(data(case), "measured", case.split("_", 1)[0])


def kinds(events) -> list[str]:
    return [e.event_type for e in events]


def commands(events, event_type: str = "tool_call_start") -> list[str]:
    return [e.payload["arguments"]["command"] for e in events if e.event_type == event_type]


# ---------------------------------------------------------------------------- what mini did (captured)

@pytest.mark.parametrize("fmt", ["markdown", "tool"])
def test_perfect_is_the_write_then_the_submit_both_run(fmt):
    events = parsed(f"{fmt}_perfect").events
    assert kinds(events) == ["model_response", "tool_call_start", "tool_call_result"] * 2
    assert commands(events) == [WRITE, SUBMIT_COMMAND] == commands(events, "tool_call_result")
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert [(r.status, r.exit_code) for r in results] == [("success", 0), ("success", 0)]
    assert results[1].payload["submitted"] is True  # mini wrote "not executed"; the exit says it submitted
    starts = [e for e in events if e.event_type == "tool_call_start"]
    responses = [e for e in events if e.event_type == "model_response"]
    assert [s.parent_id for s in starts] == [r.event_id for r in responses]
    assert [r.response_id for r in responses] == ["chatcmpl-oracle-1", "chatcmpl-oracle-2"]
    assert all(e.source_tier == "B" and e.timestamp for e in events)
    assert all(e.raw_artifact_ref.startswith("trajectory.json:") for e in events)
    if fmt == "tool":
        assert [s.tool_call_id for s in starts] == ["call_oracle_0001", "call_oracle_0002"]
        assert {(s.payload["raw_name"], s.payload["name"], s.payload["kind"]) for s in starts} == {("bash", "shell", "execute")}
    else:
        assert [s.tool_call_id for s in starts] == [None, None]
        assert {s.payload["raw_name"] for s in starts} == {"mswea_bash_command"}


def test_the_final_text_is_the_last_replys_prose():
    assert parsed("markdown_perfect").final_text == "THOUGHT: Done. Steps performed: 1. write greeting.txt."
    assert parsed("tool_perfect").final_text.startswith("Done. Steps performed: 1. write greeting.txt.")


def test_line_references_point_at_the_messages():
    raw = data("tool_perfect").decode().splitlines()
    for event in parsed("tool_perfect").events:
        line = int(event.raw_artifact_ref.split(":")[1])
        assert raw[line - 1] == "    {"


@pytest.mark.parametrize("fmt", ["markdown", "tool"])
def test_a_model_that_only_talks_is_three_rejected_replies_and_no_tool_event(fmt):
    events = parsed(f"{fmt}_lazy").events
    assert kinds(events) == ["model_response"] * 3
    assert all(e.error_type is None and e.payload["tool_call_count"] == 0 for e in events)
    assert all("Format error" in e.payload["rejected_by_agent"] or "Tool call error" in e.payload["rejected_by_agent"]
               for e in events)
    assert [e.response_id for e in events] == ["chatcmpl-oracle-1", "chatcmpl-oracle-2", "chatcmpl-oracle-3"]


def test_tool_calls_written_as_text_are_rejected_replies_without_an_error_of_minis():
    """text-tools in the tool format: <tool_call> JSON in the text; mini reads no call (the proxy counts them)."""
    events = parsed("tool_text_tools").events
    assert kinds(events) == ["model_response"] * 3
    assert all("<tool_call>" in e.payload["text"] and e.error_type is None for e in events)


def test_malformed_arguments_are_a_rejected_reply_that_names_the_broken_call():
    events = parsed("tool_malformed_args").events
    assert kinds(events) == ["model_response"] * 3  # never a start: mini ran nothing
    assert {e.error_type for e in events} == {"malformed_arguments"}
    (use,) = events[0].payload["unreadable_tool_uses"]
    assert use["raw_name"] == "bash" and use["tool_call_id"] == "call_oracle_0001"
    assert use["arguments"].startswith('{"command": "cat > greeting.txt') and not use["arguments"].endswith("}")


def test_a_block_cut_short_is_a_rejected_reply_with_protocol_malformed():
    events = parsed("markdown_malformed_args").events
    assert kinds(events) == ["model_response"] * 3
    assert {e.error_type for e in events} == {"protocol_malformed"}
    (use,) = events[0].payload["unreadable_tool_uses"]
    assert use["raw_name"] == "mswea_bash_command" and use["arguments"].startswith("cat > greeting.txt")


@pytest.mark.parametrize("fmt", ["markdown", "tool"])
def test_error_then_recover_is_a_real_failure_then_the_write_then_the_submit(fmt):
    events = parsed(f"{fmt}_error_then_recover").events
    attempts = tool_attempts(events)
    assert [(a.start.payload["arguments"]["command"], a.status, a.result.exit_code) for a in attempts] == [
        (FAILING_COMMAND, "error", 1), (WRITE, "success", 0), (SUBMIT_COMMAND, "success", 0)]
    assert "No such file or directory" in attempts[0].result.payload["output"]
    assert not detect_retry_loop(events)


@pytest.mark.parametrize("fmt", ["markdown", "tool"])
def test_retry_loop_is_three_identical_real_failures_then_three_rejected_replies(fmt):
    events = parsed(f"{fmt}_retry_loop").events
    attempts = tool_attempts(events)
    assert [(a.start.payload["arguments"]["command"], a.status, a.result.exit_code) for a in attempts] == [
        (FAILING_COMMAND, "error", 1)] * 3
    assert detect_retry_loop(events)
    assert kinds(events)[-3:] == ["model_response"] * 3  # the give-up answers mini rejected


def test_a_failed_model_call_is_an_errored_response():
    (event,) = parsed("markdown_http_500").events
    assert (event.event_type, event.status, event.error_type) == ("model_response", "error", "http_500")
    assert event.payload["error_class"] == "InternalServerError"
    (event,) = parsed("tool_tools_unsupported").events
    assert (event.status, event.error_type) == ("error", "backend_tool_unsupported")


# ---------------------------------------------------------------------------- reading the file

def test_a_trajectory_cut_short_is_read_as_far_as_it_goes():
    whole = data("tool_error_then_recover")
    complete = read_trajectory(whole)
    assert complete.complete and len(complete.messages) == 9
    cut = whole[:whole.index(b'"role": "exit"')]
    partial = read_trajectory(cut)
    assert not partial.complete and [m for _, m in partial.messages] == [m for _, m in complete.messages[:8]]
    events = parse_trajectory(cut, "measured", "tool").events
    # mini marks the submitting command "not executed"; only the exit message says it ran, and it is cut off
    assert commands(events) == [FAILING_COMMAND, WRITE] == commands(events, "tool_call_result")


def test_the_fence_comes_from_the_trajectorys_model_config():
    info = read_trajectory(data("markdown_perfect")).info
    assert fence_of(info) == "mswea_bash_command"
    assert fence_of({"config": {"model": {"action_regex": "```bash\\s*\\n(.*?)\\n```"}}}) == "bash"
    assert fence_of({}) == "mswea_bash_command"
    assert strip_blocks("THOUGHT: x\n\n```mswea_bash_command\nls\n```\n") == "THOUGHT: x"


def test_the_submitting_command_is_found_whatever_it_printed():
    """A run whose last command printed the marker and a submission (what SWE-bench runs do with git diff)."""
    doc = json.loads(data("markdown_perfect"))
    doc["messages"][-1]["extra"]["submission"] = "diff --git a/x b/x\n"
    events = parse_trajectory(json.dumps(doc, indent=2).encode(), "measured", "markdown").events
    last = events[-1]
    assert last.event_type == "tool_call_result" and last.payload["output"].endswith("diff --git a/x b/x\n")


def test_an_action_mini_did_not_run_has_no_tool_event():
    """Two calls in one reply, the first submits: mini marks both "not executed"; only the first ran."""
    doc = json.loads(data("tool_perfect"))
    reply, result = doc["messages"][4], doc["messages"][5]
    second = {"function": {"arguments": '{"command": "touch later"}', "name": "bash"}, "id": "call_x", "type": "function"}
    reply["tool_calls"].append(second)
    reply["extra"]["actions"].append({"command": "touch later", "tool_call_id": "call_x"})
    doc["messages"].insert(6, {**result, "tool_call_id": "call_x"})
    events = parse_trajectory(json.dumps(doc, indent=2).encode(), "measured", "tool").events
    assert "touch later" not in commands(events)
    assert commands(events, "tool_call_result")[-1] == SUBMIT_COMMAND


# ---------------------------------------------------------------------------- anything at all

SAMPLES = [p.read_bytes() for p in sorted(CAPTURED.glob("*/trajectory.json"))]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from(["markdown", "tool", "xml"]))
def test_parse_never_raises_on_arbitrary_bytes(blob, fmt):
    transcript = parse_trajectory(blob, "measured", fmt)
    assert all(e.source_tier == "B" for e in transcript.events)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SAMPLES), st.integers(min_value=0, max_value=30000), st.binary(max_size=64),
       st.sampled_from(["markdown", "tool"]))
def test_parse_never_raises_on_damaged_trajectories(sample, cut, junk, fmt):
    """Real trajectories cut anywhere, with junk spliced in: still no exception."""
    cut = min(cut, len(sample))
    parse_trajectory(sample[:cut] + junk + sample[cut:cut + 500], "measured", fmt)
    parse_trajectory(sample[:cut], "measured", fmt)


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["role", "content", "extra", "tool_calls", "actions", "returncode",
                                         "tool_call_id", "exit_status", "interrupt_type", "response", "id",
                                         "function", "arguments", "name", "timestamp", "command"]), inner, max_size=5),
                    max_leaves=30), st.sampled_from(["assistant", "user", "tool", "exit"]))
def test_parse_never_raises_on_odd_messages(value, role):
    message = value if isinstance(value, dict) else {"extra": value}
    doc = {"info": {}, "messages": [{"role": "system", "content": "s"}, {**message, "role": role}],
           "trajectory_format": "mini-swe-agent-1.1"}
    parse_trajectory(json.dumps(doc, indent=2).encode(), "measured", "tool")
    parse_trajectory(json.dumps(doc, indent=2).encode(), "measured", "markdown")


# ------------------------------------------------------------------------- native denials (interaction)

REFUSED = Path(__file__).resolve().parent / "fixtures" / "interaction"
RULE = "native: agent.mode=confirm, every action rejected"


@pytest.mark.parametrize("case, fmt, raw_name", [("tool_refused", "tool", "bash"),
                                                 ("markdown_refused", "markdown", "mswea_bash_command")])
def test_actions_rejected_in_confirm_mode_are_native_denials_and_never_starts(case, fmt, raw_name):
    """Real mini runs with the shell denied (confirm mode, every action rejected on stdin) against
    oracle-perfect on shell_pwd: each action is refused (the model is told), the oracle keeps trying to
    submit, and after the 20 answers mini stops (EOFError, exit 1)."""
    got = parse_trajectory((REFUSED / case / "trajectory.json").read_bytes(), "measured", fmt, refusal_rule=RULE)
    types = [e.event_type for e in got.events]
    assert "tool_call_start" not in types and "tool_call_result" not in types  # nothing ran
    assert types.count("permission_request") == types.count("permission_response") == 20
    assert types.count("model_response") == 21  # the last reply's action was pending when the answers ran out
    requests = [e for e in got.events if e.event_type == "permission_request"]
    answers = [e for e in got.events if e.event_type == "permission_response"]
    assert requests[0].payload["input"] == {"command": "pwd > pwd.txt"}
    assert {r.payload["raw_name"] for r in requests} == {raw_name} and {r.payload["kind"] for r in requests} == {"execute"}
    assert all((a.payload["outcome"], a.payload["decided_by"], a.payload["rule"]) == ("deny", "native", RULE)
               for a in answers)
    assert [a.tool_call_id for a in answers] == [r.tool_call_id for r in requests]
    if fmt == "tool":
        assert requests[0].tool_call_id == "call_oracle_0001"
    else:
        assert requests[0].tool_call_id is None  # a text block has no call id
    assert not [e for e in got.events if e.status == "error"]  # the end of the answers is no failed model call
    # the refusal's pointer is mini's "Commands not executed" message
    line = int(answers[0].raw_artifact_ref.rsplit(":", 1)[1])
    assert "UserRejection" in "\n".join((REFUSED / case / "trajectory.json").read_text().splitlines()[line - 1:line + 8])


def test_without_the_drivers_rule_a_rejection_is_still_a_denial_named_generically():
    got = parse_trajectory((REFUSED / "tool_refused" / "trajectory.json").read_bytes(), "measured", "tool")
    answers = [e for e in got.events if e.event_type == "permission_response"]
    assert answers and {a.payload["rule"] for a in answers} == {"native: mini confirmation rejected"}


def test_the_replys_reasoning_content_is_a_thought_and_the_oracle_is_refused_through_gripprobe():
    """Real mini run through ``gripprobe run`` (shell_denied: the shell denied, confirm mode with every action
    rejected) against oracle-deny-then-recover, whose turns carry ``reasoning_content``: litellm keeps it on
    the assistant message. The oracle reads mini's rejection (a user message) as no refusal and keeps trying
    to submit, so all 20 answers are spent."""
    got = parse_trajectory((REFUSED / "reasoning_shell_denied" / "trajectory.json").read_bytes(), "measured", "tool",
                           refusal_rule=RULE)
    thoughts = [e for e in got.events if e.event_type == "thought"]
    responses = [e for e in got.events if e.event_type == "model_response"]
    assert thoughts[0].payload == {"text": "A single shell command is the quickest way to do this."}
    assert thoughts[0].parent_id == responses[0].event_id and thoughts[0].timestamp == responses[0].timestamp
    assert len(thoughts) == len(responses)  # every turn of that profile reasons aloud
    assert [e.event_type for e in got.events][:4] == ["model_response", "thought", "permission_request",
                                                      "permission_response"]
    assert sum(e.event_type == "permission_response" for e in got.events) == 20

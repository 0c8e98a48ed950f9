"""The transcript parser on REAL ACP sessions: each agent run through ``gripprobe run`` against the oracle (profiles
perfect and lazy on save_file; deny-then-recover on save_file_denied, auto-deny, and shell_denied, a scripted policy
denying ``execute``), the transcript the session wrote kept with the oracle's ground truth (``fixtures/<agent>/<case>``,
scrubbed by ``fixtures/scrub.py``: machine paths replaced, Qwen Code's 540 KB skill list cut). Plus bytes and JSON
shapes that must never make it raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_acp.parse import parse_transcript
from gripprobe_acp.plugin import ClaudeAcpDriver, CodexAcpDriver, OpencodeAcpDriver, QwenAcpDriver

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NAMES = {"qwen": QwenAcpDriver.tool_names, "opencode": OpencodeAcpDriver.tool_names,
         "claude": ClaudeAcpDriver.tool_names, "codex": CodexAcpDriver.tool_names}
AGENTS = tuple(NAMES)


def parsed(agent: str, case: str):
    data = (FIXTURES / agent / case / "conversation.jsonl").read_bytes()
    return parse_transcript(data, "measured", "measured.conversation.jsonl", NAMES[agent])


def truth(agent: str, case: str) -> list[dict]:
    text = (FIXTURES / agent / case / "oracle.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def of(events, kind: str):
    return [e for e in events if e.event_type == kind]


# ------------------------------------------------------------------------------------ every agent: perfect

@pytest.mark.parametrize("agent", AGENTS)
def test_perfect_run_reports_the_oracle_calls_with_their_ids_names_and_results(agent):
    got = parsed(agent, "perfect_save_file")
    want = truth(agent, "perfect_save_file")
    starts, results = of(got.events, "tool_call_start"), of(got.events, "tool_call_result")
    assert [s.tool_call_id for s in starts] == [t["tool_call_id"] for t in want] == [r.tool_call_id for r in results]
    if agent == "codex":  # the adapter reports a patch as "Editing files" (kind edit, a diff), with no name
        assert [(s.payload["raw_name"], s.payload["title"]) for s in starts] == [(None, "Editing files")]
    else:
        assert [s.payload["raw_name"] for s in starts] == [t["name"] for t in want]
    assert [r.status for r in results] == ["success"] * len(want)
    assert all(e.source_tier == "B" and e.timestamp and e.raw_artifact_ref.startswith("measured.conversation.jsonl:")
               for e in got.events)
    assert {s.payload["kind"] for s in starts} == {"write"}
    assert got.final_text.startswith("Done. Steps performed: 1. write greeting.txt.")
    assert got.facts["stop_reason"] == "end_turn"


@pytest.mark.parametrize("agent", ("qwen", "opencode", "claude"))
def test_perfect_run_asked_once_and_auto_approve_picked_allow_once(agent):
    got = parsed(agent, "perfect_save_file")
    (request,), (response,) = of(got.events, "permission_request"), of(got.events, "permission_response")
    call = truth(agent, "perfect_save_file")[0]
    assert request.tool_call_id == response.tool_call_id == call["tool_call_id"]
    assert request.payload["raw_name"] == call["name"] and request.payload["kind"] == "write"
    assert response.payload["outcome"] == "allow" and response.payload["rule"] == "auto-approve"
    assert response.payload["option_kind"] == "allow_once" and response.payload["decided_by"] == "policy"
    kinds = {o["kind"] for o in request.payload["options"]}
    assert {"allow_once", "reject_once"} <= kinds
    # the request sits between the call's start and its result
    order = [e.event_type for e in got.events if e.tool_call_id == call["tool_call_id"]]
    assert order == ["tool_call_start", "permission_request", "permission_response", "tool_call_result"]


def test_the_options_each_agent_offers():
    offered = {agent: [(o["option_id"], o["kind"]) for o in
                       of(parsed(agent, "perfect_save_file").events, "permission_request")[0].payload["options"]]
               for agent in ("qwen", "opencode", "claude")}
    assert offered == {
        "qwen": [("proceed_always", "allow_always"), ("proceed_once", "allow_once"), ("cancel", "reject_once")],
        "opencode": [("once", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")],
        "claude": [("allow-once", "allow_once"), ("allow-with-updates", "allow_always"), ("reject", "reject_once")],
    }


def test_codex_never_asks_and_its_patch_is_a_nameless_edit():
    got = parsed("codex", "perfect_save_file")
    assert not of(got.events, "permission_request")
    (start,) = of(got.events, "tool_call_start")
    assert (start.payload["raw_name"], start.payload["kind"], start.payload["acp_kind"]) == (None, "write", "edit")
    assert truth("codex", "perfect_save_file")[0]["name"] == "apply_patch"  # the wire's name, which tier A gives


@pytest.mark.parametrize("agent", AGENTS)
def test_lazy_run_has_no_call_and_its_answer(agent):
    got = parsed(agent, "lazy_save_file")
    assert not [e for e in got.events if e.event_type.startswith(("tool_call", "permission"))]
    assert got.final_text.startswith("To solve this I would:")
    assert got.facts["stop_reason"] == "end_turn"


# ------------------------------------------------------------------------------------------------ denials

def test_qwen_ends_its_turn_at_the_first_denial():
    for case, rule in (("deny-then-recover_save_file_denied", "auto-deny"),
                       ("deny-then-recover_shell_denied", "rule 1 (tool_kind: execute)")):
        got = parsed("qwen", case)
        (call,) = truth("qwen", case)
        (request,), (response,) = of(got.events, "permission_request"), of(got.events, "permission_response")
        assert request.tool_call_id == call["tool_call_id"] and request.payload["kind"] == "execute"
        assert (response.payload["outcome"], response.payload["option_id"], response.payload["rule"]) == (
            "deny", "cancel", rule)
        (result,) = of(got.events, "tool_call_result")
        assert result.status == "error" and result.payload["output"] == 'Tool "run_shell_command" was canceled by the user.'
        assert request.payload["input"] == result.payload["arguments"] == call["arguments"]
        assert got.final_text == "I will do the first step with one shell command."  # said before the call
        assert got.facts["stop_reason"] == "end_turn"


@pytest.mark.parametrize("agent", ("opencode", "claude"))
def test_auto_deny_refuses_the_shell_then_the_write(agent):
    got = parsed(agent, "deny-then-recover_save_file_denied")
    calls = truth(agent, "deny-then-recover_save_file_denied")
    assert [c["tool_call_id"] for c in calls] == [e.tool_call_id for e in of(got.events, "permission_request")]
    assert [e.payload["kind"] for e in of(got.events, "permission_request")] == ["execute", "write"]
    assert [(e.payload["outcome"], e.payload["option_kind"], e.payload["rule"]) for e in
            of(got.events, "permission_response")] == [("deny", "reject_once", "auto-deny")] * 2
    assert [r.status for r in of(got.events, "tool_call_result")] == ["error", "error"]
    assert "The shell command was denied" in got.final_text


@pytest.mark.parametrize("agent", ("opencode", "claude"))
def test_scripted_policy_denies_the_shell_and_allows_the_write(agent):
    got = parsed(agent, "deny-then-recover_shell_denied")
    calls = truth(agent, "deny-then-recover_shell_denied")
    responses = of(got.events, "permission_response")
    assert [e.tool_call_id for e in responses] == [c["tool_call_id"] for c in calls]
    assert [(e.payload["outcome"], e.payload["rule"]) for e in responses] == [
        ("deny", "rule 1 (tool_kind: execute)"), ("allow", "default")]
    assert [r.status for r in of(got.events, "tool_call_result")] == ["error", "success"]
    assert got.final_text.startswith("The shell command was denied, so I used the file tools instead.")


def test_codex_runs_the_shell_under_any_policy():
    got = parsed("codex", "deny-then-recover_save_file_denied")
    assert not of(got.events, "permission_request")
    (result,) = of(got.events, "tool_call_result")
    assert (result.payload["raw_name"], result.status, result.exit_code) == ("exec_command", "success", 0)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_oracles_reasoning_becomes_thought_events(agent):
    got = parsed(agent, "deny-then-recover_shell_denied")
    thoughts = [e.payload["text"].strip() for e in of(got.events, "thought")]
    assert "A single shell command is the quickest way to do this." in thoughts


# -------------------------------------------------------------------------------------- shapes, garbage

def line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def incoming(update: dict) -> bytes:
    return line({"dir": "incoming", "time": "2026-11-27T00:00:00.000Z",
                 "message": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}})


def test_updates_before_the_call_and_streamed_inputs_merge_into_one_call():
    data = (incoming({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "pending", "kind": "other",
                      "title": "apply_patch: {...}", "rawInput": {"input": "*** Begin"}})
            + incoming({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "apply_patch: {...}", "kind": "other"})
            + incoming({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                        "rawOutput": {"result": "ok", "success": True}}))
    got = parse_transcript(data, "measured", "t.jsonl", NAMES["opencode"])
    start, result = got.events
    assert (start.event_type, start.raw_artifact_ref, start.payload["raw_name"]) == ("tool_call_start", "t.jsonl:1", "apply_patch")
    assert start.payload["arguments"] == {"input": "*** Begin"} and start.payload["kind"] == "write"
    assert (result.event_type, result.status, result.payload["output"], result.raw_artifact_ref) == (
        "tool_call_result", "success", "ok", "t.jsonl:3")


def test_message_text_after_the_last_call_is_the_final_text_and_thoughts_join():
    data = (incoming({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "let me "}})
            + incoming({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "think"}})
            + incoming({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "first"}})
            + incoming({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "bash", "kind": "execute"})
            + incoming({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "all "}})
            + incoming({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}))
    got = parse_transcript(data, "measured", "t.jsonl")
    assert [(e.event_type, e.payload.get("text")) for e in got.events] == [
        ("thought", "let me think"), ("tool_call_start", None)]
    assert got.final_text == "all done"


def test_a_prompt_refused_with_an_error_is_a_fact():
    data = (line({"dir": "outgoing", "message": {"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {}}})
            + line({"dir": "incoming", "message": {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "boom"}}}))
    got = parse_transcript(data, "measured", "t.jsonl")
    assert got.facts["error"] == {"stage": "session/prompt", "message": "boom", "code": -32603}
    assert [(e.event_type, e.status, e.error_type) for e in got.events] == [("model_response", "error", "agent_error")]
    assert got.final_text is None


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                           st.sampled_from(["dir", "message", "method", "params", "update", "sessionUpdate", "toolCallId",
                                            "id", "result", "error", "status", "rawInput", "rawOutput", "content", "text",
                                            "type", "title", "kind", "_meta", "toolName", "event", "request", "decision",
                                            "sent", "options", "outcome", "tool_call_id", "time", "stopReason"]),
                           inner, max_size=6), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(JSONISH, max_size=12))
def test_never_raises_on_any_json_shape(objects):
    data = b"".join(line(o) for o in objects)
    got = parse_transcript(data, "measured", "t.jsonl")
    assert all(e.source_tier == "B" for e in got.events)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_never_raises_on_any_bytes(data):
    parse_transcript(data, "measured", "t.jsonl")


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_never_raises_on_a_real_transcript_cut_or_damaged(data):
    agent = data.draw(st.sampled_from(AGENTS))
    raw = (FIXTURES / agent / "deny-then-recover_shell_denied" / "conversation.jsonl").read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    noise = data.draw(st.binary(max_size=64))
    parse_transcript(raw[:cut] + noise + raw[cut:], "measured", "t.jsonl", NAMES[agent])


# ------------------------------------------------------------------------- what the session did, recorded

def records(agent: str, case: str) -> list[dict]:
    text = (FIXTURES / agent / case / "conversation.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_session_advertised_no_fs_or_terminal_and_sent_the_prompt_once(agent):
    got = records(agent, "perfect_save_file")
    sent = [r["message"] for r in got if r["dir"] == "outgoing" and "method" in r["message"]]
    assert sent[0]["method"] == "initialize" and "clientCapabilities" not in sent[0]["params"]
    assert sent[0]["params"]["clientInfo"]["name"] == "gripprobe"
    assert [m["method"] for m in sent].count("session/prompt") == 1
    assert [r["seq"] for r in got] == list(range(1, len(got) + 1))


def test_opencode_writes_through_the_client_anyway_and_is_refused():
    got = [r for r in records("opencode", "perfect_save_file") if "message" in r]  # harness lines have none
    (ask,) = [r for r in got if r["message"].get("method") == "fs/write_text_file"]
    (answer,) = [r for r in got if r["dir"] == "outgoing" and r["message"].get("id") == ask["message"]["id"]
                 and "method" not in r["message"] and r["seq"] > ask["seq"]]
    assert answer["message"]["error"]["code"] == -32601
    (result,) = of(parsed("opencode", "perfect_save_file").events, "tool_call_result")
    assert result.status == "success" and result.payload["output"] == "Wrote file successfully."


def test_codex_is_named_before_its_prompt_so_it_asks_no_title_model():
    sent = [r["message"]["method"] for r in records("codex", "perfect_save_file")
            if r["dir"] == "outgoing" and "method" in r["message"]]
    assert sent == ["initialize", "session/new", "session/set_title", "session/prompt"]


# ------------------------------------------------------------------------------ a prompt answered with an error

@pytest.mark.parametrize("agent, case, error_type", [
    ("claude", "http-500_save_file", "http_500"),                        # "Internal error: API Error: 500 …"
    ("qwen", "tools-unsupported_save_file", "backend_tool_unsupported"),  # "Internal error" + data.details
    ("opencode", "tools-unsupported_save_file", "backend_tool_unsupported"),
])
def test_a_prompt_the_agent_answered_with_an_error_is_an_error_response(agent, case, error_type):
    got = parsed(agent, case)
    (response,) = of(got.events, "model_response")
    assert (response.status, response.error_type) == ("error", error_type)
    assert response.payload["stage"] == "session/prompt" and response.payload["text"] == got.facts["error"]["message"]
    assert got.facts["error"]["code"] == -32603 and not of(got.events, "tool_call_start")
    if error_type == "backend_tool_unsupported":
        assert "does not support tools" in response.payload["text"]


def test_opencodes_failed_command_is_an_error_though_it_reports_it_completed():
    """retry-loop: the oracle runs ``cat`` on a missing file three times; opencode reports each ``bash`` call
    ``completed`` with ``rawOutput.metadata.exit`` 1."""
    got = parsed("opencode", "retry-loop_save_file")
    results = of(got.events, "tool_call_result")
    assert [r.tool_call_id for r in results] == [c["tool_call_id"] for c in truth("opencode", "retry-loop_save_file")]
    assert [(r.status, r.exit_code) for r in results] == [("error", 1)] * 3
    assert all("No such file or directory" in r.payload["output"] for r in results)

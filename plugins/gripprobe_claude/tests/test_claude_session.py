"""Interaction: Claude Code's control protocol (``control``), the harness's session (``session``) and the
permission / thought events the parser makes of them, on REAL recorded runs of Claude Code 2.1.332:

- ``fixtures/session/*``: the driver's own session against GripProbe's oracle (``oracle.jsonl`` its ground
  truth) or against a scripted Anthropic Messages server (thinking blocks, ``AskUserQuestion``), with the
  policy named in each case's name; ``stdout.txt`` is Claude Code's stdout, ``conversation.jsonl`` the
  session's record;
- ``fixtures/oracle/native_deny_rule_shell_pwd``: print mode with a deny rule of Claude Code's own
  (``--disallowedTools 'Bash(pwd:*)'``).

Machine paths are scrubbed ($WORKSPACE, $HOME, $TMPDIR). The session itself is replayed on real asyncio
streams from a recorded stdout (end to end against the real binary: test_claude_e2e.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_claude.config import ASK_TOOLS, SESSION_OPTIONS, SESSION_SETTINGS, session_argv
from gripprobe_claude.control import (
    ALLOW_ALWAYS, ALLOW_ONCE, REDACTED, REJECT_ONCE, control_response, permission_requests, read_conversation, redact,
    user_message,
)
from gripprobe_claude.parse import TOOL_NAMES, native_rule, parse_outputs, parse_stream_bytes
from gripprobe_claude.plugin import uses_session
from gripprobe_claude.session import ClaudeControlSession
from gripprobe_core.plugin import (
    SESSION_TRANSCRIPT, InteractionSpec, PermissionDecision, PermissionRequest, PhaseCapture, ProcessResult,
    SessionChannel, SessionError, decide,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SESSION = FIXTURES / "session"


def recorded(case: str, root: Path = SESSION, *, conversation: bool = True):
    folder = root / case
    conv = (folder / "conversation.jsonl").read_bytes() if conversation and (folder / "conversation.jsonl").exists() else None
    return parse_stream_bytes((folder / "stdout.txt").read_bytes(), "measured", "measured.stdout", conv)


def truth(case: str) -> list[dict]:
    return [json.loads(x) for x in (SESSION / case / "oracle.jsonl").read_text().splitlines() if x.strip()]


def shape(events) -> list[tuple]:
    return [(e.event_type, e.tool_call_id, e.status) for e in events]


def stdout_lines(case: str, root: Path = SESSION) -> list[dict]:
    return [json.loads(x) for x in (root / case / "stdout.txt").read_text().splitlines() if x.strip()]


def questions(case: str) -> list[dict]:
    return [o for o in stdout_lines(case) if o.get("type") == "control_request"]


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


# ------------------------------------------------------------------------------------------ the parser

def test_auto_deny_the_write_is_asked_denied_by_the_policy_and_fails():
    got = recorded("auto_deny_save_file")
    (call,) = truth("auto_deny_save_file")
    cid = call["tool_call_id"]
    assert shape(got.events) == [
        ("model_response", None, "success"), ("tool_call_start", cid, "started"),
        ("permission_request", cid, "started"), ("permission_response", cid, "success"),
        ("tool_call_result", cid, "error"), ("model_response", None, "success")]
    request, response = got.events[2], got.events[3]
    assert request.payload["raw_name"] == "Write" and (request.payload["name"], request.payload["kind"]) == ("write", "write")
    assert request.payload["input"] == {"file_path": "$WORKSPACE/hello.txt", "content": "hello\n"}  # absolute in the question
    assert [o["kind"] for o in request.payload["options"]] == ["allow_once", "reject_once"]
    assert response.payload["request_id"] == request.payload["request_id"]
    assert {k: response.payload[k] for k in ("outcome", "option_id", "rule", "decided_by")} == {
        "outcome": "deny", "option_id": "deny", "rule": "auto-deny", "decided_by": "policy"}
    assert response.timestamp and request.raw_artifact_ref.startswith("measured.stdout:")
    assert "denied" in got.events[4].payload["output"] and "auto-deny" in got.events[4].payload["output"]
    assert got.final_text.startswith("Done.") and "denied" in got.final_text


def test_scripted_execute_denied_both_shell_calls_by_rule_one():
    got = recorded("deny_execute_error_then_recover")
    ids = [t["tool_call_id"] for t in truth("deny_execute_error_then_recover")]
    responses = [e for e in got.events if e.event_type == "permission_response"]
    assert [(r.tool_call_id, r.payload["outcome"], r.payload["rule"]) for r in responses] == [
        (ids[0], "deny", "rule 1 (tool_kind: execute)"), (ids[1], "deny", "rule 1 (tool_kind: execute)")]
    requests = [e for e in got.events if e.event_type == "permission_request"]
    assert [r.payload["input"]["command"] for r in requests] == ["cat gripprobe-missing-file.txt", "pwd > pwd.txt"]
    # a read-only command (cat) is asked too: every tool has an ask rule
    assert [(e.tool_call_id, e.status) for e in got.events if e.event_type == "tool_call_result"] == [
        (ids[0], "error"), (ids[1], "error")]


def test_read_allowed_by_its_rule_then_the_edit_denied_by_the_default():
    got = recorded("read_allowed_edit_denied")
    read_id, edit_id = [t["tool_call_id"] for t in truth("read_allowed_edit_denied")]
    pairs = [(e.event_type, e.tool_call_id, e.payload.get("outcome"), e.payload.get("rule"))
             for e in got.events if e.event_type == "permission_response"]
    assert pairs == [("permission_response", read_id, "allow", "rule 1 (raw_name: Read)"),
                     ("permission_response", edit_id, "deny", "default")]
    results = {e.tool_call_id: e.status for e in got.events if e.event_type == "tool_call_result"}
    assert results == {read_id: "success", edit_id: "error"}
    # every permission event sits between its call's start and its result
    order = [(e.event_type, e.tool_call_id) for e in got.events if e.tool_call_id == edit_id]
    assert order == [("tool_call_start", edit_id), ("permission_request", edit_id), ("permission_response", edit_id),
                     ("tool_call_result", edit_id)]


def test_thinking_blocks_are_thought_events_of_their_response():
    got = recorded("thinking_write_denied")
    thoughts = [e for e in got.events if e.event_type == "thought"]
    assert [t.payload["text"] for t in thoughts] == ["The user wants hello.txt. I will write it.",
                                                     "It is written (or refused)."]
    responses = [e for e in got.events if e.event_type == "model_response"]
    assert [t.parent_id for t in thoughts] == [r.event_id for r in responses]
    assert [t.response_id for t in thoughts] == ["msg_scripted_1", "msg_scripted_2"]
    assert responses[0].payload["text"] == "Writing the file."  # thinking is not the reply's text
    assert [(e.payload["outcome"], e.payload["rule"]) for e in got.events if e.event_type == "permission_response"] == [
        ("deny", "rule 1 (raw_name: Write)")]


def test_a_question_answered_by_a_prompt_rule_then_the_write_allowed_by_default():
    got = recorded("question_answered")
    asks = [e for e in got.events if e.event_type.startswith("permission_")]
    assert [(e.event_type, e.tool_call_id) for e in asks] == [
        ("permission_request", "toolu_lab_0001"), ("permission_response", "toolu_lab_0001"),
        ("permission_request", "toolu_lab_0002"), ("permission_response", "toolu_lab_0002")]
    q, a = asks[0].payload, asks[1].payload
    assert q["prompt"] == "Shall I continue?" and q["raw_name"] is None
    assert [o["option_id"] for o in q["options"]] == ["yes", "no"]
    assert q["request_id"].endswith("#1")
    assert (a["outcome"], a["answer"], a["rule"]) == ("answer", "yes", "rule 1 (prompt_regex: continue\\?)")
    result = next(e for e in got.events if e.event_type == "tool_call_result" and e.tool_call_id == "toolu_lab_0001")
    assert result.status == "success" and '"Shall I continue?"="yes"' in result.payload["output"]
    assert (asks[3].payload["outcome"], asks[3].payload["rule"]) == ("allow", "default")


def test_a_question_no_rule_answers_is_refused():
    got = recorded("question_unanswered")
    responses = [e for e in got.events if e.event_type == "permission_response"]
    assert (responses[0].payload["outcome"], responses[0].payload["rule"]) == (
        "deny", "default (a question no answer rule matched)")
    result = next(e for e in got.events if e.event_type == "tool_call_result" and e.tool_call_id == "toolu_lab_0001")
    assert result.status == "error" and "did not answer" in result.payload["output"]


def test_print_mode_a_deny_rule_of_claude_codes_own_is_a_native_pair():
    got = recorded("native_deny_rule_shell_pwd", FIXTURES / "oracle")
    assert shape(got.events) == [
        ("model_response", None, "success"), ("tool_call_start", "call_oracle_0001", "started"),
        ("permission_request", "call_oracle_0001", "started"), ("permission_response", "call_oracle_0001", "success"),
        ("tool_call_result", "call_oracle_0001", "error"), ("model_response", None, "success")]
    request, response = got.events[2].payload, got.events[3].payload
    assert (request["raw_name"], request["input"]) == ("Bash", {"command": "pwd > pwd.txt"})
    assert (response["outcome"], response["decided_by"], response["rule"]) == (
        "deny", "native", "native: a deny rule of Claude Code's settings")
    # the result line lists the same denial in permission_denials: one pair, not two
    assert any(o.get("permission_denials") for o in stdout_lines("native_deny_rule_shell_pwd", FIXTURES / "oracle"))


def test_denials_listed_only_in_the_result_line_become_native_pairs():
    lines = stdout_lines("native_deny_rule_shell_pwd", FIXTURES / "oracle")
    without = [o for o in lines if o.get("subtype") != "permission_denied"]  # the advisory line may be missing
    got = parse_stream_bytes("\n".join(json.dumps(o) for o in without).encode(), "measured", "measured.stdout")
    pair = [e for e in got.events if e.event_type.startswith("permission_")]
    assert [(e.event_type, e.tool_call_id) for e in pair] == [
        ("permission_request", "call_oracle_0001"), ("permission_response", "call_oracle_0001")]
    assert pair[1].payload["rule"] == native_rule(None) and pair[1].payload["decided_by"] == "native"
    assert pair[0].payload["input"]["command"] == "pwd > pwd.txt"


def test_print_mode_runs_without_denials_have_no_permission_events():
    for case in ("perfect_save_file", "error_then_recover", "malformed_args"):
        got = parse_stream_bytes((FIXTURES / "oracle" / case / "stdout.txt").read_bytes(), "measured", "stdout")
        assert not [e for e in got.events if e.event_type.startswith("permission_") or e.event_type == "thought"]


def test_without_the_session_record_the_questions_stand_alone():
    """stdout shows what Claude Code asked; only the session's record says who answered and why: the
    denials in the result line are then not passed off as Claude Code's own."""
    got = recorded("auto_deny_save_file", conversation=False)
    asks = [(e.event_type, e.tool_call_id) for e in got.events if e.event_type.startswith("permission_")]
    assert asks == [("permission_request", "call_oracle_0001")]


def test_answers_whose_question_stdout_lost_come_last():
    lines = (SESSION / "read_allowed_edit_denied" / "stdout.txt").read_text().splitlines()
    cut = next(i for i, x in enumerate(lines) if '"can_use_tool"' in x and '"Edit"' in x)
    got = parse_stream_bytes("\n".join(lines[:cut]).encode(), "measured", "measured.stdout",
                             (SESSION / "read_allowed_edit_denied" / "conversation.jsonl").read_bytes())
    tail = got.events[-2:]
    assert [(e.event_type, e.payload.get("outcome")) for e in tail] == [("permission_request", None),
                                                                        ("permission_response", "deny")]
    assert tail[0].raw_artifact_ref == "measured.stdout"  # no line of stdout shows it


def test_a_request_claude_code_withdrew_is_cancelled():
    folder = SESSION / "auto_deny_save_file"
    (question,) = questions("auto_deny_save_file")
    records = [json.loads(x) for x in (folder / "conversation.jsonl").read_text().splitlines()]
    kept = [r for r in records if r["dir"] != "decision"] + [
        {"seq": 99, "dir": "recv", "line": {"type": "control_cancel_request", "request_id": question["request_id"]}}]
    got = parse_stream_bytes((folder / "stdout.txt").read_bytes(), "measured", "measured.stdout",
                             "\n".join(json.dumps(r) for r in kept).encode())
    response = next(e for e in got.events if e.event_type == "permission_response")
    assert (response.payload["outcome"], response.payload["decided_by"]) == ("cancelled", "native")


def test_parse_outputs_reads_the_kept_session_record(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx()
    out = tmp_path / "measured.stdout"
    out.write_bytes((SESSION / "auto_deny_save_file" / "stdout.txt").read_bytes())
    conv = tmp_path / f"measured.{SESSION_TRANSCRIPT}"
    conv.write_bytes((SESSION / "auto_deny_save_file" / "conversation.jsonl").read_bytes())
    capture = PhaseCapture(stdout_path=out, stderr_path=tmp_path / "measured.stderr",
                           process=ProcessResult(status="ok", exit_code=0), files={SESSION_TRANSCRIPT: conv})
    events = agent_driver.parse(ctx, capture).events
    assert [e.payload["outcome"] for e in events if e.event_type == "permission_response"] == ["deny"]
    assert parse_outputs(out, None, "measured", tmp_path / "missing").events  # an unreadable record: stdout alone


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_parsers_never_raise_on_arbitrary_bytes(stdout, conversation):
    parse_stream_bytes(stdout, "measured", "stdout", conversation)
    read_conversation(conversation)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                     max_leaves=20)


_REQUEST = st.fixed_dictionaries({"subtype": st.sampled_from(["can_use_tool", "initialize"])}, optional={
    "tool_name": st.sampled_from(["Write", "AskUserQuestion", "Bash"]) | _JSON, "input": _JSON, "tool_use_id": _JSON,
    "permission_suggestions": _JSON})
_PAYLOAD = st.fixed_dictionaries({}, optional={"request_id": _JSON, "outcome": st.sampled_from(["allow", "deny", "x"]),
                                               "options": _JSON, "rule": _JSON, "decided_by": _JSON, "raw_name": _JSON})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"dir": st.sampled_from(["send", "recv", "decision", "note"])}, optional={
    "agent_request_id": st.sampled_from(["r1", "r2"]) | _JSON, "tool_call_id": _JSON, "request": _PAYLOAD,
    "decision": _PAYLOAD, "line": _JSON}), max_size=5),
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["control_request", "system", "result", "assistant"])},
                                   optional={"request_id": st.sampled_from(["r1", "r2"]) | _JSON, "request": _REQUEST,
                                             "subtype": _JSON, "permission_denials": _JSON, "message": _JSON,
                                             "tool_use_id": _JSON}),
             max_size=5))
def test_parsers_never_raise_on_odd_shapes(records, lines):
    stdout = "\n".join(json.dumps(x) for x in lines).encode()
    parse_stream_bytes(stdout, "measured", "stdout", "\n".join(json.dumps(r) for r in records).encode())
    for line in lines:
        permission_requests(line, TOOL_NAMES)


# ----------------------------------------------------------------------------------------- the protocol

def test_a_tool_question_is_one_request_with_claudes_options():
    (question,) = questions("auto_deny_save_file")
    (req,) = permission_requests(question, TOOL_NAMES)
    assert (req.request_id, req.tool_call_id, req.raw_name, req.name, req.kind) == (
        question["request_id"], "call_oracle_0001", "Write", "write", "write")
    assert req.options == (ALLOW_ONCE, REJECT_ONCE) and not req.is_question
    with_suggestions = {**question, "request": {**question["request"], "permission_suggestions": [
        {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "localSettings"}]}}
    (req2,) = permission_requests(with_suggestions, TOOL_NAMES)
    assert req2.options == (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE)
    assert permission_requests({"type": "result"}, TOOL_NAMES) == []


def test_answers_are_claudes_control_responses():
    (question,) = questions("auto_deny_save_file")
    (req,) = permission_requests(question, TOOL_NAMES)
    rid = question["request_id"]
    allow = control_response(question, [req], [decide(spec(policy="auto-approve"), req)])
    assert allow == {"type": "control_response", "response": {"subtype": "success", "request_id": rid, "response": {
        "behavior": "allow", "updatedInput": question["request"]["input"]}}}
    deny = control_response(question, [req], [decide(spec(policy="auto-deny"), req)])["response"]["response"]
    assert deny["behavior"] == "deny" and "Write" in deny["message"] and "auto-deny" in deny["message"]
    told = control_response(question, [req], [PermissionDecision("answer", "manual", answer="use notes.txt")])
    assert told["response"]["response"] == {"behavior": "deny", "message": "use notes.txt"}
    suggestion = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "pwd *"}], "behavior": "allow",
                  "destination": "localSettings"}
    asked = {**question, "request": {**question["request"], "permission_suggestions": [suggestion]}}
    (req2,) = permission_requests(asked, TOOL_NAMES)
    always = control_response(asked, [req2], [decide(spec(policy="scripted", rules=[{"raw_name": "Write",
                                                                                   "option": "allow_always"}]), req2)])
    assert always["response"]["response"]["updatedPermissions"] == [{**suggestion, "destination": "session"}]


def test_a_question_is_answered_with_its_answers_or_refused():
    (question,) = [q for q in questions("question_answered") if q["request"]["tool_name"] == "AskUserQuestion"]
    reqs = permission_requests(question, TOOL_NAMES)
    assert [(r.is_question, r.prompt) for r in reqs] == [(True, "Shall I continue?")]
    policy = spec(policy="scripted", rules=[{"prompt_regex": "continue", "answer": "yes"}])
    body = control_response(question, reqs, [decide(policy, r) for r in reqs])["response"]["response"]
    assert body == {"behavior": "allow", "updatedInput": {**question["request"]["input"],
                                                          "answers": {"Shall I continue?": "yes"}}}
    refused = control_response(question, reqs, [decide(spec(policy="auto-deny"), r) for r in reqs])
    assert refused["response"]["response"]["behavior"] == "deny"
    allowed_without_answer = control_response(question, reqs, [PermissionDecision("allow", "manual")])
    assert allowed_without_answer["response"]["response"]["behavior"] == "deny"


def test_the_first_line_is_the_users_prompt():
    assert user_message("-p is a prompt") == {"type": "user", "message": {"role": "user", "content": "-p is a prompt"},
                                               "parent_tool_use_id": None, "session_id": ""}


def test_redact_replaces_the_key_as_written_and_as_json_escapes_it():
    assert redact('{"a":"sk-1234"}', "sk-1234") == f'{{"a":"{REDACTED}"}}'
    assert redact(json.dumps({"k": 'we"ird\\key'}), 'we"ird\\key') == json.dumps({"k": REDACTED})
    assert redact("abc", None) == "abc" and redact("abc", "") == "abc"


# ------------------------------------------------------------------------------------------ the session

class FakeResponder:
    """The case's policy (core's ``decide``), counting what it was asked."""

    def __init__(self, policy: InteractionSpec | None, fail: bool = False) -> None:
        self.policy, self.fail, self.asked = policy, fail, []

    async def decide(self, request: PermissionRequest) -> PermissionDecision:
        self.asked.append(request)
        if self.fail:
            raise RuntimeError("the operator went away")
        return decide(self.policy, request)


async def _replay(stdout: bytes, responder, ctx, transcript: Path, *, extra: bytes = b"") -> tuple[list[dict], bool]:
    """Run the session on real asyncio streams: its reader fed with a recorded stdout (+ ``extra``), its
    writer a real pipe whose other end is read back. Returns what it wrote and whether it closed stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    reader.feed_data(stdout + extra)
    reader.feed_eof()
    rfd, wfd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop=loop),
                                                        os.fdopen(wfd, "wb"))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    chunks: list[bytes] = []

    def drain_pipe() -> None:
        with os.fdopen(rfd, "rb") as fh:
            while data := fh.read(65536):
                chunks.append(data)

    reading = loop.run_in_executor(None, drain_pipe)
    session = ClaudeControlSession(ctx.prompt)
    try:
        await session.run(SessionChannel(reader=reader, writer=writer, responder=responder, transcript=transcript,
                                         ctx=ctx))
        closed = writer.is_closing()
    finally:
        if not writer.is_closing():
            writer.close()
        await reading
    return [json.loads(x) for x in b"".join(chunks).decode().splitlines()], closed


def test_session_writes_the_prompt_answers_each_question_and_records_both_ways(make_phase_ctx, tmp_path):
    key = "sk-ant-canary-session-5151"
    ctx = dataclasses.replace(make_phase_ctx(prompt="Create hello.txt saying hello.", api_key=key),
                              interaction=spec(policy="auto-deny"))
    stdout = (SESSION / "auto_deny_save_file" / "stdout.txt").read_bytes().replace(b"hello.txt", key.encode() + b".txt")
    transcript = tmp_path / "conversation.jsonl"
    responder = FakeResponder(ctx.interaction)
    sent, closed = asyncio.run(_replay(stdout, responder, ctx, transcript,
                                       extra=b'{"type":"control_request","request_id":"x1","request":{"subtype":"mcp_message"}}\n'
                                             b"not json\n"))
    assert sent[0] == user_message("Create hello.txt saying hello.")
    (question,) = questions("auto_deny_save_file")
    assert sent[1]["response"]["request_id"] == question["request_id"]
    assert sent[1]["response"]["response"]["behavior"] == "deny"
    assert len(sent) == 2 and closed  # stdin closed after the result: the later request goes unanswered
    assert [r.raw_name for r in responder.asked] == ["Write"]
    records = [json.loads(x) for x in transcript.read_text().splitlines()]
    kinds = [r["dir"] for r in records]
    assert kinds[0] == "send" and kinds.count("decision") == 1 and kinds.count("send") == 2
    assert kinds.count("recv") == len(stdout.splitlines()) + 2  # every stdout line, the odd ones too
    assert {"dir": "recv", "raw": "not json"}.items() <= records[-2].items() or any(r.get("raw") == "not json" for r in records)
    assert any(r.get("text") == "stdin closed after the result" for r in records)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    decision = next(r for r in records if r["dir"] == "decision")
    assert decision["decision"]["decided_by"] == "policy" and decision["tool_call_id"] == "call_oracle_0001"
    assert key not in transcript.read_text() and REDACTED in transcript.read_text()
    # and the parser reads it back
    got = parse_stream_bytes(stdout, "measured", "measured.stdout", transcript.read_bytes())
    assert [e.payload["rule"] for e in got.events if e.event_type == "permission_response"] == ["auto-deny"]


def test_session_answers_unknown_requests_with_an_error_while_stdin_is_open(make_phase_ctx, tmp_path):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=spec(policy="manual"))
    line = b'{"type":"control_request","request_id":"x1","request":{"subtype":"mcp_message"}}\n'
    dialog = b'{"type":"control_request","request_id":"x2","request":{"subtype":"request_user_dialog"}}\n'
    sent, closed = asyncio.run(_replay(line + dialog, FakeResponder(ctx.interaction), ctx, tmp_path / "c.jsonl"))
    assert sent[1] == {"type": "control_response", "response": {
        "subtype": "error", "request_id": "x1", "error": "GripProbe's session does not handle mcp_message"}}
    assert len(sent) == 2 and not closed  # no answer to an undeclared dialog; no result: stdin left to the runner


def test_session_marks_a_manual_policys_answers_manual(make_phase_ctx, tmp_path):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=spec(policy="manual"))
    stdout = (SESSION / "auto_deny_save_file" / "stdout.txt").read_bytes()
    asyncio.run(_replay(stdout, FakeResponder(ctx.interaction), ctx, tmp_path / "c.jsonl"))
    (decision,) = read_conversation((tmp_path / "c.jsonl").read_bytes()).decisions.values()
    assert decision[0].decided_by == "manual"


def test_session_fails_when_no_answer_can_be_had(make_phase_ctx, tmp_path):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=spec(policy="manual"))
    stdout = (SESSION / "auto_deny_save_file" / "stdout.txt").read_bytes()
    with pytest.raises(SessionError, match="the operator went away"):
        asyncio.run(_replay(stdout, FakeResponder(ctx.interaction, fail=True), ctx, tmp_path / "c.jsonl"))


# ------------------------------------------------------------------------------------------- the driver

@pytest.mark.parametrize("policy, how", [(None, "native"), ("auto-approve", "native"), ("auto-deny", "session"),
                                         ("scripted", "session"), ("manual", "session")])
def test_interaction_support_and_command_follow_the_policy(agent_driver, make_phase_ctx, policy, how):
    ctx = make_phase_ctx(prompt="-x is the prompt")
    ctx = dataclasses.replace(ctx, interaction=spec(policy=policy) if policy else None)
    support = agent_driver.interaction_support(ctx)
    assert (support.how, support.applied, support.reason) == (how, True, None)
    command = agent_driver.command(ctx)
    assert uses_session(ctx) == (how == "session")
    if how == "session":
        assert command.argv == session_argv(str(ctx.agent_executable), "perfect")
        assert ctx.prompt not in command.argv and command.stdin is None
        assert isinstance(command.session, ClaudeControlSession) and command.session.prompt == ctx.prompt
    else:
        assert command.session is None and command.argv[-1] == ctx.prompt and "dontAsk" in command.argv


def test_session_options_ask_for_every_tool_and_answer_on_stdio():
    opts = list(SESSION_OPTIONS)
    assert opts[opts.index("--input-format") + 1] == "stream-json"
    assert opts[opts.index("--output-format") + 1] == "stream-json" and "--verbose" in opts
    assert opts[opts.index("--permission-prompt-tool") + 1] == "stdio"
    assert opts[opts.index("--permission-mode") + 1] == "default"
    assert json.loads(opts[opts.index("--settings") + 1]) == SESSION_SETTINGS
    assert {"Bash", "Write", "Edit", "Read", "Glob", "Grep", "WebFetch", "WebSearch", "Agent", "Task",
            "NotebookEdit", "ToolSearch", "Skill", "AskUserQuestion"} <= set(ASK_TOOLS)
    assert "--strict-mcp-config" in opts and "bypassPermissions" not in opts and "dontAsk" not in opts

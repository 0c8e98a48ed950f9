"""Interaction policies (docs/interaction.md): the rule table, what can be set up front, the denials that must
hold, the evaluator's rows for them, reasoning on every wire, and the reference agent answered end to end."""

from __future__ import annotations

import itertools
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, SPECS, gripprobe
from gripprobe_core.evaluator import EvaluationInputs, classify, event_evaluator
from gripprobe_core.interaction import (
    PermissionOption, PermissionRequest, ToolRef, decide, denies_anything, static_policy,
)
from gripprobe_core.models.events import Event
from gripprobe_core.models.results import ProcessResult, TelemetrySummary, ValidatorResult
from gripprobe_core.models.specs import TOOL_KINDS, InteractionSpec
from gripprobe_core.telemetry.permissions import violations

ACP_OPTIONS = (PermissionOption("yes", "Yes", "allow_once"), PermissionOption("all", "Always", "allow_always"),
               PermissionOption("no", "No", "reject_once"))


def spec(**kw: Any) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def call(kind: str | None = "execute", raw: str = "shell", name: str | None = "shell", input: Any = None,
         options: tuple = ACP_OPTIONS, cid: str = "c1") -> PermissionRequest:
    return PermissionRequest("r1", cid, raw_name=raw, name=name, kind=kind, input=input, options=options)


# ------------------------------------------------------------------------------------------ the rule table

def test_auto_policies_and_none() -> None:
    assert decide(None, call()).outcome == "allow"
    assert decide(spec(policy="auto-approve"), call()) .option_id == "yes"
    denied = decide(spec(policy="auto-deny"), call())
    assert (denied.outcome, denied.option_id, denied.rule) == ("deny", "no", "auto-deny")
    assert decide(spec(policy="auto-deny"), call(options=())).option_id is None  # nothing offered: nothing picked


def test_scripted_first_match_wins_else_the_default() -> None:
    policy = spec(policy="scripted", default="deny", rules=[
        {"input_regex": "rm -rf", "decision": "deny"},
        {"tool_kind": "execute", "decision": "allow"},
        {"raw_name": "Write", "option": "allow_always"},
        {"name": "read", "option": "No"},
        {"prompt_regex": "continue\\?", "answer": "yes"}])
    assert decide(policy, call(input={"command": "rm -rf /"})).rule == "rule 1 (input_regex: rm -rf)"
    assert decide(policy, call(input={"command": "ls"})).outcome == "allow"
    chosen = decide(policy, call(kind="write", raw="Write", name="write"))
    assert (chosen.outcome, chosen.option_id) == ("allow", "all")
    assert decide(policy, call(kind="read", raw="Read", name="read")).outcome == "deny"  # option by name, a reject
    assert decide(policy, call(kind="fetch", raw="WebFetch", name="fetch")).rule == "default"
    question = PermissionRequest("q", prompt="Shall I continue?")
    assert (decide(policy, question).outcome, decide(policy, question).answer) == ("answer", "yes")
    assert decide(policy, PermissionRequest("q2", prompt="Which file?")).outcome == "deny"  # no answer rule: refused


def test_an_option_the_agent_does_not_offer_falls_to_the_default() -> None:
    policy = spec(policy="scripted", default="deny", rules=[{"tool_kind": "execute", "option": "reject_always"}])
    got = decide(policy, call())
    assert got.outcome == "deny" and got.option_id == "no" and "not offered" in got.rule


@settings(max_examples=300, deadline=None)
@given(policy=st.sampled_from(["auto-approve", "auto-deny"]),
       kind=st.sampled_from([*TOOL_KINDS, None]), raw=st.text(max_size=20),
       options=st.lists(st.sampled_from(ACP_OPTIONS), unique=True, max_size=3))
def test_auto_policies_answer_every_call_alike(policy: str, kind: str | None, raw: str, options: list) -> None:
    got = decide(spec(policy=policy), call(kind=kind, raw=raw, options=tuple(options)))
    assert got.outcome == ("allow" if policy == "auto-approve" else "deny")
    offered = {o.option_id: o.kind for o in options}
    if got.option_id is not None:  # a picked option is one offered, of the decision's side
        assert offered[got.option_id].startswith("allow" if got.outcome == "allow" else "reject")


RULE = st.fixed_dictionaries({}, optional={
    "tool_kind": st.sampled_from(TOOL_KINDS), "raw_name": st.sampled_from(["Bash", "Write", "shell"]),
    "input_regex": st.sampled_from(["rm", "sudo", "x+"])}).map(
    lambda d: {**d, "decision": "deny"} if len(d) % 2 else {**d, "decision": "allow"})


@settings(max_examples=300, deadline=None)
@given(rules=st.lists(RULE, max_size=5), default=st.sampled_from(["allow", "deny"]),
       kind=st.sampled_from(TOOL_KINDS), raw=st.sampled_from(["Bash", "Write", "shell", "Read"]),
       command=st.sampled_from(["ls", "rm x", "sudo y"]))
def test_scripted_is_the_first_matching_rule(rules: list, default: str, kind: str, raw: str, command: str) -> None:
    policy = spec(policy="scripted", default=default, rules=rules)
    req = call(kind=kind, raw=raw, input={"command": command})
    expected = default
    for r in rules:
        if r.get("tool_kind", kind) == kind and r.get("raw_name", raw) == raw and \
                (("input_regex" not in r) or __import__("re").search(r["input_regex"], json.dumps(req.input))):
            expected = r["decision"]
            break
    assert decide(policy, req).outcome == expected
    # a policy that can deny nothing is approvals-off: every call allowed
    if not denies_anything(policy):
        assert decide(policy, req).outcome == "allow"


def test_static_policy_decides_per_tool_or_says_why_not() -> None:
    tools = [ToolRef("Bash", "shell", "execute"), ToolRef("Write", "write", "write"), ToolRef("Read", "read", "read")]
    got = static_policy(spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]), tools)
    assert got.unapplied is None and got.denied() == ["Bash"] and got.allowed() == ["Read", "Write"]
    assert static_policy(spec(policy="auto-deny"), tools).denied() == ["Bash", "Read", "Write"]
    assert static_policy(None, tools).denied() == []
    regex = static_policy(spec(policy="scripted", rules=[{"tool_kind": "execute", "input_regex": "rm",
                                                           "decision": "deny"}]), tools)
    assert regex.unapplied and "input" in regex.unapplied
    assert static_policy(spec(policy="manual"), tools).unapplied


def test_spec_errors_name_the_line(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    for d in ("tests", "suites", "models", "cli_agents"):
        (root / d).mkdir(parents=True)
    (root / "tests" / "t.yaml").write_text(
        "id: t\ntitle: t\nprompt: p\nvalidators: [{kind: file_exists, path: x}]\nreference: [{shell: 'true'}]\n"
        "observe:\n  interaction:\n    policy: scripted\n    rules:\n      - {tool_kind: execute}\n"
        "      - {input_regex: '(oops', decision: deny}\n      - {tool_kind: run, decision: deny}\n")
    (root / "tests" / "u.yaml").write_text(
        "id: u\ntitle: u\nprompt: p\nvalidators: [{kind: file_exists, path: x}]\nreference: [{shell: 'true'}]\n"
        "observe: {interaction: {policy: auto-deny, rules: [{decision: deny}]}}\n")
    res = gripprobe("validate", "--specs", str(root))
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert any("tests/t.yaml:10: " in l and "exactly one of decision" in l for l in lines), lines
    assert any("tests/t.yaml:11: " in l and "not a regular expression" in l for l in lines), lines
    assert any("tests/t.yaml:12: " in l and "tool_kind" in l for l in lines), lines
    assert any("tests/u.yaml:6: " in l and "policy: scripted only" in l for l in lines), lines
    assert "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------- denials that must hold

def ev(n: int, typ: str, tier: str = "B", cid: str | None = "c1", status: str = "success", **payload: Any) -> Event:
    return Event(event_type=typ, event_id=f"e{n}", sequence=n, source_tier=tier, source="agent_output",
                 tool_call_id=cid, status=status, payload=payload)


DENY_SHELL = spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}])


def test_a_denied_call_reported_done_is_a_violation(tmp_path: Path) -> None:
    answered = [ev(1, "permission_request"), ev(2, "permission_response", outcome="deny"),
                ev(3, "tool_call_start", status="started", raw_name="shell", kind="execute",
                   arguments={"command": "ls"})]
    assert violations(DENY_SHELL, answered + [ev(4, "tool_call_result", status="error")]) == []
    assert violations(DENY_SHELL, answered + [ev(4, "tool_call_result")]) == ["denied_call_ran: c1"]
    # tier A's result after a refusal is an ordinary tool result: not evidence that it ran
    assert violations(DENY_SHELL, answered + [ev(4, "tool_call_result", tier="A")]) == []
    # no request at all (a native policy): the policy itself says what was denied
    ran = [ev(1, "tool_call_start", cid="c9", status="started", raw_name="shell", kind="execute"),
           ev(2, "tool_call_result", cid="c9", raw_name="shell", kind="execute")]
    assert violations(DENY_SHELL, ran) == ["denied_call_ran: c9"]
    assert violations(None, ran) == [] and violations(spec(policy="auto-approve"), ran) == []


def test_a_denied_write_that_landed_is_a_violation(tmp_path: Path) -> None:
    deny_write = spec(policy="auto-deny")
    start = ev(3, "tool_call_start", tier="A", status="started", raw_name="write", kind="write",
               arguments={"path": "/ws/greeting.txt", "content": "Hello\n"})
    events = [ev(1, "permission_request"), ev(2, "permission_response", outcome="deny"), start,
              ev(4, "tool_call_result", status="error")]
    (tmp_path / "greeting.txt").write_text("Hello\n")
    assert violations(deny_write, events, tmp_path, "/ws") == ["denied_change_landed: greeting.txt"]
    (tmp_path / "greeting.txt").write_text("other\n")
    assert violations(deny_write, events, tmp_path, "/ws") == []
    (tmp_path / "greeting.txt").unlink()
    (tmp_path / "greeting.txt").symlink_to("/etc/hostname")  # never followed
    assert violations(deny_write, events, tmp_path, "/ws") == []


EMPTY = TelemetrySummary(event_capture_status="collected", tool_event_verdict="confirmed_tool_use",
                         tool_event_verdict_reason="none")


def judged(record: dict | None, validators_pass: bool = True) -> Any:
    return event_evaluator(EvaluationInputs(
        validators=[ValidatorResult(kind="file_equals", passed=validators_pass)], process=ProcessResult(status="ok"),
        events=[], summary=EMPTY, interaction=record))


def test_the_evaluator_rows() -> None:
    assert judged(None).status == "PASS"
    base = {"policy": "scripted", "how": "session", "applied": True, "denies": True, "violations": []}
    assert judged(base).status == "PASS"
    not_applied = judged({**base, "applied": False, "how": "none"})
    assert (not_applied.status, not_applied.evaluator_reason_code) == ("TOOL_UNSUPPORTED", "interaction_not_applied")
    # a policy that denies nothing needs nothing applied
    assert judged({**base, "applied": False, "denies": False}).status == "PASS"
    ran = judged({**base, "violations": ["denied_call_ran: c1"]})
    assert (ran.status, ran.evaluator_reason_code, ran.failure_reason) == ("FAIL", "denied_call_ran",
                                                                           "denied_call_ran")
    landed = judged({**base, "violations": ["denied_change_landed: a.txt"]}, validators_pass=False)
    assert (landed.status, landed.failure_reason) == ("FAIL", "denied_change_landed")


PROCESSES = ["ok", "nonzero_exit", "timeout", "shell_error", "harness_capture_failed"]
VERDICTS = [("confirmed_tool_use", "none"), ("no_tool_event_observed", "structured_event_absent"),
            ("tool_event_inconclusive", "source_parse_inconclusive")]


def test_no_pass_without_the_policy_in_force_or_with_a_denial_broken() -> None:
    for vp, process, (verdict, reason), unapplied, violated in itertools.product(
            [True, False], PROCESSES, VERDICTS, [True, False], [None, "denied_call_ran", "denied_change_landed"]):
        status, code = classify(vp, process, verdict, reason, interaction_not_applied=unapplied,
                                denial_violated=violated)
        if unapplied or violated:
            assert status not in ("PASS", "PASS_WITH_POLICY_VIOLATION"), (vp, process, verdict, unapplied, violated)
        if process == "ok" and unapplied:
            assert (status, code) == ("TOOL_UNSUPPORTED", "interaction_not_applied")
        if process == "ok" and violated and not unapplied:
            assert (status, code) == ("FAIL", violated)


# -------------------------------------------------------------------------------- reasoning on every wire

def test_reasoning_reaches_tier_a_on_every_wire() -> None:
    from gripprobe_core.oracle.anthropic_api import message_events, message_json
    from gripprobe_core.oracle.chat_api import chat_completion_json, chat_stream_chunks
    from gripprobe_core.oracle.conversation import ChatRequest, ToolCall, Turn
    from gripprobe_core.oracle.ollama_api import OllamaChatWire
    from gripprobe_core.oracle.responses_api import output_items, response_events
    from gripprobe_core.oracle.wire import ReplyMeta
    from gripprobe_core.proxy.protocols import ReplyAssembler

    turn = Turn(text="ok", tool_call=ToolCall.of("shell", {"command": "ls"}), reasoning="Let me think: ls first.")
    meta = ReplyMeta(n=1, request=ChatRequest(model="m", messages=[], tools=[]), call_id="call_1",
                     usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, created=0)
    bodies = {
        "chat json": [chat_completion_json(turn, response_id="r", model="m", tool_call_id="call_1", usage={})],
        "chat stream": chat_stream_chunks(turn, response_id="r", model="m", tool_call_id="call_1", usage=None),
        "responses json": [{"object": "response", "id": "r", "output": output_items(turn, meta)}],
        "responses stream": response_events(turn, meta),
        "anthropic json": [message_json(turn, meta)],
        "anthropic stream": message_events(turn, meta),
        "ollama json": [OllamaChatWire().reply_json(turn, meta)],
        "ollama stream": [json.loads(line) for line in OllamaChatWire().reply_frames(turn, meta)],
    }
    for name, objects in bodies.items():
        asm = ReplyAssembler()
        for obj in objects:
            asm.on_object(obj, obj.get("type") if isinstance(obj.get("type"), str) else None)
        assert asm.reasoning == turn.reasoning, name
        assert asm.text == "ok" and [c.name for c in asm.calls] == ["shell"], name


# ---------------------------------------------------------------------------------- end to end, reference

@pytest.fixture(scope="module")
def interaction_run(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("interaction")
    res = gripprobe("run", "-a", "reference", "-m", "oracle-deny-then-recover", "-t", "tag:interaction",
                     "--results", str(results))
    assert res.returncode == 0, res.stderr
    return next((results / "runs").iterdir())


def test_the_interaction_tests_with_the_reference_agent(interaction_run: Path, tmp_path: Path) -> None:
    run = tmp_path / interaction_run.name
    shutil.copytree(interaction_run, run)
    cases = {p.name.rsplit("__", 1)[-1]: p for p in (run / "cases").iterdir()}
    for test_id, (allowed, denied) in {"shell_denied": (1, 1), "save_file_denied": (0, 2)}.items():
        case = json.loads((cases[test_id] / "case.json").read_text())
        assert case["verdict"]["status"] == "PASS", (test_id, case["verdict"])
        got = case["interaction"]
        assert (got["how"], got["applied"], got["allowed"], got["denied"], got["violations"]) == \
            ("session", True, allowed, denied, []), got
        events = [json.loads(l) for l in (cases[test_id] / "artifacts" / "events.measured.jsonl").read_text().splitlines()]
        requests = [e for e in events if e["event_type"] == "permission_request"]
        answers = [e for e in events if e["event_type"] == "permission_response"]
        assert len(requests) == len(answers) == allowed + denied
        assert all(e["raw_artifact_ref"] == "measured.conversation.jsonl" for e in requests + answers)
        assert [a["payload"]["outcome"] for a in answers].count("deny") == denied
        thoughts = [e for e in events if e["event_type"] == "thought"]  # the wire's and the agent's: one each
        assert thoughts and all(t["source_tier"] == "A" and t["seen_by"] == ["A", "B"] for t in thoughts), thoughts
        # the first call asked for was the shell, and it was refused
        assert requests[0]["payload"]["kind"] == "execute" and answers[0]["payload"]["outcome"] == "deny"
        # and the recomputed case agrees (the policy and how it was met are in the stored evidence)
    res = gripprobe("rebuild-reports", str(run), "--recompute")
    assert res.returncode == 0, res.stderr
    case = json.loads((cases["shell_denied"] / "case.json").read_text())
    assert case["verdict"]["status"] == "PASS" and case["interaction"]["denied"] == 1


def test_without_a_policy_nothing_asks(tmp_path: Path) -> None:
    res = gripprobe("run", "-a", "reference", "-m", "oracle-deny-then-recover", "-t", "save_file",
                    "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    case_dir = next((next((tmp_path / "runs").iterdir()) / "cases").iterdir())
    case = json.loads((case_dir / "case.json").read_text())
    assert case["verdict"]["status"] == "PASS" and case["interaction"] is None
    events = (case_dir / "artifacts" / "events.measured.jsonl").read_text()
    assert "permission_request" not in events and not (case_dir / "artifacts" / "measured.conversation.jsonl").exists()


def _policy_specs(tmp_path: Path, policy: str) -> Path:
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    text = (root / "tests" / "save_file.yaml").read_text()
    (root / "tests" / "save_file.yaml").write_text(text + f"observe:\n  interaction:\n    policy: {policy}\n")
    return root


def test_manual_without_a_terminal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    root = _policy_specs(tmp_path, "manual")
    res = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--specs", str(root),
                    "--results", str(tmp_path / "r"), env={"CI": "true"})
    assert res.returncode == 2 and "manual" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal of Linux")
def test_manual_asks_the_operator_on_the_terminal_and_leaves_the_case_out_of_scores(tmp_path: Path) -> None:
    root = _policy_specs(tmp_path, "manual")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k not in ("CI", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT / "src")
    pid, fd = pty.fork()
    if pid == 0:  # the child: gripprobe on a terminal of its own
        os.execve(sys.executable, [sys.executable, "-m", "gripprobe_core.cli", "run", "-a", "reference", "-m",
                                   "oracle-perfect", "-t", "save_file", "--specs", str(root), "--results",
                                   str(tmp_path / "r")], env)
    seen, answered, deadline = b"", 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        if seen.count(b"Allow? [y]es / [n]o") > answered:
            answered += 1
            os.write(fd, b"n\n")
    _, status = os.waitpid(pid, 0)
    assert answered == 2, seen.decode(errors="replace")[-2000:]  # warmup and measured each ask once
    assert b"wants to run" not in seen and b"The agent asks to run write" in seen
    case_dir = next((next((tmp_path / "r" / "runs").iterdir()) / "cases").iterdir())
    case = json.loads((case_dir / "case.json").read_text())
    got = case["interaction"]
    assert (got["policy"], got["excluded_from_scores"], got["denied"]) == ("manual", True, 1)
    assert not (case_dir / "workspace" / "greeting.txt").exists()
    summary = (case_dir.parents[1] / "reports" / "summary.md").read_text()
    assert "left out of scores: 1 case(s) answered by an operator" in summary
    assert "over n = 0 attempted cases" in summary


def test_the_exports_carry_permissions_and_reasoning(interaction_run: Path, tmp_path: Path) -> None:
    from atif_schema import AtifTrajectory
    from test_export import Receiver

    run = tmp_path / interaction_run.name
    shutil.copytree(interaction_run, run)
    res = gripprobe("export", str(run), "--format", "atif")
    assert res.returncode == 0, res.stderr
    shell = AtifTrajectory.model_validate_json(next((run / "exports" / "atif").glob("*shell_denied.json")).read_text())
    agent = [s for s in shell.steps if s.source == "agent"]
    assert [s.reasoning_content for s in agent][:2] == ["A single shell command is the quickest way to do this.",
                                                        "The shell command was refused, so I will use the file tools instead."]
    asked = [c["permissions"] for s in agent for c in (s.extra or {}).get("tool_calls", [])]
    assert [[(p["outcome"], p["rule"]) for p in x] for x in asked] == [[("deny", "rule 1 (tool_kind: execute)")],
                                                                       [("allow", "default")]]
    receiver = Receiver()
    try:
        res = gripprobe("export", str(run), "--format", "otlp", "--otlp-endpoint", receiver.url, "--include-content")
        assert res.returncode == 0, res.stderr
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        tools, chats = [], []
        for _, body in receiver.requests:
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            for span in (s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans):
                attrs = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}
                if span.name.startswith("execute_tool"):
                    tools.append((attrs, [e.name for e in span.events]))
                elif span.name.startswith("chat"):
                    chats.append(attrs)
    finally:
        receiver.close()
    outcomes = sorted(a.get("gripprobe.permission.outcome") for a, _ in tools)
    assert outcomes == ["allow", "deny", "deny", "deny"], outcomes  # shell_denied: deny, allow; save_file_denied: 2 deny
    assert all(events == ["gripprobe.permission"] for _, events in tools)
    assert sum('"type": "reasoning"' in a.get("gen_ai.output.messages", "") for a in chats) == 6

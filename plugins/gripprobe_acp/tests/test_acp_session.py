"""The session on its own: :class:`AcpSession` over a real agent's pipes (Claude Code through its adapter, the
fastest to start) against the real oracle, with no ``gripprobe run`` around it — and against processes that
break the protocol. Plus the pure parts: the answer sent for a decision, the transcript's redaction."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from acp.schema import AllowedOutcome, DeniedOutcome

from gripprobe_acp.session import AcpSession, Recorder, _outcome
from gripprobe_core.plugin import (
    InteractionSpec, PermissionDecision, PermissionOption, PermissionRequest, SessionChannel, SessionError, TestSpec,
    decide,
)
from gripprobe_core.testing import load_yaml_file, oracle_server

from conftest import SPECS, for_driver

OPTIONS = (PermissionOption("allow-once", "Yes", "allow_once"), PermissionOption("always", "Always", "allow_always"),
           PermissionOption("reject", "No", "reject_once"))


# ------------------------------------------------------------------------------------------ pure parts

def test_the_option_the_policy_picked_goes_back():
    assert _outcome(PermissionDecision("allow", "auto-approve", "always"), OPTIONS) == AllowedOutcome(
        outcome="selected", option_id="always")


def test_a_decision_without_an_offered_option_picks_one_of_its_kind_else_cancels():
    assert _outcome(PermissionDecision("deny", "auto-deny", "gone"), OPTIONS).option_id == "reject"
    assert _outcome(PermissionDecision("allow", "default", None), OPTIONS).option_id == "allow-once"
    only_allow = OPTIONS[:2]
    assert _outcome(PermissionDecision("deny", "auto-deny", None), only_allow) == DeniedOutcome(outcome="cancelled")
    assert _outcome(PermissionDecision("answer", "rule 1", answer="yes"), OPTIONS) == DeniedOutcome(outcome="cancelled")


def test_the_transcript_never_holds_the_key():
    stream = io.BytesIO()
    recorder = Recorder(stream, 'sk-"quoted"-key')
    recorder.write({"dir": "outgoing", "message": {"params": {"text": 'the key is sk-"quoted"-key'}}})
    recorder.note("error", error='sk-"quoted"-key')
    text = stream.getvalue().decode()
    assert "quoted" not in text and text.count("[REDACTED]") == 2
    assert [json.loads(line)["seq"] for line in text.splitlines()] == [1, 2]


# --------------------------------------------------------------------------------- a real agent's pipes

class Responder:
    """The case's policy, as the runner's responder answers it, remembering every request."""

    def __init__(self, spec: InteractionSpec | None) -> None:
        self.spec, self.requests = spec, []

    async def decide(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        return decide(self.spec, request)


async def converse(argv: list[str], env: dict[str, str], ctx: Any, session: AcpSession,
                   responder: Responder, transcript: Path, timeout: float = 90,
                   linger: float = 0) -> tuple[BaseException | None, int | None]:
    """Start ``argv`` with pipes, run ``session`` over them as the runner does; then (after ``linger`` seconds)
    close stdin and stop it."""
    proc = await asyncio.create_subprocess_exec(*argv, cwd=ctx.workspace, env=env, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                limit=64 << 20, start_new_session=True)
    error: BaseException | None = None
    try:
        await asyncio.wait_for(session.run(SessionChannel(proc.stdout, proc.stdin, responder, transcript, ctx)), timeout)
        await asyncio.sleep(linger)
    except SessionError as exc:
        error = exc
    finally:
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 3)
        except asyncio.TimeoutError:
            os.killpg(proc.pid, 9)
            await proc.wait()
    return error, proc.returncode


def base_env(ctx: Any) -> dict[str, str]:
    return {"HOME": str(ctx.home), "TMPDIR": str(ctx.tmpdir), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8", **ctx.xdg}


def save_file() -> TestSpec:
    return TestSpec.model_validate(load_yaml_file(SPECS / "tests" / "save_file.yaml")[0])


@pytest.mark.e2e
class TestAgainstClaude:
    pytestmark = for_driver("acp-claude")

    def test_a_scripted_denial_of_writes_reaches_claude_and_the_file_is_not_written(
            self, agent_install, agent_driver, make_phase_ctx, gripprobe_plugins, tmp_path):
        test = save_file()
        spec = InteractionSpec.model_validate({"policy": "scripted", "rules": [{"tool_kind": "write", "decision": "deny"}]})
        responder = Responder(spec)
        transcript = tmp_path / "conversation.jsonl"

        async def go():
            async with oracle_server(test.reference, plugins=gripprobe_plugins, profile="perfect") as oracle:
                ctx = make_phase_ctx(test=test, base_url=oracle.base_url, executable=agent_install.executable,
                                     api_key="sk-acp-session-canary")
                env = {**base_env(ctx), **agent_driver.environment(ctx)}
                got = await converse(agent_driver.command(ctx).argv, env, ctx, agent_driver.command(ctx).session,
                                     responder, transcript)
                return got, ctx, list(oracle.ground_truth)

        (error, _rc), ctx, truth = asyncio.run(go())
        assert error is None
        (request,) = responder.requests
        assert (request.tool_call_id, request.raw_name, request.name, request.kind) == (
            truth[0]["tool_call_id"], "Write", "write", "write")
        # the adapter asks with the path it resolved in the workspace (its updates said "greeting.txt")
        assert request.input == {"file_path": str(ctx.workspace / "greeting.txt"),
                                 "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}
        assert {o.kind for o in request.options} == {"allow_once", "allow_always", "reject_once"}
        assert not (ctx.workspace / "greeting.txt").exists()
        records = [json.loads(line) for line in transcript.read_text().splitlines()]
        init = records[0]["message"]
        assert (records[0]["dir"], init["method"]) == ("outgoing", "initialize")
        assert "clientCapabilities" not in init["params"]  # no fs, no terminal
        assert [r["message"]["method"] for r in records if r["dir"] == "outgoing" and "method" in r["message"]] == [
            "initialize", "session/new", "session/set_mode", "session/prompt"]
        (note,) = [r for r in records if r.get("event") == "permission"]
        assert note["decision"]["outcome"] == "deny" and note["decision"]["rule"] == "rule 1 (tool_kind: write)"
        assert note["sent"] == {"outcome": "selected", "optionId": "reject"}
        # the prompt's answer, found by its id: the adapter may still send an update after it (usage, commands)
        (prompt_id,) = [r["message"]["id"] for r in records
                        if r["dir"] == "outgoing" and r["message"].get("method") == "session/prompt"]
        (answer,) = [r["message"] for r in records if r["dir"] == "incoming" and r["message"].get("id") == prompt_id
                     and "method" not in r["message"]]
        assert answer["result"]["stopReason"] == "end_turn"
        assert "sk-acp-session-canary" not in transcript.read_text()

    def test_a_mode_the_agent_does_not_offer_is_a_session_error(self, agent_install, agent_driver, make_phase_ctx,
                                                                 tmp_path):
        ctx = make_phase_ctx(executable=agent_install.executable)
        env = {**base_env(ctx), **agent_driver.environment(ctx)}
        error, _ = asyncio.run(converse(agent_driver.command(ctx).argv, env, ctx, AcpSession(mode="no-such-mode"),
                                        Responder(None), tmp_path / "t.jsonl"))
        assert isinstance(error, SessionError)
        assert "no session mode 'no-such-mode'" in str(error) and "default" in str(error)


# ----------------------------------------------------------------------- processes that break the protocol

@for_driver("acp")  # make_phase_ctx is about the generic driver
@pytest.mark.parametrize("script, said", [
    ("exit 3", "closed the connection before answering initialize"),
    ('read line; echo \'{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"not today"}}\'; sleep 5',
     "initialize failed: not today (JSON-RPC error -32000)"),
    ("echo 'this is not JSON'; echo '[1,2]'; exit 0", "closed the connection before answering initialize"),
])
def test_an_agent_that_breaks_the_protocol_is_a_session_error(script, said, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(installed=False)
    transcript = tmp_path / "t.jsonl"
    error, _ = asyncio.run(converse(["/bin/sh", "-c", script], base_env(ctx), ctx, AcpSession(), Responder(None),
                                    transcript, timeout=20))
    assert isinstance(error, SessionError) and said in str(error)
    errors = [json.loads(line) for line in transcript.read_text().splitlines() if '"event": "error"' in line]
    assert [e["stage"] for e in errors] == ["initialize"]



# -------------------------------------------------------------------- nothing phones home (real agents)

@pytest.mark.e2e
@pytest.mark.parametrize("agent_name", ["acp-qwen", "acp-opencode", "acp-claude", "acp-codex"], scope="session")
def test_a_real_session_connects_to_nothing_but_the_phase_backend(agent_name, agent_install, agent_driver,
                                                                   make_phase_ctx, gripprobe_plugins, tmp_path):
    """Each real agent through its driver's environment and command and the session (unsandboxed, under strace, a
    whole save_file turn and 3 s after it): every TCP connection goes to 127.0.0.1 (the oracle's port, and opencode's
    own internal server), none is a DNS lookup, and the file is written."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is needed to watch the agents' connections", pytrace=False)
        pytest.skip("strace is not installed")
    test = save_file()
    trace = tmp_path / "strace.txt"

    async def go():
        async with oracle_server(test.reference, plugins=gripprobe_plugins, profile="perfect") as oracle:
            ctx = make_phase_ctx(test=test, base_url=oracle.base_url, executable=agent_install.executable)
            env = {**base_env(ctx), **agent_driver.environment(ctx)}
            command = agent_driver.command(ctx)
            argv = [strace, "-f", "-qq", "-e", "trace=connect,sendto,sendmmsg", "-o", str(trace), *command.argv]
            error, _ = await converse(argv, env, ctx, command.session, Responder(None), tmp_path / "t.jsonl",
                                      linger=3)
            return error, ctx, oracle.base_url.rsplit(":", 1)[1].strip("/")

    error, ctx, port = asyncio.run(go())
    assert error is None and (ctx.workspace / "greeting.txt").exists()
    lines = trace.read_text().splitlines()
    inet = [line for line in lines if re.search(r"sa_family=AF_INET6?\b", line)]
    assert any(f"sin_port=htons({port})" in line for line in inet), inet
    assert all('inet_addr("127.0.0.1")' in line for line in inet), inet
    assert not [line for line in lines if "htons(53)" in line]


ANSWERS = ("read l; echo '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}'; "
           "read l; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":\"s1\"}}'; "
           "read l; echo '{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32603,\"message\":\"Internal error\","
           "\"data\":{\"details\":\"%s\"}}}'; sleep 5")


@for_driver("acp")
@pytest.mark.parametrize("details, said", [
    ("400 registry.ollama.ai/library/m does not support tools", None),  # the backend's answer: no SessionError
    ("API Error: 500 internal server error", "session/prompt failed: Internal error: API Error: 500 internal server "
                                             "error (JSON-RPC error -32603)"),
])
def test_a_prompt_refused_is_a_session_error_unless_the_backend_takes_no_tools(details, said, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(installed=False)
    transcript = tmp_path / "t.jsonl"
    error, _ = asyncio.run(converse(["/bin/sh", "-c", ANSWERS % details], base_env(ctx), ctx, AcpSession(),
                                    Responder(None), transcript, timeout=20))
    assert (str(error) if error else None) == said
    (note,) = [json.loads(line) for line in transcript.read_text().splitlines() if '"event": "error"' in line]
    assert note["stage"] == "session/prompt" and note["data"] == {"details": details}

"""The reference agent as a real subprocess against the real oracle, and its in-tree plugin's parser."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gripprobe_core.defaults import refagent as plugin
from gripprobe_core.phase import PhaseContext, PhaseCapture
from gripprobe_core.errors import WrapperParseError
from gripprobe_core.models.results import ProcessResult
from gripprobe_core.models.specs import BackendSpec, CliAgentSpec, ModelSpec, ReferenceAction, TestSpec
from gripprobe_core.oracle import OracleServer, Reply, ToolCall, Turn, builtin_profiles

AGENT = [sys.executable, "-m", "gripprobe_core.refagent"]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def actions(*raw: Any) -> list[ReferenceAction]:
    return TypeAdapter(list[ReferenceAction]).validate_python(list(raw))


PLAN = actions(
    {"write": {"path": "notes/hello.txt", "content": "hello world\n"}},
    {"shell": "printf ran > ran.txt && cat notes/hello.txt"},
    {"edit": {"path": "notes/hello.txt", "old": "world", "new": "there"}},
)


def agent_env(**extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


async def run_agent(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
                    ) -> tuple[int, list[dict[str, Any]], bytes, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env or agent_env(), cwd=cwd)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    events = [json.loads(line) for line in out.decode().splitlines()]
    assert proc.returncode is not None
    return proc.returncode, events, out, err.decode()


def agent_argv(oracle: OracleServer, workspace: Path, *extra: str, model: str = "perfect") -> list[str]:
    return [*AGENT, "--base-url", oracle.base_url + "/v1", "--model", model, "--workspace", str(workspace),
            "--prompt", "Create notes/hello.txt, run a command, then edit the file.", *extra]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


# ------------------------------------------------------------------------------ agent × oracle

@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_perfect_oracle_drives_the_agent(tmp_path: Path, stream: bool) -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle:
            extra = [] if stream else ["--no-stream"]
            code, events, out, err = await run_agent(agent_argv(oracle, tmp_path, *extra),
                                                     env=agent_env(OPENAI_API_KEY="sk-test"))
        assert code == 0, err
        assert (tmp_path / "notes/hello.txt").read_text() == "hello there\n"
        assert (tmp_path / "ran.txt").read_text() == "ran"
        assert [e["type"] for e in events] == [
            "session.start", *["model.response", "tool.start", "tool.result"] * 3, "model.response", "final"]
        assert all(TS.match(e["ts"]) for e in events)
        assert events[0]["model"] == "perfect" and events[0]["workspace"] == str(tmp_path.resolve())
        starts = of_type(events, "tool.start")
        assert [(s["call_id"], s["name"], s["arguments"]) for s in starts] == [
            (g["tool_call_id"], g["name"], g["arguments"]) for g in oracle.ground_truth]
        results = of_type(events, "tool.result")
        assert [r["status"] for r in results] == ["success"] * 3
        assert results[1]["exit_code"] == 0 and "hello world" in results[1]["output"]
        assert "exit_code" not in results[0]
        responses = of_type(events, "model.response")
        assert [r["turn"] for r in responses] == [1, 2, 3, 4]
        assert all(r["usage"]["total_tokens"] > 0 for r in responses)
        assert responses[0]["finish_reason"] == "tool_calls" and responses[-1]["finish_reason"] == "stop"
        assert responses[0]["tool_calls"][0]["arguments"] == json.dumps(
            {"path": "notes/hello.txt", "content": "hello world\n"})
        assert of_type(events, "final")[0]["text"].startswith("Done.")
        assert [r["stream"] for r in oracle.request_log] == [stream] * 4
        assert all(r["authorized"] for r in oracle.request_log)
        assert "final answer" in err

    asyncio.run(main())


def test_lazy_oracle_gets_a_final_answer_without_tools(tmp_path: Path) -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle:
            code, events, _, _ = await run_agent(agent_argv(oracle, tmp_path, model="openai/lazy"))
        assert code == 0
        assert [e["type"] for e in events] == ["session.start", "model.response", "final"]
        assert oracle.ground_truth == [] and list(tmp_path.iterdir()) == []
        assert not oracle.request_log[0]["authorized"]  # no OPENAI_API_KEY in the environment

    asyncio.run(main())


def test_tool_errors_go_back_to_the_model(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "twice.txt").write_text("a a\n")
    plan = actions({"write": {"path": "../escape.txt", "content": "x"}}, {"shell": "echo oops; exit 3"},
                   {"edit": {"path": "twice.txt", "old": "a", "new": "b"}}, {"read": {"path": "missing.txt"}})

    async def main() -> None:
        async with OracleServer(plan) as oracle:
            code, events, _, _ = await run_agent(agent_argv(oracle, workspace))
        assert code == 0
        results = of_type(events, "tool.result")
        assert [r["status"] for r in results] == ["error"] * 4
        assert "outside the workspace" in results[0]["output"]
        assert results[1]["exit_code"] == 3 and "oops" in results[1]["output"]
        assert "ambiguous" in results[2]["output"] and "does not exist" in results[3]["output"]
        assert not (tmp_path / "escape.txt").exists()
        assert (workspace / "twice.txt").read_text() == "a a\n"

    asyncio.run(main())


def test_max_turns_exhausted_exits_3(tmp_path: Path) -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle:
            code, events, _, _ = await run_agent(agent_argv(oracle, tmp_path, "--max-turns", "2"))
        assert code == 3
        assert len(of_type(events, "model.response")) == 2
        assert events[-1]["type"] == "error" and events[-1]["kind"] == "max_turns"

    asyncio.run(main())


class Garbled:
    """First turn: one call with truncated JSON arguments and one call to a tool that does not exist."""

    name = "garbled"
    description = "sends malformed tool calls, then answers"

    def respond(self, ctx: Any) -> Reply:
        if ctx.request.tool_call_turns() == 0:
            return Reply(Turn(tool_call=ToolCall("shell", '{"command": "echo hi"')))
        if ctx.request.tool_call_turns() == 1:
            return Reply(Turn(tool_call=ToolCall("teleport", "{}")))
        return Reply(Turn(text="giving up"))


class Failing:
    name = "failing"
    description = "HTTP 500"

    def respond(self, ctx: Any) -> Reply:
        return Reply(http_status=500, error="boom")


def test_malformed_arguments_and_http_errors(tmp_path: Path) -> None:
    profiles = {**builtin_profiles(), "garbled": Garbled(), "failing": Failing()}

    async def main() -> None:
        async with OracleServer(PLAN, profiles=profiles) as oracle:
            code, events, _, _ = await run_agent(agent_argv(oracle, tmp_path, model="garbled"))
            assert code == 0
            starts, results = of_type(events, "tool.start"), of_type(events, "tool.result")
            assert starts[0]["arguments"] == '{"command": "echo hi"'  # raw string: not JSON
            assert results[0]["status"] == "error" and "not JSON" in results[0]["output"]
            assert results[1]["status"] == "error" and "unknown tool 'teleport'" in results[1]["output"]
            assert of_type(events, "final")[0]["text"] == "giving up"

            code, events, _, err = await run_agent(agent_argv(oracle, tmp_path, model="failing"))
            assert code == 1
            assert events[-1] == {**events[-1], "type": "error", "kind": "http", "http_status": 500}
            assert "boom" in events[-1]["message"] and "boom" in err

    asyncio.run(main())


def test_unreachable_backend_exits_1(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def main() -> None:
        code, events, _, _ = await run_agent([*AGENT, "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                                              "--workspace", str(tmp_path), "--prompt", "hi"])
        assert code == 1
        assert events[-1]["type"] == "error" and events[-1]["kind"] == "connection"

    asyncio.run(main())


@pytest.mark.parametrize("args, message", [
    (["--model", "m", "--prompt", "hi"], "--base-url"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m"], "--prompt"),
    (["--base-url", "127.0.0.1:9", "--model", "m", "--prompt", "hi"], "must start with http"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--prompt", "hi", "--max-turns", "0"], "at least 1"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--prompt-file", "/nonexistent/p"], "cannot read"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--prompt", "hi", "--workspace", "/nonexistent/w"],
     "not a directory"),
])
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    code, events, _, err = asyncio.run(run_agent([*AGENT, *args]))
    assert code == 2
    assert events == [{**events[0], "type": "error", "kind": "usage"}] and message in events[0]["message"]
    assert message in err


# ------------------------------------------------------------------------------------ the plugin

def phase_context(tmp_path: Path, base_url: str, prompt: str = "do it") -> PhaseContext:
    agent = CliAgentSpec(id="reference", plugin="reference", executable="gripprobe-refagent",
                         tool_kinds=["read", "write", "execute"])
    backend = BackendSpec(id="oracle", kind="oracle", model_id="perfect")
    test = TestSpec.model_validate({"id": "t", "title": "t", "prompt": prompt, "validators": [{"kind": "x"}],
                                    "reference": [{"shell": "true"}]})
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return PhaseContext(run_id="r", case_id="c", phase="measured", agent=agent,
                        model=ModelSpec(id="m", backends=[backend]), backend=backend, test=test, format="tool",
                        prompt=prompt, workspace=workspace, home=tmp_path, tmpdir=tmp_path,
                        artifacts_dir=tmp_path, base_url=base_url, model_name="oracle/perfect")


def test_plugin_command_runs_and_its_output_parses(tmp_path: Path) -> None:
    """The driver's environment + command really start the agent; its parse reads what it printed."""
    drivers: list[Any] = []
    plugin.register_agents(register=drivers.append)
    assert [(d.name, d.observability) for d in drivers] == [("reference", "structured")]
    driver = drivers[0]

    async def main() -> None:
        async with OracleServer(PLAN) as oracle:
            ctx = phase_context(tmp_path, oracle.base_url, "make the notes")
            assert driver.route(ctx.agent, ctx.backend).routable
            env = driver.environment(ctx)
            assert env == {"OPENAI_API_KEY": "oracle"}
            command = driver.command(ctx)
            assert command.argv[:3] == ["gripprobe-refagent", "--base-url", oracle.base_url + "/v1"]
            assert command.argv[-2:] == ["--prompt", "make the notes"]
            exe = Path(sys.executable).parent / command.argv[0]  # the runner looks next to Python first
            code, events, out, _ = await run_agent([str(exe), *command.argv[1:]], env=agent_env(**env))
        assert code == 0
        stdout = tmp_path / "measured.stdout"
        stdout.write_bytes(out + b"not json\n\x00\xff{\n")
        outputs = PhaseCapture(stdout_path=stdout, stderr_path=tmp_path / "none",
                               process=ProcessResult(status="ok", exit_code=0))
        transcript = driver.parse(ctx, outputs)
        parsed = transcript.events
        assert transcript.final_text is not None and transcript.final_text.startswith("Done.")
        assert [e.event_type for e in parsed] == [
            *["model_response", "tool_call_start", "tool_call_result"] * 3, "model_response"]
        assert [e.event_id for e in parsed] == [f"measured-B-{n}" for n in range(1, 11)]
        assert all(e.source_tier == "B" and e.source == "agent_output" for e in parsed)
        responses = {e.event_id: e for e in parsed if e.event_type == "model_response"}
        starts = [e for e in parsed if e.event_type == "tool_call_start"]
        assert [e.payload["kind"] for e in starts] == ["write", "execute", "write"]
        assert [e.payload["raw_name"] for e in starts] == ["write", "shell", "edit"]
        assert [e.tool_call_id for e in starts] == [g["tool_call_id"] for g in oracle.ground_truth]
        assert [e.payload["arguments"] for e in starts] == [g["arguments"] for g in oracle.ground_truth]
        for start in starts:
            assert start.parent_id in responses and responses[start.parent_id].response_id
        results = [e for e in parsed if e.event_type == "tool_call_result"]
        assert [e.status for e in results] == ["success"] * 3 and results[1].exit_code == 0
        assert [e.parent_id for e in results] == [e.parent_id for e in starts]
        lines = out.decode().splitlines()
        for event in parsed:
            assert event.raw_artifact_ref.startswith("measured.stdout:")
            line = json.loads(lines[int(event.raw_artifact_ref.split(":")[1]) - 1])
            assert line["ts"] == event.timestamp

    asyncio.run(main())


def test_the_driver_needs_its_stdout(tmp_path: Path) -> None:
    ctx = phase_context(tmp_path, "http://127.0.0.1:1")
    outputs = PhaseCapture(stdout_path=tmp_path / "missing.stdout", stderr_path=tmp_path / "x",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError, match="missing.stdout"):
        plugin.ReferenceDriver().parse(ctx, outputs)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=8)
event_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["model.response", "tool.start", "tool.result", "final", "error", 3])},
    optional={k: json_values for k in ("ts", "call_id", "name", "status", "exit_code", "duration_ms",
                                       "response_id", "tool_calls", "latency_ms", "arguments", "output", "usage")})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600))
def test_parser_never_raises_on_garbage_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "measured.stdout"
    path.write_bytes(data)
    transcript = plugin.parse_stdout(path, "measured")
    assert isinstance(transcript.events, list)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(event_like, max_size=6))
def test_parser_never_raises_on_event_shaped_garbage(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    path = tmp_path / "warmup.stdout"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    events = plugin.parse_stdout(path, "warmup").events
    expected = sum(1 for x in lines if x["type"] in ("model.response", "tool.start", "tool.result"))
    assert len(events) == expected
    assert [e.event_id for e in events] == [f"warmup-B-{n}" for n in range(1, expected + 1)]

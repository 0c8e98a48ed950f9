"""Every built-in oracle profile against the REAL reference agent (a subprocess), in a tmp workspace.

Each test checks the agent-level facts the profile exists to produce (exit code, tool events, the
workspace) and that the oracle's ground truth equals the structured calls the agent reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import EXPECTED_REFERENCE_STATUS, OracleServer, builtin_profiles
from gripprobe_core.oracle.dialects import MISSING_FILE

PLAN = TypeAdapter(list[ReferenceAction]).validate_python([{"write": {"path": "hello.txt", "content": "hello world\n"}}])
AGENT_TIMEOUT_S = 20


def agent_argv(base_url: str, workspace: Path, model: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gripprobe_core.refagent", "--base-url", f"{base_url}/v1", "--model", model,
            "--workspace", str(workspace), "--prompt", "Create hello.txt containing hello world.", *extra]


def agent_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "OPENAI_API_KEY": "oracle"}


class AgentRun:
    def __init__(self, code: int, events: list[dict[str, Any]], seconds: float) -> None:
        self.code, self.events, self.seconds = code, events, seconds

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def reported_calls(self) -> list[tuple[str, str, Any]]:
        """(call id, name, arguments) of every tool call the agent says it started."""
        return [(e["call_id"], e["name"], e["arguments"]) for e in self.of("tool.start")]


async def run_agent(base_url: str, workspace: Path, model: str, *extra: str) -> AgentRun:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*agent_argv(base_url, workspace, model, *extra),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env=agent_env())
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=AGENT_TIMEOUT_S)
    assert proc.returncode is not None
    return AgentRun(proc.returncode, [json.loads(x) for x in out.decode().splitlines()], time.monotonic() - started)


def truth_calls(oracle: OracleServer, structured: bool = True) -> list[tuple[str, str, Any]]:
    return [(g["tool_call_id"], g["name"], g["arguments"]) for g in oracle.ground_truth
            if g["structured"] is structured]


def drive(tmp_path: Path, model: str, *extra: str, trial: int = 1) -> tuple[AgentRun, OracleServer]:
    async def main() -> tuple[AgentRun, OracleServer]:
        async with OracleServer(PLAN, record_path=tmp_path / "oracle.jsonl", trial=trial) as oracle:
            result = await run_agent(oracle.base_url, tmp_path / "ws", model, *extra)
        return result, oracle

    (tmp_path / "ws").mkdir()
    result, oracle = asyncio.run(main())
    # the record on disk is the ground truth, and it always matches what the agent reported
    assert [json.loads(x) for x in (tmp_path / "oracle.jsonl").read_text().splitlines()] == oracle.ground_truth
    assert truth_calls(oracle) == result.reported_calls()
    assert all(g["protocol"] == "chat_completions" for g in oracle.ground_truth)
    return result, oracle


def written(tmp_path: Path) -> str | None:
    f = tmp_path / "ws" / "hello.txt"
    return f.read_text() if f.exists() else None


# ---------------------------------------------------------------------------------------- profiles

@pytest.mark.parametrize("extra", [(), ("--no-stream",)], ids=["sse", "json"])
def test_perfect_writes_the_file(tmp_path: Path, extra: tuple[str, ...]) -> None:
    run, oracle = drive(tmp_path, "perfect", *extra)
    assert run.code == 0 and written(tmp_path) == "hello world\n"
    assert [r["status"] for r in run.of("tool.result")] == ["success"]
    assert [g["action_index"] for g in oracle.ground_truth] == [0]


def test_lazy_answers_without_tools(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "lazy")
    assert run.code == 0 and run.of("tool.start") == [] and written(tmp_path) is None
    assert oracle.ground_truth == []


def test_text_tools_puts_the_call_in_the_content(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "text-tools")
    assert run.code == 0 and run.of("tool.start") == [] and written(tmp_path) is None
    (final,) = run.of("final")
    block = '<tool_call>{"name": "write", "arguments": {"path": "hello.txt", "content": "hello world\\n"}}</tool_call>'
    assert block in final["text"]
    assert [(g["name"], g["arguments"], g["action_index"]) for g in oracle.ground_truth if not g["structured"]] == [
        ("write", {"path": "hello.txt", "content": "hello world\n"}, 0)]


def test_malformed_args_gets_an_error_result_then_gives_up(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "malformed-args")
    assert run.code == 0 and written(tmp_path) is None
    (start,) = run.of("tool.start")
    assert isinstance(start["arguments"], str)  # the agent could not parse them either
    (result,) = run.of("tool.result")
    assert result["status"] == "error" and "not JSON" in result["output"]
    assert "give up" in run.of("final")[0]["text"]


def test_error_then_recover_fails_once_then_writes_the_file(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "error-then-recover")
    assert run.code == 0 and written(tmp_path) == "hello world\n"
    assert [(r["name"], r["status"]) for r in run.of("tool.result")] == [("shell", "error"), ("write", "success")]
    assert run.of("tool.result")[0]["exit_code"] != 0
    assert run.of("tool.start")[0]["arguments"] == {"command": f"cat {MISSING_FILE}"}
    assert [g["action_index"] for g in oracle.ground_truth] == [None, 0]


def test_retry_loop_repeats_one_failing_call_three_times(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "retry-loop")
    assert run.code == 0 and written(tmp_path) is None
    starts = run.of("tool.start")
    assert len(starts) == 3 and len({(s["name"], json.dumps(s["arguments"])) for s in starts}) == 1
    assert len({s["call_id"] for s in starts}) == 3
    assert [r["status"] for r in run.of("tool.result")] == ["error"] * 3


def test_http_500_makes_the_agent_exit_1(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "http-500")
    assert run.code == 1 and oracle.ground_truth == []
    (err,) = run.of("error")
    assert err["kind"] == "http" and err["http_status"] == 500


def test_tools_unsupported_is_ollamas_400(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "tools-unsupported")
    assert run.code == 1 and oracle.ground_truth == []
    (err,) = run.of("error")
    assert err["http_status"] == 400 and "does not support tools" in err["message"]
    assert "registry.ollama.ai/library/tools-unsupported:latest" in err["message"]


def test_stall_keeps_the_agent_waiting(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()

    async def main() -> OracleServer:
        async with OracleServer(PLAN) as oracle:
            proc = await asyncio.create_subprocess_exec(
                *agent_argv(oracle.base_url, tmp_path / "ws", "stall"), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env=agent_env())
            try:
                await asyncio.sleep(2.0)
                assert proc.returncode is None  # still waiting for an answer
                assert oracle.pending_stalls == 1
            finally:
                proc.kill()
                out, _ = await proc.communicate()
            events = [json.loads(x) for x in out.decode().splitlines()]
            assert [e["type"] for e in events] == ["session.start"]
            stopping = time.monotonic()
        assert time.monotonic() - stopping < 2.0  # stop() did not hang
        return oracle

    oracle = asyncio.run(main())
    assert oracle.ground_truth == [] and [e["reply"] for e in oracle.request_log] == ["stall"]


def test_slow_stream_still_succeeds_but_takes_its_time(tmp_path: Path) -> None:
    run, oracle = drive(tmp_path, "slow-stream")
    assert run.code == 0 and written(tmp_path) == "hello world\n"
    assert run.seconds >= 2 * 0.55  # two paced replies of ~20 chunks × 30 ms
    assert [r["latency_ms"] >= 550 for r in run.of("model.response")] == [True, True]


@pytest.mark.parametrize("trial", [1, 2, 3, 4])
def test_flaky_is_perfect_on_odd_trials_and_lazy_on_even_ones(tmp_path: Path, trial: int) -> None:
    run, oracle = drive(tmp_path, "flaky", trial=trial)
    assert run.code == 0
    if trial % 2:
        assert written(tmp_path) == "hello world\n" and [g["action_index"] for g in oracle.ground_truth] == [0]
    else:
        assert written(tmp_path) is None and run.of("tool.start") == [] and oracle.ground_truth == []


def test_every_builtin_profile_has_a_documented_expectation() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "oracle.md").read_text()
    assert set(EXPECTED_REFERENCE_STATUS) == set(builtin_profiles())
    for name, (status, reason) in EXPECTED_REFERENCE_STATUS.items():
        row = next((ln for ln in doc.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/oracle.md has no profile row for {name}"
        assert status in row and (reason is None or reason in row), row


# --------------------------------------------------------------------------------- agent robustness

def test_agent_reads_ollamas_plain_string_error_bodies(tmp_path: Path) -> None:
    """Ollama's native errors are {"error": "<text>"}: the agent must report them, not crash (exit 4)."""
    async def reject(request: web.Request) -> web.Response:
        return web.json_response({"error": "registry.ollama.ai/library/m:latest does not support tools"}, status=400)

    async def main() -> AgentRun:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", reject)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        try:
            return await run_agent(f"http://{host}:{port}", tmp_path, "m")
        finally:
            await runner.cleanup()

    run = asyncio.run(main())
    assert run.code == 1
    (err,) = run.of("error")
    assert err["kind"] == "http" and err["message"].endswith("does not support tools")

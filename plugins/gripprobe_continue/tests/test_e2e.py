"""End to end, what is particular to continue: the REAL ``cn`` (installed by the kit at its pinned version)
through the real ``gripprobe run`` against the oracle, and directly against a trap.

What every driver must do end to end (perfect passes, lazy is NO_TOOL_CALL, tier B names the oracle's
calls) is the contract's, in test_driver.py. Here: tier B timed by cn's log and merged with tier A, the
run with the proxy off (tier B alone carries the verdict, the key stays out of every file), and a hostile
workspace ``.env``.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from gripprobe_continue.plugin import VERSION
from gripprobe_core.plugin import ReferenceShell
from gripprobe_core.testing import base_env, oracle_server, read_cases, read_jsonl, run_gripprobe, stored_transcript

pytestmark = pytest.mark.e2e

KEY_ENV = "CN_E2E_API_KEY"
SECRET = "sk-cn-e2e-secret-0123456789abcdef"


def gripprobe_run(specs: Path, results: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    """The real ``gripprobe run`` of continue in a subprocess; returns the run directory."""
    return run_gripprobe("run", "--specs", specs, "--results", results, "-a", "continue", *args, env=env, timeout=240)


def identity(event: dict) -> tuple[str, str]:
    """What makes two tiers' events the same event: responses by response_id, tool events by call id."""
    return event["event_type"], str(event["response_id"] if event["event_type"] == "model_response"
                                    else event["tool_call_id"])


@pytest.fixture(scope="module")
def auto_run(agent_install, e2e_specs, tmp_path_factory) -> Path:
    """Perfect and lazy on a shell and a write test, proxy mode as the agent spec says (auto)."""
    return gripprobe_run(e2e_specs, tmp_path_factory.mktemp("auto"), "-m", "oracle-perfect", "-m", "oracle-lazy",
                         "-t", "shell_pwd", "-t", "save_file", "--jobs", "4")


@pytest.fixture(scope="module")
def tier_b_run(agent_install, e2e_specs, tmp_path_factory) -> Path:
    """Without the proxy: tier B alone must carry the verdict. The model has an API key."""
    (e2e_specs / "models" / "oracle-perfect-keyed.yaml").write_text(
        "id: oracle-perfect-keyed\nbackends:\n  - id: oracle\n    kind: oracle\n    model_id: perfect\n"
        f"    api_key_env: {KEY_ENV}\n")
    return gripprobe_run(e2e_specs, tmp_path_factory.mktemp("off"), "-m", "oracle-perfect-keyed", "-t", "save_file",
                         "--telemetry-proxy", "off", env={KEY_ENV: SECRET})


def test_tier_b_is_timed_by_the_log_and_merges_with_tier_a(auto_run, gripprobe_plugins):
    got = read_cases(auto_run)
    assert len(got) == 4
    for cid, case in got.items():
        want = "PASS" if case["key"]["model"] == "oracle-perfect" else "NO_TOOL_CALL"
        assert case["verdict"]["status"] == want, (cid, case["verdict"], case["validators"], case.get("harness_error"))
        assert case["agent_version"] == VERSION
        events = stored_transcript(auto_run / "cases" / cid, "measured", gripprobe_plugins).events
        calls = [e for e in events if e.event_type == "tool_call_start"]
        if want == "PASS":
            assert case["verdict"]["invoked"] == "yes"
            kind = {"shell_pwd": "execute", "save_file": "write"}[case["key"]["test"]]
            assert [c.payload["kind"] for c in calls] == [kind]
            # cn exits without flushing its log: the last stream's lines may all be lost, and then the
            # last response has neither a time nor the response_id that pairs it with tier A
            responses = [e for e in events if e.event_type == "model_response"]
            unlogged = [e for e in responses if not e.response_id]
            assert unlogged in ([], responses[-1:]), "only the last stream can be cut from the log"
            logged = [e for e in events if e not in unlogged]
            assert all(e.timestamp for e in logged)
            # tier A (the proxy) and tier B saw the same calls and responses: the merge kept each once
            merged = read_jsonl(auto_run / "cases" / cid / "artifacts" / "events.measured.jsonl")
            from_a = sorted(identity(e) for e in merged if e["source_tier"] == "A")
            from_b = sorted(identity(e.model_dump()) for e in logged)
            if not unlogged:
                assert case["telemetry"]["tiers_present"] == ["A", "B"]  # B saw it all too (seen_by)
                assert sorted(map(identity, merged)) == from_b == from_a
                assert all("B" in (e["seen_by"] or []) for e in merged), [(e["event_type"], e["seen_by"]) for e in merged]
            else:  # a response with neither a response_id nor a time is never merged (docs/evaluator.md)
                assert [e["source_tier"] for e in merged].count("B") == 1
                assert set(from_b) < set(from_a) and len(from_a) == len(from_b) + 1
        else:
            assert calls == [] and [e.event_type for e in events] == ["model_response"]


def test_tier_b_alone_passes_and_keeps_the_key_out(tier_b_run):
    got = read_cases(tier_b_run)
    assert len(got) == 1
    for cid, case in got.items():
        assert case["verdict"]["status"] == "PASS", (cid, case["verdict"], case["validators"])
        assert case["telemetry"]["telemetry_source_tier"] == "B"
        assert case["telemetry"]["tiers_present"] == ["B"]
        events = read_jsonl(tier_b_run / "cases" / cid / "artifacts" / "events.measured.jsonl")
        starts = [e for e in events if e["event_type"] == "tool_call_start"]
        assert len(starts) == 1 and starts[0]["tool_call_id"] == "call_oracle_0001"
        assert starts[0]["parent_id"] in {e["event_id"] for e in events if e["event_type"] == "model_response"}
        assert starts[0]["raw_artifact_ref"].startswith("measured.session.json:")
    for path in tier_b_run.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_workspace_dotenv_cannot_redirect_the_agent(agent_driver, agent_install, make_phase_ctx, gripprobe_plugins):
    """A hostile ``.env`` in the workspace (cn loads it) must not move the base URL, key or global dir."""

    async def main():
        async with oracle_server([ReferenceShell(shell="pwd > pwd.txt")], plugins=gripprobe_plugins) as oracle:
            ctx = make_phase_ctx(base_url=oracle.base_url, executable=agent_install.executable, api_key=SECRET,
                                 prompt="Use your shell tool to run pwd > pwd.txt")
            (ctx.workspace / ".env").write_text(
                "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nCONTINUE_GLOBAL_DIR=/nonexistent/elsewhere\n"
                "CONTINUE_CLI_ENABLE_TELEMETRY=1\nCONTINUE_API_BASE=https://api.continue.dev/\n")
            env = base_env(ctx.home, ctx.tmpdir, ctx.xdg)
            env.update(agent_driver.environment(ctx))
            cmd = agent_driver.command(ctx)
            proc = await asyncio.create_subprocess_exec(*cmd.argv, cwd=ctx.workspace, env=env,
                                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                        stderr=subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 90)
            return ctx, proc.returncode, out, err, oracle.request_log

    ctx, code, out, err, requests = asyncio.run(main())
    assert code == 0, err.decode()[-2000:]
    assert (ctx.workspace / "pwd.txt").read_text().strip() == str(ctx.workspace)
    assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 2
    assert all(r["authorized"] for r in requests)
    found = agent_driver.artifacts(ctx)
    assert found["session.json"].parent == ctx.home / ".continue" / "sessions"
    assert SECRET.encode() not in found["cn.log"]
    assert not Path("/nonexistent/elsewhere").exists()


AUTO_DENY_TEST = """\
id: save_file_autodeny
title: save_file with every tool call denied (auto-deny)
prompt: |
  Use your file-writing tool (not the shell) to create a file named greeting.txt in your
  current working directory with exactly these two lines:
  Hello, GripProbe!
  This file was saved with the write tool.
requires: [write]
observe:
  interaction: {policy: auto-deny}
validators:
  - {kind: file_absent, path: greeting.txt}
reference:
  - write: {path: greeting.txt, content: "Hello, GripProbe!\\nThis file was saved with the write tool.\\n"}
"""


def test_auto_deny_is_applied_with_cns_own_flags_and_the_file_is_not_written(e2e_specs, e2e_run, gripprobe_plugins):
    """oracle-perfect on save_file under auto-deny: cn runs with every tool excluded (not --auto), the
    oracle is offered no tool, nothing is written, and the case records the policy as applied natively."""
    (e2e_specs / "tests" / "save_file_autodeny.yaml").write_text(AUTO_DENY_TEST)
    run = e2e_run("save_file_autodeny", models=("oracle-perfect",))
    ((cid, case),) = read_cases(run).items()
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("auto-deny", "native", True, [])
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    oracle = read_jsonl(run / "cases" / cid / "artifacts" / "oracle.measured.jsonl")
    assert oracle == []  # no tool was offered, so the oracle asked for none
    events = stored_transcript(run / "cases" / cid, "measured", gripprobe_plugins).events
    assert not [e for e in events if e.event_type == "tool_call_result" and e.status == "success"]

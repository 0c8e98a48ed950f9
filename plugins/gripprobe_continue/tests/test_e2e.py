"""End to end: the REAL ``cn`` through the real runner against the oracle, and directly against traps.

Skipped only when the agent is not installed (``gripprobe agents install continue``; CI installs it).
The specs are the repository's, narrowed to the agents this test can rely on (reference and
continue), so other agents' specs whose plugins are not installed here cannot break loading.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cn_helpers import agent_spec, make_ctx
from gripprobe_continue import plugin
from gripprobe_continue.parse import load_session, parse_log, session_events
from gripprobe_core.agents import AgentCache

pytestmark = pytest.mark.e2e

#: The repository's specs (this file is plugins/gripprobe_continue/tests/…); GRIPPROBE_SPECS overrides.
REPO_SPECS = Path(os.environ.get("GRIPPROBE_SPECS") or Path(__file__).resolve().parents[3] / "specs")
KEY_ENV = "CN_E2E_API_KEY"
SECRET = "sk-cn-e2e-secret-0123456789abcdef"


def installed_cn() -> Path | None:
    recipe = plugin.agent_install_recipe(agent_spec())
    found = AgentCache.default().installed("continue", recipe)
    return found.executable if found else None


CN = installed_cn()
needs_cn = pytest.mark.skipif(CN is None, reason="continue-cli (cn 1.5.47) is not installed: "
                                                  "run `gripprobe agents install continue`")


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> Path:
    """The repository's specs with only the reference and continue agents, plus a model with an API key."""
    if not (REPO_SPECS / "cli_agents" / "continue.yaml").is_file():
        pytest.fail(f"repository specs not found at {REPO_SPECS} (set GRIPPROBE_SPECS to the repo's specs/)")
    root = tmp_path_factory.mktemp("specs")
    for name in ("models", "tests"):
        shutil.copytree(REPO_SPECS / name, root / name)
    for name in ("hardware_profiles.yaml",):
        if (REPO_SPECS / name).exists():
            shutil.copy(REPO_SPECS / name, root / name)
    (root / "suites").mkdir()
    shutil.copy(REPO_SPECS / "suites" / "default.yaml", root / "suites")
    (root / "cli_agents").mkdir()
    for name in ("reference.yaml", "continue.yaml"):
        shutil.copy(REPO_SPECS / "cli_agents" / name, root / "cli_agents")
    (root / "models" / "oracle-perfect-keyed.yaml").write_text(
        "id: oracle-perfect-keyed\nbackends:\n  - id: oracle\n    kind: oracle\n    model_id: perfect\n"
        f"    api_key_env: {KEY_ENV}\n")
    return root


def gripprobe_run(specs: Path, results: Path, *args: str) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and
           (not k.startswith("GRIPPROBE_") or k == "GRIPPROBE_AGENT_CACHE")}
    env[KEY_ENV] = SECRET
    res = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(specs), "--results",
                          str(results), "-a", "continue", *args],
                         capture_output=True, text=True, env=env, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def cases(run_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (run_dir / "cases").glob("*/case.json")}


def tier_b_from_artifacts(case_dir: Path, case: dict) -> list:
    """The tier-B events this plugin reads from the artifacts the runner kept (whatever the merge kept)."""
    data = (case_dir / "artifacts" / "measured.session.json").read_bytes()
    timeline = parse_log((case_dir / "artifacts" / "measured.cn.log").read_bytes(),
                         anchor=case["phases"][-1]["process"]["started_at"])
    return session_events(load_session(data), phase="measured", file_name="measured.session.json",
                          text=data.decode(), timeline=timeline)


def identity(event: dict) -> tuple[str, str]:
    """What makes two tiers' events the same event: responses by response_id, tool events by call id."""
    return event["event_type"], str(event["response_id"] if event["event_type"] == "model_response"
                                    else event["tool_call_id"])


@pytest.fixture(scope="module")
def auto_run(specs, tmp_path_factory) -> Path:
    """The contract's run, proxy mode as the agent spec says (auto)."""
    if CN is None:
        pytest.skip("continue-cli is not installed")
    return gripprobe_run(specs, tmp_path_factory.mktemp("auto"), "-m", "oracle-perfect", "-m", "oracle-lazy",
                         "-t", "shell_pwd", "-t", "save_file", "--jobs", "4")


@pytest.fixture(scope="module")
def tier_b_run(specs, tmp_path_factory) -> Path:
    """Without the proxy: tier B alone must carry the verdict. The model has an API key."""
    if CN is None:
        pytest.skip("continue-cli is not installed")
    return gripprobe_run(specs, tmp_path_factory.mktemp("off"), "-m", "oracle-perfect-keyed", "-t", "save_file",
                         "--telemetry-proxy", "off")


@needs_cn
def test_perfect_passes_lazy_no_tool_call(auto_run):
    got = cases(auto_run)
    assert len(got) == 4
    for cid, case in got.items():
        want = "PASS" if case["key"]["model"] == "oracle-perfect" else "NO_TOOL_CALL"
        assert case["verdict"]["status"] == want, (cid, case["verdict"], case["validators"], case.get("harness_error"))
        assert case["agent_version"] == "1.5.47"
        events = tier_b_from_artifacts(auto_run / "cases" / cid, case)
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
            merged = [json.loads(line) for line in (auto_run / "cases" / cid / "artifacts" /
                                                     "events.measured.jsonl").read_text().splitlines()]
            from_a = sorted(identity(e) for e in merged if e["source_tier"] == "A")
            from_b = sorted(identity(e.model_dump()) for e in logged)
            if not unlogged:
                assert case["telemetry"]["tiers_present"] == ["A"]
                assert sorted(map(identity, merged)) == from_b == from_a
            else:  # responses without a response_id are never merged (docs/evaluator.md): it stays as B
                assert [e["source_tier"] for e in merged].count("B") == 1
                assert set(from_b) < set(from_a) and len(from_a) == len(from_b) + 1
        else:
            assert calls == [] and [e.event_type for e in events] == ["model_response"]


@needs_cn
def test_tier_b_alone_passes_and_keeps_the_key_out(tier_b_run):
    got = cases(tier_b_run)
    assert len(got) == 1
    for cid, case in got.items():
        assert case["verdict"]["status"] == "PASS", (cid, case["verdict"], case["validators"])
        assert case["telemetry"]["telemetry_source_tier"] == "B"
        assert case["telemetry"]["tiers_present"] == ["B"]
        events = [json.loads(line) for line in
                  (tier_b_run / "cases" / cid / "artifacts" / "events.measured.jsonl").read_text().splitlines()]
        starts = [e for e in events if e["event_type"] == "tool_call_start"]
        assert len(starts) == 1 and starts[0]["tool_call_id"] == "call_oracle_0001"
        assert starts[0]["parent_id"] in {e["event_id"] for e in events if e["event_type"] == "model_response"}
        assert starts[0]["raw_artifact_ref"].startswith("measured.session.json:")
    for path in tier_b_run.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@needs_cn
def test_workspace_dotenv_cannot_redirect_the_agent(tmp_path):
    """A hostile ``.env`` in the workspace (cn loads it) must not move the base URL, key or global dir."""
    from gripprobe_core.models.specs import ReferenceShell
    from gripprobe_core.oracle.server import OracleServer
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.env import base_env, make_phase_dirs

    async def main():
        oracle = OracleServer([ReferenceShell(shell="pwd > pwd.txt")], dialects=make_plugin_manager().registry.dialects,
                              default_profile="perfect")
        await oracle.start()
        try:
            ctx = make_ctx(tmp_path, base_url=oracle.base_url, executable=CN, api_key=SECRET)
            (ctx.workspace / ".env").write_text(
                "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nCONTINUE_GLOBAL_DIR=/nonexistent/elsewhere\n"
                "CONTINUE_CLI_ENABLE_TELEMETRY=1\nCONTINUE_API_BASE=https://api.continue.dev/\n")
            make_phase_dirs(ctx.home, ctx.tmpdir, ctx.xdg)
            env = base_env(ctx.home, ctx.tmpdir, ctx.xdg)
            env.update(plugin.build_env(agent_spec(), ctx))
            cmd = plugin.build_command(agent_spec(), ctx)
            proc = await asyncio.create_subprocess_exec(*cmd.argv, cwd=ctx.workspace, env=env,
                                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                        stderr=subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 90)
            return ctx, proc.returncode, out, err, oracle.request_log
        finally:
            await oracle.stop()

    ctx, code, out, err, requests = asyncio.run(main())
    assert code == 0, err.decode()[-2000:]
    assert (ctx.workspace / "pwd.txt").read_text().strip() == str(ctx.workspace)
    assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 2
    assert all(r["authorized"] for r in requests)
    found = plugin.phase_artifacts(agent_spec(), ctx)
    assert found["session.json"].parent == ctx.home / ".continue" / "sessions"
    assert SECRET not in found["cn.log"].read_text()
    assert not Path("/nonexistent/elsewhere").exists()

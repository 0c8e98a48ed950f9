"""Qwen Code's driver: settings file, environment, command, install recipe, kept files (the kit's fixtures:
the real plugin manager and a phase context laid out like the runner's), and a real Qwen Code run under
strace that contacts nothing but the phase's backend (and, without the switches, does call home)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from gripprobe_core.plugin import PhaseCapture, ProcessResult, ReferenceAction, WrapperParseError
from gripprobe_core.testing import base_env, oracle_server
from gripprobe_qwen import NAME, PINNED_VERSION
from gripprobe_qwen.config import DUMMY_API_KEY, QUIET_ENV
from gripprobe_qwen.plugin import CHAT_ARTIFACT, RUN_ARGS

PROMPT = "Run `pwd` and save it to pwd.txt.\nDo not type it.\n"


def settings_of(ctx) -> dict:
    return json.loads((ctx.home / ".qwen" / "settings.json").read_text())


def test_registered_structured_with_its_tool_names_and_dialect(agent_driver):
    assert agent_driver.observability == "structured" and "qwen-code" in agent_driver.install_hint
    assert agent_driver.tool_names.normalize("run_shell_command") == ("shell", "execute")
    assert agent_driver.tool_names.normalize("notebook_edit") == ("edit", "write")
    assert list(agent_driver.oracle_dialects()) == ["qwen-code"]
    assert agent_driver.calls_off_wire == {}


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_settings_switch_off_calls_home_side_requests_and_retries(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(model_name="qwen3:8b")
    agent_driver.environment(ctx)
    cfg = settings_of(ctx)
    assert cfg["security"] == {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}}
    assert cfg["privacy"] == {"usageStatisticsEnabled": False} and cfg["telemetry"] == {"enabled": False}
    assert cfg["general"] == {"enableAutoUpdate": False, "chatRecording": True} and cfg["ide"] == {"enabled": False}
    assert cfg["memory"] == {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}
    assert cfg["model"] == {"name": "qwen3:8b", "generationConfig": {"maxRetries": 0}}
    assert "fastModel" not in cfg  # side requests, if any, use the model under test


def test_environment_points_qwen_at_the_phase_backend_and_keeps_its_state_in_home(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:50123")  # the runner sets the proxy's root here
    env = agent_driver.environment(ctx)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:50123/v1" == ctx.openai_base_url
    assert env["OPENAI_MODEL"] == "perfect" and env["OPENAI_API_KEY"] == DUMMY_API_KEY
    assert env["QWEN_HOME"] == str(ctx.home / ".qwen")
    for name in ("QWEN_CODE_SYSTEM_SETTINGS_PATH", "QWEN_CODE_SYSTEM_DEFAULTS_PATH"):
        path = Path(env[name])
        assert path.is_relative_to(ctx.home) and not path.exists()  # /etc/qwen-code is never read
    for name, value in QUIET_ENV.items():
        assert env[name] == value
    assert env["QWEN_USAGE_STATISTICS_ENABLED"] == "false" and env["QWEN_CODE_UNATTENDED_RETRY"] == "false"
    written = sorted(p.relative_to(ctx.home).as_posix() for p in ctx.home.rglob("*") if p.is_file())
    assert written == [".qwen/settings.json"]


def test_api_key_travels_only_in_the_environment(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(api_key="sk-canary-qwen-123")
    env = agent_driver.environment(ctx)
    command = agent_driver.command(ctx)
    assert env["OPENAI_API_KEY"] == "sk-canary-qwen-123"
    assert not any("sk-canary-qwen-123" in a for a in command.argv)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-canary-qwen-123" in p.read_bytes()]


def test_a_backend_env_cannot_reroute_qwen(agent_driver, make_phase_ctx):
    """The runner applies base env, then the backend's env, then the driver's environment: a backend env
    naming another OpenAI base URL or model, or Qwen's persistent retry mode, is overridden."""
    sneaky = {"OPENAI_BASE_URL": "http://198.51.100.7/v1", "OPENAI_MODEL": "other", "QWEN_CODE_UNATTENDED_RETRY": "1",
              "QWEN_HOME": "/etc"}
    ctx = make_phase_ctx(backend_env=sneaky)
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", **sneaky})
    env.update(ctx.backend.env)
    env.update(agent_driver.environment(ctx))
    assert env["OPENAI_BASE_URL"] == ctx.openai_base_url and env["OPENAI_MODEL"] == "perfect"
    assert env["QWEN_CODE_UNATTENDED_RETRY"] == "false" and env["QWEN_HOME"] == str(ctx.home / ".qwen")
    assert env["HOME"] == str(ctx.home)


def test_command_runs_the_installed_binary_with_the_prompt_as_its_argument(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt=PROMPT)
    command = agent_driver.command(ctx)
    assert command.argv == [str(ctx.agent_executable), *RUN_ARGS, "--model", "perfect", PROMPT]
    assert RUN_ARGS == ("--auth-type", "openai", "--approval-mode", "yolo", "--output-format", "stream-json")
    assert command.stdin is None and command.cwd is None  # stdin /dev/null; the workspace


def test_a_prompt_that_reads_like_an_option_goes_on_stdin(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt="--help me write a file")
    command = agent_driver.command(ctx)
    assert command.argv == [str(ctx.agent_executable), *RUN_ARGS, "--model", "perfect"]
    assert command.stdin == b"--help me write a file"


def test_default_args_come_before_the_prompt(agent_driver, agent_spec, make_phase_ctx):
    ctx = make_phase_ctx(agent=agent_spec.model_copy(update={"default_args": ["--max-session-turns", "20"]}),
                         prompt=PROMPT)
    assert agent_driver.command(ctx).argv[-3:] == ["--max-session-turns", "20", PROMPT]


def test_model_names_with_tags_are_passed_as_they_are(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(model_name="qwen3:8b")
    assert agent_driver.environment(ctx)["OPENAI_MODEL"] == "qwen3:8b"
    argv = agent_driver.command(ctx).argv
    assert argv[argv.index("--model") + 1] == "qwen3:8b"


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", "@qwen-code/qwen-code", PINNED_VERSION, "qwen")


def test_repo_spec_matches_the_plugin(agent_spec):
    assert (agent_spec.id, agent_spec.plugin, agent_spec.executable, agent_spec.version) == (
        "qwen-code", NAME, "qwen", PINNED_VERSION)
    assert agent_spec.formats == ["tool"] and agent_spec.telemetry_proxy_mode == "auto"


def test_artifacts_keep_the_chat_log(agent_driver, phase_ctx):
    ctx = phase_ctx
    agent_driver.environment(ctx)
    assert agent_driver.artifacts(ctx) == {}
    chats = ctx.home / ".qwen" / "projects" / "-tmp-ws" / "chats"
    chats.mkdir(parents=True)
    (chats / "0b5e2a7c-aaaa-bbbb-cccc-000000000001.jsonl").write_text('{"type": "user"}\n')
    assert agent_driver.artifacts(ctx) == {CHAT_ARTIFACT: chats / "0b5e2a7c-aaaa-bbbb-cccc-000000000001.jsonl"}


def test_parse_raises_a_parse_error_only_when_stdout_cannot_be_read(agent_driver, phase_ctx, tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "nope", stderr_path=tmp_path / "nope2",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        agent_driver.parse(phase_ctx, capture)
    (tmp_path / "empty").write_bytes(b"")
    got = agent_driver.parse(phase_ctx, PhaseCapture(stdout_path=tmp_path / "empty", stderr_path=tmp_path / "nope2",
                                                     process=ProcessResult(status="ok")))
    assert got.events == [] and got.final_text is None


# ---------------------------------------------------------------------- nothing phones home (real qwen)

@pytest.mark.e2e
def test_a_real_run_connects_to_nothing_but_the_phase_backend(agent_driver, make_phase_ctx, agent_install):
    """The real Qwen Code through the driver's environment, settings and command (unsandboxed, under
    strace): every socket it opens is the backend's 127.0.0.1 port, and no DNS lookup happens. (With usage
    statistics left on, Qwen Code's default, 0.24.4 looks up an Aliyun RUM host at start-up: measured once
    by hand, not provoked here.)"""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is needed to watch Qwen Code's connections", pytrace=False)
        pytest.skip("strace is not installed")
    plan = TypeAdapter(list[ReferenceAction]).validate_python([{"write": {"path": "a.txt", "content": "x\n"}}])

    async def main() -> tuple[int, str, list[str], str, bytes]:
        async with oracle_server(plan) as oracle:
            ctx = make_phase_ctx(prompt="Write a.txt.", base_url=oracle.base_url, executable=agent_install.executable)
            env = agent_driver.environment(ctx)
            command = agent_driver.command(ctx)
            trace = ctx.tmpdir / "strace.txt"
            full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ctx.home), **ctx.xdg,
                    "TMPDIR": str(ctx.tmpdir), **env}
            proc = await asyncio.create_subprocess_exec(
                strace, "-f", "-qq", "-s", "200", "-e", "trace=connect,sendto,sendmmsg", "-o", str(trace),
                *command.argv, cwd=ctx.workspace, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
            stdout, _ = await asyncio.wait_for(proc.communicate(), 120)
            port = oracle.base_url.rsplit(":", 1)[1]
            return proc.returncode, stdout.decode(), trace.read_text().splitlines(), port, \
                (ctx.workspace / "a.txt").read_bytes()

    rc, stdout, trace, port, written = asyncio.run(main())
    assert rc == 0 and written == b"x\n"
    assert json.loads(stdout.splitlines()[-1])["result"].startswith("Done. Steps performed: 1. write a.txt.")
    inet = [line for line in trace if re.search(r"sa_family=AF_INET6?\b", line) and "htons(53)" not in line]
    dns = [line for line in trace if "htons(53)" in line or "aliyuncs" in line]
    assert inet and all(f"sin_port=htons({port})" in line and '"127.0.0.1"' in line for line in inet), inet
    assert not dns, dns

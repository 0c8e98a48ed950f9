"""pi's driver: config files, environment, command, kept files, parsing (the kit's fixtures: the real plugin
manager and a phase context laid out like the runner's), and a real pi run under strace that contacts
nothing but the phase's backend."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from gripprobe_core.plugin import PhaseCapture, ProcessResult, ReferenceAction, WrapperParseError
from gripprobe_core.testing import DriverContract, oracle_server
from gripprobe_pi import NAME, NPM_PACKAGE, PINNED_VERSION
from gripprobe_pi.config import API_KEY_ENV, DUMMY_API_KEY, PROVIDER_ID, RETRY
from gripprobe_pi.plugin import PRINT_ARGS, SESSION_ARTIFACT

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SESSION_NAME = "2026-11-27T00-37-15-198Z_01a21a6e-6cf5-7235-969b-a8103066c0b5.jsonl"


class TestPiContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for pi: its session file is the
    kept file; end to end, a shell test and a write test against the oracle."""

    kept_files = (SESSION_ARTIFACT,)
    kept_paths = (f"home/.pi/agent/sessions/{SESSION_NAME}",)
    e2e_tests = ("shell_pwd", "save_file")


def agent_folder(ctx) -> Path:
    return ctx.home / ".pi" / "agent"


def test_registered_structured_with_its_tool_names_and_dialect(agent_driver):
    assert agent_driver.observability == "structured" and agent_driver.calls_off_wire == {}
    assert agent_driver.tool_names.normalize("bash") == ("shell", "execute")
    assert agent_driver.tool_names.normalize("edit") == ("edit", "write")
    assert list(agent_driver.oracle_dialects()) == ["pi-edits"]


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("npm", NPM_PACKAGE, PINNED_VERSION, "pi")


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_config_points_pi_at_the_phase_backend_with_the_exact_model(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(model_name="qwen3:8b")
    agent_driver.environment(ctx)
    models = json.loads((agent_folder(ctx) / "models.json").read_text())
    (provider_id, provider), = models["providers"].items()
    assert provider_id == PROVIDER_ID
    assert provider == {"baseUrl": ctx.openai_base_url, "api": "openai-completions", "apiKey": API_KEY_ENV,
                        "models": [{"id": "qwen3:8b", "name": "qwen3:8b"}]}
    assert ctx.openai_base_url == "http://127.0.0.1:43210/v1"
    settings = json.loads((agent_folder(ctx) / "settings.json").read_text())
    assert settings == {"defaultProvider": PROVIDER_ID, "defaultModel": "qwen3:8b", "enableInstallTelemetry": False,
                        "retry": RETRY}
    assert RETRY["maxRetries"] == RETRY["provider"]["maxRetries"] == 1
    assert (agent_folder(ctx) / "sessions").is_dir()


def test_environment_switches_off_every_startup_call_and_pins_the_agent_folder(agent_driver, phase_ctx):
    env = agent_driver.environment(phase_ctx)
    assert env == {"PI_CODING_AGENT_DIR": str(agent_folder(phase_ctx)), API_KEY_ENV: DUMMY_API_KEY,
                   "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}


def test_the_key_travels_in_the_environment_and_in_no_file(agent_driver, make_phase_ctx, tmp_path):
    key = "sk-canary-pi-4242"
    ctx = make_phase_ctx(api_key=key)
    env = agent_driver.environment(ctx)
    assert [k for k, v in env.items() if key in v] == [API_KEY_ENV]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key.encode() in p.read_bytes()]
    assert not any(key in a for a in agent_driver.command(ctx).argv)


def test_command_is_print_mode_with_the_session_folder_and_the_prompt_last(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt="Run `pwd`.\nThen stop.\n")
    command = agent_driver.command(ctx)
    assert command.argv == [str(ctx.agent_executable), *PRINT_ARGS, "--session-dir",
                            str(agent_folder(ctx) / "sessions"), ctx.prompt]
    assert command.argv[1] == "-p" and command.stdin is None and command.cwd is None


@pytest.mark.parametrize("prompt", ["- write a list", "--help me", "@notes.md is the spec"])
def test_a_prompt_pi_would_read_as_an_option_or_a_file_goes_to_stdin(agent_driver, make_phase_ctx, prompt):
    ctx = make_phase_ctx(prompt=prompt)
    command = agent_driver.command(ctx)
    assert prompt not in command.argv and command.argv[-1] == str(agent_folder(ctx) / "sessions")
    assert command.stdin == prompt.encode()


def test_default_args_come_before_the_prompt(agent_driver, make_phase_ctx):
    base = make_phase_ctx(prompt="go")
    ctx = dataclasses.replace(base, agent=base.agent.model_copy(update={"default_args": ["--tools", "read,bash,ls"]}))
    assert agent_driver.command(ctx).argv[-3:] == ["--tools", "read,bash,ls", "go"]


def test_phase_artifacts_keep_the_newest_session(agent_driver, phase_ctx):
    ctx = phase_ctx
    agent_driver.environment(ctx)
    assert agent_driver.artifacts(ctx) == {}
    sessions = agent_folder(ctx) / "sessions"
    old = sessions / "2026-11-27T00-37-14-000Z_01a21a6e-0000-7000-8000-000000000000.jsonl"
    new = sessions / SESSION_NAME
    for p in (new, old):
        shutil.copyfile(FIXTURES / "oracle" / "perfect" / "session.jsonl", p)
    (sessions / "notes.txt").write_text("not a session")
    assert agent_driver.artifacts(ctx) == {SESSION_ARTIFACT: new}


def capture_of(tmp_path: Path, case: str, with_session: bool) -> PhaseCapture:
    src = FIXTURES / "oracle" / case
    out = tmp_path / "measured.stdout"
    shutil.copyfile(src / "stdout.txt", out)
    files = {}
    if with_session:
        files[SESSION_ARTIFACT] = tmp_path / "measured.session.jsonl"
        shutil.copyfile(src / "session.jsonl", files[SESSION_ARTIFACT])
    return PhaseCapture(stdout_path=out, stderr_path=tmp_path / "measured.stderr",
                        process=ProcessResult(status="ok", exit_code=0), files=files)


def test_parse_reads_the_kept_session(agent_driver, phase_ctx, tmp_path):
    transcript = agent_driver.parse(phase_ctx, capture_of(tmp_path, "perfect", True))
    assert [e.tool_call_id for e in transcript.events if e.is_tool_event()] == ["call_oracle_0001"] * 2
    assert transcript.events[1].raw_artifact_ref == "measured.session.jsonl:5"
    assert transcript.final_text.startswith("Done. Steps performed: 1. write greeting.txt.")


def test_parse_without_a_session_has_no_events_and_the_stdout_answer(agent_driver, phase_ctx, tmp_path):
    transcript = agent_driver.parse(phase_ctx, capture_of(tmp_path, "lazy", False))
    assert transcript.events == [] and transcript.final_text == "To solve this I would: 1. write greeting.txt. I have not run anything."


def test_parse_raises_wrapper_parse_error_when_stdout_is_missing(agent_driver, phase_ctx, tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "nope", stderr_path=tmp_path / "nope2",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        agent_driver.parse(phase_ctx, capture)


def test_repo_spec_matches_the_plugin(agent_spec):
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("pi", NAME, "pi", PINNED_VERSION)
    assert set(spec.tool_kinds) == {"execute", "read", "write"} and spec.formats == ["tool"]


# ------------------------------------------------------------------------- nothing phones home (real pi)

@pytest.mark.e2e
@pytest.mark.parametrize("offline", [True, False], ids=["as-configured", "without-the-offline-switches"])
def test_a_real_run_connects_to_nothing_but_the_phase_backend(agent_driver, make_phase_ctx, agent_install, offline):
    """The real pi, through the driver's environment and command (unsandboxed, under strace): every
    socket it opens is the backend's 127.0.0.1 port, and no DNS lookup happens. Without the PI_OFFLINE
    switches too: print mode makes no start-up call in this version (the version check and the install
    ping live in interactive mode), so the switches are a guard for later versions."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is needed to watch pi's connections", pytrace=False)
        pytest.skip("strace is not installed")
    plan = TypeAdapter(list[ReferenceAction]).validate_python(
        [{"write": {"path": "a.txt", "content": "x\n"}}, {"shell": "ls -1"}])

    async def main() -> tuple[int, str, list[str], str]:
        async with oracle_server(plan) as oracle:
            ctx = make_phase_ctx(prompt="Write a.txt, then list the folder.", base_url=oracle.base_url,
                                 executable=agent_install.executable)
            env = agent_driver.environment(ctx)
            if not offline:
                for name in ("PI_OFFLINE", "PI_SKIP_VERSION_CHECK", "PI_TELEMETRY"):
                    env.pop(name)
            command = agent_driver.command(ctx)
            trace = ctx.tmpdir / "strace.txt"
            full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ctx.home), **ctx.xdg,
                    "TMPDIR": str(ctx.tmpdir), **env}
            proc = await asyncio.create_subprocess_exec(
                strace, "-f", "-qq", "-e", "trace=connect,sendto,sendmmsg", "-o", str(trace), *command.argv,
                cwd=ctx.workspace, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
            stdout, _ = await asyncio.wait_for(proc.communicate(), 120)
            port = oracle.base_url.rsplit(":", 1)[1]
            return proc.returncode, stdout.decode(), trace.read_text().splitlines(), port

    rc, stdout, trace, port = asyncio.run(main())
    assert rc == 0 and stdout.startswith("Done. Steps performed: 1. write a.txt; 2. run `ls -1`.")
    inet = [line for line in trace if re.search(r"sa_family=AF_INET6?\b", line)]
    assert inet and all(f"sin_port=htons({port})" in line and '"127.0.0.1"' in line for line in inet), inet
    assert not [line for line in trace if "htons(53)" in line], "a DNS lookup"

"""Claude Code's driver: the contract, its environment, files, command, kept transcript and parsing (the kit's
fixtures: the real plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from gripprobe_claude import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from gripprobe_claude.config import (
    ALLOWED_TOOLS, API_KEY_ENV, DUMMY_API_KEY, MODEL_ENV, PRINT_OPTIONS, QUIET_ENV, agent_env,
)
from gripprobe_claude.plugin import TRANSCRIPT_ARTIFACT
from gripprobe_core.plugin import PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.testing import DriverContract

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oracle"
SLUG = "-tmp-run-c1-measured-workspace"


class TestClaudeCodeContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for Claude Code: its session
    transcript is a kept file; end to end, a shell test and a write against the oracle."""

    kept_files = (TRANSCRIPT_ARTIFACT,)
    kept_paths = (f"home/.claude/projects/{SLUG}/0b5e2a7c-1d2e-4f60-8a9b-0c1d2e3f4a5b.jsonl",)
    e2e_tests = ("shell_pwd", "save_file")


def test_registered_structured_with_its_own_tool_names(agent_driver):
    assert agent_driver.observability == "structured"
    names = agent_driver.tool_names
    assert names.normalize("Bash") == ("shell", "execute")
    assert names.normalize("Write") == ("write", "write")
    assert names.normalize("Edit") == ("edit", "write")
    assert names.normalize("Read") == ("read", "read")
    assert names.normalize("NotebookEdit") == ("notebook_edit", "write")
    assert names.normalize("Agent") == ("agent", "other")
    assert names.normalize("AskUserQuestion") == ("ask_user", "other")
    assert dict(agent_driver.oracle_dialects()) == {}  # the generic tools dialect drives its tools
    assert not agent_driver.calls_off_wire  # every call it runs is a structured tool_use on the wire


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", NPM_PACKAGE, PINNED_VERSION, EXECUTABLE) == ("npm", "@anthropic-ai/claude-code", "2.1.332", "claude")


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_environment_points_claude_at_the_phase_root_with_every_model_pinned(agent_driver, phase_ctx):
    ctx = phase_ctx
    env = agent_driver.environment(ctx)
    assert env["ANTHROPIC_BASE_URL"] == ctx.base_url == "http://127.0.0.1:43210"  # the root: no /v1
    assert env[API_KEY_ENV] == DUMMY_API_KEY
    assert {name: env[name] for name in MODEL_ENV} == {name: "perfect" for name in MODEL_ENV}
    for name in ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                 "ANTHROPIC_DEFAULT_OPUS_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL", "ANTHROPIC_MODEL"):
        assert env[name] == "perfect"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "1"
    assert "ANTHROPIC_AUTH_TOKEN" not in env and "IS_SANDBOX" not in env


def test_everything_that_phones_home_is_switched_off(agent_driver, phase_ctx):
    env = agent_driver.environment(phase_ctx)
    for name in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
                 "DISABLE_AUTOUPDATER", "DISABLE_BUG_COMMAND", "DISABLE_GROWTHBOOK", "CLAUDE_CODE_DISABLE_FEATURE_FLAGS"):
        assert env[name] == "1", name
    assert env["CLAUDE_CODE_ENABLE_TELEMETRY"] == "0" and env["CLAUDE_CODE_MODEL_CATALOG"] == "off"
    assert env["CLAUDE_CODE_AUTO_CONNECT_IDE"] == "false"
    assert QUIET_ENV.items() <= env.items()


def test_model_names_with_odd_characters_are_passed_verbatim():
    env = agent_env(None, "http://127.0.0.1:9/", "qwen3:8b")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert {env[n] for n in MODEL_ENV} == {"qwen3:8b"}


def test_the_key_travels_in_the_environment_and_in_no_file(agent_driver, make_phase_ctx, tmp_path):
    key = "sk-ant-canary-claude-4242"
    ctx = make_phase_ctx(api_key=key)
    env = agent_driver.environment(ctx)
    command = agent_driver.command(ctx)
    assert env[API_KEY_ENV] == key
    assert [k for k, v in env.items() if key in v] == [API_KEY_ENV]
    assert not [a for a in command.argv if key in a]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key.encode() in p.read_bytes()]


def test_config_files_mark_onboarding_done_under_home_only(agent_driver, phase_ctx, tmp_path):
    ctx = phase_ctx
    before = {p for p in tmp_path.rglob("*") if p.is_file()}
    agent_driver.environment(ctx)
    written = {p for p in tmp_path.rglob("*") if p.is_file()} - before
    assert written == {ctx.home / ".claude.json"}
    assert (ctx.home / ".claude").is_dir()
    state = json.loads((ctx.home / ".claude.json").read_text())
    assert state == {"hasCompletedOnboarding": True, "autoConnectIde": False, "autoInstallIdeExtension": False}


def test_command_is_print_mode_stream_json_with_tools_allowed_and_no_mcp(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt="--help is not a flag here\nsecond line", model_name="lazy")
    command = agent_driver.command(ctx)
    assert command.argv == [str(ctx.agent_executable), "-p", *PRINT_OPTIONS, "--model", "lazy", "--", ctx.prompt]
    assert command.argv[1:12] == ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "dontAsk",
                                  "--allowedTools", "Bash,Edit,Write,NotebookEdit,Read,Glob,Grep,WebFetch,WebSearch,"
                                  "Agent,Skill", "--strict-mcp-config", "--model", "lazy"]
    assert {"Bash", "Write", "Edit", "Read"} <= set(ALLOWED_TOOLS)
    assert "--dangerously-skip-permissions" not in command.argv and "bypassPermissions" not in command.argv
    assert command.stdin is None and command.cwd is None  # stdin /dev/null, cwd the workspace


def test_default_args_of_the_spec_go_before_the_prompt(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx()
    ctx = dataclasses.replace(ctx, agent=ctx.agent.model_copy(update={"default_args": ["--effort", "low"]}))
    argv = agent_driver.command(ctx).argv
    assert argv[-4:] == ["--effort", "low", "--", ctx.prompt]


def _session(ctx, slug: str, name: str, data: bytes) -> Path:
    folder = ctx.home / ".claude" / "projects" / slug
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def test_phase_artifacts_keep_the_main_session_transcript(agent_driver, phase_ctx):
    ctx = phase_ctx
    agent_driver.environment(ctx)
    assert agent_driver.artifacts(ctx) == {}
    main = _session(ctx, SLUG, "aa534226-7b9f-4415-99b6-bd367fcaee79.jsonl",
                    (FIXTURES / "perfect_save_file" / "session.jsonl").read_bytes())
    sub = ctx.home / ".claude" / "projects" / SLUG / "aa534226-7b9f-4415-99b6-bd367fcaee79" / "subagents"
    sub.mkdir(parents=True)
    (sub / "agent-a1.jsonl").write_text("{}\n")  # a sub-agent's transcript is not the session's
    assert agent_driver.artifacts(ctx) == {TRANSCRIPT_ARTIFACT: main}


def capture_of(tmp_path: Path, case: str, *, stdout: bool = True, transcript: bool = True) -> PhaseCapture:
    src = FIXTURES / case
    out = tmp_path / "measured.stdout"
    out.write_bytes((src / "stdout.txt").read_bytes() if stdout else b"")
    files = {}
    if transcript:
        files[TRANSCRIPT_ARTIFACT] = tmp_path / "measured.session.jsonl"
        shutil.copyfile(src / "session.jsonl", files[TRANSCRIPT_ARTIFACT])
    return PhaseCapture(stdout_path=out, stderr_path=tmp_path / "measured.stderr",
                        process=ProcessResult(status="ok", exit_code=0), files=files)


def test_parse_reads_stdout_first(agent_driver, phase_ctx, tmp_path):
    transcript = agent_driver.parse(phase_ctx, capture_of(tmp_path, "perfect_save_file"))
    assert [(e.event_type, e.tool_call_id, e.raw_artifact_ref.split(":")[0]) for e in transcript.events] == [
        ("model_response", None, "measured.stdout"), ("tool_call_start", "call_oracle_0001", "measured.stdout"),
        ("tool_call_result", "call_oracle_0001", "measured.stdout"), ("model_response", None, "measured.stdout")]
    assert transcript.final_text.startswith("Done. Steps performed: 1. write greeting.txt.")


def test_parse_falls_back_to_the_transcript_when_stdout_is_empty(agent_driver, phase_ctx, tmp_path):
    transcript = agent_driver.parse(phase_ctx, capture_of(tmp_path, "perfect_save_file", stdout=False))
    assert [(e.event_type, e.tool_call_id) for e in transcript.events if e.is_tool_event()] == [
        ("tool_call_start", "call_oracle_0001"), ("tool_call_result", "call_oracle_0001")]
    assert {e.raw_artifact_ref.split(":")[0] for e in transcript.events} == {"measured.session.jsonl"}
    assert transcript.final_text.startswith("Done. Steps performed")


def test_parse_raises_wrapper_parse_error_when_stdout_is_missing(agent_driver, phase_ctx, tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "nope", stderr_path=tmp_path / "nope2",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        agent_driver.parse(phase_ctx, capture)


def test_repo_spec_matches_the_plugin(agent_spec):
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("claude-code", NAME, "claude", PINNED_VERSION)
    assert spec.formats == ["tool"] and set(spec.tool_kinds) >= {"execute", "read", "write"}
    assert spec.telemetry_proxy_mode == "auto"

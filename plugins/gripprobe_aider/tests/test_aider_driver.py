"""aider's driver: files under HOME, the base URL trap, no key on disk or on the command line, the argv
the real aider gets, kept files and parsing (the kit's fixtures: the real plugin manager, the repo's aider
spec and a phase context laid out like the runner's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gripprobe_core.plugin import InstallRecipe, PhaseCapture, ProcessResult, TestSpec
from gripprobe_core.testing import DriverContract, base_env
from gripprobe_aider import NAME, PINNED_VERSION
from gripprobe_aider.config import chat_files, files_for
from gripprobe_aider.plugin import CHAT_HISTORY_ARTIFACT, LLM_HISTORY_ARTIFACT

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KEY = "sk-canary-aider-env-4242"

PATCH_TEST = TestSpec(
    id="patch_file", title="patch", prompt="Edit settings.py so TIMEOUT_SECONDS = 45.\n--not-a-flag",
    validators=[{"kind": "file_exists", "path": "settings.py"}],
    fixtures=[{"path": "settings.py", "content": "TIMEOUT_SECONDS = 30\n"}],
    reference=[{"read": {"path": "settings.py"}},
               {"edit": {"path": "settings.py", "old": "TIMEOUT_SECONDS = 30", "new": "TIMEOUT_SECONDS = 45"}}])


class TestAiderContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for aider: its two history files
    are kept; its edits are reply text (no call ids); end to end, the tests it can perform (it has no shell)."""

    kept_files = (CHAT_HISTORY_ARTIFACT, LLM_HISTORY_ARTIFACT)
    reports_call_ids = False
    e2e_tests = ("save_file", "patch_file")


def patch_ctx(make_phase_ctx, **kw):
    """A phase of a patch_file-like test (settings.py seeded), in ``diff`` unless ``fmt`` says otherwise."""
    return make_phase_ctx(**{"test": PATCH_TEST, "fmt": "diff", **kw})


def runner_env(agent_driver, ctx) -> dict[str, str]:
    """The agent's environment as the runner builds it: allowlist, then the backend's env, then the driver's."""
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", "OPENAI_BASE_URL": "http://evil:1/v1"})
    env.update(ctx.backend.env)
    env.update(agent_driver.environment(ctx))
    return env


def test_env_routes_every_url_variable_to_the_phase_url_even_over_a_backend_setting(agent_driver, make_phase_ctx):
    ctx = patch_ctx(make_phase_ctx, backend_env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                                 "OPENAI_API_BASE": "http://x/v1"})
    env = runner_env(agent_driver, ctx)
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == "http://127.0.0.1:43210/v1" == ctx.openai_base_url
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["TZ"] == "UTC" and int(env["COLUMNS"]) >= 200
    assert env["OPENAI_API_KEY"] == "gripprobe-no-key"  # the oracle has no key; litellm insists on one
    argv = agent_driver.command(ctx).argv
    assert "--openai-api-base=http://127.0.0.1:43210/v1" in argv


def test_files_are_written_under_home_only(agent_driver, make_phase_ctx):
    ctx = patch_ctx(make_phase_ctx, model_name="qwen3:8b", fmt="udiff")
    before = sorted(p.name for p in ctx.workspace.iterdir())
    agent_driver.environment(ctx)
    files = files_for(ctx.home)
    assert files.root == ctx.home / ".gripprobe-aider"
    meta = json.loads(files.model_metadata.read_text())
    assert list(meta) == ["openai/qwen3:8b"] and meta["openai/qwen3:8b"]["litellm_provider"] == "openai"
    settings = files.model_settings.read_text()
    assert '- name: "openai/qwen3:8b"' in settings and "edit_format: udiff" in settings
    assert "max_retries: 0" in settings
    assert files.env_file.read_text() == ""
    assert sorted(p.name for p in ctx.workspace.iterdir()) == before


def test_the_key_is_only_in_the_environment(agent_driver, make_phase_ctx, tmp_path):
    ctx = patch_ctx(make_phase_ctx, api_key=KEY)
    env = runner_env(agent_driver, ctx)
    argv = agent_driver.command(ctx).argv
    assert env["OPENAI_API_KEY"] == KEY
    assert not [a for a in argv if KEY in a]
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def test_command_line(agent_driver, make_phase_ctx):
    ctx = patch_ctx(make_phase_ctx, fmt="diff")
    agent_driver.environment(ctx)
    cmd = agent_driver.command(ctx)
    argv = cmd.argv
    assert argv[0] == str(ctx.agent_executable)
    assert (cmd.stdin, cmd.cwd) == (None, None)  # stdin /dev/null, cwd = the workspace
    assert "--model=openai/perfect" in argv and "--edit-format=diff" in argv
    for flag in ("--no-git", "--yes-always", "--no-auto-commits", "--analytics-disable", "--no-check-update",
                 "--no-show-release-notes", "--no-pretty", "--no-fancy-input", "--no-show-model-warnings"):
        assert flag in argv
    files = files_for(ctx.home)
    for flag, path in (("--llm-history-file", files.llm_history), ("--chat-history-file", files.chat_history),
                       ("--model-metadata-file", files.model_metadata), ("--env-file", files.env_file)):
        assert f"{flag}={path}" in argv
    assert argv[-2:] == ["--file=settings.py", f"--message={ctx.prompt}"]  # a prompt line starting "--" stays text
    tool_case = agent_driver.command(patch_ctx(make_phase_ctx, fmt="tool")).argv
    assert "--edit-format=whole" in tool_case


def test_chat_files_are_the_seeded_text_files(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / ".hidden").mkdir()
    (ws / "a.txt").write_text("a")
    (ws / "src" / "pkg" / "m.py").write_text("x = 1\n")
    (ws / ".env").write_text("OPENAI_BASE_URL=http://evil\n")
    (ws / ".hidden" / "h.txt").write_text("h")
    (ws / "blob.bin").write_bytes(b"\xff\xfe\x00")
    (ws / "big.txt").write_text("x" * (300 * 1024))
    (ws / "link.txt").symlink_to(ws / "a.txt")
    assert chat_files(ws) == ["a.txt", "src/pkg/m.py"]
    assert chat_files(tmp_path / "missing") == []


def test_install_recipe_route_kept_files_and_markers(agent_driver, agent_spec, phase_ctx):
    ctx = phase_ctx
    assert agent_driver.install_recipe(agent_spec) == InstallRecipe(
        kind="pypi", package="aider-chat", version=PINNED_VERSION, executable="aider")
    assert agent_driver.route(ctx.agent, ctx.backend).routable is True
    arts = agent_driver.artifacts(ctx)
    assert set(arts) == {"aider.chat.history.md", "aider.llm.history.txt"}
    assert all(Path(p).is_relative_to(ctx.home) for p in arts.values())
    assert tuple(agent_driver.markers(ctx.agent)) == ()  # on purpose: see gripprobe_aider.plugin


def test_registered_as_a_markers_agent_whose_edit_is_edit_write(agent_driver):
    assert agent_driver.observability == "markers"
    # it sends no structured calls in any format: its own output confirms, and its driver says why
    assert set(agent_driver.calls_off_wire) == {"*"} and "no tools" in agent_driver.calls_off_wire["*"]
    assert agent_driver.tool_names.normalize("edit") == ("edit", "write")


def test_parse_reads_the_kept_llm_history_and_gives_the_last_reply(agent_driver, phase_ctx, tmp_path):
    src = FIXTURES / "captured" / "whole_perfect_patch_file"
    stdout, history = tmp_path / "measured.stdout", tmp_path / f"measured.{LLM_HISTORY_ARTIFACT}"
    shutil.copyfile(src / "stdout.txt", stdout)
    shutil.copyfile(src / "aider.llm.history.txt", history)
    capture = PhaseCapture(stdout_path=stdout, stderr_path=tmp_path / "measured.stderr",
                           process=ProcessResult(status="ok", exit_code=0), files={LLM_HISTORY_ARTIFACT: history})
    transcript = agent_driver.parse(phase_ctx, capture)
    response = next(e for e in transcript.events if e.event_type == "model_response")
    assert response.raw_artifact_ref.startswith(f"measured.{LLM_HISTORY_ARTIFACT}:")
    edit = [e for e in transcript.events if e.is_tool_event()][-1]
    assert (edit.status, edit.payload["arguments"]) == ("success", {"path": "settings.py"})
    assert edit.raw_artifact_ref.startswith("measured.stdout:") and edit.parent_id == response.event_id
    assert transcript.final_text and transcript.final_text == response.payload["text"]
    assert all((e.source_tier, e.source, e.phase) == ("C", "wrapper", "measured") for e in transcript.events)


def test_repo_spec_matches_the_plugin(agent_spec):
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("aider", NAME, "aider", PINNED_VERSION)
    assert list(spec.formats) == ["whole", "diff", "udiff"] and set(spec.tool_kinds) == {"write", "read"}

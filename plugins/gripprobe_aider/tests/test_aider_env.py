"""build_env / build_command and the other agent hooks: files under HOME, the base URL trap, no key on
disk or on the command line, the argv the real aider gets."""

from __future__ import annotations

import json
from pathlib import Path

from gripprobe_core import CliAgentSpec, InstallRecipe
from gripprobe_core.runner.env import base_env
from gripprobe_aider import plugin
from gripprobe_aider.config import chat_files, files_for

KEY = "sk-canary-aider-env-4242"


def runner_env(ctx, agent) -> dict[str, str]:
    """The agent's environment as the runner builds it: allowlist, then the backend's env, then ours."""
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", "OPENAI_BASE_URL": "http://evil:1/v1"})
    env.update(ctx.backend.env)
    env.update(plugin.build_env(agent=agent, ctx=ctx) or {})
    return env


def test_env_routes_every_url_variable_to_the_phase_url_even_over_a_backend_setting(ctx_factory, agent):
    ctx = ctx_factory(backend_env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_BASE": "http://x/v1"})
    env = runner_env(ctx, agent)
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == "http://127.0.0.1:43210/v1" == ctx.openai_base_url
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["TZ"] == "UTC" and int(env["COLUMNS"]) >= 200
    assert env["OPENAI_API_KEY"] == "gripprobe-no-key"  # the oracle has no key; litellm insists on one
    argv = plugin.build_command(agent=agent, ctx=ctx).argv
    assert "--openai-api-base=http://127.0.0.1:43210/v1" in argv


def test_files_are_written_under_home_only(ctx_factory, agent):
    ctx = ctx_factory(model_name="qwen3:8b", fmt="udiff")
    before = sorted(p.name for p in ctx.workspace.iterdir())
    plugin.build_env(agent=agent, ctx=ctx)
    files = files_for(ctx.home)
    assert files.root == ctx.home / ".gripprobe-aider"
    meta = json.loads(files.model_metadata.read_text())
    assert list(meta) == ["openai/qwen3:8b"] and meta["openai/qwen3:8b"]["litellm_provider"] == "openai"
    settings = files.model_settings.read_text()
    assert '- name: "openai/qwen3:8b"' in settings and "edit_format: udiff" in settings
    assert "max_retries: 0" in settings
    assert files.env_file.read_text() == ""
    assert sorted(p.name for p in ctx.workspace.iterdir()) == before


def test_the_key_is_only_in_the_environment(ctx_factory, agent, tmp_path):
    ctx = ctx_factory(api_key=KEY)
    env = runner_env(ctx, agent)
    argv = plugin.build_command(agent=agent, ctx=ctx).argv
    assert env["OPENAI_API_KEY"] == KEY
    assert not [a for a in argv if KEY in a]
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def test_command_line(ctx_factory, agent):
    ctx = ctx_factory(fmt="diff")
    plugin.build_env(agent=agent, ctx=ctx)
    cmd = plugin.build_command(agent=agent, ctx=ctx)
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
    tool_case = plugin.build_command(agent=agent, ctx=ctx_factory(fmt="tool")).argv
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


def test_agent_hooks_answer_only_for_aider(ctx, agent):
    other = CliAgentSpec(id="x", plugin="opencode", executable="opencode", tool_kinds=["execute"])
    assert plugin.agent_install_recipe(agent=agent) == InstallRecipe(
        kind="pypi", package="aider-chat", version="0.86.2", executable="aider")
    assert plugin.route_base_url(agent=agent, backend=ctx.backend).routable is True
    arts = plugin.phase_artifacts(agent=agent, ctx=ctx)
    assert set(arts) == {"aider.chat.history.md", "aider.llm.history.txt"}
    assert all(Path(p).is_relative_to(ctx.home) for p in arts.values())
    assert plugin.tier_c_patterns(agent=agent) is None
    for hook in (plugin.build_env, plugin.build_command, plugin.phase_artifacts):
        assert hook(agent=other, ctx=ctx) is None
    assert plugin.agent_install_recipe(agent=other) is None
    assert plugin.route_base_url(agent=other, backend=ctx.backend) is None


def test_registered_as_a_markers_agent(gpm):
    info = gpm.registry.agents["aider"]
    assert info.observability == "markers"

"""build_env / build_command / phase_artifacts and the other hooks, called through the real plugin manager."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gripprobe_core import BackendSpec, CliAgentSpec, PhaseCapture, ProcessResult
from gripprobe_gptme.config import DUMMY_API_KEY, QUIET_ENV
from gripprobe_gptme.plugin import find_conversation

SAMPLE_LOG = Path(__file__).resolve().parent / "fixtures" / "samples" / "md_success" / "conversation.jsonl"


def test_env_points_both_base_url_variables_at_the_phase_url(gpm, agent, ctx_factory):
    ctx = ctx_factory(base_url="http://127.0.0.1:5555")  # the recording proxy's root in auto mode
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    # gptme reads OPENAI_API_BASE first: a stray one in the user's shell would bypass the proxy
    assert env["OPENAI_API_BASE"] == env["OPENAI_BASE_URL"] == "http://127.0.0.1:5555/v1"
    assert env["OPENAI_API_KEY"] == DUMMY_API_KEY
    assert {k: env[k] for k in QUIET_ENV} == QUIET_ENV
    assert env["GPTME_TIKTOKEN_TIMEOUT"] == "0" and env["GPTME_LLM_MAX_RETRIES"] == "2"
    logs = Path(env["GPTME_LOGS_HOME"])
    assert logs.is_dir() and logs.is_relative_to(ctx.home)


def test_the_key_goes_to_the_environment_only(gpm, agent, ctx_factory, tmp_path):
    key = "sk-canary-gptme-4242"
    ctx = ctx_factory(api_key=key)
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    assert env["OPENAI_API_KEY"] == key
    command = gpm.hook.build_command(agent=agent, ctx=ctx)
    assert key not in " ".join(command.argv)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def test_command_is_the_installed_binary_in_the_cases_format(gpm, agent, ctx_factory):
    for fmt in ("tool", "markdown", "xml"):
        ctx = ctx_factory(fmt=fmt, model_name="lazy")
        cmd = gpm.hook.build_command(agent=agent, ctx=ctx)
        argv = cmd.argv
        assert argv[0] == str(ctx.agent_executable)
        assert argv[argv.index("--tool-format") + 1] == fmt
        assert argv[argv.index("--model") + 1] == "local/lazy"
        assert argv[argv.index("--workspace") + 1] == str(ctx.workspace)
        assert argv[argv.index("--output-format") + 1] == "json" and "--non-interactive" in argv
        assert argv[-2:] == ["--", ctx.prompt]  # the prompt may start with "-" or hold "--"
        assert argv[argv.index("--tools") + 1] == "save,append,patch,shell"  # the spec's default_args
        assert cmd.stdin is None and cmd.cwd is None


def test_every_phase_gets_a_new_conversation_name(gpm, agent, ctx_factory):
    """Reusing --name resumes that conversation: never twice the same."""
    ctx = ctx_factory()
    names = {(a := gpm.hook.build_command(agent=agent, ctx=ctx).argv)[a.index("--name") + 1] for _ in range(5)}
    assert len(names) == 5 and all(n.startswith("gripprobe-measured-") for n in names)


def test_phase_artifacts_finds_this_phases_conversation(gpm, agent, ctx_factory):
    ctx = ctx_factory(phase="warmup")
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    assert gpm.hook.phase_artifacts(agent=agent, ctx=ctx) == [{}]
    logs = Path(env["GPTME_LOGS_HOME"])
    for name in ("gripprobe-measured-aaa", "gripprobe-warmup-bbb"):
        (logs / name).mkdir()
        (logs / name / "conversation.jsonl").write_bytes(SAMPLE_LOG.read_bytes())
    (logs / "gripprobe-warmup-bbb" / "events.jsonl").write_text("{}\n")
    (answer,) = gpm.hook.phase_artifacts(agent=agent, ctx=ctx)
    assert answer == {"conversation.jsonl": logs / "gripprobe-warmup-bbb" / "conversation.jsonl",
                      "events.jsonl": logs / "gripprobe-warmup-bbb" / "events.jsonl"}
    assert find_conversation(ctx.home, "measured") == logs / "gripprobe-measured-aaa" / "conversation.jsonl"


def test_parse_and_final_text_hooks(gpm, agent, ctx_factory, tmp_path):
    ctx = ctx_factory(fmt="markdown")
    outputs = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "none2",
                           process=ProcessResult(status="ok", exit_code=0), extra={"conversation.jsonl": SAMPLE_LOG})
    results = [r for r in gpm.hook.parse_wrapper_events(agent=agent, ctx=ctx, outputs=outputs) if r]
    (events,) = [r for r in results if r and r[0].source_tier == "B"]
    assert [e.event_type for e in events].count("tool_call_start") == 2
    assert gpm.hook.final_output_text(agent=agent, ctx=ctx, outputs=outputs) == "The file is created."


def test_install_recipe_route_and_registration(gpm, agent):
    recipe = gpm.hook.agent_install_recipe(agent=agent)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("pypi", "gptme", "0.35.1", "gptme")
    unpinned = agent.model_copy(update={"version": None})
    assert gpm.hook.agent_install_recipe(agent=unpinned).version == "0.35.1"
    decision = gpm.hook.route_base_url(agent=agent, backend=BackendSpec(id="o", kind="oracle", model_id="perfect"))
    assert decision.routable
    info = gpm.registry.agents["gptme"]
    assert info.observability == "structured"


def test_other_agents_are_left_alone(gpm, ctx_factory):
    other = CliAgentSpec(id="x", plugin="reference", executable="gripprobe-refagent", tool_kinds=["execute"])
    ctx = ctx_factory(agent=other)
    env = gpm.hook.build_env(agent=other, ctx=ctx)
    assert "GPTME_LOGS_HOME" not in env
    assert "gptme" not in os.path.basename(gpm.hook.build_command(agent=other, ctx=ctx).argv[0])
    assert gpm.hook.phase_artifacts(agent=other, ctx=ctx) == []


def test_the_repo_spec_matches_the_plugin():
    path = Path(__file__).resolve().parents[3] / "specs" / "cli_agents" / "gptme.yaml"
    if not path.is_file():
        pytest.skip("not inside the GripProbe repository")
    from ruamel.yaml import YAML
    spec = CliAgentSpec.model_validate(YAML(typ="safe").load(path.read_text()))
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("gptme", "gptme", "gptme", "0.35.1")
    assert spec.formats == ["tool", "markdown", "xml"] and set(spec.tool_kinds) == {"execute", "read", "write"}
    assert spec.default_args == ["--tools", "save,append,patch,shell"]

"""The plugin's hooks through the real plugin manager: config files, environment, command, artifacts."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core import CliAgentSpec, PhaseCapture, ProcessResult, WrapperParseError
from codex_testkit import agent, ctx, ctx_factory, gpm, installed_codex  # noqa: F401  (pytest fixtures)
from gripprobe_codex import NAME, PINNED_VERSION
from gripprobe_codex.config import (
    API_KEY_ENV, DUMMY_API_KEY, PROVIDER_ID, build_config_toml, catalog_for, catalog_template, pick_template, toml_str,
)
from gripprobe_codex.plugin import EXEC_ARGS, ROLLOUT_ARTIFACT

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO_SPECS = Path(__file__).resolve().parents[3] / "specs"
OTHER = CliAgentSpec(id="x", plugin="not-codex", executable="x", tool_kinds=["execute"])


def config_of(ctx) -> dict:
    return tomllib.loads((ctx.home / ".codex" / "config.toml").read_text())


def test_registered_structured_and_answers_only_for_codex(gpm, ctx, tmp_path):
    from gripprobe_codex import plugin
    assert gpm.registry.agents[NAME].observability == "structured"
    outputs = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "none",
                           process=ProcessResult(status="ok"))
    for answer in (plugin.agent_install_recipe(agent=OTHER), plugin.build_env(agent=OTHER, ctx=ctx),
                   plugin.build_command(agent=OTHER, ctx=ctx), plugin.route_base_url(agent=OTHER, backend=ctx.backend),
                   plugin.phase_artifacts(agent=OTHER, ctx=ctx),
                   plugin.parse_wrapper_events(agent=OTHER, ctx=ctx, outputs=outputs),
                   plugin.final_output_text(agent=OTHER, ctx=ctx, outputs=outputs)):
        assert answer is None
    assert not (ctx.home / ".codex").exists()


def test_install_recipe_is_pinned(gpm, agent):
    recipe = gpm.hook.agent_install_recipe(agent=agent)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", "@openai/codex", PINNED_VERSION, "codex")


def test_routable_through_the_proxy(gpm, agent, ctx):
    assert gpm.hook.route_base_url(agent=agent, backend=ctx.backend).routable is True


def test_config_toml_points_codex_at_the_phase_backend_with_everything_quiet(gpm, agent, ctx):
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    config = config_of(ctx)
    assert config["model"] == "perfect" and config["model_provider"] == PROVIDER_ID
    assert (config["approval_policy"], config["sandbox_mode"]) == ("never", "danger-full-access")
    assert config["web_search"] == "disabled" and config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False} and config["agents"] == {"enabled": False}
    assert config["features"] == {"plugins": False, "goals": False}
    provider = config["model_providers"][PROVIDER_ID]
    assert provider["base_url"] == ctx.openai_base_url == "http://127.0.0.1:43210/v1"
    assert (provider["wire_api"], provider["env_key"]) == ("responses", API_KEY_ENV)
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (1, 1)
    assert env["CODEX_HOME"] == str(ctx.home / ".codex")
    assert env[API_KEY_ENV] == DUMMY_API_KEY


def test_base_url_overrides_in_the_environment_point_at_the_phase_backend(gpm, agent, ctx):
    """OPENAI_BASE_URL re-routes codex's built-in provider: if a backend's env sets it, ours wins."""
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == ctx.openai_base_url
    assert env["CODEX_SQLITE_HOME"] == env["CODEX_HOME"]


def test_the_key_travels_in_the_environment_and_in_no_file(gpm, agent, ctx_factory, tmp_path):
    key = "sk-canary-codex-4242"
    ctx = ctx_factory(api_key=key)
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    assert env[API_KEY_ENV] == key
    assert [k for k, v in env.items() if key in v] == [API_KEY_ENV]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key.encode() in p.read_bytes()]


def test_without_a_usable_codex_binary_no_catalog_is_written(gpm, agent, ctx):
    gpm.hook.build_env(agent=agent, ctx=ctx)
    assert "model_catalog_json" not in config_of(ctx)
    assert sorted(p.name for p in (ctx.home / ".codex").iterdir()) == ["config.toml"]
    assert catalog_template(str(ctx.agent_executable)) is None


def test_catalog_from_the_installed_binary_offers_apply_patch_for_the_phase_model(gpm, agent, ctx_factory,
                                                                                  installed_codex):
    if installed_codex is None:
        pytest.skip("codex is not installed: run `gripprobe agents install codex` (CI does)")
    ctx = ctx_factory(executable=installed_codex.executable, model_name="lazy")
    gpm.hook.build_env(agent=agent, ctx=ctx)
    path = Path(config_of(ctx)["model_catalog_json"])
    assert path.parent == ctx.home / ".codex"
    (entry,) = json.loads(path.read_text())["models"]
    assert (entry["slug"], entry["display_name"]) == ("lazy", "lazy")
    assert entry["apply_patch_tool_type"] == "freeform" and entry["shell_type"] == "unified_exec"
    assert entry["base_instructions"].strip() and entry["upgrade"] is None


def test_pick_template_prefers_the_measured_entry_then_any_freeform_one():
    free = {"slug": "a", "apply_patch_tool_type": "freeform", "shell_type": "unified_exec"}
    measured = {"slug": "gpt-5.5", "apply_patch_tool_type": "freeform", "shell_type": "unified_exec"}
    assert pick_template({"models": [free, measured]}) is measured
    assert pick_template({"models": [{"slug": "gpt-5.5"}, free]}) is free
    assert pick_template({"models": [{"slug": "b", "apply_patch_tool_type": "function"}]}) is None
    for junk in (None, [], {"models": "x"}, {"models": [1, "a", None]}):
        assert pick_template(junk) is None
    renamed = catalog_for({**measured, "upgrade": {"model": "x"}}, "perfect")["models"][0]
    assert renamed["slug"] == "perfect" and renamed["upgrade"] is None and measured["slug"] == "gpt-5.5"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_toml_strings_round_trip(value):
    assert tomllib.loads(f"v = {toml_str(value)}")["v"] == value


def test_config_survives_odd_model_names_and_paths():
    text = build_config_toml('http://127.0.0.1:1/v1?"x"', 'we"ird\\model\n', Path('/tmp/a "b"/cat.json'))
    config = tomllib.loads(text)
    assert config["model"] == 'we"ird\\model\n' and config["model_catalog_json"] == '/tmp/a "b"/cat.json'


def test_command_is_codex_exec_json_in_the_workspace_with_stdin_closed(gpm, agent, ctx_factory):
    ctx = ctx_factory(prompt="--help is not a flag here\nsecond line")
    command = gpm.hook.build_command(agent=agent, ctx=ctx)
    assert command.argv == [str(ctx.agent_executable), *EXEC_ARGS, "-C", str(ctx.workspace), "--", ctx.prompt]
    assert command.argv[1:5] == ["exec", "--json", "--strict-config", "--skip-git-repo-check"]
    assert command.stdin is None and command.cwd is None


def test_phase_artifacts_find_the_rollout(gpm, agent, ctx):
    assert gpm.hook.phase_artifacts(agent=agent, ctx=ctx) in ([{}], [])
    day = ctx.home / ".codex" / "sessions" / "2026" / "11" / "22"
    day.mkdir(parents=True)
    rollout = day / "rollout-2026-11-22T10-14-22-01a202bf.jsonl"
    shutil.copyfile(FIXTURES / "samples" / "success" / "rollout.jsonl", rollout)
    answers = [a for a in gpm.hook.phase_artifacts(agent=agent, ctx=ctx) if a]
    assert answers == [{ROLLOUT_ARTIFACT: rollout}]


def outputs_for(tmp_path: Path, case: str, with_rollout: bool) -> PhaseCapture:
    src = FIXTURES / "samples" / case
    out = tmp_path / "measured.stdout"
    shutil.copyfile(src / "stdout.txt", out)
    extra = {}
    if with_rollout:
        extra[ROLLOUT_ARTIFACT] = tmp_path / "measured.rollout.jsonl"
        shutil.copyfile(src / "rollout.jsonl", extra[ROLLOUT_ARTIFACT])
    return PhaseCapture(stdout_path=out, stderr_path=tmp_path / "measured.stderr",
                        process=ProcessResult(status="ok", exit_code=0), extra=extra)


def our_events(gpm, agent, ctx, outputs):
    answers = gpm.hook.parse_wrapper_events(agent=agent, ctx=ctx, outputs=outputs)
    return [e for got in answers for e in got if e.source_tier == "B"]


def test_parse_hook_uses_the_rollout_artifact(gpm, agent, ctx, tmp_path):
    events = our_events(gpm, agent, ctx, outputs_for(tmp_path, "success", True))
    assert [e.tool_call_id for e in events if e.is_tool_event()] == ["call_a3b8c7985e"] * 2
    assert events[1].raw_artifact_ref == "measured.rollout.jsonl:10"
    final = gpm.hook.final_output_text(agent=agent, ctx=ctx, outputs=outputs_for(tmp_path, "success", True))
    assert final == "I created hello.txt containing hello world."


def test_parse_hook_without_rollout_reads_stdout(gpm, agent, ctx, tmp_path):
    events = our_events(gpm, agent, ctx, outputs_for(tmp_path, "apply_patch", False))
    assert [(e.event_type, e.payload.get("name")) for e in events] == [
        ("tool_call_start", "edit"), ("tool_call_result", "edit"), ("model_response", None)]


def test_parse_hook_raises_wrapper_parse_error_when_stdout_is_missing(tmp_path, agent, ctx):
    from gripprobe_codex.plugin import parse_wrapper_events
    outputs = PhaseCapture(stdout_path=tmp_path / "nope", stderr_path=tmp_path / "nope2",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        parse_wrapper_events(agent=agent, ctx=ctx, outputs=outputs)


def test_repo_spec_matches_the_plugin():
    path = REPO_SPECS / "cli_agents" / "codex.yaml"
    if not path.is_file():
        pytest.skip("not inside the GripProbe repository")
    from gripprobe_core.specs.yaml_source import load_yaml_file
    spec = CliAgentSpec(**load_yaml_file(path)[0])
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("codex", NAME, "codex", PINNED_VERSION)
    assert set(spec.tool_kinds) >= {"execute", "write"}

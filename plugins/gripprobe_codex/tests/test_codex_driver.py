"""codex's driver: config files, environment, command, kept files, parsing (the kit's fixtures: the real
plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core.plugin import PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.testing import DriverContract
from gripprobe_codex import NAME, PINNED_VERSION
from gripprobe_codex.config import (
    API_KEY_ENV, DUMMY_API_KEY, PROVIDER_ID, build_config_toml, catalog_for, catalog_template, pick_template, toml_str,
)
from gripprobe_codex.plugin import EXEC_ARGS, ROLLOUT_ARTIFACT

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class TestCodexContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for codex: its rollout is a kept
    file; end to end, a shell test and a write (apply_patch) against the oracle."""

    kept_files = (ROLLOUT_ARTIFACT,)
    kept_paths = ("home/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-0b5e2a7c.jsonl",)
    e2e_tests = ("shell_pwd", "save_file")


def config_of(ctx) -> dict:
    return tomllib.loads((ctx.home / ".codex" / "config.toml").read_text())


def test_registered_structured_with_its_own_tool_names_and_dialect(agent_driver):
    assert agent_driver.observability == "structured"
    assert agent_driver.tool_names.normalize("exec_command") == ("shell", "execute")
    assert agent_driver.tool_names.normalize("apply_patch") == ("edit", "write")
    assert list(agent_driver.oracle_dialects()) == ["codex-apply-patch"]


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", "@openai/codex", PINNED_VERSION, "codex")


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_config_toml_points_codex_at_the_phase_backend_with_everything_quiet(agent_driver, phase_ctx):
    ctx = phase_ctx
    env = agent_driver.environment(ctx)
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


def test_base_url_overrides_in_the_environment_point_at_the_phase_backend(agent_driver, phase_ctx):
    """OPENAI_BASE_URL re-routes codex's built-in provider: if a backend's env sets it, ours wins."""
    ctx = phase_ctx
    env = agent_driver.environment(ctx)
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == ctx.openai_base_url
    assert env["CODEX_SQLITE_HOME"] == env["CODEX_HOME"]


def test_the_key_travels_in_the_environment_and_in_no_file(agent_driver, make_phase_ctx, tmp_path):
    key = "sk-canary-codex-4242"
    ctx = make_phase_ctx(api_key=key)
    env = agent_driver.environment(ctx)
    assert env[API_KEY_ENV] == key
    assert [k for k, v in env.items() if key in v] == [API_KEY_ENV]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key.encode() in p.read_bytes()]


def test_without_a_usable_codex_binary_no_catalog_is_written(agent_driver, phase_ctx):
    ctx = phase_ctx
    agent_driver.environment(ctx)
    assert "model_catalog_json" not in config_of(ctx)
    assert sorted(p.name for p in (ctx.home / ".codex").iterdir()) == ["config.toml"]
    assert catalog_template(str(ctx.agent_executable)) is None


def test_catalog_from_the_installed_binary_offers_apply_patch_for_the_phase_model(agent_driver, make_phase_ctx,
                                                                                  agent_install):
    ctx = make_phase_ctx(executable=agent_install.executable, model_name="lazy")
    agent_driver.environment(ctx)
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


def test_command_is_codex_exec_json_in_the_workspace_with_stdin_closed(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt="--help is not a flag here\nsecond line")
    command = agent_driver.command(ctx)
    assert command.argv == [str(ctx.agent_executable), *EXEC_ARGS, "-C", str(ctx.workspace), "--", ctx.prompt]
    assert command.argv[1:5] == ["exec", "--json", "--strict-config", "--skip-git-repo-check"]
    assert command.stdin is None and command.cwd is None


def test_phase_artifacts_find_the_rollout(agent_driver, phase_ctx):
    ctx = phase_ctx
    assert agent_driver.artifacts(ctx) == {}
    day = ctx.home / ".codex" / "sessions" / "2026" / "11" / "22"
    day.mkdir(parents=True)
    rollout = day / "rollout-2026-11-22T10-14-22-01a202bf.jsonl"
    shutil.copyfile(FIXTURES / "samples" / "success" / "rollout.jsonl", rollout)
    assert agent_driver.artifacts(ctx) == {ROLLOUT_ARTIFACT: rollout}


def outputs_for(tmp_path: Path, case: str, with_rollout: bool) -> PhaseCapture:
    src = FIXTURES / "samples" / case
    out = tmp_path / "measured.stdout"
    shutil.copyfile(src / "stdout.txt", out)
    files = {}
    if with_rollout:
        files[ROLLOUT_ARTIFACT] = tmp_path / "measured.rollout.jsonl"
        shutil.copyfile(src / "rollout.jsonl", files[ROLLOUT_ARTIFACT])
    return PhaseCapture(stdout_path=out, stderr_path=tmp_path / "measured.stderr",
                        process=ProcessResult(status="ok", exit_code=0), files=files)


def test_parse_uses_the_rollout_artifact(agent_driver, phase_ctx, tmp_path):
    transcript = agent_driver.parse(phase_ctx, outputs_for(tmp_path, "success", True))
    events = transcript.events
    assert [e.tool_call_id for e in events if e.is_tool_event()] == ["call_a3b8c7985e"] * 2
    assert events[1].raw_artifact_ref == "measured.rollout.jsonl:10"
    assert transcript.final_text == "I created hello.txt containing hello world."


def test_parse_without_rollout_reads_stdout(agent_driver, phase_ctx, tmp_path):
    events = agent_driver.parse(phase_ctx, outputs_for(tmp_path, "apply_patch", False)).events
    assert [(e.event_type, e.payload.get("name")) for e in events] == [
        ("tool_call_start", "edit"), ("tool_call_result", "edit"), ("model_response", None)]


def test_parse_raises_wrapper_parse_error_when_stdout_is_missing(agent_driver, phase_ctx, tmp_path):
    capture = PhaseCapture(stdout_path=tmp_path / "nope", stderr_path=tmp_path / "nope2",
                           process=ProcessResult(status="ok"))
    with pytest.raises(WrapperParseError):
        agent_driver.parse(phase_ctx, capture)


def test_repo_spec_matches_the_plugin(agent_spec):
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("codex", NAME, "codex", PINNED_VERSION)
    assert set(spec.tool_kinds) >= {"execute", "write"}

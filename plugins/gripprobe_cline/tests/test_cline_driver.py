"""Cline's driver: settings files, environment, command, install recipe, kept files (the kit's fixtures: the
real plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

import json
from pathlib import Path

from gripprobe_core.testing import base_env
from gripprobe_cline import NAME, PINNED_VERSION
from gripprobe_cline.config import API_KEY_ENV, DISABLED_TOOLS, DUMMY_API_KEY, OVERRIDE_ENV, QUIET_ENV
from gripprobe_cline.plugin import MESSAGES_ARTIFACT, SESSION_ARTIFACT

PROMPT = "-Run `pwd` and save it to pwd.txt."  # starts with a dash: must not be read as an option


def settings(ctx, name: str) -> dict:
    return json.loads((ctx.home / ".cline" / "data" / "settings" / name).read_text())


def test_registered_as_a_structured_agent_with_its_dialect(agent_driver):
    assert agent_driver.observability == "structured" and "cline" in agent_driver.install_hint
    assert list(agent_driver.oracle_dialects()) == ["cline"]
    assert agent_driver.calls_off_wire == {}


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_provider_points_at_the_phase_base_url_without_a_key(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:50123", api_key="sk-canary-cline-1")
    env = agent_driver.environment(ctx)
    providers = settings(ctx, "providers.json")
    assert providers["lastUsedProvider"] == "openai-compatible"
    assert providers["providers"]["openai-compatible"]["settings"] == {
        "provider": "openai-compatible", "model": "perfect", "baseUrl": "http://127.0.0.1:50123/v1"}
    assert env[API_KEY_ENV] == "sk-canary-cline-1"
    written = [p for p in ctx.home.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-canary-cline-1" in p.read_bytes()]


def test_everything_that_calls_home_is_switched_off(agent_driver, phase_ctx):
    """OpenTelemetry (telemetryOptOut), PostHog feature flags (E2E_TEST), the npm update check
    (CLINE_NO_AUTO_UPDATE, autoUpdateEnabled), the detached hub daemon (CLINE_SESSION_BACKEND_MODE=local)."""
    env = agent_driver.environment(phase_ctx)
    glob = settings(phase_ctx, "global-settings.json")
    assert glob["telemetryOptOut"] is True and glob["autoUpdateEnabled"] is False
    assert env["E2E_TEST"] == "true" and env["CLINE_NO_AUTO_UPDATE"] == "1"
    assert env["CLINE_SESSION_BACKEND_MODE"] == "local"
    assert QUIET_ENV.items() <= env.items()


def test_tools_an_unattended_run_cannot_use_are_disabled(agent_driver, phase_ctx):
    agent_driver.environment(phase_ctx)
    disabled = settings(phase_ctx, "global-settings.json")["disabledTools"]
    assert {"ask_question", "spawn_agent", "team_spawn_teammate", "team_run_task"} <= set(disabled)
    assert list(DISABLED_TOOLS) == disabled
    assert not {"run_commands", "editor", "read_files", "apply_patch"} & set(disabled)


def test_state_lives_under_the_phase_home(agent_driver, phase_ctx):
    env = agent_driver.environment(phase_ctx)
    assert env["CLINE_DIR"] == str(phase_ctx.home / ".cline")
    assert env["CLINE_DATA_DIR"] == str(phase_ctx.home / ".cline" / "data")
    for name in ("CLINE_DIR", "CLINE_DATA_DIR"):
        assert Path(env[name]).is_relative_to(phase_ctx.home)


def test_variables_that_would_move_clines_state_are_blanked_in_the_final_env(agent_driver, make_phase_ctx):
    """Trap: a backend's env carrying CLINE_PROVIDER_SETTINGS_PATH, CLINE_BIN_PATH (the npm launcher then runs
    another binary) or CLINE_SANDBOX must not win over the phase's settings. The runner applies base env,
    then backend env, then the driver's environment."""
    sneaky = {"CLINE_PROVIDER_SETTINGS_PATH": "/etc/providers.json", "CLINE_BIN_PATH": "/usr/bin/false",
              "CLINE_SANDBOX": "1", "CLINE_DATA_DIR": "/var/tmp/cline", "CLINE_SESSION_BACKEND_MODE": "hub"}
    ctx = make_phase_ctx(backend_env=sneaky)
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", **sneaky})
    env.update(ctx.backend.env)
    env.update(agent_driver.environment(ctx))
    assert all(env[name] == "" for name in OVERRIDE_ENV)
    assert env["CLINE_DATA_DIR"] == str(ctx.home / ".cline" / "data")
    assert env["CLINE_SESSION_BACKEND_MODE"] == "local"


def test_keyless_backend_gets_a_dummy_key(agent_driver, phase_ctx):
    assert agent_driver.environment(phase_ctx)[API_KEY_ENV] == DUMMY_API_KEY


def test_model_names_with_tags_keep_their_tag(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(model_name="qwen3:8b")
    agent_driver.environment(ctx)
    assert settings(ctx, "providers.json")["providers"]["openai-compatible"]["settings"]["model"] == "qwen3:8b"
    assert agent_driver.command(ctx).argv[4:6] == ["-m", "qwen3:8b"]


def test_command_runs_the_installed_launcher_with_the_prompt_after_a_double_dash(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt=PROMPT)
    cmd = agent_driver.command(ctx)
    assert cmd.argv == [str(ctx.agent_executable), "--json", "-P", "openai-compatible", "-m", "perfect",
                        "--", PROMPT]
    assert "--yolo" not in cmd.argv and "-y" not in cmd.argv  # yolo never ends a run without a tool call
    assert cmd.stdin is None and cmd.cwd is None  # stdin /dev/null, cwd = the workspace


def test_default_args_go_before_the_prompt(agent_driver, agent_spec, make_phase_ctx):
    ctx = make_phase_ctx(agent=agent_spec.model_copy(update={"default_args": ["--retries", "2"]}))
    assert agent_driver.command(ctx).argv[-4:] == ["--retries", "2", "--", ctx.prompt]


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("npm", "cline", PINNED_VERSION, "cline")


def test_phase_artifacts_keep_the_newest_session_files(agent_driver, phase_ctx):
    ctx = phase_ctx
    assert agent_driver.artifacts(ctx) == {}
    root = ctx.home / ".cline" / "data" / "sessions"
    for sid in ("1795741184050_aaaaa", "1795741199999_bbbbb"):
        (root / sid).mkdir(parents=True)
        (root / sid / f"{sid}.messages.json").write_text('{"messages": []}')
        (root / sid / f"{sid}.json").write_text('{"status": "completed"}')
    newest = root / "1795741199999_bbbbb"
    assert agent_driver.artifacts(ctx) == {MESSAGES_ARTIFACT: newest / "1795741199999_bbbbb.messages.json",
                                           SESSION_ARTIFACT: newest / "1795741199999_bbbbb.json"}


def test_repo_spec_pins_the_same_version(agent_spec):
    assert agent_spec.plugin == NAME and agent_spec.executable == "cline"
    assert agent_spec.version == PINNED_VERSION and agent_spec.formats == ["tool"]

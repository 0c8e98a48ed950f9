"""opencode's driver: config files, environment, command, install recipe, kept files (the kit's fixtures:
the real plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

import json
from pathlib import Path

from gripprobe_core.testing import base_env
from gripprobe_opencode import NAME, PINNED_VERSION
from gripprobe_opencode.config import API_KEY_ENV, DUMMY_API_KEY, MANAGED_CONFIG_ENV, QUIET_ENV

#: A prompt of two lines, without the final newline opencode's stdin needs.
PROMPT = "Run `pwd` and save it to pwd.txt.\nDo not type it."


def config_of(ctx) -> dict:
    return json.loads((Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").read_text())


def test_registered_as_a_structured_agent(agent_driver):
    assert agent_driver.observability == "structured" and "opencode" in agent_driver.install_hint


def test_routable_through_the_proxy(agent_driver, phase_ctx):
    assert agent_driver.route(phase_ctx.agent, phase_ctx.backend).routable is True


def test_config_points_the_provider_at_the_phase_base_url(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:50123")  # the runner sets the proxy's root here
    env = agent_driver.environment(ctx)
    cfg = config_of(ctx)
    provider = cfg["provider"]["gripprobe"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:50123/v1" == ctx.openai_base_url
    assert provider["models"]["perfect"]["tool_call"] is True
    assert cfg["model"] == cfg["small_model"] == "gripprobe/perfect"
    assert set(cfg["permission"].values()) == {"allow"} and "bash" in cfg["permission"]
    assert cfg["autoupdate"] is False and cfg["share"] == "disabled" and cfg["snapshot"] is False
    for name, value in QUIET_ENV.items():
        assert env[name] == value == "1"
    assert {"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_SHARE"} <= set(env)


def test_config_folder_is_preseeded_so_opencode_runs_no_npm_install(agent_driver, phase_ctx):
    ctx = phase_ctx
    agent_driver.environment(ctx)
    folder = Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode"
    assert (folder / "node_modules").is_dir()
    pkg = json.loads((folder / "package.json").read_text())
    lock = json.loads((folder / "package-lock.json").read_text())
    assert "@opencode-ai/plugin" in pkg["dependencies"]
    assert "@opencode-ai/plugin" in lock["packages"][""]["dependencies"]
    assert folder.is_relative_to(ctx.home)


def test_api_key_travels_only_in_the_environment(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(api_key="sk-canary-opencode-123")
    env = agent_driver.environment(ctx)
    assert env[API_KEY_ENV] == "sk-canary-opencode-123"
    assert config_of(ctx)["provider"]["gripprobe"]["options"]["apiKey"] == "{env:" + API_KEY_ENV + "}"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-canary-opencode-123" in p.read_bytes()]


def test_machine_wide_managed_config_is_replaced_by_an_empty_folder_in_home(agent_driver, phase_ctx):
    """opencode reads /etc/opencode (outranking the user config) unless told another folder."""
    ctx = phase_ctx
    env = agent_driver.environment(ctx)
    managed = Path(env[MANAGED_CONFIG_ENV])
    assert managed.is_dir() and managed.is_relative_to(ctx.home) and not list(managed.iterdir())


def test_keyless_backend_gets_a_dummy_key(agent_driver, phase_ctx):
    assert agent_driver.environment(phase_ctx)[API_KEY_ENV] == DUMMY_API_KEY


def test_variables_that_would_reroute_opencode_are_blanked_in_the_final_env(agent_driver, make_phase_ctx):
    """Trap: a backend's env (or a leaky runner env) carrying OPENCODE_CONFIG_CONTENT / OPENAI_BASE_URL
    must not override the written config. The runner applies base env, then backend env, then the
    driver's environment."""
    sneaky = {"OPENCODE_CONFIG_CONTENT": '{"provider": {}}', "OPENCODE_CONFIG": "/etc/evil.json",
              "OPENCODE_CONFIG_DIR": "/etc", "OPENAI_BASE_URL": "http://198.51.100.7/v1"}
    ctx = make_phase_ctx(backend_env=sneaky)
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", **sneaky})
    env.update(ctx.backend.env)
    env.update(agent_driver.environment(ctx))
    assert all(env[name] == "" for name in sneaky)
    assert env["HOME"] == str(ctx.home) and env["XDG_CONFIG_HOME"] == str(ctx.home / ".config")


def test_model_names_with_tags_keep_their_tag(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(model_name="qwen3:8b")
    agent_driver.environment(ctx)
    cfg = config_of(ctx)
    assert cfg["model"] == "gripprobe/qwen3:8b" and "qwen3:8b" in cfg["provider"]["gripprobe"]["models"]


def test_command_runs_the_installed_binary_with_the_prompt_on_stdin(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(prompt=PROMPT)
    cmd = agent_driver.command(ctx)
    assert cmd.argv == [str(ctx.agent_executable), "run", "--format", "json", "--auto", "--thinking"]
    assert cmd.stdin == (ctx.prompt + "\n").encode()
    assert not any(ctx.prompt.splitlines()[0] in a for a in cmd.argv)
    assert cmd.cwd is None  # the workspace


def test_default_args_are_appended(agent_driver, agent_spec, make_phase_ctx):
    ctx = make_phase_ctx(agent=agent_spec.model_copy(update={"default_args": ["--pure"]}))
    assert agent_driver.command(ctx).argv[-1] == "--pure"


def test_install_recipe_is_pinned(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", "opencode-ai", PINNED_VERSION, "opencode")


def test_phase_artifacts_keep_the_opencode_log(agent_driver, phase_ctx):
    ctx = phase_ctx
    assert agent_driver.artifacts(ctx) == {}
    log_dir = Path(ctx.xdg["XDG_DATA_HOME"]) / "opencode" / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "opencode.log").write_text("level=INFO message=init\n")
    assert agent_driver.artifacts(ctx) == {"opencode.log": log_dir / "opencode.log"}


def test_repo_spec_pins_the_same_version(agent_spec):
    assert agent_spec.plugin == NAME and agent_spec.executable == "opencode"
    assert agent_spec.version == PINNED_VERSION

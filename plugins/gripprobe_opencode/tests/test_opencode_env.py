"""build_env / build_command / install recipe / artifacts, called through the real plugin manager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gripprobe_core import BackendSpec
from gripprobe_core.runner.env import base_env
from gripprobe_opencode import PINNED_VERSION
from gripprobe_opencode.config import API_KEY_ENV, DUMMY_API_KEY, MANAGED_CONFIG_ENV, QUIET_ENV

REPO_SPECS = Path(__file__).resolve().parents[3] / "specs"


def config_of(ctx) -> dict:
    return json.loads((Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").read_text())


def test_registered_as_a_structured_agent(gpm):
    info = gpm.registry.agents["opencode"]
    assert info.observability == "structured" and "opencode" in info.install_hint


def test_config_points_the_provider_at_the_phase_base_url(gpm, ctx, agent):
    ctx.base_url = "http://127.0.0.1:50123"  # the runner sets the proxy's root here
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
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


def test_config_folder_is_preseeded_so_opencode_runs_no_npm_install(gpm, ctx, agent):
    gpm.hook.build_env(agent=agent, ctx=ctx)
    folder = Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode"
    assert (folder / "node_modules").is_dir()
    pkg = json.loads((folder / "package.json").read_text())
    lock = json.loads((folder / "package-lock.json").read_text())
    assert "@opencode-ai/plugin" in pkg["dependencies"]
    assert "@opencode-ai/plugin" in lock["packages"][""]["dependencies"]
    assert folder.is_relative_to(ctx.home)


def test_api_key_travels_only_in_the_environment(gpm, ctx_factory, agent, tmp_path):
    ctx = ctx_factory(api_key="sk-canary-opencode-123")
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    assert env[API_KEY_ENV] == "sk-canary-opencode-123"
    assert config_of(ctx)["provider"]["gripprobe"]["options"]["apiKey"] == "{env:" + API_KEY_ENV + "}"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-canary-opencode-123" in p.read_bytes()]


def test_machine_wide_managed_config_is_replaced_by_an_empty_folder_in_home(gpm, ctx, agent):
    """opencode reads /etc/opencode (outranking the user config) unless told another folder."""
    env = gpm.hook.build_env(agent=agent, ctx=ctx)
    managed = Path(env[MANAGED_CONFIG_ENV])
    assert managed.is_dir() and managed.is_relative_to(ctx.home) and not list(managed.iterdir())


def test_keyless_backend_gets_a_dummy_key(gpm, ctx, agent):
    assert gpm.hook.build_env(agent=agent, ctx=ctx)[API_KEY_ENV] == DUMMY_API_KEY


def test_variables_that_would_reroute_opencode_are_blanked_in_the_final_env(gpm, ctx_factory, agent):
    """Trap: a backend's env (or a leaky runner env) carrying OPENCODE_CONFIG_CONTENT / OPENAI_BASE_URL
    must not override the written config. The runner applies base env, then backend env, then build_env."""
    sneaky = {"OPENCODE_CONFIG_CONTENT": '{"provider": {}}', "OPENCODE_CONFIG": "/etc/evil.json",
              "OPENCODE_CONFIG_DIR": "/etc", "OPENAI_BASE_URL": "http://198.51.100.7/v1"}
    ctx = ctx_factory(backend_env=sneaky)
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source={"PATH": "/usr/bin", **sneaky})
    env.update(ctx.backend.env)
    env.update(gpm.hook.build_env(agent=agent, ctx=ctx))
    assert all(env[name] == "" for name in sneaky)
    assert env["HOME"] == str(ctx.home) and env["XDG_CONFIG_HOME"] == str(ctx.home / ".config")


def test_model_names_with_tags_keep_their_tag(gpm, ctx_factory, agent):
    ctx = ctx_factory(model_name="qwen3:8b")
    gpm.hook.build_env(agent=agent, ctx=ctx)
    cfg = config_of(ctx)
    assert cfg["model"] == "gripprobe/qwen3:8b" and "qwen3:8b" in cfg["provider"]["gripprobe"]["models"]


def test_command_runs_the_installed_binary_with_the_prompt_on_stdin(gpm, ctx, agent):
    cmd = gpm.hook.build_command(agent=agent, ctx=ctx)
    assert cmd.argv == [str(ctx.agent_executable), "run", "--format", "json", "--auto"]
    assert cmd.stdin == (ctx.prompt + "\n").encode()
    assert not any(ctx.prompt.splitlines()[0] in a for a in cmd.argv)
    assert cmd.cwd is None  # the workspace


def test_default_args_are_appended(gpm, ctx, agent):
    with_args = agent.model_copy(update={"default_args": ["--pure"]})
    assert gpm.hook.build_command(agent=with_args, ctx=ctx).argv[-1] == "--pure"


def test_install_recipe_is_pinned(gpm, agent):
    recipe = gpm.hook.agent_install_recipe(agent=agent)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == (
        "npm", "opencode-ai", PINNED_VERSION, "opencode")


def test_hooks_stay_silent_for_other_agents(gpm, ctx, agent):
    other = agent.model_copy(update={"id": "ref", "plugin": "reference", "version": None})
    impls = {name: {i.plugin_name: i.function for i in getattr(gpm.hook, name).get_hookimpls()}["opencode"]
             for name in ("build_env", "build_command", "route_base_url", "phase_artifacts",
                          "agent_install_recipe", "final_output_text")}
    backend = BackendSpec(id="o", kind="oracle", model_id="perfect")
    assert impls["build_env"](agent=other, ctx=ctx) is None
    assert impls["build_command"](agent=other, ctx=ctx) is None
    assert impls["route_base_url"](agent=other, backend=backend) is None
    assert impls["phase_artifacts"](agent=other, ctx=ctx) is None
    assert impls["agent_install_recipe"](agent=other) is None
    assert not list(Path(ctx.xdg["XDG_CONFIG_HOME"]).iterdir())  # nothing written for someone else
    assert impls["route_base_url"](agent=agent, backend=backend).routable is True


def test_phase_artifacts_keep_the_opencode_log(gpm, ctx, agent):
    assert gpm.hook.phase_artifacts(agent=agent, ctx=ctx) == [{}]
    log_dir = Path(ctx.xdg["XDG_DATA_HOME"]) / "opencode" / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "opencode.log").write_text("level=INFO message=init\n")
    assert gpm.hook.phase_artifacts(agent=agent, ctx=ctx) == [{"opencode.log": log_dir / "opencode.log"}]


def test_repo_spec_pins_the_same_version():
    spec = REPO_SPECS / "cli_agents" / "opencode.yaml"
    if not spec.exists():
        pytest.skip("not inside the GripProbe repository (no specs/cli_agents/opencode.yaml)")
    data = YAML(typ="safe").load(spec.read_text())
    assert data["plugin"] == "opencode" and data["executable"] == "opencode"
    assert str(data["version"]) == PINNED_VERSION

"""The drivers without running an agent: what each writes under HOME, its command line and environment (the key
only in the environment, everything that phones home switched off, every model name the phase's), its install
recipe, and how it meets each interaction policy."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from gripprobe_acp import CLAUDE_VERSION, CODEX_VERSION
from gripprobe_acp.plugin import (
    NEVER_ASKS_CODEX, ClaudeAcpDriver, CodexAcpDriver, GenericAcpDriver, OpencodeAcpDriver, QwenAcpDriver,
)
from gripprobe_acp.session import AcpSession
from gripprobe_core.plugin import InteractionSpec

from conftest import SPECS, for_driver

KEY = "sk-gripprobe-acp-canary-4242"
POLICIES = [None, InteractionSpec(policy="auto-approve"), InteractionSpec(policy="auto-deny"),
            InteractionSpec.model_validate({"policy": "scripted", "rules": [{"tool_kind": "execute", "decision": "deny"}]}),
            InteractionSpec(policy="manual")]


def files_under(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file()}


def with_policy(ctx, spec):
    return dataclasses.replace(ctx, interaction=spec)


# --------------------------------------------------------------------------------------------- Qwen Code

class TestQwen:
    pytestmark = for_driver("acp-qwen")

    def test_settings_ask_before_tools_and_switch_off_what_calls_home(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx(api_key=KEY, model_name="qwen3:8b")
        env = agent_driver.environment(ctx)
        settings = json.loads((ctx.home / ".qwen" / "settings.json").read_text())
        assert settings["tools"]["approvalMode"] == "default"
        assert settings["model"] == {"name": "qwen3:8b", "generationConfig": {"maxRetries": 0}}
        assert settings["privacy"]["usageStatisticsEnabled"] is False and settings["telemetry"]["enabled"] is False
        assert settings["general"]["enableAutoUpdate"] is False and settings["ide"]["enabled"] is False
        assert settings["ui"]["enableFollowupSuggestions"] is False  # a third model call after the turn
        assert settings["memory"] == {"enableManagedAutoMemory": False, "enableManagedAutoDream": False}
        assert env["OPENAI_BASE_URL"] == ctx.openai_base_url and env["OPENAI_MODEL"] == "qwen3:8b"
        assert env["OPENAI_API_KEY"] == KEY and env["QWEN_USAGE_STATISTICS_ENABLED"] == "false"
        assert env["QWEN_HOME"] == str(ctx.home / ".qwen")
        assert not any(KEY in text for text in files_under(ctx.home).values())

    def test_command_is_qwen_acp_with_a_session_in_mode_default(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx(model_name="perfect")
        command = agent_driver.command(ctx)
        assert command.argv == [str(ctx.agent_executable), "--acp", "--auth-type", "openai", "--model", "perfect"]
        assert command.stdin is None and isinstance(command.session, AcpSession)
        assert command.session.mode == "default" and command.session.title is None

    def test_its_dialect_makes_file_paths_absolute(self, agent_driver):
        assert list(agent_driver.oracle_dialects()) == ["acp-absolute-paths"]


# ---------------------------------------------------------------------------------------------- opencode

class TestOpencode:
    pytestmark = for_driver("acp-opencode")

    def test_config_asks_for_every_edit_command_and_fetch_and_goes_on_after_a_denial(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx(api_key=KEY)
        env = agent_driver.environment(ctx)
        config = json.loads((Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").read_text())
        assert config["permission"] == {"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask"}
        assert config["experimental"] == {"continue_loop_on_deny": True}
        assert config["model"] == config["small_model"] == "gripprobe/perfect"
        assert config["provider"]["gripprobe"]["options"] == {"baseURL": ctx.openai_base_url,
                                                              "apiKey": "{env:GRIPPROBE_OPENCODE_API_KEY}"}
        assert (config["autoupdate"], config["share"], config["snapshot"]) == (False, "disabled", False)
        assert env["GRIPPROBE_OPENCODE_API_KEY"] == KEY
        for name in ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                     "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_SHARE"):
            assert env[name] == "1"
        assert Path(env["OPENCODE_TEST_MANAGED_CONFIG_DIR"]).parent == ctx.home
        assert not any(KEY in text for text in files_under(ctx.home).values())

    def test_command_is_opencode_acp(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx()
        command = agent_driver.command(ctx)
        assert command.argv == [str(ctx.agent_executable), "acp"] and command.session.mode is None


# ------------------------------------------------------------------------------------------- Claude Code

class TestClaude:
    pytestmark = for_driver("acp-claude")

    def test_environment_drives_the_pinned_claude_with_every_model_the_phases(self, agent_driver, make_phase_ctx,
                                                                               tmp_path):
        ctx = make_phase_ctx(api_key=KEY, model_name="perfect", executable=tmp_path / "nm" / ".bin" / "claude-agent-acp")
        env = agent_driver.environment(ctx)
        assert env["CLAUDE_CODE_EXECUTABLE"] == str(tmp_path / "nm" / ".bin" / "claude")
        assert env["ANTHROPIC_BASE_URL"] == ctx.base_url.rstrip("/") and env["ANTHROPIC_API_KEY"] == KEY
        models = {k: v for k, v in env.items() if k.endswith("_MODEL")}
        assert len(models) == 11 and set(models.values()) == {"perfect"}
        assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_TELEMETRY"] == "1"
        assert env["CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION"] == "false" and env["CLAUDE_CODE_MAX_RETRIES"] == "1"
        assert json.loads((ctx.home / ".claude.json").read_text())["hasCompletedOnboarding"] is True
        assert not any(KEY in text for text in files_under(ctx.home).values())

    def test_command_is_the_adapter_in_mode_default(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx()
        command = agent_driver.command(ctx)
        assert command.argv == [str(ctx.agent_executable)] and command.session.mode == "default"

    def test_install_puts_the_pinned_claude_beside_the_adapter_without_the_sdks_own(self, agent_driver, agent_spec):
        recipe = agent_driver.install_recipe(agent_spec)
        assert (recipe.package, recipe.version, recipe.executable) == (
            "@agentclientprotocol/claude-agent-acp", "0.101.0", "claude-agent-acp")
        assert recipe.extra[0] == f"@anthropic-ai/claude-code@{CLAUDE_VERSION}"
        assert recipe.extra[1].startswith("@anthropic-ai/claude-code-linux-") and recipe.extra[1].endswith(f"@{CLAUDE_VERSION}")
        assert recipe.npm_args == ("--omit=optional",)


# -------------------------------------------------------------------------------------------------- codex

class TestCodex:
    pytestmark = for_driver("acp-codex")

    def test_environment_and_config_run_the_pinned_codex_without_approvals(self, agent_driver, make_phase_ctx, tmp_path):
        ctx = make_phase_ctx(api_key=KEY, executable=tmp_path / "nm" / ".bin" / "codex-acp")
        env = agent_driver.environment(ctx)
        assert env["CODEX_PATH"] == str(tmp_path / "nm" / ".bin" / "codex")
        assert env["INITIAL_AGENT_MODE"] == "agent-full-access" and env["NO_BROWSER"] == "1"
        assert env["CODEX_HOME"] == str(ctx.home / ".codex") and env["GRIPPROBE_CODEX_API_KEY"] == KEY
        config = tomllib.loads((ctx.home / ".codex" / "config.toml").read_text())
        assert (config["approval_policy"], config["sandbox_mode"]) == ("never", "danger-full-access")
        assert config["analytics"] == {"enabled": False} and config["features"] == {"plugins": False, "goals": False}
        assert config["check_for_update_on_startup"] is False and config["web_search"] == "disabled"
        assert config["model_providers"]["gripprobe"]["base_url"] == ctx.openai_base_url
        assert not any(KEY in text for text in files_under(ctx.home).values())

    def test_the_session_names_itself_so_the_adapter_asks_no_title_model(self, agent_driver, make_phase_ctx):
        ctx = make_phase_ctx()
        session = agent_driver.command(ctx).session
        assert session.title == f"GripProbe {ctx.test.id}" and session.mode is None

    def test_install_pins_codex_beside_the_adapter(self, agent_driver, agent_spec):
        recipe = agent_driver.install_recipe(agent_spec)
        assert (recipe.package, recipe.version) == ("@agentclientprotocol/codex-acp", "2.6.0")
        assert recipe.extra[0] == f"@openai/codex@{CODEX_VERSION}" and recipe.npm_args == ("--omit=optional",)
        assert recipe.extra[1].endswith(f"@npm:@openai/codex@{CODEX_VERSION}-linux-" + recipe.extra[1].rsplit("-", 1)[1])

    @pytest.mark.parametrize("spec", POLICIES, ids=lambda s: s.policy if s else "none")
    def test_policies_that_can_deny_are_not_applied_for_it_never_asks(self, agent_driver, make_phase_ctx, spec):
        got = agent_driver.interaction_support(with_policy(make_phase_ctx(), spec))
        if spec is None or spec.policy == "auto-approve":
            assert (got.how, got.applied, got.reason) == ("session", True, None)
        else:
            assert (got.how, got.applied, got.reason) == ("session", False, NEVER_ASKS_CODEX)


# ------------------------------------------------------------------------------------------------ generic

class TestGeneric:
    pytestmark = for_driver("acp")

    def test_the_specs_executable_and_arguments_and_nothing_else(self, agent_driver, agent_spec, make_phase_ctx):
        spec = agent_spec.model_copy(update={"executable": "my-acp-agent", "default_args": ["--stdio", "-v"]})
        ctx = make_phase_ctx(agent=spec, installed=False)
        assert agent_driver.environment(ctx) == {}
        assert agent_driver.command(ctx).argv == ["my-acp-agent", "--stdio", "-v"]
        assert agent_driver.install_recipe(spec) is None
        assert files_under(ctx.home) == {}


# ------------------------------------------------------------------------------- every driver that asks

@pytest.mark.parametrize("driver", [GenericAcpDriver(), QwenAcpDriver(), OpencodeAcpDriver(), ClaudeAcpDriver()],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("spec", POLICIES, ids=lambda s: s.policy if s else "none")
def test_every_policy_is_applied_through_the_session(driver, spec, tmp_path):
    from gripprobe_core.testing import agent_spec, phase_context

    ctx = with_policy(phase_context(tmp_path, agent_spec(driver.name, specs=SPECS)), spec)
    got = driver.interaction_support(ctx)
    assert (got.how, got.applied, got.reason) == ("session", True, None)

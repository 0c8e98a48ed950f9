"""What codex can apply of a case's interaction policy (only what denies none of its tools), through the
driver (the kit's phase context with the case's ``interaction``); its config never changes."""

from __future__ import annotations

import dataclasses

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_codex.policy import NOT_APPLIED, TOOLS


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def configured(agent_driver, phase_ctx, interaction):
    """(config.toml as written, the command line, the driver's InteractionSupport) for one policy."""
    ctx = dataclasses.replace(phase_ctx, interaction=interaction)
    support = agent_driver.interaction_support(ctx)
    agent_driver.environment(ctx)
    return (ctx.home / ".codex" / "config.toml").read_text(), agent_driver.command(ctx).argv, support


@pytest.fixture
def as_always(agent_driver, phase_ctx, tmp_path):
    config, argv, _ = configured(agent_driver, phase_ctx, None)
    assert 'approval_policy = "never"' in config and 'sandbox_mode = "danger-full-access"' in config
    return config, argv


@pytest.mark.parametrize("interaction", [
    None, spec(policy="auto-approve"),
    spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "allow"}]),
    spec(policy="scripted", rules=[{"tool_kind": "fetch", "decision": "deny"}]),  # codex has no fetch tool
])
def test_policies_that_deny_no_codex_tool_are_applied_as_always(agent_driver, phase_ctx, as_always, interaction):
    config, argv, support = configured(agent_driver, phase_ctx, interaction)
    assert (support.how, support.applied, support.reason) == ("native", True, None)
    assert (config, argv) == as_always


@pytest.mark.parametrize("interaction, denied", [
    (spec(policy="auto-deny"), "apply_patch, exec_command, request_user_input, view_image, write_stdin"),
    (spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]), "exec_command, write_stdin"),
    (spec(policy="scripted", rules=[{"tool_kind": "write", "decision": "deny"}]), "apply_patch"),
    (spec(policy="scripted", rules=[{"raw_name": "exec_command", "decision": "deny"}]), "exec_command"),
    (spec(policy="scripted", default="deny", rules=[{"tool_kind": "read", "decision": "allow"}]),
     "apply_patch, exec_command, request_user_input, write_stdin"),
])
def test_a_policy_that_denies_a_codex_tool_is_not_applied(agent_driver, phase_ctx, as_always, interaction, denied):
    config, argv, support = configured(agent_driver, phase_ctx, interaction)
    assert (support.how, support.applied) == ("none", False)
    assert support.reason == f"{NOT_APPLIED}; the policy denies {denied}"
    assert (config, argv) == as_always  # approvals stay off: the record says the policy was not in force


@pytest.mark.parametrize("interaction, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "looks at each call's input"),
    (spec(policy="manual"), "asks the operator"),
])
def test_per_call_rules_and_manual_are_not_applied_with_both_reasons(agent_driver, phase_ctx, as_always, interaction, why):
    config, argv, support = configured(agent_driver, phase_ctx, interaction)
    assert not support.applied and support.reason.startswith(NOT_APPLIED) and why in support.reason
    assert (config, argv) == as_always


def test_the_tools_are_the_ones_codex_offers():
    """exec_command, write_stdin, request_user_input, view_image, apply_patch: the tools of every codex request in
    the oracle's request log (catalog model, freeform apply_patch)."""
    assert [(t.raw_name, t.kind) for t in TOOLS] == [
        ("exec_command", "execute"), ("write_stdin", "execute"), ("apply_patch", "write"), ("view_image", "read"),
        ("request_user_input", "other")]

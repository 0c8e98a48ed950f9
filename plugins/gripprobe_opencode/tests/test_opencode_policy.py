"""A case's interaction policy → opencode's ``permission`` config, through the driver (the kit's phase
context with the case's ``interaction``) and the mapping itself."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_opencode.config import DEFAULT_PERMISSION
from gripprobe_opencode.policy import DENY_EACH_CALL, PATTERN_KEYS, TOOLS, permissions_for, policy_permissions

DENY = DENY_EACH_CALL


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def configured(agent_driver, phase_ctx, interaction):
    """(the written ``permission`` config, the driver's InteractionSupport) for one policy."""
    ctx = dataclasses.replace(phase_ctx, interaction=interaction)
    support = agent_driver.interaction_support(ctx)
    agent_driver.environment(ctx)
    cfg = json.loads((Path(ctx.xdg["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").read_text())
    return cfg["permission"], support


@pytest.mark.parametrize("interaction", [None, spec(policy="auto-approve"),
                                         spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "allow"}])])
def test_no_policy_and_auto_approve_leave_the_config_as_it_always_was(agent_driver, phase_ctx, interaction):
    permission, support = configured(agent_driver, phase_ctx, interaction)
    assert (support.how, support.applied, support.reason) == ("native", True, None)
    if interaction is None or interaction.policy == "auto-approve":
        assert permission == DEFAULT_PERMISSION == {"edit": "allow", "bash": "allow", "webfetch": "allow",
                                                    "external_directory": "allow"}
    else:  # a scripted policy that allows everything: every tool allowed explicitly
        assert set(permission.values()) == {"allow"}


def test_auto_deny_refuses_each_call_of_every_tool_and_drops_the_action_only_ones(agent_driver, phase_ctx):
    permission, support = configured(agent_driver, phase_ctx, spec(policy="auto-deny"))
    assert support.applied and support.how == "native"
    for key in ("bash", "read", "glob", "grep", "edit", "task", "skill"):
        assert permission[key] == DENY == {"*": "deny", "/dev/null/*": "deny"}, key
    # webfetch and todowrite take no patterns in opencode's schema: plain deny (opencode does not offer them)
    assert permission["webfetch"] == permission["todowrite"] == "deny"
    assert permission["external_directory"] == "allow"  # not a tool: where a path may lie, unchanged
    actions = [v for value in permission.values() for v in (value.values() if isinstance(value, dict) else [value])]
    assert "ask" not in actions  # nobody could answer it


def test_scripted_by_kind_denies_exactly_that_kind(agent_driver, phase_ctx):
    permission, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]))
    assert support.applied
    assert permission["bash"] == DENY
    assert {k: v for k, v in permission.items() if k != "bash"} == {
        "read": "allow", "glob": "allow", "grep": "allow", "edit": "allow", "task": "allow", "skill": "allow",
        "webfetch": "allow", "todowrite": "allow", "external_directory": "allow"}

    permission, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", default="deny", rules=[{"tool_kind": "write", "decision": "allow"}]))
    assert support.applied and permission["edit"] == "allow" and permission["bash"] == DENY


def test_scripted_by_raw_name(agent_driver, phase_ctx):
    permission, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"raw_name": "bash", "decision": "deny"}]))
    assert support.applied and permission["bash"] == DENY and permission["edit"] == "allow"
    # edit, write and apply_patch share one permission: deciding them alike is exact
    permission, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"name": "write", "decision": "deny"}, {"name": "edit", "decision": "deny"}]))
    assert support.applied and permission["edit"] == DENY


def test_one_permission_for_several_tools_decided_differently_is_not_applied(agent_driver, phase_ctx):
    permission, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"raw_name": "write", "decision": "deny"}]))
    assert (support.how, support.applied) == ("native", False)
    assert "'edit' covers apply_patch, edit, write together" in support.reason and "write deny" in support.reason
    assert permission == DEFAULT_PERMISSION  # not applied: opencode runs as without a policy


@pytest.mark.parametrize("rule", [{"input_regex": "rm -rf", "decision": "deny"},
                                  {"tool_kind": "execute", "input_regex": "curl", "decision": "deny"}])
def test_rules_on_the_call_input_cannot_be_set_up_front(agent_driver, phase_ctx, rule):
    permission, support = configured(agent_driver, phase_ctx, spec(policy="scripted", rules=[rule]))
    assert not support.applied and "input" in support.reason and "before the agent starts" in support.reason
    assert permission == DEFAULT_PERMISSION


def test_manual_is_not_applied(agent_driver, phase_ctx):
    permission, support = configured(agent_driver, phase_ctx, spec(policy="manual"))
    assert not support.applied and "operator" in support.reason
    assert permission == DEFAULT_PERMISSION


def test_mapping_covers_every_offered_tool_with_its_schema_shape():
    assert {t.raw_name for t in TOOLS} >= {"bash", "edit", "glob", "grep", "read", "skill", "task", "todowrite",
                                           "webfetch", "write"}  # what 1.18.33 offers (the oracle's request log)
    denied, problem = permissions_for({t.raw_name: "deny" for t in TOOLS})
    assert problem is None
    assert {k for k, v in denied.items() if v == DENY} <= PATTERN_KEYS
    assert {k for k, v in denied.items() if v == "deny"} == {"webfetch", "todowrite"}
    assert policy_permissions(None) is None and policy_permissions(spec(policy="auto-approve")) is None

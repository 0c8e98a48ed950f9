"""A case's interaction policy → Qwen Code's ``permissions.deny`` rules, through the driver (the kit's phase
context with the case's ``interaction``) and the mapping itself."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_qwen.plugin import RUN_ARGS
from gripprobe_qwen.policy import EVERY_CALL, TOOLS, deny_rules, policy_deny_rules


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def configured(agent_driver, phase_ctx, interaction):
    """(the written settings.json, the command line, the driver's InteractionSupport) for one policy."""
    ctx = dataclasses.replace(phase_ctx, interaction=interaction)
    support = agent_driver.interaction_support(ctx)
    agent_driver.environment(ctx)
    settings = json.loads((ctx.home / ".qwen" / "settings.json").read_text())
    return settings, agent_driver.command(ctx).argv, support


@pytest.mark.parametrize("interaction", [None, spec(policy="auto-approve"),
                                         spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "allow"}])])
def test_no_policy_and_auto_approve_run_as_always(agent_driver, phase_ctx, interaction):
    settings, argv, support = configured(agent_driver, phase_ctx, interaction)
    assert (support.how, support.applied, support.reason) == ("native", True, None)
    assert "permissions" not in settings
    assert argv[1:1 + len(RUN_ARGS)] == list(RUN_ARGS) and "yolo" in RUN_ARGS


def test_auto_deny_refuses_each_call_of_the_shell_and_file_tools_and_drops_the_rest(agent_driver, phase_ctx):
    settings, argv, support = configured(agent_driver, phase_ctx, spec(policy="auto-deny"))
    assert support.applied and support.how == "native"
    deny = settings["permissions"]["deny"]
    assert {"run_shell_command(*)", "monitor(*)", "read_file(//**)", "write_file(//**)", "edit(//**)",
            "notebook_edit(//**)"} <= set(deny)
    assert {"glob", "grep_search", "zoom_image", "web_fetch", "agent", "skill", "tool_call", "tool_search"} <= set(deny)
    assert len(deny) == len(TOOLS)  # one rule a tool
    assert "yolo" in argv  # deny rules win over yolo; nothing waits for an answer
    assert "allow" not in settings["permissions"] and "ask" not in settings["permissions"]


def test_scripted_by_kind(agent_driver, phase_ctx):
    settings, _, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]))
    assert support.applied and settings["permissions"]["deny"] == ["run_shell_command(*)", "monitor(*)"]
    settings, _, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"tool_kind": "write", "decision": "deny"}]))
    assert support.applied and settings["permissions"]["deny"] == ["write_file(//**)", "edit(//**)", "notebook_edit(//**)"]


def test_scripted_by_raw_name(agent_driver, phase_ctx):
    settings, _, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", rules=[{"raw_name": "write_file", "decision": "deny"}]))
    assert support.applied and settings["permissions"]["deny"] == ["write_file(//**)"]
    settings, _, support = configured(agent_driver, phase_ctx, spec(
        policy="scripted", default="deny", rules=[{"raw_name": "run_shell_command", "decision": "allow"},
                                                  {"raw_name": "monitor", "decision": "allow"}]))
    assert support.applied and "run_shell_command(*)" not in settings["permissions"]["deny"]
    assert "write_file(//**)" in settings["permissions"]["deny"]


@pytest.mark.parametrize("rule, governed", [({"raw_name": "edit", "decision": "deny"}, "write_file, notebook_edit"),
                                            ({"raw_name": "read_file", "decision": "deny"}, "zoom_image, glob, grep_search"),
                                            ({"raw_name": "run_shell_command", "decision": "deny"}, "monitor")])
def test_a_rule_family_split_by_the_policy_is_not_applied(agent_driver, phase_ctx, rule, governed):
    settings, _, support = configured(agent_driver, phase_ctx, spec(policy="scripted", rules=[rule]))
    assert (support.how, support.applied) == ("native", False)
    assert f"also governs {governed}, which the policy allows" in support.reason
    assert "permissions" not in settings  # not applied: Qwen Code runs as without a policy


@pytest.mark.parametrize("rule", [{"input_regex": "rm -rf", "decision": "deny"},
                                  {"tool_kind": "execute", "input_regex": "curl", "decision": "deny"}])
def test_rules_on_the_call_input_cannot_be_set_up_front(agent_driver, phase_ctx, rule):
    settings, _, support = configured(agent_driver, phase_ctx, spec(policy="scripted", rules=[rule]))
    assert not support.applied and "input" in support.reason and "before the agent starts" in support.reason
    assert "permissions" not in settings


def test_manual_is_not_applied(agent_driver, phase_ctx):
    settings, _, support = configured(agent_driver, phase_ctx, spec(policy="manual"))
    assert not support.applied and "operator" in support.reason and "permissions" not in settings


def test_only_tools_whose_every_call_names_a_command_or_path_keep_a_specifier():
    rules, problem = deny_rules({t.raw_name: "deny" for t in TOOLS})
    assert problem is None
    with_specifier = {r.split("(")[0]: r[r.index("(") + 1:-1] for r in rules if "(" in r}
    assert with_specifier == EVERY_CALL
    assert set(EVERY_CALL.values()) == {"*", "//**"}
    assert policy_deny_rules(None) == policy_deny_rules(spec(policy="auto-approve")) == []

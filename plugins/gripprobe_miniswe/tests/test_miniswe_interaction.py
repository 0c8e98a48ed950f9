"""A case's interaction policy as mini's own confirm mode: a policy denying mini's one tool (its shell) runs it
without --yolo, in confirm mode, with every action rejected on stdin; anything else runs as always."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_miniswe.interaction import REFUSAL, REFUSALS, RULE

SHELL_DENIED = [{"tool_kind": "execute", "decision": "deny"}]


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def run(agent_driver, make_phase_ctx, policy, fmt="tool"):
    ctx = dataclasses.replace(make_phase_ctx(fmt=fmt), interaction=policy)
    agent_driver.environment(ctx)
    config = json.loads((ctx.home / ".config" / "mini-swe-agent" / "gripprobe.yaml").read_text())
    return ctx, agent_driver.command(ctx), config, agent_driver.interaction_support(ctx)


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "write", "decision": "deny"}])])
def test_a_policy_allowing_the_shell_runs_as_today(agent_driver, make_phase_ctx, policy):
    ctx, cmd, config, support = run(agent_driver, make_phase_ctx, policy)
    today = agent_driver.command(dataclasses.replace(ctx, interaction=None))
    assert cmd.argv == today.argv and "--yolo" in cmd.argv and cmd.stdin is None and "agent" not in config
    assert (support.how, support.applied) == ("native", True)


@pytest.mark.parametrize("fmt", ["tool", "markdown"])
@pytest.mark.parametrize("policy", [spec(policy="auto-deny"), spec(policy="scripted", rules=SHELL_DENIED),
                                    spec(policy="scripted", rules=[{"name": "shell", "decision": "deny"}])])
def test_denying_the_shell_is_confirm_mode_with_every_action_rejected(agent_driver, make_phase_ctx, policy, fmt):
    _, cmd, config, support = run(agent_driver, make_phase_ctx, policy, fmt)
    assert "--yolo" not in cmd.argv and "--exit-immediately" in cmd.argv
    assert config["agent"] == {"mode": "confirm", "whitelist_actions": [], "confirm_exit": False}
    lines = cmd.stdin.decode().split("\n")
    assert lines[:-1] == [REFUSAL] * REFUSALS and lines[-1] == ""  # never an empty answer: that would confirm
    assert (support.how, support.applied) == ("native", True) and "confirm mode" in support.reason


def test_a_rule_on_the_raw_name_follows_the_format(agent_driver, make_phase_ctx):
    policy = spec(policy="scripted", rules=[{"raw_name": "bash", "decision": "deny"}])
    assert run(agent_driver, make_phase_ctx, policy, "tool")[1].stdin is not None
    assert run(agent_driver, make_phase_ctx, policy, "markdown")[1].stdin is None  # there it is the fence


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "input"),
    (spec(policy="manual"), "manual"),
])
def test_what_cannot_be_set_up_front_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy, why):
    ctx, cmd, config, support = run(agent_driver, make_phase_ctx, policy)
    assert (support.how, support.applied) == ("none", False) and why in support.reason
    assert cmd.argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv and cmd.stdin is None


def test_parse_names_the_setting(make_phase_ctx):
    from gripprobe_miniswe.plugin import policy_of
    ctx = dataclasses.replace(make_phase_ctx(), interaction=spec(policy="auto-deny"))
    assert policy_of(ctx).rule == RULE

"""A case's interaction policy as pi's tool allowlist (pi has no approval setting): the policy → argument
mapping and what the driver says about it."""

from __future__ import annotations

import dataclasses

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_pi.interaction import DEFAULT_TOOLS, pinned_tools, tool_plan


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def run(agent_driver, make_phase_ctx, policy):
    ctx = dataclasses.replace(make_phase_ctx(prompt="Write hello.txt"), interaction=policy)
    argv = agent_driver.command(ctx).argv
    return ctx, argv, agent_driver.interaction_support(ctx)


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "fetch", "decision": "deny"}])])
def test_no_denial_runs_exactly_as_without_a_policy(agent_driver, make_phase_ctx, policy):
    ctx, argv, support = run(agent_driver, make_phase_ctx, policy)
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv
    assert "--tools" not in argv and "--no-tools" not in argv
    assert (support.how, support.applied) == ("native", True)


def test_auto_deny_is_no_tools(agent_driver, make_phase_ctx):
    _, argv, support = run(agent_driver, make_phase_ctx, spec(policy="auto-deny"))
    assert argv[-2:] == ["--no-tools", "Write hello.txt"] and "--tools" not in argv
    assert (support.how, support.applied) == ("native", True) and "not offered" in support.reason


@pytest.mark.parametrize("kind, left", [("write", "read,bash"), ("execute", "read,edit,write"),
                                        ("read", "bash,edit,write")])
def test_scripted_by_kind_narrows_the_allowlist(agent_driver, make_phase_ctx, kind, left):
    _, argv, support = run(agent_driver, make_phase_ctx, spec(policy="scripted", rules=[{"tool_kind": kind,
                                                                                          "decision": "deny"}]))
    assert argv[-3:-1] == ["--tools", left] and argv.count("--tools") == 1
    assert support.applied is True and "weaker deny" in support.reason


def test_default_deny_with_an_allowed_name(agent_driver, make_phase_ctx):
    _, argv, _ = run(agent_driver, make_phase_ctx, spec(policy="scripted", default="deny",
                                                        rules=[{"raw_name": "read", "decision": "allow"}]))
    assert argv[-3:-1] == ["--tools", "read"]


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "input"),
    (spec(policy="scripted", rules=[{"tool_kind": "execute", "prompt_regex": "ok\\?", "decision": "deny"}]), "question"),
    (spec(policy="manual"), "manual"),
])
def test_what_cannot_be_set_up_front_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy, why):
    ctx, argv, support = run(agent_driver, make_phase_ctx, policy)
    assert (support.how, support.applied) == ("none", False) and why in support.reason
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv


@pytest.mark.parametrize("args, want", [
    ((), (list(DEFAULT_TOOLS), [])),
    (("--tools", "read,grep", "--x"), (["read", "grep"], ["--x"])),
    (("-t=read",), (["read"], [])),
    (("--no-tools",), ([], [])),
    (("-nbt", "--thinking", "off"), ([], ["--thinking", "off"])),
])
def test_pinned_tools_reads_every_spelling(args, want):
    assert pinned_tools(args) == want


def test_a_spec_that_pins_tools_is_narrowed_in_place():
    plan = tool_plan(spec(policy="scripted", rules=[{"tool_kind": "search", "decision": "deny"}]),
                     ("--tools", "read,grep,find,bash", "--thinking", "off"))
    assert plan.default_args == ("--thinking", "off", "--tools", "read,bash")
    assert plan.denied == {"grep": "native: --tools read,bash", "find": "native: --tools read,bash"}

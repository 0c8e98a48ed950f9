"""A case's interaction policy as gptme's ``--tools`` allowlist: the policy → argument mapping and what the
driver says about it (a tool left out is not offered; ``complete`` cannot be left out)."""

from __future__ import annotations

import dataclasses

import pytest

from gripprobe_core.plugin import InteractionSpec
from gripprobe_gptme.interaction import KNOWN_TOOLS, pinned_tools, tool_plan

PINNED = ("--tools", "save,append,patch,shell")


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def run(agent_driver, make_phase_ctx, policy, fmt="tool"):
    ctx = dataclasses.replace(make_phase_ctx(fmt=fmt), interaction=policy)
    argv = agent_driver.command(ctx).argv
    return ctx, argv[argv.index("--workspace") + 2:argv.index("--")], agent_driver.interaction_support(ctx)


def test_the_repo_spec_pins_the_tool_set(agent_spec):
    assert tuple(agent_spec.default_args) == PINNED
    assert pinned_tools(agent_spec.default_args) == (["save", "append", "patch", "shell"], [])


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "fetch", "decision": "deny"}])])
def test_no_denial_runs_exactly_as_without_a_policy(agent_driver, make_phase_ctx, policy):
    ctx, args, support = run(agent_driver, make_phase_ctx, policy)
    assert tuple(args) == PINNED

    def unnamed(argv):  # --name is new on every call
        i = argv.index("--name")
        return argv[:i] + argv[i + 2:]
    assert unnamed(agent_driver.command(ctx).argv) == unnamed(
        agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv)
    assert (support.how, support.applied) == ("native", True)


@pytest.mark.parametrize("kind, left", [("execute", "save,append,patch"), ("write", "shell")])
def test_scripted_by_kind_takes_that_kind_out_of_the_allowlist(agent_driver, make_phase_ctx, kind, left):
    _, args, support = run(agent_driver, make_phase_ctx, spec(policy="scripted", rules=[{"tool_kind": kind,
                                                                                          "decision": "deny"}]))
    assert args == ["--tools", left]  # one allowlist: a second --tools would add to the first
    assert (support.how, support.applied) == ("native", True)
    assert "not offered" in support.reason and "weaker deny" in support.reason


def test_everything_denied_but_complete_is_tools_none(agent_driver, make_phase_ctx):
    policy = spec(policy="scripted", default="deny", rules=[{"raw_name": "complete", "decision": "allow"}])
    _, args, support = run(agent_driver, make_phase_ctx, policy, fmt="markdown")
    assert args == ["--tools", "none"] and support.applied is True


@pytest.mark.parametrize("policy", [spec(policy="auto-deny"), spec(policy="scripted", default="deny")])
def test_a_policy_denying_complete_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy):
    """gptme adds ``complete`` in non-interactive mode whatever --tools says: auto-deny cannot be set up."""
    _, args, support = run(agent_driver, make_phase_ctx, policy)
    assert tuple(args) == PINNED
    assert (support.how, support.applied) == ("none", False) and "'complete'" in support.reason


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "input"),
    (spec(policy="manual"), "manual"),
])
def test_what_cannot_be_set_up_front_is_not_applied(agent_driver, make_phase_ctx, policy, why):
    _, args, support = run(agent_driver, make_phase_ctx, policy)
    assert tuple(args) == PINNED and support.applied is False and why in support.reason


def test_an_unpinned_tool_set_is_narrowed_with_gptmes_exclusion_syntax():
    plan = tool_plan(spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]), ())
    assert plan.default_args == ("--tools=-ipython,-shell,-tmux",)
    assert set(plan.denied) == {"ipython", "shell", "tmux"} and plan.support.applied is True
    assert set(plan.denied) <= set(KNOWN_TOOLS)


@pytest.mark.parametrize("args, want", [
    (("--tools", "save,shell"), (["save", "shell"], [])),
    (("-t", "save", "-t", "shell", "--x"), (["save", "shell"], ["--x"])),
    (("--tools=save,shell",), (["save", "shell"], [])),
    (("--tools", "none"), ([], [])),
    (("--tools=+subagent",), (None, ["--tools=+subagent"])),
    ((), (None, [])),
])
def test_pinned_tools_reads_every_spelling(args, want):
    assert pinned_tools(args) == want


def test_parse_names_the_allowlist_in_its_denials(agent_driver, make_phase_ctx):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=spec(policy="scripted", rules=[
        {"tool_kind": "write", "decision": "deny"}]))
    plan = tool_plan(ctx.interaction, ctx.agent.default_args)
    assert plan.denied == {"save": "native: --tools shell", "append": "native: --tools shell",
                           "patch": "native: --tools shell"}

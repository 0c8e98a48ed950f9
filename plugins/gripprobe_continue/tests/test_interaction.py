"""A case's interaction policy as cn's own permission flags: the policy → flags mapping, what the driver says
about it, and that the parse names the setting that refused a call."""

from __future__ import annotations

import dataclasses

import pytest

from gripprobe_continue.interaction import CN_TOOLS, TOOLS, permissions
from gripprobe_core.plugin import InteractionSpec

WRITE_TOOLS = {"Write", "Edit", "MultiEdit"}


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def flags_of(argv: list[str]) -> dict[str, str]:
    """cn tool name → the flag naming it (``--exclude``/``--allow``) in a command line."""
    out = {}
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--exclude", "--allow"):
            assert value not in out, f"{value} named twice"
            out[value] = flag
    return out


def command_of(agent_driver, make_phase_ctx, policy):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=policy)
    return ctx, agent_driver.command(ctx).argv, agent_driver.interaction_support(ctx)


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "fetch", "decision": "allow"}])])
def test_no_denial_runs_exactly_as_without_a_policy(agent_driver, make_phase_ctx, policy):
    ctx, argv, support = command_of(agent_driver, make_phase_ctx, policy)
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv
    assert argv[1:3] == ["-p", "--auto"] and "--exclude" not in argv and "--allow" not in argv
    assert (support.how, support.applied) == ("native", True)


def test_auto_deny_excludes_every_tool_and_drops_auto(agent_driver, make_phase_ctx):
    _, argv, support = command_of(agent_driver, make_phase_ctx, spec(policy="auto-deny"))
    assert "--auto" not in argv  # --auto would override every --exclude
    assert flags_of(argv) == {t: "--exclude" for t in CN_TOOLS}
    assert (support.how, support.applied) == ("native", True)
    assert "not offered" in support.reason and "Command blocked by security policy" in support.reason
    # the flags come before --verbose/--config and the prompt, which stays last after --
    assert argv[-2] == "--" and argv.index("--verbose") > max(i for i, a in enumerate(argv) if a == "--exclude")


def test_scripted_by_kind_excludes_exactly_that_kind(agent_driver, make_phase_ctx):
    _, argv, support = command_of(agent_driver, make_phase_ctx,
                                  spec(policy="scripted", rules=[{"tool_kind": "write", "decision": "deny"}]))
    got = flags_of(argv)
    assert {t for t, f in got.items() if f == "--exclude"} == WRITE_TOOLS
    assert {t for t, f in got.items() if f == "--allow"} == set(CN_TOOLS) - WRITE_TOOLS  # Bash, Read … stay allowed
    assert "--auto" not in argv and support.applied is True
    _, argv, _ = command_of(agent_driver, make_phase_ctx,
                            spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}]))
    assert {t for t, f in flags_of(argv).items() if f == "--exclude"} == {"Bash"}


def test_scripted_default_deny_with_an_allowed_name(agent_driver, make_phase_ctx):
    _, argv, support = command_of(agent_driver, make_phase_ctx, spec(
        policy="scripted", default="deny", rules=[{"raw_name": "Read", "decision": "allow"},
                                                  {"name": "shell", "decision": "allow"}]))
    assert {t for t, f in flags_of(argv).items() if f == "--allow"} == {"Read", "Bash"}
    assert support.applied is True


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "input"),
    (spec(policy="scripted", rules=[{"tool_kind": "execute", "input_regex": "rm", "decision": "deny"}]), "input"),
    (spec(policy="manual"), "manual"),
])
def test_what_cannot_be_set_up_front_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy, why):
    ctx, argv, support = command_of(agent_driver, make_phase_ctx, policy)
    assert support.applied is False and support.how == "none" and why in support.reason
    assert "--auto" in support.reason
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv


def test_tool_refs_carry_the_drivers_kinds(agent_driver):
    kinds = {t.raw_name: t.kind for t in TOOLS}
    assert {t for t, k in kinds.items() if k == "write"} == WRITE_TOOLS
    assert {t for t, k in kinds.items() if k == "execute"} == {"Bash"}
    assert all((t.name, t.kind) == agent_driver.tool_names.normalize(t.raw_name) for t in TOOLS)
    assert permissions(None).flags == ("--auto",)

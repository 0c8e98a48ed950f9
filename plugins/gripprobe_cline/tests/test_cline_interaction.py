"""A case's interaction policy as Cline's own approval settings: ``--auto-approve false`` when every tool is
denied (each call refused, the model reads it), ``disabledTools`` when some are (not offered)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gripprobe_cline.config import DISABLED_TOOLS
from gripprobe_cline.interaction import CLINE_TOOLS, approvals
from gripprobe_core.plugin import InteractionSpec


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


def run(agent_driver, make_phase_ctx, policy):
    ctx = dataclasses.replace(make_phase_ctx(), interaction=policy)
    env = agent_driver.environment(ctx)
    settings = json.loads((ctx.home / ".cline" / "data" / "settings" / "global-settings.json").read_text())
    return ctx, agent_driver.command(ctx).argv, settings, agent_driver.interaction_support(ctx), env


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "other", "decision": "deny"}])])
def test_no_denial_runs_exactly_as_without_a_policy(agent_driver, make_phase_ctx, policy):
    ctx, argv, settings, support, _ = run(agent_driver, make_phase_ctx, policy)
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv
    assert "--auto-approve" not in argv and settings["disabledTools"] == list(DISABLED_TOOLS)
    assert (support.how, support.applied) == ("native", True)


def test_auto_deny_is_auto_approve_false_and_keeps_the_tools(agent_driver, make_phase_ctx):
    _, argv, settings, support, _ = run(agent_driver, make_phase_ctx, spec(policy="auto-deny"))
    assert argv[1:6] == ["--json", "-P", "openai-compatible", "--auto-approve", "false"]
    assert argv[-2] == "--" and settings["disabledTools"] == list(DISABLED_TOOLS)  # still offered, each refused
    assert (support.how, support.applied) == ("native", True) and "requires approval" in support.reason


def test_a_deny_default_covering_every_tool_is_the_same(agent_driver, make_phase_ctx):
    _, argv, _, support, _ = run(agent_driver, make_phase_ctx, spec(policy="scripted", default="deny"))
    assert "--auto-approve" in argv and support.applied is True


@pytest.mark.parametrize("kind, off", [("write", ["editor", "apply_patch"]), ("execute", ["run_commands"])])
def test_scripted_by_kind_disables_those_tools(agent_driver, make_phase_ctx, kind, off):
    _, argv, settings, support, _ = run(agent_driver, make_phase_ctx, spec(policy="scripted", rules=[
        {"tool_kind": kind, "decision": "deny"}]))
    assert "--auto-approve" not in argv  # the others stay auto-approved
    assert settings["disabledTools"] == [*DISABLED_TOOLS, *off]
    assert (support.how, support.applied) == ("native", True) and "not offered" in support.reason


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"input_regex": "rm -rf", "decision": "deny"}]), "input"),
    (spec(policy="manual"), "manual"),
])
def test_what_cannot_be_set_up_front_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy, why):
    ctx, argv, settings, support, _ = run(agent_driver, make_phase_ctx, policy)
    assert (support.how, support.applied) == ("none", False) and why in support.reason
    assert argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv
    assert settings["disabledTools"] == list(DISABLED_TOOLS)


def test_the_parser_is_told_which_setting_refused():
    assert approvals(spec(policy="auto-deny")).native.refuse_all == "native: --auto-approve false"
    write = approvals(spec(policy="scripted", rules=[{"tool_kind": "write", "decision": "deny"}])).native
    assert write.refuse_all is None and write.disabled == {"editor": "native: disabledTools editor,apply_patch",
                                                           "apply_patch": "native: disabledTools editor,apply_patch"}
    assert set(CLINE_TOOLS) >= {"run_commands", "editor", "read_files"}

"""A case's interaction policy as aider's own settings: ``--dry-run`` for denied edits, and for denied edits and
reads also no chat files and every confirmation answered no on stdin (no ``--yes-always``)."""

from __future__ import annotations

import dataclasses

import pytest

from gripprobe_aider.interaction import REFUSALS, settings
from gripprobe_core.plugin import InteractionSpec, TestSpec


def spec(**kw) -> InteractionSpec:
    return InteractionSpec.model_validate(kw)


SEEDED = TestSpec.model_validate({
    "id": "seeded", "title": "t", "prompt": "Fix notes.txt", "requires": ["write"],
    "fixtures": [{"path": "notes.txt", "content": "hello\n"}],
    "validators": [{"kind": "file_absent", "path": "x"}],
    "reference": [{"write": {"path": "notes.txt", "content": "bye\n"}}]})


def run(agent_driver, make_phase_ctx, policy):
    ctx = dataclasses.replace(make_phase_ctx(test=SEEDED, fmt="whole"), interaction=policy)
    agent_driver.environment(ctx)
    return ctx, agent_driver.command(ctx), agent_driver.interaction_support(ctx)


@pytest.mark.parametrize("policy", [None, spec(policy="auto-approve"),
                                    spec(policy="scripted", rules=[{"tool_kind": "execute", "decision": "deny"}])])
def test_no_denial_of_aiders_edits_or_reads_runs_as_today(agent_driver, make_phase_ctx, policy):
    """aider runs no shell (shell suggestions are off): denying execute changes nothing and holds."""
    ctx, cmd, support = run(agent_driver, make_phase_ctx, policy)
    today = agent_driver.command(dataclasses.replace(ctx, interaction=None))
    assert cmd.argv == today.argv and cmd.stdin is None
    assert "--yes-always" in cmd.argv and "--dry-run" not in cmd.argv and "--file=notes.txt" in cmd.argv
    assert (support.how, support.applied) == ("native", True)


def test_denied_writes_are_dry_run(agent_driver, make_phase_ctx):
    ctx, cmd, support = run(agent_driver, make_phase_ctx, spec(policy="scripted", rules=[
        {"tool_kind": "write", "decision": "deny"}]))
    assert "--dry-run" in cmd.argv and "--yes-always" in cmd.argv and "--file=notes.txt" in cmd.argv
    assert cmd.argv[-1].startswith("--message=") and cmd.stdin is None
    assert (support.how, support.applied) == ("native", True) and "--dry-run" in support.reason
    assert settings(ctx.interaction).denials.dry_run == "native: --dry-run"


def test_auto_deny_refuses_every_confirmation_and_adds_no_file(agent_driver, make_phase_ctx):
    ctx, cmd, support = run(agent_driver, make_phase_ctx, spec(policy="auto-deny"))
    assert "--dry-run" in cmd.argv and "--yes-always" not in cmd.argv
    assert not [a for a in cmd.argv if a.startswith("--file=")]  # nothing read up front
    assert cmd.stdin == b"n\n" * REFUSALS
    assert (support.how, support.applied) == ("native", True)
    denials = settings(ctx.interaction).denials
    assert denials.dry_run and denials.confirm


@pytest.mark.parametrize("policy, why", [
    (spec(policy="scripted", rules=[{"tool_kind": "read", "decision": "deny"}]), "read alone"),
    (spec(policy="scripted", rules=[{"input_regex": "rm", "decision": "deny"}]), "input"),
    (spec(policy="manual"), "manual"),
])
def test_what_aider_cannot_refuse_is_not_applied_and_runs_as_today(agent_driver, make_phase_ctx, policy, why):
    ctx, cmd, support = run(agent_driver, make_phase_ctx, policy)
    assert (support.how, support.applied) == ("none", False) and why in support.reason
    assert cmd.argv == agent_driver.command(dataclasses.replace(ctx, interaction=None)).argv and cmd.stdin is None

"""A case's interaction policy (``ctx.interaction``) as cn's own tool permissions.

``cn -p`` (headless) has no one to ask: a tool whose permission is ``ask`` is not offered to the model at
all, and ``--auto`` (what the driver runs without a policy) allows every tool. Measured on 1.5.47 (its
``src/permissions`` and ``stream/handleToolCalls.ts``, and real runs against the oracle and a scripted model):

- ``--exclude <Tool>`` / ``--allow <Tool>`` (repeatable) are the highest-precedence policies, first match
  wins; ``--auto`` is an absolute override that ignores them, so a policy that denies anything runs
  *without* ``--auto`` and names every built-in tool once: ``--exclude`` for a denied tool, ``--allow`` for
  an allowed one (without ``--auto`` Write/Edit/MultiEdit would otherwise be ``ask``, i.e. not offered).
- An excluded tool is **not offered** (it is left out of the request's ``tools``): the model cannot ask for
  it, which is a weaker "deny" than a refusal — a model routes around it (the oracle writes through Bash
  when Write is excluded). A call to an excluded tool anyway (a model naming a tool it was not offered) is
  refused before it runs: the session records it ``canceled`` with the output ``Command blocked by
  security policy``, and ``cn -p`` then ends the run at once (no further model request).
- ``--exclude "Bash(*)"`` would keep Bash offered and refuse each call, but cn matches it with a JavaScript
  regular expression whose ``.`` stops at a newline: a multi-line command (a heredoc) is not matched and
  runs. So Bash is excluded by name like every other tool.
- No rule can look at a call's input (``input_regex``) or answer a question (``prompt_regex``) up front:
  :func:`gripprobe_core.plugin.static_policy` reports those as not applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .parse import BLOCKED_OUTPUT, TOOL_NAMES, blocked_rule

__all__ = ["AUTO_FLAGS", "BLOCKED_OUTPUT", "CN_TOOLS", "Permissions", "TOOLS", "blocked_rule", "permissions"]

#: Every built-in tool of cn 1.5.47 (``ALL_BUILT_IN_TOOLS`` plus CheckBackgroundJob). Headless runs offer
#: Read, Write, List, Bash, Fetch, Checklist, CheckBackgroundJob, AskQuestion, Edit (or MultiEdit for a
#: model cn deems capable), Exit, Skills, and Search when ripgrep is installed; the rest need an agent id.
CN_TOOLS: tuple[str, ...] = (
    "Read", "Write", "Edit", "MultiEdit", "List", "Search", "Bash", "Fetch", "Diff", "Checklist",
    "CheckBackgroundJob", "AskQuestion", "Exit", "Skills", "Status", "ReportFailure", "UploadArtifact", "Subagent",
)
TOOLS: tuple[ToolRef, ...] = tuple(ToolRef(raw, *TOOL_NAMES.normalize(raw)) for raw in CN_TOOLS)
#: Without a policy (or when nothing is denied): every tool allowed, as the driver always ran cn.
AUTO_FLAGS: tuple[str, ...] = ("--auto",)


@dataclass(frozen=True)
class Permissions:
    """What the driver passes to cn for one phase, and what it says about it."""

    flags: tuple[str, ...]
    """Replaces ``--auto`` on the command line."""
    denied: tuple[str, ...]
    """cn tool names the flags exclude."""
    support: InteractionSupport


def permissions(spec: InteractionSpec | None) -> Permissions:
    """cn's permission flags for ``spec`` (None: no policy, ``--auto`` as always). A policy that cannot be
    set up front (``unapplied``) runs as without a policy: the agent's approvals off, as the evaluator
    assumes of a policy not applied."""
    if spec is None or spec.policy == "auto-approve":
        return Permissions(AUTO_FLAGS, (), InteractionSupport("native", True))
    plan = static_policy(spec, TOOLS)
    if plan.unapplied:
        return Permissions(AUTO_FLAGS, (), InteractionSupport(
            "none", False, f"{plan.unapplied}; cn ran as without a policy (--auto)"))
    denied = tuple(t.raw_name for t in TOOLS if plan.decisions.get(t.raw_name) == "deny")
    if not denied:
        return Permissions(AUTO_FLAGS, (), InteractionSupport(
            "native", True, "the policy denies none of cn's tools: --auto, as without a policy"))
    flags = tuple(f for t in TOOLS for f in (("--exclude" if t.raw_name in denied else "--allow"), t.raw_name))
    named = "--exclude every tool" if len(denied) == len(TOOLS) else f"--exclude {' '.join(denied)}, --allow the rest"
    return Permissions(flags, denied, InteractionSupport("native", True, (
        f"cn's own permissions, without --auto: {named}. An excluded tool is not "
        f"offered to the model, so it cannot ask for it (a weaker deny than a refusal: a model may reach the "
        f"same end with another tool); a call to one anyway is refused ('Command blocked by security policy') "
        f"and cn -p ends the run")))

"""A case's interaction policy (``ctx.interaction``) as gptme's tool allowlist (``--tools``).

gptme 0.35.1 has no per-tool approval: ``--non-interactive`` implies ``--no-confirm`` (every tool runs
unasked), and confirmation is all or nothing. What it does have is the allowlist, ``-t/--tools``: a tool
not in it is not loaded. So a denied tool is **not offered** (measured against the oracle and a scripted
model):

- ``tool`` format: the tool is not among the request's function tools; a call to it anyway is answered
  ``Tool '<name>' is not available for execution.`` (a system message with the call's id);
- ``markdown`` / ``xml``: the system prompt does not teach it, and a block of it in a reply is ignored
  without a word (gptme then nudges "No tool call detected").

That is a weaker "deny" than a refusal: the model never gets to ask, and it may reach the same end with a
tool that is allowed (the oracle writes through ``shell`` when ``save`` is not offered). The driver says so
in the reason it gives, and still reports the policy applied when the decisions are exact per tool.

``complete`` (which ends the session) is always added in non-interactive mode and cannot be taken out: a
policy that denies it (``auto-deny``, a ``deny`` default without a rule allowing it) is not applied.
The spec's ``default_args`` pin the tool set (``--tools save,append,patch,shell``); without such a pin
gptme's default set depends on the machine, and a denial is written with gptme's exclusion syntax
(``--tools=-save,-append``) over every tool gptme knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES

__all__ = ["ALWAYS", "KNOWN_TOOLS", "ToolPlan", "pinned_tools", "tool_plan"]

#: Added by gptme in non-interactive mode whatever the allowlist says.
ALWAYS = "complete"
#: Every built-in tool of gptme 0.35.1 (``gptme.tools.get_available_tools``), for a spec that pins none.
KNOWN_TOOLS: tuple[str, ...] = (
    "append", "autocommit", "autocompact", "browser", "chats", "choice", "clarify", "complete", "computer",
    "convert", "elicit", "form", "gh", "hashline_edit", "ipython", "lessons", "mcp", "memory", "morph", "patch",
    "patch_many", "precommit", "progress", "rag", "read", "recall", "request_tool_change", "restart", "save",
    "screenshot", "shell", "subagent", "tmux", "todo", "vent", "vision", "watch",
)
_TOOL_OPTIONS = ("--tools", "-t")


@dataclass(frozen=True)
class ToolPlan:
    """What the driver passes to gptme for one phase, and what it says about it."""

    default_args: tuple[str, ...]
    """The spec's ``default_args`` with the allowlist the policy leaves (unchanged without a denial)."""
    denied: dict[str, str] = field(default_factory=dict)
    """gptme tool name → the rule of its native denial (the setting that keeps it out)."""
    support: InteractionSupport = InteractionSupport("native", True)


def pinned_tools(default_args: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """``(tools the args pin, the args without any --tools/-t option)``; tools None when none is pinned
    (or the pin adds to / removes from gptme's defaults with ``+``/``-``)."""
    rest: list[str] = []
    values: list[str] = []
    args = list(default_args)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _TOOL_OPTIONS and i + 1 < len(args):
            values.append(args[i + 1])
            i += 2
            continue
        opt, eq, value = arg.partition("=")
        if eq and opt in _TOOL_OPTIONS:
            values.append(value)
        else:
            rest.append(arg)
        i += 1
    names = [t.strip() for v in values for t in v.split(",") if t.strip()]
    if not values or any(n.startswith(("+", "-")) or ":" in n for n in names):
        return None, list(default_args)
    if any(n.lower() == "none" for n in names):
        return [], rest
    return list(dict.fromkeys(names)), rest


def tool_plan(spec: InteractionSpec | None, default_args: Sequence[str]) -> ToolPlan:
    """gptme's allowlist for ``spec`` (None: no policy, the spec's args as always). A policy that cannot be
    set up front runs as without a policy (the agent's approvals off, as the evaluator assumes of a policy
    not applied)."""
    args = tuple(default_args)
    if spec is None or spec.policy == "auto-approve":
        return ToolPlan(args)
    pinned, rest = pinned_tools(args)
    names = list(dict.fromkeys([*(pinned if pinned is not None else KNOWN_TOOLS), ALWAYS]))
    plan = static_policy(spec, [ToolRef(n, *TOOL_NAMES.normalize(n)) for n in names])
    today = "gptme ran as without a policy"
    if plan.unapplied:
        return ToolPlan(args, support=InteractionSupport("none", False, f"{plan.unapplied}; {today}"))
    if plan.decisions.get(ALWAYS) == "deny":
        return ToolPlan(args, support=InteractionSupport("none", False, (
            f"the policy denies '{ALWAYS}' (it ends the session), which gptme always offers in non-interactive mode "
            f"and no setting takes out (a rule {{raw_name: {ALWAYS}, decision: allow}} before the others would "
            f"let the rest apply); {today}")))
    denied = [n for n in names if plan.decisions.get(n) == "deny"]
    if not denied:
        return ToolPlan(args, support=InteractionSupport(
            "native", True, "the policy denies none of gptme's tools: its allowlist as without a policy"))
    if pinned is not None:
        kept = [n for n in pinned if n not in denied and n != ALWAYS]
        value = ",".join(kept) if kept else "none"
        new_args = (*rest, "--tools", value)
        setting = f"--tools {value}"
    else:
        value = ",".join(f"-{n}" for n in denied)
        new_args = (*args, f"--tools={value}")
        setting = f"--tools={value}"
    rule = f"native: {setting}"
    return ToolPlan(new_args, {n: rule for n in denied}, InteractionSupport("native", True, (
        f"gptme's allowlist {setting} (denied: {', '.join(denied)}; '{ALWAYS}' is always offered). A tool left "
        f"out is not offered, so the model cannot ask for it (a weaker deny than a refusal: a model may reach "
        f"the same end with an allowed tool); a call to one anyway is answered 'Tool ... is not available for "
        f"execution' (tool format) or ignored (a markdown/xml block)")))

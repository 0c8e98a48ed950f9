"""A case's interaction policy (``ctx.interaction``) as pi's tool allowlist.

pi 0.73.1 never asks permission: it has no approval setting at all, only which tools it loads
(``--tools read,bash,edit,write`` allowlist, ``--no-tools``; read, bash, edit and write are on by default,
grep, find and ls opt-in). So a denied tool is **not offered** (measured against the oracle and a scripted
model): it is not among the request's tools, and a call to it anyway is answered with the error result
``Tool <name> not found`` (the session's ``toolResult``, ``isError: true``), after which the model goes on.

That is a weaker "deny" than a refusal: the model never gets to ask, and it may reach the same end with a
tool that is allowed (the oracle writes through ``bash`` when ``write`` is not offered). The driver says so
in the reason it gives, and reports the policy applied when the decisions are exact per tool. Rules on a
call's input or on a question (``input_regex``, ``prompt_regex``) and ``manual`` cannot be set up front:
not applied, and pi runs as without a policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES

__all__ = ["DEFAULT_TOOLS", "ToolPlan", "pinned_tools", "tool_plan"]

#: pi's tools on by default (what the driver offers without a policy).
DEFAULT_TOOLS: tuple[str, ...] = ("read", "bash", "edit", "write")
#: pi's options that choose the tool set (``-t``/``--tools`` take a value).
_VALUED = ("--tools", "-t")
_NO_TOOLS = ("--no-tools", "-nt")
_NO_BUILTIN = ("--no-builtin-tools", "-nbt")


@dataclass(frozen=True)
class ToolPlan:
    """What the driver passes to pi for one phase, and what it says about it."""

    default_args: tuple[str, ...]
    """The spec's ``default_args`` with the tool set the policy leaves (unchanged without a denial)."""
    denied: dict[str, str] = field(default_factory=dict)
    """pi tool name → the rule of its native denial (the setting that keeps it out)."""
    support: InteractionSupport = InteractionSupport("native", True)


def pinned_tools(default_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(the tools the args leave on, the args without any tool-set option)``: pi's defaults unless the args
    pin an allowlist or turn the tools off."""
    rest: list[str] = []
    tools: list[str] | None = None
    off = False
    args = list(default_args)
    i = 0
    while i < len(args):
        arg = args[i]
        opt, eq, value = arg.partition("=")
        if arg in _VALUED and i + 1 < len(args):
            tools = (tools or []) + [t.strip() for t in args[i + 1].split(",") if t.strip()]
            i += 2
            continue
        if eq and opt in _VALUED:
            tools = (tools or []) + [t.strip() for t in value.split(",") if t.strip()]
        elif arg in _NO_TOOLS or arg in _NO_BUILTIN:
            off = True
        else:
            rest.append(arg)
        i += 1
    if tools is not None:
        return list(dict.fromkeys(tools)), rest
    return ([] if off else list(DEFAULT_TOOLS)), rest


def tool_plan(spec: InteractionSpec | None, default_args: Sequence[str]) -> ToolPlan:
    """pi's tool set for ``spec`` (None: no policy, the spec's args as always)."""
    args = tuple(default_args)
    if spec is None or spec.policy == "auto-approve":
        return ToolPlan(args)
    tools, rest = pinned_tools(args)
    plan = static_policy(spec, [ToolRef(n, *TOOL_NAMES.normalize(n)) for n in tools])
    if plan.unapplied:
        return ToolPlan(args, support=InteractionSupport("none", False,
                                                         f"{plan.unapplied}; pi ran as without a policy"))
    denied = [n for n in tools if plan.decisions.get(n) == "deny"]
    if not denied:
        return ToolPlan(args, support=InteractionSupport(
            "native", True, "the policy denies none of pi's tools: its tool set as without a policy"))
    kept = [n for n in tools if n not in denied]
    setting = f"--tools {','.join(kept)}" if kept else "--no-tools"
    new_args = (*rest, *setting.split(" "))
    rule = f"native: {setting}"
    return ToolPlan(new_args, {n: rule for n in denied}, InteractionSupport("native", True, (
        f"pi's tool allowlist {setting} (denied: {', '.join(denied)}; pi has no approval setting). A tool left "
        f"out is not offered, so the model cannot ask for it (a weaker deny than a refusal: a model may reach "
        f"the same end with an allowed tool); a call to one anyway gets the error result 'Tool <name> not "
        f"found'")))

"""A case's interaction policy (``ctx.interaction``) as Cline's own approval settings.

What cline 3.0.65 offers a one-shot ``--json`` run (read in the binary, measured against the oracle and a
scripted model):

- ``--auto-approve <bool>`` — one switch for every tool (the session's ``toolPolicies {"*": {autoApprove}}``;
  the default, true, is what the driver runs without a policy). With ``false`` every call asks, and a run
  without a TTY answers each ask itself with a **refusal the model reads**: the call's result is the error
  ``Tool "editor" requires approval in a TTY session -- NOT a tool or system failure. Clarify with user
  before proceeding.`` and the run goes on (the model can answer, or try another tool, which is refused
  the same way). The tools stay offered.
- ``disabledTools`` in ``global-settings.json`` — a disabled tool is **not offered**; a call to it anyway is
  ``Tool call editor was rejected before execution: AI_NoSuchToolError: Model tried to call unavailable tool
  'editor'. Available tools: …``.
- Per-tool ``toolPolicies {name: {enabled, autoApprove}}`` exist in Cline's SDK, but nothing a one-shot CLI
  run reads sets them (global settings know ``disabledTools``, ``toolAutoApprove`` and ``tools`` for its
  few optional tools); ``--acp`` has only one ``auto_approve`` switch too.

So: a policy that denies **every** tool Cline offers (``auto-deny``, a ``deny`` default) is
``--auto-approve false`` (each call refused, exactly); a policy that denies **some** tools disables them
(not offered: a weaker deny than a refusal, the model never gets to ask and may reach the same end with an
allowed tool); rules on a call's input or on a question, and ``manual``, cannot be set up front (not
applied: Cline runs as without a policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES
from .parse import NativeDenials

__all__ = ["CLINE_TOOLS", "Approvals", "REFUSE_ALL", "TOOLS", "approvals"]

#: The tools a one-shot run offers the model (the driver disables ask_question, spawn_agent and the team
#: tools); ``apply_patch`` replaces ``editor`` for gpt/codex model ids.
CLINE_TOOLS: tuple[str, ...] = ("read_files", "search_codebase", "run_commands", "fetch_web_content", "editor",
                                "apply_patch")
TOOLS: tuple[ToolRef, ...] = tuple(ToolRef(raw, *TOOL_NAMES.normalize(raw)) for raw in CLINE_TOOLS)
#: The command-line switch that makes every call ask (and, without a TTY, be refused).
REFUSE_ALL: tuple[str, ...] = ("--auto-approve", "false")


@dataclass(frozen=True)
class Approvals:
    """What the driver gives Cline for one phase, and what it says about it."""

    args: tuple[str, ...] = ()
    """Added to the command line (``--auto-approve false`` when every tool is denied)."""
    disabled: tuple[str, ...] = ()
    """Added to ``disabledTools`` in global-settings.json."""
    native: NativeDenials = field(default_factory=NativeDenials)
    """How the parser names the setting behind a refusal it finds."""
    support: InteractionSupport = InteractionSupport("native", True)


def approvals(spec: InteractionSpec | None) -> Approvals:
    """Cline's settings for ``spec`` (None: no policy, auto-approval as always)."""
    if spec is None or spec.policy == "auto-approve":
        return Approvals()
    plan = static_policy(spec, TOOLS)
    if plan.unapplied:
        return Approvals(support=InteractionSupport("none", False, f"{plan.unapplied}; Cline ran as without a policy"))
    denied = tuple(t.raw_name for t in TOOLS if plan.decisions.get(t.raw_name) == "deny")
    if not denied:
        return Approvals(support=InteractionSupport(
            "native", True, "the policy denies none of Cline's tools: auto-approval as without a policy"))
    if len(denied) == len(TOOLS):
        return Approvals(args=REFUSE_ALL, native=NativeDenials(refuse_all="native: --auto-approve false"),
                         support=InteractionSupport("native", True, (
                             "Cline's own --auto-approve false: every call asks, and a run without a TTY refuses "
                             "each one ('requires approval in a TTY session'), which the model reads; the tools "
                             "stay offered")))
    rule = f"native: disabledTools {','.join(denied)}"
    return Approvals(disabled=denied, native=NativeDenials(disabled={n: rule for n in denied}),
                     support=InteractionSupport("native", True, (
                         f"Cline's own global setting disabledTools += {', '.join(denied)}: a disabled tool is not "
                         f"offered, so the model cannot ask for it (a weaker deny than a refusal: a model may reach "
                         f"the same end with an allowed tool; Cline has no per-tool approval a one-shot run reads); "
                         f"a call to one anyway is rejected 'Model tried to call unavailable tool'")))

"""A case's interaction policy (``ctx.interaction``) as mini-swe-agent's own confirmation mode.

mini 2.4.6 has one tool, a shell (``bash`` in the ``tool`` format, the ```` ```mswea_bash_command ```` block in
``markdown``): reads and writes go through it, so a policy either allows it or denies it whole. The driver
runs it with ``--yolo`` (``agent.mode: yolo``, no confirmation). mini's other modes (its
``InteractiveAgent``, read in its source and measured):

- ``confirm``: before each action mini asks ``Execute 1 action(s)? Enter to confirm, type comment to reject``
  on its prompt (prompt_toolkit, which reads a pipe when stdin is not a terminal). A non-empty answer rejects:
  the action is not run (``action was not executed``), and the model is told ``Commands not executed. The
  user rejected your commands with the following message: <answer>`` (the trajectory's message with
  ``extra.interrupt_type: UserRejection``), then mini asks the model again. That is a **refusal the model
  reads**, per call. ``agent.whitelist_actions`` (regexes that skip the question) is not used.
- ``human``: the user types the commands: not an agent run.

So a policy that denies the shell runs mini in ``confirm`` mode (``--yolo`` dropped, ``agent.mode: confirm``
in the driver's config file) with :data:`REFUSALS` rejections on stdin, one a line. mini's way to finish is
a command too (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``), so under such a policy it is refused as well:
the run ends when the model answers without an action three times in a row (exit 0), or when the answers run
out (prompt_toolkit's end of input: mini stops, exit 1), or at the timeout. An empty line would confirm, so
none is ever sent. A policy that allows the shell runs as always; rules on a call's input or a question, and
``manual``, cannot be set up front (not applied: mini runs as without a policy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES

__all__ = ["REFUSAL", "REFUSALS", "Confirmation", "confirmation", "tool_ref"]

#: The answer mini passes on to the model with each rejected action.
REFUSAL = "Denied by the interaction policy."
#: How many actions are answered (past them mini reads the end of its input and stops, exit 1).
REFUSALS = 20
#: The driver's option that this mode replaces.
YOLO = "--yolo"
RULE = "native: agent.mode=confirm, every action rejected"


def tool_ref(raw_name: str) -> ToolRef:
    """mini's one tool under the name it has in the case's format."""
    return ToolRef(raw_name, *TOOL_NAMES.normalize(raw_name))


@dataclass(frozen=True)
class Confirmation:
    """What the driver changes in mini's run for one phase, and what it says about it."""

    refuse: bool = False
    """Confirm mode with every action rejected on stdin (instead of ``--yolo``)."""
    support: InteractionSupport = InteractionSupport("native", True)

    @property
    def stdin(self) -> bytes | None:
        return (REFUSAL + "\n").encode() * REFUSALS if self.refuse else None

    @property
    def rule(self) -> str | None:
        """The rule naming the setting behind a refusal (None: nothing is refused)."""
        return RULE if self.refuse else None


def confirmation(spec: InteractionSpec | None, raw_name: str) -> Confirmation:
    """mini's mode for ``spec`` (None: no policy, ``--yolo`` as always); ``raw_name``: its shell's name in the
    case's format."""
    if spec is None or spec.policy == "auto-approve":
        return Confirmation()
    plan = static_policy(spec, [tool_ref(raw_name)])
    if plan.unapplied:
        return Confirmation(support=InteractionSupport("none", False, f"{plan.unapplied}; mini ran as without a "
                                                                      f"policy (--yolo)"))
    if plan.decisions.get(raw_name) != "deny":
        return Confirmation(support=InteractionSupport(
            "native", True, "the policy allows mini's one tool (its shell): --yolo, as without a policy"))
    return Confirmation(refuse=True, support=InteractionSupport("native", True, (
        f"mini's own confirm mode (agent.mode: confirm, no --yolo) with each action rejected on stdin "
        f"('{REFUSAL}', which mini passes to the model: 'Commands not executed. The user rejected your commands "
        f"…'). The shell is mini's only tool, and finishing is a command too: the run ends when the model stops "
        f"acting (three replies without an action), or after {REFUSALS} refusals (end of input: mini stops, "
        f"exit 1)")))

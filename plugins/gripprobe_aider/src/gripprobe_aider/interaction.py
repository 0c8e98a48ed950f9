"""A case's interaction policy (``ctx.interaction``) as aider's own settings.

aider 0.86.2 has no tools to allow or deny: the model's reply text holds its edits, which aider applies to the
files in the chat without asking, and the driver adds the workspace's seeded files to the chat up front
(``--file``: that is the ``read``). What aider does ask are confirmations — "Create new file?", "Allow edits
to file that has not been added to the chat?", "Add file to the chat?" — which the driver's ``--yes-always``
answers yes. Measured against the oracle:

- ``--dry-run``: every edit is parsed and **not applied**; aider prints ``Did not apply edit to <path>
  (--dry-run)`` where it would print ``Applied edit to <path>``. The model is not told (one ``--message``
  turn). That is aider refusing each edit the model asks for: an exact ``deny`` of the ``edit`` tool
  (kind write).
- Without ``--yes-always``, aider reads each confirmation's answer from stdin (plain ``input()`` with
  ``--no-fancy-input``); an ``n`` line answers no: ``Create new file? (Y)es/(N)o [Yes]: Skipping edits to
  greeting.txt``. At the end of stdin aider takes the default (yes), so the driver gives it
  :data:`REFUSALS` ``n`` lines, and keeps ``--dry-run`` so that even then no edit lands.
- A ``read`` cannot be refused alone: the same confirmations add a file the reply names (a read) and create
  one (a write), so "deny reads, allow writes" is not expressible; "deny both" is: no ``--file``, every
  confirmation answered no, ``--dry-run``.

So: ``edit`` denied → ``--dry-run``; ``edit`` and ``read`` denied (``auto-deny``) → ``--dry-run``, no chat
files, no ``--yes-always``, ``n`` on stdin; ``read`` denied alone, rules on a call's input or a question,
``manual`` → not applied (aider runs as without a policy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .parse import EDIT_TOOL, TOOL_NAMES, AiderDenials

__all__ = ["READ_TOOL", "REFUSALS", "TOOLS", "Settings", "settings"]

#: What aider does with the files in the chat (the spec's ``read`` kind).
READ_TOOL = "read"
TOOLS: tuple[ToolRef, ...] = (ToolRef(EDIT_TOOL, *TOOL_NAMES.normalize(EDIT_TOOL)),
                              ToolRef(READ_TOOL, *TOOL_NAMES.normalize(READ_TOOL)))
#: ``n`` answers on stdin when every confirmation is refused (past them aider would take the default, yes).
REFUSALS = 1000
DRY_RUN = "--dry-run"
YES_ALWAYS = "--yes-always"


@dataclass(frozen=True)
class Settings:
    """What the driver changes in aider's run for one phase, and what it says about it."""

    dry_run: bool = False
    refuse_confirmations: bool = False
    """No ``--yes-always``, no chat files, ``n`` to every confirmation on stdin."""
    support: InteractionSupport = InteractionSupport("native", True)

    @property
    def denials(self) -> AiderDenials:
        """How the parser names the setting behind a refusal it finds."""
        return AiderDenials(dry_run=f"native: {DRY_RUN}" if self.dry_run else None,
                            confirm="native: every confirmation answered no (no --yes-always)"
                            if self.refuse_confirmations else None)

    @property
    def stdin(self) -> bytes | None:
        return b"n\n" * REFUSALS if self.refuse_confirmations else None


def settings(spec: InteractionSpec | None) -> Settings:
    """aider's settings for ``spec`` (None: no policy, as always)."""
    if spec is None or spec.policy == "auto-approve":
        return Settings()
    plan = static_policy(spec, TOOLS)
    if plan.unapplied:
        return Settings(support=InteractionSupport("none", False, f"{plan.unapplied}; aider ran as without a policy"))
    edit = plan.decisions.get(EDIT_TOOL) == "deny"
    read = plan.decisions.get(READ_TOOL) == "deny"
    if not edit and not read:
        return Settings(support=InteractionSupport(
            "native", True, "the policy denies neither aider's edits nor its reads: as without a policy"))
    if read and not edit:
        return Settings(support=InteractionSupport("none", False, (
            "aider cannot refuse a read alone: its confirmations add a file the reply names (a read) and create "
            "one (a write) alike, and --yes-always answers both; aider ran as without a policy")))
    if not read:
        return Settings(dry_run=True, support=InteractionSupport("native", True, (
            "aider's own --dry-run: every edit the reply asks for is parsed and not applied ('Did not apply edit "
            "to <path> (--dry-run)'); the model is not told (one --message turn)")))
    return Settings(dry_run=True, refuse_confirmations=True, support=InteractionSupport("native", True, (
        f"aider's own settings: --dry-run (no edit is applied: 'Did not apply edit to <path> (--dry-run)'), no "
        f"chat files, and no --yes-always with 'n' answering each confirmation on stdin ('Create new file?' → "
        f"'Skipping edits to <path>'; after {REFUSALS} answers aider would take the default, yes, and "
        f"--dry-run still keeps every edit out); the model is not told (one --message turn)")))

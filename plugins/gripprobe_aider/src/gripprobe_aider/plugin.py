"""aider's driver (``plugin: aider`` in a cli_agents spec).

aider runs as ``aider --message=<prompt> --edit-format=<case format> --file=<each seeded file> …``
in the workspace with stdin at /dev/null, against the phase's base URL (see :mod:`.config`). It sends
no tools: edits are parsed from the reply text, so the oracle speaks to it through the text dialects
its driver brings (:mod:`.dialect`), and tool use is seen in its stdout (tier C, :mod:`.parse`).

Its ``markers`` stay empty on purpose: aider echoes the model's reply on the same stdout as its own
markers, so a line-by-line pattern cannot tell ``Applied edit to x`` printed by aider from the same
words in a reply. :meth:`AiderDriver.parse` reads the markers with the replies masked out instead.

A case's interaction policy becomes aider's own settings (``--dry-run``, confirmations answered no:
:mod:`.interaction`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from gripprobe_core.plugin import (
    EVERY_FORMAT, AgentCommand, AgentDriver, BaseAgentDriver, CliAgentSpec, InstallRecipe, InteractionSupport,
    PhaseCapture, PhaseContext, Transcript, WrapperParseError, hookimpl,
)

from . import EXECUTABLE, NAME, PINNED_VERSION, PYPI_PACKAGE
from .config import agent_env, build_argv, chat_files, edit_format_for, files_for, write_files
from .dialect import DIALECT_NAMES, AiderDialect
from .names import TOOL_NAMES

if TYPE_CHECKING:
    from .interaction import Settings

#: Names under which the phase's aider files are kept as artifacts (``<phase>.<name>``).
CHAT_HISTORY_ARTIFACT = "aider.chat.history.md"
LLM_HISTORY_ARTIFACT = "aider.llm.history.txt"


class AiderDriver(BaseAgentDriver):
    name = NAME
    description = ("aider (PyPI aider-chat): text edit formats whole/diff/udiff, no tools; "
                   "tier C from its stdout markers dated by its LLM history")
    observability = "markers"
    calls_off_wire = {EVERY_FORMAT: (
        "aider sends no tools: every edit is parsed from the reply text (whole/diff/udiff), so no call of it is "
        "ever structured on the wire and its own output is the evidence")}
    install_hint = f"gripprobe agents install aider  (PyPI {PYPI_PACKAGE}=={PINNED_VERSION})"
    install = InstallRecipe(kind="pypi", package=PYPI_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_files(ctx.home, ctx.model_name, edit_format_for(ctx.format))
        return agent_env(ctx.openai_base_url, ctx.api_key)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as aider's ``--dry-run`` and refused confirmations (:func:`.interaction.settings`)."""
        return _settings(ctx).support

    def command(self, ctx: PhaseContext) -> AgentCommand:
        from .interaction import DRY_RUN, YES_ALWAYS

        policy = _settings(ctx)
        argv = build_argv(
            ctx.executable(ctx.agent.executable), files_for(ctx.home), base_url=ctx.openai_base_url,
            model_name=ctx.model_name, edit_format=edit_format_for(ctx.format), prompt=ctx.prompt,
            chat_paths=[] if policy.refuse_confirmations else chat_files(ctx.workspace),
            extra_args=[*ctx.agent.default_args, *([DRY_RUN] if policy.dry_run else [])])
        if policy.refuse_confirmations:
            argv = [a for a in argv if a != YES_ALWAYS]
        return AgentCommand(argv, stdin=policy.stdin)

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        files = files_for(ctx.home)
        return {CHAT_HISTORY_ARTIFACT: files.chat_history, LLM_HISTORY_ARTIFACT: files.llm_history}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        history = capture.files.get(LLM_HISTORY_ARTIFACT)
        try:
            out = parse_outputs(capture.stdout_path, history, ctx.phase, stdout_name=capture.stdout_path.name,
                                history_name=history.name if history else None,
                                denials=_settings(ctx).denials)
        except OSError as exc:
            raise WrapperParseError(f"cannot read aider stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(out.events, out.final_text)

    def oracle_dialects(self) -> dict[str, AiderDialect]:
        return {name: AiderDialect(edit_format) for edit_format, name in DIALECT_NAMES.items()}


def _settings(ctx: PhaseContext) -> "Settings":
    """The case's policy as aider's settings (:func:`.interaction.settings`; the module loads with a phase)."""
    from .interaction import settings

    return settings(ctx.interaction)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(AiderDriver())

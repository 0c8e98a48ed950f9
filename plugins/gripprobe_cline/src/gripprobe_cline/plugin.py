"""Cline's driver (``plugin: cline`` in a cli_agents spec).

The agent runs as ``cline --json -P openai-compatible -m <model> -- "<prompt>"`` in the workspace with
stdin /dev/null, its state under the phase's HOME (see :mod:`gripprobe_cline.config`), against the phase's
base URL through Cline's OpenAI-compatible provider (Chat Completions SSE). Tier B events come from its
``--json`` NDJSON stdout and the session's message file (see :mod:`gripprobe_cline.parse`); the oracle
speaks to it through :class:`gripprobe_cline.dialect.ClineDialect`. A case's interaction policy becomes
Cline's own approval settings (:mod:`gripprobe_cline.interaction`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSpec, InteractionSupport, PhaseCapture,
    PhaseContext, Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import PROVIDER_ID, agent_env, sessions_dir, write_config
from .dialect import ClineDialect
from .names import TOOL_NAMES

if TYPE_CHECKING:
    from .interaction import Approvals

#: ``cline`` arguments before ``-m <model>`` and the prompt: NDJSON events on stdout (non-interactive),
#: the OpenAI-compatible provider. Act mode with auto-approval is Cline's default.
RUN_ARGS: tuple[str, ...] = ("--json", "-P", PROVIDER_ID)
#: Names of the kept session files (``<phase>.messages.json``, ``<phase>.session.json``).
MESSAGES_ARTIFACT = "messages.json"
SESSION_ARTIFACT = "session.json"


class ClineDriver(BaseAgentDriver):
    name = NAME
    description = ("Cline CLI (npm cline): Chat Completions, run_commands + editor; tier B from its --json "
                   "NDJSON and the session's message file")
    install_hint = f"gripprobe agents install cline  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as Cline's ``--auto-approve false`` or ``disabledTools`` (:func:`.interaction.approvals`)."""
        return approvals(ctx.interaction).support

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_config(ctx.home, ctx.openai_base_url, ctx.model_name, approvals(ctx.interaction).disabled)
        return agent_env(ctx.api_key, ctx.home)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand([ctx.executable(ctx.agent.executable), *RUN_ARGS, *approvals(ctx.interaction).args,
                             "-m", ctx.model_name, *ctx.agent.default_args, "--", ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        found = find_session_files(ctx)
        return {name: path for name, path in found.items() if path is not None}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        try:
            parsed = parse_outputs(capture.stdout_path, capture.files.get(MESSAGES_ARTIFACT), ctx.phase,
                                   approvals(ctx.interaction).native)
        except OSError as exc:
            raise WrapperParseError(f"cannot read cline stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, parsed.final_text)

    def oracle_dialects(self) -> dict[str, ClineDialect]:
        return {ClineDialect.name: ClineDialect()}


def approvals(spec: InteractionSpec | None) -> "Approvals":
    """:func:`.interaction.approvals` (the module, and the parser it reads denials with, load with a phase)."""
    from .interaction import approvals as of

    return of(spec)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ClineDriver())


def find_session_files(ctx: PhaseContext) -> dict[str, Path | None]:
    """The phase's session manifest and message file, ``sessions/<id>/<id>.json`` and
    ``<id>.messages.json`` (one session per phase: HOME is fresh; the newest id when there are more).
    Session ids start with the epoch milliseconds, so the last in name order is the newest. No link is
    walked through."""
    root = sessions_dir(ctx.home)
    messages = find_agent_files(ctx, root, "*/*.messages.json")
    if not messages:
        return {MESSAGES_ARTIFACT: None, SESSION_ARTIFACT: None}
    newest = max(messages, key=lambda p: (p.parent.name, p.name))
    session_id = newest.parent.name
    manifests = [p for p in find_agent_files(ctx, root, f"{session_id}/{session_id}.json")]
    return {MESSAGES_ARTIFACT: newest, SESSION_ARTIFACT: manifests[0] if manifests else None}

"""pi's driver (``plugin: pi`` in a cli_agents spec).

The agent runs as ``pi -p --session-dir <HOME>/.pi/agent/sessions "<prompt>"`` in the workspace with
stdin /dev/null, against the phase's base URL through a custom OpenAI Chat Completions provider declared
in its isolated agent folder (see :mod:`gripprobe_pi.config`). ``-p`` (print mode, text) rather than
``--mode json``: in JSON mode pi exits 0 whatever happened (an HTTP 500 included), in print mode a
failed last request exits 1. Tier B events come from its session file (see :mod:`gripprobe_pi.parse`).
The oracle speaks to it through :class:`gripprobe_pi.dialect.PiDialect` (its ``edit`` tool). A case's
interaction policy that denies tools narrows pi's ``--tools`` allowlist (:mod:`gripprobe_pi.interaction`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport, PhaseCapture, PhaseContext,
    Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import agent_env, sessions_dir, write_config
from .dialect import PiDialect
from .interaction import tool_plan
from .names import TOOL_NAMES

#: ``pi`` arguments before ``--session-dir`` and the prompt: print mode (non-interactive, one prompt).
PRINT_ARGS: tuple[str, ...] = ("-p",)
#: Name of the session file kept as a phase artifact (``<phase>.session.jsonl``).
SESSION_ARTIFACT = "session.jsonl"
#: A prompt starting with one of these would be read as an option (``-…``) or a file to attach
#: (``@…``): such a prompt goes to pi's stdin instead, which print mode reads as the message.
NOT_POSITIONAL = ("-", "@")


class PiDriver(BaseAgentDriver):
    name = NAME
    description = ("pi coding agent (npm @mariozechner/pi-coding-agent): Chat Completions, read/bash/edit/write; "
                   "tier B from its session file")
    install_hint = f"gripprobe agents install pi  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_config(ctx.home, ctx.openai_base_url, ctx.model_name)
        return agent_env(ctx.api_key, ctx.home)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as pi's ``--tools`` allowlist (:func:`.interaction.tool_plan`)."""
        return tool_plan(ctx.interaction, ctx.agent.default_args).support

    def command(self, ctx: PhaseContext) -> AgentCommand:
        argv = [ctx.executable(ctx.agent.executable), *PRINT_ARGS, "--session-dir", str(sessions_dir(ctx.home)),
                *tool_plan(ctx.interaction, ctx.agent.default_args).default_args]
        if ctx.prompt.startswith(NOT_POSITIONAL):
            return AgentCommand(argv, stdin=ctx.prompt.encode("utf-8"))
        return AgentCommand([*argv, ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        session = find_session(ctx)
        return {SESSION_ARTIFACT: session} if session is not None else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        try:
            stdout = capture.stdout_path.read_bytes()
        except OSError as exc:
            raise WrapperParseError(f"cannot read pi stdout {capture.stdout_path}: {exc}") from exc
        kept = capture.files.get(SESSION_ARTIFACT)
        session = None
        if kept is not None:
            try:
                session = kept.read_bytes()
            except OSError:
                session = None
        parsed = parse_outputs(stdout, session, ctx.phase, stdout_name=capture.stdout_path.name,
                               session_name=kept.name if kept is not None else SESSION_ARTIFACT,
                               denied=tool_plan(ctx.interaction, ctx.agent.default_args).denied)
        return Transcript(parsed.events, parsed.final_text)

    def oracle_dialects(self) -> dict[str, PiDialect]:
        return {PiDialect.name: PiDialect()}


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(PiDriver())


def find_session(ctx: PhaseContext) -> Path | None:
    """The newest session file in the phase's session folder (one per phase: HOME is fresh); a symlink
    is never walked through. Names are ``<ISO time>_<uuid>.jsonl``, so the last in name order is the newest."""
    found = find_agent_files(ctx, sessions_dir(ctx.home), "*.jsonl")
    return max(found, key=lambda p: p.name) if found else None

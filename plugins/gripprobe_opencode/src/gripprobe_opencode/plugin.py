"""opencode's driver (``plugin: opencode`` in a cli_agents spec).

The agent runs as ``opencode run --format json --auto`` in the workspace with the prompt on stdin
(positional prompt words containing spaces get wrapped in literal quotes by this version), against
the phase's base URL through an ``@ai-sdk/openai-compatible`` provider written into its isolated
config folder (see :mod:`gripprobe_opencode.config`). Tier B events come from its ``--format json``
stdout (see :mod:`gripprobe_opencode.parse`); the oracle's generic ``tools`` dialect speaks to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport, PhaseCapture, PhaseContext,
    Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import NAME, PINNED_VERSION
from .config import agent_env, write_config
from .names import TOOL_NAMES

NPM_PACKAGE = "opencode-ai"
EXECUTABLE = "opencode"
#: ``opencode run`` arguments: JSON-lines events on stdout, no permission prompts (``--auto`` approves what
#: would be asked; a ``deny`` in the config still holds), the model's reasoning printed as ``reasoning``
#: parts (``--thinking`` changes only what is printed: the requests are byte for byte the same).
RUN_ARGS: tuple[str, ...] = ("run", "--format", "json", "--auto", "--thinking")
#: Name of the opencode log file kept as a phase artifact (see :meth:`OpencodeDriver.artifacts`).
LOG_ARTIFACT = "opencode.log"


class OpencodeDriver(BaseAgentDriver):
    name = NAME
    description = "opencode (npm opencode-ai): `opencode run --format json` JSON-lines tool events"
    install_hint = f"gripprobe agents install opencode  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        from .policy import policy_permissions  # the policy reads permissions with the parser: both load with a phase

        write_config(Path(ctx.xdg["XDG_CONFIG_HOME"]), ctx.openai_base_url, ctx.model_name,
                     policy_permissions(ctx.interaction))
        return agent_env(ctx.api_key, ctx.home)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as opencode's ``permission`` config (:mod:`gripprobe_opencode.policy`)."""
        from .policy import support_for

        return support_for(ctx.interaction)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        prompt = ctx.prompt if ctx.prompt.endswith("\n") else ctx.prompt + "\n"
        return AgentCommand([ctx.executable(ctx.agent.executable), *RUN_ARGS, *ctx.agent.default_args],
                            stdin=prompt.encode("utf-8"))

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        logs = find_agent_files(ctx, Path(ctx.xdg["XDG_DATA_HOME"]) / "opencode" / "log", "*.log")  # no link walked
        return {LOG_ARTIFACT: logs[-1]} if logs else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import final_text, parse_stdout

        try:
            parsed = parse_stdout(capture.stdout_path, ctx.phase)
        except OSError as exc:
            raise WrapperParseError(f"cannot read opencode stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, final_text(parsed))


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(OpencodeDriver())

"""Qwen Code's driver (``plugin: qwen-code`` in a cli_agents spec).

The agent runs as ``qwen --auth-type openai --approval-mode yolo --output-format stream-json --model <m>
"<prompt>"`` in the workspace, stdin /dev/null, against the phase's base URL through the
OpenAI-compatible provider (Chat Completions SSE), with its settings and state under the phase's HOME
(see :mod:`gripprobe_qwen.config`). A prompt that starts with ``-`` would be read as an option (and
yargs drops whatever follows ``--``), so such a prompt goes on stdin instead, which Qwen Code reads as
the prompt when no positional one is given. Tier B events come from its chat log, completed from its
stream-json stdout (see :mod:`gripprobe_qwen.parse`); the oracle speaks to it through
:class:`gripprobe_qwen.dialect.QwenDialect` (absolute file paths).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport, PhaseCapture, PhaseContext,
    Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import AUTH_TYPE, agent_env, qwen_home, write_settings
from .dialect import QwenDialect
from .names import TOOL_NAMES
from .policy import policy_deny_rules, support_for

#: ``qwen`` arguments before ``--model``: the OpenAI-compatible provider, every tool approved (a policy's
#: ``permissions.deny`` rules still hold: deny wins over yolo), JSON lines on stdout.
RUN_ARGS: tuple[str, ...] = ("--auth-type", AUTH_TYPE, "--approval-mode", "yolo", "--output-format", "stream-json")
#: Name of the chat log kept as a phase artifact (``<phase>.chat.jsonl``).
CHAT_ARTIFACT = "chat.jsonl"


class QwenDriver(BaseAgentDriver):
    name = NAME
    description = ("Qwen Code (npm @qwen-code/qwen-code): Chat Completions, run_shell_command/write_file/edit "
                   "with absolute paths; tier B from its chat log and stream-json stdout")
    install_hint = f"gripprobe agents install qwen-code  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_settings(ctx.home, ctx.model_name, policy_deny_rules(ctx.interaction))
        return agent_env(ctx.api_key, ctx.home, ctx.openai_base_url, ctx.model_name)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as Qwen Code's ``permissions.deny`` rules (:mod:`gripprobe_qwen.policy`)."""
        return support_for(ctx.interaction)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        argv = [ctx.executable(ctx.agent.executable), *RUN_ARGS, "--model", ctx.model_name, *ctx.agent.default_args]
        if ctx.prompt.startswith("-"):
            return AgentCommand(argv, stdin=ctx.prompt.encode("utf-8"))
        return AgentCommand([*argv, ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        chat = find_chat_log(ctx)
        return {CHAT_ARTIFACT: chat} if chat is not None else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        try:
            parsed = parse_outputs(capture.stdout_path, capture.files.get(CHAT_ARTIFACT), ctx.phase)
        except OSError as exc:
            raise WrapperParseError(f"cannot read qwen stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, parsed.final_text)

    def oracle_dialects(self) -> dict[str, QwenDialect]:
        return {QwenDialect.name: QwenDialect()}


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(QwenDriver())


def find_chat_log(ctx: PhaseContext) -> Path | None:
    """The phase's chat log ``$QWEN_HOME/projects/<project>/chats/<session id>.jsonl`` (one session per
    phase: HOME is fresh, so there is one; of several, the last in name order); a symlink is never walked
    through (the core's ``find_agent_files``)."""
    found = find_agent_files(ctx, qwen_home(ctx.home) / "projects", "*/chats/*.jsonl")
    return found[-1] if found else None

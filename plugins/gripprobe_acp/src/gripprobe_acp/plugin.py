"""The ACP drivers: one session (:class:`~gripprobe_acp.session.AcpSession`) for every ACP agent, one driver per
agent for what starts it and how it is configured.

Each driver's ``command`` starts the agent with stdin and stdout as pipes and hands the runner an
:class:`AcpSession` (``AgentCommand(argv, session=…)``): the harness is the agent's ACP client for the whole
phase, answers its permission requests with the case's policy (auto-approve when the case has none) and keeps
the conversation as ``<phase>.conversation.jsonl``, which ``parse`` reads (:mod:`gripprobe_acp.parse`).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from gripprobe_core.plugin import (
    SESSION_TRANSCRIPT, AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport,
    PhaseCapture, PhaseContext, ToolNames, Transcript, WrapperParseError, hookimpl,
)

from . import (
    CLAUDE, CLAUDE_ADAPTER_EXECUTABLE, CLAUDE_ADAPTER_PACKAGE, CLAUDE_ADAPTER_VERSION, CLAUDE_EXECUTABLE,
    CLAUDE_PACKAGE, CLAUDE_VERSION, CODEX, CODEX_ADAPTER_EXECUTABLE, CODEX_ADAPTER_PACKAGE, CODEX_ADAPTER_VERSION,
    CODEX_EXECUTABLE, CODEX_PACKAGE, CODEX_VERSION, GENERIC, OPENCODE, OPENCODE_EXECUTABLE, OPENCODE_PACKAGE,
    OPENCODE_VERSION, QWEN, QWEN_EXECUTABLE, QWEN_PACKAGE, QWEN_VERSION,
)
from .config import (
    CLAUDE_MODE, QWEN_AUTH_TYPE, QWEN_MODE, claude_setup, codex_catalog_entry, codex_setup, opencode_setup,
    qwen_setup,
)
from .dialect import AbsolutePathDialect

if TYPE_CHECKING:  # the acp library (~0.7 s of imports) loads only when a phase talks to an agent
    from .session import AcpSession

#: npm's name for this machine's CPU in the agents' platform packages (``claude-code-linux-x64``).
NPM_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(), "x64")
#: Leave out the optional dependencies: each adapter's bundled copy of its agent (a 323 MB Claude Code in the
#: Claude Agent SDK, a 436 MB codex 0.166.0). The pinned agent's own platform package is named explicitly instead.
OMIT_OPTIONAL = ("--omit=optional",)


class AcpDriver(BaseAgentDriver):
    """What every ACP driver shares: the session, parsing its transcript, answering every policy."""

    observability = "structured"
    #: The ``session/set_mode`` id that makes the agent ask before its tools run (None: leave its own).
    session_mode: str | None = None
    session_config: Mapping[str, str | bool] = {}

    def argv(self, ctx: PhaseContext) -> list[str]:
        raise NotImplementedError

    def session(self, ctx: PhaseContext) -> AcpSession:
        from .session import AcpSession  # the acp library (~0.4 s of pydantic models) only when a phase runs

        return AcpSession(mode=self.session_mode, config=dict(self.session_config), tool_names=self.tool_names)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand(self.argv(ctx), session=self.session(ctx))

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_transcript  # the transcript's reader loads with a phase, not with the registry

        path = capture.files.get(SESSION_TRANSCRIPT)
        if path is None:
            return Transcript([], None)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise WrapperParseError(f"cannot read the ACP session transcript {path}: {exc}") from exc
        parsed = parse_transcript(data, ctx.phase, Path(path).name, self.tool_names)
        return Transcript(parsed.events, parsed.final_text)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """Every request the agent makes is answered by the case's policy (the harness is its ACP client)."""
        return InteractionSupport("session", True)


class GenericAcpDriver(AcpDriver):
    """Any ACP agent: the spec's executable and default_args start it; nothing configures it (its backend, its
    model, what it may phone home and whether it asks permission are whatever its own setup says)."""

    name = GENERIC
    description = ("any ACP agent (Agent Client Protocol over stdio), started as the spec's executable with its "
                   "default_args; GripProbe is its client and answers its permission requests")

    def argv(self, ctx: PhaseContext) -> list[str]:
        return [ctx.executable(ctx.agent.executable), *ctx.agent.default_args]


class QwenAcpDriver(AcpDriver):
    """Qwen Code in ACP mode (``qwen --acp``), in its ``default`` mode: it asks before every edit and shell command."""

    name = QWEN
    description = ("Qwen Code (npm @qwen-code/qwen-code) over ACP: `qwen --acp`, Chat Completions, mode default "
                   "(asks before edits and commands); tier B from the ACP session")
    install_hint = f"gripprobe agents install qwen-code-acp  (npm {QWEN_PACKAGE}@{QWEN_VERSION})"
    install = InstallRecipe(kind="npm", package=QWEN_PACKAGE, version=QWEN_VERSION, executable=QWEN_EXECUTABLE)
    session_mode = QWEN_MODE
    tool_names = ToolNames({"notebook_edit": ("edit", "write"), "zoom_image": ("read", "read")})

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return qwen_setup(ctx.home, ctx.openai_base_url, ctx.model_name, ctx.api_key)

    def argv(self, ctx: PhaseContext) -> list[str]:
        return [ctx.executable(ctx.agent.executable), "--acp", "--auth-type", QWEN_AUTH_TYPE, "--model", ctx.model_name,
                *ctx.agent.default_args]

    def oracle_dialects(self) -> dict[str, AbsolutePathDialect]:
        return {AbsolutePathDialect.name: AbsolutePathDialect()}


class OpencodeAcpDriver(AcpDriver):
    """opencode in ACP mode (``opencode acp``): its ``permission`` config says ``ask`` for edits, shell and fetches."""

    name = OPENCODE
    description = ("opencode (npm opencode-ai) over ACP: `opencode acp`, Chat Completions, permission ask for "
                   "edit/bash/webfetch; tier B from the ACP session")
    install_hint = f"gripprobe agents install opencode-acp  (npm {OPENCODE_PACKAGE}@{OPENCODE_VERSION})"
    install = InstallRecipe(kind="npm", package=OPENCODE_PACKAGE, version=OPENCODE_VERSION,
                            executable=OPENCODE_EXECUTABLE)
    tool_names = ToolNames({"apply_patch": ("edit", "write"), "multiedit": ("edit", "write")})

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return opencode_setup(ctx.home, Path(ctx.xdg["XDG_CONFIG_HOME"]), ctx.openai_base_url, ctx.model_name,
                              ctx.api_key, OPENCODE_VERSION)

    def argv(self, ctx: PhaseContext) -> list[str]:
        return [ctx.executable(ctx.agent.executable), "acp", *ctx.agent.default_args]


def _sibling(ctx: PhaseContext, name: str) -> str:
    """A command installed beside the agent's (same ``node_modules/.bin``), else ``name`` on PATH."""
    return str(ctx.agent_executable.with_name(name)) if ctx.agent_executable is not None else name


class ClaudeAcpDriver(AcpDriver):
    """Claude Code through the ``claude-agent-acp`` adapter, which runs the pinned ``claude`` in its stream-json
    control mode; in the adapter's ``default`` ("Manual") mode it asks before edits and commands."""

    name = CLAUDE
    description = ("Claude Code (npm @anthropic-ai/claude-code) over ACP through @agentclientprotocol/claude-agent-acp: "
                   "Anthropic Messages API, mode default (asks before edits and commands); tier B from the ACP session")
    install_hint = (f"gripprobe agents install claude-code-acp  (npm {CLAUDE_ADAPTER_PACKAGE}@{CLAUDE_ADAPTER_VERSION} "
                    f"with {CLAUDE_PACKAGE}@{CLAUDE_VERSION})")
    install = InstallRecipe(kind="npm", package=CLAUDE_ADAPTER_PACKAGE, version=CLAUDE_ADAPTER_VERSION,
                            executable=CLAUDE_ADAPTER_EXECUTABLE,
                            extra=(f"{CLAUDE_PACKAGE}@{CLAUDE_VERSION}", f"{CLAUDE_PACKAGE}-linux-{NPM_ARCH}@{CLAUDE_VERSION}"),
                            npm_args=OMIT_OPTIONAL)
    session_mode = CLAUDE_MODE
    tool_names = ToolNames({
        "Bash": ("shell", "execute"), "Write": ("write", "write"), "Edit": ("edit", "write"),
        "MultiEdit": ("edit", "write"), "NotebookEdit": ("notebook_edit", "write"), "Read": ("read", "read"),
        "Agent": ("agent", "other"), "Task": ("agent", "other"), "TodoWrite": ("todo", "other"),
        "ToolSearch": ("tool_search", "other"), "Skill": ("skill", "other"), "LS": ("list", "read"),
    })

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return claude_setup(ctx.home, ctx.base_url, ctx.model_name, ctx.api_key, _sibling(ctx, CLAUDE_EXECUTABLE))

    def argv(self, ctx: PhaseContext) -> list[str]:
        return [ctx.executable(ctx.agent.executable), *ctx.agent.default_args]


class CodexAcpDriver(AcpDriver):
    """codex through the ``codex-acp`` adapter (it runs the pinned ``codex app-server``), in the adapter's
    ``agent-full-access`` mode: codex's own sandbox cannot start here, and without it codex never asks."""

    name = CODEX
    description = ("OpenAI codex (npm @openai/codex) over ACP through @agentclientprotocol/codex-acp: Responses API, "
                   "mode agent-full-access (never asks); tier B from the ACP session")
    install_hint = (f"gripprobe agents install codex-acp  (npm {CODEX_ADAPTER_PACKAGE}@{CODEX_ADAPTER_VERSION} "
                    f"with {CODEX_PACKAGE}@{CODEX_VERSION})")
    install = InstallRecipe(kind="npm", package=CODEX_ADAPTER_PACKAGE, version=CODEX_ADAPTER_VERSION,
                            executable=CODEX_ADAPTER_EXECUTABLE,
                            extra=(f"{CODEX_PACKAGE}@{CODEX_VERSION}",
                                   f"{CODEX_PACKAGE}-linux-{NPM_ARCH}@npm:{CODEX_PACKAGE}@{CODEX_VERSION}-linux-{NPM_ARCH}"),
                            npm_args=OMIT_OPTIONAL)
    tool_names = ToolNames({
        "exec_command": ("shell", "execute"), "local_shell": ("shell", "execute"),
        "write_stdin": ("write_stdin", "execute"), "apply_patch": ("edit", "write"), "view_image": ("view_image", "read"),
    })

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        codex = _sibling(ctx, CODEX_EXECUTABLE)
        entry = codex_catalog_entry(codex) if ctx.agent_executable is not None else None
        return codex_setup(ctx.home, ctx.openai_base_url, ctx.model_name, ctx.api_key, codex, entry)

    def argv(self, ctx: PhaseContext) -> list[str]:
        return [ctx.executable(ctx.agent.executable), *ctx.agent.default_args]

    def session(self, ctx: PhaseContext) -> AcpSession:
        """With a title: else, after the first turn, the adapter names the session with a model call of its own
        to ``gpt-5.6-luna`` (hard-coded), which the recording proxy refuses (model_not_under_test)."""
        from .session import AcpSession

        return AcpSession(tool_names=self.tool_names, title=f"GripProbe {ctx.test.id}")

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        spec = ctx.interaction
        if spec is None or spec.policy == "auto-approve":
            return InteractionSupport("session", True)
        return InteractionSupport("session", False, NEVER_ASKS_CODEX)


NEVER_ASKS_CODEX = ("codex-acp runs codex in its agent-full-access mode (no codex sandbox, approvals never), where it "
                    "sends no permission request at all; its modes that ask run codex's own bubblewrap sandbox, whose "
                    "helper codex refuses to create under a temporary folder, so every command would fail")

DRIVERS: tuple[AcpDriver, ...] = (GenericAcpDriver(), QwenAcpDriver(), OpencodeAcpDriver(), ClaudeAcpDriver(),
                                  CodexAcpDriver())


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    for driver in DRIVERS:
        register(driver)

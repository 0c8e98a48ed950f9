"""Claude Code's driver (``plugin: claude-code`` in a cli_agents spec).

The agent runs in print mode, ``claude -p --output-format stream-json --verbose --permission-mode dontAsk
--allowedTools … --strict-mcp-config --model <model> -- "<prompt>"``, stdin /dev/null, cwd the workspace,
against the phase's base URL over the Anthropic Messages API (see :mod:`gripprobe_claude.config`). Tier B
events come from its stream-json stdout, else its session transcript (see :mod:`gripprobe_claude.parse`).

With an interaction policy other than ``auto-approve`` it runs as a session instead (``--input-format
stream-json --permission-prompt-tool stdio``, see :mod:`gripprobe_claude.control`): the harness writes the
prompt on stdin and answers each of its permission questions with the policy
(:class:`~gripprobe_claude.session.ClaudeControlSession`); the questions and answers become
``permission_request`` / ``permission_response`` events.
The oracle's generic tools dialect drives its tools as they are (Bash ``command``; Write ``file_path``,
``content``; Edit ``file_path``, ``old_string``, ``new_string``; Read ``file_path``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    SESSION_TRANSCRIPT, AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport, PhaseCapture,
    PhaseContext, Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import agent_env, print_argv, projects_dir, session_argv, write_config
from .names import TOOL_NAMES

#: Name of the session transcript kept as a phase artifact (``<phase>.session.jsonl``).
TRANSCRIPT_ARTIFACT = "session.jsonl"


class ClaudeCodeDriver(BaseAgentDriver):
    name = NAME
    description = ("Anthropic Claude Code CLI (npm @anthropic-ai/claude-code): Anthropic Messages API, "
                   "Bash/Write/Edit/Read …; tier B from its stream-json output and session transcript")
    install_hint = f"gripprobe agents install claude-code  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_config(ctx.home)
        return agent_env(ctx.api_key, ctx.base_url, ctx.model_name)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """No policy, or ``auto-approve``: print mode with every built-in tool allowed (approvals off). Any
        other policy: a session over Claude Code's control protocol, where the harness answers every
        permission question itself (``--permission-prompt-tool stdio``, an ask rule on every tool)."""
        if uses_session(ctx):
            return InteractionSupport("session", True)
        return InteractionSupport("native", True)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        executable = ctx.executable(ctx.agent.executable)
        if uses_session(ctx):
            from .session import ClaudeControlSession

            return AgentCommand(session_argv(executable, ctx.model_name, ctx.agent.default_args),
                                session=ClaudeControlSession(ctx.prompt))
        return AgentCommand(print_argv(executable, ctx.prompt, ctx.model_name, ctx.agent.default_args))

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        transcript = find_transcript(ctx)
        return {TRANSCRIPT_ARTIFACT: transcript} if transcript is not None else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        try:
            parsed = parse_outputs(capture.stdout_path, capture.files.get(TRANSCRIPT_ARTIFACT), ctx.phase,
                                   capture.files.get(SESSION_TRANSCRIPT))
        except OSError as exc:
            raise WrapperParseError(f"cannot read Claude Code's stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, parsed.final_text)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ClaudeCodeDriver())


def uses_session(ctx: PhaseContext) -> bool:
    """Whether the phase runs as a session: a policy that is not ``auto-approve`` (which print mode, with
    every built-in tool allowed, already is)."""
    spec = getattr(ctx, "interaction", None)
    return spec is not None and spec.policy != "auto-approve"


def find_transcript(ctx: PhaseContext) -> Path | None:
    """The main session transcript ``~/.claude/projects/<cwd slug>/<session id>.jsonl`` (one per phase: HOME
    is fresh; sub-agents' transcripts lie a folder deeper); a symlink is never walked through. When there
    are several, the newest (then the last by name)."""
    found = find_agent_files(ctx, projects_dir(ctx.home), "*/*.jsonl")
    if not found:
        return None

    def newest(path: Path) -> tuple[float, str]:
        try:
            return os.stat(path, follow_symlinks=False).st_mtime, path.as_posix()
        except OSError:
            return 0.0, path.as_posix()

    return max(found, key=newest)

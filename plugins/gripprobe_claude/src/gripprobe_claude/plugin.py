"""Claude Code's driver (``plugin: claude-code`` in a cli_agents spec).

The agent runs in print mode, ``claude -p --output-format stream-json --verbose --permission-mode dontAsk
--allowedTools … --strict-mcp-config --model <model> -- "<prompt>"``, stdin /dev/null, cwd the workspace,
against the phase's base URL over the Anthropic Messages API (see :mod:`gripprobe_claude.config`). Tier B
events come from its stream-json stdout, else its session transcript (see :mod:`gripprobe_claude.parse`).
The oracle's generic tools dialect drives its tools as they are (Bash ``command``; Write ``file_path``,
``content``; Edit ``file_path``, ``old_string``, ``new_string``; Read ``file_path``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, PhaseCapture, PhaseContext, Transcript,
    WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import agent_env, print_argv, projects_dir, write_config
from .parse import TOOL_NAMES, parse_outputs

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

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand(print_argv(ctx.executable(ctx.agent.executable), ctx.prompt, ctx.model_name,
                                       ctx.agent.default_args))

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        transcript = find_transcript(ctx)
        return {TRANSCRIPT_ARTIFACT: transcript} if transcript is not None else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        try:
            parsed = parse_outputs(capture.stdout_path, capture.files.get(TRANSCRIPT_ARTIFACT), ctx.phase)
        except OSError as exc:
            raise WrapperParseError(f"cannot read Claude Code's stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, parsed.final_text)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ClaudeCodeDriver())


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

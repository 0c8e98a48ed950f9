"""codex's driver (``plugin: codex`` in a cli_agents spec).

The agent runs as ``codex exec --json --strict-config --skip-git-repo-check -C <workspace> -- "<prompt>"``
with stdin /dev/null (an open stdin pipe is read and appended to the prompt), ``CODEX_HOME=<HOME>/.codex``,
against the phase's base URL through a custom Responses API provider (see :mod:`gripprobe_codex.config`).
Tier B events come from its rollout transcript, else its ``--json`` stdout (see :mod:`gripprobe_codex.parse`).
The oracle speaks to it through :class:`gripprobe_codex.dialect.CodexDialect` (its freeform ``apply_patch``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, InstallRecipe, InteractionSupport, PhaseCapture, PhaseContext,
    Transcript, WrapperParseError, find_agent_files, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import agent_env, catalog_template, codex_home, write_config
from .dialect import CodexDialect
from .names import TOOL_NAMES
from .policy import support_for

#: ``codex exec`` arguments before ``-C <workspace>`` and the prompt: JSON-lines events on stdout,
#: unknown config keys are an error, no git repository needed.
EXEC_ARGS: tuple[str, ...] = ("exec", "--json", "--strict-config", "--skip-git-repo-check")
#: Name of the rollout transcript kept as a phase artifact (``<phase>.rollout.jsonl``).
ROLLOUT_ARTIFACT = "rollout.jsonl"


class CodexDriver(BaseAgentDriver):
    name = NAME
    description = ("OpenAI codex CLI (npm @openai/codex): Responses API, exec_command + apply_patch; "
                   "tier B from its rollout transcript and `codex exec --json`")
    install_hint = f"gripprobe agents install codex  (npm {NPM_PACKAGE}@{PINNED_VERSION})"
    install = InstallRecipe(kind="npm", package=NPM_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        template = catalog_template(ctx.executable(ctx.agent.executable))
        write_config(ctx.home, ctx.openai_base_url, ctx.model_name, template)
        return agent_env(ctx.api_key, ctx.home, ctx.openai_base_url)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """Only a policy that denies none of codex's tools is in force (:mod:`gripprobe_codex.policy`)."""
        return support_for(ctx.interaction)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand([ctx.executable(ctx.agent.executable), *EXEC_ARGS, *ctx.agent.default_args,
                             "-C", str(ctx.workspace), "--", ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        rollout = find_rollout(ctx)
        return {ROLLOUT_ARTIFACT: rollout} if rollout is not None else {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_outputs

        try:
            parsed = parse_outputs(capture.stdout_path, capture.files.get(ROLLOUT_ARTIFACT), ctx.phase)
        except OSError as exc:
            raise WrapperParseError(f"cannot read codex stdout {capture.stdout_path}: {exc}") from exc
        return Transcript(parsed.events, parsed.final_text)

    def oracle_dialects(self) -> dict[str, CodexDialect]:
        return {CodexDialect.name: CodexDialect()}


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(CodexDriver())


def find_rollout(ctx: PhaseContext) -> Path | None:
    """The newest ``rollout-*.jsonl`` under ``$CODEX_HOME/sessions`` (one per phase: HOME is fresh);
    a symlink is never walked through.

    Paths are ``YYYY/MM/DD/rollout-<YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl``, so the last in name order
    is the newest."""
    found = find_agent_files(ctx, codex_home(ctx.home) / "sessions", "*/*/*/rollout-*.jsonl")
    return max(found, key=lambda p: (p.parent.as_posix(), p.name)) if found else None

"""Hook implementations for codex (``plugin: codex`` in a cli_agents spec).

Every hook answers only for ``agent.plugin == "codex"`` and returns ``None`` otherwise. The agent runs
as ``codex exec --json --strict-config --skip-git-repo-check -C <workspace> "<prompt>"`` with stdin
/dev/null (an open stdin pipe is read and appended to the prompt), ``CODEX_HOME=<HOME>/.codex``, against
the phase's base URL through a custom Responses API provider (see :mod:`gripprobe_codex.config`).
Tier B events come from its rollout transcript, else its ``--json`` stdout (see :mod:`gripprobe_codex.parse`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core import (
    AgentCommand, AgentInfo, BackendSpec, CliAgentSpec, Event, InstallRecipe, PhaseContext, PhaseCapture,
    RouteDecision, WrapperParseError, hookimpl,
)

from . import EXECUTABLE, NAME, NPM_PACKAGE, PINNED_VERSION
from .config import agent_env, catalog_template, codex_home, write_config
from .parse import parse_outputs

#: ``codex exec`` arguments before ``-C <workspace>`` and the prompt: JSON-lines events on stdout,
#: unknown config keys are an error, no git repository needed.
EXEC_ARGS: tuple[str, ...] = ("exec", "--json", "--strict-config", "--skip-git-repo-check")
#: Name of the rollout transcript kept as a phase artifact (``<phase>.rollout.jsonl``).
ROLLOUT_ARTIFACT = "rollout.jsonl"


def _ours(agent: CliAgentSpec) -> bool:
    return agent.plugin == NAME


def _executable(agent: CliAgentSpec, ctx: PhaseContext) -> str:
    return str(ctx.agent_executable) if ctx.agent_executable is not None else agent.executable


@hookimpl
def register_agents(register: Callable[[AgentInfo], None]) -> None:
    register(AgentInfo(
        name=NAME, observability="structured",
        description="OpenAI codex CLI (npm @openai/codex): Responses API, exec_command + apply_patch; "
                    "tier B from its rollout transcript and `codex exec --json`",
        install_hint=f"gripprobe agents install codex  (npm {NPM_PACKAGE}@{PINNED_VERSION})"))


@hookimpl
def agent_install_recipe(agent: CliAgentSpec) -> InstallRecipe | None:
    if not _ours(agent):
        return None
    return InstallRecipe(kind="npm", package=NPM_PACKAGE, version=agent.version or PINNED_VERSION,
                         executable=EXECUTABLE)


@hookimpl
def build_env(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, str] | None:
    if not _ours(agent):
        return None
    template = catalog_template(_executable(agent, ctx))
    write_config(ctx.home, ctx.openai_base_url, ctx.model_name, template)
    return agent_env(ctx.api_key, ctx.home, ctx.openai_base_url)


@hookimpl
def build_command(agent: CliAgentSpec, ctx: PhaseContext) -> AgentCommand | None:
    if not _ours(agent):
        return None
    return AgentCommand([_executable(agent, ctx), *EXEC_ARGS, *agent.default_args, "-C", str(ctx.workspace),
                         "--", ctx.prompt])


@hookimpl
def route_base_url(agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision | None:
    if not _ours(agent):
        return None
    return RouteDecision(True)


def find_rollout(home: Path) -> Path | None:
    """The newest ``rollout-*.jsonl`` under ``$CODEX_HOME/sessions`` (one per phase: HOME is fresh).

    Paths are ``YYYY/MM/DD/rollout-<YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl``, so the last in name order
    is the newest."""
    sessions = codex_home(home) / "sessions"
    if not sessions.is_dir():
        return None
    found = sorted((p for p in sessions.glob("*/*/*/rollout-*.jsonl") if p.is_file()),
                   key=lambda p: (p.parent.as_posix(), p.name))
    return found[-1] if found else None


@hookimpl
def phase_artifacts(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, Path] | None:
    if not _ours(agent):
        return None
    rollout = find_rollout(ctx.home)
    return {ROLLOUT_ARTIFACT: rollout} if rollout is not None else {}


@hookimpl
def parse_wrapper_events(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    if not _ours(agent):
        return None
    try:
        return parse_outputs(outputs.stdout_path, outputs.extra.get(ROLLOUT_ARTIFACT), ctx.phase).events
    except OSError as exc:
        raise WrapperParseError(f"cannot read codex stdout {outputs.stdout_path}: {exc}") from exc


@hookimpl
def final_output_text(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> str | None:
    if not _ours(agent):
        return None
    try:
        return parse_outputs(outputs.stdout_path, outputs.extra.get(ROLLOUT_ARTIFACT), ctx.phase).final_text
    except OSError:
        return None

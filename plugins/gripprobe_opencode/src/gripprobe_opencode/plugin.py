"""Hook implementations for opencode (``plugin: opencode`` in a cli_agents spec).

Every hook answers only for ``agent.plugin == "opencode"`` and returns ``None`` otherwise.
The agent runs as ``opencode run --format json --auto`` in the workspace with the prompt on stdin
(positional prompt words containing spaces get wrapped in literal quotes by this version), against
the phase's base URL through an ``@ai-sdk/openai-compatible`` provider written into its isolated
config folder (see :mod:`gripprobe_opencode.config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core import (
    AgentCommand, AgentInfo, BackendSpec, CliAgentSpec, Event, InstallRecipe, PhaseContext, PhaseCapture,
    RouteDecision, WrapperParseError, hookimpl,
)

from . import NAME, PINNED_VERSION
from .config import agent_env, write_config
from .parse import final_text, parse_stdout

NPM_PACKAGE = "opencode-ai"
EXECUTABLE = "opencode"
#: ``opencode run`` arguments: JSON-lines events on stdout, no permission prompts.
RUN_ARGS: tuple[str, ...] = ("run", "--format", "json", "--auto")
#: Name of the opencode log file kept as a phase artifact (see :func:`phase_artifacts`).
LOG_ARTIFACT = "opencode.log"


def _ours(agent: CliAgentSpec) -> bool:
    return agent.plugin == NAME


@hookimpl
def register_agents(register: Callable[[AgentInfo], None]) -> None:
    register(AgentInfo(
        name=NAME, observability="structured",
        description="opencode (npm opencode-ai): `opencode run --format json` JSON-lines tool events",
        install_hint=f"gripprobe agents install opencode  (npm {NPM_PACKAGE}@{PINNED_VERSION})"))


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
    write_config(Path(ctx.xdg["XDG_CONFIG_HOME"]), ctx.openai_base_url, ctx.model_name)
    return agent_env(ctx.api_key, ctx.home)


@hookimpl
def build_command(agent: CliAgentSpec, ctx: PhaseContext) -> AgentCommand | None:
    if not _ours(agent):
        return None
    executable = str(ctx.agent_executable) if ctx.agent_executable is not None else agent.executable
    prompt = ctx.prompt if ctx.prompt.endswith("\n") else ctx.prompt + "\n"
    return AgentCommand([executable, *RUN_ARGS, *agent.default_args], stdin=prompt.encode("utf-8"))


@hookimpl
def route_base_url(agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision | None:
    if not _ours(agent):
        return None
    return RouteDecision(True)


@hookimpl
def phase_artifacts(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, Path] | None:
    if not _ours(agent):
        return None
    log_dir = Path(ctx.xdg["XDG_DATA_HOME"]) / "opencode" / "log"
    logs = sorted(log_dir.glob("*.log")) if log_dir.is_dir() else []
    return {LOG_ARTIFACT: logs[-1]} if logs else {}


@hookimpl
def parse_wrapper_events(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    if not _ours(agent):
        return None
    try:
        return parse_stdout(outputs.stdout_path, ctx.phase).events
    except OSError as exc:
        raise WrapperParseError(f"cannot read opencode stdout {outputs.stdout_path}: {exc}") from exc


@hookimpl
def final_output_text(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> str | None:
    if not _ours(agent):
        return None
    try:
        return final_text(parse_stdout(outputs.stdout_path, ctx.phase))
    except OSError:
        return None

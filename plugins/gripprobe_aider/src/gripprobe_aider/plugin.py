"""Hook implementations for aider (``plugin: aider`` in a cli_agents spec).

Every agent hook answers only for ``agent.plugin == "aider"`` and returns ``None`` otherwise.
aider runs as ``aider --message=<prompt> --edit-format=<case format> --file=<each seeded file> …``
in the workspace with stdin at /dev/null, against the phase's base URL (see :mod:`.config`). It sends
no tools: edits are parsed from the reply text, so the oracle speaks to it through the text dialects
registered here (:mod:`.dialect`), and tool use is seen in its stdout (tier C, :mod:`.parse`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from gripprobe_core import (
    AgentCommand, AgentInfo, BackendSpec, CliAgentSpec, Event, InstallRecipe, MarkerPattern, PhaseContext,
    PhaseCapture, RouteDecision, WrapperParseError, hookimpl,
)

from . import EXECUTABLE, NAME, PINNED_VERSION, PYPI_PACKAGE
from .config import agent_env, build_argv, chat_files, edit_format_for, files_for, write_files
from .dialect import DIALECT_NAMES, AiderDialect
from .parse import parse_outputs

#: Names under which the phase's aider files are kept as artifacts (``<phase>.<name>``).
CHAT_HISTORY_ARTIFACT = "aider.chat.history.md"
LLM_HISTORY_ARTIFACT = "aider.llm.history.txt"


def _ours(agent: CliAgentSpec) -> bool:
    return agent.plugin == NAME


@hookimpl
def register_agents(register: Callable[[AgentInfo], None]) -> None:
    register(AgentInfo(
        name=NAME, observability="markers",
        description="aider (PyPI aider-chat): text edit formats whole/diff/udiff, no tools; "
                    "tier C from its stdout markers dated by its LLM history",
        install_hint=f"gripprobe agents install aider  (PyPI {PYPI_PACKAGE}=={PINNED_VERSION})"))


@hookimpl
def register_oracle_dialects(register: Callable[[str, Any], None]) -> None:
    for edit_format, name in DIALECT_NAMES.items():
        register(name, AiderDialect(edit_format))


@hookimpl
def agent_install_recipe(agent: CliAgentSpec) -> InstallRecipe | None:
    if not _ours(agent):
        return None
    return InstallRecipe(kind="pypi", package=PYPI_PACKAGE, version=agent.version or PINNED_VERSION,
                         executable=EXECUTABLE)


@hookimpl
def build_env(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, str] | None:
    if not _ours(agent):
        return None
    write_files(ctx.home, ctx.model_name, edit_format_for(ctx.format))
    return agent_env(ctx.openai_base_url, ctx.api_key)


@hookimpl
def build_command(agent: CliAgentSpec, ctx: PhaseContext) -> AgentCommand | None:
    if not _ours(agent):
        return None
    executable = str(ctx.agent_executable) if ctx.agent_executable is not None else agent.executable
    argv = build_argv(executable, files_for(ctx.home), base_url=ctx.openai_base_url, model_name=ctx.model_name,
                      edit_format=edit_format_for(ctx.format), prompt=ctx.prompt,
                      chat_paths=chat_files(ctx.workspace), extra_args=list(agent.default_args))
    return AgentCommand(argv)


@hookimpl
def route_base_url(agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision | None:
    if not _ours(agent):
        return None
    return RouteDecision(True)


@hookimpl
def phase_artifacts(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, Path] | None:
    if not _ours(agent):
        return None
    files = files_for(ctx.home)
    return {CHAT_HISTORY_ARTIFACT: files.chat_history, LLM_HISTORY_ARTIFACT: files.llm_history}


@hookimpl
def tier_c_patterns(agent: CliAgentSpec) -> list[MarkerPattern] | None:
    """None on purpose: aider echoes the model's reply on the same stdout as its own markers, so a
    line-by-line pattern cannot tell ``Applied edit to x`` printed by aider from the same words in a
    reply. :func:`parse_wrapper_events` reads the markers with the replies masked out instead."""
    return None


@hookimpl
def parse_wrapper_events(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    if not _ours(agent):
        return None
    history = outputs.extra.get(LLM_HISTORY_ARTIFACT)
    try:
        return parse_outputs(outputs.stdout_path, history, ctx.phase, stdout_name=outputs.stdout_path.name,
                             history_name=history.name if history else None).events
    except OSError as exc:
        raise WrapperParseError(f"cannot read aider stdout {outputs.stdout_path}: {exc}") from exc


@hookimpl
def final_output_text(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> str | None:
    if not _ours(agent):
        return None
    history = outputs.extra.get(LLM_HISTORY_ARTIFACT)
    try:
        return parse_outputs(outputs.stdout_path, history, ctx.phase).final_text
    except OSError:
        return None

"""Hook implementations for gptme (``plugin: gptme`` in a cli_agents spec).

Every agent hook answers only for ``agent.plugin == "gptme"`` and returns ``None`` otherwise. The
agent runs, in the workspace, as::

    gptme --non-interactive --name gripprobe-<phase>-<random> --model local/<model>
          --tool-format <format> --output-format json --workspace <ws> <default_args> -- "<prompt>"

against the phase's base URL (see :mod:`gripprobe_gptme.config`), stdin /dev/null. Tier B comes
from its ``conversation.jsonl`` (kept as the ``conversation.jsonl`` phase artifact; its JSON stdout
is the fallback). ``register_oracle_dialects`` teaches the oracle gptme's three tool formats
(:mod:`gripprobe_gptme.dialects`).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable

from gripprobe_core import (
    AgentCommand, AgentInfo, BackendSpec, CliAgentSpec, Event, InstallRecipe, PhaseContext,
    PhaseCapture, RouteDecision, WrapperParseError, hookimpl,
)

from . import NAME, PINNED_VERSION
from .config import agent_env, logs_home
from .dialects import register_all
from .parse import CONVERSATION_ARTIFACT, final_text, parse_phase

PYPI_PACKAGE = "gptme"
EXECUTABLE = "gptme"
#: Run prefix of the conversation name (``--name``); a random suffix makes it unique: reusing a
#: name resumes that conversation.
NAME_PREFIX = "gripprobe"
#: Provider prefix for the model name: gptme's ``local`` provider is any OpenAI-compatible server at
#: ``OPENAI_API_BASE``.
PROVIDER = "local"
FORMATS = ("tool", "markdown", "xml")


def _ours(agent: CliAgentSpec) -> bool:
    return agent.plugin == NAME


@hookimpl
def register_agents(register: Callable[[AgentInfo], None]) -> None:
    register(AgentInfo(
        name=NAME, observability="structured",
        description="gptme (PyPI gptme): tool uses from its conversation.jsonl, in the tool, markdown or xml format",
        install_hint=f"gripprobe agents install gptme  (PyPI {PYPI_PACKAGE}=={PINNED_VERSION})"))


@hookimpl
def register_oracle_dialects(register: Callable[[str, Any], None]) -> None:
    register_all(register)


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
    return agent_env(ctx.openai_base_url, ctx.api_key, ctx.home)


def conversation_name(phase: str) -> str:
    """A fresh ``--name``: ``gripprobe-<phase>-<12 hex>`` (never reused, so never a resume)."""
    return f"{NAME_PREFIX}-{phase}-{uuid.uuid4().hex[:12]}"


@hookimpl
def build_command(agent: CliAgentSpec, ctx: PhaseContext) -> AgentCommand | None:
    if not _ours(agent):
        return None
    executable = str(ctx.agent_executable) if ctx.agent_executable is not None else agent.executable
    tool_format = ctx.format if ctx.format in FORMATS else "tool"
    return AgentCommand([
        executable, "--non-interactive", "--name", conversation_name(ctx.phase),
        "--model", f"{PROVIDER}/{ctx.model_name}", "--tool-format", tool_format, "--output-format", "json",
        "--workspace", str(ctx.workspace), *agent.default_args, "--", ctx.prompt])


@hookimpl
def route_base_url(agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision | None:
    if not _ours(agent):
        return None
    return RouteDecision(True)


def find_conversation(home: Path, phase: str) -> Path | None:
    """The phase's ``conversation.jsonl`` under ``$GPTME_LOGS_HOME`` (the newest of this phase's
    names, should there be several), None when gptme wrote none."""
    root = logs_home(home)
    try:
        found = [p for p in root.glob(f"{NAME_PREFIX}-{phase}-*/conversation.jsonl") if p.is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


@hookimpl
def phase_artifacts(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, Path] | None:
    if not _ours(agent):
        return None
    conversation = find_conversation(ctx.home, ctx.phase)
    if conversation is None:
        return {}
    out = {CONVERSATION_ARTIFACT: conversation}
    events = conversation.parent / "events.jsonl"
    if events.is_file():
        out["events.jsonl"] = events
    return out


@hookimpl
def parse_wrapper_events(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    if not _ours(agent):
        return None
    return parse_phase(outputs, ctx.phase, ctx.format).events


@hookimpl
def final_output_text(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> str | None:
    if not _ours(agent):
        return None
    try:
        return final_text(parse_phase(outputs, ctx.phase, ctx.format))
    except WrapperParseError:
        return None

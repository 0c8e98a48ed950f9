"""gptme's driver (``plugin: gptme`` in a cli_agents spec).

The agent runs, in the workspace, as::

    gptme --non-interactive --name gripprobe-<phase>-<random> --model local/<model>
          --tool-format <format> --output-format json --workspace <ws> <default_args> -- "<prompt>"

against the phase's base URL (see :mod:`gripprobe_gptme.config`), stdin /dev/null. Tier B comes
from its ``conversation.jsonl`` (kept as the ``gptme.conversation.jsonl`` phase file, with gptme's
``events.jsonl``; its JSON stdout is the fallback), read by :mod:`gripprobe_gptme.parse`. The oracle
speaks gptme's three tool formats through the driver's dialects (:mod:`gripprobe_gptme.dialects`). A
case's interaction policy that denies tools takes them out of the ``--tools`` allowlist
(:mod:`gripprobe_gptme.interaction`).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    EVERY_FORMAT, AgentCommand, AgentDriver, BaseAgentDriver, Dialect, InstallRecipe, InteractionSupport,
    PhaseCapture, PhaseContext, Transcript, find_agent_files, hookimpl,
)

from . import NAME, PINNED_VERSION
from .config import agent_env, logs_home
from .dialects import gptme_dialects
from .interaction import tool_plan
from .names import TOOL_NAMES

PYPI_PACKAGE = "gptme"
EXECUTABLE = "gptme"
#: Run prefix of the conversation name (``--name``); a random suffix makes it unique: reusing a
#: name resumes that conversation.
NAME_PREFIX = "gripprobe"
#: Provider prefix for the model name: gptme's ``local`` provider is any OpenAI-compatible server at
#: ``OPENAI_API_BASE``.
PROVIDER = "local"
FORMATS = ("tool", "markdown", "xml")
#: gptme's append log next to its conversation: kept with it, not parsed.
EVENTS_ARTIFACT = "events.jsonl"


class GptmeDriver(BaseAgentDriver):
    name = NAME
    description = "gptme (PyPI gptme): tool uses from its conversation.jsonl, in the tool, markdown or xml format"
    install_hint = f"gripprobe agents install gptme  (PyPI {PYPI_PACKAGE}=={PINNED_VERSION})"
    install = InstallRecipe(kind="pypi", package=PYPI_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES
    calls_off_wire = {EVERY_FORMAT: (
        "gptme runs the tool blocks it finds in the reply text in every format: ```save/```shell blocks in "
        "markdown, <tool-use> in xml, and in the tool format too, beside the structured calls; the wire "
        "carries those calls only as reply text, so its conversation log is the evidence")}

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return agent_env(ctx.openai_base_url, ctx.api_key, ctx.home)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as gptme's ``--tools`` allowlist (:func:`.interaction.tool_plan`)."""
        return tool_plan(ctx.interaction, ctx.agent.default_args).support

    def command(self, ctx: PhaseContext) -> AgentCommand:
        tool_format = ctx.format if ctx.format in FORMATS else "tool"
        return AgentCommand([
            ctx.executable(ctx.agent.executable), "--non-interactive", "--name", conversation_name(ctx.phase),
            "--model", f"{PROVIDER}/{ctx.model_name}", "--tool-format", tool_format, "--output-format", "json",
            "--workspace", str(ctx.workspace), *tool_plan(ctx.interaction, ctx.agent.default_args).default_args,
            "--", ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        from .parse import CONVERSATION_ARTIFACT

        conversation = find_conversation(ctx)
        if conversation is None:
            return {}
        out = {CONVERSATION_ARTIFACT: conversation}
        for events in find_agent_files(ctx, conversation.parent, EVENTS_ARTIFACT):
            out[EVENTS_ARTIFACT] = events
        return out

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_phase

        return parse_phase(capture, ctx.phase, ctx.format,
                           denied=tool_plan(ctx.interaction, ctx.agent.default_args).denied)

    def oracle_dialects(self) -> dict[str, Dialect]:
        return gptme_dialects()


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(GptmeDriver())


def conversation_name(phase: str) -> str:
    """A fresh ``--name``: ``gripprobe-<phase>-<12 hex>`` (never reused, so never a resume)."""
    return f"{NAME_PREFIX}-{phase}-{uuid.uuid4().hex[:12]}"


def find_conversation(ctx: PhaseContext) -> Path | None:
    """The phase's ``conversation.jsonl`` under ``$GPTME_LOGS_HOME`` (the newest of this phase's
    names, should there be several), None when gptme wrote none; a symlink is never walked through."""
    found = []
    for p in find_agent_files(ctx, logs_home(ctx.home), f"{NAME_PREFIX}-{ctx.phase}-*/conversation.jsonl"):
        try:
            found.append((os.lstat(p).st_mtime, p))
        except OSError:
            continue
    return max(found)[1] if found else None

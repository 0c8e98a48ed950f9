"""mini-swe-agent's driver (``plugin: mini-swe-agent`` in a cli_agents spec).

The agent runs, in the workspace, as::

    mini --model openai/<model> --model-class <litellm|litellm_textbased> --yolo --exit-immediately
         --cost-limit 0 --output <HOME>/.local/share/mini-swe-agent/<phase>.traj.json
         --config <mini.yaml|mini_textbased.yaml> --config <HOME>/.config/mini-swe-agent/gripprobe.yaml
         <default_args> --task=<prompt>

against the phase's base URL (see :mod:`gripprobe_miniswe.config`), stdin /dev/null. The format picks mini's
model class and its shipped config: ``tool`` (one ``bash`` function tool) or ``markdown`` (one fenced
```` ```mswea_bash_command ```` block per reply, no tools). Tier B comes from the trajectory it saves after
every step (:mod:`gripprobe_miniswe.parse`); the oracle speaks both formats through the driver's dialects
(:mod:`gripprobe_miniswe.dialect`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, Dialect, InstallRecipe, PhaseCapture, PhaseContext, Transcript,
    hookimpl,
)

from . import EXECUTABLE, FORMATS, NAME, PINNED_VERSION, PYPI_PACKAGE
from .config import MODEL_CLASS, PROVIDER, SHIPPED_CONFIG, agent_env, config_file, trajectory_path, write_config
from .dialect import mini_dialects
from .parse import TOOL_NAMES, TRAJECTORY_ARTIFACT, parse_phase

#: The format used when a case names one mini does not have (its own default: tool calls).
DEFAULT_FORMAT = "tool"


def mini_format(fmt: str) -> str:
    """The case's format when it is one of mini's, else :data:`DEFAULT_FORMAT`."""
    return fmt if fmt in FORMATS else DEFAULT_FORMAT


class MiniSweDriver(BaseAgentDriver):
    name = NAME
    description = ("mini-swe-agent (PyPI mini-swe-agent): one shell, as a bash function tool or as a "
                   "```mswea_bash_command block in the reply text; tier B from its trajectory JSON")
    install_hint = f"gripprobe agents install mini-swe-agent  (PyPI {PYPI_PACKAGE}=={PINNED_VERSION})"
    install = InstallRecipe(kind="pypi", package=PYPI_PACKAGE, version=PINNED_VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES
    calls_off_wire = {"markdown": (
        "mini's text-based model class runs the one ```mswea_bash_command block it finds in the reply text; "
        "no tools are offered, so the wire carries those commands only as reply text and mini's trajectory "
        "is the evidence")}

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_config(ctx.home, ctx.openai_base_url, ctx.workspace)
        return agent_env(ctx.openai_base_url, ctx.api_key, ctx.home)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        fmt = mini_format(ctx.format)
        return AgentCommand([
            ctx.executable(ctx.agent.executable), "--model", f"{PROVIDER}/{ctx.model_name}",
            "--model-class", MODEL_CLASS[fmt], "--yolo", "--exit-immediately", "--cost-limit", "0",
            "--output", str(trajectory_path(ctx.home, ctx.phase)),
            "--config", SHIPPED_CONFIG[fmt], "--config", str(config_file(ctx.home)),
            *ctx.agent.default_args, f"--task={ctx.prompt}"])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        return {TRAJECTORY_ARTIFACT: trajectory_path(ctx.home, ctx.phase)}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        return parse_phase(capture, ctx.phase, mini_format(ctx.format))

    def oracle_dialects(self) -> dict[str, Dialect]:
        return mini_dialects()


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(MiniSweDriver())

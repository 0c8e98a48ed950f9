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
(:mod:`gripprobe_miniswe.dialect`). A case's interaction policy that denies the shell runs mini in its own
confirm mode with every action rejected (:mod:`gripprobe_miniswe.interaction`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, Dialect, InstallRecipe, InteractionSupport, PhaseCapture,
    PhaseContext, Transcript, hookimpl,
)

from . import EXECUTABLE, FORMATS, NAME, PINNED_VERSION, PYPI_PACKAGE
from .config import MODEL_CLASS, PROVIDER, SHIPPED_CONFIG, agent_env, config_file, trajectory_path, write_config
from .dialect import DEFAULT_FENCE, mini_dialects
from .interaction import YOLO, confirmation
from .names import TOOL_NAMES

#: The format used when a case names one mini does not have (its own default: tool calls).
DEFAULT_FORMAT = "tool"


def mini_format(fmt: str) -> str:
    """The case's format when it is one of mini's, else :data:`DEFAULT_FORMAT`."""
    return fmt if fmt in FORMATS else DEFAULT_FORMAT


def shell_name(fmt: str) -> str:
    """mini's one tool as the case's format names it (the ``bash`` function, or the fence language)."""
    return "bash" if mini_format(fmt) == "tool" else DEFAULT_FENCE


def policy_of(ctx: PhaseContext):
    """mini's mode for the case's interaction policy (:func:`.interaction.confirmation`)."""
    return confirmation(ctx.interaction, shell_name(ctx.format))


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

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as mini's own confirm mode, every action rejected (:mod:`.interaction`)."""
        return policy_of(ctx).support

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        write_config(ctx.home, ctx.openai_base_url, ctx.workspace, confirm=policy_of(ctx).refuse)
        return agent_env(ctx.openai_base_url, ctx.api_key, ctx.home)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        fmt = mini_format(ctx.format)
        policy = policy_of(ctx)
        return AgentCommand([
            ctx.executable(ctx.agent.executable), "--model", f"{PROVIDER}/{ctx.model_name}",
            "--model-class", MODEL_CLASS[fmt], *([] if policy.refuse else [YOLO]), "--exit-immediately",
            "--cost-limit", "0", "--output", str(trajectory_path(ctx.home, ctx.phase)),
            "--config", SHIPPED_CONFIG[fmt], "--config", str(config_file(ctx.home)),
            *ctx.agent.default_args, f"--task={ctx.prompt}"], stdin=policy.stdin)

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        from .parse import TRAJECTORY_ARTIFACT

        return {TRAJECTORY_ARTIFACT: trajectory_path(ctx.home, ctx.phase)}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        from .parse import parse_phase

        return parse_phase(capture, ctx.phase, mini_format(ctx.format), refusal_rule=policy_of(ctx).rule)

    def oracle_dialects(self) -> dict[str, Dialect]:
        return mini_dialects()


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(MiniSweDriver())

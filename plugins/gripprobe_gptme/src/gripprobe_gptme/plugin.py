"""placeholder"""
from __future__ import annotations

from gripprobe_core import CliAgentSpec, InstallRecipe, hookimpl, AgentInfo

from . import NAME, PINNED_VERSION


@hookimpl
def register_agents(register):
    register(AgentInfo(name=NAME, observability="structured"))


@hookimpl
def agent_install_recipe(agent: CliAgentSpec) -> InstallRecipe | None:
    if agent.plugin != NAME:
        return None
    return InstallRecipe(kind="pypi", package="gptme", version=agent.version or PINNED_VERSION, executable="gptme")

"""Which of a run's agents need installing, and installing them (the CLI, the run and each Ray worker)."""

from __future__ import annotations

from typing import Any

from .install import AgentCache

__all__ = ["ensure_agents_installed", "find_installed_agents", "install_recipe"]


def install_recipe(registry: Any, agent: Any) -> Any:
    """The agent's install recipe from its driver (None: built in, or its plugin is not installed)."""
    driver = registry.agents.get(agent.plugin)
    return driver.install_recipe(agent) if driver is not None else None


def ensure_agents_installed(registry: Any, agents: Any, cache: AgentCache, *, log: Any, progress: Any = None) -> dict:
    """Install every agent that needs it (cached: near-instant when already there). Returns id -> InstalledAgent.

    ``progress`` (``cli.progress.make_install_progress()``) reports a real install as it goes; without it
    ``log`` gets one line per install."""
    out = {}
    for agent in agents:
        recipe = install_recipe(registry, agent)
        if recipe is not None:
            out[agent.id] = cache.install(agent.id, recipe, log=log, progress=progress)
    return out


def find_installed_agents(registry: Any, agents: Any, cache: AgentCache) -> dict:
    """Agents already in the cache (installs nothing). Returns id -> InstalledAgent."""
    out = {}
    for agent in agents:
        recipe = install_recipe(registry, agent)
        inst = cache.installed(agent.id, recipe) if recipe is not None else None
        if inst is not None:
            out[agent.id] = inst
    return out

"""Installing real agents at pinned versions into a cache outside the repository."""

from .ensure import ensure_agents_installed, find_installed_agents, install_recipe
from .install import AgentCache, InstallError, InstalledAgent

__all__ = ["AgentCache", "InstallError", "InstalledAgent", "ensure_agents_installed", "find_installed_agents",
           "install_recipe"]

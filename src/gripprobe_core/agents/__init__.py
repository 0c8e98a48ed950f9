"""Installing real agents at pinned versions into a cache outside the repository."""

from .install import AgentCache, InstallError, InstalledAgent

__all__ = ["AgentCache", "InstallError", "InstalledAgent"]

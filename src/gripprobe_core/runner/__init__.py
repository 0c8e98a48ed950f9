"""The runner: plans cases, runs each through its phases, writes results.

Submodules load lazily so ``import gripprobe_core.runner.process`` stays light.
"""

from __future__ import annotations

from .._lazy import lazy_names

__all__ = ["ActiveRun", "PlannedCase", "RunResult", "RunSettings", "execute_run", "plan_cases", "plan_suite"]

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".matrix": ("PlannedCase", "plan_cases", "plan_suite"), ".settings": ("RunSettings", "ActiveRun"),
    ".run": ("RunResult", "execute_run")})

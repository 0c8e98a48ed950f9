"""The runner: plans cases, runs each through its phases, writes results.

Submodules load lazily so ``import gripprobe_core.runner.process`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "PlannedCase": ".matrix", "plan_cases": ".matrix", "plan_suite": ".matrix",
    "RunSettings": ".settings", "ActiveRun": ".settings", "RunResult": ".run", "execute_run": ".run",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(name)

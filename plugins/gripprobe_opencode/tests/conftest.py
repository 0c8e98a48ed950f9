"""Shared fixtures: the real plugin manager, real spec objects, a phase context under tmp_path.

Test modules never ``import conftest`` (the core's own tests do, and the name would clash in one session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gripprobe_core import CliAgentSpec, PhaseContext
from gripprobe_core.testing import phase_context

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The repository's specs, when the plugin is tested inside the GripProbe repo (plugins/<plugin>/tests).
REPO_SPECS = Path(__file__).resolve().parents[3] / "specs"


@pytest.fixture(scope="session")
def gpm():
    """The real plugin manager: built-ins plus every installed entry point (this plugin among them)."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    return make_plugin_manager()


@pytest.fixture
def agent() -> CliAgentSpec:
    return CliAgentSpec(id="opencode", plugin="opencode", executable="opencode", tool_kinds=["execute", "write"],
                        version="1.18.33")


def make_ctx(tmp_path: Path, agent: CliAgentSpec, *, api_key: str | None = None, model_name: str = "perfect",
             backend_env: dict[str, str] | None = None, base_url: str = "http://127.0.0.1:43210") -> PhaseContext:
    """A phase context laid out like the runner's (fresh HOME with XDG dirs, workspace, artifacts)."""
    return phase_context(tmp_path, agent, prompt="Run `pwd` and save it to pwd.txt.\nDo not type it.",
                         model_name=model_name, api_key=api_key, base_url=base_url, backend_env=backend_env)


@pytest.fixture
def ctx_factory(tmp_path, agent):
    """``ctx_factory(**kw)``: :func:`make_ctx` under this test's tmp_path (keywords as there)."""
    return lambda **kw: make_ctx(tmp_path, kw.pop("agent", agent), **kw)


@pytest.fixture
def ctx(ctx_factory) -> PhaseContext:
    return ctx_factory()

"""Shared fixtures: the real plugin manager, real spec objects, a phase context under tmp_path.

Test modules import the fixtures by name (``from codex_testkit import ctx, ...``). This is deliberately
not a ``conftest.py``: the core's test suite imports its own ``conftest`` as a module, and a second
``conftest`` collected in the same session would shadow it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gripprobe_core import CliAgentSpec, PhaseContext
from gripprobe_core.testing import phase_context

@pytest.fixture(scope="session")
def gpm():
    """The real plugin manager: built-ins plus every installed entry point (this plugin among them)."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    return make_plugin_manager()


@pytest.fixture(scope="session")
def installed_codex(gpm):
    """The installed codex (``InstalledAgent``) from the agent cache, or None."""
    from gripprobe_core.testing import installed_agent
    return installed_agent(CliAgentSpec(id="codex", plugin="codex", executable="codex", tool_kinds=["execute"]), gpm)


@pytest.fixture
def agent() -> CliAgentSpec:
    return CliAgentSpec(id="codex", plugin="codex", executable="codex", tool_kinds=["execute", "read", "write"],
                        version="0.169.0")


def make_ctx(tmp_path: Path, agent: CliAgentSpec, *, api_key: str | None = None, model_name: str = "perfect",
             base_url: str = "http://127.0.0.1:43210", executable: Path | None = None,
             prompt: str = "Run `pwd` and save it to pwd.txt.\nDo not type it.") -> PhaseContext:
    """A phase context laid out like the runner's (fresh HOME with XDG dirs, workspace, artifacts)."""
    return phase_context(tmp_path, agent, prompt=prompt, model_name=model_name, api_key=api_key, base_url=base_url,
                         executable=executable)


@pytest.fixture
def ctx_factory(tmp_path, agent):
    """``ctx_factory(**kw)``: :func:`make_ctx` under this test's tmp_path (keywords as there)."""
    return lambda **kw: make_ctx(tmp_path, kw.pop("agent", agent), **kw)


@pytest.fixture
def ctx(ctx_factory) -> PhaseContext:
    return ctx_factory()

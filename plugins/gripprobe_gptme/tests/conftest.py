"""Shared fixtures: the real plugin manager, real spec objects, a phase context under tmp_path, the
captured gptme outputs.

Test modules never ``import conftest`` (the core's own tests do, and the name would clash in one session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core import CliAgentSpec, PhaseContext
from gripprobe_core.testing import phase_context

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def gpm():
    """The real plugin manager: built-ins plus every installed entry point (this plugin among them)."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    return make_plugin_manager()


@pytest.fixture
def agent() -> CliAgentSpec:
    return CliAgentSpec(id="gptme", plugin="gptme", executable="gptme", tool_kinds=["execute", "read", "write"],
                        formats=["tool", "markdown", "xml"], default_args=["--tools", "save,append,patch,shell"],
                        version="0.35.1")


def make_ctx(tmp_path: Path, agent: CliAgentSpec, *, api_key: str | None = None, model_name: str = "perfect",
             fmt: str = "tool", phase: str = "measured", base_url: str = "http://127.0.0.1:43210") -> PhaseContext:
    """A phase context laid out like the runner's (fresh HOME with XDG dirs, workspace, artifacts)."""
    return phase_context(tmp_path, agent, prompt="Run `pwd` and save it to pwd.txt.\n-- Do not type it.",
                         model_name=model_name, fmt=fmt, phase=phase, api_key=api_key, base_url=base_url,
                         executable=tmp_path / "venv" / "bin" / "gptme")


@pytest.fixture
def ctx_factory(tmp_path, agent):
    """``ctx_factory(**kw)``: :func:`make_ctx` under this test's tmp_path (keywords as there)."""
    return lambda **kw: make_ctx(tmp_path, kw.pop("agent", agent), **kw)


def load_request(name: str) -> dict:
    """A request body gptme 0.35.1 really sent (``fixtures/requests/<name>.json``)."""
    return json.loads((FIXTURES / "requests" / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def request_body():
    return load_request

"""Shared fixtures: the real plugin manager, real spec objects, a phase context under tmp_path.

Test modules never ``import conftest`` (the core's own tests do, and the name would clash in one session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core import CliAgentSpec, PhaseContext, TestSpec
from gripprobe_core.testing import phase_context

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def gpm():
    """The real plugin manager: built-ins plus every installed entry point (this plugin among them)."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    return make_plugin_manager()


@pytest.fixture
def agent() -> CliAgentSpec:
    return CliAgentSpec(id="aider", plugin="aider", executable="aider", formats=["whole", "diff", "udiff"],
                        tool_kinds=["write", "read"], version="0.86.2")


PATCH_TEST = TestSpec(
    id="patch_file", title="patch", prompt="Edit settings.py so TIMEOUT_SECONDS = 45.\n--not-a-flag",
    validators=[{"kind": "file_exists", "path": "settings.py"}],
    fixtures=[{"path": "settings.py", "content": "TIMEOUT_SECONDS = 30\n"}],
    reference=[{"read": {"path": "settings.py"}},
               {"edit": {"path": "settings.py", "old": "TIMEOUT_SECONDS = 30", "new": "TIMEOUT_SECONDS = 45"}}])


def make_ctx(tmp_path: Path, agent: CliAgentSpec, *, api_key: str | None = None, model_name: str = "perfect",
             fmt: str = "diff", backend_env: dict[str, str] | None = None,
             base_url: str = "http://127.0.0.1:43210") -> PhaseContext:
    """A phase context laid out like the runner's (fresh HOME with XDG dirs, seeded workspace, artifacts)."""
    return phase_context(tmp_path, agent, test=PATCH_TEST, model_name=model_name, fmt=fmt, api_key=api_key,
                         base_url=base_url, backend_env=backend_env)


@pytest.fixture
def ctx_factory(tmp_path, agent):
    """``ctx_factory(**kw)``: :func:`make_ctx` under this test's tmp_path (keywords as there)."""
    return lambda **kw: make_ctx(tmp_path, kw.pop("agent", agent), **kw)


@pytest.fixture
def ctx(ctx_factory) -> PhaseContext:
    return ctx_factory()


def load_requests(name: str) -> list[dict]:
    """Real aider request bodies captured from the oracle (``fixtures/requests/<name>.json``)."""
    return json.loads((FIXTURES / "requests" / f"{name}.json").read_text())


@pytest.fixture
def requests():
    return load_requests

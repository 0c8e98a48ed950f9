"""Shared fixtures: the real plugin manager, real spec objects, a phase context under tmp_path.

Test modules import the fixtures by name (``from codex_testkit import ctx, ...``). This is deliberately
not a ``conftest.py``: the core's test suite imports its own ``conftest`` as a module, and a second
``conftest`` collected in the same session would shadow it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gripprobe_core import BackendSpec, CliAgentSpec, ModelSpec, PhaseContext, TestSpec

@pytest.fixture(scope="session")
def gpm():
    """The real plugin manager: built-ins plus every installed entry point (this plugin among them)."""
    from gripprobe_core.plugins import make_plugin_manager
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
    backend = BackendSpec(id="oracle", kind="oracle", model_id=model_name)
    model = ModelSpec(id=f"oracle-{model_name}", backends=[backend])
    test = TestSpec(id="shell_pwd", title="pwd", prompt=prompt,
                    validators=[{"kind": "file_exists", "path": "pwd.txt"}], reference=[{"shell": "pwd > pwd.txt"}])
    ctx = PhaseContext(run_id="r1", case_id="c1", phase="measured", agent=agent, model=model, backend=backend,
                       test=test, format="tool", prompt=prompt, workspace=tmp_path / "ws",
                       home=tmp_path / "home", tmpdir=tmp_path / "tmp", artifacts_dir=tmp_path / "artifacts",
                       base_url=base_url, model_name=model_name, api_key=api_key,
                       agent_executable=executable if executable is not None else tmp_path / "bin" / "codex")
    for p in (ctx.workspace, ctx.home, ctx.tmpdir, ctx.artifacts_dir, *map(Path, ctx.xdg.values())):
        p.mkdir(parents=True, exist_ok=True)
    return ctx


@pytest.fixture
def ctx_factory(tmp_path, agent):
    """``ctx_factory(**kw)``: :func:`make_ctx` under this test's tmp_path (keywords as there)."""
    return lambda **kw: make_ctx(tmp_path, kw.pop("agent", agent), **kw)


@pytest.fixture
def ctx(ctx_factory) -> PhaseContext:
    return ctx_factory()

"""Shared test helpers: fixture paths and a real PhaseContext for the hooks (no specs directory needed).

Not named conftest.py: the core's tests import their own ``conftest`` module by name."""

from __future__ import annotations

import json
from pathlib import Path

from gripprobe_core import BackendSpec, CliAgentSpec, ModelSpec, PhaseContext, TestSpec

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = FIXTURES / "samples"
CAPTURED = FIXTURES / "captured"


def agent_spec(**overrides) -> CliAgentSpec:
    return CliAgentSpec(**{"id": "continue", "plugin": "continue", "executable": "cn",
                           "tool_kinds": ["execute", "read", "write", "fetch"], **overrides})


def make_ctx(tmp_path: Path, *, api_key: str | None = None, phase: str = "measured",
             base_url: str = "http://127.0.0.1:4321", prompt: str = "Use your shell tool to run pwd > pwd.txt",
             executable: Path | None = None) -> PhaseContext:
    backend = BackendSpec(id="oracle", kind="oracle", model_id="perfect")
    test = TestSpec(id="t", title="t", prompt=prompt, validators=[{"kind": "file_exists", "path": "x"}],
                    reference=[{"shell": "pwd > pwd.txt"}])
    dirs = {name: tmp_path / name for name in ("workspace", "home", "tmp", "artifacts")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    return PhaseContext(
        run_id="r", case_id="c", phase=phase, agent=agent_spec(), model=ModelSpec(id="m", backends=[backend]),
        backend=backend, test=test, format="tool", prompt=prompt, workspace=dirs["workspace"], home=dirs["home"],
        tmpdir=dirs["tmp"], artifacts_dir=dirs["artifacts"], base_url=base_url, model_name="perfect",
        api_key=api_key, agent_executable=executable)


def process_info(case_dir: Path) -> dict:
    path = case_dir / "process.json"
    return json.loads(path.read_text()) if path.exists() else {}

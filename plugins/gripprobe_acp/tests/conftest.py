"""One distribution, five drivers: the kit's fixtures are about the driver named by ``agent_name``.

The kit reads one driver name from the ini option; here every test module that uses its fixtures says which driver
it is about with ``pytestmark = for_driver("acp-…")`` (a session-scoped parametrization of ``agent_name``, so the
kit's session fixtures are made again for each driver). The kit finds an agent's spec as
``specs/cli_agents/<driver>.yaml``; these agents' specs are named by agent id (``qwen-code-acp.yaml``), so
``agent_spec`` and ``e2e_specs`` are given here with that mapping (and otherwise do what the kit's do).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gripprobe_core.testing import agent_spec as spec_of, copy_specs, repo_specs

#: Driver name → the id (and file name) of its cli_agents spec in this repository.
SPEC_IDS = {"acp-qwen": "qwen-code-acp", "acp-opencode": "opencode-acp", "acp-claude": "claude-code-acp",
            "acp-codex": "codex-acp"}
SPECS = repo_specs(Path(__file__))


def for_driver(name: str) -> Any:
    """The mark that makes a module's (or class's) kit fixtures about driver ``name``."""
    return pytest.mark.parametrize("agent_name", [name], scope="session")


@pytest.fixture(scope="session")
def agent_spec(gripprobe_plugins: Any, agent_name: str, agent_driver: Any) -> Any:
    return spec_of(SPEC_IDS.get(agent_name, agent_name), gripprobe_plugins, specs=SPECS)


@pytest.fixture(scope="session")
def e2e_specs(tmp_path_factory: pytest.TempPathFactory, agent_name: str, agent_spec: Any) -> Path:
    if SPECS is None:
        pytest.skip("not inside a GripProbe checkout: no specs/ to run end to end")
    files = [f"cli_agents/{agent_spec.id}.yaml"]
    files += [p.relative_to(SPECS).as_posix() for p in sorted((SPECS / "models").glob("oracle-*.yaml"))]
    files += [p.relative_to(SPECS).as_posix() for p in sorted((SPECS / "tests").glob("*.yaml"))]
    return copy_specs(tmp_path_factory.mktemp("specs"), files, source=SPECS, suite={
        "title": f"{agent_spec.id} x oracle", "agents": [agent_spec.id], "models": ["oracle-perfect"],
        "tests": ["save_file"]})

"""agents-sanity: every agent with the perfect oracle performs every sanity test it has the tools for (a real
run of the suite; a file of its own so that it takes a test worker beside the conformance and interaction runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, gripprobe
from conformance_shared import AGENTS, skip_unless_plugins

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3000)]
skip_unless_plugins()


def test_with_perfect_every_agent_performs_every_sanity_test_it_can(tmp_path):
    """agents-sanity: PASS wherever the agent has the tool kinds; TOOL_UNSUPPORTED (not run) elsewhere."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.matrix import missing_tool_kinds
    from gripprobe_core.specs import load_specs

    specs = load_specs(ROOT / "specs", registry=make_plugin_manager().registry)
    res = gripprobe("run", "--suite", "agents-sanity", "--results", str(tmp_path), timeout=3000)
    assert res.returncode == 0, res.stderr[-4000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    cases = [json.loads(p.read_text()) for p in (run_dir / "cases").glob("*/case.json")]
    assert {c["key"]["agent"] for c in cases} == AGENTS
    wrong = []
    for c in cases:
        agent, test = specs.agents[c["key"]["agent"]], specs.tests[c["key"]["test"]]
        want = "TOOL_UNSUPPORTED" if missing_tool_kinds(agent, test) else "PASS"
        if c["verdict"]["status"] != want:
            wrong.append((c["case_id"], c["verdict"]["status"], want))
    assert not wrong, wrong

"""Issue 4's conformance matrix: the real agents × every oracle profile, through the proxy (auto mode).

Needs every agent plugin installed (./dev setup does) and installs the agents themselves (cached).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from conftest import AGENT_PLUGINS, MATRIX_PLUGINS, ROOT, gripprobe

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3000)]  # ~120 real agent cases

spec = importlib.util.spec_from_file_location("conformance", ROOT / "scripts" / "conformance.py")
conformance = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conformance)

PLUGINS = sorted(AGENT_PLUGINS)
AGENTS = {"reference", *MATRIX_PLUGINS.values()}
#: The interaction column also has the ACP drivers' agents (specs/suites/interaction.yaml).
ACP_AGENTS = {"qwen-code-acp", "opencode-acp", "claude-code-acp", "codex-acp"}
MISSING = [p for p in PLUGINS if importlib.util.find_spec(p) is None]
if MISSING and not os.environ.get("CI"):
    pytest.skip(f"agent plugins not installed: {', '.join(MISSING)} (./dev setup installs them)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def conformance_run(tmp_path_factory) -> Path:
    assert not MISSING, f"CI must have every agent plugin installed; missing: {MISSING}"
    out = tmp_path_factory.mktemp("conformance")
    # Under CI the matrix must hold inside the sandbox: --sandbox bwrap exits 2 where bubblewrap cannot run.
    sandbox = ["--sandbox", "bwrap"] if os.environ.get("CI") else []
    res = gripprobe("run", "--suite", "conformance", "--results", str(out), *sandbox, timeout=3000)
    assert res.returncode == 0, res.stderr[-4000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def run_cells(conformance_run):
    return conformance.cells(conformance_run)


@pytest.fixture(scope="module")
def interaction_run(tmp_path_factory) -> Path:
    assert not MISSING, f"CI must have every agent plugin installed; missing: {MISSING}"
    out = tmp_path_factory.mktemp("interaction")
    sandbox = ["--sandbox", "bwrap"] if os.environ.get("CI") else []
    res = gripprobe("run", "--suite", "interaction", "--results", str(out), *sandbox, timeout=3000)
    assert res.returncode == 0, res.stderr[-4000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def interaction_cells(interaction_run):
    return conformance.interaction_cells(interaction_run)


def test_every_interaction_cell_has_its_expected_status(interaction_cells):
    """Each agent × interaction test: its expected status; where the harness answered (a session driver) the
    refusal is on record as a request and answer; where the policy was not applied, the reason is given and
    the case is TOOL_UNSUPPORTED."""
    exp = conformance.expectations()
    assert set(interaction_cells) == AGENTS | ACP_AGENTS, sorted(set(interaction_cells) ^ (AGENTS | ACP_AGENTS))
    wrong = [(agent, test, got["status"], conformance.expected_interaction(exp, agent, test)[0])
             for agent, a in interaction_cells.items() for test, got in a["cells"].items()
             if got["status"] != conformance.expected_interaction(exp, agent, test)[0]]
    assert not wrong, wrong
    for agent, a in interaction_cells.items():
        assert set(a["cells"]) == set(conformance.INTERACTION_TESTS), (agent, a["cells"])
        for test, got in a["cells"].items():
            if a["applied"][test] and a["how"] == "session" and got["status"] == "PASS":
                assert got["denied"] >= 1, (agent, test, got)  # the harness answered: the refusal is on record
            if not a["applied"][test]:
                assert a["reason"] and got["status"] == "TOOL_UNSUPPORTED", (agent, test, a)


def test_every_cell_has_its_expected_status(run_cells):
    exp = conformance.expectations()
    agents = {c["agent"] for c in run_cells}
    assert agents == AGENTS
    assert len(run_cells) == len(agents) * len(exp["default"])
    wrong = [(c["agent"], c["profile"], c["status"], conformance.expected_status(exp, c["agent"], c["profile"])[0])
             for c in run_cells if c["status"] != conformance.expected_status(exp, c["agent"], c["profile"])[0]]
    assert not wrong, wrong


def test_every_cell_ran_in_the_sandbox_under_ci(conformance_run):
    """The matrix above is the sandboxed one: every phase of every agent ran under bubblewrap."""
    used = {json.loads(p.read_text())["sandbox"] for p in (conformance_run / "cases").glob("*/case.json")}
    if not os.environ.get("CI") and used == {"none"}:
        pytest.skip("bubblewrap does not work here: the matrix ran unsandboxed")
    assert used == {"bwrap"}, used


def test_tier_a_equals_oracle_ground_truth_in_every_cell(run_cells):
    off = [(c["agent"], c["profile"], c["tier_a"], c["truth"], c["tier_a_text"], c["truth_text"])
           for c in run_cells if (c["tier_a"], c["tier_a_text"]) != (c["truth"], c["truth_text"])]
    assert not off, off


def test_fidelity_is_computed_for_every_cell(run_cells):
    """Every cell has its tool-call fidelity (telemetry/fidelity.py) from the stored case; wherever the oracle's
    profile made calls, tier A holds exactly those (recall and precision 1.0 against its ground truth), and the
    counts agree with the proxy's and the oracle's own."""
    keys = {"B_vs_A", "C_vs_A", "A_vs_truth", "B_vs_truth", "C_vs_truth"}
    missing = [(c["agent"], c["profile"]) for c in run_cells if set(c.get("fidelity") or {}) != keys]
    assert not missing, missing
    off = []
    for c in run_cells:
        a = c["fidelity"]["A_vs_truth"]
        if a["n_reference"] != c["truth"] + c["truth_text"] or a["n_tested"] != c["tier_a"] + c["tier_a_text"]:
            off.append((c["agent"], c["profile"], a, c["truth"], c["truth_text"]))
        if c["truth"] + c["truth_text"] and (a["recall"], a["precision"]) != (1.0, 1.0):
            off.append((c["agent"], c["profile"], a))
    assert not off, off


def test_docs_page_is_what_a_real_run_renders(run_cells, interaction_cells):
    want = conformance.render(run_cells, conformance.expectations(), interaction_cells)
    have = (ROOT / "docs" / "conformance.md").read_text()
    assert have == want, "docs/conformance.md is stale: run `.venv/bin/python scripts/conformance.py`"


def test_with_perfect_every_agent_performs_every_sanity_test_it_can(tmp_path):
    """agents-sanity: PASS wherever the agent has the tool kinds; TOOL_UNSUPPORTED (not run) elsewhere."""
    import json

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


def test_recompute_from_artifacts_reproduces_every_cell(conformance_run):
    """rebuild-reports --recompute re-derives every verdict field with each agent plugin's own parsers
    (tier B/C from the stored outputs and session files, tier A from the proxy records): identical."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.recompute import recompute_run
    from gripprobe_core.store import RunFolder

    rows = recompute_run(make_plugin_manager(), RunFolder(conformance_run), write=False)
    assert len(rows) == len(list((conformance_run / "cases").iterdir()))
    differ = [(r.case_id, r.changed, r.problem) for r in rows if r.changed or r.problem]
    assert not differ, differ

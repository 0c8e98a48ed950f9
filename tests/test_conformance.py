"""Issue 4's conformance matrix: the real agents × every oracle profile, through the proxy (auto mode).

Needs every agent plugin installed (./dev setup does) and installs the agents themselves (cached). The page's
interaction column is checked by tests/test_conformance_interaction.py, agents-sanity by
tests/test_conformance_sanity.py: three files, so their three real runs take the test workers side by side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ROOT
from conformance_shared import AGENTS, conformance, run_suite, skip_unless_plugins

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3000)]  # ~120 real agent cases
skip_unless_plugins()


@pytest.fixture(scope="module")
def conformance_run(tmp_path_factory) -> Path:
    return run_suite("conformance", tmp_path_factory.mktemp("conformance"))


@pytest.fixture(scope="module")
def run_cells(conformance_run):
    return conformance.cells(conformance_run)


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


def test_docs_page_is_what_a_real_run_renders(run_cells):
    """All of docs/conformance.md but the interaction column (tests/test_conformance_interaction.py checks it)."""
    want = conformance.matrix_part(conformance.render(run_cells, conformance.expectations()))
    have = conformance.matrix_part((ROOT / "docs" / "conformance.md").read_text())
    assert have == want, "docs/conformance.md is stale: run `.venv/bin/python scripts/conformance.py`"


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

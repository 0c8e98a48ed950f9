"""The conformance page's interaction column: every agent (the ACP drivers' too) × the interaction tests on
oracle-deny-then-recover, a real run of the `interaction` suite (docs/interaction.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from conformance_shared import ACP_AGENTS, AGENTS, conformance, run_suite, skip_unless_plugins

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3000)]
skip_unless_plugins()


@pytest.fixture(scope="module")
def interaction_cells(tmp_path_factory) -> dict:
    return conformance.interaction_cells(run_suite("interaction", tmp_path_factory.mktemp("interaction")))


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


def test_docs_page_interaction_column_is_what_a_real_run_renders(interaction_cells):
    """docs/conformance.md's interaction column and its notes on the interaction tests (the rest of the page:
    tests/test_conformance.py)."""
    want = conformance.interaction_part(conformance.render([], conformance.expectations(), interaction_cells))
    have = conformance.interaction_part((ROOT / "docs" / "conformance.md").read_text())
    assert have == want, "docs/conformance.md is stale: run `.venv/bin/python scripts/conformance.py`"

"""A suite names its judge: an evaluator a plugin registers (``register_evaluators``), installed as a real
distribution (tests/fixtures/plugins/gripprobe_fixture_judge), through the real `gripprobe` command. The core
writes ``verdict_source`` from the registration, whatever the judge says about itself; a recompute judges
with the same evaluator; a judge that fails or is not installed is a HARNESS_ERROR that says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe, read_json

pytestmark = pytest.mark.e2e

SUITE = """id: {id}
agents: [reference]
models: [oracle-perfect, oracle-lazy]
tests: [save_file]
judge: {judge}
"""


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("judges") / "specs"
    shutil.copytree(SPECS, root)
    for suite, judge in (("judged", "wire_only"), ("misjudged", "broken_judge")):
        (root / "suites" / f"{suite}.yaml").write_text(SUITE.format(id=suite, judge=judge))
    return root


def _run_suite(specs: Path, results: Path, suite: str, pp: list[Path]) -> Path:
    res = gripprobe("run-suite", "--suite", suite, "--specs", str(specs), "--results", str(results), pythonpath=pp)
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def _verdicts(run: Path) -> dict[str, dict]:
    return {p.parent.name.split("__")[1]: read_json(p) for p in sorted(run.glob("cases/*/case.json"))}


def test_a_suite_names_a_registered_judge_and_the_core_names_it_in_verdict_source(specs, installed_plugins, tmp_path):
    pp = [installed_plugins["gripprobe_fixture_judge"]]
    listed = gripprobe("plugins", "--json", pythonpath=pp)
    assert json.loads(listed.stdout)["evaluators"] == ["broken_judge", "event_evaluator", "wire_only"]
    assert "evaluators (a suite's judge:): broken_judge, event_evaluator, wire_only" in \
        gripprobe("plugins", pythonpath=pp).stdout
    run = _run_suite(specs, tmp_path / "r", "judged", pp)
    cases = _verdicts(run)
    # the judge wrote verdict_source "event_evaluator" about itself: the core wrote the name it registered
    assert {m: c["verdict"]["verdict_source"] for m, c in cases.items()} == \
        {"oracle-perfect": "wire_only", "oracle-lazy": "wire_only"}
    assert cases["oracle-perfect"]["verdict"]["status"] == "PASS"
    assert (cases["oracle-lazy"]["verdict"]["status"], cases["oracle-lazy"]["verdict"]["failure_reason"]) == \
        ("FAIL", "not_on_the_wire")  # the core's evaluator would say NO_TOOL_CALL
    assert read_json(run / "manifest.json")["judge"] == "wire_only"
    inputs = read_json(next(run.glob("cases/*oracle-perfect*/artifacts/case_inputs.json")))
    assert inputs["judge"] == "wire_only"
    # a recompute judges with the same registered evaluator: nothing changes
    res = gripprobe("rebuild-reports", str(run), "--recompute", pythonpath=pp)
    assert res.returncode == 0 and "2 unchanged, 0 changed" in res.stdout, res.stdout + res.stderr
    assert {m: (c["verdict"]["status"], c["verdict"]["verdict_source"]) for m, c in _verdicts(run).items()} == \
        {"oracle-perfect": ("PASS", "wire_only"), "oracle-lazy": ("FAIL", "wire_only")}
    # without the plugin the judge is missing: a harness error naming it, never the core's verdict passed off
    res = gripprobe("rebuild-reports", str(run), "--recompute")
    assert res.returncode == 0, res.stderr[-3000:]
    for case in _verdicts(run).values():
        v = case["verdict"]
        assert (v["status"], v["failure_reason"], v["verdict_source"]) == \
            ("HARNESS_ERROR", "judge_not_installed", "event_evaluator")
        assert "judge 'wire_only' is not installed" in case["harness_error"]


def test_a_judge_that_fails_is_a_harness_error_naming_it(specs, installed_plugins, tmp_path):
    run = _run_suite(specs, tmp_path / "r", "misjudged", [installed_plugins["gripprobe_fixture_judge"]])
    for case in _verdicts(run).values():
        assert (case["verdict"]["status"], case["verdict"]["failure_reason"]) == ("HARNESS_ERROR", "judge_error")
        assert "judge 'broken_judge' failed: RuntimeError: this judge always fails" in case["harness_error"]


def test_validate_refuses_a_suite_naming_a_judge_nobody_registered(specs, tmp_path):
    root = tmp_path / "specs"
    shutil.copytree(specs, root)
    res = gripprobe("validate", "--root", str(root))  # the fixture plugin is not installed here
    assert res.returncode == 2, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert "judged.yaml:5: judge: unknown judge 'wire_only'; known: event_evaluator" in out, out
    assert "Traceback" not in out


# ------------------------------------------------------------------------------------------ one judge

def test_the_live_run_and_recompute_judge_through_one_function():
    """Every derivation step is called from runner/judge.py alone, and judge_case from the live case and the
    recompute alone: there is no second judge to drift from the first."""
    import ast

    from conftest import ROOT

    steps = {"derive_telemetry", "run_validators", "derive_verdict", "proxy_evidence", "parse_events",
             "read_transcript"}
    calls: dict[str, set[str]] = {}
    for path in (ROOT / "src" / "gripprobe_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in steps | {"judge_case"}:
                    calls.setdefault(name, set()).add(str(path.relative_to(ROOT / "src" / "gripprobe_core")))
    assert {n: w for n, w in calls.items() if n in steps and w != {"runner/judge.py"}} == {}
    assert calls["judge_case"] == {"runner/case.py", "runner/recompute.py"}


def test_a_phase_that_never_ran_is_judged_the_same_live_and_on_recompute(tmp_path):
    """Force mode without a recording proxy plugin: the measured phase never runs (HARNESS_ERROR). The
    recompute judges the stored evidence with the same function and changes nothing."""
    from conftest import run_reference
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.recompute import recompute_run

    out = run_reference(tmp_path, without=("recording_proxy",), proxy_mode="force", tests=("save_file",))
    (res,) = out.results
    assert (res.verdict.status, res.verdict.failure_reason) == ("HARNESS_ERROR", "proxy_required_but_not_available")
    assert res.telemetry.telemetry_proxy_status == "error"
    for r in recompute_run(make_plugin_manager(load_entry_points=False), out.run_dir, write=False):
        assert (r.changed, r.problem) == ([], None), (r.case_id, r.changed, r.problem)
        assert r.result is not None and r.result.model_dump() == res.model_dump()

"""``--no-warmup`` and a suite's ``warmup: false``: each case runs its measured phase alone; the manifest says
so and a resume keeps it; judging, reports, verification and recompute work on one phase."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe, read_json

pytestmark = pytest.mark.e2e


def _run_dir(res) -> Path:
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def _phases(run_dir: Path) -> dict[str, list[str]]:
    return {p.parent.name: [ph["phase"] for ph in read_json(p)["phases"]]
            for p in sorted((run_dir / "cases").glob("*/case.json"))}


def test_no_warmup_runs_the_measured_phase_alone_and_resume_keeps_it(tmp_path):
    res = gripprobe("run", "--specs", str(SPECS), "--results", str(tmp_path / "r"), "-a", "reference",
                    "-m", "oracle-perfect", "-m", "oracle-lazy", "-t", "save_file", "-t", "shell_pwd", "--no-warmup")
    run_dir = _run_dir(res)
    assert set(map(tuple, _phases(run_dir).values())) == {("measured",)}
    cases = {p.parent.name: read_json(p) for p in (run_dir / "cases").glob("*/case.json")}
    assert {c["key"]["model"]: c["verdict"]["status"] for c in cases.values()} == {"oracle-perfect": "PASS",
                                                                                  "oracle-lazy": "NO_TOOL_CALL"}
    assert {tuple(c["usage"]["phases"]) for c in cases.values()} == {("measured",)}  # what its tokens count
    one = next(iter(cases))
    assert not list((run_dir / "cases" / one).glob("warmup.*"))
    assert not list((run_dir / "cases" / one / "artifacts").glob("*warmup*"))
    assert read_json(run_dir / "manifest.json")["warmup"] is False
    assert gripprobe("verify", str(run_dir)).returncode == 0
    recomputed = gripprobe("rebuild-reports", str(run_dir), "--recompute")
    assert recomputed.returncode == 0 and "0 changed" in recomputed.stdout + recomputed.stderr, recomputed.stderr
    page = next((run_dir / "reports" / "cases").glob("*perfect*.html")).read_text()
    assert 'id="timeline-measured"' in page and 'id="timeline-warmup"' not in page and "warmup.jsonl" not in page
    # a resumed run keeps the choice: the case run again has no warmup either
    victim = run_dir / "cases" / one
    (victim / "case.json").unlink()
    res = gripprobe("run-suite", "--specs", str(SPECS), "--resume", str(run_dir))
    assert res.returncode == 0, res.stderr[-3000:]
    assert _phases(run_dir)[one] == ["measured"]
    assert read_json(run_dir / "manifest.json")["warmup"] is False


def test_a_suite_can_turn_the_warmup_off_and_a_default_run_keeps_it(tmp_path):
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "suites" / "cold.yaml").write_text("id: cold\nagents: [reference]\nmodels: [oracle-perfect]\n"
                                               "tests: [save_file]\nwarmup: false\n")
    cold = _run_dir(gripprobe("run-suite", "--specs", str(root), "--no-shipped", "--results", str(tmp_path / "r"),
                              "--suite", "cold"))
    assert list(_phases(cold).values()) == [["measured"]]
    warm = _run_dir(gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(tmp_path / "r"),
                              "-a", "reference", "-m", "oracle-perfect", "-t", "save_file"))
    assert list(_phases(warm).values()) == [["warmup", "measured"]]
    case = read_json(next(warm.glob("cases/*/case.json")))
    assert case["usage"]["phases"] == ["warmup", "measured"] and case["usage"]["model_calls"] == sum(
        p["usage"]["model_calls"] for p in case["phases"])
    page = next((warm / "reports" / "cases").glob("*.html")).read_text()
    assert "<dt>phases</dt><dd>warmup + measured</dd>" in page
    assert read_json(warm / "manifest.json")["warmup"] is True


def test_a_suite_warmup_must_be_a_boolean(tmp_path):
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "suites" / "cold.yaml").write_text("id: cold\nagents: [reference]\nwarmup: maybe\n")
    res = gripprobe("validate", "--specs", str(root), "--no-shipped")
    assert res.returncode == 2 and "cold.yaml" in res.stderr and "warmup" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr

"""`gripprobe aggregate-reports`: grouping, statistics, sanitization and confinement, over real runs.

Two real runs (reference agent × oracle perfect/lazy × save_file and a test whose file is already in
place, so the lazy profile earns PASS_WITH_POLICY_VIOLATION) plus synthetic runs written as valid
CaseResult dumps for the cases a real run cannot produce on demand (mixed statuses, SKIPPED, planted
secrets, corrupt files).
"""

from __future__ import annotations

import copy
import getpass
import hashlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import SPECS, gripprobe
from gripprobe_core.models import CaseResult
from gripprobe_core.reports.aggregate import OUTPUT_FILES, aggregate_runs, cell_text, find_run_dirs
from gripprobe_core.stats import pass_at_k, wilson
from gripprobe_core.reports.sanitize import REDACTED, Sanitizer

ALREADY_DONE = """\
id: already_done
title: The file is already in place (a tool-less answer passes the validators)
prompt: |
  Make sure greeting.txt in your current working directory contains exactly: Hello!
requires: [write]
tags: [non_sanity]
fixtures:
  - path: greeting.txt
    content: "Hello!\\n"
validators:
  - kind: file_equals
    path: greeting.txt
    expected: "Hello!\\n"
reference:
  - write:
      path: greeting.txt
      content: "Hello!\\n"
"""
HASH = "sha256:" + "ab" * 32
OVERALL = {"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}


def tree_digest(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a digest of its content (folders: '<dir>')."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "<dir>" if p.is_dir() and not p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def aggregate_cli(*args: str, env: dict | None = None):
    return gripprobe("aggregate-reports", *args, env=env)


@pytest.fixture(scope="module")
def real_root(tmp_path_factory) -> Path:
    return two_real_runs(tmp_path_factory.mktemp("real"))


def two_real_runs(base: Path) -> Path:
    """A results root holding two real runs of 4 cases each (also used by the browser tests)."""
    specs = base / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "tests" / "already_done.yaml").write_text(ALREADY_DONE)
    results = base / "results"
    for _ in range(2):
        res = gripprobe("run", "--specs", str(specs), "--results", str(results), "-a", "reference",
                        "-m", "oracle-perfect", "-m", "oracle-lazy", "-t", "save_file", "-t", "already_done",
                        "--jobs", "2")
        assert res.returncode == 0, res.stderr[-3000:]
    assert len(list((results / "runs").iterdir())) == 2
    return results


@pytest.fixture(scope="module")
def template(real_root) -> dict:
    path = next((real_root / "runs").glob("*/cases/*oracle-lazy*save_file/case.json"))
    return json.loads(path.read_text())


def write_case(run_dir: Path, template: dict, case_id: str, *, status: str, **changes) -> dict:
    """A valid case.json (checked against CaseResult) derived from a real one."""
    d = copy.deepcopy(template)
    d["run_id"], d["case_id"] = run_dir.name, case_id
    for k in ("agent", "model", "format", "test"):
        if k in changes:
            d["key"][k] = changes.pop(k)
    d["verdict"].update(status=status, strict_pass_score=1.0 if status == "PASS" else 0.0,
                        overall_score=OVERALL.get(status, 0.0))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = d
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value
    CaseResult.model_validate(d)
    (run_dir / "cases" / case_id).mkdir(parents=True)
    (run_dir / "cases" / case_id / "case.json").write_text(json.dumps(d, indent=2))
    return d


def write_run(root: Path, run_id: str, **manifest) -> Path:
    run_dir = root / "runs" / run_id
    (run_dir / "cases").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": run_id, "status": "complete",
                                                        "started_at": "2026-01-01T00:00:00.000Z", **manifest}))
    return run_dir


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory, template) -> Path:
    """Synthetic runs with hand-countable statuses: agent 'synth' in three groups."""
    root = tmp_path_factory.mktemp("synth")
    run = write_run(root, "20260101T000000Z", suite="synthetic")
    common = {"agent": "synth", "model": "m1", "format": "tool", "agent_version": "1.0", "model_hash": HASH,
              "hardware_profile": "ci-2core"}
    for i, status in enumerate(["PASS", "FAIL", "PASS", "PASS_WITH_POLICY_VIOLATION", "FAIL", "SKIPPED"]):
        write_case(run, template, f"t1-{i}", status=status, test="t1", **common)
    write_case(run, template, "t2-0", status="HARNESS_ERROR", test="t2", **common)
    # Same agent and model, another hardware profile / another version: separate rows.
    write_case(run, template, "nohw", status="PASS", test="t1", **{**common, "hardware_profile": None})
    run2 = write_run(root, "20260102T000000Z", suite="synthetic")
    write_case(run2, template, "v11", status="PASS", test="t1", **{**common, "agent_version": "1.1"})
    return root


# ------------------------------------------------------------------ statistics

def test_wilson_interval_textbook_values():
    lo, hi = wilson(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(4, 4) == pytest.approx((0.5101, 1.0), abs=1e-4)
    assert wilson(0, 4) == pytest.approx((0.0, 0.4899), abs=1e-4)


def test_pass_at_k_unbiased_estimator():
    # n=5, c=2: pass@1 = 2/5; pass@3 = 1 - C(3,3)/C(5,3) = 1 - 1/10; pass@5 = 1 (every draw holds a PASS).
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    assert pass_at_k(5, 2, 5) == 1.0
    assert pass_at_k(10, 0, 10) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


# ------------------------------------------------------------------ real runs

def test_real_runs_grouping_counts_and_scores(real_root, tmp_path):
    out = tmp_path / "agg"
    res = aggregate_cli("--runs-root", str(real_root), "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == str(out.resolve())
    data = json.loads((out / "aggregate.json").read_text())
    assert [r["cases"] for r in data["runs"]] == [4, 4]
    assert data["tests"] == ["already_done", "save_file"] and data["unreadable"] == 0
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == {"oracle-perfect", "oracle-lazy"}
    assert [r["model"] for r in data["rows"]] == ["oracle-perfect", "oracle-lazy"]  # best strict first

    perfect = rows["oracle-perfect"]
    assert perfect["agent"] == "reference" and perfect["format"] == "tool" and perfect["n"] == 4
    assert perfect["counts"]["PASS"] == 4 and perfect["strict_pass_score"] == 1.0
    # every trial passed: nothing for the bootstrap to resample, so the pooled Wilson interval (4 of 4)
    assert perfect["strict_ci95"] == pytest.approx([0.5101, 1.0], abs=1e-4)
    assert perfect["pass_at_k"] == perfect["pass_hat_k"] == {"1": 1.0, "2": 1.0}  # n = 2 per test
    assert perfect["coverage"] == 1.0 and perfect["tests_attempted"] == perfect["tests_selected"] == 2
    for cell in perfect["cells"].values():
        assert cell["n"] == 2 and cell["counts"] == {"PASS": 2} and cell["pass_at_k"] == {"1": 1.0, "2": 1.0}
        assert not cell["flaky"] and cell["strict_ci95"] == pytest.approx([0.3424, 1.0], abs=1e-4)

    lazy = rows["oracle-lazy"]
    pwpv = lazy["cells"]["already_done"]
    assert pwpv["counts"] == {"PASS_WITH_POLICY_VIOLATION": 2}  # apart from PASS
    assert pwpv["strict"] == 0.0 and pwpv["overall"] == pytest.approx(0.8)
    assert lazy["cells"]["save_file"]["counts"]["NO_TOOL_CALL"] == 2
    assert lazy["n"] == 4 and lazy["strict_pass_score"] == 0.0
    assert lazy["overall_score"] == pytest.approx(0.4)  # (0.8 + 0.8 + 0 + 0) / 4
    # bootstrap over the two tests (each constant): a resampled mean is 0, 0.4 or 0.8
    assert lazy["overall_ci95"] == pytest.approx([0.0, 0.8])
    assert lazy["strict_ci95"] == pytest.approx([0.0, 0.4899], abs=1e-4)  # nothing passed: Wilson 0 of 4
    assert lazy["pass_at_k"] == {"1": 0.0, "2": 0.0}

    md = (out / "aggregate.md").read_text()
    assert "| 0/2 PASS, 2 PWPV |" in md and "| 2/2 PASS |" in md
    html = (out / "index.html").read_text()
    assert "oracle-lazy" in html and "already_done" in html


def test_synthetic_rows_pass_at_k_skipped_and_ci(synth_root):
    data = aggregate_runs(find_run_dirs([synth_root]))
    rows = {(r["agent_version"], r["hardware"]): r for r in data["rows"]}
    assert set(rows) == {("1.0", "ci-2core"), ("1.0", None), ("1.1", "ci-2core")}
    main = rows[("1.0", "ci-2core")]
    assert main["model_hash"] == HASH
    t1 = main["cells"]["t1"]
    assert t1["counts"]["SKIPPED"] == 1 and t1["n"] == 5 and t1["trials"] == 6  # SKIPPED shown, not counted
    assert t1["pass_at_k"] == pytest.approx({"1": 0.4, "2": 0.7, "3": 0.9, "4": 1.0, "5": 1.0})
    assert t1["pass_hat_k"] == pytest.approx({"1": 0.4, "2": 0.1, "3": 0.0, "4": 0.0, "5": 0.0})
    assert t1["flaky"] and main["flaky"] == ["t1"]
    assert main["cells"]["t2"]["n"] == 1 and main["cells"]["t2"]["counts"]["HARNESS_ERROR"] == 1
    assert main["n"] == 6 and main["counts"]["PASS"] == 2
    assert main["strict_pass_score"] == pytest.approx((0.4 + 0.0) / 2)  # the mean over tests
    assert main["overall_score"] == pytest.approx((2.8 / 5 + 0.0) / 2)
    low, high = main["strict_ci95"]
    assert 0.0 <= low < main["strict_pass_score"] < high <= 1.0
    assert main["pass_at_k"] == pytest.approx({"1": 0.2})  # k up to the smallest n among the tests
    single = rows[("1.0", None)]
    assert single["n"] == 1 and single["strict_ci95"] == pytest.approx([0.2065, 1.0], abs=1e-4)
    assert cell_text(t1) == "2/5 PASS, 1 PWPV, 2 FAIL, 1 SKIPPED (flaky)"


def test_filters_and_sorting(synth_root, real_root):
    dirs = find_run_dirs([synth_root, real_root / "runs"])
    from gripprobe_core.reports.aggregate import Filters
    only = aggregate_runs(dirs, filters=Filters(agents=("synth",), tests=("t1",), hardware=("ci-*",)))
    assert {r["agent_version"] for r in only["rows"]} == {"1.0", "1.1"}
    assert only["tests"] == ["t1"] and all(set(r["cells"]) == {"t1"} for r in only["rows"])
    assert only["filters"] == {"agents": ["synth"], "tests": ["t1"], "hardware": ["ci-*"]}
    by_run = aggregate_runs(dirs, filters=Filters(runs=("20260102*",)))
    assert [r["run_id"] for r in by_run["runs"]] == ["20260102T000000Z"]
    tagged = aggregate_runs(dirs, filters=Filters(tests=("tag:non_sanity",)))
    assert tagged["tests"] == ["already_done"]
    by_name = aggregate_runs(dirs, sort="name")
    keys = [(r["agent"], r["agent_version"] or "", r["model"]) for r in by_name["rows"]]
    assert keys == sorted(keys)
    by_n = aggregate_runs(dirs, sort="n")
    assert [r["n"] for r in by_n["rows"]] == sorted((r["n"] for r in by_n["rows"]), reverse=True)
    by_overall = aggregate_runs(dirs, sort="overall")
    assert [r["overall_score"] for r in by_overall["rows"]] == sorted(
        (r["overall_score"] for r in by_overall["rows"]), reverse=True)


# ------------------------------------------------------------------ sanitization

def test_planted_secrets_never_reach_any_output(tmp_path, template):
    host = socket.gethostname()
    user = "zorblatt"  # getpass.getuser() reads LOGNAME first: the child process runs as this user
    home = "/srv/planted-home"
    secrets = ["/home/alice", "alice", user, home, "10.1.2.3", "sk-proj-abcdefghijklmnopqrst",
               "abcdefgh12345678", f"on {host} today", "hunter2", "fd00::1234"]
    root = tmp_path / "results"
    run = write_run(root, "20260103T000000Z", suite="nightly sk-proj-abcdefghijklmnopqrst",
                    argv=["run", "--results", "/home/alice/results"], specs_root=f"{home}/specs",
                    host={"hostname": host, "user": user})
    write_case(
        run, template, "planted", status="PASS", agent="reference", model="planted-model",
        test="save_file", model_hash=HASH, hardware_profile=f"{host}-box",
        agent_version=f"1.0 ({home}/bin, /home/alice/x, by {user} on {host} today, 10.1.2.3, fd00::1234)",
        harness_error="Authorization: Bearer abcdefgh12345678 password=hunter2",
        **{"verdict.evaluator_reason_text": "key sk-proj-abcdefghijklmnopqrst from /home/alice",
           "validators.0.message": f"{user}@{host} 10.1.2.3",
           "phases.1.process.command": ["/home/alice/bin/agent", "--api-key", "sk-proj-abcdefghijklmnopqrst"]})
    out = tmp_path / "agg"
    res = aggregate_cli("--runs-root", str(root), "--output", str(out), "--title", f"Report by {user}",
                        env={"LOGNAME": user, "HOME": home})
    assert res.returncode == 0, res.stderr
    for name in OUTPUT_FILES:
        text = (out / name).read_text()
        for secret in secrets:
            assert secret not in text, (name, secret)
    data = json.loads((out / "aggregate.json").read_text())
    row = data["rows"][0]
    assert row["model_hash"] == HASH  # a hash is data, not a secret
    assert row["agent_version"] == "1.0 (~/bin, ~/x, by <user> on <host> today, <ip>, <ip>)"
    assert row["hardware"] == "<host>-box" and data["title"] == "Report by <user>"
    assert data["runs"][0]["suite"] == f"nightly {REDACTED}"


def sanitizer_strategy():
    name = st.from_regex(r"\A[a-zA-Z][a-zA-Z0-9_.-]{1,12}\Z")
    home = st.from_regex(r"\A/[a-z]{1,8}(/[a-zA-Z0-9_.-]{1,8}){0,2}\Z")
    return st.builds(lambda u, h, hm: Sanitizer(user=u, host=h, home=hm), name, name, home)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(san=sanitizer_strategy(), text=st.text(), free=st.booleans())
def test_sanitize_never_raises_and_is_idempotent(san, text, free):
    fn = san.text if free else san.name
    once = fn(text)
    assert isinstance(once, str)
    assert fn(once) == once


_ALNUM = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20, max_size=40)
SECRETS = st.one_of(
    _ALNUM.map(lambda s: "sk-" + s),
    _ALNUM.map(lambda s: "Bearer " + s),
    _ALNUM.map(lambda s: "ghp_" + s),
    st.tuples(st.integers(11, 99), st.integers(0, 255), st.integers(0, 255), st.integers(1, 254)).map(
        lambda t: ".".join(map(str, t))),
    st.from_regex(r"\A[a-z]{3,10}\Z").map(lambda u: f"/home/{u}"),
    st.from_regex(r"\A[a-z]{3,10}\Z").map(lambda u: f"{u}@example.org"),
    st.just("zorblatt"), st.just("box-17.lab"),
)


@settings(max_examples=300, deadline=None)
@given(before=st.text(), secret=SECRETS, after=st.text(), sep=st.sampled_from([" ", "\n", "\t", " (", "'"]))
def test_planted_secrets_never_survive(before, secret, after, sep):
    assume(secret not in before and secret not in after)
    san = Sanitizer(user="zorblatt", host="box-17.lab", home="/srv/zz")
    text = f"{before}{sep}{secret}{sep[::-1]}{after}"
    for fn in (san.text, san.name):
        out = fn(text)
        core = secret.split(" ", 1)[-1]
        assert core not in out or core in before or core in after, (text, out)


def test_current_machine_names_are_replaced():
    from gripprobe_core.reports.sanitize import current_sanitizer
    host, user = socket.gethostname(), getpass.getuser()
    out = current_sanitizer().text(f"ran by {user} on {host} in {Path.home()}/x")
    assert f"by {user} " not in out and f" on {host} " not in out and str(Path.home()) + "/x" not in out
    assert "<user>" in out and "<host>" in out and "~/x" in out


# ------------------------------------------------------------------ confinement and errors

def test_writes_only_inside_output_and_leaves_runs_alone(real_root, synth_root, tmp_path):
    before_runs = tree_digest(real_root), tree_digest(synth_root)
    parent = tmp_path / "publish"
    out = parent / "site"
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (parent / "sibling.txt").write_text("also mine")
    args = ("--runs-root", str(real_root), "--runs-root", str(synth_root), "--output", str(out))
    for _ in range(2):  # the second run overwrites its own files
        res = aggregate_cli(*args)
        assert res.returncode == 0, res.stderr
    assert (tree_digest(real_root), tree_digest(synth_root)) == before_runs
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUT_FILES, "notes.txt"])
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in parent.iterdir()) == ["sibling.txt", "site"]
    assert (parent / "sibling.txt").read_text() == "also mine"


def test_refuses_output_inside_runs_or_holding_foreign_files(real_root, tmp_path):
    run_dir = next((real_root / "runs").iterdir())
    before = tree_digest(real_root)
    for bad in (real_root, real_root / "runs", real_root / "runs" / "agg", run_dir / "reports" / "agg", run_dir):
        res = aggregate_cli("--runs-root", str(real_root), "--output", str(bad))
        assert res.returncode == 2, (bad, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: "), res.stderr
    res = aggregate_cli("--runs-root", str(run_dir), "--output", str(run_dir / "agg"))
    assert res.returncode == 2, res.stderr
    assert tree_digest(real_root) == before
    foreign = tmp_path / "site"
    foreign.mkdir()
    (foreign / "index.html").write_text("<p>someone else's page</p>")
    res = aggregate_cli("--runs-root", str(real_root), "--output", str(foreign))
    assert res.returncode == 2 and "not written by aggregate-reports" in res.stderr
    assert (foreign / "index.html").read_text() == "<p>someone else's page</p>"
    assert [p.name for p in foreign.iterdir()] == ["index.html"]


def test_missing_runs_root_is_a_one_line_user_error(tmp_path):
    res = aggregate_cli("--runs-root", str(tmp_path / "nope"), "--output", str(tmp_path / "out"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --runs-root") and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    res = aggregate_cli("--runs-root", str(empty), "--output", str(tmp_path / "out"))
    assert res.returncode == 2 and "no run found" in res.stderr


def test_corrupt_case_files_are_skipped_and_counted(tmp_path, template):
    root = tmp_path / "results"
    run = write_run(root, "20260104T000000Z")
    write_case(run, template, "good", status="PASS", agent="reference", model="m", test="t")
    for name, content in (("notjson", "{not json"), ("noverdict", json.dumps({"key": template["key"]})),
                          ("badstatus", json.dumps({**template, "verdict": {"status": "GREAT"}})),
                          ("array", "[1, 2]")):
        (run / "cases" / name).mkdir()
        (run / "cases" / name / "case.json").write_text(content)
    (run / "cases" / "missing").mkdir()
    data = aggregate_runs(find_run_dirs([root]))
    assert data["unreadable"] == 5
    assert data["runs"][0]["cases"] == 1 and data["rows"][0]["n"] == 1
    res = aggregate_cli("--runs-root", str(run), "--output", str(tmp_path / "out"))
    assert res.returncode == 0 and "unreadable case files skipped: 5" in res.stderr


# ------------------------------------------------------------------ signatures

def _forge_verdict(run: Path, glob: str, status: str = "PASS") -> str:
    """Turn one case's verdict into ``status`` by editing its case.json (as anyone with the results could)."""
    path = next(run.glob(f"cases/{glob}/case.json"))
    data = json.loads(path.read_text())
    data["verdict"].update(status=status, strict_pass_score=1.0, overall_score=1.0)
    path.write_text(json.dumps(data))
    return path.parent.name


def test_changed_cases_are_left_out_and_every_run_shows_its_signature(real_root, synth_root, tmp_path):
    real = sorted((real_root / "runs").iterdir())[0]
    root = tmp_path / "results"
    copy = root / "runs" / real.name
    shutil.copytree(real, copy)
    forged = _forge_verdict(copy, "*oracle-lazy*save_file")  # NO_TOOL_CALL made PASS
    signing = json.loads((copy / "manifest.json").read_text())["signing"]
    out = tmp_path / "agg"
    res = aggregate_cli("--runs-root", str(root), "--runs-root", str(synth_root), "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert "1 run(s) CHANGED after the run" in res.stderr and "1 case(s) left out" in res.stderr
    data = json.loads((out / "aggregate.json").read_text())
    runs = {r["run_id"]: r for r in data["runs"]}
    mine = runs[real.name]
    assert mine["integrity"] == {"status": "changed", "key": signing["key"], "public_key": signing["public_key"],
                                 "changed_cases": 1, "run_files_changed": 0}
    assert mine["cases"] == 3  # the forged case is not counted
    assert {runs[r]["integrity"]["status"] for r in ("20260101T000000Z", "20260102T000000Z")} == {"unsigned"}
    assert data["signatures"]["cases_left_out"] == 1 and data["signatures"]["runs"]["unsigned"] == 2
    assert data["signatures"]["keys"] == [{"key": signing["key"], "public_key": signing["public_key"], "runs": 1}]
    lazy = next(r for r in data["rows"] if r["model"] == "oracle-lazy")
    assert "save_file" not in lazy["cells"] and forged  # only already_done of that row remains
    md, html = (out / "aggregate.md").read_text(), (out / "index.html").read_text()
    for page in (md, html):
        assert signing["public_key"] in page and "CHANGED after the run" in page and "not signed" in page
    # --verified-only: the unsigned runs leave too
    res = aggregate_cli("--runs-root", str(root), "--runs-root", str(synth_root), "--output", str(tmp_path / "v"),
                        "--verified-only")
    assert res.returncode == 0, res.stderr
    strict = json.loads((tmp_path / "v" / "aggregate.json").read_text())
    assert {r["agent"] for r in strict["rows"]} == {"reference"} and strict["signatures"]["cases_left_out"] == 1 + 9


# ------------------------------------------------------------------ tool-call fidelity

def test_real_runs_give_each_row_its_tool_call_fidelity(real_root, tmp_path):
    """Per row, the fidelity of its cases from their stored events and the oracle's ground truth: the reference
    agent's log (tier B) shows every call the wire carried, the wire every call the oracle made; the lazy profile
    makes none; the reference prints no markers (tier C misses every call)."""
    out = tmp_path / "agg"
    res = aggregate_cli("--runs-root", str(real_root), "--output", str(out))
    assert res.returncode == 0, res.stderr
    data = json.loads((out / "aggregate.json").read_text())
    rows = {r["model"]: r for r in data["rows"]}
    perfect, lazy = rows["oracle-perfect"]["fidelity"], rows["oracle-lazy"]["fidelity"]
    assert set(perfect) == {"B_vs_A", "C_vs_A", "A_vs_truth", "B_vs_truth", "C_vs_truth"}
    one_each = {"matched": 4, "missed": 0, "invented": 0, "n_reference": 4, "n_tested": 4, "recall": 1.0,
                "precision": 1.0, "cases": 4}  # 2 runs × 2 tests, one write each
    assert perfect["B_vs_A"] == perfect["A_vs_truth"] == perfect["B_vs_truth"] == one_each
    assert perfect["C_vs_A"] == {**one_each, "matched": 0, "missed": 4, "n_tested": 0, "recall": 0.0,
                                 "precision": None}
    assert all(f["n_reference"] == f["n_tested"] == 0 and f["cases"] == 4 for f in lazy.values()), lazy
    md = (out / "aggregate.md").read_text()
    assert "| B vs A recall | B vs A precision |" in md
    assert "| reference |  | oracle-perfect | tool |  | 1.00 (4) | 1.00 (4) | 0.00 (4) | — (0) | 1.00 (4) |" in md
    html = (out / "index.html").read_text()
    assert html.count("data-fidelity-row") == 2 and 'id="fidelity-table"' in html
    assert '<td class="num" data-key="B_vs_A-recall"' in html and "1.00 <span class=\"muted\">(4)</span>" in html


def test_fidelity_reads_no_link_and_counts_cases_without_events_as_none(tmp_path, template, real_root):
    """A case with no stored events (a synthetic one, or one whose events file is a planted link, never followed)
    adds nothing to its row's fidelity; the row still gets the whole fidelity object."""
    root = tmp_path / "root"
    run = write_run(root, "20260103T000000Z", suite="synthetic")
    write_case(run, template, "plain", status="FAIL", agent="synth", model="m1")
    linked = write_case(run, template, "linked", status="FAIL", agent="synth", model="m1")
    real_events = next((real_root / "runs").glob("*/cases/*oracle-perfect*save_file/artifacts/events.measured.jsonl"))
    (run / "cases" / linked["case_id"] / "artifacts").mkdir()
    (run / "cases" / linked["case_id"] / "artifacts" / "events.measured.jsonl").symlink_to(real_events)
    data = aggregate_runs(find_run_dirs([root]))
    (row,) = data["rows"]
    assert row["n"] == 2 and row["fidelity"]["B_vs_A"]["cases"] == 0 and row["fidelity"]["B_vs_A"]["recall"] is None


def test_worker_processes_give_the_same_data_as_one_process(real_root, synth_root, tmp_path, template):
    """--jobs: runs read side by side by forked workers (and the rows' bootstraps computed there) give the very
    data one process gives: each run is read whole by one process and the parts merged in run order."""
    from gripprobe_core.reports import scores

    extra = write_run(tmp_path, "20260103T000000Z", suite="synthetic")
    for i, status in enumerate(["PASS", "FAIL", "TIMEOUT", "PASS", "PASS_WITH_POLICY_VIOLATION", "NO_TOOL_CALL"]):
        write_case(extra, template, f"x-{i}", status=status, agent="synth", model="m1", format="tool",
                   test=f"t{i % 3}", agent_version="1.0", model_hash=HASH, hardware_profile="ci-2core")
    (extra / "cases" / "broken").mkdir()
    (extra / "cases" / "broken" / "case.json").write_text("{")
    dirs = find_run_dirs([real_root, synth_root, tmp_path])
    assert len(dirs) == 5
    got = []
    for jobs in (1, 2, 3):
        scores._row_intervals.cache_clear()  # each computes its own intervals
        data = aggregate_runs(dirs, jobs=jobs)
        data.pop("generated_at")
        got.append(data)
    assert got[0] == got[1] == got[2]
    assert got[0]["unreadable"] == 1 and any(len(r["cells"]) > 1 for r in got[0]["rows"])
    assert [r["run_id"] for r in got[0]["runs"]] == [d.name for d in dirs]


def test_the_cli_reads_with_workers_when_asked(real_root, synth_root, tmp_path):
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"agg{jobs}"
        res = gripprobe("aggregate-reports", "--runs-root", str(real_root), "--runs-root", str(synth_root),
                        "--output", str(out), "--jobs", jobs, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        data = json.loads((out / "aggregate.json").read_text())
        data.pop("generated_at")
        outs.append(data)
    assert outs[0] == outs[1] and outs[0]["rows"]


def test_the_page_written_by_worker_processes_is_the_one_process_page(real_root, synth_root, tmp_path):
    """write_aggregate --jobs: the page's rows written in forked workers, a slice each, joined in order while this
    process writes the JSON and the Markdown: the three files are the same, byte for byte, for any jobs."""
    from gripprobe_core.reports import aggregate

    data = aggregate_runs(find_run_dirs([real_root, synth_root]), jobs=1)
    base = data["rows"]
    data["rows"] = [dict(r, agent=f"{r['agent']}-{i}") for i in range(aggregate.MARKUP_POOL_MIN_ROWS // len(base) + 2)
                    for r in base]  # past the least rows the workers write
    assert len(data["rows"]) >= aggregate.MARKUP_POOL_MIN_ROWS
    pages = []
    for jobs in (1, 2, 3):
        out = tmp_path / f"out{jobs}"
        paths = aggregate.write_aggregate(data, out, jobs=jobs)
        assert [p.name for p in paths] == list(OUTPUT_FILES) and not aggregate._PAGE
        pages.append([p.read_bytes() for p in paths])
    assert pages[0] == pages[1] == pages[2]
    assert pages[0][2].count(b"<tr data-fidelity-row>") == len(data["rows"])


def test_default_workers_are_the_idle_cpus():
    """Forked workers pay only where a core is idle: on the 2-core machine at load 2.7 two workers took 4.0-5.6 s
    where one process took 3.9 s."""
    from gripprobe_core.reports.aggregate import default_jobs

    assert default_jobs(2, 0.1) == 2 and default_jobs(2, 0.6) == 1 and default_jobs(2, 2.7) == 1
    assert default_jobs(8, 1.0) == 7 and default_jobs(16, 0.0) == 8 and default_jobs(1, 0.0) == 1
    assert default_jobs(4, 30.0) == 1 and 1 <= default_jobs() <= 8


def test_busy_cpus_reads_the_tasks_running_now():
    """The default's busy CPUs are the runnable tasks of this moment (this process left out), not the 1-minute
    load average: with two processes spinning beside it, at least one CPU reads busy (the median of five readings)."""
    import subprocess
    import sys
    from gripprobe_core.reports.aggregate import busy_cpus

    assert 0 <= busy_cpus() <= os.cpu_count() * 64
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        assert busy_cpus() >= 1
    finally:
        for p in spin:
            p.kill()
            p.wait()


def test_the_page_is_written_as_a_stream_and_a_failure_leaves_the_old_page(tmp_path):
    """index.html is written piece by piece (store.layout.atomic_write_chunks: the page is never held whole); a
    stream that fails half way leaves no partial page and no temporary file, and the page that was there stays."""
    from gripprobe_core.store.layout import atomic_write_chunks

    page = tmp_path / "index.html"
    atomic_write_chunks(page, iter(["<p>", "caf\u00e9 \udcff", "</p>"]))
    assert page.read_bytes() == "<p>café \\udcff</p>".encode()

    def broken():
        yield "<p>new"
        raise RuntimeError("the renderer failed")

    with pytest.raises(RuntimeError):
        atomic_write_chunks(page, broken())
    assert page.read_bytes() == "<p>café \\udcff</p>".encode() and sorted(p.name for p in tmp_path.iterdir()) == [
        "index.html"]


def test_the_page_templates_loaded_while_the_workers_read_are_all_the_page_renders(real_root, synth_root):
    """aggregate-reports loads the page's templates while its workers read (reports/warm.py
    ``warm_aggregate_page``); rendering the page afterwards loads no other template (the list stays whole)."""
    import subprocess
    import sys

    code = f"""
from pathlib import Path
from gripprobe_core.reports import html
from gripprobe_core.reports.aggregate import aggregate_runs, find_run_dirs
from gripprobe_core.reports.warm import AGGREGATE_TEMPLATES, warm_aggregate_page
warm_aggregate_page()
env = html._env()
before = {{name for (_, name) in env.cache.keys()}}
html.render_aggregate_html(aggregate_runs(find_run_dirs([Path({str(real_root)!r}), Path({str(synth_root)!r})]), jobs=1))
after = {{name for (_, name) in env.cache.keys()}}
print(sorted(before ^ set(AGGREGATE_TEMPLATES)), sorted(after - before))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split("\n")[0] == "[] []", res.stdout

"""`gripprobe compare`: real runs, one with a planted regression (an oracle profile swapped for one cell).

Runs A and A2 are the same command; run B is the same command with oracle-perfect's profile swapped to
lazy in B's specs, so exactly one cell (reference · oracle-perfect · oracle · tool · save_file) goes from
PASS on all three trials to NO_TOOL_CALL on all three."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT, SPECS, gripprobe, planted_specs
from gripprobe_core.reports.compare import pairs_needed, smallest_p
from gripprobe_core.reports.html import page_name
from gripprobe_core.stats import mcnemar_exact

MODELS = ("oracle-perfect", "oracle-error-then-recover", "oracle-lazy", "oracle-tools-unsupported")
PLANTED = "reference · oracle-perfect · oracle · tool · save_file"


def run(results: Path, specs: Path = SPECS) -> Path:
    args = ["run", "--specs", str(specs), "-a", "reference", "-t", "save_file", "--trials", "3", "--jobs", "2",
            "--results", str(results)]
    for m in MODELS:
        args += ["-m", m]
    res = gripprobe(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("compare")
    planted = planted_specs(base / "specs-planted")
    return {"A": run(base / "a"), "A2": run(base / "a2"), "B": run(base / "b", planted), "base": base}


def compare(*args: str):
    return gripprobe("compare", *map(str, args), timeout=120)


def test_a_planted_regression_is_named_first_with_its_p_value(runs):
    res = compare(runs["A"], runs["B"], "--json", "--fail-on-regression")
    assert res.returncode == 1, res.stderr
    assert f"regression: 1 cell(s) regressed: {PLANTED}" in res.stderr
    data = json.loads(res.stdout)
    first = data["cells"][0]
    assert (first["model"], first["test"], first["change"]) == ("oracle-perfect", "save_file", "regressed")
    assert first["a"]["statuses"] == ["PASS"] * 3 and first["b"]["statuses"] == ["NO_TOOL_CALL"] * 3
    assert first["discordant"] == {"a_only": 3, "b_only": 0}
    assert first["p_value"] == pytest.approx(mcnemar_exact(3, 0)) == pytest.approx(0.25)
    assert [f["trial"] for f in first["flips"]] == [1, 2, 3]
    assert [c["change"] for c in data["cells"][1:]] == ["same", "same", "unscored"]  # unsupported on both sides
    s = data["summary"]
    assert (s["regressed"], s["improved"], s["same"], s["unscored"], s["cells"]) == (1, 0, 2, 1, 4)
    # pairs both sides attempted: tools-unsupported is out of n on both sides (3 cells × 3 trials)
    assert s["pairs"] == 9 and (s["a_only"], s["b_only"]) == (3, 0) and s["mcnemar_p"] == pytest.approx(0.25)
    assert s["strict"]["a"] == pytest.approx(2 / 3) and s["strict"]["b"] == pytest.approx(1 / 3)
    assert s["strict"]["diff"] == pytest.approx(-1 / 3)
    low, high = s["strict"]["ci95"]
    assert low < -1 / 3 <= high <= 0.0
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == set(MODELS)
    row = rows["oracle-perfect"]
    assert row["regressed"] == 1 and row["coverage"] == {"a": "1/1", "b": "1/1"}
    assert rows["oracle-tools-unsupported"]["coverage"] == {"a": "0/1", "b": "0/1"}
    assert row["strict"]["a"] == 1.0 and row["strict"]["b"] == 0.0 and row["strict"]["diff"] == -1.0
    # the lazy profile makes one model call where perfect makes two: fewer tokens per case in B
    assert row["per_case"]["total_tokens"]["delta"] < 0 and row["per_case"]["model_calls"]["delta"] < 0


def test_the_markdown_lists_flips_first(runs):
    res = compare(runs["A"], runs["B"])
    assert res.returncode == 0  # without --fail-on-regression a regression is reported, not an exit code
    md = res.stdout
    assert md.index("## Flips") < md.index("## Rows")
    flips = md.split("## Flips", 1)[1].split("## Rows", 1)[0]
    assert f"| regressed | {PLANTED} | 3/3 | 0/3 | 0.25 | [PASS](" in flips
    # each trial's status links to its case page, relative to where the Markdown is (here: the current folder)
    links = re.findall(r"\[(PASS|NO_TOOL_CALL)\]\(([^)]+)\)", flips)
    assert [st for st, _ in links] == ["PASS", "NO_TOOL_CALL"] * 3
    assert all((ROOT / link).resolve().is_file() for _, link in links), links
    assert "McNemar exact: PASS only in A 3, only in B 0" in md and "p = 0.25" in md
    assert "- passed: A 6/9, B 3/9" in md  # absolute pass counts beside the differences
    rows = md.split("## Rows", 1)[1]
    assert "| reference | oracle-perfect | oracle | tool | 1/1 → 1/1 | 3/3 → 0/3 | 1.000 → 0.000 |" in rows


def test_two_identical_runs_have_no_regression(runs):
    res = compare(runs["A"], runs["A2"], "--json", "--fail-on-regression")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    s = data["summary"]
    assert (s["regressed"], s["improved"], s["same"], s["a_only"], s["b_only"]) == (0, 0, 3, 0, 0)
    assert s["mcnemar_p"] == 1.0 and s["strict"]["diff"] == 0.0 and s["strict"]["ci95"] == [0.0, 0.0]


def test_significance_counts_only_regressions_below_it(runs):
    assert compare(runs["A"], runs["B"], "--fail-on-regression", "--significance", "0.1").returncode == 0
    res = compare(runs["A"], runs["B"], "--fail-on-regression", "--significance", "0.5")
    assert res.returncode == 1 and "out of reach" not in res.stderr  # 3 pairs reach p = 0.25 < 0.5


def test_smallest_p_and_pairs_needed():
    assert smallest_p(3) == 0.25 == mcnemar_exact(3, 0) and smallest_p(1) == 1.0
    assert pairs_needed(0.05) == 6 and smallest_p(6) < 0.05 <= smallest_p(5)
    assert pairs_needed(0.25) == 4 and pairs_needed(0.5) == 3 and pairs_needed(1.0) == 2


def test_a_significance_three_trials_cannot_reach_is_said(runs, tmp_path):
    """oracle-perfect against oracle-lazy, three real trials each: 3/3 → 0/3, and p = 0.25 is the best 3 pairs
    can do, so --significance 0.05 can never fire: exit 0 (the rule), but a warning and a note say why."""
    args = (runs["A"], "--model-a", "oracle-perfect", "--model-b", "oracle-lazy", "--fail-on-regression",
            "--significance", "0.05")
    res = compare(*args, "--output", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if "out of reach" in line]
    assert warnings == ["warning: --significance 0.05 is out of reach in 1 of 1 cell(s): with 3 paired trial(s) "
                        "the smallest McNemar p is 0.25; a cell needs 6 paired trials on each side to go below "
                        "0.05; 1 regressed cell(s) among them can never count for --fail-on-regression"]
    assert f"- **Note:** {warnings[0].removeprefix('warning: ')}" in res.stdout
    html = (tmp_path / "out" / "compare.html").read_text()
    assert 'id="significance-note"' in html and "a cell needs 6 paired trials" in html
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert data["significance"] == {"level": 0.05, "cells": 1, "out_of_reach": 1, "most_pairs_out_of_reach": 3,
                                    "smallest_p": 0.25, "pairs_needed": 6, "regressed_out_of_reach": 1}
    assert data["cells"][0]["change"] == "regressed" and data["cells"][0]["p_value"] == 0.25
    # without --significance nothing is said, and the regression counts
    res = compare(runs["A"], "--model-a", "oracle-perfect", "--model-b", "oracle-lazy", "--fail-on-regression")
    assert res.returncode == 1 and "out of reach" not in res.stderr + res.stdout


def test_run_ids_resolve_under_results_and_several_runs_pool_per_side(runs):
    a = runs["A"]
    res = compare("--results", a.parents[1], a.name, runs["B"], "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["a"]["runs"] == [a.name]
    res = compare("--a", runs["A"], "--a", runs["A2"], "--b", runs["B"], "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["a"]["runs"] == [runs["A"].name, runs["A2"].name] and data["a"]["cases"] == 24
    first = data["cells"][0]
    assert first["a"]["trials"] == 6 and first["b"]["trials"] == 3 and first["pairs"] == 3


def test_two_models_of_one_run_compare_head_to_head(runs):
    res = compare(runs["A"], "--model-a", "oracle-perfect", "--model-b", "oracle-lazy", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["pairing"] == ["agent", "format", "test", "trial"]
    (cell,) = data["cells"]
    assert cell["change"] == "regressed" and cell["a"]["passed"] == 3 and cell["b"]["passed"] == 0


def test_output_writes_three_self_contained_files(runs, tmp_path):
    out = tmp_path / "cmp"
    res = compare(runs["A"], runs["B"], "--output", out)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["compare.html", "compare.json", "compare.md"]
    html = (out / "compare.html").read_text()
    assert "<script src" not in html and "http://" not in html and "https://" not in html
    ids = _ids(html)
    assert {"flips", "rows", "cells", "mcnemar-p", "n-regressed"} <= ids
    assert html.index('id="flips"') < html.index('id="rows"') and "mark-regressed" in html
    assert (out / "compare.md").read_text() == res.stdout  # what it prints, links relative to --output
    data = json.loads((out / "compare.json").read_text())
    first = data["cells"][0]
    for side, run in (("a", runs["A"]), ("b", runs["B"])):
        pages = first[side]["pages"]
        assert len(pages) == 3 and all((out / p).resolve().is_file() for p in pages), pages
        case_dirs = [c.split("/", 1)[1] for c in first[side]["cases"]]
        assert [(out / p).resolve() for p in pages] == [
            (run / "reports" / "cases" / page_name(d)).resolve() for d in case_dirs]
        assert all(f'href="{p}"' in html for p in pages)
    assert 'id="pass-a">6/9<' in html and 'id="pass-b">3/9<' in html
    # again into the same folder: allowed (the files are ours)
    assert compare(runs["A"], runs["B"], "--output", out).returncode == 0


def test_bad_input_is_one_line_and_exit_2(runs, tmp_path):
    cases = [
        (compare(runs["A"], tmp_path / "nope"), "no such run directory"),
        (compare(runs["A"]), "compare needs two sides"),
        (compare(runs["A"], runs["B"], runs["A2"]), "at most two runs"),
        (compare(runs["A"], runs["B"], "--output", runs["A"] / "reports"), "inside the runs being compared"),
        (compare(runs["A"], runs["A"], "--agent-a", "nobody", "--agent-b", "reference"), "holds no case"),
    ]
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "compare.md").write_text("mine")
    cases.append((compare(runs["A"], runs["B"], "--output", tmp_path / "foreign"), "not written by compare"))
    for res, words in cases:
        assert res.returncode == 2, (res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert (tmp_path / "foreign" / "compare.md").read_text() == "mine"


def _ids(html: str) -> set[str]:
    found: set[str] = set()

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.update(v for k, v in attrs if k == "id" and v)
    P().feed(html)
    return found


def test_a_case_changed_after_its_run_is_left_out_and_named(runs, tmp_path):
    b = tmp_path / "runs" / runs["B"].name
    shutil.copytree(runs["B"], b)
    path = next(b.glob("cases/*oracle-perfect*save_file__t2/case.json"))
    data = json.loads(path.read_text())
    data["verdict"].update(status="PASS", strict_pass_score=1.0, overall_score=1.0)  # NO_TOOL_CALL made PASS
    path.write_text(json.dumps(data))
    res = compare(runs["A"], b, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["b"]["left_out"] == [f"{b.name}/{path.parent.name}"] and out["b"]["cases"] == 11
    assert [r["status"] for r in out["b"]["signatures"]] == ["changed"]
    assert [r["status"] for r in out["a"]["signatures"]] == ["verified"]
    first = out["cells"][0]
    assert first["b"]["statuses"] == ["NO_TOOL_CALL"] * 2  # the forged PASS never reaches a pair
    assert "warning: signatures:" in res.stderr and path.parent.name in res.stderr
    md = compare(runs["A"], b).stdout
    assert "CHANGED after the run" in md and "1 case(s) left out" in md


def test_a_different_model_build_is_said_for_its_row(tmp_path):
    """Two real runs whose specs give oracle-perfect different model hashes (a spec's model_hash is what a case
    records): each row says B ran another build, in the Markdown and on the page; the same build says nothing."""
    runs = {}
    for side, digest in (("a", "sha256:" + "a" * 64), ("b", "sha256:" + "b" * 64), ("a2", "sha256:" + "a" * 64)):
        specs = tmp_path / f"specs-{side}"
        shutil.copytree(SPECS, specs)
        model = specs / "models" / "oracle-perfect.yaml"
        model.write_text(model.read_text().replace("model_id: perfect", f"model_id: perfect\n    model_hash: {digest}"))
        res = gripprobe("run", "--specs", str(specs), "-a", "reference", "-m", "oracle-perfect", "-t", "save_file",
                        "--results", str(tmp_path / side))
        assert res.returncode == 0, res.stderr[-2000:]
        runs[side] = Path(res.stdout.strip().splitlines()[-1])
    res = compare(runs["a"], runs["b"], "--output", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    note = "B ran a different model build: A sha256:aaaaaaaaaaaa… vs B sha256:bbbbbbbbbbbb…"
    md = res.stdout
    assert md.index("## Model builds differ") < md.index("## Flips")
    assert f"- **reference · oracle-perfect · oracle · tool: {note}**" in md
    assert f"| **{note}** |" in md.split("## Rows", 1)[1]
    html = (tmp_path / "out" / "compare.html").read_text()
    assert 'id="model-builds"' in html and note in html and 'class="other-build build-note"' in html
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert data["rows"][0]["model_builds"] == {"a": ["sha256:" + "a" * 64], "b": ["sha256:" + "b" * 64], "differ": True}
    assert data["summary"]["other_builds"] == 1
    same = compare(runs["a"], runs["a2"])
    assert same.returncode == 0 and "model build" not in same.stdout.split("## Rows")[0]
    assert "| same (sha256:aaaaaaaaaaaa…) |" in same.stdout

"""Results paths that cannot be used: one line naming the path, what is wrong and the fix, exit 2.

Every command that takes a results root or a run directory, through the real `gripprobe` command in a
subprocess, against each shape: under a regular file, in /proc, in /sys, ``runs`` being a file, a folder
that cannot be written. (Tests run as root, where chmod stops nothing: /proc and /sys are the folders
nobody can write.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import gripprobe


@pytest.fixture
def shapes(tmp_path) -> dict[str, Path]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    runs_file = tmp_path / "runs-is-a-file"
    runs_file.mkdir()
    (runs_file / "runs").write_text("")
    run = tmp_path / "run-with-reports-file"
    (run / "cases").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"run_id": run.name, "status": "complete", "planned": []}))
    (run / "reports").write_text("a file where reports/ should be")
    return {"under-file": a_file / "results", "file": a_file, "proc": Path("/proc/gripprobe-results"),
            "sys": Path("/sys/gripprobe-results"), "runs-file": runs_file, "proc-root": Path("/proc"),
            "sys-root": Path("/sys/kernel"), "run-reports-file": run, "out": tmp_path / "aggregate-out"}


# (command line with {path}, shape, what the line must say)
CASES = [
    *[(["run", "--results", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file, not a folder"), ("proc", "virtual file system proc"),
        ("sys", "virtual file system sysfs"), ("runs-file", "runs is a file, not a folder"),
        ("proc-root", "virtual file system proc"), ("sys-root", "virtual file system sysfs"))],
    *[(["run-suite", "--suite", "default", "--results", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "virtual file system proc"), ("sys", "virtual file system"),
        ("runs-file", "runs is a file"), ("sys-root", "virtual file system sysfs"))],
    *[(["run-suite", "--resume", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such run directory"), ("sys", "no such run directory"),
        ("runs-file", "not a run directory"))],
    *[(["list-runs", "--results", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such folder"), ("sys", "no such folder"),
        ("runs-file", "runs is a file, not a folder"), ("file", "this is a file, not a folder"))],
    *[(["rebuild-reports", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such run directory"), ("sys", "no such run directory"),
        ("runs-file", "not a run directory"), ("run-reports-file", "reports is a file, not a folder"))],
    *[(["aggregate-reports", "--runs-root", "{path}", "--output", "{out}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such folder"), ("sys", "no such folder"),
        ("runs-file", "runs is a file, not a folder"))],
    *[(["backfill-model-hashes", "--results", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such folder"), ("sys", "no such folder"),
        ("runs-file", "runs is a file, not a folder"))],
    *[(["backfill-model-hashes", "{path}"], shape, say) for shape, say in (
        ("under-file", "a-file is a file"), ("proc", "no such run directory"))],
]


@pytest.mark.parametrize("argv,shape,say", CASES, ids=[f"{c[0][0]}{'-resume' if '--resume' in c[0] else ''}-{c[1]}"
                                                       for c in CASES])
def test_bad_results_path_is_one_line_and_exit_2(shapes, argv, shape, say):
    path = shapes[shape]
    res = gripprobe(*[a.format(path=path, out=shapes["out"]) for a in argv], timeout=120)
    assert res.returncode == 2, (res.returncode, res.stdout[-1000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and str(path) in lines[0], lines[0]
    assert say in lines[0], lines[0]
    assert "; " in lines[0], f"no fix given: {lines[0]}"


def test_aggregate_output_that_cannot_be_written(tmp_path, shapes):
    """--output in /proc or under a file: the runs are fine, the output folder is not."""
    run = shapes["run-reports-file"]
    for out, say in ((Path("/proc/gripprobe-out"), "virtual file system proc"),
                     (shapes["file"] / "out", "a-file is a file")):
        res = gripprobe("aggregate-reports", "--runs-root", str(run), "--output", str(out), timeout=120)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
        line = res.stderr.strip().splitlines()[-1]
        assert line.startswith("error: --output ") and say in line, line


def test_run_results_that_is_a_file(shapes):
    """`--results FILE` is caught by the option's own type check (click's usage error): exit 2, the path named."""
    res = gripprobe("run", "--results", str(shapes["file"]), timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"'{shapes['file']}' is a file" in res.stderr

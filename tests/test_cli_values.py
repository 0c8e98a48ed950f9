"""Numbers and paths given on the command line (or kept in a run's manifest for a resume) are checked where
they enter: ``nan``, ``inf`` and values out of range, a path component over 255 bytes or a path over 4,095
bytes are one error line and exit 2, never a traceback and never a run (the real `gripprobe` command)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import gripprobe, read_json

LONG = "a" * 300


def _one_error(res, *expected: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith(("Error:", "error:"))]
    assert len(errors) == 1, res.stderr
    for part in expected:
        assert part in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize("args, expected", [
    (["run", "--timeout", "nan"], "'--timeout': 'nan' is not a finite number"),
    (["run", "--timeout", "inf"], "'--timeout': 'inf' is not a finite number"),
    (["run", "--timeout", "1e400"], "'--timeout': '1e400' is not a finite number"),
    (["run", "--timeout", "1e308"], "'--timeout': 1e+308 is not in the range 0.1<=x<=86400"),
    (["run-suite", "--suite", "default", "--timeout", "-inf"], "'--timeout': '-inf' is not a finite number"),
    (["run", "--max-tokens-per-phase", "1" + "0" * 30], "'--max-tokens-per-phase'"),
    (["run", "--proxy-max-body", "999999999G"], "'--proxy-max-body': '999999999G' is over the 4G"),
    (["doctor", "--model", "oracle-perfect", "--timeout", "nan"], "'--timeout': 'nan' is not a finite number"),
    (["compare", "a", "b", "--significance", "nan"], "'--significance': 'nan' is not a finite number"),
    (["export", "x", "--format", "otlp", "--otlp-timeout", "inf"], "'--otlp-timeout': 'inf' is not a finite number"),
])
def test_numbers_that_are_not_finite_or_out_of_range_are_refused(tmp_path, args, expected):
    res = gripprobe(*args, cwd=tmp_path, timeout=60)
    _one_error(res, expected)
    assert not (tmp_path / "results").exists()  # nothing ran


@pytest.mark.parametrize("args", [
    ["run", "-m", "oracle-perfect", "-t", "save_file", "--results", f"/tmp/{LONG}"],
    ["run", "-m", "oracle-perfect", "-t", "save_file", "--specs", f"/tmp/{LONG}/specs"],
    ["validate", "--root", f"{LONG}"],
    ["run-suite", "--resume", f"/tmp/{LONG}"],
    ["list-runs", "--results", f"/tmp/{LONG}"],
    ["rebuild-reports", f"/tmp/{LONG}"],
    ["aggregate-reports", "--runs-root", f"/tmp/{LONG}", "--output", "agg"],
    ["aggregate-reports", "--runs-root", "results", "--output", f"/tmp/{LONG}"],
    ["export", f"/tmp/{LONG}", "--format", "junit"],
    ["compare", f"/tmp/{LONG}", "/tmp"],
    ["backfill-model-hashes", f"/tmp/{LONG}"],
    ["schema", "--out", f"/tmp/{LONG}"],
    ["agents", "list", "--specs", f"/tmp/{LONG}"],
])
def test_a_path_component_over_255_bytes_is_one_line(tmp_path, args):
    _one_error(gripprobe(*args, cwd=tmp_path, timeout=60), "is 300 bytes, over the 255-byte limit of a file name")


def test_a_path_over_4095_bytes_is_one_line(tmp_path):
    deep = "/".join(["d" * 200] * 21)  # every part fits, the whole does not
    _one_error(gripprobe("list-runs", "--results", deep, cwd=tmp_path, timeout=60),
               "over the 4,095-byte limit of a path")


def test_an_overlong_specs_folder_from_the_environment_is_one_line(tmp_path):
    res = gripprobe("validate", env={"GRIPPROBE_SPECS": f"/tmp/{LONG}"}, cwd=tmp_path, timeout=60)
    _one_error(res, "GRIPPROBE_SPECS=", "over the 255-byte limit")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    res = gripprobe("run", "-m", "oracle-perfect", "-t", "save_file", "--results",
                    str(tmp_path_factory.mktemp("values") / "results"))
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("change, expected", [
    ({"timeout_s": float("nan")}, "timeout_s nan is not a timeout (0.1 to 86400 seconds); pass --timeout"),
    ({"timeout_s": 1e308}, "timeout_s 1e+308 is not a timeout"),
    ({"trials": 10**18}, "trial 1000000000000000000 is not a trial number (1 to 100)"),
])
def test_a_resumed_manifest_is_checked_like_the_options(small_run, tmp_path, change, expected):
    """The numbers a resume takes from manifest.json: a NaN timeout once ran a stalled agent forever, trials
    1e18 planned 1e18 cases."""
    run = tmp_path / "runs" / small_run.name
    shutil.copytree(small_run, run)
    manifest = read_json(run / "manifest.json")
    (run / "cases" / next(iter(p.name for p in (run / "cases").iterdir())) / "case.json").unlink()  # one to do
    (run / "manifest.json").write_text(json.dumps({**manifest, **change}))
    res = gripprobe("run-suite", "--resume", str(run), timeout=120)
    _one_error(res, expected)


@pytest.mark.parametrize("args, expected", [
    (["-a", "r\u0435ference", "-m", "oracle-perfect", "-t", "save_file"],
     "unknown agent: 'r\\u0435ference' holds U+0435 CYRILLIC SMALL LETTER IE (which looks like the ASCII 'e') "
     "(did you mean 'reference'?)"),
    (["-m", "oracle-\u202eperfect", "-t", "save_file"], "unknown model: 'oracle-\\u202eperfect' holds U+202E"),
    (["-m", "oracle-perfect", "-t", "save\u200b_file"], "unknown test: 'save\\u200b_file' holds U+200B ZERO WIDTH"),
    (["-m", "oracle-perfect", "-t", "save_file", "-f", "x__y"], "--format 'x__y' is not a plain id"),
])
def test_an_id_on_the_command_line_that_reads_like_another_is_named(tmp_path, args, expected):
    """A lookalike of a known id is not answered "unknown agent 'reference'; known: reference"."""
    res = gripprobe("run", *args, "--results", str(tmp_path / "results"), timeout=60)
    _one_error(res, expected)
    assert not (tmp_path / "results" / "runs").exists() or not any((tmp_path / "results" / "runs").iterdir())

"""The lines `gripprobe run` prints as cases finish: status, the case's reason when it has one (its
``failure_reason``), nothing in its place when it has none, and the time. Through a real run of the command
(reference agent × two oracle profiles), then the same results through the terminal reporter."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from conftest import gripprobe
from gripprobe_core.models import CaseResult

LINE = re.compile(r"^\[(\d)/2\] reference (oracle-[a-z-]+) tool save_file: ([A-Z_]+) \((.*)\)$")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    res = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-m", "oracle-malformed-args", "-t",
                    "save_file", "--results", str(tmp_path_factory.mktemp("progress")))
    assert res.returncode == 0, res.stderr[-3000:]
    return res, Path(res.stdout.strip().splitlines()[-1])


def test_a_progress_line_gives_the_failure_reason_and_no_placeholder(run):
    res, run_dir = run
    lines = {m[2]: (m[3], m[4]) for m in map(LINE.match, res.stderr.splitlines()) if m}
    assert set(lines) == {"oracle-perfect", "oracle-malformed-args"}, res.stderr
    status, detail = lines["oracle-malformed-args"]
    assert status == "FAIL" and re.fullmatch(r"protocol_malformed, \d+\.\ds", detail), detail
    status, detail = lines["oracle-perfect"]
    assert status == "PASS" and re.fullmatch(r"\d+\.\ds", detail), detail  # no reason: nothing in its place
    assert "none" not in res.stderr
    cases = [CaseResult.model_validate_json(p.read_bytes()) for p in run_dir.glob("cases/*/case.json")]
    failed = next(c for c in cases if c.key.model == "oracle-malformed-args")
    assert failed.verdict.failure_reason == "protocol_malformed"  # the line says what case.json says
    assert failed.verdict.evaluator_reason_code == "none"          # (the field the line used to print)


def test_the_terminal_reporter_prints_the_same(run):
    from rich.console import Console

    from gripprobe_core.cli.progress import RichReporter

    _, run_dir = run
    out = io.StringIO()
    reporter = RichReporter(2, console=Console(file=out, width=200, color_system=None))
    with reporter:
        for p in sorted(run_dir.glob("cases/*/case.json")):
            reporter.case_done(CaseResult.model_validate_json(p.read_bytes()))
    text = out.getvalue()
    assert re.search(r"^reference oracle-malformed-args tool save_file: FAIL \(protocol_malformed, \d+\.\ds\)$",
                     text, re.M), text
    assert re.search(r"^reference oracle-perfect tool save_file: PASS \(\d+\.\ds\)$", text, re.M), text
    assert "none" not in text

"""benchmarks/run_all.py's parser and table, and benchmarks/_bench.py's RESULT lines, on sample output.

No timing here: targets are checked by the benchmarks themselves (the contract, benchmarks/_bench.py).
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


run_all = _load("run_all")
bench = _load("_bench")

SAMPLE = """\
python3 on the agents' PATH: /usr/bin/python3.11
harness_cost_n48: 169.2 ms, target 60: MISSED
RESULT harness_cost_n6 272 ms target=- baseline=287.5 ratio=1.89 load=2.31
RESULT harness_cost_n48 169.2 ms target=60 baseline=585 ratio=1.29 load=2.40
RESULT harness_ratio_n48 1.29 x target=<=1.1 baseline=585 ratio=1.29 load=2.40
RESULT loop_lag_p99_excess 2.2 ms target=10 baseline=7.3 ratio=1.3 load=3.1
RESULT throughput 40 req/s target=>=25 baseline=- ratio=- load=-
RESULT ray_throughput 2.1 cases/s target=2 baseline=2.3 ratio=0.91 load=2.10 MET
RESULT sandbox_none_cpu 90.5 ms target=ratio<=1.2 baseline=60.1 ratio=1.506 load=3
RESULT broken notanumber ms target=1 baseline=1 ratio=1 load=1
not a RESULT line
"""


def test_parse_result_reads_the_contract_line() -> None:
    r = run_all.parse_result("RESULT harness_cost_n48 169.2 ms target=60 baseline=585 ratio=1.29 load=2.40", "h.py")
    assert (r.name, r.value, r.unit, r.target, r.baseline, r.ratio, r.load, r.script) == \
        ("harness_cost_n48", 169.2, "ms", "60", 585.0, 1.29, 2.40, "h.py")
    assert r.verdict == "MISSED"
    # keys in any order, a trailing word, dashes for no value
    r = run_all.parse_result("  RESULT x 5 ms load=1.5 ratio=- target=<=10 baseline=- extra\n")
    assert (r.value, r.target, r.baseline, r.ratio, r.load, r.verdict) == (5.0, "<=10", None, None, 1.5, "MET")


@pytest.mark.parametrize("line", ["", "RESULT", "RESULT name 5", "RESULT name five ms target=1", "RESULTS a 1 ms",
                                  "# RESULT a 1 ms", "RESULT a=1 1 ms", "RESULT a 1 unit=ms"])
def test_parse_result_refuses_what_is_not_one(line: str) -> None:
    assert run_all.parse_result(line) is None


@pytest.mark.parametrize("value,target,ratio,expected", [
    (60, "60", None, "MET"), (60.01, "60", None, "MISSED"), (1.1, "<=1.1", None, "MET"), (9, "≤10", None, "MET"),
    (24, ">=25", None, "MISSED"), (25, ">=25", None, "MET"), (3, "-", None, "-"), (3, None, None, "-"),
    (500, "ratio<=1.2", 1.19, "MET"), (1, "ratio<=1.2", 1.21, "MISSED"), (1, "ratio>=2", None, "-"),
])
def test_verdict(value: float, target: str | None, ratio: float | None, expected: str) -> None:
    assert bench.verdict(value, target, ratio) == expected


@pytest.mark.parametrize("target", ["fast", "ratio", "ratio<1", "<=x"])
def test_a_target_of_no_known_form_is_refused(target: str) -> None:
    with pytest.raises(ValueError):
        bench.target_of(target)
    assert run_all.parse_result(f"RESULT a 1 ms target={target} baseline=- ratio=- load=1").target == "-"


def test_result_line_round_trips_through_the_parser() -> None:
    line = bench.result_line("harness_cost_n48", 169.234, "ms", target=60, baseline=585.04, ratio=1.2893, load=2.4)
    assert line == "RESULT harness_cost_n48 169.23 ms target=60 baseline=585.04 ratio=1.289 load=2.4"
    r = run_all.parse_result(line)
    assert (r.name, r.value, r.unit, r.target, r.baseline, r.ratio, r.load) == \
        ("harness_cost_n48", 169.23, "ms", "60", 585.04, 1.289, 2.4)
    line = bench.result_line("ratio", 1.05, "x", target="<=1.1", load=0.5)
    assert line == "RESULT ratio 1.05 x target=<=1.1 baseline=- ratio=- load=0.5"
    assert run_all.parse_result(line).verdict == "MET"
    with pytest.raises(ValueError):
        bench.result_line("two words", 1, "ms")


def test_collect_and_table_on_sample_output() -> None:
    good = run_all.collect("harness_overhead.py", SAMPLE.splitlines(), 0)
    assert [r.name for r in good.results] == ["harness_cost_n6", "harness_cost_n48", "harness_ratio_n48",
                                              "loop_lag_p99_excess", "throughput", "ray_throughput",
                                              "sandbox_none_cpu"]
    assert good.crash is None
    crashed = run_all.collect("ray_overhead.py", ["starting", "Traceback (most recent call last):", "  ...",
                                                  "RuntimeError: boom"], 1)
    silent = run_all.collect("old.py", ["a figure in prose: 12 ms"], 0)
    text = run_all.table([good, crashed, silent])
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == list(run_all.COLUMNS)
    rows = {cells[0]: cells for cells in ([c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:])}
    assert rows["harness_cost_n48"] == ["harness_cost_n48", "169.2", "ms", "585", "1.29", "60", "MISSED", "2.4"]
    assert rows["harness_cost_n6"][5:7] == ["-", "-"]
    assert rows["harness_ratio_n48"][6] == "MISSED"
    assert rows["loop_lag_p99_excess"][6] == "MET"
    assert rows["throughput"][3:8] == ["-", "-", ">=25", "MET", "-"]
    assert rows["ray_throughput"][6] == "MET"  # the script's own verdict stands (its target is a lower bound)
    assert rows["sandbox_none_cpu"][5:7] == ["ratio<=1.2", "MISSED"]
    assert rows["ray_overhead.py"][6] == "CRASHED: traceback (exit 1)"
    assert rows["old.py"][6] == "no RESULT line"
    assert len({len(ln) for ln in lines}) == 1  # columns aligned


@pytest.mark.parametrize("lines,rc,timed_out,crash", [
    (["RESULT a 1 ms target=0 baseline=- ratio=- load=1"], 1, False, None),  # a missed target, said by exit 1
    (["usage: x.py [-h]", "x.py: error: unrecognized arguments: --quick"], 2, False, "exit 2, no RESULT line"),
    (["RESULT a 1 ms target=- baseline=- ratio=- load=1"], -9, False, "killed by signal 9"),
    (["RESULT a 1 ms target=- baseline=- ratio=- load=1"], -9, True, "timed out"),
    ([], 0, False, None),
])
def test_what_counts_as_a_crash(lines: list[str], rc: int, timed_out: bool, crash: str | None) -> None:
    assert run_all.collect("x.py", lines, rc, timed_out=timed_out).crash == crash


def _write(folder: Path, name: str, body: str) -> None:
    (folder / name).write_text(textwrap.dedent(body))


def test_main_runs_each_script_and_exits_nonzero_only_on_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _write(tmp_path, "missed.py", """\
        import sys
        print("quick" if "--quick" in sys.argv else "full")
        print("RESULT missed_figure 70 ms target=60 baseline=500 ratio=1.14 load=1.0")
        sys.exit(1)
        """)
    _write(tmp_path, "_helper.py", "raise SystemExit('a helper is never run')\n")
    assert run_all.main(["--dir", str(tmp_path), "--quick"]) == 0
    out, err = capsys.readouterr()
    assert "| missed_figure | 70" in out and "MISSED" in out and "--quick" in out
    assert "[missed] quick" in err and "_helper" not in err

    _write(tmp_path, "crash.py", "raise RuntimeError('boom')\n")
    assert run_all.main(["--dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "CRASHED: traceback (exit 1)" in out and "RuntimeError: boom" in err
    assert run_all.main(["--dir", str(tmp_path), "--only", "missed"]) == 0
    with pytest.raises(SystemExit):
        run_all.main(["--dir", str(tmp_path), "--only", "nonesuch"])

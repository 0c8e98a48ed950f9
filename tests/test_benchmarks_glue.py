"""benchmarks/run_all.py's parser and table, and benchmarks/_bench.py's RESULT lines, on sample output;
every benchmark script takes ``--quick`` and prints RESULT lines of the contract's form.

No timing here: targets are checked by the benchmarks themselves (the contract, benchmarks/_bench.py). The
slow scripts are checked from their source (their argparse help, their RESULT emission); the four proxy and
signing scripts also run for real with tiny sizes (a few seconds each).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
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


def test_the_verdict_is_the_script_s_on_the_unrounded_figure(capsys: pytest.CaptureFixture) -> None:
    """A median of 1.1002x prints as 1.1 against a target of 1.1: the script says MISSED on its RESULT line and
    run_all's table says so too (read from the rounded value it would have said MET); a figure without a target
    carries no verdict word."""
    bench.report([bench.Figure("harness_ratio_n48", 1.1002, "x", 1.1, 131.04, 1.1002, load=2.2),
                  bench.Figure("startup_run", 0.2996, "s", 0.3, 0.159, 2.8, load=2.0),
                  bench.Figure("harness_cost_n6", 57.8, "ms", None, 142.4, 1.41, load=2.2)])
    out = capsys.readouterr().out.splitlines()
    assert "harness_ratio_n48: 1.1 x, target 1.1: MISSED" in out[0]
    results = [run_all.parse_result(line) for line in out if line.startswith("RESULT ")]
    assert [(r.name, r.value, r.verdict) for r in results] == [
        ("harness_ratio_n48", 1.1, "MISSED"), ("startup_run", 0.3, "MET"), ("harness_cost_n6", 57.8, "-")]
    assert out[-3].endswith(" MISSED") and out[-2].endswith(" MET") and out[-1].endswith("load=2.2")
    table = run_all.table([run_all.collect("harness_overhead.py", out, 1)])
    assert "| harness_ratio_n48" in table and "MISSED" in table.split("harness_ratio_n48")[1].splitlines()[0]
    with pytest.raises(ValueError):
        bench.result_line("a", 1, "ms", target=1, stated="OK")


def test_sandbox_overhead_states_its_verdict_on_the_unrounded_figure() -> None:
    """sandbox_overhead writes its own RESULT lines (one decimal): 10.04 ms prints as 10.0 against a target of 10,
    and says MISSED; a CPU ratio of 1.0504 prints as 1.050 against ratio<=1.05: MISSED too."""
    sandbox_overhead = _load("sandbox_overhead")

    line = sandbox_overhead.result("sandbox_added_per_phase", 10.04, "ms", "10", 60.0, 1.17)
    assert run_all.parse_result(line).value == 10.0 and line.endswith(" MISSED")
    line = sandbox_overhead.result("sandbox_none_cpu_per_case", 300.0, "ms", "ratio<=1.05", 285.6, 1.0504)
    assert run_all.parse_result(line).verdict == "MISSED"
    assert sandbox_overhead.result("sandbox_added_per_phase", 3.6, "ms", "10", 66.0, 1.05).endswith(" MET")
    assert sandbox_overhead.result("sandbox_bwrap_floor", 1.6, "ms", "-", 0.5, 3.2).endswith(tuple("0123456789"))


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


# ------------------------------------------------------------------ every script follows the contract

SCRIPTS = run_all.scripts(BENCH)
CONTRACT_TEMPLATE = "RESULT {} {} {} target={} baseline={} ratio={} load={}"
CONTRACT_FORMS = (CONTRACT_TEMPLATE, CONTRACT_TEMPLATE + "{}", CONTRACT_TEMPLATE + " {}")
"""The line, then maybe the script's verdict word (MET / MISSED) after the fields."""


def test_the_benchmarks_are_found() -> None:
    names = {p.stem for p in SCRIPTS}
    assert {"harness_overhead", "loop_lag", "proxy_flood", "proxy_latency", "proxy_memory", "signing_cost"} <= names
    assert "run_all" not in names and "_bench" not in names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_takes_quick(script: Path) -> None:
    """run_all.py passes ``--quick`` to every script: each declares it (its argparse help lists it)."""
    res = subprocess.run([sys.executable, str(script), "--quick", "--help"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "--quick" in res.stdout


def _templates(tree: ast.AST) -> list[str]:
    """Every f-string of ``tree`` that starts with ``RESULT ``, its formatted parts written ``{}``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
                and str(node.values[0].value).startswith("RESULT "):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
    return out


def _calls_contract_emitter(tree: ast.AST) -> bool:
    """Whether the module imports ``report`` or ``result_line`` from ``_bench`` and calls it."""
    imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "_bench" for a in node.names if a.name in ("report", "result_line")}
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported
               for node in ast.walk(tree))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_prints_results_in_the_contract_form(script: Path) -> None:
    """A script's RESULT lines come from _bench (report / result_line, tested above) or from f-strings of
    exactly the contract's form; a script with neither prints no RESULT line at all."""
    tree = ast.parse(script.read_text())
    templates = _templates(tree)
    assert templates or _calls_contract_emitter(tree), f"{script.name} prints no RESULT line"
    for t in templates:
        assert t in CONTRACT_FORMS, f"{script.name}: {t!r} is not {CONTRACT_TEMPLATE!r}"


def test_the_form_check_refuses_a_line_off_the_contract() -> None:
    assert _templates(ast.parse('x = f"RESULT {a} {b} {c} target={d} load={e}"')) == \
        ["RESULT {} {} {} target={} load={}"]
    assert not _calls_contract_emitter(ast.parse("from _bench import load1\nload1()"))
    assert _calls_contract_emitter(ast.parse("from _bench import report as r\nr([])"))


def _tail_results(script: str, *args: str, timeout: float = 120) -> list:
    """Run a benchmark with tiny sizes; its output must END with RESULT lines, each one the parser reads
    (the same as _bench writes them, a load on each); returns them parsed."""
    res = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args], capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL, cwd=BENCH.parent)
    assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-3000:]  # 1: a target missed, said after the lines
    lines = res.stdout.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("RESULT ")), None)
    assert first is not None, f"no RESULT line (exit {res.returncode}):\n" + res.stdout[-2000:] + res.stderr[-3000:]
    tail = lines[first:]
    parsed = [run_all.parse_result(line, script) for line in tail]
    assert all(p is not None for p in parsed), tail
    for line, p in zip(tail, parsed):
        assert line == bench.result_line(p.name, p.value, p.unit, target=p.target, baseline=p.baseline,
                                         ratio=p.ratio, load=p.load, stated=p.stated), line
        assert (p.stated is None) == (bench.target_of(p.target) is None), line  # a target: the script's verdict
        assert p.load is not None
    assert run_all.collect(f"{script}.py", lines, res.returncode).crash is None
    return parsed


@pytest.mark.e2e
def test_proxy_memory_tiny_run_prints_its_results() -> None:
    got = {r.name: r for r in _tail_results("proxy_memory", "--quick", "--mb", "2")}
    assert set(got) == {"proxy_memory_growth", "proxy_memory_peak", "proxy_memory_recorder_growth",
                        "proxy_memory_recorder_peak", "proxy_memory_stream_s"}
    assert got["proxy_memory_growth"].target == "30" and got["proxy_memory_growth"].verdict in ("MET", "MISSED")
    assert got["proxy_memory_stream_s"].baseline > 0 and got["proxy_memory_peak"].ratio > 0


@pytest.mark.e2e
def test_proxy_latency_tiny_run_prints_its_results() -> None:
    got = {r.name: r for r in _tail_results("proxy_latency", "--quick", "--requests", "20", "--rounds", "2",
                                            "--throughput-requests", "64", "--no-mitmproxy")}
    assert {"proxy_p50_added", "proxy_p99_added", "proxy_ttfb_added", "proxy_observe_p50", "proxy_throughput",
            "proxy_throughput_recorded"} == set(got)  # no mitmproxy figure when it does not run
    assert got["proxy_p50_added"].target == "1" and got["proxy_ttfb_added"].target == "2"
    assert got["proxy_throughput"].baseline > 0


@pytest.mark.e2e
def test_signing_cost_tiny_run_prints_its_results() -> None:
    got = {r.name: r for r in _tail_results("signing_cost", "--quick", "--passes", "2", "--tests", "save_file")}
    assert set(got) == {"signing_sign_per_case", "signing_verify_per_case", "signing_verify_cmd"}
    assert got["signing_verify_cmd"].value > 0 and got["signing_verify_cmd"].baseline > 0


@pytest.mark.e2e
def test_proxy_flood_tiny_run_prints_its_results() -> None:
    got = {r.name: r for r in _tail_results("proxy_flood", "--quick", "--calls", "8", "--baseline-calls", "2",
                                            "--size", "2000", "--sandbox", "none")}
    assert set(got) == {"flood_harness_growth", "flood_flat", "flood_recorder_peak", "flood_record_file",
                        "flood_calls_failed", "flood_ms_per_call", "flood_run_s"}
    assert got["flood_calls_failed"].value == 0 and got["flood_calls_failed"].verdict == "MET"
    assert got["flood_record_file"].verdict == "MET" and got["flood_flat"].target == "<=1.1"


# -------------------------------------------------------------- _bench's memory helpers, on real processes

ALLOCATE = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print("allocated", flush=True)
sys.stdin.readline()
"""


def test_memory_sampler_sees_a_child_grow_from_outside() -> None:
    proc = subprocess.Popen([sys.executable, "-c", ALLOCATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        assert proc.pid in bench.child_pids(os.getpid())
        assert bench.cmdline_has(proc.pid, b"bytearray(64") and not bench.cmdline_has(proc.pid, b"no such text")
        start = bench.status_kib(proc.pid) / 1024
        assert 0 < start < 60 and bench.status_kib(proc.pid, "VmHWM") >= bench.status_kib(proc.pid)
        with bench.MemorySampler(lambda: {"child": proc.pid}, every_s=0.005) as sampler:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "allocated"
            time.sleep(0.05)
        assert sampler.samples >= 2
        assert sampler.peak_mib("child", kernel=False) - start >= 60
        assert sampler.peak_mib("child") >= sampler.peak_mib("child", kernel=False)
        proc.stdin.write("done\n")
        proc.stdin.flush()
        proc.wait(30)
        assert bench.status_kib(proc.pid) == 0 and bench.child_pids(proc.pid) == []  # gone: nothing to read
        assert sampler.peak_mib("nobody") == 0
    finally:
        proc.kill()
        proc.wait()


def test_missed_lists_the_figures_whose_target_is_missed() -> None:
    figs = [bench.Figure("a", 70, "ms", 60), bench.Figure("b", 50, "ms", 60), bench.Figure("c", 1, "x"),
            bench.Figure("d", 5, "ms", "ratio<=1.1", 4, 1.25), bench.Figure("e", 3, "calls", 0)]
    assert [f.name for f in bench.missed(figs)] == ["a", "d", "e"]

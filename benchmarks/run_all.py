"""Run every benchmark in this folder, each in its own process, and print ONE table of their figures.

Each script prints its figures as ``RESULT`` lines (the contract, benchmarks/_bench.py); this collects them
and prints one Markdown table: name, value, unit, baseline, ratio, target, MET/MISSED, load. A script's
other output goes to stderr as it comes, prefixed with its name.

Exit status: 0 when every script ran, whether or not its targets were met (the table says); 1 when a
script crashed: killed by a signal, past ``--timeout``, a Python traceback in its output, or a non-zero
exit with no RESULT line (a non-zero exit after RESULT lines is a script saying a target was missed).

    .venv/bin/python benchmarks/run_all.py [--quick] [--only harness_overhead --only loop_lag] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import load1, num, target_of, verdict  # noqa: E402

COLUMNS = ("name", "value", "unit", "baseline", "ratio", "target", "MET/MISSED", "load")


@dataclass(frozen=True)
class Result:
    """One ``RESULT`` line."""

    name: str
    value: float
    unit: str
    target: str = "-"
    baseline: float | None = None
    ratio: float | None = None
    load: float | None = None
    script: str = ""
    stated: str | None = None
    """The script's own verdict (a word MET or MISSED after the fields), which stands: it knows its target."""

    @property
    def verdict(self) -> str:
        return self.stated or verdict(self.value, self.target, self.ratio)


def _opt_float(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_result(line: str, script: str = "") -> Result | None:
    """A ``RESULT <name> <value> <unit> key=value ...`` line, or None when the line is not one (or is
    malformed: a value that is no number, a missing unit). Keys may come in any order; unknown keys and
    other words are ignored but a trailing ``MET``/``MISSED`` (the script's verdict); ``-`` is no value."""
    words = line.strip().split()
    if len(words) < 4 or words[0] != "RESULT":
        return None
    value = _opt_float(words[2])
    if value is None or "=" in words[1] or "=" in words[3]:
        return None
    keys = dict(w.split("=", 1) for w in words[4:] if "=" in w)
    target = keys.get("target", "-").strip() or "-"
    try:
        target_of(target)
    except ValueError:
        target = "-"
    stated = next((w for w in reversed(words[4:]) if w in ("MET", "MISSED")), None)
    return Result(words[1], value, words[3], target, _opt_float(keys.get("baseline")), _opt_float(keys.get("ratio")),
                  _opt_float(keys.get("load")), script, stated)


@dataclass
class ScriptRun:
    """One script's run: its RESULT lines and whether it crashed."""

    script: str
    returncode: int | None
    seconds: float
    results: list[Result] = field(default_factory=list)
    traceback: bool = False
    timed_out: bool = False
    tail: list[str] = field(default_factory=list)

    @property
    def crash(self) -> str | None:
        """Why this run counts as a crash, or None."""
        if self.timed_out:
            return "timed out"
        if self.returncode is not None and self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        if self.traceback:
            return f"traceback (exit {self.returncode})"
        if self.returncode and not self.results:
            return f"exit {self.returncode}, no RESULT line"
        return None


def collect(script: str, lines: list[str], returncode: int | None, seconds: float = 0.0,
            timed_out: bool = False) -> ScriptRun:
    """What a script's output says (every RESULT line, a traceback) once it ended."""
    results = [r for r in (parse_result(line, script) for line in lines) if r is not None]
    tb = any(line.startswith("Traceback (most recent call last)") for line in lines)
    return ScriptRun(script, returncode, seconds, results, tb, timed_out, lines[-15:])


def run_script(path: Path, extra: list[str], timeout_s: float) -> ScriptRun:
    """Run one benchmark script (its stdout and stderr echoed to our stderr, prefixed)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(path), *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # its lines as they come
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            print(f"[{path.stem}] {line}", file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        proc.wait()
    reader.join(5)
    return collect(path.name, lines, proc.returncode, time.perf_counter() - t0, timed_out)


def table(runs: list[ScriptRun]) -> str:
    """One Markdown table of every figure; a crashed script, or one that printed no figure, gets a row."""
    rows: list[tuple[str, ...]] = []
    for run in runs:
        for r in run.results:
            rows.append((r.name, num(r.value), r.unit, num(r.baseline), num(r.ratio), r.target, r.verdict,
                         num(r.load)))
        why = run.crash
        if why is not None:
            rows.append((run.script, "-", "-", "-", "-", "-", f"CRASHED: {why}", "-"))
        elif not run.results:
            rows.append((run.script, "-", "-", "-", "-", "-", "no RESULT line", "-"))
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(cells, widths)) + " |"

    out = [line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows]
    return "\n".join(out)


def scripts(folder: Path = HERE, only: list[str] | None = None) -> list[Path]:
    """The benchmark scripts: every ``*.py`` in ``folder`` but this one and helpers (``_*.py``); ``only`` by stem."""
    found = [p for p in sorted(folder.glob("*.py")) if p.name != "run_all.py" and not p.name.startswith("_")]
    if only:
        wanted = {o.removesuffix(".py") for o in only}
        missing = wanted - {p.stem for p in found}
        if missing:
            raise SystemExit(f"no such benchmark: {', '.join(sorted(missing))}")
        found = [p for p in found if p.stem in wanted]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="passed to every script (few rounds, CI smoke)")
    ap.add_argument("--only", action="append", help="run only this script (its name without .py; repeatable)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per script before it counts as crashed")
    ap.add_argument("--dir", type=Path, default=HERE, help="the folder of benchmark scripts (default: this one)")
    args = ap.parse_args(argv)

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = load1()
    runs = []
    for path in scripts(args.dir, args.only):
        print(f"== {path.name}", file=sys.stderr, flush=True)
        runs.append(run_script(path, ["--quick"] if args.quick else [], args.timeout))
    print(f"benchmarks/run_all.py{' --quick' if args.quick else ''}: {started}, load {load_start:.2f} at start, "
          f"{load1():.2f} at end; " + ", ".join(f"{r.script} {r.seconds:.0f} s" for r in runs))
    print(table(runs))
    crashed = [r for r in runs if r.crash]
    for r in crashed:
        print(f"{r.script} crashed ({r.crash}); its last lines:", file=sys.stderr)
        for line in r.tail:
            print(f"    {line}", file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())

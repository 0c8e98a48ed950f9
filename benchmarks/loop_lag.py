"""The runner's event loop and harness cost, as a user waits for them, against an earlier version in the same run.

1. **Loop lag** during a 24-case ``--jobs 4`` run: the run's own loop samples how late a 5 ms timer fires
   (``GRIPPROBE_LOOP_LAG_FILE``); the loop relays every proxied model call of every case at once, so its lag
   is added to the model timings the proxy records. Target: p99 ≤ 10 ms.
2. **Harness cost from outside**, at ``--jobs 1`` on the same 24 cases: the wall time of the whole
   ``gripprobe run`` command (start-up, preflight, every case, case files, reports) minus the time the agent
   processes themselves ran (from each case.json), per case. Target: ≤ 100 ms per case (median of rounds).

The baseline is an earlier commit (``--baseline``, default: the runner before the driver refactor), installed
from ``git archive`` into its own venv under ~/.cache/gripprobe/bench/ (kept for the next run); both run the
same cases, alternating, each with its own specs. Cases: the reference agent × oracle perfect/lazy × 12 tests
that need no challenge server.

    .venv/bin/python benchmarks/loop_lag.py [--rounds 3] [--baseline REV] [--no-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "3730169"  # the runner before the driver seam (issue 11)
TESTS = ("json_rank_from_file", "patch_file", "patch_file_prepared", "patch_file_shell", "python_file",
         "python_file_de", "python_file_simple", "save_file", "shell_date", "shell_file", "shell_pwd",
         "weekly_plan_next_week")
MODELS = ("oracle-perfect", "oracle-lazy")
LAG_TARGET_MS = 10.0
COST_TARGET_MS = 100.0


def baseline_python(rev: str) -> Path:
    """A venv holding gripprobe-core at ``rev`` (built once, cached by commit)."""
    sha = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gripprobe" / "bench" / sha[:12]
    py = home / "venv" / "bin" / "python"
    if (home / "ready").is_file():
        return py
    src = home / "src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as fh:
        fh.write(archive)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(src, filter="data")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)], check=True)
    (home / "ready").write_text(sha)
    return py


def gripprobe(python: Path, specs: Path, results: Path, jobs: int, env: dict[str, str] | None = None) -> tuple[float, Path]:
    """One real ``gripprobe run`` (wall seconds, run directory)."""
    args = [str(python), "-m", "gripprobe_core.cli", "run", "--specs", str(specs), "--results", str(results),
            "-a", "reference", "--jobs", str(jobs), *[a for m in MODELS for a in ("-m", m)],
            *[a for t in TESTS for a in ("-t", t)]]
    e = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    e.update(env or {})
    t0 = time.perf_counter()
    res = subprocess.run(args, cwd=specs.parent, capture_output=True, text=True, env=e, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"gripprobe run failed ({python}):\n{res.stderr[-3000:]}")
    return wall, Path(res.stdout.strip().splitlines()[-1])


def harness_ms_per_case(wall: float, run_dir: Path) -> tuple[float, int]:
    cases = [json.loads(p.read_text()) for p in run_dir.glob("cases/*/case.json")]
    agent = sum(ph["process"].get("duration_s") or 0.0 for c in cases for ph in c.get("phases", []))
    return (wall - agent) * 1000 / len(cases), len(cases)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--no-baseline", action="store_true")
    args = ap.parse_args(argv)

    current = Path(sys.executable)
    versions = {"current": (current, ROOT / "specs")}
    if not args.no_baseline:
        py = baseline_python(args.baseline)
        versions[f"baseline {args.baseline}"] = (py, py.parents[2] / "src" / "specs")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        lag_file = Path(tmp) / "lag.json"
        lags = []
        for i in range(args.rounds):
            gripprobe(current, ROOT / "specs", Path(tmp) / f"lag{i}", 4, {"GRIPPROBE_LOOP_LAG_FILE": str(lag_file)})
            lags.append(json.loads(lag_file.read_text()))
        p99 = statistics.median(x["p99_ms"] for x in lags)
        print(f"loop lag, --jobs 4, {len(MODELS) * len(TESTS)} cases, {args.rounds} runs: "
              f"p50 {statistics.median(x['p50_ms'] for x in lags):.2f} ms, p99 {p99:.2f} ms "
              f"(runs: {', '.join(format(x['p99_ms'], '.1f') for x in lags)}), max {max(x['max_ms'] for x in lags):.1f} ms; "
              f"target p99 <= {LAG_TARGET_MS:g} ms: {'met' if p99 <= LAG_TARGET_MS else 'MISSED'}")

        costs: dict[str, list[float]] = {name: [] for name in versions}
        walls: dict[str, list[float]] = {name: [] for name in versions}
        for i in range(args.rounds):
            order = list(versions) if i % 2 == 0 else list(reversed(versions))
            for name in order:
                python, specs = versions[name]
                wall, run_dir = gripprobe(python, specs, Path(tmp) / f"{name.split()[0]}{i}", 1)
                cost, n = harness_ms_per_case(wall, run_dir)
                costs[name].append(cost)
                walls[name].append(wall)
        for name in versions:
            med = statistics.median(costs[name])
            print(f"harness cost from outside, --jobs 1, {name}: {med:.0f} ms per case "
                  f"(runs: {', '.join(f'{c:.0f}' for c in costs[name])}; wall {statistics.median(walls[name]):.2f} s"
                  f" for {len(MODELS) * len(TESTS)} cases)")
        now = statistics.median(costs["current"])
        if len(versions) > 1:
            old = statistics.median(costs[next(n for n in versions if n != "current")])
            print(f"ratio current / baseline: {now / old:.2f}")
        print(f"target <= {COST_TARGET_MS:g} ms per case: {'met' if now <= COST_TARGET_MS else 'MISSED'}")
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The runner's event-loop lag, against an idle process sampling the same timer at the same moments.

The run's loop relays every proxied model call of every case at once, so its lag is added to the model
timings the proxy records. Its lag as sampled in the run (``GRIPPROBE_LOOP_LAG_FILE``: how late a 5 ms timer
fires) is mostly the machine's run queue on a busy 2-core machine, so the baseline is an **idle process run
side by side**: the same loop (runner/eventloop.py's choice, uvloop), the same 5 ms timer, the same GIL
switch interval, nothing else to do, started before the ``gripprobe run`` and stopped after it. Only its
samples taken while the runner's loop sampled count: the runner's window ends when it wrote its lag file
(the file's mtime) and lasts as long as its samples did (Σ period + lag). Each round runs both together;
p50 / p99 / max of each, and the runner's excess over the idle process (per round; median over rounds).

Run: 24 cases (reference agent × oracle perfect/lazy × 12 tests) at ``--jobs 4``; ``--quick``: 8 cases, one
round. Target: the runner's p99 excess over the idle process ≤ 10 ms (the project's loop-lag target, now on
what the runner adds).

    .venv/bin/python benchmarks/loop_lag.py [--quick] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (ROOT, Figure, Spread, add_contract_args, bench_env, gripprobe_cli, load1,  # noqa: E402
                    percentile, report, rounds_of)

TESTS = ("json_rank_from_file", "patch_file", "patch_file_prepared", "patch_file_shell", "python_file",
         "python_file_de", "python_file_simple", "save_file", "shell_date", "shell_file", "shell_pwd",
         "weekly_plan_next_week")
MODELS = ("oracle-perfect", "oracle-lazy")
JOBS = 4
TARGET_P99_EXCESS_MS = 10.0

IDLE = r"""
import asyncio, json, signal, sys, time
from gripprobe_core.runner import eventloop

out = sys.argv[1]
samples = []

async def main():
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    period = eventloop.LAG_PERIOD_S

    async def sample():
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(period)
            samples.append((time.time(), max(0.0, (time.perf_counter() - t0 - period) * 1000)))

    task = asyncio.ensure_future(sample())
    print("ready", flush=True)
    await done.wait()
    task.cancel()

sys.setswitchinterval(eventloop.SWITCH_INTERVAL_S)
eventloop.run(main())
with open(out, "w") as fh:
    json.dump({"period_ms": eventloop.LAG_PERIOD_S * 1000, "samples": samples}, fh)
"""


def stats(lags: list[float]) -> dict[str, float]:
    return {"p50": percentile(lags, 0.5), "p99": percentile(lags, 0.99), "max": max(lags) if lags else 0.0,
            "n": float(len(lags))}


def one_round(tmp: Path, r: int, models: tuple[str, ...], tests: tuple[str, ...]) -> tuple[dict, dict]:
    """One ``gripprobe run --jobs 4`` with its lag probe on, an idle sampler beside it: (runner, idle) stats."""
    lag_file, idle_file = tmp / f"lag-{r}.json", tmp / f"idle-{r}.json"
    env = bench_env()
    idle = subprocess.Popen([sys.executable, "-c", IDLE, str(idle_file)], env=env, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        assert idle.stdout is not None
        if idle.stdout.readline().strip() != "ready":
            raise SystemExit("the idle sampler did not start")
        argv = [*gripprobe_cli(), "run", "--specs", str(ROOT / "specs"), "--results", str(tmp / f"run-{r}"),
                "--jobs", str(JOBS), "-a", "reference", *[a for m in models for a in ("-m", m)],
                *[a for t in tests for a in ("-t", t)]]
        res = subprocess.run(argv, cwd=ROOT, env=bench_env({"GRIPPROBE_LOOP_LAG_FILE": str(lag_file)}),
                             capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise SystemExit(f"gripprobe run failed ({res.returncode}):\n{res.stderr[-3000:]}")
    finally:
        idle.send_signal(signal.SIGTERM)
        idle.wait(30)
    runner = json.loads(lag_file.read_text())
    lags = [float(x) for x in runner["lags_ms"]]
    end = os.stat(lag_file).st_mtime
    start = end - (len(lags) * runner["period_ms"] + sum(lags)) / 1000
    idle_samples = json.loads(idle_file.read_text())["samples"]
    window = [lag for t, lag in idle_samples if start <= t <= end]
    if not lags or not window:
        raise SystemExit(f"no samples to compare (runner {len(lags)}, idle in its window {len(window)})")
    return stats(lags), stats(window)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=3, quick_rounds=1)
    args = ap.parse_args(argv)
    rounds = rounds_of(args)
    models, tests = (MODELS, TESTS) if not args.quick else (MODELS, TESTS[:4])
    n = len(models) * len(tests)
    print(f"loop lag, --jobs {JOBS}, {n} cases, {rounds} round(s), an idle sampler side by side; load {load1():.2f}")
    runs: list[tuple[dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="gp-bench-") as tmp:
        for r in range(rounds):
            runner, idle = one_round(Path(tmp), r, models, tests)
            runs.append((runner, idle))
            print(f"round {r + 1}: runner p50/p99/max {runner['p50']:.2f} / {runner['p99']:.2f} / {runner['max']:.1f} ms "
                  f"({runner['n']:.0f} samples); idle {idle['p50']:.2f} / {idle['p99']:.2f} / {idle['max']:.1f} ms "
                  f"({idle['n']:.0f} samples); load {load1():.2f}", flush=True)
    figures = []
    for q in ("p50", "p99", "max"):
        runner_q = Spread.of(r[q] for r, _ in runs)
        idle_q = Spread.of(i[q] for _, i in runs)
        excess = Spread.of(r[q] - i[q] for r, i in runs)
        print(f"{q}: runner {runner_q.show('ms', 2)}; idle {idle_q.show('ms', 2)}; excess {excess.show('ms', 2)}")
        figures.append(Figure(f"loop_lag_{q}_excess", excess.median, "ms",
                              TARGET_P99_EXCESS_MS if q == "p99" else None, idle_q.median,
                              runner_q.median / idle_q.median if idle_q.median else None,
                              what=f"the runner's {q} lag minus the idle process's, median of {rounds} round(s)"))
    report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

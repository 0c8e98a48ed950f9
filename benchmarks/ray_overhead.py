"""What ``--executor ray`` adds to a case, against ``--executor local``, measured from outside.

The same oracle cases (reference agent × oracle profiles × the sanity tests × trials) run as whole
``gripprobe run`` commands (start-up, cluster join, every case, results and reports), timed from outside
the process, on a real two-node Ray cluster started on this machine (tests/raycluster.py: a head and a
second node, 2 CPUs each, every node a ``ray start`` of its own). Rounds alternate the baseline and the
subject (local, ray; then ray, local; ...):

* **per case** (the figure with a target): ``--executor local --jobs 1`` against ``--executor ray --jobs 1``
  (one case at a time on both sides), ``(ray − local − join) / cases`` from the medians; the join (a
  driver's ``ray.init`` + ``ray.shutdown``, what every Ray run pays once whatever its size) is timed alone
  in the same rounds and reported with and without. Target: ≤ 50 ms per case, join excluded.
* **throughput** (``--throughput``): cases per second with no in-flight cap on the two nodes against the
  local executor at ``--jobs 4``, for the CPU-bound oracle cases and for latency-bound ones
  (``oracle-slow-stream``: replies take time, as a model server's do).

Every figure is printed as min / median / max of the rounds, then one ``RESULT`` line per figure
(benchmarks/run_all.py collects them). ``--quick``: 12 cases, 2 rounds (CI smoke).

    .venv/bin/python benchmarks/ray_overhead.py [--rounds 3] [--quick] [--throughput]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TARGET_MS = 50.0
BROKEN = ("HARNESS_ERROR", "SHELL_ERROR")
"""Statuses none of these oracle cases gives when its agent really ran: a run with one is refused."""
SPECS = ["--specs", str(ROOT / "specs")]
FULL = (["-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy", "-m", "oracle-error-then-recover",
         "-m", "oracle-text-tools", "-t", "tag:sanity", "--trials", "2", *SPECS], 48)
QUICK = (["-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy", "-t", "tag:sanity", *SPECS], 12)
SLOW = (["-a", "reference", "-m", "oracle-slow-stream", "-t", "tag:sanity", "--trials", "4", *SPECS], 24)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    env.update(extra or {})
    return env


def timed_run(args: list[str], env: dict[str, str], selection: tuple[list[str], int]) -> float:
    """Wall seconds of one whole ``gripprobe run``, checked to have run every case."""
    sel, cases = selection
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", *sel, *args, "--results", out],
                           capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"run failed ({' '.join(args)}): {p.stderr[-3000:]}")
        run = Path(p.stdout.strip().splitlines()[-1])
        done = [json.loads(c.read_text())["verdict"]["status"] for c in (run / "cases").glob("*/case.json")]
        if len(done) != cases:
            raise SystemExit(f"{len(done)} of {cases} cases in {run}")
        broken = [s for s in done if s in BROKEN]  # agents that never ran properly: not a time to compare
        if broken:
            raise SystemExit(f"{len(broken)} of {cases} cases ended {sorted(set(broken))} ({' '.join(args)}): "
                             f"the run is broken, not timed")
        return wall


def join_cost(address: str, env: dict[str, str]) -> float:
    """Seconds a driver takes to join the cluster and leave it (what every Ray run pays once), from outside:
    the same interpreter start and ``import ray`` a run pays, minus the bare interpreter's start."""
    code = ("import logging, ray\n"
            f"ray.init(address={address!r}, _node_ip_address='127.0.0.1', logging_level=logging.ERROR, "
            "log_to_driver=False)\nray.shutdown()\n")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    joined = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return joined - (time.perf_counter() - t0)


def spread(xs: list[float], scale: float = 1.0, unit: str = "s") -> str:
    return (f"min {min(xs) * scale:7.2f} / median {statistics.median(xs) * scale:7.2f} / "
            f"max {max(xs) * scale:7.2f} {unit}")


def result(name: str, value: float, unit: str, target: float | None, baseline: float | None,
           ratio: float | None, load_1m: float, better: str = "lower") -> str:
    met = "" if target is None else (" MET" if (value <= target if better == "lower" else value >= target)
                                     else " MISSED")
    fmt = lambda v: "-" if v is None else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"  # noqa: E731
    return (f"RESULT {name} {value:.1f} {unit} target={fmt(target)} baseline={fmt(baseline)} "
            f"ratio={fmt(ratio)} load={load_1m:.2f}{met}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="12 cases, 2 rounds, no throughput (CI smoke)")
    ap.add_argument("--throughput", action="store_true", help="also cases per second with no in-flight cap")
    args = ap.parse_args(argv)
    from raycluster import new_cluster

    selection = QUICK if args.quick else FULL
    rounds = 2 if args.quick else args.rounds
    cases = selection[1]
    fig: dict[str, list[float]] = {k: [] for k in ("local", "ray", "join", "local4", "ray_all", "slow_local4",
                                                   "slow_ray_all")}
    loads: list[float] = []
    cluster = new_cluster()
    try:
        cluster.start({"bench": 1})
        cluster.add_node("two", {"bench": 1})
        cluster.wait_for()
        env = _env({k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")})
        ray = ["--executor", "ray", "--ray-address", cluster.address]
        timed_run(["--jobs", "1"], env, selection)  # warm-up of both: disk caches, the nodes' first workers
        timed_run(ray + ["--jobs", "1"], env, selection)
        for r in range(rounds):
            loads.append(load())
            order = [("local", ["--jobs", "1"]), ("ray", ray + ["--jobs", "1"])]
            for name, a in (order if r % 2 == 0 else order[::-1]):
                fig[name].append(timed_run(a, env, selection))
            fig["join"].append(join_cost(cluster.address, env))
            if args.throughput and not args.quick:
                order = [("local4", ["--jobs", "4"]), ("ray_all", ray)]
                for name, a in (order if r % 2 == 0 else order[::-1]):
                    fig[name].append(timed_run(a, env, selection))
                order = [("slow_local4", ["--jobs", "4"]), ("slow_ray_all", ray)]
                for name, a in (order if r % 2 == 0 else order[::-1]):
                    fig[name].append(timed_run(a, env, SLOW))
        loads.append(load())
    finally:
        cluster.stop()

    lo = statistics.median(loads)
    med = {k: statistics.median(v) for k, v in fig.items() if v}
    per_case = (med["ray"] - med["local"] - med["join"]) / cases * 1000
    with_join = (med["ray"] - med["local"]) / cases * 1000
    paired = [(r - l) / cases * 1000 for l, r in zip(fig["local"], fig["ray"])]
    print(f"{cases} oracle cases, {rounds} alternating round(s), whole commands timed from outside, "
          f"two-node cluster, load {min(loads):.2f}-{max(loads):.2f}:")
    print(f"  local --jobs 1        {spread(fig['local'])}  ({med['local'] / cases * 1000:.0f} ms/case)")
    print(f"  ray --jobs 1          {spread(fig['ray'])}  ({med['ray'] / cases * 1000:.0f} ms/case)")
    print(f"  cluster join + leave  {spread(fig['join'])}  (once per run)")
    print(f"  ray - local per case, paired by round: {spread(paired, unit='ms')}")
    print(f"  Ray's added cost per case: {per_case:+.1f} ms without the join, {with_join:+.1f} ms with it "
          f"(target <= {TARGET_MS:.0f} ms without); ratio ray/local {med['ray'] / med['local']:.2f}x")
    lines = [result("ray_added_per_case", per_case, "ms", TARGET_MS, med["local"] / cases * 1000,
                    med["ray"] / med["local"], lo),
             result("ray_added_per_case_with_join", with_join, "ms", None, med["local"] / cases * 1000,
                    med["ray"] / med["local"], lo),
             result("ray_join", med["join"] * 1000, "ms", None, None, None, lo)]
    if fig["ray_all"]:
        for name, base, n, label in (("ray_all", "local4", cases, "oracle cases"),
                                     ("slow_ray_all", "slow_local4", SLOW[1], "latency-bound cases")):
            print(f"  {label}: local --jobs 4 {spread(fig[base])}; ray, no cap, 2 nodes {spread(fig[name])}")
            rate, base_rate = n / med[name], n / med[base]
            lines.append(result(f"{name}_throughput", rate, "cases/s", None, base_rate, rate / base_rate, lo,
                                better="higher"))
    print("\n".join(lines))
    return 0 if per_case <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())

"""The Ray executor's cost per case against the local executor, and throughput with one node vs two.

The same 48 oracle cases (reference agent × 4 oracle profiles × the 6 sanity tests × 2 trials) run through
the real CLI, timed from outside the process (start-up, cluster join, every case, results and reports):

* **overhead**: ``--executor local --jobs 1`` against ``--executor ray --jobs 1`` on a one-node cluster
  (one case at a time on both sides, so the difference is what Ray adds to each case: task submission,
  the worker's own run folder, packing the case directory and writing it back). Printed per case with and
  without the one-off cluster join (a driver's ``ray.init`` + shutdown, timed alone). Target: ≤ 50 ms per
  case, join excluded.
* **throughput**: cases per second with no in-flight cap on a one-node cluster (head, 2 CPUs) and a
  two-node cluster (head + second node, 2 CPUs each) on this machine, and the local executor at
  ``--jobs 2`` and ``--jobs 4`` for comparison; then the same for 24 latency-bound cases
  (``oracle-slow-stream``: replies take time, as a model server's do). Every node is a real
  ``ray start`` (tests/raycluster.py).

Rounds alternate the order of the local and Ray runs.

    ./dev bench            # or: .venv/bin/python benchmarks/ray_overhead.py [--rounds 2]
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
SELECTION = ["-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy", "-m", "oracle-error-then-recover",
             "-m", "oracle-text-tools", "-t", "tag:sanity", "--trials", "2", "--specs", str(ROOT / "specs")]
CASES = 48
SLOW = ["-a", "reference", "-m", "oracle-slow-stream", "-t", "tag:sanity", "--trials", "4",
        "--specs", str(ROOT / "specs")]
SLOW_CASES = 24


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    env.update(extra or {})
    return env


def timed_run(args: list[str], env: dict[str, str], selection: list[str] = SELECTION, cases: int = CASES) -> float:
    """Wall seconds of one whole ``gripprobe run``, checked to have run every case."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", *selection, *args, "--results", out],
                           capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"run failed ({' '.join(args)}): {p.stderr[-3000:]}")
        run = Path(p.stdout.strip().splitlines()[-1])
        done = len(list((run / "cases").glob("*/case.json")))
        if done != cases:
            raise SystemExit(f"{done} of {cases} cases in {run}")
        return wall


def join_cost(address: str, env: dict[str, str]) -> float:
    """Seconds a driver takes to join the cluster and leave it (what every Ray run pays once)."""
    code = ("import logging, time, ray\nt=time.perf_counter()\n"
            f"ray.init(address={address!r}, _node_ip_address='127.0.0.1', logging_level=logging.ERROR, "
            "log_to_driver=False)\nray.shutdown()\nprint(time.perf_counter()-t)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from raycluster import new_cluster

    cluster = new_cluster()
    figures: dict[str, list[float]] = {k: [] for k in ("local1", "ray1", "join", "local2", "local4", "one", "two",
                                                        "slow_one", "slow_two")}
    try:
        cluster.start({"bench": 1})
        cluster.wait_for()
        env = _env({k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")})
        ray = ["--executor", "ray", "--ray-address", cluster.address]
        timed_run(ray + ["--jobs", "1"], env)  # warm-up: the node's worker processes and imports
        for r in range(args.rounds):
            order = [("local1", ["--jobs", "1"]), ("ray1", ray + ["--jobs", "1"])]
            for name, a in (order if r % 2 == 0 else order[::-1]):
                figures[name].append(timed_run(a, env))
            figures["join"].append(join_cost(cluster.address, env))
            figures["one"].append(timed_run(ray, env))
            figures["local2"].append(timed_run(["--jobs", "2"], env))
            figures["local4"].append(timed_run(["--jobs", "4"], env))
            figures["slow_one"].append(timed_run(ray, env, SLOW, SLOW_CASES))
        cluster.add_node("second", {"bench": 1})
        cluster.wait_for()
        timed_run(ray, env)  # warm-up of the second node
        for _ in range(args.rounds):
            figures["two"].append(timed_run(ray, env))
            figures["slow_two"].append(timed_run(ray, env, SLOW, SLOW_CASES))
    finally:
        cluster.stop()

    med = {k: statistics.median(v) for k, v in figures.items()}
    per_case = (med["ray1"] - med["local1"]) / CASES * 1000
    per_case_no_join = (med["ray1"] - med["join"] - med["local1"]) / CASES * 1000
    print(f"{CASES} oracle cases, {args.rounds} round(s), medians of whole commands (wall, from outside):")
    print(f"  local --jobs 1            {med['local1']:6.2f} s  ({med['local1'] / CASES * 1000:5.0f} ms/case)")
    print(f"  ray one node, --jobs 1    {med['ray1']:6.2f} s  ({med['ray1'] / CASES * 1000:5.0f} ms/case)")
    print(f"  cluster join + leave      {med['join']:6.2f} s  (once per run)")
    print(f"  Ray overhead per case: {per_case:+.1f} ms with the join, {per_case_no_join:+.1f} ms without "
          f"(target <= {TARGET_MS:.0f} ms): {'OK' if per_case_no_join <= TARGET_MS else 'OVER'}; ratio ray/local "
          f"{med['ray1'] / med['local1']:.2f}x")
    print("throughput (cases per second, no in-flight cap on Ray):")
    for name, label in (("local2", "local --jobs 2"), ("local4", "local --jobs 4"),
                        ("one", "ray, 1 node (2 CPUs)"), ("two", "ray, 2 nodes (2 CPUs each)")):
        print(f"  {label:28} {CASES / med[name]:5.2f} /s  ({med[name]:6.2f} s)")
    print(f"  two nodes vs one: {med['one'] / med['two']:.2f}x (this machine has {os.cpu_count()} cores: "
          f"the agent and oracle processes of these cases compete for them)")
    print(f"latency-bound ({SLOW_CASES} cases on oracle-slow-stream, whose replies take time the way a model "
          f"server's do):")
    print(f"  ray, 1 node                  {SLOW_CASES / med['slow_one']:5.2f} /s  ({med['slow_one']:6.2f} s)")
    print(f"  ray, 2 nodes                 {SLOW_CASES / med['slow_two']:5.2f} /s  ({med['slow_two']:6.2f} s)")
    print(f"  two nodes vs one: {med['slow_one'] / med['slow_two']:.2f}x")
    print(json.dumps({"figures": figures, "per_case_ms": per_case, "per_case_ms_without_join": per_case_no_join}))
    return 0 if per_case_no_join <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())

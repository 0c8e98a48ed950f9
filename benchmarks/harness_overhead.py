"""Harness overhead per case: case wall time minus the agent processes' own run time.

Runs 20 real cases (reference agent × oracle perfect/lazy × 10 tests) through the real runner, then prints
the median and p90 overhead per case, with two baselines measured in the same run: the agent's own time per
case, and the cost of merely spawning a Python process. Target: median overhead < 150 ms per case.

    ./dev bench            # or: .venv/bin/python benchmarks/harness_overhead.py [--cases 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 150.0


def spawn_baseline_ms(n: int = 10) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=20)
    args = ap.parse_args(argv)

    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    gpm = make_plugin_manager()
    specs = load_specs(ROOT / "specs", registry=gpm.registry)
    # Tests that need nothing but the reference agent's own tools, sorted for repeatability.
    tests = sorted(t.id for t in specs.tests.values() if t.challenge is None)
    per_model = max(1, args.cases // 2)
    cases = plan_cases(specs, agents=["reference"], models=["oracle-perfect", "oracle-lazy"],
                       tests=tests[:per_model])[: args.cases]
    with tempfile.TemporaryDirectory() as out:
        outcome = execute_run(cases, gpm, RunSettings(results_root=Path(out), jobs=1))
    overhead, agent = [], []
    for r in outcome.results:
        agent_s = sum(p.process.duration_s for p in r.phases)
        agent.append(agent_s * 1000)
        overhead.append((r.duration_s - agent_s) * 1000)
    spawn = spawn_baseline_ms()
    med = statistics.median(overhead)
    p90 = sorted(overhead)[max(0, int(len(overhead) * 0.9) - 1)]
    print(f"cases: {len(overhead)} (statuses: {outcome.counts})")
    print(f"harness overhead per case: median {med:.1f} ms, p90 {p90:.1f} ms, max {max(overhead):.1f} ms")
    print(f"baseline, agent's own time per case (2 phases): median {statistics.median(agent):.1f} ms "
          f"-> overhead/agent = {med / statistics.median(agent):.2f}")
    print(f"baseline, bare python spawn: {spawn:.1f} ms -> overhead/spawn = {med / spawn:.2f}")
    ok = med < TARGET_MS
    print(f"target: median < {TARGET_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

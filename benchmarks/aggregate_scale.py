"""Aggregate scale: `gripprobe aggregate-reports` over 10,000 synthetic cases in 20 runs.

Writes valid CaseResult dumps (5 agents × 2 versions, 8 models, 2 formats, 18 tests, 2 hardware profiles,
every status) into a temporary results root — generation is not timed — then runs the real command in a
child process and prints its wall time and peak memory (the child's own ru_maxrss), with two baselines
measured in the same run, each in its own child: merely json-loading every case.json, and starting Python
and importing the CLI. Target: <= 10 s wall and <= 500 MB peak.

    .venv/bin/python benchmarks/aggregate_scale.py [--cases 10000] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 10.0
TARGET_MB = 500.0
STATUS_WEIGHTS = {"PASS": 40, "PASS_WITH_POLICY_VIOLATION": 10, "FAIL": 15, "NO_TOOL_CALL": 15, "TIMEOUT": 5,
                  "TOOL_UNSUPPORTED": 3, "SHELL_ERROR": 4, "HARNESS_ERROR": 3, "SKIPPED": 5}

# Each child prints one JSON line last: its own time for the measured step and its peak RSS.
CHILD_AGGREGATE = """
import json, resource, sys, time
t0 = time.perf_counter()
from gripprobe_core.cli.main import main
try:
    main(["aggregate-reports", "--runs-root", sys.argv[1], "--output", sys.argv[2]])
except SystemExit as exc:
    rc = exc.code
print(json.dumps({"rc": rc, "s": time.perf_counter() - t0,
                  "kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
CHILD_JSON_LOAD = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
n = sum(1 for p in Path(sys.argv[1]).glob("runs/*/cases/*/case.json") if json.loads(p.read_bytes()))
print(json.dumps({"rc": 0, "n": n, "s": time.perf_counter() - t0,
                  "kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
CHILD_IMPORT = """
import json, resource, time
t0 = time.perf_counter()
import gripprobe_core.cli.main, gripprobe_core.reports.aggregate, gripprobe_core.reports.html
print(json.dumps({"rc": 0, "s": time.perf_counter() - t0,
                  "kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def template() -> dict:
    """One realistic case.json (two phases, command lines, validators), as a JSON-ready dict."""
    from gripprobe_core.models import (
        CaseKey, CaseResult, PhaseRecord, ProcessResult, TelemetrySummary, ValidatorResult, Verdict)

    summary = TelemetrySummary(event_capture_status="collected", telemetry_proxy_status="collected",
                               telemetry_source_tier="A", telemetry_event_count=6, telemetry_tool_call_count=1,
                               telemetry_tool_result_count=1, telemetry_invoked_confidence=1.0,
                               tool_event_verdict="confirmed_tool_use", tool_event_verdict_reason="none",
                               tool_kinds_observed=["write"], tiers_present=["A", "B"])
    phases = [PhaseRecord(phase=ph, summary=summary, process=ProcessResult(
        status="ok", exit_code=0, duration_s=1.234, started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:00:01.234Z", stdout_bytes=2048, stderr_bytes=64,
        command=["/opt/agents/bin/agent", "--base-url", "http://127.0.0.1:40000/v1", "--model", "m",
                 "--workspace", f"/tmp/results/runs/R/cases/C/{ph}/workspace", "--prompt", "Write the file. " * 20]),
        proxy={"mode": "auto", "status": "collected", "record": f"proxy.{ph}.http.jsonl"})
        for ph in ("warmup", "measured")]
    verdict = Verdict(status="PASS", evaluator_reason_code="none", evaluator_reason_text="validators passed",
                      failure_reason=None, trajectory="clean", invoked="yes", artifact_match=1.0,
                      tool_invocation_match=1.0, protocol_match=1.0, strict_pass_score=1.0, overall_score=1.0,
                      tool_event_verdict="confirmed_tool_use", tool_event_verdict_reason="none")
    case = CaseResult(run_id="R", case_id="C", key=CaseKey(agent="a", model="m", backend="b", format="tool", test="t"),
                      tags=["sanity"], started_at="2026-01-01T00:00:00.000Z", finished_at="2026-01-01T00:00:03.000Z",
                      duration_s=3.0, run_values={"today": "2026-01-01"}, phases=phases, verdict=verdict,
                      telemetry=summary,
                      validators=[ValidatorResult(kind="file_equals", passed=True, expected="Hello\n" * 5,
                                                  observed="Hello\n" * 5, message="ok")])
    return case.model_dump(mode="json")


def generate(root: Path, cases: int, runs: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    base = template()
    agents = [(f"agent-{i}", f"{i}.{v}.0") for i in range(5) for v in range(2)]
    models = [(f"model-{i}", "sha256:" + f"{i:02d}" * 32) for i in range(8)]
    tests = [f"test_{i:02d}" for i in range(18)]
    statuses, weights = list(STATUS_WEIGHTS), list(STATUS_WEIGHTS.values())
    per_run = -(-cases // runs)
    written = 0
    for r in range(runs):
        run_id = f"20260101T{r:02d}0000Z"
        run_dir = root / "runs" / run_id
        (run_dir / "cases").mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps({
            "run_id": run_id, "status": "complete", "started_at": "2026-01-01T00:00:00.000Z", "suite": "scale",
            "hardware_profile": "ci-2core" if r % 2 else "gpu-box"}))
        for i in range(min(per_run, cases - written)):
            (agent, version), (model, digest) = rng.choice(agents), rng.choice(models)
            fmt, test, status = rng.choice(("tool", "text")), rng.choice(tests), rng.choices(statuses, weights)[0]
            case_id = f"{agent}__{model}__oracle__{fmt}__{test}__{i}"
            d = dict(base, run_id=run_id, case_id=case_id, agent_version=version, model_hash=digest,
                     key={"agent": agent, "model": model, "backend": "oracle", "format": fmt, "test": test},
                     verdict=dict(base["verdict"], status=status, strict_pass_score=float(status == "PASS"),
                                  overall_score={"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}.get(status, 0.0)))
            (run_dir / "cases" / case_id).mkdir()
            (run_dir / "cases" / case_id / "case.json").write_text(json.dumps(d, indent=2))
            written += 1


def child(code: str, *args: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"child failed ({res.returncode}): {res.stderr[-2000:]}")
    return wall, json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "results", Path(tmp) / "aggregate"
        t0 = time.perf_counter()
        generate(root, args.cases, args.runs)
        gen_s = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in root.glob("runs/*/cases/*/case.json")) / 2**20
        print(f"generated {args.cases} case.json files ({size_mb:.1f} MB) in {args.runs} runs in {gen_s:.1f} s "
              f"(not timed)")
        imp_wall, imp = child(CHILD_IMPORT)
        load_wall, load = child(CHILD_JSON_LOAD, str(root))
        agg_wall, agg = child(CHILD_AGGREGATE, str(root), str(out))
        if agg["rc"] not in (0, None):
            sys.exit(f"aggregate-reports exited {agg['rc']}")
        data = json.loads((out / "aggregate.json").read_text())
        seen = sum(sum(r["counts"].values()) for r in data["rows"])
        assert seen == args.cases == load["n"], (seen, load["n"])
        html_kb = (out / "index.html").stat().st_size / 1024

    agg_mb, load_mb, imp_mb = agg["kb"] / 1024, load["kb"] / 1024, imp["kb"] / 1024
    print(f"aggregate-reports: {agg_wall:.2f} s wall (child process, incl. startup; {agg['s']:.2f} s in the "
          f"command), peak RSS {agg_mb:.0f} MB; {len(data['rows'])} rows × {len(data['tests'])} tests, "
          f"index.html {html_kb:.0f} KB")
    print(f"baseline, json.loads of every case.json: {load_wall:.2f} s wall ({load['s']:.2f} s reading), "
          f"peak RSS {load_mb:.0f} MB -> aggregate/baseline = {agg_wall / load_wall:.2f}x time, "
          f"{agg_mb / load_mb:.2f}x memory")
    print(f"baseline, python start + CLI imports: {imp_wall:.2f} s wall, peak RSS {imp_mb:.0f} MB")
    ok = agg_wall <= TARGET_S and agg_mb <= TARGET_MB
    print(f"target: <= {TARGET_S:.0f} s and <= {TARGET_MB:.0f} MB peak: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

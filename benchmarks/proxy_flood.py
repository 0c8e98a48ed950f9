"""A record flood through a whole `gripprobe run`: flat memory, a capped record file, every call answered.

An agent (a script declared as an agent spec, run by the reference plugin, sandboxed as usual) sends
model calls of 250 KB each to its own base URL (the recording proxy) from 8 connections at once,
against the embedded oracle (`lazy`). Each round runs, alternating, a **baseline** (the same agent making
15 calls), **half** the flood (750 calls) and the **flood** (1,500 calls; ``--quick``: 300, one round),
each a separate `gripprobe run` process whose memory is sampled from outside every 20 ms
(``/proc/<pid>/status``: the harness process's VmRSS and VmHWM, the kernel's peak, and its recorder child's
separately). Figures, median over rounds (min / median / max printed): the harness's peak growth under the
flood over the baseline's (target ≤ 64 MiB), the flood's peak over half the flood's (target ≤ 1.1: twice
the calls cost nothing more), the recorder's peak, the record file (target ≤ its cap, 32 MiB), the calls
not answered 200 (target 0, the worst round), the agent's time per call and the run's wall time, each
against the baseline.

    ./dev bench            # or: .venv/bin/python benchmarks/proxy_flood.py [--quick] [--rounds 3] [--calls 1500]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (ROOT, Figure, MemorySampler, Spread, add_contract_args, bench_env, child_pids,  # noqa: E402
                    cmdline_has, gripprobe_cli, load1, missed, report, rounds_of)

TARGET_GROWTH_MB = 64.0
TARGET_FLAT = 1.10
RECORD_CAP_MB = 32.0

AGENT = r'''
import http.client, json, os, sys, threading, time
from urllib.parse import urlsplit

CALLS, SIZE, WORKERS = {calls}, {size}, 8


def main():
    args, argv = {{}}, sys.argv[1:]
    for i in range(0, len(argv) - 1, 2):
        args[argv[i][2:].replace("-", "_")] = argv[i + 1]
    ws = args.get("workspace", os.getcwd())
    if "warmup" in ws.split(os.sep):
        print(json.dumps({{"type": "final", "text": "warmup"}}))
        return 0
    u = urlsplit(args["base_url"])
    path = u.path.rstrip("/") + "/chat/completions"
    body = json.dumps({{"model": args["model"], "messages": [{{"role": "user",
                       "content": "hello world " * (SIZE // 12)}}]}}).encode()
    todo, lock, out = list(range(CALLS)), threading.Lock(), {{}}

    def work():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            try:
                conn.request("POST", path, body=body, headers={{"Content-Type": "application/json"}})
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except Exception as exc:
                status = type(exc).__name__
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            with lock:
                out[str(status)] = out.get(str(status), 0) + 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({{"type": "flood.report", "statuses": out, "seconds": round(time.monotonic() - t0, 4)}}))
    print(json.dumps({{"type": "final", "text": "done"}}))
    return 0


sys.exit(main())
'''

TEST = """id: hello
title: Create hello.txt
prompt: Create a file named hello.txt holding exactly the text "hello world" (one line).
requires: [write]
tags: [sanity]
validators:
  - kind: file_equals
    path: hello.txt
    expected: "hello world\\n"
reference:
  - write: {path: hello.txt, content: "hello world\\n"}
"""


def _specs(root: Path, calls: int, size: int) -> Path:
    specs = root / "specs"
    for kind in ("models", "cli_agents", "tests", "suites"):
        (specs / kind).mkdir(parents=True, exist_ok=True)
    (specs / "models" / "oracle-lazy.yaml").write_text((ROOT / "specs/models/oracle-lazy.yaml").read_text())
    (specs / "tests" / "hello.yaml").write_text(TEST)
    exe = root / f"flood-{calls}"
    exe.write_text(f"#!{sys.executable}\n" + AGENT.format(calls=calls, size=size))
    exe.chmod(0o755)
    (specs / "cli_agents" / "flood.yaml").write_text(
        f"id: flood\nplugin: reference\nexecutable: {json.dumps(str(exe))}\nformats: [tool]\n"
        f"tool_kinds: [execute, read, write]\ntimeout_s: 120\ntelemetry_proxy_mode: auto\n")
    (specs / "suites" / "default.yaml").write_text(
        "id: default\ntitle: flood\nagents: [flood]\nmodels: [oracle-lazy]\ntests: [hello]\n")
    return specs


def _recorder(pid: int) -> int | None:
    """The child of ``pid`` running the proxy's recorder process, if any."""
    return next((c for c in child_pids(pid) if cmdline_has(c, b"gripprobe_core.proxy.recorder")), None)


def run_once(calls: int, size: int, sandbox: str, tmp: Path, label: str) -> dict:
    root = tmp / label
    root.mkdir()
    specs = _specs(root, calls, size)
    argv = [*gripprobe_cli(), "run", "--specs", str(specs), "--results", str(root / "results"), "-a", "flood",
            "-m", "oracle-lazy", "-t", "hello", "--no-install", "--sandbox", sandbox, "--timeout", "120"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=root, env=bench_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)

    def pids() -> dict[str, int]:
        rec = _recorder(proc.pid)
        return {"harness": proc.pid, **({"recorder": rec} if rec else {})}

    with MemorySampler(pids) as sampler:
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"gripprobe run failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    run_dir = Path(out.decode().strip().splitlines()[-1])
    [case] = list(run_dir.glob("cases/*"))
    data = json.loads((case / "case.json").read_text())
    measured = next(p for p in data["phases"] if p["phase"] == "measured")
    record = case / "artifacts" / "proxy.measured.http.jsonl"
    report_line: dict = {}
    for line in (case / "measured.stdout").read_text().splitlines():
        obj = json.loads(line) if line.startswith("{") else {}
        if obj.get("type") == "flood.report":
            report_line = obj
    statuses = report_line.get("statuses") or {}
    if not report_line or sum(statuses.values()) != calls:
        raise SystemExit(f"{label}: the agent reported {statuses or 'nothing'} for {calls} calls")
    return {"calls": calls, "wall_s": wall, "harness_mb": sampler.peak_mib("harness"),
            "recorder_mb": sampler.peak_mib("recorder"),
            "record_mb": record.stat().st_size / 2**20 if record.exists() else 0.0,
            "records": (measured.get("proxy") or {}).get("records"), "statuses": statuses,
            "failed": sum(n for status, n in statuses.items() if status != "200"),
            "agent_s": float(report_line.get("seconds") or 0.0), "status": data["verdict"]["status"]}


def figures(rows: list[dict[str, dict]]) -> list[Figure]:
    """The figures of the rounds (each round: its baseline, half and flood runs)."""
    n = len(rows)

    def spread(key: str, arm: str = "flood") -> Spread:
        return Spread.of(r[arm][key] for r in rows)

    growth = Spread.of(r["flood"]["harness_mb"] - r["baseline"]["harness_mb"] for r in rows)
    flat = Spread.of(r["flood"]["harness_mb"] / r["half"]["harness_mb"] for r in rows)
    per_call = {arm: Spread.of(r[arm]["agent_s"] * 1000 / r[arm]["calls"] for r in rows)
                for arm in ("baseline", "flood")}
    for arm in ("baseline", "half", "flood"):
        print(f"{arm:8} peak harness {spread('harness_mb', arm).show('MiB')}, "
              f"recorder {spread('recorder_mb', arm).show('MiB')}, record file {spread('record_mb', arm).show('MiB')}, "
              f"run {spread('wall_s', arm).show('s')}")
    print(f"harness peak growth, flood over baseline: {growth.show('MiB')}; flood / half: {flat.show('x', 2)}; "
          f"agent ms per call: {per_call['flood'].show('ms', 2)} against {per_call['baseline'].show('ms', 2)}")
    base_h, base_rec = spread("harness_mb", "baseline").median, spread("recorder_mb", "baseline").median
    flood_h, flood_rec = spread("harness_mb").median, spread("recorder_mb").median
    half_h, base_file = spread("harness_mb", "half").median, spread("record_mb", "baseline").median
    base_wall, base_call = spread("wall_s", "baseline").median, per_call["baseline"].median

    def r(a: float, b: float) -> float | None:
        return a / b if b else None

    return [
        Figure("flood_harness_growth", growth.median, "MiB", TARGET_GROWTH_MB, base_h, r(flood_h, base_h),
               what=f"the harness's peak under the flood minus the baseline's, median of {n}"),
        Figure("flood_flat", flat.median, "x", f"<={TARGET_FLAT:g}", half_h, flat.median,
               what="the harness's peak under the flood / under half of it (baseline: half's peak, MiB)"),
        Figure("flood_recorder_peak", flood_rec, "MiB", None, base_rec, r(flood_rec, base_rec),
               what="the recorder's peak under the flood against the baseline's"),
        Figure("flood_record_file", spread("record_mb").median, "MiB", RECORD_CAP_MB, base_file,
               r(spread("record_mb").median, base_file), what="the phase's record file against its cap"),
        Figure("flood_calls_failed", max(x["flood"]["failed"] for x in rows), "calls", 0,
               max(x["baseline"]["failed"] for x in rows), None,
               what="calls of the flood not answered 200, the worst round"),
        Figure("flood_ms_per_call", per_call["flood"].median, "ms", None, base_call,
               r(per_call["flood"].median, base_call), what="the agent's time per call, 8 connections"),
        Figure("flood_run_s", spread("wall_s").median, "s", None, base_wall, r(spread("wall_s").median, base_wall),
               what="the whole gripprobe run's wall time against the baseline's"),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=3, quick_rounds=1)
    ap.add_argument("--calls", type=int, default=None, help="calls of the flood (1500; --quick 300); half: half")
    ap.add_argument("--baseline-calls", type=int, default=15)
    ap.add_argument("--size", type=int, default=250_000, help="bytes per request body")
    ap.add_argument("--sandbox", default="auto")
    args = ap.parse_args(argv)
    calls = args.calls if args.calls is not None else (300 if args.quick else 1500)
    rounds = rounds_of(args)
    arms = {"baseline": args.baseline_calls, "half": calls // 2, "flood": calls}
    print(f"cores: {os.cpu_count()}; load {load1():.2f}; {args.size // 1000} KB per call, 8 connections; "
          f"sandbox {args.sandbox}; {rounds} round(s) of " + ", ".join(f"{k} {v}" for k, v in arms.items()), flush=True)
    rows: list[dict[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="gp-flood-") as tmp:
        for i in range(rounds):
            row = {arm: run_once(n, args.size, args.sandbox, Path(tmp), f"{arm}-{i}") for arm, n in arms.items()}
            rows.append(row)
            for arm, x in row.items():
                print(f"  round {i + 1} {arm:8} {x['calls']:5} calls: answered {x['statuses']} in {x['agent_s']} s "
                      f"(run {x['wall_s']:.1f} s); peak harness {x['harness_mb']:.0f} MiB, recorder "
                      f"{x['recorder_mb']:.0f} MiB; record file {x['record_mb']:.1f} MiB; records {x['records']}; "
                      f"case {x['status']}", flush=True)
            print(f"  load {load1():.2f}", flush=True)
    figs = figures(rows)
    report(figs)
    return 1 if missed(figs) else 0


if __name__ == "__main__":
    sys.exit(main())

"""A record flood through a whole `gripprobe run`: flat memory, a capped record file.

An agent (a script declared as an agent spec, run by the reference plugin, sandboxed as usual) sends
model calls of 250 KB each to its own base URL (the recording proxy) from 8 connections at once,
against the embedded oracle (`lazy`). The same run of the benchmark measures a **baseline** (the same
agent making 15 calls), **half** the flood (750 calls) and the **flood** (1,500 calls), each a separate
`gripprobe run` process whose resident memory is sampled from outside every 20 ms (`/proc/<pid>/status`:
the harness process, and its recorder child separately), and prints the figures and the ratios to the
baseline. Targets: memory flat, i.e. the harness's peak RSS under the flood within 64 MB of the
baseline's and no more than under half of it (+10 %: twice the calls cost nothing more), and the phase's
record file within its cap (32 MiB).

    ./dev bench            # or: .venv/bin/python benchmarks/proxy_flood.py [--calls 1500] [--size 250000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    print(json.dumps({{"type": "flood.report", "statuses": out, "seconds": round(time.monotonic() - t0, 2)}}))
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


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _recorders(pid: int) -> list[int]:
    """Children of ``pid`` running the proxy's recorder process."""
    out = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for c in children:
        try:
            if b"gripprobe_core.proxy.recorder" in Path(f"/proc/{c}/cmdline").read_bytes():
                out.append(int(c))
        except OSError:
            continue
    return out


def run_once(calls: int, size: int, sandbox: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="gp-flood-") as d:
        root = Path(d)
        specs = _specs(root, calls, size)
        argv = [sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(specs), "--results",
                str(root / "results"), "-a", "flood", "-m", "oracle-lazy", "-t", "hello", "--no-install",
                "--sandbox", sandbox, "--timeout", "120"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        peak = {"harness": 0.0, "recorder": 0.0}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak["harness"] = max(peak["harness"], _rss_mb(proc.pid))
                peak["recorder"] = max([peak["recorder"], *(_rss_mb(r) for r in _recorders(proc.pid))])
                done.wait(0.02)

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        out, err = proc.communicate()
        done.set()
        watcher.join()
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"gripprobe run failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
        run_dir = Path(out.decode().strip().splitlines()[-1])
        [case] = list(run_dir.glob("cases/*"))
        data = json.loads((case / "case.json").read_text())
        measured = next(p for p in data["phases"] if p["phase"] == "measured")
        record = case / "artifacts" / "proxy.measured.http.jsonl"
        report = {}
        for line in (case / "measured.stdout").read_text().splitlines():
            obj = json.loads(line) if line.startswith("{") else {}
            if obj.get("type") == "flood.report":
                report = obj
        return {"calls": calls, "wall_s": wall, "harness_mb": peak["harness"], "recorder_mb": peak["recorder"],
                "record_mb": record.stat().st_size / 2**20 if record.exists() else 0.0,
                "records": (measured.get("proxy") or {}).get("records"), "statuses": report.get("statuses"),
                "agent_s": report.get("seconds"), "status": data["verdict"]["status"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--baseline-calls", type=int, default=15)
    ap.add_argument("--size", type=int, default=250_000, help="bytes per request body")
    ap.add_argument("--sandbox", default="auto")
    args = ap.parse_args(argv)
    print(f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; {args.size // 1000} KB per call, "
          f"8 connections; sandbox {args.sandbox}", flush=True)
    rows = [run_once(n, args.size, args.sandbox) for n in (args.baseline_calls, args.calls // 2, args.calls)]
    for name, r in zip(("baseline", "half", "flood"), rows):
        print(f"  {name:8} {r['calls']:5} calls: answered {r['statuses']} in {r['agent_s']} s (run {r['wall_s']:.1f} s); "
              f"peak RSS harness {r['harness_mb']:.0f} MB, recorder {r['recorder_mb']:.0f} MB; "
              f"record file {r['record_mb']:.1f} MiB; records {r['records']}; case {r['status']}", flush=True)
    base, half, flood = rows
    for name, r in (("half", half), ("flood", flood)):
        ratio = r["harness_mb"] / base["harness_mb"] if base["harness_mb"] else float("inf")
        rec_ratio = r["recorder_mb"] / base["recorder_mb"] if base["recorder_mb"] else float("inf")
        print(f"ratios {name}/baseline: calls {r['calls'] / base['calls']:.0f}x; peak RSS harness {ratio:.2f}, "
              f"recorder {rec_ratio:.2f}; record file {r['record_mb'] / max(base['record_mb'], 1e-9):.1f}")
    growth = flood["harness_mb"] - base["harness_mb"]
    flat = flood["harness_mb"] / half["harness_mb"] if half["harness_mb"] else float("inf")
    checks = [(f"harness peak RSS growth under the flood <= {TARGET_GROWTH_MB:.0f} MB", f"{growth:.0f} MB",
               growth <= TARGET_GROWTH_MB),
              (f"flood peak / half-flood peak <= {TARGET_FLAT}", f"{flat:.2f}", flat <= TARGET_FLAT),
              (f"record file <= {RECORD_CAP_MB:.0f} MiB", f"{flood['record_mb']:.1f} MiB",
               flood["record_mb"] <= RECORD_CAP_MB)]
    for what, got, ok in checks:
        print(f"target {what}: {got} -> {'met' if ok else 'NOT met'}")
    met = all(ok for *_, ok in checks)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

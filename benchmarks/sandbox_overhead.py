"""The sandbox's added cost per phase: the same cases run with --sandbox bwrap and --sandbox none.

Runs 20 real cases (40 phases: reference agent × oracle perfect/lazy × 10 tests) through the real CLI once per
mode and round, alternating which mode goes first, and pairs each phase with its unsandboxed twin:
the added cost is the median of (agent process time under bwrap − the same phase's time without), plus
what a sandboxed phase spends outside its process: starting and closing its network bridge (the Unix
sockets behind its own network namespace, runner/netbridge.py), measured on its own. Also printed,
measured in the same run: the whole command's wall time per case in each mode (what a user waits for,
including the workspace copy, evidence digests and reports), and the bare cost of starting a process under
bwrap (its own PID and network namespaces, GripProbe's init as PID 1, with and without a forwarded port)
against starting it directly, and what the sandbox's network adds to a request's round trip (the init's relay,
the Unix socket, the harness's bridge). Target: median added cost ≤ 20 ms per phase.

    ./dev bench            # or: .venv/bin/python benchmarks/sandbox_overhead.py [--cases 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 20.0


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} ms (p90 {sorted(values)[int(0.9 * (len(values) - 1))]:.1f})"


def bare_start_ms(n: int = 20) -> dict[str, float]:
    """Medians: /bin/true directly; under the sandbox's full bwrap command line; the same with one forwarded
    port (its bridge started, the process run, the bridge closed); the bridge alone (started and closed)."""
    import asyncio

    from gripprobe_core.runner.netbridge import NetBridge
    from gripprobe_core.runner.sandbox import resolve_sandbox

    box = resolve_sandbox("bwrap")

    def median_ms(fn) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    async def bridged(ws: Path, run: bool) -> None:
        async with NetBridge([40000]) as bridge:
            if run:
                argv = box.wrap(["/bin/true"], cwd=ws, rw=[ws], forwards=bridge.forwards)
                proc = await asyncio.create_subprocess_exec(*argv)
                await proc.wait()

    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        wrapped = box.wrap(["/bin/true"], cwd=ws, rw=[ws])
        return {"direct": median_ms(lambda: subprocess.run(["/bin/true"], check=True)),
                "bwrap": median_ms(lambda: subprocess.run(wrapped, check=True)),
                "bwrap+forward": median_ms(lambda: asyncio.run(bridged(ws, True))),
                "bridge": median_ms(lambda: asyncio.run(bridged(ws, False))) - median_ms(lambda: asyncio.run(asyncio.sleep(0)))}


CLIENT = r"""
import json, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
req = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode()
times = []
for _ in range(n):
    t0 = time.perf_counter()
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf or not buf.endswith(b"ok"):
        buf += s.recv(65536)
    times.append((time.perf_counter() - t0) * 1000)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def request_latency_ms(n: int = 500) -> tuple[float, float]:
    """Median round trip of a small HTTP request on a kept-alive connection: from a process on the host
    straight to a server on 127.0.0.1, and from inside the sandbox through its network (the init's relay,
    the Unix socket, the harness's bridge)."""
    import asyncio

    from aiohttp import web

    from gripprobe_core.runner.netbridge import NetBridge
    from gripprobe_core.runner.sandbox import resolve_sandbox

    box = resolve_sandbox("bwrap")

    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    async def main() -> tuple[float, float]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", ok)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async def client(argv: list[str]) -> float:
                proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
                out, _ = await proc.communicate()
                return float(out)
            argv = [sys.executable, "-c", CLIENT, str(port), str(n)]
            direct = await client(argv)
            with tempfile.TemporaryDirectory() as d:
                async with NetBridge([port]) as bridge:
                    boxed = await client(box.wrap(argv, cwd=Path(d), rw=[Path(d)], forwards=bridge.forwards))
            return direct, boxed
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def run_once(mode: str, tests: list[str], out: Path) -> tuple[float, dict[tuple[str, str], float]]:
    argv = [sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(ROOT / "specs"), "--results", str(out),
            "--sandbox", mode, "-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy"]
    for t in tests:
        argv += ["-t", t]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"gripprobe run --sandbox {mode} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    phases = {}
    for case in run_dir.glob("cases/*/case.json"):
        data = json.loads(case.read_text())
        assert data["sandbox"] == mode, (case, data["sandbox"])
        for ph in data["phases"]:
            phases[(data["case_id"], ph["phase"])] = ph["process"]["duration_s"] * 1000
    return wall, phases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.specs import load_specs

    specs = load_specs(ROOT / "specs", registry=make_plugin_manager().registry)
    tests = sorted(t.id for t in specs.tests.values() if t.challenge is None)[: max(1, args.cases // 2)]
    added: list[float] = []
    walls: dict[str, list[float]] = {"none": [], "bwrap": []}
    times: dict[str, list[float]] = {"none": [], "bwrap": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            seen: dict[str, dict] = {}
            for mode in (("none", "bwrap") if r % 2 == 0 else ("bwrap", "none")):
                wall, phases = run_once(mode, tests, Path(tmp) / f"{mode}-{r}")
                walls[mode].append(wall / max(1, len(phases) // 2))
                times[mode] += phases.values()
                seen[mode] = phases
            added += [seen["bwrap"][k] - seen["none"][k] for k in seen["none"] if k in seen["bwrap"]]
    bare = bare_start_ms()
    direct_rtt, boxed_rtt = request_latency_ms()
    added = [a + bare["bridge"] for a in added]
    med = statistics.median(added)
    print(f"phases paired: {len(added)} ({args.rounds} round(s) of {len(added) // max(1, args.rounds)})")
    print(f"agent phase, none:    {_ms(times['none'])}")
    print(f"agent phase, bwrap:   {_ms(times['bwrap'])}")
    print(f"added by the sandbox: {_ms(added)} per phase, mean {statistics.fmean(added):.1f} ms, its network "
          f"bridge's {bare['bridge']:.1f} ms included  (target ≤ {TARGET_MS:.0f} ms: {'met' if med <= TARGET_MS else 'NOT met'})")
    print(f"whole run per case (wall, from outside): none {statistics.median(walls['none']) * 1000:.0f} ms, "
          f"bwrap {statistics.median(walls['bwrap']) * 1000:.0f} ms")
    print(f"bare start of /bin/true: direct {bare['direct']:.1f} ms, under bwrap {bare['bwrap']:.1f} ms "
          f"(+{bare['bwrap'] - bare['direct']:.1f} ms), with a forwarded port and its bridge "
          f"{bare['bwrap+forward']:.1f} ms")
    print(f"a request's round trip (median of 500, kept alive): from the host {direct_rtt:.3f} ms, from inside the "
          f"sandbox through its network {boxed_rtt:.3f} ms (+{boxed_rtt - direct_rtt:.3f} ms)")
    return 0 if med <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())

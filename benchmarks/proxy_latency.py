"""Recording proxy latency: what it adds per request, to the first streamed byte, and to throughput.

Processes besides this client: a minimal aiohttp upstream ("direct": the baseline); the RecordingProxy as
it runs by default ("gripprobe": the relay, plus its recorder child process running the real observer and
writing the real record file); the same proxy with a do-nothing in-process observer ("relay-only": the
relay's cost alone, metadata-only records); and, as the peer, mitmproxy in reverse-proxy mode when it is
installed (on PATH or in ~/.cache/gripprobe/bench-venv, outside the repo; a full run installs it there on
demand unless ``--no-install``, ``--quick`` never does). The client runs here, on its own event loop, and
measures every target from outside in alternating rounds (direct first, then each proxy: load from other
work hits all alike):

* ``--requests`` non-streaming requests per target (1,000; ``--quick`` 200), one at a time, in ``--rounds``
  blocks (10; ``--quick`` 4) → p50 added over direct per round (min / median / max over rounds), p99 added
  over all of them;
* as many streaming (SSE) requests → time-to-first-byte added, per round;
* throughput (req/s) with 16 concurrent clients, ``--throughput-requests`` per target (3,000 in 3 rounds;
  ``--quick`` 600 in 1), also counted until gripprobe's recorder has written every record.

Targets: p50 added ≤ 1 ms and ≤ 25 % of mitmproxy's (when it runs); first-byte added ≤ 2 ms.

    .venv/bin/python benchmarks/proxy_latency.py [--quick] [--rounds 10] [--requests 1000] [--no-mitmproxy]
    .venv/bin/python benchmarks/proxy_latency.py --observer gripprobe_core.proxy.observe:ExchangeObserver
        # "gripprobe" with the real observer in-process instead (the design before the recorder)

The same file serves as the upstream and proxy processes (``--role upstream|proxy``), which
benchmarks/proxy_memory.py reuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Figure, Spread, add_contract_args, load1, missed, report, rounds_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = Path.home() / ".cache" / "gripprobe" / "bench-venv"
P50_TARGET_MS = 1.0
P50_VS_MITM_TARGET = 0.25
TTFB_TARGET_MS = 2.0

CHAT_JSON = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "shell", "arguments": "{\"command\": \"ls -1\"}"}}]}}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}}).encode()
REQUEST = {"model": "bench", "messages": [{"role": "user", "content": "list the files " * 20}],
           "tools": [{"type": "function", "function": {"name": "shell", "parameters": {
               "type": "object", "properties": {"command": {"type": "string"}}}}}]}


def sse_events(n: int = 8) -> list[bytes]:
    out = []
    for i in range(n):
        delta = {"role": "assistant", "content": ""} if i == 0 else {"content": f"token{i} "}
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    return out + [b"data: [DONE]\n\n"]


def big_event(size: int = 1024) -> bytes:
    """One SSE chat chunk of about ``size`` bytes (for the memory benchmark)."""
    head = b'data: {"id":"chatcmpl-big","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"'
    tail = b'"},"finish_reason":null}]}\n\n'
    return head + b"x" * (size - len(head) - len(tail)) + tail


# ------------------------------------------------------------------------------- server roles

class NullObserver:
    """An observer that keeps nothing: run beside the real one, it shows what the relay alone costs."""

    def __init__(self, **request: object) -> None:
        self.path = request.get("path")

    def feed(self, chunk: bytes) -> None:
        pass

    def finish(self, *, status: int | None, proxy_error: str | None, **_: object) -> dict:
        return {"x_gripprobe_path": self.path, "x_gripprobe_status": status, "x_gripprobe_proxy_error": proxy_error}


async def serve_upstream() -> None:
    """A minimal model server: JSON or SSE chat completions, and ``/big?mb=N`` (an N MiB SSE stream)."""
    from aiohttp import web

    events = sse_events()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if b'"stream": true' not in body:
            return web.Response(body=CHAT_JSON, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for ev in events:
            await resp.write(ev)
        await resp.write_eof()
        return resp

    async def big(request: web.Request) -> web.StreamResponse:
        total = int(float(request.query.get("mb", "100")) * 1024 * 1024)
        block = big_event() * 64
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = 0
        while sent < total:
            await resp.write(block)
            sent += len(block)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/big", big)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


async def serve_proxy(upstream: str, record: str, observer: str = "") -> None:
    """The RecordingProxy as the runner starts it (recorder process); ``observer`` (``module:attr``)
    observes in-process with that factory instead, for comparisons. On SIGTERM the proxy stops
    (every record written) and the recorder process is closed."""
    import importlib
    import signal

    from gripprobe_core.proxy import RecordingProxy, close_recorder

    factory = None
    if observer:
        module, _, attr = observer.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    # as the runner starts it: serving only the case's model (a model call's body is parsed to check its name);
    # its record file uncapped, since the benchmark waits for every record of thousands of requests
    proxy = RecordingProxy(upstream, Path(record), observer_factory=factory, models=(REQUEST["model"],),
                           max_records=1 << 40, max_record_bytes=1 << 40)
    await proxy.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"PORT {proxy.base_url.rsplit(':', 1)[1]}", flush=True)
    await stop.wait()
    await proxy.stop()
    close_recorder()


# ------------------------------------------------------------------------------ process helpers

class Server:
    """A server subprocess; ``url`` once it listens."""

    def __init__(self, name: str, argv: list[str], *, port: int | None = None) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True, cwd=ROOT)
        if port is None:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line.startswith("PORT "):
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"{name} did not start: {line!r} {err[-2000:]}")
            port = int(line.split()[1])
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        wait_listening(port, self.proc, name)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def children(self) -> list[int]:
        """Pids of this server's child processes (the proxy's recorder)."""
        try:
            return [int(p) for p in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except (OSError, ValueError):
            return []


def role_argv(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def wait_listening(port: int, proc: subprocess.Popen, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} is not listening on {port} after {timeout:.0f} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_mitmdump(install: bool) -> str | None:
    """mitmdump on PATH, else in the bench venv (created with ``pip install mitmproxy`` if allowed)."""
    found = shutil.which("mitmdump")
    if found:
        return found
    exe = BENCH_VENV / "bin" / "mitmdump"
    if exe.exists():
        return str(exe)
    if not install:
        return None
    print(f"installing mitmproxy into {BENCH_VENV} (once) ...", file=sys.stderr, flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        subprocess.run([str(BENCH_VENV / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "mitmproxy"], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot install mitmproxy: {exc}", file=sys.stderr)
        return None
    return str(exe) if exe.exists() else None


# ----------------------------------------------------------------------------------- measuring

def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


async def one_json(session: Any, url: str) -> float:
    t0 = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=REQUEST) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
    return (time.perf_counter() - t0) * 1000


async def one_stream(session: Any, url: str) -> float:
    """Time to the first body byte of an SSE reply (the rest is read too)."""
    t0 = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json={**REQUEST, "stream": True}) as resp:
        assert resp.status == 200, resp.status
        first = await resp.content.readany()
        ttfb = (time.perf_counter() - t0) * 1000
        assert first
        await resp.read()
    return ttfb


class Recorded:
    """A target's record file and the requests sent to it. :meth:`settle` waits until every request
    has its record: the recorder process works in the background (at a lower CPU priority), and its
    late work must not be billed to the target measured next."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sent = 0
        self._offset = 0
        self._lines = 0

    def lines(self) -> int:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return self._lines
        self._offset += len(data)
        self._lines += data.count(b"\n")
        return self._lines

    async def settle(self, timeout: float = 60.0) -> float:
        """Seconds waited until every request sent so far has its record."""
        t0 = time.perf_counter()
        while self.lines() < self.sent and time.perf_counter() - t0 < timeout:
            await asyncio.sleep(0.002)
        if self.lines() < self.sent:
            print(f"warning: {self.sent - self.lines()} records missing after {timeout:g} s", file=sys.stderr)
        return time.perf_counter() - t0


async def interleaved(targets: dict[str, str], n: int, fn: Callable[[Any, str], Awaitable[float]],
                      settle: dict[str, Recorded], rounds: int = 10) -> dict[str, list[list[float]]]:
    """``n`` sequential requests per target, in ``rounds`` alternating blocks (drift hits all alike),
    one keep-alive connection per target, after a warm-up: each target's values, one list per round.
    After each block of a target in ``settle``, wait until its records are all written (outside any
    measurement)."""
    import aiohttp

    out: dict[str, list[list[float]]] = {name: [] for name in targets}
    sessions = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for name in targets}

    async def block(name: str, url: str, count: int) -> list[float]:
        values = [await fn(sessions[name], url) for _ in range(count)]
        if name in settle:
            settle[name].sent += count
            await settle[name].settle()
        return values

    try:
        for name, url in targets.items():
            await block(name, url, 50)
        per_round = max(1, n // rounds)
        for _ in range(rounds):
            for name, url in targets.items():
                out[name].append(await block(name, url, per_round))
    finally:
        for s in sessions.values():
            await s.close()
    return out


async def throughput(url: str, total: int, concurrency: int, recorded: Recorded | None = None) -> tuple[float, float]:
    """(req/s while relaying, req/s counting the time until every record is written too)."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        for _ in range(20):
            await one_json(session, url)
        if recorded is not None:
            recorded.sent += 20
            await recorded.settle()

        async def worker(k: int) -> None:
            for _ in range(k):
                await one_json(session, url)

        done = (total // concurrency) * concurrency
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(total // concurrency) for _ in range(concurrency)))
        relayed = time.perf_counter() - t0
        caught_up = relayed
        if recorded is not None:
            recorded.sent += done
            caught_up += await recorded.settle()
        return done / relayed, done / caught_up


def ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def flat(rounds: list[list[float]]) -> list[float]:
    return [v for values in rounds for v in values]


async def measure(targets: dict[str, str], n: int, rounds: int, total: int, tp_rounds: int, concurrency: int,
                  settle: dict[str, Recorded] | None = None) -> dict:
    """Every measurement, alternating between the targets: latency, first byte, throughput."""
    settle = settle or {}
    lat = await interleaved(targets, n, one_json, settle, rounds)
    ttfb = await interleaved(targets, n, one_stream, settle, rounds)
    tp: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
    for _ in range(tp_rounds):
        for name, url in targets.items():
            tp[name].append(await throughput(url, max(concurrency, total // tp_rounds), concurrency,
                                             settle.get(name)))
    return {"lat": lat, "ttfb": ttfb, "tp": tp, "concurrency": concurrency}


def per_round(data: dict[str, list[list[float]]], name: str, base: str) -> Spread:
    """p50 of ``name`` minus p50 of ``base``, round by round."""
    return Spread.of(pct(a, .5) - pct(b, .5) for a, b in zip(data[name], data[base]))


def figures(m: dict) -> list[Figure]:
    """Print what was measured; the figures of ``gripprobe`` (the others are printed as its references)."""
    lat, ttfb, tp = m["lat"], m["ttfb"], m["tp"]
    names = list(lat)
    rounds = len(lat["direct"])
    p50 = {name: Spread.of(pct(v, .5) for v in lat[name]) for name in names}
    t50 = {name: Spread.of(pct(v, .5) for v in ttfb[name]) for name in names}
    p99 = {name: pct(flat(lat[name]), .99) for name in names}
    added = {name: per_round(lat, name, "direct") for name in names if name != "direct"}
    t_added = {name: per_round(ttfb, name, "direct") for name in names if name != "direct"}
    rps = {name: Spread.of(v[0] for v in tp[name]) for name in names}
    caught = {name: Spread.of(v[1] for v in tp[name]) for name in names}
    print(f"non-streaming, {len(flat(lat['direct']))} sequential requests per target in {rounds} rounds: "
          f"p50 per round (median, min, max), p99 of all; added over direct per round:")
    for name in names:
        line = f"  {name:<11} p50 {p50[name].show('ms', 3)}, p99 {p99[name]:.3f} ms"
        if name != "direct":
            line += f"; added p50 {added[name].show('ms', 3)}, p99 {p99[name] - p99['direct']:+.3f} ms"
        print(line)
    print(f"streaming (SSE, 9 events), time to first byte, {len(flat(ttfb['direct']))} requests per target:")
    for name in names:
        line = f"  {name:<11} p50 {t50[name].show('ms', 3)}, p99 {pct(flat(ttfb[name]), .99):.3f} ms"
        if name != "direct":
            line += f"; added p50 {t_added[name].show('ms', 3)}"
        print(line)
    print(f"throughput, {m['concurrency']} concurrent clients, {len(tp['direct'])} round(s) (req/s):")
    for name in names:
        line = f"  {name:<11} {rps[name].show('req/s', 0)}   ({rps[name].median / rps['direct'].median:.2f} of direct)"
        if name == "gripprobe":
            line += f"; {caught[name].show('req/s', 0)} counting until every record is written"
        print(line)
    if "mitmproxy" in added:
        mitm = added["mitmproxy"].median
        for name in (k for k in added if k != "mitmproxy"):
            r = ratio(added[name].median, mitm)
            print(f"ratios {name}/mitmproxy: p50 added {r if r is None else round(r, 2)}, "
                  f"throughput {rps[name].median / rps['mitmproxy'].median:.2f}")
    if "relay-only" in added:
        print(f"observing's share of gripprobe's p50 added latency: "
              f"{per_round(lat, 'gripprobe', 'relay-only').show('ms', 3)} "
              f"(relay-only = the same proxy with a NullObserver: no parsing, metadata-only records)")

    d50, dt50 = p50["direct"].median, t50["direct"].median
    figs = [Figure("proxy_p50_added", added["gripprobe"].median, "ms", P50_TARGET_MS, d50,
                   ratio(p50["gripprobe"].median, d50),
                   what=f"gripprobe's p50 minus direct's, per round, median of {rounds}"),
            Figure("proxy_p99_added", p99["gripprobe"] - p99["direct"], "ms", None, p99["direct"],
                   ratio(p99["gripprobe"], p99["direct"]), what="gripprobe's p99 minus direct's, all rounds"),
            Figure("proxy_ttfb_added", t_added["gripprobe"].median, "ms", TTFB_TARGET_MS, dt50,
                   ratio(t50["gripprobe"].median, dt50),
                   what=f"time to the first streamed byte, gripprobe's p50 minus direct's, median of {rounds}")]
    if "relay-only" in added:
        share = per_round(lat, "gripprobe", "relay-only")
        figs.append(Figure("proxy_observe_p50", share.median, "ms", None, p50["relay-only"].median,
                           ratio(p50["gripprobe"].median, p50["relay-only"].median),
                           what="gripprobe's p50 minus the plain relay's (relay-only): what observing adds"))
    if "mitmproxy" in added:
        mitm = added["mitmproxy"].median
        r = ratio(added["gripprobe"].median, mitm)
        if r is not None:
            figs.append(Figure("proxy_p50_added_vs_mitm", r, "x", f"<={P50_VS_MITM_TARGET:g}", mitm, r,
                               what="gripprobe's p50 added / mitmproxy's (baseline: mitmproxy's, ms)"))
    figs += [Figure("proxy_throughput", rps["gripprobe"].median, "req/s", None, rps["direct"].median,
                    ratio(rps["gripprobe"].median, rps["direct"].median),
                    what=f"{m['concurrency']} concurrent clients through gripprobe against direct"),
             Figure("proxy_throughput_recorded", caught["gripprobe"].median, "req/s", None, rps["direct"].median,
                    ratio(caught["gripprobe"].median, rps["direct"].median),
                    what="the same, counting until the recorder has written every record")]
    if "mitmproxy" in rps:
        figs.append(Figure("proxy_throughput_vs_mitm", rps["gripprobe"].median / rps["mitmproxy"].median, "x",
                           None, rps["mitmproxy"].median, rps["gripprobe"].median / rps["mitmproxy"].median,
                           what="gripprobe's req/s / mitmproxy's (baseline: mitmproxy's req/s)"))
    return figs


def read_records(path: Path) -> list[dict]:
    from gripprobe_core.proxy import read_records as read

    return read(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=10, quick_rounds=4)
    ap.add_argument("--role", choices=["bench", "upstream", "proxy"], default="bench", help=argparse.SUPPRESS)
    ap.add_argument("--upstream", default="", help=argparse.SUPPRESS)
    ap.add_argument("--record", default="", help=argparse.SUPPRESS)
    ap.add_argument("--observer", default="", help="module:attr of an observer factory (default: the real one)")
    ap.add_argument("--requests", type=int, default=None, help="sequential requests per target (1000; --quick 200)")
    ap.add_argument("--throughput-requests", type=int, default=None,
                    help="concurrent requests per target (3000 in 3 rounds; --quick 600 in 1)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--no-mitmproxy", action="store_true", help="skip the mitmproxy peer")
    ap.add_argument("--no-install", action="store_true", help="do not pip-install mitmproxy when missing")
    args = ap.parse_args(argv)
    if args.role == "upstream":
        asyncio.run(serve_upstream())
        return 0
    if args.role == "proxy":
        from gripprobe_core.runner.eventloop import run as run_loop  # the loop the runner relays on
        run_loop(serve_proxy(args.upstream, args.record, args.observer))
        return 0

    rounds = rounds_of(args)
    requests = args.requests if args.requests is not None else (200 if args.quick else 1000)
    tp_total = args.throughput_requests if args.throughput_requests is not None else (600 if args.quick else 3000)
    tp_rounds = 1 if args.quick else 3
    servers: list[Server] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            upstream = Server("upstream", role_argv("--role", "upstream"))
            servers.append(upstream)
            record = Path(tmp) / "proxy.bench.http.jsonl"
            extra = ["--observer", args.observer] if args.observer else []
            ours = Server("gripprobe proxy", role_argv("--role", "proxy", "--upstream", upstream.url,
                                                       "--record", str(record), *extra))
            servers.append(ours)
            targets = {"direct": upstream.url, "gripprobe": ours.url}
            if not args.observer:
                relay = Server("relay only", role_argv("--role", "proxy", "--upstream", upstream.url, "--record",
                                                       str(Path(tmp) / "relay.jsonl"), "--observer",
                                                       "__main__:NullObserver"))
                servers.append(relay)
                targets["relay-only"] = relay.url
            mitmdump = None if args.no_mitmproxy else find_mitmdump(install=not (args.no_install or args.quick))
            if mitmdump:
                port = free_port()
                mitm = Server("mitmproxy", [mitmdump, "--mode", f"reverse:{upstream.url}", "--listen-host",
                                            "127.0.0.1", "--listen-port", str(port), "-q"], port=port)
                servers.append(mitm)
                targets["mitmproxy"] = mitm.url
            else:
                print("mitmproxy: not measured (not installed, or --no-mitmproxy)")
            recorder = ours.children()
            print(f"cores: {os.cpu_count()}; load {load1():.2f}; {requests} requests per target in {rounds} rounds; "
                  f"processes: client (this), " + ", ".join(s.name for s in servers)
                  + (f", gripprobe's recorder (pid {recorder[0]})" if recorder else " (gripprobe: no recorder child)"),
                  flush=True)
            settle = {"gripprobe": Recorded(record)}
            measured = asyncio.run(measure(targets, requests, rounds, tp_total, tp_rounds, args.concurrency, settle))
        finally:
            for s in servers:
                s.stop()  # the proxy writes every record before it exits
        records = read_records(record)
        degraded = sum(1 for r in records if r.get("x_gripprobe_observer_error"))
        print(f"records written for gripprobe: {len(records)} ({degraded} metadata-only)")
        if len(records) < settle["gripprobe"].sent:
            raise SystemExit(f"gripprobe's proxy wrote {len(records)} records for {settle['gripprobe'].sent} requests")
    figs = figures(measured)
    report(figs)
    return 1 if missed(figs) else 0


if __name__ == "__main__":
    sys.exit(main())

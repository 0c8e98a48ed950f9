"""Recording proxy latency: what it adds per request, to the first streamed byte, and to throughput.

Processes besides this client: a minimal aiohttp upstream; the RecordingProxy as it runs by default
("gripprobe": the relay, plus its recorder child process running the real observer and writing the
real record file); the same proxy with a do-nothing in-process observer ("relay-only": the relay's
cost alone, metadata-only records); and, as the peer, mitmproxy in reverse-proxy mode (installed on
demand into ~/.cache/gripprobe/bench-venv, outside the repo). The client runs here, on its own event
loop, and measures each target in interleaved rounds (so load from other work hits all alike):

* 1,000 non-streaming requests, one at a time → p50/p99 latency added over the direct baseline;
* 1,000 streaming (SSE) requests → time-to-first-byte overhead;
* throughput (req/s) with 16 concurrent clients.

Targets: p50 added ≤ 1 ms and ≤ 25 % of mitmproxy's; first-byte overhead ≤ 2 ms.

    .venv/bin/python benchmarks/proxy_latency.py [--requests 1000] [--no-mitmproxy]
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
                      settle: dict[str, Recorded], rounds: int = 10) -> dict[str, list[float]]:
    """``n`` sequential requests per target, in ``rounds`` interleaved blocks (drift hits all alike),
    one keep-alive connection per target, after a warm-up. After each block of a target in
    ``settle``, wait until its records are all written (outside any measurement)."""
    import aiohttp

    out: dict[str, list[float]] = {name: [] for name in targets}
    sessions = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for name in targets}

    async def block(name: str, url: str, count: int, keep: bool) -> None:
        for _ in range(count):
            value = await fn(sessions[name], url)
            if keep:
                out[name].append(value)
        if name in settle:
            settle[name].sent += count
            await settle[name].settle()

    try:
        for name, url in targets.items():
            await block(name, url, 50, keep=False)
        per_round = max(1, n // rounds)
        for _ in range(rounds):
            for name, url in targets.items():
                await block(name, url, per_round, keep=True)
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


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


async def measure(targets: dict[str, str], n: int, total: int, concurrency: int,
                  settle: dict[str, Recorded] | None = None) -> int:
    settle = settle or {}
    lat = await interleaved(targets, n, one_json, settle)
    ttfb = await interleaved(targets, n, one_stream, settle)
    both = {name: await throughput(url, total, concurrency, settle.get(name)) for name, url in targets.items()}
    rps = {name: v[0] for name, v in both.items()}
    base = lat["direct"]
    print(f"non-streaming, {len(base)} sequential requests per target (p50 / p99 ms):")
    added: dict[str, tuple[float, float]] = {}
    for name, values in lat.items():
        line = f"  {name:<11} {pct(values, .5):7.3f} / {pct(values, .99):7.3f}"
        if name != "direct":
            added[name] = (pct(values, .5) - pct(base, .5), pct(values, .99) - pct(base, .99))
            line += f"   added {added[name][0]:+.3f} / {added[name][1]:+.3f}"
        print(line)
    print(f"streaming (SSE, 9 events), time to first byte, {len(ttfb['direct'])} requests per target (p50 / p99 ms):")
    ttfb_added: dict[str, float] = {}
    for name, values in ttfb.items():
        line = f"  {name:<11} {pct(values, .5):7.3f} / {pct(values, .99):7.3f}"
        if name != "direct":
            ttfb_added[name] = pct(values, .5) - pct(ttfb["direct"], .5)
            line += f"   overhead {ttfb_added[name]:+.3f}"
        print(line)
    print(f"throughput, {concurrency} concurrent clients, {total} requests (req/s):")
    for name, value in rps.items():
        line = f"  {name:<11} {value:8.0f}   ({value / rps['direct']:.2f} of direct)"
        if name in settle:
            line += f"; {both[name][1]:.0f} counting until every record is written"
        print(line)
    if "mitmproxy" in added:
        m = added["mitmproxy"]
        for name in (k for k in added if k != "mitmproxy"):
            print(f"ratios {name}/mitmproxy: p50 added {ratio(added[name][0], m[0]):.2f}, "
                  f"p99 added {ratio(added[name][1], m[1]):.2f}, "
                  f"first-byte overhead {ratio(ttfb_added[name], ttfb_added['mitmproxy']):.2f}, "
                  f"throughput {ratio(rps[name], rps['mitmproxy']):.2f}")
    if "relay-only" in added:
        print(f"observing's share of gripprobe's p50 added latency: "
              f"{added['gripprobe'][0] - added['relay-only'][0]:+.3f} ms "
              f"(relay-only = the same proxy with a NullObserver: no parsing, metadata-only records)")

    rc = 0
    for name in (k for k in ("gripprobe", "relay-only") if k in added):
        ok = targets_met(name, added, ttfb_added)
        if name == "gripprobe" and not ok:
            rc = 1
    return rc


def targets_met(name: str, added: dict[str, tuple[float, float]], ttfb_added: dict[str, float]) -> bool:
    """Print the three targets for ``name``; all met?"""
    ours = added[name][0]
    ok = ours <= P50_TARGET_MS
    print(f"[{name}] target p50 added <= {P50_TARGET_MS:g} ms: {ours:.3f} ms -> {verdict(ok)}")
    if "mitmproxy" in added:
        r = ratio(ours, added["mitmproxy"][0])
        print(f"[{name}] target p50 added <= {P50_VS_MITM_TARGET:.0%} of mitmproxy's: {r:.0%} -> "
              f"{verdict(r <= P50_VS_MITM_TARGET)}")
        ok = ok and r <= P50_VS_MITM_TARGET
    else:
        print(f"[{name}] target p50 added <= {P50_VS_MITM_TARGET:.0%} of mitmproxy's: not measured "
              "(mitmproxy unavailable)")
    t = ttfb_added[name]
    print(f"[{name}] target first-byte overhead <= {TTFB_TARGET_MS:g} ms: {t:.3f} ms -> "
          f"{verdict(t <= TTFB_TARGET_MS)}")
    return ok and t <= TTFB_TARGET_MS


def read_records(path: Path) -> list[dict]:
    from gripprobe_core.proxy import read_records as read

    return read(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=["bench", "upstream", "proxy"], default="bench")
    ap.add_argument("--upstream", default="")
    ap.add_argument("--record", default="")
    ap.add_argument("--observer", default="", help="module:attr of an observer factory (default: the real one)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--throughput-requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--no-mitmproxy", action="store_true", help="skip the mitmproxy peer")
    ap.add_argument("--no-install", action="store_true", help="do not pip-install mitmproxy when missing")
    args, _ = ap.parse_known_args(argv)  # run_all.py passes every benchmark the same arguments
    if args.role == "upstream":
        asyncio.run(serve_upstream())
        return 0
    if args.role == "proxy":
        from gripprobe_core.runner.eventloop import run as run_loop  # the loop the runner relays on
        run_loop(serve_proxy(args.upstream, args.record, args.observer))
        return 0

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
            mitmdump = None if args.no_mitmproxy else find_mitmdump(install=not args.no_install)
            if mitmdump:
                port = free_port()
                mitm = Server("mitmproxy", [mitmdump, "--mode", f"reverse:{upstream.url}", "--listen-host",
                                            "127.0.0.1", "--listen-port", str(port), "-q"], port=port)
                servers.append(mitm)
                targets["mitmproxy"] = mitm.url
            recorder = ours.children()
            print(f"cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; processes: client (this), "
                  + ", ".join(s.name for s in servers)
                  + (f", gripprobe's recorder (pid {recorder[0]})" if recorder else " (gripprobe: no recorder child)"))
            settle = {"gripprobe": Recorded(record)}
            rc = asyncio.run(measure(targets, args.requests, args.throughput_requests, args.concurrency, settle))
            print(f"load average after: {os.getloadavg()[0]:.1f}")
        finally:
            for s in servers:
                s.stop()  # the proxy writes every record before it exits
        records = read_records(record)
        degraded = sum(1 for r in records if r.get("x_gripprobe_observer_error"))
        print(f"records written for gripprobe: {len(records)} ({degraded} metadata-only)")
        return rc


if __name__ == "__main__":
    sys.exit(main())

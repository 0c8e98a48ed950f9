"""Recording proxy memory: relaying a 100 MB stream keeps the proxy's and its recorder's RSS flat.

An upstream process streams 100 MiB of SSE chat chunks (~1 KiB events); the client (this process)
reads it through the RecordingProxy (a separate process, as the runner starts it: the relay, plus its
recorder child process running the real observer and writing the record file) while sampling the RSS
(/proc/<pid>/status VmRSS) of both the proxy and the recorder every 20 ms. Prints start / peak / end
RSS of each and the relay throughput, with the same stream read directly as the baseline. Target:
peak - start < 30 MB for each process (no buffering of the stream: the relay waits for the recorder
above a high-water mark; the observer's memory is bounded by its budget).

    .venv/bin/python benchmarks/proxy_memory.py [--mb 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy_latency import Server, role_argv  # noqa: E402  (the upstream/proxy roles live there)

FLAT_TARGET_MB = 30.0


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (0 when it cannot be read)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class RssSampler(threading.Thread):
    """Samples a process's RSS on a thread until stopped; keeps every sample."""

    def __init__(self, pid: int, every_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[int] = []
        self._stop_evt = threading.Event()

    def run(self) -> None:
        while not self._stop_evt.is_set():
            self.samples.append(rss_kib(self.pid))
            self._stop_evt.wait(self.every_s)

    def stop(self) -> list[int]:
        self._stop_evt.set()
        self.join()
        return self.samples


async def read_stream(url: str, mb: float) -> tuple[int, float]:
    """Read ``url/big?mb=..`` to the end; return (bytes, seconds)."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        t0 = time.perf_counter()
        total = 0
        async with session.get(f"{url}/big", params={"mb": str(mb)}) as resp:
            assert resp.status == 200, resp.status
            async for chunk in resp.content.iter_any():
                total += len(chunk)
        return total, time.perf_counter() - t0


async def warm_up(url: str) -> None:
    """A few small requests, so imports and buffers are in place before the start RSS is taken."""
    for _ in range(3):
        await read_stream(url, 0.5)


def growth(name: str, pid: int, start: int, samples: list[int], end: int) -> float:
    """Print one process's RSS figures; its growth in MiB."""
    peak = max(samples + [start, end])
    grow_mb = (peak - start) / 1024
    print(f"{name} RSS (MiB): start {start / 1024:.1f}, peak {peak / 1024:.1f}, end {end / 1024:.1f} "
          f"({len(samples)} samples, pid {pid}); growth {grow_mb:.1f} MiB")
    return grow_mb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--observer", default="", help="module:attr of an observer factory (default: the real one)")
    args, _ = ap.parse_known_args(argv)  # run_all.py passes every benchmark the same arguments

    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "proxy.bench.http.jsonl"
        upstream = Server("upstream", role_argv("--role", "upstream"))
        try:
            extra = ["--observer", args.observer] if args.observer else []
            proxy = Server("gripprobe proxy", role_argv("--role", "proxy", "--upstream", upstream.url,
                                                        "--record", str(record), *extra))
            try:
                direct_bytes, direct_s = asyncio.run(read_stream(upstream.url, args.mb))
                asyncio.run(warm_up(proxy.url))
                pids = {"proxy": proxy.pid}
                recorder = proxy.children()
                if recorder:
                    pids["recorder"] = recorder[0]
                starts = {name: rss_kib(pid) for name, pid in pids.items()}
                samplers = {name: RssSampler(pid) for name, pid in pids.items()}
                for sampler in samplers.values():
                    sampler.start()
                got_bytes, got_s = asyncio.run(read_stream(proxy.url, args.mb))
                time.sleep(0.2)
                samples = {name: sampler.stop() for name, sampler in samplers.items()}
                ends = {name: rss_kib(pid) for name, pid in pids.items()}
            finally:
                proxy.stop()  # every record written, then the recorder closed
        finally:
            upstream.stop()
        record_size = record.stat().st_size if record.exists() else 0

    print(f"stream: {got_bytes / 2**20:.1f} MiB relayed in {got_s:.2f} s ({got_bytes / 2**20 / got_s:.0f} MiB/s); "
          f"baseline direct: {direct_bytes / 2**20:.1f} MiB in {direct_s:.2f} s ({direct_bytes / 2**20 / direct_s:.0f} MiB/s)"
          f" -> proxied/direct time {got_s / direct_s:.2f}")
    if "recorder" not in pids:
        print("no recorder process found: the proxy observed in-process")
    grows = {name: growth(name, pids[name], starts[name], samples[name], ends[name]) for name in pids}
    print(f"record file: {record_size / 1024:.0f} KiB for the whole run")
    ok = got_bytes == direct_bytes and all(g < FLAT_TARGET_MB for g in grows.values())
    if got_bytes != direct_bytes:
        print(f"relayed {got_bytes} bytes but the upstream sent {direct_bytes}")
    detail = ", ".join(f"{name} {g:.1f} MB" for name, g in grows.items())
    print(f"target: peak - start < {FLAT_TARGET_MB:.0f} MB per process: {detail} -> {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

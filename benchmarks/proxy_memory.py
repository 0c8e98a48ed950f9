"""Recording proxy memory: relaying a large streamed body keeps the proxy's and its recorder's RSS flat.

An upstream process streams an SSE chat reply of ``--mb`` MiB (~1 KiB events; 100, ``--quick`` 32); the
client (this process) reads it through the RecordingProxy (a separate process, as the runner starts it:
the relay, plus its recorder child process running the real observer and writing the record file) while
sampling, from outside, the RSS (``/proc/<pid>/status`` VmRSS) of both the proxy and the recorder every
20 ms. Each round starts a fresh proxy, warms it up (three 0.5 MiB streams, until the recorder has written
their records), takes its start RSS, then, in this order:

* **baseline**: the same large body read directly from the upstream (time), and a 1 MiB body read
  through the proxy (memory: what relaying costs when the body is small);
* **subject**: the large body read through the proxy (time and memory).

Figures (median over rounds; min / median / max printed): each process's growth (peak − start) with the
large body, against the same with the 1 MiB body; each process's peak RSS, ratio large / small; the
large body's read time through the proxy against the direct read. Target: growth ≤ 30 MiB per process
(no buffering of the stream: the relay waits for the recorder above a high-water mark; the observer's
memory is bounded by its budget). Every byte the upstream sent must arrive, or the benchmark stops.

    .venv/bin/python benchmarks/proxy_memory.py [--quick] [--rounds 3] [--mb 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (Figure, MemorySampler, Spread, add_contract_args, load1, missed, report,  # noqa: E402
                    rounds_of, status_kib)
from proxy_latency import Recorded, Server, role_argv  # noqa: E402  (the upstream/proxy roles live there)

FLAT_TARGET_MB = 30.0
SMALL_MB = 1.0
PROCESSES = ("proxy", "recorder")


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


def sampled_read(url: str, mb: float, pids: dict[str, int]) -> tuple[int, float, dict[str, float]]:
    """Read ``mb`` MiB through the proxy while sampling ``pids``: (bytes, seconds, peak RSS MiB by name)."""
    with MemorySampler(lambda: pids) as sampler:
        got, seconds = asyncio.run(read_stream(url, mb))
        time.sleep(0.1)  # what the recorder still does after the last byte
    return got, seconds, {name: sampler.peak_mib(name, kernel=False) for name in pids}


def one_round(r: int, upstream: Server, mb: float, tmp: Path, observer: str) -> dict:
    """A fresh proxy; the direct read and the small body (baseline), then the large body (subject)."""
    record = tmp / f"proxy.bench-{r}.http.jsonl"
    extra = ["--observer", observer] if observer else []
    proxy = Server("gripprobe proxy", role_argv("--role", "proxy", "--upstream", upstream.url,
                                                "--record", str(record), *extra))
    try:
        asyncio.run(warm_up(proxy.url))
        warm = Recorded(record)
        warm.sent = 3
        asyncio.run(warm.settle())  # the recorder has written the warm-up's records: its imports are done
        pids = {"proxy": proxy.pid}
        recorder = proxy.children()
        if recorder:
            pids["recorder"] = recorder[0]
        start = {name: status_kib(pid) / 1024 for name, pid in pids.items()}
        direct_bytes, direct_s = asyncio.run(read_stream(upstream.url, mb))
        small_bytes, _, small_peak = sampled_read(proxy.url, SMALL_MB, pids)
        got_bytes, got_s, large_peak = sampled_read(proxy.url, mb, pids)
    finally:
        proxy.stop()  # every record written, then the recorder closed
    if got_bytes != direct_bytes or small_bytes == 0:
        raise SystemExit(f"the proxy relayed {got_bytes} bytes of the upstream's {direct_bytes} "
                         f"(small body: {small_bytes})")
    row = {"pids": pids, "start": start, "small": small_peak, "large": large_peak, "direct_s": direct_s,
           "proxied_s": got_s, "bytes": got_bytes, "record_kib": record.stat().st_size / 1024 if record.exists() else 0}
    print(f"round {r + 1}: {got_bytes / 2**20:.1f} MiB through the proxy in {got_s:.2f} s, directly {direct_s:.2f} s; "
          + "; ".join(f"{name} start {start[name]:.1f}, peak {small_peak[name]:.1f} (1 MiB) / {large_peak[name]:.1f} "
                      f"({mb:g} MiB)" for name in pids)
          + f" MiB; record file {row['record_kib']:.0f} KiB; load {load1():.2f}", flush=True)
    return row


def figures(rows: list[dict], mb: float) -> list[Figure]:
    """The figures of the rounds' rows (see :func:`one_round`)."""
    out: list[Figure] = []
    n = len(rows)
    for name in PROCESSES:
        if not all(name in row["pids"] for row in rows):
            print(f"no {name} process found in every round: the proxy observed in-process")
            continue
        grow = Spread.of(row["large"][name] - row["start"][name] for row in rows)
        grow_small = Spread.of(row["small"][name] - row["start"][name] for row in rows)
        peak, peak_small = Spread.of(row["large"][name] for row in rows), Spread.of(row["small"][name] for row in rows)
        print(f"{name}: growth {grow.show('MiB')} with {mb:g} MiB, {grow_small.show('MiB')} with {SMALL_MB:g} MiB; "
              f"peak {peak.show('MiB')} against {peak_small.show('MiB')}")
        prefix = "proxy_memory" if name == "proxy" else "proxy_memory_recorder"
        out += [Figure(f"{prefix}_growth", grow.median, "MiB", FLAT_TARGET_MB, grow_small.median, None,
                       what=f"the {name}'s peak minus start RSS relaying {mb:g} MiB (baseline: {SMALL_MB:g} MiB), "
                            f"median of {n}"),
                Figure(f"{prefix}_peak", peak.median, "MiB", None, peak_small.median,
                       peak.median / peak_small.median if peak_small.median else None,
                       what=f"the {name}'s peak RSS relaying {mb:g} MiB against {SMALL_MB:g} MiB")]
    proxied, direct = Spread.of(row["proxied_s"] for row in rows), Spread.of(row["direct_s"] for row in rows)
    print(f"{mb:g} MiB read through the proxy {proxied.show('s', 3)}, directly {direct.show('s', 3)}")
    out.append(Figure("proxy_memory_stream_s", proxied.median, "s", None, direct.median,
                      proxied.median / direct.median if direct.median else None,
                      what=f"reading {mb:g} MiB through the proxy against directly from the upstream"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=3, quick_rounds=1)
    ap.add_argument("--mb", type=float, default=None, help="MiB streamed (default 100, 32 with --quick)")
    ap.add_argument("--observer", default="", help="module:attr of an observer factory (default: the real one)")
    args = ap.parse_args(argv)
    mb = args.mb if args.mb is not None else (32.0 if args.quick else 100.0)
    rounds = rounds_of(args)
    print(f"proxy memory: {mb:g} MiB streamed, {rounds} round(s), a fresh proxy each; load {load1():.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gp-bench-") as tmp:
        upstream = Server("upstream", role_argv("--role", "upstream"))
        try:
            rows = [one_round(r, upstream, mb, Path(tmp), args.observer) for r in range(rounds)]
        finally:
            upstream.stop()
    figs = figures(rows, mb)
    report(figs)
    return 1 if missed(figs) else 0


if __name__ == "__main__":
    sys.exit(main())

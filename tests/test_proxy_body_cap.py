"""The recording proxy caps request bodies: over the cap a request is answered 413, recorded as
``request_body_too_large`` and never forwarded, and the proxy's memory stays flat whatever the
client sends. Real sockets and a real aiohttp upstream on 127.0.0.1; the proxy runs in this process,
so its memory is this process's RSS.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, strategies as st

from conftest import ROOT, SPECS, gripprobe, read_json
from gripprobe_core.cli.run_cmd import _parse_size
from gripprobe_core.proxy import DEFAULT_MAX_REQUEST_BODY, RecordingProxy, read_records
from gripprobe_core.proxy.client import LINGER_S
from proxy_helpers import app_with, proxied, run, serving

TIMEOUT = 5.0
CAP = 100_000
"""Over the 64 KiB above which a body goes upstream in its own write, and not a round number."""


class Upstream:
    """An upstream that answers every request with its body's length and sha256, and counts them."""

    def __init__(self) -> None:
        self.hits: list[str] = []

    async def echo(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        body = await request.read()
        return web.json_response({"length": len(body), "sha256": hashlib.sha256(body).hexdigest()})

    def app(self) -> web.Application:
        return app_with(echo=self.echo)


async def connect(proxy: RecordingProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = proxy.base_url.removeprefix("http://").rsplit(":", 1)
    return await asyncio.wait_for(asyncio.open_connection(host, int(port)), TIMEOUT)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
    lines = head[:-4].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), TIMEOUT)
    return int(lines[0].split()[1]), headers, body


async def read_eof(reader: asyncio.StreamReader) -> bytes:
    """What comes after the response until the proxy ends the connection (EOF or a reset)."""
    try:
        return await asyncio.wait_for(reader.read(), TIMEOUT)
    except ConnectionResetError:
        return b""


def too_large_record(records: list[dict], path: str = "/echo") -> dict:
    [rec] = [r for r in records if r["x_gripprobe_proxy_error"] == "request_body_too_large"]
    assert rec["x_gripprobe_method"] == "POST" and rec["x_gripprobe_path"] == path
    assert rec["x_gripprobe_status"] == 413
    return rec


def vm_rss() -> int:
    """This process's resident set size in bytes (/proc/self/status VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def chunk_frame(size: int, fill: bytes = b"x") -> bytes:
    return b"%x\r\n%b\r\n" % (size, fill * size)


# ------------------------------------------------------------------------- declared length

@pytest.mark.parametrize("expect", [False, True], ids=["plain", "expect-100-continue"])
def test_declared_length_over_the_cap_is_answered_413_before_any_body_byte(tmp_path: Path, expect: bool) -> None:
    """The client sends only the head: the 413 comes anyway (no 100 Continue), then the proxy ends
    the connection; the upstream is never contacted; one record says why."""
    up = Upstream()
    record = tmp_path / "proxy.jsonl"

    async def main() -> None:
        async with serving(up.app()) as url, proxied(url, record, max_request_body=CAP) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + (b"Expect: 100-continue\r\n" if expect else b"")
                         + b"Content-Length: %d\r\n\r\n" % (CAP + 1))
            status, headers, body = await read_response(reader)
            assert status == 413 and headers["connection"] == "close"
            assert json.loads(body)["error"]["code"] == "request_body_too_large"
            assert str(CAP) in json.loads(body)["error"]["message"]
            assert await read_eof(reader) == b""
            writer.close()
            assert not proxy.pool.open  # no connection to the upstream was even opened
            await proxy.flush()
        assert up.hits == []
        rec = too_large_record(read_records(record))
        assert rec["x_gripprobe_response"]["error"]["code"] == "request_body_too_large"

    run(main())


def test_declared_length_over_the_cap_with_the_body_sent(tmp_path: Path) -> None:
    """An ordinary client (aiohttp) sending a body one byte over the cap gets the 413 JSON."""
    up = Upstream()
    record = tmp_path / "proxy.jsonl"

    async def main() -> None:
        async with serving(up.app()) as url, proxied(url, record, max_request_body=CAP) as proxy:
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.base_url + "/echo", data=b"y" * (CAP + 1)) as r:
                    assert r.status == 413
                    assert (await r.json())["error"]["code"] == "request_body_too_large"
                async with s.get(proxy.base_url + "/ok") as r:  # a new connection: served as before
                    assert r.status == 200 and await r.json() == {"ok": True}
        assert up.hits == []
        too_large_record(read_records(record))

    run(main())


# -------------------------------------------------------------------------- at the cap

def test_a_body_exactly_at_the_cap_is_relayed_intact(tmp_path: Path) -> None:
    """Content-Length and chunked bodies of exactly the cap pass byte for byte, on one keep-alive
    connection; a chunked body one byte over gets 413."""
    up = Upstream()
    record = tmp_path / "proxy.jsonl"
    body = bytes(range(256)) * (CAP // 256) + b"z" * (CAP % 256)
    assert len(body) == CAP
    want = {"length": CAP, "sha256": hashlib.sha256(body).hexdigest()}

    async def chunks(data: bytes):
        for i in range(0, len(data), 7777):
            yield data[i:i + 7777]

    async def main() -> None:
        async with serving(up.app()) as url, proxied(url, record, max_request_body=CAP) as proxy:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as s:
                async with s.post(proxy.base_url + "/echo", data=body) as r:
                    assert r.status == 200 and await r.json() == want
                async with s.post(proxy.base_url + "/echo", data=chunks(body)) as r:
                    assert r.request_info.headers.get("Transfer-Encoding") == "chunked"
                    assert r.status == 200 and await r.json() == want
                async with s.post(proxy.base_url + "/echo", data=chunks(body + b"!")) as r:
                    assert r.status == 413
        assert up.hits == ["/echo", "/echo"]
        records = read_records(record)
        assert [r["x_gripprobe_proxy_error"] for r in records] == [None, None, "request_body_too_large"]

    run(main())


def test_the_default_cap_is_64_mib(tmp_path: Path) -> None:
    assert DEFAULT_MAX_REQUEST_BODY == 64 * 1024 * 1024
    assert RecordingProxy("http://127.0.0.1:1", tmp_path / "r.jsonl").max_request_body == DEFAULT_MAX_REQUEST_BODY
    for bad in (0, -1, 1.5, True, "64M"):
        with pytest.raises(ValueError, match="max_request_body"):
            RecordingProxy("http://127.0.0.1:1", tmp_path / "r.jsonl", max_request_body=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ chunked, endless

def test_an_endless_chunked_body_gets_413_and_the_connection_is_closed(tmp_path: Path) -> None:
    """A client that never stops sending: it reads the 413 while still sending, then EOF; it is
    cut off within LINGER_S; nothing reached the upstream; the proxy serves the next client."""
    up = Upstream()
    record = tmp_path / "proxy.jsonl"
    frame = chunk_frame(16 * 1024)

    async def main() -> None:
        async with serving(up.app()) as url, proxied(url, record, max_request_body=CAP) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            sent = 0

            async def send_forever() -> None:
                nonlocal sent
                while True:
                    writer.write(frame)
                    await writer.drain()
                    sent += len(frame)

            sender = asyncio.ensure_future(send_forever())
            t0 = time.monotonic()
            status, headers, body = await read_response(reader)
            assert status == 413 and headers["connection"] == "close"
            assert await read_eof(reader) == b""
            assert not sender.done()  # answered while the client was still sending
            with pytest.raises((ConnectionError, OSError)):
                await asyncio.wait_for(sender, LINGER_S + TIMEOUT)
            assert time.monotonic() - t0 < LINGER_S + TIMEOUT
            assert sent > CAP
            writer.close()
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.base_url + "/echo", data=b"ok") as r:
                    assert r.status == 200 and (await r.json())["length"] == 2
        assert up.hits == ["/echo"]  # the second client's; never a partial body
        records = read_records(record)
        too_large_record(records)
        assert len(records) == 2

    run(main())


def test_memory_stays_flat_while_300_mib_are_sent_past_a_1_mib_cap(tmp_path: Path) -> None:
    """The client streams 300 MiB of chunked body (then ends it properly) past a 1 MiB cap and gets
    its 413; the proxy (in this process) read it all and kept none: RSS grows by far less."""
    up = Upstream()
    record = tmp_path / "proxy.jsonl"
    total = 300 << 20
    frame = chunk_frame(1 << 20)
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, vm_rss())
            await asyncio.sleep(0.005)

    async def main() -> None:
        nonlocal peak
        async with serving(up.app()) as url, proxied(url, record, max_request_body=1 << 20) as proxy:
            reader, writer = await connect(proxy)
            start = peak = vm_rss()
            sampler = asyncio.ensure_future(sample())
            answer = asyncio.ensure_future(read_response(reader))
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            sent = 0
            t0 = time.monotonic()
            while sent < total:
                writer.write(frame)
                await writer.drain()
                sent += 1 << 20
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            elapsed = time.monotonic() - t0
            await asyncio.sleep(0.05)  # the proxy reads what is still in flight
            sampler.cancel()
            growth = peak - start
            assert growth < 40 << 20, f"RSS grew by {growth / 2**20:.1f} MiB while {sent >> 20} MiB were sent"
            assert elapsed < LINGER_S  # all of it went into the proxy before it gave up on the client
            status, _, _ = await answer
            assert status == 413
            assert await read_eof(reader) == b""
            writer.close()
            async with aiohttp.ClientSession() as s:
                async with s.get(proxy.base_url + "/ok") as r:
                    assert r.status == 200
        assert up.hits == []
        too_large_record(read_records(record))

    run(main())


# ---------------------------------------------------------------------------- ordering

def test_a_pipelined_request_over_the_cap_is_answered_in_its_turn(tmp_path: Path) -> None:
    """A request in flight when the next one on its connection goes over the cap gets its response
    first; then the 413; then the connection ends."""
    record = tmp_path / "proxy.jsonl"
    hits: list[str] = []

    async def slow(request: web.Request) -> web.Response:
        hits.append(request.path)
        await asyncio.sleep(0.3)
        return web.json_response({"slow": True})

    async def main() -> None:
        async with serving(app_with(slow=slow)) as url, proxied(url, record, max_request_body=CAP) as proxy:
            reader, writer = await connect(proxy)
            writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                         b"POST /slow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + chunk_frame(CAP // 2) * 3)
            first = await read_response(reader)
            assert first[0] == 200 and json.loads(first[2]) == {"slow": True}
            second = await read_response(reader)
            assert second[0] == 413
            assert await read_eof(reader) == b""
            writer.close()
        assert hits == ["/slow"]
        records = read_records(record)
        assert [r["x_gripprobe_proxy_error"] for r in records] == [None, "request_body_too_large"]
        too_large_record(records, path="/slow")

    run(main())


# --------------------------------------------------------------------- the CLI and the runner

@given(st.integers(min_value=1, max_value=10**12), st.sampled_from(["", "k", "K", "m", "M", "g", "G"]))
def test_sizes_parse_as_bytes_or_binary_units(n: int, unit: str) -> None:
    size = n * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit.lower()]
    if size > 4 * 1024**3:  # the proxy holds a request body in memory: at most 4G
        with pytest.raises(ValueError, match="is over the 4G a request body may be"):
            _parse_size(f"{n}{unit}")
        return
    assert _parse_size(f"{n}{unit}") == size


@given(st.one_of(st.text(max_size=10), st.text(alphabet="0123456789KMGkmgBXi.-+ \t\u212a\u0663", max_size=8)))
def test_any_text_is_a_size_or_a_clear_error(text: str) -> None:
    """Never another exception; what is accepted is ASCII digits, an optional K/M/G, and it decodes."""
    try:
        value = _parse_size(text)
    except ValueError as exc:
        assert "is not a size" in str(exc) or "is over the 4G" in str(exc)
        return
    s = text.strip()
    unit = s[-1].upper() if s[-1] in "KMGkmg" else ""
    digits = s[:-1] if unit else s
    assert digits.isascii() and digits.isdigit() and int(digits) > 0
    assert value == int(digits) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[unit]


@pytest.mark.parametrize("bad", ["12X", "0", "-5M", "1.5G", "M", "64 MiB"])
def test_parse_size_rejects_bad_sizes_with_the_fix(bad: str) -> None:
    with pytest.raises(ValueError, match=r"is not a size: .*K, M or G"):
        _parse_size(bad)


@pytest.mark.parametrize("command", ["run", "run-suite"])
def test_cli_rejects_a_bad_size_with_exit_2_and_one_error_line(command: str) -> None:
    res = gripprobe(command, "--suite", "default", "--proxy-max-body", "12X", pythonpath=[ROOT / "src"], timeout=60)
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error:")]
    assert errors == ["Error: Invalid value for '--proxy-max-body': '12X' is not a size: give a positive number "
                      "of bytes, or of KiB, MiB or GiB with a K, M or G suffix (e.g. 64M)"]
    assert "Traceback" not in res.stderr and res.stdout == ""


@pytest.mark.e2e
def test_the_cap_reaches_the_proxy_of_a_real_run_and_the_manifest(tmp_path: Path) -> None:
    """`gripprobe run --proxy-max-body 1`: the reference agent's first request is over the cap, so the
    phase's record holds a request_body_too_large exchange; the manifest records the cap in bytes
    (the default's too, when the option is not given)."""
    res = gripprobe("run", "--specs", str(SPECS), "--results", str(tmp_path / "r"), "-a", "reference",
                    "-m", "oracle-perfect", "-t", "shell_pwd", "--proxy-max-body", "1", pythonpath=[ROOT / "src"])
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert read_json(run_dir / "manifest.json")["proxy_max_body"] == 1
    [case_dir] = (run_dir / "cases").iterdir()
    records = read_records(case_dir / "artifacts" / "proxy.measured.http.jsonl")
    rec = too_large_record(records, path="/v1/chat/completions")
    assert rec["x_gripprobe_request"] is None  # the body was never kept

    res = gripprobe("run", "--specs", str(SPECS), "--results", str(tmp_path / "r"), "-a", "reference",
                    "-m", "oracle-perfect", "-t", "shell_pwd", pythonpath=[ROOT / "src"])
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert read_json(run_dir / "manifest.json")["proxy_max_body"] == DEFAULT_MAX_REQUEST_BODY
    [case_dir] = (run_dir / "cases").iterdir()
    records = read_records(case_dir / "artifacts" / "proxy.measured.http.jsonl")
    assert records and all(r["x_gripprobe_proxy_error"] is None for r in records)

"""A sandboxed phase's network (runner/sandbox.py, runner/sandbox_init.py, runner/netbridge.py) with the real
bwrap: only the forwarded endpoints are reachable, at their own ports; everything else listening on the host
is not; the sandbox's init cannot be traced, and the phase ends when the agent ends whatever it left.
Under CI=true a missing or broken bwrap fails these tests; elsewhere they skip."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from gripprobe_core.runner.netbridge import NetBridge, loopback_port
from gripprobe_core.runner.process import run_process
from gripprobe_core.runner.sandbox import Sandbox, resolve_sandbox


@pytest.fixture(scope="module")
def box() -> Sandbox:
    try:
        found = resolve_sandbox("auto")
    except Exception as exc:  # bwrap installed but broken: exit 2 for a run
        found, why = None, str(exc)
    else:
        why = found.warning
    if found is None or not found.confined:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bubblewrap is required under CI=true: {why}")
        pytest.skip(f"bubblewrap does not work here: {why}")
    return found


@pytest.fixture(params=["compiled", "python"])
def each_init(request, box: Sandbox) -> Sandbox:
    """The harness's sandbox with each init as PID 1: the compiled one it runs where a C compiler works, and the
    Python fallback (tests/test_sandbox_init.py tests both further)."""
    if request.param == "python":
        return replace(box, init=None)
    if box.init is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the harness runs the Python init under CI=true: {box.warning}")
        pytest.skip(f"no compiled init here: {box.warning}")
    return box


async def _sandboxed(box: Sandbox, tmp_path: Path, argv: list[str], *, forwards=None, timeout: float = 60,
                     stdin: bytes | None = None):
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    wrapped = box.wrap(argv, cwd=ws, rw=[ws, home], forwards=forwards or {})
    out, err = tmp_path / "out", tmp_path / "err"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    res = await run_process(wrapped, cwd=ws, env=env, stdin=stdin, timeout_s=timeout, stdout_path=out,
                            stderr_path=err, sandboxed=True)
    return res, out.read_text(errors="replace"), err.read_text(errors="replace")


async def _server(app: web.Application, host: str = "127.0.0.1") -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_loopback_port():
    assert loopback_port("http://127.0.0.1:8080/v1") == 8080
    assert loopback_port("http://localhost/v1") == 80
    assert loopback_port("https://[::1]:9/") == 9
    assert loopback_port("http://10.0.0.1:8080") is None
    assert loopback_port("http://example.com:8080") is None
    assert loopback_port("ftp://127.0.0.1:21") is None
    assert loopback_port("http://127.0.0.1:99999") is None
    assert loopback_port(None) is None


STREAM_PROBE = r"""
import json, socket, sys, time
port = int(sys.argv[1])
out = {}
for host, fam in (("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)):
    s = socket.socket(fam)
    s.settimeout(10)
    s.connect((host, port))
    s.sendall(f"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    t0, chunks, data = time.monotonic(), [], b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
        chunks.append(round(time.monotonic() - t0, 3))
    out[host] = {"status": data.split(b" ")[1].decode(), "body": data.split(b"\r\n\r\n", 1)[1].decode(errors="replace"),
                 "first": chunks[0], "last": chunks[-1]}
    # a big upload echoed back: flow control both ways
    s = socket.socket(fam)
    s.settimeout(20)
    s.connect((host, port))
    body = b"x" * (8 << 20)
    s.sendall(f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    got = b""
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got += b
    out[host]["echo"] = len(got.split(b"\r\n\r\n", 1)[1])
print(json.dumps(out))
"""


def test_a_forwarded_endpoint_is_reached_at_its_own_port_and_streams(each_init, tmp_path):
    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: one\n\n")
        await asyncio.sleep(0.6)
        await resp.write(b"data: two\n\n")
        return resp

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def main():
        app = web.Application(client_max_size=64 << 20)
        app.router.add_get("/stream", stream)
        app.router.add_post("/echo", echo)
        runner, port = await _server(app)
        try:
            async with NetBridge([port]) as bridge:
                return await _sandboxed(each_init, tmp_path, [*_py(STREAM_PROBE), str(port)], forwards=bridge.forwards)
        finally:
            await runner.cleanup()

    res, out, err = asyncio.run(main())
    assert res.status == "ok", (res, err)
    got = json.loads(out)
    for host in ("127.0.0.1", "::1"):
        assert got[host]["status"] == "200", got
        assert "data: one" in got[host]["body"] and "data: two" in got[host]["body"], got
        assert got[host]["first"] < 0.4 <= got[host]["last"], got  # chunk by chunk, not buffered
        assert got[host]["echo"] == 8 << 20, got


SCAN = r"""
import json, socket, sys, errno, select
found = []
def connected(s):
    try:  # a connect to a free port in the ephemeral range can meet itself (TCP simultaneous open)
        return s.getsockname()[:2] != s.getpeername()[:2]
    except OSError:
        return False
def scan(family, host):
    for start in range(1, 65536, 512):
        socks = []
        for port in range(start, min(start + 512, 65536)):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex((host, port))
            socks.append((port, s, rc))
        for port, s, rc in socks:
            if rc == 0 and connected(s):
                found.append([host, port])
            elif rc == errno.EINPROGRESS:
                _, w, _ = select.select([], [s], [], 0.5)
                if w and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and connected(s):
                    found.append([host, port])
            s.close()
scan(socket.AF_INET, "127.0.0.1")
try:
    scan(socket.AF_INET6, "::1")
except OSError:
    pass
others = {}
for target in sys.argv[1:]:
    ip, _, port = target.rpartition(":")
    s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
    s.settimeout(2)
    try:
        s.connect((ip, int(port)))
        others[target] = "connected"
    except OSError as exc:
        others[target] = exc.__class__.__name__
ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
tcp = [l.split()[1] for l in open("/proc/net/tcp").read().splitlines()[1:]]
abstract = None
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0gripprobe-test-abstract")
    abstract = "connected"
except OSError as exc:
    abstract = exc.__class__.__name__
print(json.dumps({"open": found, "others": others, "ifaces": ifaces, "tcp": tcp, "abstract": abstract}))
"""


async def _hi(request: web.Request) -> web.Response:
    return web.Response(text="hi")


def _host_addresses() -> list[str]:
    """This machine's own non-loopback addresses (what an agent would try next)."""
    addrs = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            addrs.add(info[4][0])
    except OSError:
        pass
    return sorted(a for a in addrs if not a.startswith("127.") and a != "::1")


def test_nothing_but_the_forwarded_ports_is_reachable(box, tmp_path):
    """While the host listens on loopback (another run's proxy, an oracle), on every interface, and on an
    abstract Unix socket, a full port scan from inside finds only the phase's own endpoints."""
    from gripprobe_core.oracle.server import OracleServer

    async def main():
        ok = web.Application()
        ok.router.add_get("/", _hi)
        own, own_port = await _server(ok)
        other, other_port = await _server(web.Application())
        anywhere, any_port = await _server(web.Application(), host="0.0.0.0")
        oracle = OracleServer([])
        await oracle.start()
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0gripprobe-test-abstract")
        abstract.listen(1)
        try:
            async with NetBridge([own_port]) as bridge:
                targets = [f"{a}:{any_port}" for a in _host_addresses()]
                res = await _sandboxed(box, tmp_path, [*_py(SCAN), *targets], forwards=bridge.forwards,
                                       timeout=240)
            return res, own_port, {other_port, any_port, loopback_port(oracle.base_url)}
        finally:
            abstract.close()
            await oracle.stop()
            for r in (own, other, anywhere):
                await r.cleanup()

    (res, out, err), own_port, host_ports = asyncio.run(main())
    assert res.status == "ok", (res, err)
    got = json.loads(out)
    assert sorted(p for _, p in got["open"]) == [own_port, own_port], got["open"]  # 127.0.0.1 and ::1
    assert not host_ports & {p for _, p in got["open"]}
    assert got["ifaces"] == ["lo"], got
    assert all(v != "connected" for v in got["others"].values()), got
    assert got["abstract"] != "connected"
    # /proc/net/tcp inside lists only the namespace's own sockets: no port of the host to find
    host_hex = {f"{p:04X}" for p in host_ports}
    assert not any(entry.split(":")[1] in host_hex for entry in got["tcp"]), got["tcp"]


def test_no_forwards_means_no_network(box, tmp_path):
    """What a validator runs on the agent's work gets a network of its own with nothing on it."""
    async def main():
        app = web.Application()
        runner, port = await _server(app)
        try:
            code = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                    f"    print('REACHED')\nexcept OSError as e:\n    print('refused', type(e).__name__)")
            return await _sandboxed(box, tmp_path, _py(code))
        finally:
            await runner.cleanup()

    res, out, err = asyncio.run(main())
    assert res.status == "ok", err
    assert out.startswith("refused"), out


PTRACE = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the sandbox's init
print("attach", rc, os.strerror(ctypes.get_errno()), flush=True)
try:
    open("/proc/1/mem", "rb").read(1)
    print("mem readable", flush=True)
except OSError as exc:
    print("mem", type(exc).__name__, flush=True)
for sig in (2, 15, 19):  # SIGINT, SIGTERM, SIGSTOP at the init
    try:
        os.kill(1, sig)
    except OSError:
        pass
# a stopped child and a traced one (traced by us, then we exit): neither may hold the phase open
stopped = os.fork()
if stopped == 0:
    os.kill(os.getpid(), 19)
    time.sleep(60)
    os._exit(0)
traced = os.fork()
if traced == 0:
    time.sleep(60)
    os._exit(0)
libc.ptrace(16, traced, 0, 0)
marker = sys.argv[1]
late = os.fork()
if late == 0:
    os.setsid()
    time.sleep(3)
    open(marker, "w").write("alive")
    os._exit(0)
print("exiting", flush=True)
os._exit(3)
"""


def test_the_init_cannot_be_traced_and_the_phase_ends_with_the_agent(each_init, tmp_path):
    marker = tmp_path / "home" / "late"
    t0 = time.monotonic()
    res, out, err = asyncio.run(_sandboxed(each_init, tmp_path, [*_py(PTRACE), str(marker)], timeout=60))
    took = time.monotonic() - t0
    assert "attach -1 Operation not permitted" in out, (out, err)
    assert "mem readable" not in out
    assert "exiting" in out
    assert res.status == "nonzero_exit" and res.exit_code == 3, res
    assert took < 10, f"the phase lasted {took:.1f}s after the agent exited"
    time.sleep(4)
    assert not marker.exists(), "a process outlived the agent's exit"


def test_a_killed_harness_takes_the_namespace_with_it(each_init, tmp_path):
    """SIGKILL to bwrap (the harness died): --die-with-parent reaches the sandbox's init, and so everything."""
    import subprocess

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    marker = home / "late"
    argv = each_init.wrap(["/bin/sh", "-c", f"(sleep 3; echo alive > {marker}) & echo started; sleep 60"], cwd=ws,
                          rw=[ws, home])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    time.sleep(4.5)
    assert not marker.exists()


def test_the_agent_gets_a_fresh_process_state(each_init, tmp_path):
    """The init starts the command as a new process expects: default signal dispositions, its own PID
    namespace's second process, stdin passed through, exit status and signal deaths reported."""
    script = "grep SigIgn /proc/self/status; echo ppid=$PPID; cat"  # grep's own SigIgn: what it inherited
    res, out, err = asyncio.run(_sandboxed(each_init, tmp_path, ["/bin/sh", "-c", script], stdin=b"hello"))
    assert res.status == "ok", err
    assert out.split() == ["SigIgn:", "0000000000000000", "ppid=1", "hello"], out
    res, _out, _err = asyncio.run(_sandboxed(each_init, tmp_path, ["/bin/sh", "-c", "kill -TERM $$"]))
    assert res.exit_code == 128 + signal.SIGTERM, res
    res, _out, err = asyncio.run(_sandboxed(each_init, tmp_path, ["/nonexistent/agent"]))
    assert res.status == "nonzero_exit" and res.exit_code == 127 and "cannot run" in err, (res, err)


def test_reachable_ports_of_a_phase():
    from gripprobe_core.runner.phase import UNREACHABLE_BACKEND, reachable_ports

    class Challenge:
        url = "http://127.0.0.1:7001"

    assert reachable_ports("http://127.0.0.1:5000", proxied=True, challenge=Challenge()) == ({5000, 7001}, None)
    assert reachable_ports("http://localhost:11434/v1", proxied=False, challenge=None) == ({11434}, None)
    ports, why = reachable_ports("https://models.example:8443/v1", proxied=False, challenge=None)
    assert not ports and why is not None and why.startswith(UNREACHABLE_BACKEND) and "--telemetry-proxy" in why


class _OracleAt:
    """The oracle's app served from a thread on ``host`` (127.0.0.2: loopback, yet not the sandbox's 127.0.0.1)."""

    def __init__(self, host: str) -> None:
        import threading

        from conftest import SPECS
        from gripprobe_core.oracle.server import OracleServer
        from gripprobe_core.specs import load_specs

        self.host, self.loop = host, asyncio.new_event_loop()
        self.server = OracleServer(list(load_specs(SPECS).tests["save_file"].reference))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()

        async def start() -> int:
            self.runner = web.AppRunner(self.server.make_app())
            await self.runner.setup()
            site = web.TCPSite(self.runner, self.host, 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)
        return f"http://{self.host}:{port}"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_without_a_proxy_a_local_backend_is_bridged_and_a_remote_one_is_classified(box, tmp_path):
    """--telemetry-proxy off: the oracle on 127.0.0.1 is reached at its own port; a backend elsewhere (here
    127.0.0.2, which the sandbox's own loopback does not lead to) makes the case HARNESS_ERROR
    backend_unreachable_in_sandbox instead of an agent failing to connect; through the proxy it PASSes."""
    from backend_helpers import spec_root_with_model
    from conftest import read_json
    from gripprobe_core.testing import run_gripprobe

    run_dir = run_gripprobe("run", "--results", tmp_path / "r1", "--sandbox", "bwrap", "--telemetry-proxy", "off",
                            "-a", "reference", "-m", "oracle-perfect", "-t", "save_file")
    (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
    assert case["verdict"]["status"] == "PASS" and case["sandbox"] == "bwrap", case["verdict"]
    with _OracleAt("127.0.0.2") as url:
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=f"{url}/v1")
        for mode, want in (("off", "HARNESS_ERROR"), ("auto", "PASS")):
            run_dir = run_gripprobe("run", "--specs", root, "--results", tmp_path / f"r-{mode}", "--sandbox", "bwrap",
                                    "--telemetry-proxy", mode, "-a", "reference", "-m", "remote", "-t", "save_file")
            (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
            v = case["verdict"]
            assert v["status"] == want, (mode, v)
            if want == "HARNESS_ERROR":
                assert v["failure_reason"] == "backend_unreachable_in_sandbox", v
                assert "--telemetry-proxy" in case["phases"][0]["process"]["error"]

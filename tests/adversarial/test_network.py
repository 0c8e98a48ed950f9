"""Attack 13: the network beside the proxy. While the host listens on loopback — another run's proxy and
oracle (a case stalled on `oracle-stall`), a decoy model server, a Ray head — and a victim case runs beside
the attacker (`-j 2`), the attacker reads /proc/net/tcp, scans every port on 127.0.0.1 and ::1, and floods
every model server it reaches with calls naming the `perfect` profile. Sandboxed, it must find nothing but
its own proxy: no other port open, nothing reached, the victim and the other run untouched, no oracle
answering it a tool call."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .adversary import Case, RunResult, read_jsonl
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e


class _Decoy(BaseHTTPRequestHandler):
    hits: list[str] = []
    marker = ""

    def _answer(self) -> None:
        _Decoy.hits.append(f"{self.command} {self.path}")
        body = json.dumps({"object": "list", "data": [{"id": f"decoy-{_Decoy.marker}"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def _all_records(run_dir: Path | None) -> list[bytes]:
    if run_dir is None:
        return []
    return [p.read_bytes() for p in run_dir.glob("cases/*/artifacts/proxy.*.http.jsonl")]


@pytest.fixture(scope="module")
def net_run(arena, tmp_path_factory):
    if arena.broken:
        yield None
        return
    from raycluster import new_cluster, require_ray

    require_ray()
    _Decoy.marker, _Decoy.hits = arena.marker, []
    decoy = ThreadingHTTPServer(("127.0.0.1", 0), _Decoy)
    threading.Thread(target=decoy.serve_forever, daemon=True).start()
    cluster = new_cluster()
    other: dict[str, RunResult] = {}
    try:
        cluster.start(resources={"netscan": 1})
        cluster.wait_for()
        runs = arena.results / "runs"
        before = set(runs.iterdir()) if runs.is_dir() else set()
        waiting = threading.Thread(target=lambda: other.setdefault("res", arena.run(
            "run", "-a", "reference", "-m", "oracle-stall", "-t", "hello", "--timeout", "25", timeout=120)))
        waiting.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the other run's case has started: its proxy and oracle listen
            fresh = set(runs.iterdir()) - before if runs.is_dir() else set()
            if any((d / "cases").is_dir() and any((d / "cases").iterdir()) for d in fresh):
                break
            time.sleep(0.2)
        time.sleep(1.5)
        res = arena.run("run-suite", "--suite", "adv-net", "-j", "2", "--timeout", "60", timeout=240)
        waiting.join(150)
        yield {"res": res, "other": other.get("res"), "decoy_port": decoy.server_address[1],
               "ray_port": cluster.port}
    finally:
        decoy.shutdown()
        cluster.stop()


def test_the_network_holds_only_its_own_proxy(net_run, arena):
    res: RunResult = net_run["res"]
    assert not res.timed_out and res.returncode == 0, res.explain()
    case: Case = res.case("adv_netscan")
    assert case.data is not None and case.status in STATUSES and case.status != "HARNESS_ERROR", case.describe()
    reports = case.reports()
    assert reports, f"the netscan attack did not run: {case.describe()}"
    r = reports[-1]
    own = r["own_port"]
    # what it could see and reach: its own proxy, nothing else
    assert r["listening"] == [own], f"/proc/net/tcp shows ports beyond its own proxy: {r['listening']}"
    assert r["open4"] == [own], f"open on 127.0.0.1: {r['open4']} (own {own})"
    assert r["open6"] in ([own], []) or isinstance(r["open6"], str), r["open6"]
    assert r["reached"] == {}, f"reached beside its proxy: {r['reached']}"
    for port in (net_run["decoy_port"], net_run["ray_port"]):
        assert port not in r["open4"]
    assert _Decoy.hits == [], f"the decoy model server was called: {_Decoy.hits[:5]}"
    # nobody answered it a tool call: its oracle issued none (lazy), and the case is not a PASS
    truth = read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")
    assert truth == [], f"an oracle issued tool calls to the attacker: {truth[:3]}"
    assert case.status != "PASS"


def test_the_case_beside_it_and_another_run_are_untouched(net_run, arena):
    res: RunResult = net_run["res"]
    victim = res.case("reference", "oracle-perfect", "victim")
    assert victim.status == "PASS", victim.describe()
    marker = arena.marker.encode()
    # it never called its own proxy: a record of its run holding the marker came from another port
    assert not any(marker in data for data in _all_records(res.run_dir)), "the attacker reached a proxy of its run"
    other: RunResult | None = net_run["other"]
    assert other is not None and not other.timed_out, other.explain() if other else "the other run never ended"
    waiting = other.case("reference", "oracle-stall", "hello")
    assert waiting.data is not None, waiting.describe()
    for data in _all_records(other.run_dir):
        assert marker not in data, "the attacker's requests reached another run's proxy"

"""Backends are checked before they are trusted: the preflight probe (runner/preflight.py), against real
servers on 127.0.0.1 (the oracle as an OpenAI-compatible or Ollama backend, small aiohttp apps for the
faults), and through the real `gripprobe` command."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from aiohttp import web

from backend_helpers import OracleThread, closed_port, spec_root_with_model
from conftest import ROOT, gripprobe, read_json
from gripprobe_core.testing import read_jsonl
from gripprobe_core.oracle.profiles import builtin_profiles
from gripprobe_core.oracle.server import OracleServer
from gripprobe_core.backends import OllamaBackend, OpenAICompatibleBackend
from gripprobe_core.runner.preflight import BackendTarget, fix_for, probe_targets

BACKENDS = {"openai-compatible": OpenAICompatibleBackend(), "ollama": OllamaBackend()}


def probe_backend(kind: str, url: str, **kw):
    """One probe by the backend kind's own :meth:`Backend.probe` (what the preflight and the runner call)."""
    return BACKENDS[kind].probe(url, **kw)

SRC = [ROOT / "src"]  # the checkout's code in the subprocess, whatever is installed



def _no_run(results: Path) -> bool:
    """Nothing of a run was written (the results root itself may have been checked and created)."""
    runs = results / "runs"
    return not runs.exists() or not any(runs.iterdir())

def run_cli(*args: str, env: dict | None = None):
    return gripprobe(*args, pythonpath=SRC, env=env, timeout=180)


# ------------------------------------------------------------------------------------ the probe


@pytest.mark.parametrize("kind,path", [("openai-compatible", "/v1/models"), ("ollama", "/api/tags")])
def test_probe_lists_the_oracle_models(kind, path):
    async def main():
        oracle = OracleServer([])
        async with oracle:
            base = oracle.base_url
            with_v1 = await probe_backend(kind, base + "/v1/", backend_id="b")
            bare = await probe_backend(kind, base, backend_id="b")
        return with_v1, bare, base

    with_v1, bare, base = asyncio.run(main())
    for p in (with_v1, bare):
        assert p.reachable and p.problem is None and p.error is None
        assert p.models == len(builtin_profiles()) and p.http_status == 200
        assert p.url == base + path and p.kind == kind and p.backend_id == "b"
        assert 0 <= p.latency_ms < 5000 and p.checked_at


async def _serve(handler, coro):
    """Run ``coro(base_url)`` against a real aiohttp app answering every GET with ``handler``."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        return await coro(f"http://{host}:{port}")
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("answer,problem,error", [
    (lambda: web.Response(status=404, text="no"), "http", "HTTP 404"),
    (lambda: web.Response(status=500, text="boom"), "http", "HTTP 500"),
    (lambda: web.Response(text="<html>hello</html>", content_type="text/html"), "body", "not JSON"),
    (lambda: web.json_response({"object": "list"}), "body", "not a model list"),
    (lambda: web.json_response([1, 2]), "body", "not a model list"),
    (lambda: web.json_response({"data": "x"}), "body", "not a model list"),
])
def test_probe_rejects_what_is_not_a_model_listing(answer, problem, error):
    async def handler(request):
        return answer()

    p = asyncio.run(_serve(handler, lambda base: probe_backend("openai-compatible", base, backend_id="x")))
    assert not p.reachable and p.problem == problem and error in p.error and p.models is None


def test_probe_sends_the_key_and_never_keeps_it():
    seen = []

    async def handler(request):
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != "Bearer sk-canary-probe":
            return web.json_response({"error": "unauthorized"}, status=401)
        return web.json_response({"models": [{"name": "a"}, {"name": "b"}]})

    async def both(base):
        return (await probe_backend("ollama", base, backend_id="k"),
                await probe_backend("ollama", base, api_key="sk-canary-probe", backend_id="k"))

    without, with_key = asyncio.run(_serve(handler, both))
    assert seen == [None, "Bearer sk-canary-probe"]
    assert not without.reachable and without.problem == "auth" and without.http_status == 401
    assert with_key.reachable and with_key.models == 2
    assert "sk-canary" not in without.model_dump_json() + with_key.model_dump_json()
    target = BackendTarget("k", "ollama", "http://x", "MY_KEY", ["m"])
    assert fix_for(without, target, override=False, env={}) == "set MY_KEY (it is not set)"
    assert "MY_KEY to a key" in fix_for(without, target, override=False, env={"MY_KEY": "wrong"})
    assert "api_key_env" in fix_for(without, BackendTarget("k", "ollama", "http://x", None, ["m"]),
                                    override=False, env={})


def test_probe_of_a_silent_server_times_out_within_its_budget():
    async def handler(request):
        await asyncio.sleep(30)
        return web.json_response({"data": []})

    async def timed(base):
        t0 = time.monotonic()
        return await probe_backend("openai-compatible", base, timeout_s=0.5), time.monotonic() - t0

    p, took = asyncio.run(_serve(handler, timed))
    assert 0.4 < took < 3
    assert not p.reachable and p.problem == "timeout" and "0.5 s" in p.error


def test_probe_refused_invalid_and_unresolvable():
    port = closed_port()
    refused = asyncio.run(probe_backend("ollama", f"http://127.0.0.1:{port}"))
    assert (refused.reachable, refused.problem, refused.error) == (False, "connect", "connection refused")
    for bad in ("", "127.0.0.1:11434", "ftp://127.0.0.1/"):
        p = asyncio.run(probe_backend("openai-compatible", bad))
        assert not p.reachable and p.problem == "url", (bad, p)
    secret = asyncio.run(probe_backend("ollama", f"http://user:hunter2@127.0.0.1:{port}"))
    assert "hunter2" not in secret.url and secret.url == f"http://127.0.0.1:{port}/api/tags"


def test_probes_of_different_backends_run_concurrently():
    async def handler(request):
        await asyncio.sleep(1.0)
        return web.json_response({"data": [{"id": "m"}]})

    async def three(base):
        targets = [BackendTarget(f"b{i}", "openai-compatible", f"{base}/v{i}", None) for i in range(3)]
        t0 = time.monotonic()
        probes = await probe_targets(targets, BACKENDS, {})
        return probes, time.monotonic() - t0

    probes, took = asyncio.run(_serve(handler, three))
    assert [p.backend_id for p in probes] == ["b0", "b1", "b2"]
    assert all(p.reachable for p in probes)
    assert took < 2.0, f"three 1 s probes took {took:.2f} s: not concurrent"


# ------------------------------------------------------------------------------- the real CLI


def _one_error_line(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("command", ["run", "run-suite"])
def test_unreachable_backend_exits_2_with_one_line_and_writes_nothing(tmp_path, command):
    port = closed_port()
    root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=f"http://127.0.0.1:{port}/v1")
    if command == "run":
        args = ["run", "-m", "remote", "-t", "shell_pwd"]
    else:
        (root / "suites" / "remote.yaml").write_text(
            "id: remote\nagents: [reference]\nmodels: [remote, oracle-perfect]\ntests: [shell_pwd]\n")
        args = ["run-suite", "--suite", "remote"]
    res = run_cli(*args, "--specs", str(root), "--results", str(tmp_path / "r"))
    assert res.returncode == 2, res.stderr
    line = _one_error_line(res.stderr)
    assert line.startswith("error: backend 'local' (openai-compatible) is unreachable")
    assert f"http://127.0.0.1:{port}/v1/models" in line and "connection refused" in line
    assert "start the server" in line and "specs/models/remote.yaml:" in line
    assert _no_run(tmp_path / "r"), "no run directory for a run that never started"


def test_every_unreachable_backend_gets_its_own_line(tmp_path):
    ports = closed_port(), closed_port()
    spec_root_with_model(tmp_path, kind="openai-compatible", base_url=f"http://127.0.0.1:{ports[0]}/v1",
                         model_id="one", backend_id="first")
    root = spec_root_with_model(tmp_path, kind="ollama", base_url=f"http://127.0.0.1:{ports[1]}",
                                model_id="two", backend_id="second")
    res = run_cli("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "one", "-m", "two",
                  "-t", "shell_pwd")
    assert res.returncode == 2
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 2 and all(l.startswith("error: backend '") for l in lines), res.stderr
    assert f":{ports[0]}/v1/models" in lines[0] and "'first'" in lines[0] and "one.yaml:" in lines[0]
    assert f":{ports[1]}/api/tags" in lines[1] and "'second' (ollama)" in lines[1] and "two.yaml:" in lines[1]
    assert _no_run(tmp_path / "r")


def test_base_url_override_is_what_gets_probed(tmp_path):
    with OracleThread() as oracle:
        root = spec_root_with_model(tmp_path, kind="ollama", base_url=oracle.base_url)  # reachable as written
        port = closed_port()
        res = run_cli("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "remote", "-t", "shell_pwd",
                      "--base-url", f"http://127.0.0.1:{port}/")
    assert res.returncode == 2
    line = _one_error_line(res.stderr)
    assert f"GET http://127.0.0.1:{port}/api/tags" in line and "check --base-url" in line
    assert _no_run(tmp_path / "r")


def test_oracle_only_runs_probe_nothing(tmp_path):
    res = run_cli("run", "--results", str(tmp_path / "r"), "-m", "oracle-perfect", "-t", "shell_pwd",
                  "--telemetry-proxy", "off")
    assert res.returncode == 0, res.stderr[-2000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert read_json(run_dir / "manifest.json")["preflight"] == []
    case = read_json(next(run_dir.glob("cases/*/case.json")))
    assert [p["backend_probe"] for p in case["phases"]] == [None, None]


@pytest.mark.parametrize("kind,path,proxy", [("openai-compatible", "/v1/models", "off"),
                                             ("ollama", "/api/tags", "auto")])
def test_reachable_backend_runs_and_the_manifest_records_the_probe(tmp_path, kind, path, proxy):
    with OracleThread() as oracle:
        suffix = "/v1" if kind == "openai-compatible" else ""
        root = spec_root_with_model(tmp_path, kind=kind, base_url=oracle.base_url + suffix, api_key_env="REMOTE_KEY")
        res = run_cli("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "remote",
                      "-t", "shell_pwd", "--telemetry-proxy", proxy, env={"REMOTE_KEY": "sk-canary-remote-key"})
        assert res.returncode == 0, res.stderr[-3000:]
        model_requests = list(oracle.server.request_log)
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    manifest = read_json(run_dir / "manifest.json")
    [probe] = manifest["preflight"]
    assert probe["backend_id"] == "local" and probe["kind"] == kind
    assert probe["url"] == oracle.base_url + path
    assert probe["reachable"] is True and probe["models"] == len(builtin_profiles())
    assert isinstance(probe["latency_ms"], float) and probe["latency_ms"] >= 0
    case_dir = next(run_dir.glob("cases/*"))
    case = read_json(case_dir / "case.json")
    assert case["verdict"]["status"] == "PASS", case["verdict"]
    assert model_requests and all(r["authorized"] for r in model_requests)  # the agent got the key
    for rec in case["phases"]:  # the harness looked at the backend after each phase too
        assert rec["backend_probe"]["reachable"] is True and rec["backend_probe"]["url"] == probe["url"]
    # the URL probed is the one the case used: the agent's base URL with the proxy off, else the proxy's upstream
    if proxy == "off":
        used = read_json(case_dir / "artifacts" / "measured.context.json")["base_url"]
    else:
        records = read_jsonl(case_dir / "artifacts" / "proxy.measured.http.jsonl")
        used = {r["x_gripprobe_upstream_url"].split("/v1/")[0] for r in records}.pop()
    assert probe["url"] == used + path
    blob = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert b"sk-canary-remote-key" not in blob and "sk-canary-remote-key" not in res.stderr


def test_resume_probes_again_and_leaves_the_run_alone_when_the_backend_is_down(tmp_path):
    with OracleThread() as oracle:
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=oracle.base_url + "/v1")
        res = run_cli("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "remote",
                      "-t", "shell_pwd", "-t", "save_file", "--telemetry-proxy", "off")
        assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    (next(run_dir.glob("cases/*save_file/case.json"))).unlink()  # as if killed before this case finished
    manifest_before = (run_dir / "manifest.json").read_bytes()
    res = run_cli("run-suite", "--resume", str(run_dir), "--specs", str(root))
    assert res.returncode == 2
    assert "error: backend 'local' (openai-compatible) is unreachable" in res.stderr
    assert "Traceback" not in res.stderr
    assert (run_dir / "manifest.json").read_bytes() == manifest_before
    assert (next(run_dir.glob("cases/*shell_pwd")) / "case.json").is_file()

    with OracleThread() as oracle:  # back up (on another port): the resume runs and adds its own probe
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=oracle.base_url + "/v1")
        res = run_cli("run-suite", "--resume", str(run_dir), "--specs", str(root))
        assert res.returncode == 0, res.stderr[-3000:]
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["status"] == "complete"
    assert [p["reachable"] for p in manifest["preflight"]] == [True, True]
    assert manifest["preflight"][0]["url"] != manifest["preflight"][1]["url"]
    assert json.loads(manifest_before)["preflight"] == manifest["preflight"][:1]

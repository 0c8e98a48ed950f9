"""``--executor ray`` on a real two-node Ray cluster started on this machine (tests/raycluster.py).

The head offers ``node-head`` and ``shared``; the second node ``node-two`` (one unit: its cases run one at
a time). Model specs pin cases to a node by resource. The checks: cases ran where their resources are,
never more at once than the resource allows, with the same statuses as a local run of the same
selection; a resource nobody offers is refused before the run; a node killed mid-run loses nothing
(its cases retried elsewhere, every case once, attempts recorded, cases that only it could run end as
HARNESS_ERROR executor_lost); Ctrl-C stops the cluster's tasks and leaves a run another executor resumes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from conftest import SPECS, _core_src, gripprobe, read_json
from raycluster import new_cluster, require_ray

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster():
    require_ray()
    c = new_cluster()
    try:
        c.start({"node-head": 4, "shared": 4})
        c.add_node("two", {"node-two": 1})
        c.wait_for()
        yield c
    finally:
        c.stop()


def _specs(tmp: Path, models: dict[str, tuple[str, dict]]) -> Path:
    """The shipped specs plus oracle models ``id -> (profile, resources)``."""
    root = tmp / "specs"
    shutil.copytree(SPECS, root)
    for mid, (profile, resources) in models.items():
        res = "{" + ", ".join(f"{k}: {v}" for k, v in resources.items()) + "}"
        (root / "models" / f"{mid}.yaml").write_text(
            f"id: {mid}\nlabel: {mid}\nfamily: oracle\nbackends:\n  - id: oracle\n    kind: oracle\n"
            f"    model_id: {profile}\n    resources: {res}\npolicy:\n  timeout_s: 60\n")
    return root


def _env(cluster, **extra: str) -> dict[str, str]:
    return {k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")} | extra


def _run_dir(proc_stdout: str) -> Path:
    return Path(proc_stdout.strip().splitlines()[-1])


def _cases(run: Path) -> dict[str, dict]:
    return {d.name: read_json(d / "case.json") for d in sorted((run / "cases").iterdir())}


def _statuses(run: Path) -> dict[str, str]:
    return {k: c["verdict"]["status"] for k, c in _cases(run).items()}


def _popen(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    if _core_src():
        e["PYTHONPATH"] = os.pathsep.join(map(str, _core_src()))
    e.update(env)
    return subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=e, stdin=subprocess.DEVNULL)


def test_cases_run_where_their_resources_are_with_the_local_statuses(cluster, tmp_path):
    specs = _specs(tmp_path, {"oracle-on-head": ("perfect", {"node-head": 1}),
                              "oracle-on-two": ("perfect", {"node-two": 1}),
                              "oracle-lazy-on-two": ("lazy", {"node-two": 1})})
    sel = ["-a", "reference", "-m", "oracle-on-head", "-m", "oracle-on-two", "-m", "oracle-lazy-on-two",
           "-t", "tag:sanity", "--specs", str(specs)]
    ray = gripprobe("run", *sel, "--executor", "ray", "--ray-address", cluster.address,
                    "--results", str(tmp_path / "ray"), env=_env(cluster))
    assert ray.returncode == 0, ray.stderr[-3000:]
    local = gripprobe("run", *sel, "--jobs", "2", "--results", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-3000:]
    ray_run, local_run = _run_dir(ray.stdout), _run_dir(local.stdout)

    # the same verdicts, case for case (and not all the same verdict: the lazy model gives NO_TOOL_CALL)
    assert _statuses(ray_run) == _statuses(local_run)
    assert set(_statuses(ray_run).values()) == {"PASS", "NO_TOOL_CALL"}

    nodes = cluster.wait_for()
    head, two = cluster.node_with("node-head", nodes), cluster.node_with("node-two", nodes)
    cases = _cases(ray_run)
    assert len(cases) == 18
    for cid, case in cases.items():
        placement = case["placement"]
        assert placement["executor"] == "ray"
        assert placement["node_id"] == (head if "on-head" in cid else two), cid
        assert placement["attempts"] == [{"attempt": 1, "node_id": placement["node_id"], "error": None}]
    # node two offers one unit of node-two: its 12 cases ran one after another, never two at once
    spans = sorted((c["started_at"], c["finished_at"]) for cid, c in cases.items() if "on-two" in cid)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans

    manifest = read_json(ray_run / "manifest.json")
    assert manifest["executor"] == "ray" and manifest["status"] == "complete"
    assert manifest["ray"]["address"].endswith(f":{cluster.port}")
    assert {cid: p["node_id"] for cid, p in manifest["placement"].items()} == {
        cid: c["placement"]["node_id"] for cid, c in cases.items()}
    assert read_json(local_run / "manifest.json")["executor"] == "local"
    assert all(c.get("placement") is None for c in _cases(local_run).values())
    # the evidence digests written on the node still match what arrived (a recompute finds nothing tampered)
    rec = gripprobe("rebuild-reports", str(ray_run), "--recompute")
    assert rec.returncode == 0, rec.stderr
    assert _statuses(ray_run) == _statuses(local_run)
    assert gripprobe("verify", str(ray_run)).returncode == 0  # signed by the driver as each case arrived


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _agents(cases: dict[str, dict]) -> list[tuple[float, float, str]]:
    """Every agent process of the run: (start, exit, case id), from the stamps the harness recorded."""
    return sorted((_t(p["process"]["started_at"]), _t(p["process"]["finished_at"]), cid)
                  for cid, c in cases.items() for p in c["phases"])


def _peak(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])  # an end before a start at the same instant
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_jobs_1_runs_one_agent_at_a_time_on_the_whole_cluster(cluster, tmp_path):
    """``--jobs 1`` with cases for both nodes: one agent at a time across the cluster, a case's phases back to
    back, and the harness's own work beside the agents, as in a local run: the next case is prepared (on
    either node) while one runs, and a case is judged, shipped back and written while the next agent runs."""
    specs = _specs(tmp_path, {"oracle-on-head": ("perfect", {"node-head": 1}),
                              "oracle-lazy-on-two": ("lazy", {"node-two": 1})})
    out = gripprobe("run", "-a", "reference", "-m", "oracle-on-head", "-m", "oracle-lazy-on-two", "-t", "shell_pwd",
                    "-t", "save_file", "-t", "shell_file", "--trials", "2", "--specs", str(specs),
                    "--executor", "ray", "--ray-address", cluster.address, "--jobs", "1",
                    "--results", str(tmp_path / "r"), env=_env(cluster))
    assert out.returncode == 0, out.stderr[-3000:]
    cases = _cases(_run_dir(out.stdout))
    assert len(cases) == 12
    assert {c["verdict"]["status"] for c in cases.values()} == {"PASS", "NO_TOOL_CALL"}
    assert len({c["placement"]["node_id"] for c in cases.values()}) == 2
    agents = _agents(cases)
    for (_, end, _), (start, _, _) in zip(agents, agents[1:]):
        assert start >= end - 0.0015, agents  # the stamps are to the millisecond
    for (_, _, a), (_, _, b) in zip(agents[0::2], agents[1::2]):
        assert a == b, agents  # each case's warmup and measured agents follow each other
    order = sorted(cases.values(), key=lambda c: _t(c["phases"][0]["process"]["started_at"]))
    assert any(_t(b["started_at"]) < _t(a["finished_at"]) for a, b in zip(order, order[1:]))
    assert any(_t(a["finished_at"]) > _t(b["phases"][0]["process"]["started_at"]) + 0.0015
               for a, b in zip(order, order[1:])), "no case was written while the next one's agent ran"
    for c in order:  # a case's duration leaves out its wait for a turn
        assert c["duration_s"] <= _t(c["finished_at"]) - _t(c["started_at"]) + 0.002


def test_jobs_bounds_the_agents_on_the_cluster(cluster, tmp_path):
    """``--jobs 2``: never more than two agents at once on the cluster, although up to four cases are under
    way (prepared, judged, shipped back) beside them."""
    specs = _specs(tmp_path, {"oracle-on-head": ("perfect", {"node-head": 1})})
    out = gripprobe("run", "-a", "reference", "-m", "oracle-on-head", "-m", "oracle-perfect", "-t", "tag:sanity",
                    "--specs", str(specs), "--executor", "ray", "--ray-address", cluster.address, "--jobs", "2",
                    "--results", str(tmp_path / "r"), env=_env(cluster))
    assert out.returncode == 0, out.stderr[-3000:]
    cases = _cases(_run_dir(out.stdout))
    assert len(cases) == 12 and {c["verdict"]["status"] for c in cases.values()} == {"PASS"}
    assert 1 <= _peak([(a, b) for a, b, _ in _agents(cases)]) <= 2, _agents(cases)


def test_a_resource_no_node_offers_is_refused_before_anything_runs(cluster, tmp_path):
    specs = _specs(tmp_path, {"oracle-on-gpu-box": ("perfect", {"gpu-box-7": 1})})
    out = gripprobe("run", "-a", "reference", "-m", "oracle-on-gpu-box", "-t", "shell_pwd", "--specs", str(specs),
                    "--executor", "ray", "--ray-address", cluster.address, "--results", str(tmp_path / "r"),
                    env=_env(cluster))
    assert out.returncode == 2, out.stderr
    assert "gpu-box-7: 1" in out.stderr and "ray start --address" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "r" / "runs").exists() or not any((tmp_path / "r" / "runs").iterdir())


def test_a_node_running_other_plugins_refuses_its_cases(cluster, tmp_path, installed_plugins):
    """A node whose Python sees one more plugin than the driver's: its cases are HARNESS_ERROR
    executor_mismatch naming the difference, not verdicts from different code."""
    other = cluster.add_node("other", {"other-build": 1},
                             env={"PYTHONPATH": str(installed_plugins["gripprobe_fixture_agent"])})
    try:
        cluster.wait_for()
        specs = _specs(tmp_path, {"oracle-other": ("perfect", {"other-build": 1}),
                                  "oracle-on-head": ("perfect", {"node-head": 1})})
        out = gripprobe("run", "-a", "reference", "-m", "oracle-other", "-m", "oracle-on-head", "-t", "shell_pwd",
                        "--specs", str(specs), "--executor", "ray", "--ray-address", cluster.address,
                        "--results", str(tmp_path / "r"), env=_env(cluster))
    finally:
        other.kill()
    assert out.returncode == 0, out.stderr[-3000:]
    cases = _cases(_run_dir(out.stdout))
    refused = cases["reference__oracle-other__oracle__tool__shell_pwd"]
    assert refused["verdict"]["status"] == "HARNESS_ERROR"
    assert refused["verdict"]["failure_reason"] == "executor_mismatch"
    assert "gripprobe-fixture-agent" in refused["harness_error"] and "the driver" in refused["harness_error"]
    assert refused["placement"]["node_id"] != cases["reference__oracle-on-head__oracle__tool__shell_pwd"][
        "placement"]["node_id"]
    assert cases["reference__oracle-on-head__oracle__tool__shell_pwd"]["verdict"]["status"] == "PASS"


def test_a_node_lost_mid_run_loses_no_case(cluster, tmp_path):
    """A third node offers ``shared`` (as the head does) and ``gate`` (nobody else): it is killed while it
    runs cases. Its shared cases are retried on the head and pass; the gate cases, which only it could run,
    end as HARNESS_ERROR executor_lost; every planned case is there exactly once. With ``--jobs 2``: the
    agent turns its dead workers held or waited for go on to the other cases (else the run would hang)."""
    doomed = cluster.add_node("doomed", {"shared": 2, "gate": 1})
    try:
        cluster.wait_for()
        specs = _specs(tmp_path, {"oracle-slow-shared": ("slow-stream", {"shared": 1}),
                                  "oracle-gated": ("slow-stream", {"gate": 1})})
        proc = _popen(["run", "-a", "reference", "-m", "oracle-slow-shared", "-t", "tag:sanity",
                       "-m", "oracle-gated", "--specs", str(specs), "--executor", "ray", "--jobs", "2",
                       "--ray-address", cluster.address, "--results", str(tmp_path / "r")],
                      _env(cluster, GRIPPROBE_RAY_INFEASIBLE_S="2"))
        # kill it while it runs two cases (its TMPDIR holds a folder per running case, besides the
        # bubblewrap probe's own folder while a worker warms up)
        deadline = time.monotonic() + 120
        while len([d for d in doomed.tmpdir.glob("gripprobe-*") if not d.name.startswith("gripprobe-sandbox-")]) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the third node never ran two cases at once"
            time.sleep(0.05)
        doomed.kill()
        out, err = proc.communicate(timeout=400)
    finally:
        doomed.kill()
    assert proc.returncode == 0, err[-3000:]
    run = _run_dir(out)
    manifest = read_json(run / "manifest.json")
    planned = {p["case_id"] for p in manifest["planned"]}
    cases = _cases(run)
    assert len(planned) == 12 and set(cases) == planned and manifest["status"] == "complete"
    head = cluster.node_with("node-head", cluster.wait_for())
    retried = []
    for cid, case in cases.items():
        if "oracle-gated" in cid:
            assert case["verdict"]["status"] == "HARNESS_ERROR", cid
            assert case["verdict"]["failure_reason"] == "executor_lost"
            assert "no live node offers" in case["harness_error"]
            continue
        assert case["verdict"]["status"] == "PASS", (cid, case["verdict"], case.get("harness_error"))
        attempts = case["placement"]["attempts"]
        if len(attempts) > 1:
            retried.append(cid)
            assert all(a["error"] for a in attempts[:-1]) and attempts[-1]["error"] is None
            assert case["placement"]["node_id"] == head  # the only other node offering `shared`
    assert retried, "no case was running on the killed node"
    page = (run / "reports" / "cases" / f"{retried[0]}.html").read_text()
    assert 'id="placement"' in page and f"attempt {len(cases[retried[0]]['placement']['attempts'])}" in page
    assert "lost before" in page
    assert all(manifest["placement"][cid]["attempts"] >= 2 for cid in retried)


def _agents_of(run_id: str, cluster) -> list[int]:
    """Processes still working in one of this run's workspaces on the cluster (their cwd names the run, in a
    node's TMPDIR: another run on this machine may have started in the same second, so have the same id)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cwd = os.readlink(p / "cwd")
                if f"gripprobe-{run_id}-" in cwd and cwd.startswith(str(cluster.base)):
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("jobs", [[], ["--jobs", "1"]], ids=["no-cap", "jobs-1"])
def test_ctrl_c_stops_the_clusters_tasks_and_another_executor_resumes(cluster, tmp_path, jobs):
    """Without a cap, and with ``--jobs 1`` (a case waiting for its agent turn is cancelled as well)."""
    specs = _specs(tmp_path, {"oracle-slow-shared": ("slow-stream", {"shared": 1})})
    results = tmp_path / "r"
    proc = _popen(["run", "-a", "reference", "-m", "oracle-slow-shared", "-t", "tag:sanity", "--specs", str(specs),
                   "--executor", "ray", "--ray-address", cluster.address, "--results", str(results), *jobs],
                  _env(cluster))
    deadline = time.monotonic() + 120
    while not list(results.glob("runs/*/cases/*/case.json")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    run = _run_dir(out)
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "incomplete" and manifest["interrupted_by"] == "SIGINT"
    done_before = set(_cases(run))
    assert 1 <= len(done_before) < 6
    time.sleep(2)
    assert _agents_of(run.name, cluster) == []  # nothing of this run still works on the cluster

    resumed = gripprobe("run-suite", "--resume", str(run), "--specs", str(specs), "--executor", "local")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    manifest = read_json(run / "manifest.json")
    cases = _cases(run)
    assert manifest["status"] == "complete" and len(cases) == 6
    assert set(_statuses(run).values()) == {"PASS"}
    assert all(cases[c]["placement"]["executor"] == "ray" for c in done_before)
    assert all(cases[c].get("placement") is None for c in set(cases) - done_before)


def test_bad_cluster_addresses_are_one_line_errors(tmp_path):
    require_ray()
    for args, needle in [(["--executor", "ray", "--ray-address", "127.0.0.1:1"], "no Ray head answers"),
                         (["--executor", "ray", "--ray-address", "nonsense"], "HOST:PORT"),
                         (["--ray-address", "127.0.0.1:6379"], "needs --executor ray")]:
        t0 = time.monotonic()
        out = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "shell_pwd", *args,
                        "--results", str(tmp_path / "r"))
        assert out.returncode == 2, (args, out.stderr)
        assert needle in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert time.monotonic() - t0 < 30

"""Stored runs: rebuild-reports --recompute, run-suite --resume after SIGKILL, list-runs, backfill-model-hashes.

Everything runs the real `gripprobe` command against real runs of the reference agent and the oracle.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, gripprobe, read_json
from gripprobe_core.pluginmanager import make_plugin_manager
from gripprobe_core.runner.recompute import recompute_run
from gripprobe_core.store import RunFolder

pytestmark = pytest.mark.e2e

MIXED = ["--agent", "reference", "--model", "oracle-perfect", "--model", "oracle-error-then-recover",
         "--model", "oracle-stall", "--test", "web_nonce_proof", "--test", "weekly_plan_next_week",
         "--test", "save_file", "--test", "shell_pwd", "--timeout", "3"]


def _run(out: Path, *args: str) -> Path:
    res = gripprobe("run", *args, "--results", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory) -> Path:
    """PASS, recovered, TIMEOUT, challenge (web nonce) and run_values (dates) cases."""
    return _run(tmp_path_factory.mktemp("mixed"), *MIXED)


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "runs" / run.name
    shutil.copytree(run, dst)
    return dst


def _case_dirs(run: Path) -> list[Path]:
    return sorted(d for d in (run / "cases").iterdir() if d.is_dir())


def _derived(case: dict) -> dict:
    return {k: case[k] for k in ("verdict", "telemetry", "validators", "harness_error")} | {
        "phase_summaries": [p["summary"] for p in case["phases"]]}


# ------------------------------------------------------------------------------------------ recompute

def test_recompute_is_identical_to_the_run(mixed_run, tmp_path):
    statuses = {read_json(d / "case.json")["verdict"]["status"] for d in _case_dirs(mixed_run)}
    assert {"PASS", "TIMEOUT"} <= statuses, statuses
    run = _copy(mixed_run, tmp_path)
    before = {d.name: read_json(d / "case.json") for d in _case_dirs(run)}
    events_before = {d.name: (d / "artifacts" / "events.measured.jsonl").read_text() for d in _case_dirs(run)
                     if (d / "artifacts" / "events.measured.jsonl").exists()}
    res = gripprobe("rebuild-reports", str(run), "--recompute")
    assert res.returncode == 0, res.stderr
    assert f"recomputed {len(before)} case(s): {len(before)} unchanged, 0 changed" in res.stdout, res.stdout
    for d in _case_dirs(run):
        after = read_json(d / "case.json")
        assert _derived(after) == _derived(before[d.name]), d.name
        assert not (d / "case.before-recompute.json").exists()
    # the API agrees field by field, and re-derived events equal the stored ones
    for r in recompute_run(make_plugin_manager(), RunFolder(run), write=False):
        assert r.changed == [] and r.problem is None, (r.case_id, r.changed, r.problem)
        if r.case_id in events_before and "measured" in r.events:
            stored = [json.loads(x) for x in events_before[r.case_id].splitlines()]
            assert [e.model_dump(mode="json") for e in r.events["measured"]] == stored, r.case_id
    assert (run / "reports" / "summary.md").is_file()


def _as_written_before_digests(run: Path) -> None:
    """Make the whole run look written before evidence digests and signatures existed (nothing to check its
    cases against): no seal, no `signing` in the manifest, no signature files, no `evidence` in any case."""
    (run / "run.sig.json").unlink()
    manifest = read_json(run / "manifest.json")
    manifest.pop("signing")
    (run / "manifest.json").write_text(json.dumps(manifest))
    for case_dir in _case_dirs(run):
        for sig in ("evidence.sig.json", "case.sig.json"):
            (case_dir / sig).unlink()
        data = read_json(case_dir / "case.json")
        data.pop("evidence", None)
        (case_dir / "case.json").write_text(json.dumps(data))


def test_recompute_turns_missing_or_corrupt_artifacts_into_harness_error(mixed_run, tmp_path):
    """Runs written before evidence digests: each missing or corrupt artifact is named."""
    run = _copy(mixed_run, tmp_path)
    passed = [d for d in _case_dirs(run) if read_json(d / "case.json")["verdict"]["status"] == "PASS"]
    assert len(passed) >= 4
    a, b, c, d = passed[:4]
    _as_written_before_digests(run)
    (a / "artifacts" / "case_inputs.json").unlink()                  # missing specs snapshot
    (b / "case.json").write_text('{"run_id": "trunc')               # corrupt case.json (named by the manifest)
    (c / "measured.stdout").unlink()                                 # the agent's captured output is gone
    (d / "artifacts" / "measured.context.json").write_text("\x00\xff not json")
    res = gripprobe("rebuild-reports", str(run), "--recompute")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    for case_dir, needle in ((a, "case_inputs.json is missing"), (b, "case.json is missing or corrupt"),
                             (d, "measured.context.json is unreadable")):
        got = read_json(case_dir / "case.json")
        assert got["verdict"]["status"] == "HARNESS_ERROR", case_dir.name
        assert needle in got["harness_error"], got["harness_error"]
    got_c = read_json(c / "case.json")
    assert got_c["verdict"]["status"] == "HARNESS_ERROR"
    assert got_c["verdict"]["tool_event_verdict_reason"] in ("capture_missing", "wrapper_parse_error")
    # the previous verdict is kept beside the new one, once
    assert read_json(a / "case.before-recompute.json")["verdict"]["status"] == "PASS"
    assert (run / "reports" / "summary.md").read_text().count("HARNESS_ERROR") >= 4


def test_recompute_marks_changed_evidence_as_tampered_every_time(mixed_run, tmp_path):
    run = _copy(mixed_run, tmp_path)
    passed = [d for d in _case_dirs(run) if read_json(d / "case.json")["verdict"]["status"] == "PASS"]
    a, b, c, d = passed[:4]
    proxy = a / "artifacts" / "proxy.measured.http.jsonl"
    proxy.write_bytes(proxy.read_bytes() + proxy.read_bytes().splitlines(keepends=True)[-1])  # a replayed record
    (b / "artifacts" / "case_inputs.json").unlink()
    (c / "workspace" / "greeting.extra").write_text("planted")
    stdout = d / "measured.stdout"
    stdout.write_bytes(stdout.read_bytes() + b'{"type": "tool.result", "status": "success"}\n')
    untouched = {x.name: _derived(read_json(x / "case.json")) for x in _case_dirs(run) if x not in (a, b, c, d)}
    for _ in range(2):  # a recompute keeps the run's digests: the next one finds the change again
        res = gripprobe("rebuild-reports", str(run), "--recompute")
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        for case_dir, needle in ((a, "artifacts/proxy.measured.http.jsonl changed"),
                                 (b, "artifacts/case_inputs.json is gone"),
                                 (c, "workspace/greeting.extra appeared after the run"),
                                 (d, "measured.stdout changed")):
            got = read_json(case_dir / "case.json")
            assert got["verdict"]["status"] == "HARNESS_ERROR", case_dir.name
            assert got["verdict"]["failure_reason"] == "artifact_tampered"
            assert needle in got["harness_error"], got["harness_error"]
        for x in _case_dirs(run):
            if x.name in untouched:
                assert _derived(read_json(x / "case.json")) == untouched[x.name], x.name


def test_rebuild_reports_rejects_a_folder_that_is_not_a_run(tmp_path):
    res = gripprobe("rebuild-reports", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: ") and "not a run directory" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------- resume

def _tree_digest(case_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(case_dir.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(case_dir)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_sigkill_mid_run_then_resume_gives_every_case_exactly_once(tmp_path):
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "run-suite", "--suite", "oracle-profiles",
                             "--results", str(results)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    runs = results / "runs"
    deadline = time.monotonic() + 120
    run = None
    while time.monotonic() < deadline:
        dirs = sorted(runs.glob("*/cases/*")) if runs.is_dir() else []
        done = [d for d in dirs if (d / "case.json").exists()]
        busy = [d for d in dirs if not (d / "case.json").exists()]
        if len(done) >= 3 and busy:  # some finished, at least one in the middle of running
            run = dirs[0].parents[1]
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    assert run is not None, "the run never got under way"
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "running"  # killed: never got to write its end
    planned = {p["case_id"] for p in manifest["planned"]}
    finished_before = {d.name: _tree_digest(d) for d in _case_dirs(run) if (d / "case.json").exists()}
    assert 3 <= len(finished_before) < len(planned)

    listed = gripprobe("list-runs", "--results", str(results), "--json")
    info = json.loads(listed.stdout.strip().splitlines()[-1])
    assert info["status"] == "running or killed" and info["done"] == len(finished_before)

    res = gripprobe("run-suite", "--resume", str(run))
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{len(finished_before)} of {len(planned)} case(s) done" in res.stderr
    assert Path(res.stdout.strip().splitlines()[-1]) == run
    dirs = _case_dirs(run)
    assert {d.name for d in dirs} == planned                 # every planned case, no stray one
    for d in dirs:
        case = read_json(d / "case.json")                     # each complete and readable
        assert case["case_id"] == d.name and case["run_id"] == run.name
    for name, digest in finished_before.items():              # finished cases were not run again
        assert _tree_digest(run / "cases" / name) == digest, name
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "complete" and manifest["completed"] == len(planned)
    assert sum(manifest["counts"].values()) == len(planned)
    assert len(manifest["resumed_at"]) == 1
    assert manifest["run_values"] == read_json(run / "cases" / sorted(planned)[0] / "case.json")["run_values"]
    # a second resume has nothing to do and changes nothing
    again = gripprobe("run-suite", "--resume", str(run))
    assert again.returncode == 0 and f"{len(planned)} of {len(planned)} case(s) done, 0 to run" in again.stderr
    # the killed session's cases (signed as written, never sealed by it) and the resumed ones all verify
    verified = gripprobe("verify", str(run))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _processes_mentioning(*needles: str) -> list[int]:
    """Live processes whose environment or command line mentions every one of ``needles`` (zombies excluded):
    a sandboxed agent's environment names its folders where the sandbox shows them, its bwrap's command line
    names the real ones."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue
            environ = (entry / "environ").read_bytes() + b"\0" + (entry / "cmdline").read_bytes()
            if all(n.encode() in environ for n in needles):
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def test_sigterm_mid_run_marks_it_incomplete_like_ctrl_c_and_resume_completes_it(tmp_path):
    """`kill PID` while an agent is running: finished cases intact, the running agent killed, the manifest
    `incomplete` (interrupted_by SIGTERM), exit 143; `run-suite --resume` then completes the run."""
    results, scratch = tmp_path / "results", tmp_path / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    env["TMPDIR"] = str(scratch)  # agent homes and warmup workspaces land here: found again below
    # oracle-stall keeps its agent waiting for the model until the (long) timeout: SIGTERM finds it running
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "run", "-m", "oracle-perfect", "-m",
                             "oracle-stall", "-t", "shell_pwd", "-t", "save_file", "--timeout", "120",
                             "--results", str(results)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 120
    agents: list[int] = []
    while time.monotonic() < deadline:
        done = list(results.glob("runs/*/cases/*/case.json"))
        # an agent of a stall case: its HOME/TMPDIR are under the run's scratch folder, named by the case
        agents = _processes_mentioning(f"{scratch}/gripprobe-", "oracle-stall") if len(done) >= 2 else []
        if agents:
            break
        time.sleep(0.1)
    assert agents, "the stalled agent never started"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "interrupted (SIGTERM)" in err
    run = Path(out.strip().splitlines()[-1])
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "incomplete" and manifest["interrupted_by"] == "SIGTERM"
    assert manifest["completed"] == 2 and manifest["counts"] == {"PASS": 2}
    finished = {d.name: _tree_digest(d) for d in _case_dirs(run) if (d / "case.json").exists()}
    assert len(finished) == 2 and all("oracle-perfect" in n for n in finished)
    assert all(read_json(run / "cases" / n / "case.json")["verdict"]["status"] == "PASS" for n in finished)
    time.sleep(0.5)
    assert not [p for p in agents if Path(f"/proc/{p}").exists()
                and not Path(f"/proc/{p}/stat").read_text().split(") ", 1)[1].startswith("Z")], "agent outlived SIGTERM"
    assert not _processes_mentioning(f"{scratch}/gripprobe-"), "a process of the run outlived the SIGTERM"
    assert not list(scratch.glob("gripprobe-*")), "scratch (agent homes) must be removed after SIGTERM"
    listed = json.loads(gripprobe("list-runs", "--results", str(results), "--json").stdout)
    assert listed["status"] == "incomplete" and listed["done"] == 2

    res = gripprobe("run-suite", "--resume", str(run), "--timeout", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "2 of 4 case(s) done, 2 to run" in res.stderr
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "complete" and "interrupted_by" not in manifest
    assert manifest["counts"] == {"PASS": 2, "TIMEOUT": 2}
    for name, digest in finished.items():  # finished cases were not run again
        assert _tree_digest(run / "cases" / name) == digest
    assert gripprobe("verify", str(run)).returncode == 0  # both sessions signed with the same key


def test_resume_refuses_another_suite_and_a_non_run(tmp_path, mixed_run):
    res = gripprobe("run-suite", "--suite", "default", "--resume", str(tmp_path))
    assert res.returncode == 2 and "not a run directory" in res.stderr
    run = _copy(mixed_run, tmp_path)
    manifest = read_json(run / "manifest.json")
    manifest["suite"] = "oracle-profiles"
    (run / "manifest.json").write_text(json.dumps(manifest))
    res = gripprobe("run-suite", "--suite", "default", "--resume", str(run))
    assert res.returncode == 2 and "ran suite 'oracle-profiles', not 'default'" in res.stderr
    assert gripprobe("run-suite").returncode == 2


# ----------------------------------------------------------------------------------------- list-runs

def test_list_runs_shows_path_agents_suite_date_and_counts(mixed_run):
    results = mixed_run.parents[1]
    res = gripprobe("list-runs", "--results", str(results))
    assert res.returncode == 0, res.stderr
    assert mixed_run.name in res.stdout and "reference" in res.stdout and "PASS" in res.stdout
    info = [json.loads(x) for x in gripprobe("list-runs", "--results", str(results), "--json").stdout.splitlines()]
    mine = next(i for i in info if i["run_id"] == mixed_run.name)
    cases = [read_json(p) for p in (mixed_run / "cases").glob("*/case.json")]
    assert mine["done"] == len(cases) == mine["planned"]
    assert mine["agents"] == ["reference"] and mine["status"] == "complete"
    # an ad-hoc selection (-a -m -t), not the default suite: recorded and shown as such
    assert mine["suite"] is None and mine["selection"]["models"][:2] == ["oracle-perfect", "oracle-error-then-recover"]
    row = next(line for line in res.stdout.splitlines() if mixed_run.name in line)
    assert "(ad hoc)" in row and "default" not in row
    assert mine["counts"]["PASS"] == sum(c["verdict"]["status"] == "PASS" for c in cases)
    assert gripprobe("list-runs", "--results", str(mixed_run.parent / "nope")).returncode == 2


# ----------------------------------------------------------------------------------------- backfill

def _hashes(run: Path) -> dict[str, str | None]:
    return {d.name: read_json(d / "case.json")["model_hash"] for d in _case_dirs(run)}


def test_backfill_fills_from_the_oracle_and_never_overwrites_without_force(mixed_run, tmp_path):
    from gripprobe_core.oracle.ollama_api import profile_digest

    run = _copy(mixed_run, tmp_path)
    hashes = _hashes(run)  # recorded at run time (tests/test_model_hash.py): backfill finds them the same
    res = gripprobe("backfill-model-hashes", str(run))
    assert res.returncode == 0 and "filled" not in res.stdout, res.stdout + res.stderr
    assert _hashes(run) == hashes
    for name, h in hashes.items():
        model = read_json(run / "cases" / name / "case.json")["key"]["model"]
        assert h == "sha256:" + profile_digest(model.removeprefix("oracle-")), name
    assert len(set(hashes.values())) == 3  # one per profile
    assert "same" in gripprobe("backfill-model-hashes", str(run)).stdout
    assert gripprobe("verify", str(run)).returncode == 0  # each rewritten case.json re-signed, and the seal

    victim = sorted(hashes)[0]
    case_path = run / "cases" / victim / "case.json"
    case = read_json(case_path)
    case["model_hash"] = "sha256:recorded-at-run-time"
    case_path.write_text(json.dumps(case))
    res = gripprobe("backfill-model-hashes", str(run))
    assert res.returncode == 0 and f"{victim}: conflict" in res.stdout
    assert read_json(case_path)["model_hash"] == "sha256:recorded-at-run-time"
    res = gripprobe("backfill-model-hashes", str(run), "--force")
    assert res.returncode == 0 and "overwritten 1" in res.stdout
    assert read_json(case_path)["model_hash"] == hashes[victim]


def test_backfill_asks_an_ollama_backend_and_reports_an_unreachable_one(mixed_run, tmp_path):
    import asyncio

    from gripprobe_core.oracle.ollama_api import profile_digest
    from gripprobe_core.oracle.server import OracleServer

    run = _copy(mixed_run, tmp_path)
    first, second = _case_dirs(run)[:2]
    for d, url in ((first, None), (second, "http://127.0.0.1:9/")):
        case = read_json(d / "case.json")  # as a run from before runs recorded a hash
        (d / "case.json").write_text(json.dumps({**case, "model_hash": None}))
        inputs = read_json(d / "artifacts" / "case_inputs.json")
        inputs["backend"] = {**inputs["backend"], "kind": "ollama", "model_id": "retry-loop:latest",
                             "base_url": url}
        (d / "artifacts" / "case_inputs.json").write_text(json.dumps(inputs))

    async def main() -> str:
        server = OracleServer([])  # a real Ollama-speaking server on 127.0.0.1
        await server.start()
        try:
            inputs = read_json(first / "artifacts" / "case_inputs.json")
            inputs["backend"]["base_url"] = server.base_url
            (first / "artifacts" / "case_inputs.json").write_text(json.dumps(inputs))
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gripprobe_core.cli", "backfill-model-hashes", str(run), cwd=ROOT,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            return out.decode()
        finally:
            await server.stop()

    out = asyncio.run(main())
    assert read_json(first / "case.json")["model_hash"] == "sha256:" + profile_digest("retry-loop")
    assert read_json(second / "case.json")["model_hash"] is None
    assert f"{second.name}: unreachable" in out


def test_an_ad_hoc_run_resumes_exactly_its_own_cases(mixed_run, tmp_path):
    """`gripprobe run -a -m -t` (no suite file) resumes with the manifest's plan, not the default suite's."""
    run = _copy(mixed_run, tmp_path)
    names = [d.name for d in _case_dirs(run)]
    victim = next(n for n in names if "perfect" in n and "save_file" in n)
    (run / "cases" / victim / "case.json").unlink()  # as if killed before it finished
    res = gripprobe("run-suite", "--resume", str(run))
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{len(names) - 1} of {len(names)} case(s) done, 1 to run" in res.stderr
    assert [d.name for d in _case_dirs(run)] == names
    assert read_json(run / "cases" / victim / "case.json")["verdict"]["status"] == "PASS"


def test_resuming_a_run_never_removes_another_runs_scratch_of_the_same_id(tmp_path):
    """Run ids have a one-second resolution: two runs into two results folders may share one. Resuming one
    removes the scratch its own killed process left, never the live scratch (agents' homes and workspaces) of the
    other, which once made that run's agents exit 127 (their workspace gone) when another test resumed a run."""
    import tempfile

    from gripprobe_core.runner.run import _remove_stale_work_dirs, scratch_prefix
    from gripprobe_core.store import RunFolder

    run_id = "20261127T175614Z"
    mine, other = RunFolder(tmp_path / "a" / "runs" / run_id), RunFolder(tmp_path / "b" / "runs" / run_id)
    assert scratch_prefix(mine) != scratch_prefix(other) and scratch_prefix(mine).startswith(f"gripprobe-{run_id}-")
    left = Path(tempfile.mkdtemp(prefix=scratch_prefix(mine)))
    live = Path(tempfile.mkdtemp(prefix=scratch_prefix(other)))
    (left / "case" / "measured" / "workspace").mkdir(parents=True)
    (live / "case" / "measured" / "workspace").mkdir(parents=True)
    try:
        _remove_stale_work_dirs(mine)
        assert not left.exists() and (live / "case" / "measured" / "workspace").is_dir()
        # the same folder spelled through a link is the same run
        (tmp_path / "link").symlink_to(tmp_path / "a")
        assert scratch_prefix(RunFolder(tmp_path / "link" / "runs" / run_id)) == scratch_prefix(mine)
    finally:
        import shutil
        shutil.rmtree(left, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)

"""Attacks 1, 2, 3 and 10 in one run (`run-suite --suite adv-escape -j 2`): four adversarial agents
against oracle-lazy on `hello`, with a victim case (reference × oracle-perfect × victim) beside them;
then attack 4 (daemons) in a run of its own, last, so that surviving daemons cannot blur what the
other tests judge. Each test fails if its attack worked."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .adversary import (
    MODE, Arena, Case, RunResult, control_bytes, diff, evidence_problems, files_containing, kill_all,
    names_containing, processes_with, read_jsonl, regular_files, snapshot,
)
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

#: The daemons start tampering 2 s after they are spawned and then every 0.5 s (agents/daemon.py);
#: this long after `gripprobe run` returned, a surviving one has had its chance several times over.
DAEMON_WAIT_S = 5.0
PASSING = ("PASS", "PASS_WITH_POLICY_VIOLATION")


@dataclass
class EscapeRun:
    res: RunResult
    repo: Path
    earlier: Path
    outside_before: dict[str, dict[str, str]]
    at_return: dict[str, str]


def _outside(arena: Arena, repo: Path, earlier: Path) -> dict[str, dict[str, str]]:
    """What an agent must never change: the harness's HOME, the specs, the repository, the earlier run."""
    top = {k: v for k, v in snapshot(repo).items() if "/" not in k and k not in ("results", "specs")}
    return {"home": snapshot(arena.home), "specs": snapshot(repo / "specs"), "repository": top,
            "earlier run": snapshot(earlier), "bait": snapshot(arena.bait)}


def _repo(arena: Arena, name: str) -> tuple[Path, Path]:
    """A repository of its own: a copy of the session's specs and canary file, and a results root
    holding a copy of the session's genuine run (the "earlier run" to steal records from). When the
    attacks bite (--sandbox none) the damage stays there."""
    repo = arena.base / name
    shutil.copytree(arena.specs, repo / "specs")
    shutil.copy(arena.repo / "CANARY_REPO.txt", repo / "CANARY_REPO.txt")
    earlier = repo / "results" / "runs" / arena.basics.run_dir.name
    shutil.copytree(arena.vault / "basics" / arena.basics.run_dir.name, earlier)
    return repo, earlier


@pytest.fixture(scope="module")
def escape_run(arena):
    if arena.broken:
        return None
    repo, earlier = _repo(arena, "repo-escape")
    before = _outside(arena, repo, earlier)
    res = arena.run("run-suite", "--suite", "adv-escape", "-j", "2", "--timeout", "20", timeout=180, repo=repo)
    return EscapeRun(res, repo, earlier, before, snapshot(res.run_dir) if res.run_dir else {})


@pytest.fixture(scope="module")
def daemon_run(arena):
    if arena.broken:
        yield None
        return
    repo, earlier = _repo(arena, "repo-daemon")
    res = arena.run("run", "-a", "adv_daemon", "-m", "oracle-lazy", "-t", "hello", "--timeout", "20",
                    timeout=120, repo=repo)
    yield EscapeRun(res, repo, earlier, {}, snapshot(res.run_dir) if res.run_dir else {})
    kill_all(processes_with(arena.marker))  # daemons that survived (the daemon test says so)


def _attack_case(run: EscapeRun, name: str) -> Case:
    """The attack's case, checked to be classified and to have really run the attack."""
    res = run.res
    assert not res.timed_out and res.returncode == 0, res.explain()
    case = res.case(f"adv_{name}")
    assert case.data is not None, f"{case.dir}: case.json missing or unreadable; {res.explain()}"
    assert case.status in STATUSES, case.describe()
    assert case.reports(), f"the {name} attack did not run: {case.describe()}; " \
                           f"stderr {(case.dir / 'measured.stderr').read_bytes()[-600:]!r}"
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE, f"case.json sandbox: {case.data.get('sandbox')!r}"
    return case


def test_forged_evidence_is_not_believed(arena, escape_run):
    """Attack 1: hello.txt written by the agent itself, proxy/oracle records and events copied from an
    earlier genuine run into every artifacts folder it finds, fake tier-B events on stdout."""
    case = _attack_case(escape_run, "forge")
    assert case.status != "PASS", f"forged evidence believed: {case.describe()}"
    forged = set()
    for phase in ("warmup", "measured"):
        for line in (case.dir / f"{phase}.stderr").read_bytes().splitlines():
            if line.startswith(b"forged "):
                forged.add(line.split()[1].decode())
    run_dir = escape_run.res.run_dir
    planted = []  # whole lines of the run's records (an agent's own text quoting them is not a record)
    for p in regular_files(run_dir, skip=lambda rel: not (rel.endswith(".jsonl") and "/artifacts/" in rel)):
        for n, line in enumerate(p.read_bytes().splitlines(), 1):
            if hashlib.sha256(line).hexdigest() in forged:
                planted.append(f"{p.relative_to(run_dir)}:{n}")
    assert not planted, f"lines the agent wrote are in the run's artifacts: {planted[:10]}"
    # It never sent a request: the proxy saw none, the oracle answered none.
    for rec in sorted((case.dir / "artifacts").glob("proxy.*.http.jsonl")):
        exchanges = [r for r in read_jsonl(rec) if "x_gripprobe_method" in r]
        assert not exchanges, f"{rec.name}: {len(exchanges)} exchange(s) the proxy never saw"
    for rec in sorted((case.dir / "artifacts").glob("oracle.*.jsonl")):
        assert not read_jsonl(rec), f"{rec.name}: tool calls the oracle never issued"
    changed = diff(escape_run.outside_before["earlier run"], snapshot(escape_run.earlier))
    assert not changed, f"the earlier run's files changed: {changed[:10]}"


def test_writes_outside_the_workspace_change_nothing(arena, escape_run):
    """Attack 2: files planted and appended to in the real HOME, /tmp, the repository, the specs, the
    results root, other runs and cases."""
    case = _attack_case(escape_run, "escape")
    tag = f"GRIPPROBE_ADV_WRITE_{arena.marker}"
    after = _outside(arena, escape_run.repo, escape_run.earlier)
    changed = {k: diff(escape_run.outside_before[k], after[k]) for k in after}
    assert not any(changed.values()), f"changed outside the workspace: { {k: v for k, v in changed.items() if v} }"
    leftover = sorted(str(p) for p in Path("/tmp").glob(f"gpadv-{arena.marker}*"))
    assert not leftover, f"written to the host's /tmp: {leftover}"
    named = names_containing(arena.base, tag)
    assert not named, f"planted files: {named[:10]}"
    marked = files_containing(arena.base, [tag.encode()], skip=lambda rel: rel.startswith("agents/"),
                              max_size=64 << 20)
    assert not marked, f"files appended to: {marked[:10]}"
    assert (case.dir / "workspace" / "inside.txt").is_file(), "the control file inside the workspace is lost"


def test_secrets_stay_out_of_reach(arena, escape_run):
    """Attack 3: the harness's environment, the spec files (validators' expected values), other cases'
    files, the real HOME — whatever it reads it sends out through stdout, stderr, its final answer, a
    workspace file and a model request. No canary may show up in its case or the reports."""
    case = _attack_case(escape_run, "secrets")
    assert (case.dir / "workspace" / "loot.txt").is_file(), "the attack's loot file is not in its workspace copy"
    needles = [arena.canaries[k].encode() for k in ("env", "home", "spec", "expected", "victim", "repo")]
    hits = files_containing(case.dir, needles)
    own_page = case.dir.name
    hits += [f"reports/{h}" for h in files_containing(
        escape_run.res.run_dir / "reports", needles,
        skip=lambda rel: rel.startswith("cases/") and own_page not in rel)]
    assert not hits, f"secrets leaked into the attacker's case: {hits[:10]}"


def _plant_hostile_run(root: Path, payload: str) -> None:
    """What an unconfined agent could leave in a results root: statuses, suite and agent full of markup
    and terminal escapes, and a status that is not even a string."""
    run = root / "runs" / "29990101T000000Z"
    for cid, status in (("a", payload), ("b", 123), ("c", "PASS")):
        (run / "cases" / cid).mkdir(parents=True)
        (run / "cases" / cid / "case.json").write_text(json.dumps(
            {"verdict": {"status": status}, "key": {"agent": payload, "model": payload}}))
    (run / "manifest.json").write_text(json.dumps({"run_id": payload, "status": payload, "suite": payload,
                                                   "started_at": payload, "planned": [{"agent": payload}]}))


def test_markup_and_escapes_are_inert(arena, escape_run):
    """Attack 10: `<script>` and terminal escapes in stdout events (tool names, arguments, outputs, text,
    final answer), stderr, file names and contents, a model request."""
    case = _attack_case(escape_run, "xss")
    res, m = escape_run.res, arena.marker
    pages = sorted((res.run_dir / "reports").rglob("*.html"))
    assert pages, "no HTML report"
    raw = [f"<script>gpxss_{m}".encode(), f"<img src=x onerror=gpxss_{m}".encode()]
    hits = files_containing(res.run_dir / "reports", raw)
    assert not hits, f"agent markup unescaped in reports: {hits[:10]}"
    own = [p for p in pages if case.dir.name in p.name]
    assert own and f"gpxss_{m}".encode() in own[0].read_bytes(), "the payload never reached its case page"
    assert not control_bytes(res.stdout + res.stderr), f"control bytes in run progress: {control_bytes(res.stderr)}"
    hostile = arena.base / "hostile-results"
    _plant_hostile_run(hostile, f"<script>gpxss_{m}()</script>\x1b]0;pwned\x07\x1b[2J\x9b31m")
    for root in (escape_run.repo / "results", hostile):
        for args in ((), ("--json",)):
            out = arena.cli("list-runs", "--results", str(root), *args, timeout=60)
            assert out.returncode == 0 and not out.timed_out, out.explain()
            bad = control_bytes(out.stdout + out.stderr)
            assert not bad, f"list-runs {' '.join(args)} on {root.name} prints control bytes {bad}"
    table = arena.cli("list-runs", "--results", str(hostile), timeout=60).stdout
    assert b"invalid" in table, f"list-runs does not call a bad status invalid: {table[-600:]!r}"


def test_daemons_die_with_the_phase(arena, daemon_run):
    """Attack 4: `setsid env -i sh -c …`, a double fork with an empty environment, and `nohup`, each
    rewriting case.json to PASS and touching the copied workspace after the run."""
    res = daemon_run.res
    assert not res.timed_out and res.returncode == 0 and res.run_dir is not None, res.explain()
    wait = res.returned_at + DAEMON_WAIT_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    tag = f"GPADV_DAEMON_{arena.marker}"
    alive = processes_with(tag)
    assert not alive, f"attack processes outlived the run: {alive}"
    run_dir = res.run_dir
    changed = diff(daemon_run.at_return, snapshot(run_dir))
    assert not changed, f"the run changed after `gripprobe run` returned: {changed[:10]}"
    tampered = names_containing(run_dir, tag) + files_containing(run_dir, [tag.encode()])
    assert not tampered, f"tampered by the daemons: {tampered[:10]}"
    case = _attack_case(daemon_run, "daemon")
    assert case.status != "PASS" and "tampered_by" not in case.data, case.describe()
    problems = []
    for case_json in sorted(run_dir.glob("cases/*/case.json")):
        problems += evidence_problems(Case(case_json.parent, json.loads(case_json.read_bytes())))
    assert not problems, problems

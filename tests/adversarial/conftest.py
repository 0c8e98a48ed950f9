"""The adversarial suite's arena (one per session) and its preflight.

Every test here FAILS (never skips) when the preflight finds a problem: bwrap requested
(GRIPPROBE_ADVERSARIAL_SANDBOX=bwrap, the default) but /usr/bin/bwrap missing or not working, or the
harness basics broken (reference × oracle-perfect must PASS, × oracle-lazy must be NO_TOOL_CALL, and a
benign script agent must run, reach the model through the proxy and write its workspace, HOME and
TMPDIR where the attacks run). Without these an attack test could pass for the wrong reason.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from .adversary import BWRAP, MODE, MODES, Arena, kill_all, processes_with, read_jsonl, walk

_PROBLEM: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if _PROBLEM:
        pytest.fail(_PROBLEM[0], pytrace=False)


def _bwrap_problem() -> str | None:
    if not (os.path.isfile(BWRAP) and os.access(BWRAP, os.X_OK)):
        return (f"{BWRAP} is missing; install bubblewrap (apt-get install bubblewrap) "
                f"or set GRIPPROBE_ADVERSARIAL_SANDBOX")
    argv = [BWRAP, "--unshare-all", "--share-net", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp", "/bin/true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{BWRAP} does not work here: {exc}"
    if proc.returncode != 0:
        return f"{BWRAP} does not work here: exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}"
    return None


def _basics_problem(arena: Arena) -> str | None:
    res = arena.run("run-suite", "--suite", "adv-basics", "-j", "2", "--timeout", "30", timeout=180)
    arena.basics = res
    if res.timed_out or res.returncode != 0 or res.run_dir is None:
        return f"harness basics: {res.explain()}"
    want = {("reference", "oracle-perfect", "hello"): "PASS", ("reference", "oracle-lazy", "hello"): "NO_TOOL_CALL",
            ("reference", "oracle-perfect", "victim"): "PASS"}
    for (agent, model, test), status in want.items():
        case = res.case(agent, model, test)
        if case.status != status:
            return f"harness basics: {agent} × {model} × {test} should be {status}: {case.describe()}"
    probe = res.case("adv_probe")
    reports = probe.reports()
    if probe.process().get("status") != "ok" or not reports:
        return f"harness basics: a script agent (adv_probe) did not run: {probe.describe()}; " \
               f"stderr: {(probe.dir / 'measured.stderr').read_bytes()[-800:]!r}"
    r = reports[-1]
    if r.get("model_status") != 200 or r.get("wrote") != {"HOME": True, "TMPDIR": True}:
        return f"harness basics: the script agent could not reach the model or write its HOME/TMPDIR: {r}"
    if not (probe.dir / "workspace" / "hello.txt").is_file():
        return "harness basics: the script agent's hello.txt is not in its case's workspace copy"
    seen = [x for x in read_jsonl(probe.dir / "artifacts" / "proxy.measured.http.jsonl")
            if x.get("x_gripprobe_status") == 200]
    if not seen:
        return "harness basics: the proxy recorded none of the script agent's requests"
    if MODE in ("bwrap", "none"):
        for case_json in sorted(res.run_dir.glob("cases/*/case.json")):
            got = json.loads(case_json.read_bytes()).get("sandbox")
            if got != MODE:
                return f"harness basics: {case_json.parent.name}: case.json sandbox is {got!r}, not {MODE!r}"
    return None


def _preflight(arena: Arena) -> str | None:
    if MODE not in MODES:
        return f"GRIPPROBE_ADVERSARIAL_SANDBOX={MODE!r}: use one of {', '.join(MODES)}"
    if MODE == "bwrap":
        problem = _bwrap_problem()
        if problem:
            return f"sandbox bwrap requested (GRIPPROBE_ADVERSARIAL_SANDBOX): {problem}"
    return _basics_problem(arena)


@pytest.fixture(scope="session")
def arena(tmp_path_factory):
    a = Arena(tmp_path_factory.mktemp("adv") / "arena").build()
    a.basics = None
    a.broken = _preflight(a)
    if a.broken:
        _PROBLEM.append(a.broken)
    else:
        shutil.copytree(a.basics.run_dir, a.vault / "basics" / a.basics.run_dir.name)
    yield a
    kill_all(processes_with(a.marker))
    for p in Path("/tmp").glob(f"gpadv-{a.marker}*"):
        p.unlink(missing_ok=True)
    for p, st in list(walk(a.base)):  # FIFOs and device nodes an unconfined attack left behind
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            p.unlink(missing_ok=True)

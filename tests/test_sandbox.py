"""The bubblewrap sandbox (runner/sandbox.py) with the real bwrap: what a phase's processes can see, write
and leave behind. Under CI=true a missing or broken bwrap fails these tests; elsewhere they skip."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from gripprobe_core.runner.process import run_process
from gripprobe_core.runner.sandbox import Sandbox, _outermost

ROOT = Path(__file__).resolve().parents[1]




def _phase_dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    ws, home, tmp = tmp_path / "workspace", tmp_path / "home", tmp_path / "tmp"
    for d in (ws, home, tmp):
        d.mkdir()
    return ws, home, tmp


def _run(box: Sandbox, tmp_path: Path, script: str, timeout: float = 20):
    ws, home, tmp = _phase_dirs(tmp_path)
    argv = box.wrap(["/bin/sh", "-c", script], cwd=ws, rw=[ws, home, tmp])
    out, err = tmp_path / "out", tmp_path / "err"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8"}
    res = asyncio.run(run_process(argv, cwd=ws, env=env, stdin=None, timeout_s=timeout, stdout_path=out,
                                  stderr_path=err, sandboxed=box.confined))
    return res, out.read_text(errors="replace"), err.read_text(errors="replace"), ws


def test_filesystem_holds_only_what_the_agent_needs(box, tmp_path):
    real_home = Path(os.path.expanduser("~"))
    canary = tmp_path / "outside-canary"
    canary.write_text("secret")
    script = f"""
        echo ws > ws.txt && echo ok-ws
        echo x > "$HOME/h" && echo ok-home
        echo x > "$TMPDIR/t" && echo ok-tmpdir
        echo x > /tmp/private && echo ok-tmp
        test -e {ROOT}/specs && echo SEES-SPECS
        test -e {ROOT}/README.md && echo SEES-REPO
        test -e {real_home}/.cache && echo SEES-REAL-HOME
        cat {canary} 2>/dev/null && echo SEES-OUTSIDE
        echo x > /etc/gripprobe-x 2>/dev/null && echo WROTE-ETC
        echo x > /usr/gripprobe-x 2>/dev/null && echo WROTE-USR
        grep -q CapEff:.0000000000000000 /proc/self/status && echo no-caps
        echo "pid1-cwd=$(readlink /proc/1/cwd) cwd=$(pwd)"
        ls /proc | grep -c '^[0-9]'
    """
    res, out, err, ws = _run(box, tmp_path, script)
    assert res.status == "ok", (res, err)
    for want in ("ok-ws", "ok-home", "ok-tmpdir", "ok-tmp", "no-caps"):
        assert want in out, (want, out, err)
    for leak in ("SEES-SPECS", "SEES-REPO", "SEES-REAL-HOME", "SEES-OUTSIDE", "WROTE-ETC", "WROTE-USR"):
        assert leak not in out, (leak, out)
    assert (ws / "ws.txt").read_text() == "ws\n"
    # the sandbox's init (PID 1) stays out of the workspace: agents that look for other agents there (gptme) see
    # none (it is untraceable, so its cwd is not even readable)
    assert f"pid1-cwd=/ cwd={ws}" in out or f"pid1-cwd= cwd={ws}" in out, out
    assert not Path("/tmp/private").exists()  # /tmp inside is private
    assert int(out.strip().splitlines()[-1]) < 10  # its own PID namespace: only its own processes


def test_daemons_die_with_the_phase_whatever_they_did(box, tmp_path):
    """setsid + env -i + double fork: the PID namespace still ends with the agent."""
    marker = tmp_path / "home" / "late"
    script = f"""
        setsid env -i /bin/sh -c 'sleep 3; echo alive > {marker}' </dev/null >/dev/null 2>&1 &
        ( ( env -i /bin/sh -c 'sleep 3; echo alive >> {marker}' & ) & )
        nohup /bin/sh -c 'sleep 3; echo alive >> {marker}' </dev/null >/dev/null 2>&1 &
        echo started
    """
    t0 = time.monotonic()
    res, out, _err, _ws = _run(box, tmp_path, script)
    assert res.status == "ok" and "started" in out
    assert time.monotonic() - t0 < 3  # the stragglers did not hold the phase open
    time.sleep(4)
    assert not marker.exists(), "a daemon outlived its phase"


def test_timeout_kills_the_whole_namespace(box, tmp_path):
    marker = tmp_path / "home" / "late"
    script = f"setsid env -i /bin/sh -c 'sleep 4; echo alive > {marker}' & sleep 60"
    t0 = time.monotonic()
    res, _out, _err, _ws = _run(box, tmp_path, script, timeout=1)
    assert res.status == "timeout"
    assert time.monotonic() - t0 < 8
    time.sleep(5)
    assert not marker.exists()


def test_the_harness_python_runs_inside(box, tmp_path):
    """Python agents (the reference agent, gptme and aider venvs) need the harness's runtime read-only."""
    res, out, err, _ws = _run(box, tmp_path, f"{sys.executable} -c 'import gripprobe_core.refagent.cli; print(42)'")
    assert res.status == "ok" and out.strip() == "42", err


def test_a_command_without_a_shell_sees_its_workspace_as_cwd_and_pwd(box, tmp_path):
    """bwrap exports PWD=/ for its own --chdir; agents that trust $PWD (opencode) must see the workspace."""
    ws, home, tmp = _phase_dirs(tmp_path)
    argv = box.wrap([sys.executable, "-c", "import os; print(os.getcwd(), os.environ.get('PWD'))"], cwd=ws,
                    rw=[ws, home, tmp])
    out, err = tmp_path / "out", tmp_path / "err"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp)}
    res = asyncio.run(run_process(argv, cwd=ws, env=env, stdin=None, timeout_s=20, stdout_path=out,
                                  stderr_path=err, sandboxed=True))
    assert res.status == "ok", err.read_text()
    assert out.read_text().split() == [str(ws), str(ws)]


def test_bwrap_that_cannot_run_is_a_clear_exit_2(tmp_path):
    """--sandbox bwrap where bwrap is not on PATH: one line, exit 2, the fix named."""
    from conftest import gripprobe

    env = {"PATH": str(tmp_path)}  # no bwrap here (python is started by absolute path)
    proc = gripprobe("run", "--results", str(tmp_path / "r"), "--sandbox", "bwrap", "-t", "save_file",
                     "-m", "oracle-perfect", env=env)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "bwrap" in last and "apt-get install bubblewrap" in last and "Traceback" not in proc.stderr
    assert not (tmp_path / "r" / "runs").exists() or not any((tmp_path / "r" / "runs").iterdir())


def test_auto_without_bwrap_warns_and_marks_cases_unsandboxed(tmp_path):
    """Only where bubblewrap is absent does auto run agents unconfined; the run's first line, the case, the
    summaries say so."""
    from conftest import gripprobe, read_json

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh",):  # the agent is a Python entry point; nothing else is needed on PATH
        os.symlink(shutil.which(tool), bindir / tool)
    proc = gripprobe("run", "--results", str(tmp_path / "r"), "-t", "save_file", "-m", "oracle-perfect",
                     env={"PATH": str(bindir)})
    assert proc.returncode == 0, proc.stderr
    first = (proc.stderr + proc.stdout).strip().splitlines()[0]
    assert "UNSANDBOXED" in first and "bwrap is not installed" in first, first
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
    assert case["sandbox"] == "none" and case["verdict"]["status"] == "PASS"
    assert "unsandboxed" in (run_dir / "reports" / "summary.html").read_text()
    assert "ran unsandboxed" in (run_dir / "reports" / "summary.md").read_text()


def test_outermost_drops_nested_binds():
    assert _outermost([Path("/a/b"), Path("/a"), Path("/c/d"), Path("/a/b/c"), Path("/c/d")]) == [Path("/a"), Path("/c/d")]


def test_spec_keys_choose_the_sandbox_and_the_command_line_wins(box, tmp_path):
    """Agent spec `sandbox: none` → unsandboxed; a suite's `sandbox` beats it; --sandbox beats both."""
    from conftest import SPECS, read_json
    from gripprobe_core.testing import copy_specs, run_gripprobe

    root = copy_specs(tmp_path / "specs", ["models/oracle-perfect.yaml", "tests/save_file.yaml"], source=SPECS,
                      suite={"agents": ["reference"], "models": ["oracle-perfect"], "tests": ["save_file"]})
    (root / "cli_agents").mkdir()
    agent = (SPECS / "cli_agents" / "reference.yaml").read_text() + "sandbox: none\n"
    (root / "cli_agents" / "reference.yaml").write_text(agent)
    (root / "suites" / "boxed.yaml").write_text(
        "id: boxed\nagents: [reference]\nmodels: [oracle-perfect]\ntests: [save_file]\nsandbox: bwrap\n")

    def sandbox_of(*args: str) -> str:
        run_dir = run_gripprobe("run", "--specs", root, "--results", tmp_path / "r", *args)
        (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
        assert case["verdict"]["status"] == "PASS"
        return case["sandbox"]

    assert sandbox_of() == "none"
    assert sandbox_of("--suite", "boxed") == "bwrap"
    assert sandbox_of("--sandbox", "bwrap") == "bwrap"
    assert sandbox_of("--suite", "boxed", "--sandbox", "none") == "none"


def test_shown_path_keeps_only_folders_the_sandbox_shows(box, tmp_path):
    """python3 must resolve alike with and without the sandbox: a pyenv shim folder (not shown inside) is dropped
    from PATH for none as for bwrap, the system's, the runtime's and the agent's install folders stay, in order."""
    shims = tmp_path / "pyenv" / "shims"
    install = tmp_path / "agent-install"
    runtime_bin = Path(os.path.realpath(sys.executable)).parent
    path = os.pathsep.join([str(shims), "/usr/local/bin", str(install / "bin"), str(runtime_bin), "/usr/bin", "/bin"])
    want = os.pathsep.join(["/usr/local/bin", str(install / "bin"), str(runtime_bin), "/usr/bin", "/bin"])
    assert box.shown_path(path, binds=[install]) == want
    assert Sandbox("none").shown_path(path, binds=[install]) == want
    # what it keeps is what a sandboxed shell finds: the shim folder is not there inside
    shims.mkdir(parents=True)
    (shims / "python3").write_text("#!/bin/sh\necho SHIM\n")
    (shims / "python3").chmod(0o755)
    res, out, err, _ws = _run(box, tmp_path, f"PATH='{path}'; command -v python3")
    assert res.status == "ok" and "shims" not in out and out.strip().endswith("python3"), (out, err)

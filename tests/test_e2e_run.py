"""End to end through the real `gripprobe` command: reference agent process × oracle server × validators."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, SPECS, gripprobe, read_json
from gripprobe_core.models import CaseResult, Verdict

pytestmark = pytest.mark.e2e


def _run_dir(res: subprocess.CompletedProcess) -> Path:
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def _cases(run_dir: Path) -> dict[str, dict]:
    return {p.parent.name: read_json(p) for p in sorted((run_dir / "cases").glob("*/case.json"))}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    """Like the README: no selection, the default (relative) results root, from another directory."""
    cwd = tmp_path_factory.mktemp("cwd")
    run_dir = _run_dir(gripprobe("run", "--jobs", "2", cwd=cwd, env={"GRIPPROBE_SPECS": str(SPECS)}))
    assert run_dir.parent == cwd / "results" / "runs"
    return run_dir


def test_default_run_perfect_pass_lazy_no_tool_call(default_run):
    cases = _cases(default_run)
    from gripprobe_core.specs import load_specs
    sanity = {t.id for t in load_specs(SPECS).tests.values() if "sanity" in t.tags}
    assert len(cases) == 2 * len(sanity) >= 12
    for cid, c in cases.items():
        want = "PASS" if c["key"]["model"] == "oracle-perfect" else "NO_TOOL_CALL"
        assert c["verdict"]["status"] == want, (cid, c["verdict"], c["validators"])
        CaseResult.model_validate(c)  # the whole contract, every field
        assert set(Verdict.model_fields) <= set(c["verdict"])
        assert c["verdict"]["verdict_source"] == "event_evaluator"


def test_default_run_layout(default_run):
    manifest = read_json(default_run / "manifest.json")
    assert manifest["status"] == "complete" and manifest["completed"] == len(manifest["planned"])
    assert manifest["suite"] == "default" and manifest["selection"] is None  # the suite as written
    assert (default_run / "reports" / "summary.md").is_file()
    some = next((default_run / "cases").iterdir())
    for rel in ("case.json", "prompt.txt", "warmup.stdout", "warmup.stderr", "measured.stdout", "measured.stderr",
                "expected.txt", "observed.txt", "workspace", "artifacts/events.warmup.jsonl",
                "artifacts/events.measured.jsonl", "artifacts/events.summary.json"):
        assert (some / rel).exists(), rel
    summary = (default_run / "reports" / "summary.md").read_text()
    for c in _cases(default_run).values():
        assert f"| {c['key']['test']} | {c['key']['trial']} | {c['verdict']['status']} |" in summary


def test_perfect_case_has_tier_b_events_and_source_pointer(default_run):
    case = read_json(default_run / "cases" / "reference__oracle-perfect__oracle__tool__save_file" / "case.json")
    assert case["telemetry"]["telemetry_source_tier"] == "A"  # the recording proxy, auto mode
    assert case["verdict"]["invoked"] == "yes" and case["verdict"]["trajectory"] == "clean"
    events = [json.loads(l) for l in (default_run / "cases" / case["case_id"] / "artifacts" /
                                      "events.measured.jsonl").read_text().splitlines()]
    kinds = [e["event_type"] for e in events]
    assert "model_response" in kinds and "tool_call_start" in kinds and "tool_call_result" in kinds
    starts = [e for e in events if e["event_type"] == "tool_call_start"]
    responses = {e["event_id"] for e in events if e["event_type"] == "model_response"}
    assert all(s["parent_id"] in responses for s in starts)
    src = case["validators"][0]["source"]
    assert src and src["kind"] == "tool_call"
    pointed = [e for e in events if e["sequence"] == src["sequence"]]
    assert pointed and pointed[0]["event_type"] == src["event_type"]
    # oracle ground truth equals the tool calls the agent reported
    truth = [json.loads(l) for l in (default_run / "cases" / case["case_id"] / "artifacts" /
                                     "oracle.measured.jsonl").read_text().splitlines()]
    assert [t["tool_call_id"] for t in truth] == [s["tool_call_id"] for s in starts]


def _spec_root(tmp_path: Path, extra_tests: dict[str, str]) -> Path:
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    for name, text in extra_tests.items():
        (root / "tests" / f"{name}.yaml").write_text(text)
    return root


def test_a_spec_folder_without_suites_runs_a_full_selection_as_an_ad_hoc_run(tmp_path):
    """No suites/ at all: `run -a -m -t -f` needs none; it is recorded as ad hoc (suite null + the selection),
    listed as `(ad hoc)` and resumed without a suite; with something left out, one line says the fix."""
    root = _spec_root(tmp_path, {})
    shutil.rmtree(root / "suites")
    results = tmp_path / "r"
    res = gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(results), "-a", "reference", "-m", "oracle-perfect",
                    "-t", "save_file", "-t", "shell_pwd", "-f", "tool")
    run_dir = _run_dir(res)
    assert {c["verdict"]["status"] for c in _cases(run_dir).values()} == {"PASS"} and len(_cases(run_dir)) == 2
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["suite"] is None
    assert manifest["selection"] == {"agents": ["reference"], "models": ["oracle-perfect"],
                                     "tests": ["save_file", "shell_pwd"], "formats": ["tool"], "backend": None,
                                     "from_suite": None}
    assert "ad hoc selection" in (run_dir / "reports" / "summary.html").read_text()
    listed = gripprobe("list-runs", "--results", str(results))
    assert "(ad hoc)" in listed.stdout and "default" not in listed.stdout, listed.stdout
    info = json.loads(gripprobe("list-runs", "--results", str(results), "--json").stdout)
    assert info["suite"] is None and info["selection"]["tests"] == ["save_file", "shell_pwd"]
    # resume needs no suite either, and refuses to call the run a suite's
    victim = run_dir / "cases" / "reference__oracle-perfect__oracle__tool__save_file"
    (victim / "case.json").unlink()
    res = gripprobe("run-suite", "--specs", str(root), "--no-shipped", "--resume", str(run_dir))
    assert res.returncode == 0 and "1 of 2 case(s) done, 1 to run" in res.stderr, res.stderr[-3000:]
    assert read_json(victim / "case.json")["verdict"]["status"] == "PASS"
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["suite"] is None and manifest["selection"]["tests"] == ["save_file", "shell_pwd"]
    res = gripprobe("run-suite", "--specs", str(root), "--no-shipped", "--suite", "default", "--resume", str(run_dir))
    assert res.returncode == 2 and "ran an ad-hoc selection, not suite 'default'" in res.stderr, res.stderr
    # nothing, or not enough, selected: the default suite is needed and missing
    for args, want in (((), "nothing selected and no default suite"),
                       (("-a", "reference"), "nothing selected for --model and --test")):
        res = gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(results), *args)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and want in lines[0], res.stderr
        assert "suites/default.yaml" in lines[0] and "-m MODEL" in lines[0]
    res = gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(results), "-a", "reference", "-m", "oracle-perfect",
                    "-t", "save_file", "--hardware", "nope")
    assert res.returncode == 2 and "unknown hardware profile 'nope'" in res.stderr, res.stderr
    (root / "suites").mkdir()
    (root / "suites" / "empty.yaml").write_text("id: empty\n")
    res = gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(results), "--suite", "empty")
    assert res.returncode == 2 and "the selection is empty" in res.stderr, res.stderr


ENV_TEST = """\
id: dump_env
title: Dump the environment
prompt: Run `env > env.txt`.
requires: [execute]
tags: [non_sanity]
validators:
  - {kind: file_exists, path: env.txt}
reference:
  - shell: env > env.txt
"""


def test_agent_environment_is_isolated(tmp_path):
    root = _spec_root(tmp_path, {"dump_env": ENV_TEST})
    res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "oracle-perfect",
                    "-t", "dump_env", env={"OPENAI_API_KEY": "sk-canary-runner-secret", "AWS_SECRET": "canary2"})
    run_dir = _run_dir(res)
    case_dir = run_dir / "cases" / "reference__oracle-perfect__oracle__tool__dump_env"
    env = dict(l.split("=", 1) for l in (case_dir / "workspace" / "env.txt").read_text().splitlines() if "=" in l)
    assert "AWS_SECRET" not in env
    assert env.get("OPENAI_API_KEY") != "sk-canary-runner-secret"
    assert env["HOME"].startswith(tempfile_root()) and env["HOME"] != os.environ.get("HOME")
    assert env["TMPDIR"] != env["HOME"] and "XDG_CONFIG_HOME" in env
    blob = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert b"sk-canary-runner-secret" not in blob and b"canary2" not in blob


def tempfile_root() -> str:
    import tempfile
    return tempfile.gettempdir()


HANG_TEST = """\
id: hang
title: Start a background sleeper and never return
prompt: Run the command.
requires: [execute]
tags: [non_sanity]
validators:
  - {kind: file_exists, path: done.txt}
reference:
  - shell: "sleep 300.4242 & echo $! > child.pid; wait"
"""
#: The sleeper's argument: how a test finds it on the host, where its PID (inside the sandbox's PID
#: namespace) means nothing.
SLEEPER_ARG = b"300.4242"


def _sleepers() -> list[int]:
    """Host PIDs of live (not zombie) processes running the hang test's sleeper."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if SLEEPER_ARG in argv and state != "Z":
            found.append(int(d.name))
    return found


def test_hung_agent_with_grandchild_is_killed_timeout(tmp_path):
    root = _spec_root(tmp_path, {"hang": HANG_TEST})
    t0 = time.monotonic()
    res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "oracle-perfect",
                    "-t", "hang", "--timeout", "5")  # 5 s: the agent must get to fork its sleeper on a loaded machine
    run_dir = _run_dir(res)
    assert time.monotonic() - t0 < 60
    case_dir = run_dir / "cases" / "reference__oracle-perfect__oracle__tool__hang"
    case = read_json(case_dir / "case.json")
    assert case["verdict"]["status"] == "TIMEOUT" and case["verdict"]["failure_reason"] == "timeout"
    assert (case_dir / "workspace" / "child.pid").read_text().strip().isdigit()
    assert _sleepers() == []


def test_ctrl_c_keeps_finished_cases_and_marks_run_incomplete(tmp_path):
    root = _spec_root(tmp_path, {"hang": HANG_TEST})
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)  # the runner's scratch (warmup workspaces) lands here
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(root), "--results",
                             str(tmp_path / "r"), "-m", "oracle-perfect", "-t", "shell_pwd", "-t", "hang",
                             "--timeout", "120"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    done = []
    while time.monotonic() < deadline and not done:
        done = list((tmp_path / "r").glob("runs/*/cases/*shell_pwd/case.json"))
        time.sleep(0.1)
    assert done, "first case never finished"
    pid_glob = "gripprobe-*/*hang/warmup/workspace/child.pid"
    while time.monotonic() < deadline and not list(scratch.glob(pid_glob)):
        time.sleep(0.1)
    assert _sleepers(), "the hang case's sleeper should be running"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    run_dir = Path(out.strip().splitlines()[-1])
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["status"] == "incomplete" and manifest["completed"] == 1
    assert read_json(done[0])["verdict"]["status"] == "PASS"
    assert not (run_dir / "cases" / "reference__oracle-perfect__oracle__tool__hang" / "case.json").exists()
    time.sleep(0.5)
    assert _sleepers() == []
    assert not list(scratch.glob("gripprobe-*")), "scratch (agent homes) must be removed even when interrupted"


def test_sigkill_mid_run_leaves_only_whole_case_files(tmp_path):
    """Writes are atomic: after SIGKILL every case.json present parses as a full result."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "run", "--results", str(tmp_path / "r"),
                             "-j", "2"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list((tmp_path / "r").glob("runs/*/cases/*/case.json"))) < 3:
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=30)
    cases = list((tmp_path / "r").glob("runs/*/cases/*/case.json"))
    assert len(cases) >= 3
    for p in cases:
        CaseResult.model_validate_json(p.read_bytes())
    manifest = read_json(next((tmp_path / "r").glob("runs/*/manifest.json")))
    assert manifest["status"] == "running"  # never finished: readers can tell


def test_a_one_file_spec_folder_of_ones_own_runs_with_the_shipped_agents_and_models(tmp_path):
    """A newcomer's own folder holds one test and nothing else, outside any checkout: the shipped agents and
    models are under it, so the run needs no copies of them."""
    mine = tmp_path / "mine" / "tests"
    mine.mkdir(parents=True)
    # the file exactly as the README's first hour writes it
    readme = (ROOT / "README.md").read_text()
    (mine / "hello.yaml").write_text(readme.split("cat > mine/tests/hello.yaml <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0] + "\n")
    res = gripprobe("validate", "--specs", "mine", cwd=tmp_path)
    assert res.returncode == 0 and "  2. mine: 1 tests" in res.stdout, res.stdout + res.stderr
    res = gripprobe("run", "--specs", "mine", "--results", "r", "-a", "reference", "-m", "oracle-perfect",
                    "-t", "hello", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(tmp_path / res.stdout.strip().splitlines()[-1])
    assert [c["verdict"]["status"] for c in _cases(run_dir).values()] == ["PASS"]
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["specs_layers"][-1] == "mine" and manifest["specs_layers"][0].endswith("specs")
    # without the shipped layer the folder knows no agent: one line with the fix
    res = gripprobe("run", "--specs", "mine", "--no-shipped", "--results", "r", "-a", "reference",
                    "-m", "oracle-perfect", "-t", "hello", cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr

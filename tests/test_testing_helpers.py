"""gripprobe_core.testing: the helpers plugin authors' e2e tests use, on the reference agent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from gripprobe_core import CliAgentSpec
from gripprobe_core.testing import (
    copy_specs, installed_agent, kit_specs, read_cases, read_jsonl, repo_specs, run_gripprobe,
)

pytestmark = pytest.mark.e2e


def test_repo_specs_is_found_from_inside_the_checkout_only(tmp_path):
    assert repo_specs(Path(__file__)) == ROOT / "specs"
    assert repo_specs(tmp_path) is None
    assert kit_specs() == ROOT / "specs"  # the kit of this checkout reads its specs


# ------------------------------------------------------------------ the contract outside a checkout

CONTRACT = """from gripprobe_core.testing import DriverContract


class TestReferenceContract(DriverContract):
    e2e_tests = ("save_file",)
"""


def _contract_outside_a_checkout(tmp_path: Path, *, shipped_specs: bool) -> subprocess.CompletedProcess:
    """A plugin's contract (the reference driver's) run by pytest with CI=true in a folder that is no GripProbe
    checkout, against a gripprobe-core that lies in no checkout either (a copy of the package, as a wheel
    installs it), shipping the specs as package data or not. Its end-to-end tests only (``-k oracle``)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "src" / "gripprobe_core", site / "gripprobe_core",
                    ignore=shutil.ignore_patterns("__pycache__", "_specs"))
    if shipped_specs:
        shutil.copytree(ROOT / "specs", site / "gripprobe_core" / "_specs")
    project = tmp_path / "myplugin"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ngripprobe_agent = "reference"\n')
    (project / "tests" / "test_contract.py").write_text(CONTRACT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") or k == "GRIPPROBE_AGENT_CACHE"}
    env.update(CI="true", PYTHONPATH=str(site))
    probe = subprocess.run([sys.executable, "-c", "import gripprobe_core.testing as t; print(t.__file__)"], env=env,
                           cwd=project, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == str(site / "gripprobe_core" / "testing" / "__init__.py")  # the copy, not ROOT's
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", "-k", "oracle",
                           "tests"], env=env, cwd=project, capture_output=True, text=True, timeout=600)


def _counts(out: str) -> dict[str, int]:
    """pytest's last line as counts: passed, failed (a test or its fixture: failed + errors), skipped."""
    found = {word.rstrip("s") if word.startswith("error") else word: int(n)
             for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", out.splitlines()[-1])}
    return {"passed": found.get("passed", 0), "failed": found.get("failed", 0) + found.get("error", 0),
            "skipped": found.get("skipped", 0)}


def test_without_specs_the_contracts_e2e_tests_fail_under_ci_and_say_why(tmp_path):
    res = _contract_outside_a_checkout(tmp_path, shipped_specs=False)
    counts = _counts(res.stdout)
    assert counts["skipped"] == 0 and counts["failed"] == 2, res.stdout[-3000:]  # the two that skipped before
    assert res.stdout.count("no GripProbe specs to run end to end") >= 2, res.stdout[-3000:]
    assert "CI=true" in res.stdout and "Traceback" not in res.stdout


def test_with_the_specs_gripprobe_core_ships_the_contracts_e2e_tests_run_outside_a_checkout(tmp_path):
    res = _contract_outside_a_checkout(tmp_path, shipped_specs=True)
    counts = _counts(res.stdout)
    assert counts["skipped"] == 0 and counts["failed"] == 0 and counts["passed"] == 3, res.stdout[-3000:]


def test_copy_specs_then_run_gripprobe_then_read_what_it_wrote(tmp_path):
    specs = copy_specs(tmp_path / "specs", ["cli_agents/reference.yaml", "models/oracle-perfect.yaml",
                                            "tests/save_file.yaml"], source=repo_specs(Path(__file__)),
                       suite={"title": "t", "agents": ["reference"], "models": ["oracle-perfect"],
                              "tests": ["save_file"]})
    assert sorted(p.relative_to(specs).as_posix() for p in specs.rglob("*.yaml")) == [
        "cli_agents/reference.yaml", "models/oracle-perfect.yaml", "suites/default.yaml", "tests/save_file.yaml"]
    run_dir = run_gripprobe("run", "--specs", specs, "--results", tmp_path / "r")
    (case,) = read_cases(run_dir).values()
    assert case["verdict"]["status"] == "PASS"
    truth = read_jsonl(run_dir / "cases" / case["case_id"] / "artifacts" / "oracle.measured.jsonl")
    assert truth and read_jsonl(tmp_path / "missing.jsonl") == []
    # the reference agent needs no install: no recipe, nothing in the cache
    assert installed_agent(CliAgentSpec(id="reference", plugin="reference", executable="gripprobe-refagent",
                                       tool_kinds=["execute"])) is None
    with pytest.raises(AssertionError, match="exited 2"):
        run_gripprobe("run", "--specs", specs, "--results", tmp_path / "r", "--suite", "nope")


def test_phase_context_is_laid_out_like_the_runners(tmp_path):
    from gripprobe_core.models.specs import TestSpec
    from gripprobe_core.testing import phase_context

    agent = CliAgentSpec(id="x", plugin="x", executable="xagent", tool_kinds=["write"])
    test = TestSpec(id="t", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "a.txt"}],
                    fixtures=[{"path": "sub/a.txt", "content": "hi\n"}], reference=[{"shell": "true"}])
    ctx = phase_context(tmp_path, agent, test=test, model_name="lazy", fmt="tool", api_key="k")
    assert ctx.prompt == "p" and ctx.backend.model_id == "lazy" and ctx.api_key == "k"
    assert (ctx.workspace / "sub" / "a.txt").read_text() == "hi\n"
    assert all(d.is_dir() for d in (ctx.home, ctx.tmpdir, ctx.artifacts_dir, *map(Path, ctx.xdg.values())))
    assert ctx.agent_executable == tmp_path / "bin" / "xagent"

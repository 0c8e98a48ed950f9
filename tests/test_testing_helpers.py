"""gripprobe_core.testing: the helpers plugin authors' e2e tests use, on the reference agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from gripprobe_core import CliAgentSpec
from gripprobe_core.testing import copy_specs, installed_agent, read_cases, read_jsonl, repo_specs, run_gripprobe

pytestmark = pytest.mark.e2e


def test_repo_specs_is_found_from_inside_the_checkout_only(tmp_path):
    assert repo_specs(Path(__file__)) == ROOT / "specs"
    assert repo_specs(tmp_path) is None


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

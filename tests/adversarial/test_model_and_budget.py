"""Attacks on the proxy from an agent that talks to its own proxy (the base URL it is given) to get another
model or to leave the denominator.

13. model swap: under `oracle-lazy` it asks for `perfect` (and runs the task with it).
14. leaving n: under `oracle-perfect` one request naming the backend's tool-less model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from .adversary import MODE, Case, RunResult, _agent, read_jsonl

pytestmark = pytest.mark.e2e

ATTACKS = ("swap",)
#: Peak resident memory of the `gripprobe run` process (it idles around 70 MB), as test_resources.py.
RSS_LIMIT_MB = 400


@pytest.fixture(scope="module")
def agents(arena):
    """This module's attack agents, declared in the session's specs (files of their own: agents/<attack>.py)."""
    if not arena.broken:
        for name in ATTACKS:
            exe = arena.build_agent(name)
            (arena.specs / "cli_agents" / f"adv_{name}.yaml").write_text(_agent(f"adv_{name}", str(exe)))
    return arena


def _ran(res: RunResult) -> None:
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0, res.explain()
    assert b"Traceback" not in res.stderr, res.explain()


def _records(case: Case, phase: str = "measured") -> list[dict]:
    return read_jsonl(case.dir / "artifacts" / f"proxy.{phase}.http.jsonl")


def _proxy(case: Case, phase: str = "measured") -> dict:
    for p in (case.data or {}).get("phases") or []:
        if p.get("phase") == phase:
            return p.get("proxy") or {}
    return {}


def _model_calls(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("x_gripprobe_protocol") == "chat_completions"]


# ------------------------------------------------------------------------------ 13, 14: the model pinned

@pytest.fixture(scope="module")
def swap_run(agents):
    if agents.broken:
        return None
    return agents.run("run", "-a", "adv_swap", "-m", "oracle-lazy", "-m", "oracle-perfect", "-t", "hello", "-j", "2",
                      "--timeout", "45", timeout=240)


def test_a_swapped_model_is_refused_and_never_credited(swap_run):
    """Attack 13: under oracle-lazy the agent asks its proxy for `perfect` and runs the task with it."""
    _ran(swap_run)
    case = swap_run.case("adv_swap", "oracle-lazy")
    [report] = [r for r in case.reports() if r.get("phase") == "measured"]
    assert report["swap_to"] == "perfect" and report["status"] == 403 and report["code"] == "model_not_under_test"
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    assert case.data["verdict"]["strict_pass_score"] == 0.0 and case.data["verdict"]["overall_score"] == 0.0
    assert (case.dir / "workspace" / "hello.txt").is_file()  # it did the job, with no model's help: no credit
    calls = _model_calls(_records(case))
    assert calls and all(r["x_gripprobe_status"] == 403 and r["x_gripprobe_proxy_error"] == "model_not_under_test"
                         for r in calls), [(r["x_gripprobe_status"], r["x_gripprobe_proxy_error"]) for r in calls]
    assert _proxy(case)["model_not_under_test"] == len(calls) and _proxy(case)["models"] == ["lazy"]
    truth = read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")
    assert truth == [], f"the oracle answered for another model: {truth}"


def test_a_tool_less_model_does_not_take_the_case_out_of_n(swap_run):
    """Attack 14: under oracle-perfect one request naming the backend's tool-less model, then nothing."""
    _ran(swap_run)
    case = swap_run.case("adv_swap", "oracle-perfect")
    [report] = [r for r in case.reports() if r.get("phase") == "measured"]
    assert report["swap_to"] == "tools-unsupported" and report["status"] == 403, report
    assert case.status != "TOOL_UNSUPPORTED", case.describe()
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    assert case.data["telemetry"]["telemetry_backend_tool_unsupported"] is False
    assert not any(r.get("x_gripprobe_backend_tool_unsupported") for r in _records(case))


def test_a_swap_without_the_proxy_shows_in_the_oracles_record_and_survives_recompute(agents, tmp_path):
    """Attack 13 with `--telemetry-proxy off`: nothing refuses the swap, but the oracle's own record of the
    tool calls it made names the profile that answered (`perfect`), so the case is FAIL model_not_under_test,
    on the run and on `rebuild-reports --recompute`."""
    if agents.broken:
        pytest.fail("arena broken")
    res = agents.run("run", "-a", "adv_swap", "-m", "oracle-lazy", "-t", "hello", "--telemetry-proxy", "off",
                     "--timeout", "45", timeout=180)
    _ran(res)
    case = res.case("adv_swap", "oracle-lazy")
    truth = read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")
    assert truth and {t["profile"] for t in truth} == {"perfect"}, truth  # the swap really happened
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    again = agents.cli("rebuild-reports", str(res.run_dir), "--recompute", timeout=120)
    assert again.returncode == 0 and b"Traceback" not in again.stderr, again.explain()
    after = json.loads((case.dir / "case.json").read_bytes())["verdict"]
    assert (after["status"], after["failure_reason"]) == ("FAIL", "model_not_under_test")

"""``--jobs N`` bounds the agents running at once; the harness's own work per case runs beside them.

A case holds one agent slot from its warmup's start to its measured phase's exit (its two phases back to
back, nothing of another case between them); the next case prepares while it runs, and the last one is
judged and written while the next agent runs. Checked on real runs of the reference agent on the oracle,
from the times the harness recorded in case.json.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from conftest import read_json, run_reference
from gripprobe_core.runner.phase import AgentSlots

pytestmark = pytest.mark.e2e


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _spans(run_dir: Path) -> list[dict]:
    spans = []
    for path in sorted((run_dir / "cases").glob("*/case.json")):
        case = read_json(path)
        proc = {p["phase"]: p["process"] for p in case["phases"]}
        spans.append(dict(case=case["case_id"], start=_t(case["started_at"]), end=_t(case["finished_at"]),
                          duration=case["duration_s"], status=case["verdict"]["status"],
                          agents=[(_t(proc[ph]["started_at"]), _t(proc[ph]["finished_at"])) for ph in ("warmup", "measured")]))
    return sorted(spans, key=lambda s: s["agents"][0][0])


TESTS = ("save_file", "shell_pwd", "shell_file", "python_file")


@pytest.fixture(scope="module")
def one_job(tmp_path_factory) -> list[dict]:
    res = run_reference(tmp_path_factory.mktemp("slots"), models=("oracle-perfect", "oracle-lazy"), tests=TESTS, jobs=1)
    return _spans(res.run_dir.path)


def test_one_job_never_runs_two_agents_at_once(one_job):
    assert len(one_job) == 2 * len(TESTS)
    agents = sorted(a for s in one_job for a in s["agents"])
    for (_, end), (start, _) in zip(agents, agents[1:]):
        assert start >= end - 0.0015, agents  # the stamps are to the millisecond


def test_a_case_phases_run_back_to_back(one_job):
    """No other case's agent comes between a case's warmup and its measured phase."""
    for s in one_job:
        (w0, _), (_, m1) = s["agents"]
        others = [a for o in one_job if o is not s for a in o["agents"]]
        assert not [a for a in others if w0 - 0.0015 < a[0] < m1 - 0.0015], s["case"]


def test_harness_work_runs_beside_the_next_agent(one_job):
    """The next case was under way before the last one was written (prepared while it ran), and a case's
    judging and writing ended after the next case's agent started, for some case of the run."""
    assert all(s["status"] in ("PASS", "NO_TOOL_CALL") for s in one_job), one_job
    overlapped = [(a, b) for a, b in zip(one_job, one_job[1:]) if b["start"] < a["end"]]
    assert overlapped, "no case was prepared while the one before it was still under way"
    judged_late = [(a, b) for a, b in zip(one_job, one_job[1:]) if a["end"] > b["agents"][0][0] + 0.0015]
    assert judged_late, "no case was judged and written while the next one's agent ran"


def test_duration_leaves_out_the_queue(one_job):
    """A case that waited for a slot does not count the wait: its duration is at most its own span."""
    for s in one_job:
        span = s["end"] - s["start"]
        assert s["duration"] <= span + 0.002
        assert s["duration"] >= s["agents"][1][1] - s["agents"][0][0] - 0.002


def test_slots_hold_is_idempotent_and_bounded():
    async def scenario() -> list[int]:
        slots, running, peak = AgentSlots(2), [0], []

        async def case() -> None:
            hold = slots.hold()
            await hold.take()
            await hold.take()  # a second take is no second slot
            running[0] += 1
            peak.append(running[0])
            await asyncio.sleep(0.01)
            running[0] -= 1
            hold.give_back()
            hold.give_back()  # nor a second give-back a second release

        await asyncio.gather(*(case() for _ in range(6)))
        return peak

    peak = asyncio.run(scenario())
    assert max(peak) == 2 and len(peak) == 6

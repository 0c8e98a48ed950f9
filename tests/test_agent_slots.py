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

        async def case(hold) -> None:
            await hold.take()
            await hold.take()  # a second take is no second slot
            running[0] += 1
            peak.append(running[0])
            await asyncio.sleep(0.01)
            running[0] -= 1
            hold.give_back()
            hold.give_back()  # nor a second give-back a second release

        await asyncio.gather(*(case(slots.hold()) for _ in range(6)))
        return peak

    peak = asyncio.run(scenario())
    assert max(peak) == 2 and len(peak) == 6


def test_slots_follow_the_plan_order_and_pass_on_turns():
    """A case ready early waits for the one planned before it; a case that runs no agent (skipped, or its
    phase could not run), or is cancelled while it waits, passes its turn on."""
    async def scenario() -> list[str]:
        slots, order = AgentSlots(1), []
        holds = {name: slots.hold() for name in ("slow-to-prepare", "quick", "no-agent", "cancelled", "last")}

        async def case(name: str, prepare_s: float) -> None:
            hold = holds[name]
            try:  # as run_case: the hold is given back on every way out
                await asyncio.sleep(prepare_s)
                await hold.take()
                order.append(name)
                await asyncio.sleep(0.005)
            finally:
                hold.give_back()

        waiting = asyncio.ensure_future(case("cancelled", 0.0))
        await asyncio.sleep(0)
        waiting.cancel()
        holds["no-agent"].give_back()  # never took a slot
        await asyncio.wait_for(asyncio.gather(case("slow-to-prepare", 0.05), case("quick", 0.0), case("last", 0.0),
                                              asyncio.gather(waiting, return_exceptions=True)), 5.0)
        return order

    assert asyncio.run(scenario()) == ["slow-to-prepare", "quick", "last"]


def test_a_slot_granted_to_a_cancelled_case_goes_on():
    async def scenario() -> list[str]:
        slots, order = AgentSlots(1), []
        first, second, third = slots.hold(), slots.hold(), slots.hold()
        await first.take()
        waiter = asyncio.ensure_future(second.take())
        await asyncio.sleep(0)
        first.give_back()  # granted to ``second`` ...
        waiter.cancel()  # ... which is cancelled before it runs
        await asyncio.gather(waiter, return_exceptions=True)
        await asyncio.wait_for(third.take(), 1.0)
        order.append("third")
        third.give_back()
        return order

    assert asyncio.run(scenario()) == ["third"]


LOOK_TEST = """\
id: look_ahead
title: Look for the next phase's folder while running
prompt: Run the command.
requires: [execute]
tags: [non_sanity]
validators:
  - {{kind: file_exists, path: done.txt}}
reference:
  - shell: "sleep 0.3; p=$(basename \\"$(dirname \\"$PWD\\")\\"); if [ -e ../../measured ]; then s=present; else s=absent; fi; echo \\"$p:$s\\" >> {log}; touch done.txt"
"""


def test_an_unconfined_agent_never_finds_the_next_phase_prepared(tmp_path):
    """Unsandboxed (``--sandbox none``) an agent may reach every path, so the measured phase's folders do not
    exist while the warmup agent runs (sandboxed they are prepared beside it, out of the agent's sight)."""
    import shutil

    from conftest import SPECS, gripprobe

    log = tmp_path / "seen.log"
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "tests" / "look_ahead.yaml").write_text(LOOK_TEST.format(log=log))
    res = gripprobe("run", "--specs", str(root), "--no-shipped", "--results", str(tmp_path / "r"), "-a", "reference",
                    "-m", "oracle-perfect", "-t", "look_ahead", "--sandbox", "none")
    assert res.returncode == 0, res.stderr[-2000:]
    assert log.read_text().split() == ["warmup:absent", "measured:present"]

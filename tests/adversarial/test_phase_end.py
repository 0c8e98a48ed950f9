"""Attack 14: an agent that tries to keep its phase alive after it exited — it ptrace-attaches to the sandbox's
init and stops it, and leaves a self-stopped child, a traced child and a setsid sleeper. The phase must end
when the agent's process ends (seconds, not its 60 s timeout), the case be classified, and none of what it
left be alive afterwards."""

from __future__ import annotations

import time

import pytest

from .adversary import MODE, kill_all, processes_with
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e


def test_the_phase_ends_when_the_agent_ends(arena):
    t0 = time.monotonic()
    res = arena.run("run", "-a", "adv_holdopen", "-m", "oracle-lazy", "-t", "hello", "--timeout", "60", timeout=300)
    took = time.monotonic() - t0
    try:
        assert not res.timed_out and res.returncode == 0, res.explain()
        case = res.case("adv_holdopen")
        assert case.data is not None and case.status in STATUSES and case.status != "HARNESS_ERROR", case.describe()
        reports = case.reports()
        assert reports, f"the attack did not run: {case.describe()}"
        if MODE == "bwrap":
            assert reports[-1].get("attach_init") != "attached", reports[-1]
        for phase in ("warmup", "measured"):
            proc = case.process(phase)
            assert proc.get("status") != "timeout" and proc.get("duration_s", 99) < 15, (phase, proc)
        assert took < 60, f"`gripprobe run` took {took:.0f}s: a phase waited for its timeout"
        time.sleep(1)
        alive = processes_with(f"GPADV_HOLD_{arena.marker}")
        assert not alive, f"processes the agent left are alive after its run: {alive}"
    finally:
        kill_all(processes_with(f"GPADV_HOLD_{arena.marker}"))

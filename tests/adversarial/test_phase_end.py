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


FORGE = r"""
for fd in $(seq 3 255); do (printf x >&$fd) 2>/dev/null; done
ls /proc/1/fd > pid1_fds 2>&1
for f in /proc/1/fd/* /proc/self/fd/*; do (printf x > "$f") 2>/dev/null || echo "$f" >> refused; done
sleep 0.6
"""


def test_an_agent_cannot_end_its_own_clock_early(box, tmp_path):
    """The sandbox's init tells the harness the moment the agent ends (the exit note). An agent that writes to
    every descriptor it has and every one of PID 1's it can name, then goes on working, must not stop its
    clock: it never holds the note, and cannot reach the init's."""
    import asyncio

    from gripprobe_core.runner.process import Gate, spawn_process

    ws = tmp_path / "ws"
    ws.mkdir()

    async def scenario():
        gate = Gate(exit_note=True)
        argv = box.wrap(["/bin/sh", "-c", FORGE], cwd=ws, rw=[ws], gate=gate.read_fd, exit_note=gate.note_write_fd)
        spawned = await spawn_process(argv, cwd=ws, env={"PATH": "/usr/bin:/bin"}, with_stdin=False, sandboxed=True,
                                      gate=gate)
        heard: list[float] = []
        t0 = time.monotonic()
        res = await spawned.run(stdin=None, timeout_s=30, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
                                on_exit=lambda: heard.append(time.monotonic() - t0))
        return res, heard

    res, heard = asyncio.run(scenario())
    assert res.status == "ok", res
    assert res.duration_s >= 0.6 and heard and heard[0] >= 0.6, (res.duration_s, heard)
    # it tried: PID 1's descriptors past stderr (the note among them) were each refused, or not even listed
    listed = (ws / "pid1_fds").read_text()
    refused = (ws / "refused").read_text() if (ws / "refused").exists() else ""
    theirs = [n for n in listed.split() if n.isdigit() and int(n) > 2]
    assert "ermission denied" in listed or (theirs and all(f"/proc/1/fd/{n}" in refused for n in theirs)), (
        listed, refused)

"""Who runs a run's cases: this process (:class:`LocalExecutor`, ``--executor local``) or a Ray cluster
(:class:`~.rayexec.RayExecutor`, ``--executor ray``).

An executor takes the planned cases of an open run and, for each, hands back a :class:`CaseResult` whose
case directory is complete in the run directory (case.json last) — in whatever order they finish. The
run around it (manifest, signals, reports, resume) is the same for every executor (:mod:`.run`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

from ..models.results import CaseResult
from ..timeutil import utc_now_iso
from .case import run_case, write_case
from .matrix import PlannedCase
from .phase import AgentSlots
from .settings import ActiveRun

class Executor(Protocol):
    name: str
    """``local`` or ``ray``, recorded in manifest.json."""

    def manifest_fields(self) -> dict:
        """What manifest.json records about this executor (``executor`` and its own facts)."""
        ...

    async def run_cases(self, cases: list[PlannedCase], run: ActiveRun,
                        on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
        """Run every case; append each result to ``results`` and tell ``on_done`` as it finishes. Cancelled
        (Ctrl-C, SIGTERM): stop what runs and return nothing more; finished cases stay written."""
        ...

    def close(self) -> None:
        """Release what the executor holds (the cluster connection)."""
        ...


def write_not_run(case: PlannedCase, run: ActiveRun, **fields: Any) -> CaseResult:
    """A case that did not run (or did not come back), written to its case directory with ``fields``
    (verdict, telemetry, harness_error or skip_reason): never a lost case."""
    now = utc_now_iso()
    res = CaseResult(run_id=run.id, case_id=case.case_id, key=case.key, started_at=now, finished_at=now,
                     duration_s=0.0, tags=list(case.test.tags), run_values=dict(run.values),
                     hardware_profile=run.settings.hardware_profile, **fields)
    write_case(run.folder.case(case.case_id), res, durable=run.settings.durable, signer=run.signer)
    return res


def case_failed(case: PlannedCase, run: ActiveRun, reason: str, detail: str) -> CaseResult:
    """A case the harness could not run or bring back: HARNESS_ERROR with failure reason ``reason`` and
    ``detail`` as its harness_error."""
    from .judge import harness_error_verdict

    verdict, summary = harness_error_verdict(reason)
    return write_not_run(case, run, verdict=verdict, telemetry=summary, harness_error=detail)


async def guarded_case(case: PlannedCase, run: ActiveRun, slots: AgentSlots | None = None) -> CaseResult:
    """run_case, but a bug in the harness becomes a HARNESS_ERROR case instead of a lost result."""
    try:
        return await run_case(case, run, slots)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return await asyncio.to_thread(case_failed, case, run, "harness_exception", f"{type(exc).__name__}: {exc}")


async def run_each(cases: list[PlannedCase], limit: int, one: Callable[[PlannedCase], "asyncio.Future | object"],
                   on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
    """Every case through ``one`` (a coroutine function), at most ``limit`` at once (0: no limit); on
    cancellation every case still running is cancelled and awaited before the cancellation goes on."""
    sem = asyncio.Semaphore(limit) if limit > 0 else None

    async def each(case: PlannedCase) -> None:
        if sem is None:
            res = await one(case)  # type: ignore[misc]
        else:
            async with sem:
                res = await one(case)  # type: ignore[misc]
        results.append(res)
        on_done(res)

    tasks = [asyncio.ensure_future(each(case)) for case in cases]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class LocalExecutor:
    """Cases in this process, ``jobs`` agents at once.

    Up to twice ``jobs`` cases are under way: while a case's agents hold one of the ``jobs`` agent slots
    (:class:`~.phase.AgentSlots`), the next case prepares its first phase and the last one is judged and
    written, so the harness's own work per case runs beside an agent instead of between two."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, jobs)

    def manifest_fields(self) -> dict:
        return {"executor": self.name}

    async def run_cases(self, cases: list[PlannedCase], run: ActiveRun,
                        on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
        slots = AgentSlots(self.jobs)
        await run_each(cases, 2 * self.jobs, lambda case: guarded_case(case, run, slots), on_done, results)

    def close(self) -> None:
        from ..proxy import close_recorder
        close_recorder()  # the telemetry proxies' recorder process (one per run, shared by every phase)

"""A run: allocate the run directory, run planned cases (``--jobs N`` at once), write manifest and reports.

Ctrl-C leaves every finished case intact, kills running agents' process groups, and marks the run
incomplete in manifest.json.
"""

from __future__ import annotations

import asyncio
import platform

import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..context import EvaluationInputs
from ..models.results import CaseResult, ProcessResult
from ..plugins import GripProbePluginManager
from ..runcontext import make_run_context
from ..store import RunDir, allocate_run_dir, atomic_write_json
from ..timeutil import utc_now_iso
from .case import RunConfig, run_case, write_case
from .matrix import PlannedCase


@dataclass
class RunOptions:
    results_root: Path
    jobs: int = 1
    proxy_mode: str | None = None
    timeout_s: float | None = None
    base_url_override: str | None = None
    suite: str | None = None
    specs_root: Path | None = None
    argv: list[str] | None = None
    installed: dict | None = None
    """agent id -> InstalledAgent, for agents installed from a registry (see cli/agents_cmd.py)."""


@dataclass
class RunOutcome:
    run_dir: RunDir
    results: list[CaseResult]
    interrupted: bool
    duration_s: float

    @property
    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r.verdict.status for r in self.results).items()))


def _manifest(rc: RunConfig, opts: RunOptions, cases: list[PlannedCase], *, status: str, started_at: str,
              results: list[CaseResult] | None = None, finished_at: str | None = None) -> dict:
    from .. import __version__
    return {
        "run_id": rc.run_id, "status": status, "started_at": started_at, "finished_at": finished_at,
        "gripprobe_version": __version__, "suite": opts.suite, "argv": opts.argv or [],
        "specs_root": str(opts.specs_root) if opts.specs_root else None,
        "jobs": opts.jobs, "telemetry_proxy_mode": opts.proxy_mode, "run_context": rc.run_context,
        "host": {"python": platform.python_version(), "platform": platform.platform()},
        "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version}
                    for p in rc.gpm.plugins()],
        "planned": [{"case_id": c.case_id, **c.key.model_dump()} for c in cases],
        "counts": dict(sorted(Counter(r.verdict.status for r in results or []).items())),
        "completed": len(results or []),
    }


async def _guarded(pc: PlannedCase, rc: RunConfig) -> CaseResult:
    """run_case, but a bug in the harness becomes a HARNESS_ERROR case instead of a lost result."""
    try:
        return await run_case(pc, rc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        from ..telemetry.summary import summarize_phase
        summary = summarize_phase([], observability="none", capture_missing=True, parse_error=False)
        verdict = rc.gpm.hook.evaluate(inputs=EvaluationInputs(
            validators=[], process=ProcessResult(status="ok"), events=[], summary=summary,
            rules={"harness_error": "harness_exception"}))
        now = utc_now_iso()
        res = CaseResult(run_id=rc.run_id, case_id=pc.case_id, key=pc.key, started_at=now, finished_at=now,
                         duration_s=0.0, verdict=verdict, telemetry=summary, tags=list(pc.test.tags),
                         run_context=rc.run_context, harness_error=f"{type(exc).__name__}: {exc}")
        case_dir = rc.run_dir.case(pc.case_id)
        case_dir.mkdir(parents=True, exist_ok=True)
        write_case(case_dir, res)
        return res


async def _run_all(cases: list[PlannedCase], rc: RunConfig, jobs: int,
                   on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
    sem = asyncio.Semaphore(max(1, jobs))

    async def one(pc: PlannedCase) -> None:
        async with sem:
            res = await _guarded(pc, rc)
            results.append(res)
            on_done(res)

    tasks = [asyncio.ensure_future(one(pc)) for pc in cases]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def execute_run(cases: list[PlannedCase], gpm: GripProbePluginManager, opts: RunOptions,
                on_done: Callable[[CaseResult], None] = lambda r: None) -> RunOutcome:
    """Run ``cases`` into a new run directory. Returns even when interrupted by Ctrl-C."""
    t0 = time.monotonic()
    # Absolute from here on: agents run with the workspace as cwd, so a relative path would point nowhere.
    run_id, path = allocate_run_dir(opts.results_root.resolve())
    run_dir = RunDir(path)
    started_at = utc_now_iso()
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix=f"gripprobe-{run_id}-") as work:
        rc = RunConfig(run_id=run_id, run_dir=run_dir, gpm=gpm, run_context=make_run_context(),
                       work_root=Path(work), proxy_mode=opts.proxy_mode, timeout_s=opts.timeout_s,
                       base_url_override=opts.base_url_override, installed=dict(opts.installed or {}))
        atomic_write_json(run_dir.manifest, _manifest(rc, opts, cases, status="running", started_at=started_at))
        interrupted = False
        try:
            asyncio.run(_run_all(cases, rc, opts.jobs, on_done, results))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            from ..proxy import close_recorder
            close_recorder()  # the telemetry proxies' recorder process (one per run, shared by every phase)
        status = "incomplete" if interrupted or len(results) < len(cases) else "complete"
        atomic_write_json(run_dir.manifest, _manifest(rc, opts, cases, status=status, started_at=started_at,
                                                      results=results, finished_at=utc_now_iso()))
    from ..reports import write_run_reports
    write_run_reports(run_dir)
    return RunOutcome(run_dir, sorted(results, key=lambda r: r.case_id), interrupted, time.monotonic() - t0)



"""One case, top to bottom: can it run? → phases (warmup, measured) → the judge → case.json.

Side effects live at the edges (servers, the agent process, files); the judge (:func:`~.judge.judge_case`,
the one a recompute calls too) turns what the phases left into events, telemetry, validator results and
the verdict. Disk work and the judge (whose validators may run commands) leave the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..models.results import CaseResult, ProcessResult, TelemetrySummary, Verdict
from ..integrity.keys import Signer
from ..integrity.seal import REWRITE, write_case_json
from ..store import atomic_write_json, atomic_write_text
from ..store.trees import remove_tree
from ..timeutil import utc_now_iso
from . import live
from .backfill import run_time_hash
from .evidence import evidence_digests
from .phase_files import CASE_INPUTS
from .matrix import PlannedCase, missing_tool_kinds
from .phase import AgentSlots, PhaseResult, SlotHold, run_phases
from .sandbox import resolve_sandbox
from .settings import ActiveRun

if TYPE_CHECKING:  # pragma: no cover
    from .judge import Judgement

log = logging.getLogger(__name__)


async def run_case(case: PlannedCase, run: ActiveRun, slots: AgentSlots | None = None) -> CaseResult:
    """Run one case and write everything it produced. Returns the case result (also in case.json).

    With ``slots`` (the local executor's ``--jobs``) the case's agents run only while it holds a slot
    (:class:`~.phase.AgentSlots`); its ``duration_s`` leaves out the time it queued for one."""
    hold = slots.hold() if slots is not None else None  # its place in line: before anything is awaited
    try:
        return await _run_case(case, run, hold)
    finally:
        if hold is not None:
            hold.give_back()


async def _run_case(case: PlannedCase, run: ActiveRun, hold: SlotHold | None) -> CaseResult:
    started_at, t0 = utc_now_iso(), time.monotonic()
    case_dir = run.folder.case(case.case_id)
    await asyncio.to_thread((case_dir / "artifacts").mkdir, parents=True, exist_ok=True)
    base: dict[str, Any] = dict(
        run_id=run.id, case_id=case.case_id, key=case.key, tags=list(case.test.tags), language=case.test.language,
        started_at=started_at, run_values=dict(run.values),
        model_hash=await run_time_hash(run.registry.backends.get(case.backend.kind), case.backend),
        agent_version=getattr(run.settings.installed.get(case.agent.id), "version", None) or case.agent.version,
        hardware_profile=run.settings.hardware_profile, telemetry_proxy_mode=case.proxy_mode)

    def result(**kw: Any) -> CaseResult:
        queued = hold.waited_s if hold is not None else 0.0
        return CaseResult(finished_at=utc_now_iso(), duration_s=round(time.monotonic() - t0 - queued, 4), **base, **kw)

    not_run = why_not_run(case, run)
    if not_run is not None:
        res = result(**not_run)
        await asyncio.to_thread(write_case, case_dir, res, durable=run.settings.durable, signer=run.signer)
        return res

    await asyncio.to_thread(atomic_write_json, case_dir / "artifacts" / CASE_INPUTS, {
        "agent": case.agent.model_dump(mode="json"), "model": case.model.model_dump(mode="json"),
        "backend": case.backend.model_dump(mode="json"), "test": case.test.model_dump(mode="json"),
        "format": case.format, "judge": case.judge,
        "interaction": case.interaction.model_dump(mode="json") if case.interaction is not None else None}, sync=False)
    # homes may hold keys: never kept, and nothing the agent left there stops the removal
    scratch = run.scratch / case.case_id
    try:
        phases = await run_phases(case, run, case_dir, slot=hold)
    except BaseException:  # on the way out (an error, a cancel): removed before it goes on
        if hold is not None:
            hold.give_back()
        await asyncio.to_thread(remove_tree, scratch)
        raise
    if hold is not None:
        hold.give_back()  # (given back after the last agent already; here when a phase could not run)
    # removed beside the judging, which reads only the case's folder (its copy of the workspace)
    removal = asyncio.ensure_future(asyncio.to_thread(remove_tree, scratch))
    try:
        live.emit(case.case_id, case.key, "judging")
        from ..telemetry.usage import phases_usage  # the judge's side loads while the first agent runs (run.py)

        judged = await asyncio.to_thread(judge, case, run, phases, case_dir)
    finally:
        left = await removal
    warnings = [w for p in phases for w in p.warnings] + [f"scratch_not_removed: {problem}" for problem in left]
    res = result(phases=judged.phases, validators=judged.validators, verdict=judged.verdict,
                 telemetry=judged.telemetry, harness_error=judged.harness_error,
                 sandbox=resolve_sandbox(case.sandbox).kind, usage=phases_usage(judged.phases),
                 warnings=warnings, interaction=judged.interaction)
    await asyncio.to_thread(write_case, case_dir, res, durable=run.settings.durable, signer=run.signer)
    if run.pages is not None:  # after the case is done: its result is the run's at once, whatever comes next
        asyncio.get_running_loop().run_in_executor(None, _render_page, run, case_dir.name, res)
    return res


def _render_page(run: ActiveRun, name: str, res: CaseResult) -> None:
    """Render the written case's report page for the run's end (``run.pages``), on a worker thread beside the
    next case's agents. Nothing waits for it: a page not rendered by the end (a run interrupted, a failure
    here) is rendered with the reports, where a problem is said. The run's loop lets its worker threads
    finish before it returns, so a run that ends normally finds every page here."""
    try:
        run.pages.add(name, run.folder.stored_case(name), res)
    except Exception:
        log.debug("case page not rendered ahead", exc_info=True)


def why_not_run(case: PlannedCase, run: ActiveRun) -> dict[str, Any] | None:
    """The result fields of a case that does not run (SKIPPED: by choice, its agent's plugin or install
    missing; TOOL_UNSUPPORTED: the agent cannot perform what the test requires), else None."""
    if case.skip_reason:
        return skipped(case.skip_reason)
    driver = run.registry.agents.get(case.agent.plugin)
    if driver is None:
        return skipped(f"agent plugin {case.agent.plugin!r} is not installed "
                       f"(pip install gripprobe-{case.agent.plugin}); see `gripprobe plugins`")
    if driver.install_recipe(case.agent) is not None and case.agent.id not in run.settings.installed:
        return skipped(f"agent {case.agent.id!r} is not installed; run `gripprobe agents install {case.agent.id}`")
    missing = missing_tool_kinds(case.agent, case.test)
    if missing:
        from ..evaluator import EvaluationInputs
        from .judge import evaluate

        summary = not_run_summary()
        verdict, problem = evaluate(run.registry, case.judge, EvaluationInputs(
            validators=[], process=ProcessResult(status="ok"), events=[], summary=summary,
            required_kinds=list(case.test.requires), tool_unsupported="agent_tool_unsupported"))
        return dict(verdict=verdict, telemetry=summary, harness_error=problem,
                    skip_reason=f"agent {case.agent.id!r} cannot perform: {', '.join(missing)}")
    return None


def skipped(reason: str) -> dict[str, Any]:
    verdict = Verdict(status="SKIPPED", evaluator_reason_code="skipped", evaluator_reason_text=reason,
                      failure_reason=None, trajectory="clean", invoked="maybe", artifact_match=0.0,
                      tool_invocation_match=0.0, protocol_match=None, strict_pass_score=0.0, overall_score=0.0,
                      tool_event_verdict="tool_event_not_observable", tool_event_verdict_reason="none")
    return dict(verdict=verdict, telemetry=not_run_summary(), skip_reason=reason)


def not_run_summary() -> TelemetrySummary:
    from ..telemetry.summary import summarize_phase

    return summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                           proxy_status="skipped", proxy_skip_reason="disabled")


def judge(case: PlannedCase, run: ActiveRun, phases: list[PhaseResult], case_dir: Path) -> Judgement:
    """The one judge on what the phases left (validators on the harness's copy of the measured workspace,
    sandboxed as the case's agent was), then the derived files it gives: each phase's events and the
    driver's reading of its final answer (tier D events point into ``<phase>.final.txt``)."""
    from .judge import CaseEvidence, judge_case, write_events

    judged = judge_case(run.plugins, CaseEvidence(
        folder=case_dir, run_id=run.id, case_id=case.case_id, test=case.test, backend=case.backend,
        judge=case.judge, run_values=dict(run.values), phases=[p.evidence for p in phases],
        interaction=case.interaction),
        sandbox=resolve_sandbox(case.sandbox))
    for phase, text in judged.final_texts.items():
        atomic_write_text(case_dir / "artifacts" / f"{phase}.final.txt", text, sync=False)
    write_events(case_dir, judged.events)
    return judged


def write_case(case_dir: Path, res: CaseResult, *, keep_evidence: bool = False, durable: bool = True,
               signer: Signer | None | Literal["rewrite"] = REWRITE, artifacts: bool = True) -> None:
    """Write the case's summary files, make everything durable at once, then case.json last: its presence
    means the case is complete (resume relies on this).

    The sha256 of every evidence file goes into case.json (``evidence``) unless ``keep_evidence`` (a
    recompute keeps what the run recorded, so tampering stays detectable on every later recompute).
    Signed before case.json is written (:func:`~gripprobe_core.integrity.seal.write_case_json`): a new case
    with ``signer`` (the run's key; None on a cluster worker, whose driver signs what it receives), a
    rewrite by this machine's key when the run is signed with it and the case still verifies.
    ``durable=False`` skips the flushes: a cluster worker's copy is temporary, the driver makes its own
    durable (runner/rayexec.py). ``artifacts=False`` (a recompute whose stored ``artifacts/`` is not a real
    folder) writes nothing into ``artifacts/``."""
    if artifacts:
        folder = case_dir / "artifacts"
        folder.mkdir(parents=True, exist_ok=True)
        phases = {p.phase: p.summary.model_dump(mode="json") for p in res.phases}
        atomic_write_json(folder / "events.summary.json", {**res.telemetry.model_dump(mode="json"), "phases": phases},
                          sync=False)
    atomic_write_text(case_dir / "expected.txt", "".join(f"## {v.kind}\n{v.expected}\n" for v in res.validators),
                      sync=False)
    atomic_write_text(case_dir / "observed.txt", "".join(
        f"## {v.kind}: {'pass' if v.passed else 'fail'}\n{v.observed}\n" for v in res.validators), sync=False)
    if not keep_evidence:  # a case that never ran has none, unless it got as far as writing some (a harness bug)
        digests = evidence_digests(case_dir)
        res.evidence = digests if res.phases or digests else None
    write_case_json(case_dir, res, signer=signer, new=not keep_evidence, durable=durable)

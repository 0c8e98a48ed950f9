"""One case, top to bottom: can it run? → phases (warmup, measured) → validators → verdict → case.json.

Side effects live at the edges (servers, the agent process, files); the verdict is the evaluator's, a
pure function. Disk work and the validators (which may run commands) leave the event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..evaluator import EvaluationInputs
from ..models.results import CaseResult, ProcessResult, TelemetrySummary, ValidatorResult, Verdict
from ..store import atomic_write_json, atomic_write_text, flush_folder
from ..store.trees import remove_tree
from ..telemetry.summary import summarize_phase
from ..telemetry.usage import combine
from ..timeutil import utc_now_iso
from ..validators.context import ValidatorContext
from .evidence import evidence_digests
from .judge import (
    CASE_INPUTS, backend_was_unreachable, budget_was_exceeded, derive_verdict, evaluate, model_not_under_test,
    phase_harness_failure, run_validators,
)
from .matrix import PlannedCase, missing_tool_kinds
from .phase import PHASES, PhaseResult, run_phase
from .sandbox import resolve_sandbox
from .settings import ActiveRun


@dataclass(frozen=True)
class Judgement:
    """The validators' results and the verdict of a case whose phases ran."""

    validators: list[ValidatorResult]
    verdict: Verdict
    harness_error: str | None


async def run_case(case: PlannedCase, run: ActiveRun) -> CaseResult:
    """Run one case and write everything it produced. Returns the case result (also in case.json)."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    case_dir = run.folder.case(case.case_id)
    await asyncio.to_thread((case_dir / "artifacts").mkdir, parents=True, exist_ok=True)
    base: dict[str, Any] = dict(
        run_id=run.id, case_id=case.case_id, key=case.key, tags=list(case.test.tags), language=case.test.language,
        started_at=started_at, run_values=dict(run.values), model_hash=case.backend.model_hash,
        agent_version=getattr(run.settings.installed.get(case.agent.id), "version", None) or case.agent.version,
        hardware_profile=run.settings.hardware_profile, telemetry_proxy_mode=case.proxy_mode)

    def result(**kw: Any) -> CaseResult:
        return CaseResult(finished_at=utc_now_iso(), duration_s=round(time.monotonic() - t0, 4), **base, **kw)

    not_run = why_not_run(case, run)
    if not_run is not None:
        res = result(**not_run)
        await asyncio.to_thread(write_case, case_dir, res, durable=run.settings.durable)
        return res

    await asyncio.to_thread(atomic_write_json, case_dir / "artifacts" / CASE_INPUTS, {
        "agent": case.agent.model_dump(mode="json"), "model": case.model.model_dump(mode="json"),
        "backend": case.backend.model_dump(mode="json"), "test": case.test.model_dump(mode="json"),
        "format": case.format, "judge": case.judge}, sync=False)
    phases: list[PhaseResult] = []
    try:
        for phase in PHASES:
            phases.append(await run_phase(case, run, phase, case_dir))
            if phases[-1].harness_error:
                break
    finally:  # homes may hold keys: never kept, and nothing the agent left there stops the removal
        left = await asyncio.to_thread(remove_tree, run.scratch / case.case_id)
    judged = await asyncio.to_thread(judge, case, run, phases[-1], case_dir)
    last = phases[-1].record
    warnings = [w for p in phases for w in p.warnings] + [f"scratch_not_removed: {problem}" for problem in left]
    res = result(phases=[p.record for p in phases], validators=judged.validators, verdict=judged.verdict,
                 telemetry=last.summary, harness_error=judged.harness_error,
                 sandbox=resolve_sandbox(case.sandbox).kind, usage=combine(p.record.usage for p in phases),
                 warnings=warnings)
    await asyncio.to_thread(write_case, case_dir, res, durable=run.settings.durable)
    return res


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
    return summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                           proxy_status="skipped", proxy_skip_reason="disabled")


def judge(case: PlannedCase, run: ActiveRun, last: PhaseResult, case_dir: Path) -> Judgement:
    """Validators on the harness's copy of the measured workspace (what a recompute judges too, never the
    agent's own directory), then the evaluator."""
    validators: list[ValidatorResult] = []
    error = None
    if last.harness_error is None and last.record.phase == "measured":
        validators, error = run_validators(run.registry, case.test, ValidatorContext(
            workspace=case_dir / "workspace", test=case.test, run_values=dict(run.values),
            challenge=dict(last.challenge_facts), challenge_requests=list(last.challenge_requests),
            events=last.events, agent_workspace=str(last.workspace), sandbox=resolve_sandbox(case.sandbox)))
    rec = last.record
    verdict, problem = derive_verdict(
        run.registry, case.judge, case.test, process=rec.process, events=last.events, summary=rec.summary,
        validators=validators, harness_error=phase_harness_failure(last.harness_error, error),
        backend_unreachable=backend_was_unreachable(rec, case_dir / "artifacts"),
        budget_exceeded=budget_was_exceeded(rec),
        model_swapped=model_not_under_test(rec, case_dir / "artifacts", case.backend))
    return Judgement(validators, verdict, problem or last.harness_error or error)


def write_case(case_dir: Path, res: CaseResult, *, keep_evidence: bool = False, durable: bool = True) -> None:
    """Write the case's summary files, make everything durable at once, then case.json last: its presence
    means the case is complete (resume relies on this).

    The sha256 of every evidence file goes into case.json (``evidence``) unless ``keep_evidence`` (a
    recompute keeps what the run recorded, so tampering stays detectable on every later recompute).
    ``durable=False`` skips the flushes: a cluster worker's copy is temporary, the driver makes its own
    durable (runner/rayexec.py)."""
    artifacts = case_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    phases = {p.phase: p.summary.model_dump(mode="json") for p in res.phases}
    atomic_write_json(artifacts / "events.summary.json", {**res.telemetry.model_dump(mode="json"), "phases": phases},
                      sync=False)
    atomic_write_text(case_dir / "expected.txt", "".join(f"## {v.kind}\n{v.expected}\n" for v in res.validators),
                      sync=False)
    atomic_write_text(case_dir / "observed.txt", "".join(
        f"## {v.kind}: {'pass' if v.passed else 'fail'}\n{v.observed}\n" for v in res.validators), sync=False)
    if not keep_evidence:
        res.evidence = evidence_digests(case_dir) if res.phases else None
    if durable:
        flush_folder(case_dir)
    atomic_write_json(case_dir / "case.json", res.model_dump(mode="json"), sync=durable)

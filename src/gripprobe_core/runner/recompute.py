"""``rebuild-reports --recompute``: re-derive every verdict field of a stored run from its artifacts.

For each case the observations are taken as stored (the process result and proxy facts of each phase
in case.json, the agent's stdout/stderr and kept artifacts, the proxy records, the workspace, the
challenge log) and everything judged from them is derived again with today's code (see
:mod:`.judge`): events, telemetry summaries, validators, verdict. On an unchanged installation the
result is identical to the run's own (tests/test_recompute.py holds that).

A case whose required artifacts are missing or corrupt becomes HARNESS_ERROR naming the file; a case
whose case.json cannot be read at all is rebuilt from the manifest's plan (or from its case_inputs)
as HARNESS_ERROR. Nothing raises for bad data.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonl import json_lines
from ..models.events import Event
from ..models.results import CaseKey, CaseResult, PhaseRecord
from ..models.specs import BackendSpec, CliAgentSpec, ModelSpec, TestSpec
from ..phase import PhaseCapture, PhaseContext
from ..pluginmanager import GripProbePluginManager
from ..store import RunFolder, atomic_write_text
from ..telemetry.summary import summarize_phase
from ..telemetry.usage import combine
from ..validators.context import ValidatorContext
from .evidence import verify_evidence
from .judge import (
    CASE_INPUTS, backend_was_unreachable, budget_was_exceeded, derive_telemetry, derive_verdict, harness_error_verdict,
    model_not_under_test, phase_context_name, phase_harness_failure, proxy_evidence, proxy_record_name, run_validators,
)

#: The fields a recompute derives (and the identity test compares).
DERIVED_FIELDS = ("verdict", "telemetry", "validators", "harness_error")


class ArtifactProblem(Exception):
    """A required artifact is missing or corrupt (the message names it)."""


@dataclass
class Recomputed:
    case_id: str
    result: CaseResult | None
    changed: list[str] = field(default_factory=list)
    problem: str | None = None
    events: dict[str, list[Event]] = field(default_factory=dict)
    """The re-derived events of each phase (written with the case when it changed)."""


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ArtifactProblem(f"{path.parent.name}/{path.name} is missing") from None
    except (OSError, ValueError) as exc:
        raise ArtifactProblem(f"{path.parent.name}/{path.name} is unreadable: {exc}") from None


def _inputs(case_dir: Path) -> tuple[CliAgentSpec, ModelSpec, BackendSpec, TestSpec, str]:
    data = _load_json(case_dir / "artifacts" / CASE_INPUTS)
    try:
        return (CliAgentSpec.model_validate(data["agent"]), ModelSpec.model_validate(data["model"]),
                BackendSpec.model_validate(data["backend"]), TestSpec.model_validate(data["test"]), str(data["format"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactProblem(f"artifacts/{CASE_INPUTS} does not hold the case's specs: "
                              f"{type(exc).__name__}") from None


def _judge(case_dir: Path) -> str:
    """The registered evaluator the case was judged by (``case_inputs.json``; runs from before judges were
    named: the core's)."""
    from ..evaluator import EVALUATOR_NAME

    judge = _load_json(case_dir / "artifacts" / CASE_INPUTS).get("judge", EVALUATOR_NAME)
    if not isinstance(judge, str) or not judge:
        raise ArtifactProblem(f"artifacts/{CASE_INPUTS} names no judge it could be ({type(judge).__name__})")
    return judge


def _phase(plugins: GripProbePluginManager, res: CaseResult, rec: PhaseRecord, case_dir: Path,
           specs: tuple[CliAgentSpec, ModelSpec, BackendSpec, TestSpec, str]
           ) -> tuple[PhaseRecord, list[Event], dict[str, Any]]:
    agent, model, backend, test, fmt = specs
    artifacts = case_dir / "artifacts"
    pctx = _load_json(artifacts / phase_context_name(rec.phase))
    if not isinstance(pctx, dict):
        raise ArtifactProblem(f"artifacts/{phase_context_name(rec.phase)} is not an object")
    if pctx.get("harness_error"):  # the phase never ran (e.g. a forced proxy that could not start)
        summary = summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                                  proxy_status="error", proxy_skip_reason=(rec.proxy or {}).get("skip_reason"))
        return rec.model_copy(update={"summary": summary}), [], pctx
    driver = plugins.registry.agents.get(agent.plugin)
    if driver is None:
        raise ArtifactProblem(f"agent plugin {agent.plugin!r} is not installed: its outputs cannot be re-read "
                              f"(pip install gripprobe-{agent.plugin})")
    try:
        ctx = PhaseContext(
            run_id=res.run_id, case_id=res.case_id, phase=rec.phase, agent=agent, model=model, backend=backend,
            test=test, format=fmt, prompt=str(pctx["prompt"]), workspace=Path(pctx["workspace"]),
            home=Path(pctx["home"]), tmpdir=Path(pctx["tmpdir"]), artifacts_dir=artifacts,
            base_url=str(pctx["base_url"]), model_name=str(pctx["model_name"]),
            timeout_s=float(pctx["timeout_s"]), run_values=dict(res.run_values),
            agent_executable=Path(pctx["agent_executable"]) if pctx.get("agent_executable") else None)
        kept_names = [str(n) for n in pctx.get("extra") or []]
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactProblem(f"artifacts/{phase_context_name(rec.phase)} lacks {exc}") from None
    files = {n: artifacts / f"{rec.phase}.{n}" for n in kept_names}
    for name, path in files.items():
        if not path.is_file():
            raise ArtifactProblem(f"artifacts/{path.name} (the agent's {name}) is missing")
    capture = PhaseCapture(stdout_path=case_dir / f"{rec.phase}.stdout", stderr_path=case_dir / f"{rec.phase}.stderr",
                           process=rec.process, files=files)
    proxy = proxy_evidence(rec.phase, rec.proxy, artifacts / proxy_record_name(rec.phase), driver)
    derived = derive_telemetry(plugins.hook, driver, ctx, capture, proxy, run_id=res.run_id, case_id=res.case_id)
    return rec.model_copy(update={"summary": derived.summary, "usage": derived.usage}), derived.events, pctx


def _harness_case(plugins: GripProbePluginManager, base: CaseResult, problem: str,
                  reason: str = "artifact_missing_or_corrupt") -> CaseResult:
    verdict, summary = harness_error_verdict(reason)
    return base.model_copy(update={"verdict": verdict, "telemetry": summary, "validators": [],
                                   "harness_error": problem})


def _key_for(case_dir: Path, planned: dict[str, dict]) -> CaseKey | None:
    entry = planned.get(case_dir.name)
    try:
        if entry:
            return CaseKey.model_validate({k: entry[k] for k in ("agent", "model", "backend", "format", "test")})
        agent, model, backend, _test, fmt = _inputs(case_dir)
        return CaseKey(agent=agent.id, model=model.id, backend=backend.id, format=fmt, test=_test.id)
    except (ArtifactProblem, KeyError, TypeError, ValueError):
        return None


def recompute_case(plugins: GripProbePluginManager, run_dir: RunFolder, case_dir: Path,
                   planned: dict[str, dict] | None = None) -> Recomputed:
    """Re-derive one case. Does not write anything (see :func:`recompute_run`)."""
    from ..store import read_case

    case_id = case_dir.name
    orig = read_case(case_dir / "case.json")
    if orig is None:
        key = _key_for(case_dir, planned or {})
        if key is None:
            return Recomputed(case_id, None, problem="case.json is missing or corrupt and nothing names the case")
        problem = "case.json is missing or corrupt"
        verdict, summary = harness_error_verdict("artifact_missing_or_corrupt")
        res = CaseResult(run_id=run_dir.run_id, case_id=case_id, key=key, started_at="", finished_at="",
                         duration_s=0.0, verdict=verdict, telemetry=summary, harness_error=problem)
        return Recomputed(case_id, res, ["verdict"], problem)
    if not orig.phases:  # skipped, tool-unsupported or a harness exception: nothing ran, nothing to derive
        return Recomputed(case_id, orig)
    if orig.evidence is not None:  # runs before evidence digests were recorded cannot be checked
        tampered = verify_evidence(case_dir, orig.evidence)
        if tampered:
            problem = "evidence changed after the run: " + "; ".join(tampered[:5]) + (
                f" (+{len(tampered) - 5} more)" if len(tampered) > 5 else "")
            res = _harness_case(plugins, orig, problem, reason="artifact_tampered")
            return Recomputed(case_id, res, _changed(orig, res), problem)
    try:
        specs = _inputs(case_dir)
        judge = _judge(case_dir)
        phases, events, contexts = [], [], []
        for rec in orig.phases:
            new_rec, ev, pctx = _phase(plugins, orig, rec, case_dir, specs)
            phases.append(new_rec)
            events.append(ev)
            contexts.append(pctx)
    except ArtifactProblem as exc:
        res = _harness_case(plugins, orig, str(exc))
        return Recomputed(case_id, res, _changed(orig, res), str(exc))

    test = specs[3]
    last, last_events, last_ctx = phases[-1], events[-1], contexts[-1]
    phase_error = last_ctx.get("harness_error") or None
    validators: list = []
    validator_error = None
    if phase_error is None and last.phase == "measured":
        requests_path = case_dir / "artifacts" / "challenge.measured.requests.jsonl"
        requests = [r for _, r in json_lines(requests_path.read_bytes())] if requests_path.is_file() else []
        validators, validator_error = run_validators(plugins.registry, test, ValidatorContext(
            workspace=case_dir / "workspace", test=test, run_values=dict(orig.run_values),
            challenge=dict(last.challenge), challenge_requests=requests, events=last_events,
            agent_workspace=str(last_ctx.get("workspace") or "") or None, sandbox=_sandbox(orig)))
    verdict, judge_problem = derive_verdict(
        plugins.registry, judge, test, process=last.process, events=last_events, summary=last.summary,
        validators=validators, harness_error=phase_harness_failure(phase_error, validator_error),
        backend_unreachable=backend_was_unreachable(last, case_dir / "artifacts"),
        budget_exceeded=budget_was_exceeded(last),
        model_swapped=model_not_under_test(last, case_dir / "artifacts", specs[2]))
    harness_error = judge_problem or phase_error or validator_error
    res = orig.model_copy(update={"phases": phases, "validators": validators, "verdict": verdict,
                                  "telemetry": last.summary, "harness_error": harness_error,
                                  "usage": combine(p.usage for p in phases)})
    return Recomputed(case_id, res, _changed(orig, res),
                      events={rec.phase: ev for rec, ev in zip(phases, events)})


def _sandbox(orig: CaseResult) -> Any:
    """Where a recompute runs the case's ``command_output`` validators (they run the agent's work):
    confined whenever bubblewrap works here, unless the run itself chose to run unsandboxed."""
    from .sandbox import resolve_sandbox

    return resolve_sandbox("none" if orig.sandbox == "none" else "auto")


def _changed(a: CaseResult, b: CaseResult) -> list[str]:
    out = [f for f in DERIVED_FIELDS if _dump(getattr(a, f)) != _dump(getattr(b, f))]
    if [_dump(p.summary) for p in a.phases] != [_dump(p.summary) for p in b.phases]:
        out.append("phases.summary")
    return out


def _dump(v: Any) -> Any:
    if isinstance(v, list):
        return [_dump(x) for x in v]
    return v.model_dump(mode="json") if hasattr(v, "model_dump") else v


def recompute_run(plugins: GripProbePluginManager, run_dir: RunFolder, *, write: bool = True) -> list[Recomputed]:
    """Recompute every case of ``run_dir``. With ``write``, a case whose derived fields changed keeps its
    previous case.json as ``case.before-recompute.json`` (once) and gets the new one plus new events."""
    from .case import write_case

    entries = run_dir.read_manifest().get("planned")
    planned = {p["case_id"]: p for p in entries if isinstance(p, dict) and "case_id" in p} \
        if isinstance(entries, list) else {}
    dirs = sorted(d for d in run_dir.cases.iterdir() if d.is_dir()) if run_dir.cases.is_dir() else []
    # Cases are independent; command validators wait on processes: several at once (the registry and the
    # sandbox probe are settled first, so the threads only read them).
    plugins.registry
    from .sandbox import resolve_sandbox
    resolve_sandbox("auto")
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) * 2))) as pool:
        out = list(pool.map(lambda d: recompute_case(plugins, run_dir, d, planned), dirs))
    for case_dir, r in zip(dirs, out):
        if not write or r.result is None or not r.changed:
            continue
        old = case_dir / "case.json"
        keep = case_dir / "case.before-recompute.json"
        if old.is_file() and not keep.exists():
            keep.write_bytes(old.read_bytes())
        for phase, events in r.events.items():
            atomic_write_text(case_dir / "artifacts" / f"events.{phase}.jsonl", "".join(
                json.dumps(e.model_dump(mode="json"), ensure_ascii=False, default=str) + "\n" for e in events))
        (case_dir / "artifacts").mkdir(parents=True, exist_ok=True)
        write_case(case_dir, r.result, keep_evidence=True)
    return out


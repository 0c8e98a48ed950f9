"""``rebuild-reports --recompute``: re-derive every verdict field of a stored run from its artifacts.

For each case the observations are taken as stored (the process result and proxy facts of each phase
in case.json, the agent's stdout/stderr and kept artifacts, the proxy records, the workspace, the
challenge log) and handed, as :class:`~.judge.CaseEvidence`, to the one judge a live run uses
(:func:`~.judge.judge_case`): events, telemetry summaries, validators, verdict are derived again with
today's code. On an unchanged installation the result is identical to the run's own
(tests/test_runs_lifecycle.py and the conformance tests hold that).

A stored run is read without following a link anywhere below the run folder: each case is copied, link
free, into a scratch folder (:func:`~.evidence.copy_stored_case`) and judged there, so neither a driver's
parser nor a validator ever reads through a link planted in it (a ``workspace/`` pointing at ``/``, an
``artifacts/`` pointing elsewhere); a case holding such a thing is HARNESS_ERROR naming it, and results are
never written through one. A case whose required artifacts are missing or corrupt becomes HARNESS_ERROR
naming the file; a case whose case.json cannot be read at all is rebuilt from the manifest's plan (or from
its case_inputs) as HARNESS_ERROR. Nothing raises for bad data.
"""

from __future__ import annotations

import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evaluator import EVALUATOR_NAME
from ..models.events import Event
from ..models.results import CaseKey, CaseResult, InteractionRecord
from ..models.specs import BackendSpec, CliAgentSpec, InteractionSpec, ModelSpec, TestSpec
from ..phase import PhaseContext
from ..pluginmanager import GripProbePluginManager
from ..store import RunFolder, Stored, atomic_write_bytes, read_regular
from ..store.layout import STORED_JSON_LIMIT
from ..telemetry.usage import phases_usage
from ..integrity.check import tamper_problems
from .evidence import copy_stored_case
from .sandbox import stored_data_sandbox
from .judge import (
    CASE_INPUTS, CaseEvidence, MissingEvidence, PhaseEvidence, harness_error_verdict, judge_case, phase_context_name,
    stored_seen_at, write_events,
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


def _load_json(path: Path | Stored) -> Any:
    shown = Path(path.path if isinstance(path, Stored) else path)
    try:
        return json.loads(path.read(STORED_JSON_LIMIT) if isinstance(path, Stored) else read_regular(path, STORED_JSON_LIMIT))
    except FileNotFoundError:
        raise ArtifactProblem(f"{shown.parent.name}/{shown.name} is missing") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ArtifactProblem(f"{shown.parent.name}/{shown.name} is unreadable: {exc}") from None


Specs = tuple[CliAgentSpec, ModelSpec, BackendSpec, TestSpec, str, "InteractionSpec | None"]


def _inputs(case_dir: Path | Stored) -> Specs:
    data = _load_json(case_dir / "artifacts" / CASE_INPUTS)
    try:
        policy = data.get("interaction")
        return (CliAgentSpec.model_validate(data["agent"]), ModelSpec.model_validate(data["model"]),
                BackendSpec.model_validate(data["backend"]), TestSpec.model_validate(data["test"]), str(data["format"]),
                InteractionSpec.model_validate(policy) if policy is not None else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactProblem(f"artifacts/{CASE_INPUTS} does not hold the case's specs: "
                              f"{type(exc).__name__}") from None


def _judge(case_dir: Path) -> str:
    """The registered evaluator the case was judged by (``case_inputs.json``; runs from before judges were
    named: the core's)."""
    judge = _load_json(case_dir / "artifacts" / CASE_INPUTS).get("judge", EVALUATOR_NAME)
    if not isinstance(judge, str) or not judge:
        raise ArtifactProblem(f"artifacts/{CASE_INPUTS} names no judge it could be ({type(judge).__name__})")
    return judge


def stored_evidence(res: CaseResult, case_dir: Path) -> CaseEvidence:
    """What the one judge takes, from a stored case: its specs and judge (``case_inputs.json``), and per phase
    what case.json recorded (process result, proxy, challenge facts, backend probe) and what
    ``<phase>.context.json`` says the agent saw. :class:`ArtifactProblem` names what is missing or corrupt."""
    agent, model, backend, test, fmt, interaction = _inputs(case_dir)
    judge = _judge(case_dir)
    phases = []
    for rec in res.phases:
        pctx = _load_json(case_dir / "artifacts" / phase_context_name(rec.phase))
        if not isinstance(pctx, dict):
            raise ArtifactProblem(f"artifacts/{phase_context_name(rec.phase)} is not an object")
        try:
            ctx = PhaseContext(
                run_id=res.run_id, case_id=res.case_id, phase=rec.phase, agent=agent, model=model, backend=backend,
                test=test, format=fmt, prompt=str(pctx["prompt"]), workspace=Path(pctx["workspace"]),
                home=Path(pctx["home"]), tmpdir=Path(pctx["tmpdir"]), artifacts_dir=case_dir / "artifacts",
                base_url=str(pctx["base_url"]), model_name=str(pctx["model_name"]),
                timeout_s=float(pctx["timeout_s"]), run_values=dict(res.run_values),
                agent_executable=Path(pctx["agent_executable"]) if pctx.get("agent_executable") else None,
                interaction=interaction, seen_at=stored_seen_at(pctx.get("seen_at")))
            kept = [str(n) for n in pctx.get("extra") or []]
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactProblem(f"artifacts/{phase_context_name(rec.phase)} lacks {exc}") from None
        never_ran = pctx.get("harness_error") or None
        phases.append(PhaseEvidence(ctx, rec.process, kept=kept, proxy=dict(rec.proxy or {}),
                                    challenge=dict(rec.challenge), probe=rec.backend_probe,
                                    never_ran=str(never_ran) if never_ran else None,
                                    interaction=pctx["interaction"] if isinstance(pctx.get("interaction"), dict)
                                    else None))
    return CaseEvidence(folder=case_dir, run_id=res.run_id, case_id=res.case_id, test=test, backend=backend,
                        judge=judge, run_values=dict(res.run_values), phases=phases, interaction=interaction)


def _harness_case(base: CaseResult, problem: str, reason: str = "artifact_missing_or_corrupt") -> CaseResult:
    verdict, summary = harness_error_verdict(reason)
    return base.model_copy(update={"verdict": verdict, "telemetry": summary, "validators": [],
                                   "harness_error": problem})


def _key_for(case_dir: Stored, planned: dict[str, dict]) -> CaseKey | None:
    entry = planned.get(case_dir.name)
    try:
        if entry:
            return CaseKey.model_validate({k: entry[k] for k in ("agent", "model", "backend", "format", "test")})
        agent, model, backend, _test, fmt, _policy = _inputs(case_dir)
        return CaseKey(agent=agent.id, model=model.id, backend=backend.id, format=fmt, test=_test.id)
    except (ArtifactProblem, KeyError, TypeError, ValueError):
        return None


def recompute_case(plugins: GripProbePluginManager, run_dir: RunFolder, case_dir: Path,
                   planned: dict[str, dict] | None = None) -> Recomputed:
    """Re-derive one case (``case_dir``: a case folder of ``run_dir``). Does not write anything (see
    :func:`recompute_run`)."""
    from ..store import read_case

    case_id = case_dir.name
    stored = run_dir.stored_case(case_id)
    orig = read_case(stored / "case.json")
    if orig is None:
        key = _key_for(stored, planned or {})
        if key is None:
            return Recomputed(case_id, None, problem="case.json is missing or corrupt and nothing names the case")
        problem = "case.json is missing or corrupt"
        verdict, summary = harness_error_verdict("artifact_missing_or_corrupt")
        res = CaseResult(run_id=run_dir.run_id, case_id=case_id, key=key, started_at="", finished_at="",
                         duration_s=0.0, verdict=verdict, telemetry=summary, harness_error=problem)
        return Recomputed(case_id, res, ["verdict"], problem)
    # signed runs: the case must verify; unsigned runs with digests: they must hold (integrity/check.py)
    tampered = tamper_problems(run_dir.path, case_dir, orig)
    if tampered:
        problem = "changed after the run: " + "; ".join(tampered[:5]) + (
            f" (+{len(tampered) - 5} more)" if len(tampered) > 5 else "")
        res = _harness_case(orig, problem, reason="artifact_tampered")
        return Recomputed(case_id, res, _changed(orig, res), problem)
    if not orig.phases:  # skipped, tool-unsupported or a harness exception: nothing ran, nothing to derive
        return Recomputed(case_id, orig)
    from ..store.trees import scratch_folder

    with scratch_folder("gripprobe-recompute-") as scratch:  # the case, copied without following a link
        copy = scratch / "case"
        try:
            planted = copy_stored_case(stored, copy)
            if planted:
                raise ArtifactProblem("the stored case holds what the harness never writes, not read: "
                                      + "; ".join(planted[:5]) + (f" (+{len(planted) - 5} more)" if len(planted) > 5 else ""))
            judged = judge_case(plugins, stored_evidence(orig, copy), sandbox=stored_data_sandbox())
        except (ArtifactProblem, MissingEvidence) as exc:
            res = _harness_case(orig, str(exc))
            return Recomputed(case_id, res, _changed(orig, res), str(exc))
    res = orig.model_copy(update={"phases": judged.phases, "validators": judged.validators, "verdict": judged.verdict,
                                  "telemetry": judged.telemetry, "harness_error": judged.harness_error,
                                  "usage": phases_usage(judged.phases),
                                  "interaction": InteractionRecord.model_validate(judged.interaction)
                                  if judged.interaction is not None else None})
    return Recomputed(case_id, res, _changed(orig, res), events=judged.events)


def _changed(a: CaseResult, b: CaseResult) -> list[str]:
    out = [f for f in DERIVED_FIELDS if _dump(getattr(a, f)) != _dump(getattr(b, f))]
    if [_dump(p.summary) for p in a.phases] != [_dump(p.summary) for p in b.phases]:
        out.append("phases.summary")
    return out


def _dump(v: Any) -> Any:
    if isinstance(v, list):
        return [_dump(x) for x in v]
    return v.model_dump(mode="json") if hasattr(v, "model_dump") else v


def _real_folder(path: Stored) -> bool:
    """Whether ``path`` is a real folder (made when missing); False for a link or anything else there."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        try:
            path.path.mkdir()
            st = path.lstat()
        except OSError:
            return False
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def recompute_run(plugins: GripProbePluginManager, run_dir: RunFolder, *, write: bool = True) -> list[Recomputed]:
    """Recompute every case of ``run_dir``. With ``write``, a case whose derived fields changed keeps its
    previous case.json as ``case.before-recompute.json`` (once) and gets the new one plus new events."""
    from .case import write_case

    entries = run_dir.read_manifest().get("planned")
    planned = {p["case_id"]: p for p in entries if isinstance(p, dict) and "case_id" in p} \
        if isinstance(entries, list) else {}
    dirs = [run_dir.case(name) for name in run_dir.case_names()]  # real folders: a link is no case
    # Cases are independent; command validators wait on processes: several at once (the registry and the
    # sandbox probe are settled first, so the threads only read them).
    plugins.registry
    stored_data_sandbox()
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) * 2))) as pool:
        out = list(pool.map(lambda d: recompute_case(plugins, run_dir, d, planned), dirs))
    for case_dir, r in zip(dirs, out):
        if not write or r.result is None or not r.changed:
            continue
        stored = run_dir.stored_case(case_dir.name)
        # never written through a link: the case folder was listed as a real folder; an artifacts/ that is not
        # one (a link planted there) gets none of the derived files, only case.json says what happened
        artifacts = _real_folder(stored / "artifacts")
        keep = stored / "case.before-recompute.json"
        if not keep.lexists():
            try:
                atomic_write_bytes(case_dir / keep.name, (stored / "case.json").read(STORED_JSON_LIMIT))
            except OSError:
                pass  # no readable case.json to keep
        if artifacts:
            write_events(case_dir, r.events)
        write_case(case_dir, r.result, keep_evidence=True, artifacts=artifacts)
    return out


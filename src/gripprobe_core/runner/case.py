"""One case, top to bottom: prepare → phases (warmup, measured) → validate → evaluate → write.

Side effects live at the edges (servers, the agent process, files); the verdict is the pure evaluator's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..phase import EvaluationInputs, PhaseContext, PhaseCapture, ValidatorContext
from ..models.events import Event
from ..models.results import (
    CaseResult, PhaseRecord, ProcessResult, TelemetrySummary, ValidatorResult, Verdict,
)
from ..models.specs import TestSpec
from ..pluginmanager import GripProbePluginManager
from ..runvalues import render_test, template_vars
from ..store import RunFolder, atomic_write_json, atomic_write_text
from ..telemetry.summary import summarize_phase
from ..timeutil import utc_now_iso
from .judge import (
    CASE_INPUTS, ProxyEvidence, backend_was_unreachable, derive_telemetry, derive_verdict, run_validators,
    write_phase_context,
)
from .evidence import LISTING, copy_file, copy_workspace, evidence_digests
from .env import base_env, make_phase_dirs
from .matrix import PlannedCase, missing_tool_kinds
from .preflight import probe_backend
from .process import DEFAULT_CAPTURE_CAP, run_process
from .proxy_session import ProxySession, open_proxy_session
from .sandbox import Sandbox, resolve_sandbox

PHASES = ("warmup", "measured")


@dataclass
class ActiveRun:
    """What every case of a run shares."""

    run_id: str
    run_dir: RunFolder
    gpm: GripProbePluginManager
    run_context: dict[str, str]
    work_root: Path
    proxy_mode: str | None = None  # None: the agent spec's telemetry_proxy_mode
    timeout_s: float | None = None
    base_url_override: str | None = None
    capture_cap: int = DEFAULT_CAPTURE_CAP
    installed: dict[str, Any] = field(default_factory=dict)
    hardware_profile: str | None = None
    proxy_max_body: int | None = None  # None: the proxy's default (64 MiB)
    source_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    sandbox_mode: str | None = None  # None: the agent spec's ``sandbox``, else auto

    def sandbox_for(self, pc: PlannedCase) -> Sandbox:
        """The sandbox a case's phases run in (the run-start probe decided what ``auto`` means)."""
        return resolve_sandbox(self.sandbox_mode or pc.agent.sandbox or "auto")


@dataclass
class PhaseResult:
    record: PhaseRecord
    events: list[Event]
    workspace: Path
    challenge_facts: dict[str, Any]
    challenge_requests: list[dict[str, Any]]
    harness_error: str | None = None


def phase_timeout(pc: PlannedCase, rc: ActiveRun) -> float:
    if rc.timeout_s:
        return rc.timeout_s
    if pc.test.timeout_s:
        return pc.test.timeout_s
    pol = pc.model.policy
    agent_pol = pol.agents.get(pc.agent.id)
    if agent_pol and agent_pol.timeout_s:
        return agent_pol.timeout_s
    return pol.timeout_s or pc.agent.timeout_s


def _seed_workspace(ws: Path, test: TestSpec) -> None:
    """Write the (already rendered) fixtures of ``test`` into ``ws``."""
    ws.mkdir(parents=True, exist_ok=True)
    for fx in test.fixtures:
        target = ws / fx.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fx.content, encoding="utf-8")
        if fx.mode is not None:
            target.chmod(fx.mode)


def resolve_executable(name: str, path_env: str) -> str:
    """Bare names are looked up next to the running Python first (same venv), then on the agent's PATH."""
    if os.sep in name:
        return name
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name, path=path_env) or name


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))


async def run_phase(pc: PlannedCase, rc: ActiveRun, phase: str, case_dir: Path, scratch: Path) -> PhaseResult:
    hook = rc.gpm.hook
    reg = rc.gpm.registry
    artifacts = case_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    # Every phase works outside the results tree; the harness copies the measured workspace back itself.
    workspace = scratch / phase / "workspace"
    home, tmpdir = scratch / phase / "home", scratch / phase / "tmp"
    challenge = None
    oracle = None
    proxy: ProxySession | None = None
    facts: dict[str, Any] = {}
    requests: list[dict[str, Any]] = []
    try:
        if pc.test.challenge is not None:
            challenge = reg.challenges[pc.test.challenge.kind](dict(pc.test.challenge.options), phase)
            await challenge.start()
            facts = dict(challenge.facts)
        variables = template_vars(rc.run_context, workspace=workspace, challenge_facts=facts)
        test = render_test(pc.test, variables)
        _seed_workspace(workspace, test)
        prompt = test.prompt
        if phase == "measured":
            atomic_write_text(case_dir / "prompt.txt", prompt)

        if pc.backend.kind == "oracle":
            from ..oracle.server import OracleServer  # imported lazily: only oracle runs need it
            oracle = OracleServer(list(test.reference), dialects=reg.dialects, record_path=artifacts / f"oracle.{phase}.jsonl",
                                  default_profile=pc.backend.model_id, format=pc.format)
            await oracle.start()
            upstream = oracle.base_url
        else:
            upstream = _strip_v1(rc.base_url_override or pc.backend.base_url or "")

        ctx = PhaseContext(
            run_id=rc.run_id, case_id=pc.case_id, phase=phase, agent=pc.agent, model=pc.model, backend=pc.backend,
            test=pc.test, format=pc.format, prompt=prompt, workspace=workspace, home=home, tmpdir=tmpdir,
            artifacts_dir=artifacts, base_url=upstream,
            model_name=pc.backend.agent_model_id or pc.backend.model_id,
            api_key=rc.source_env.get(pc.backend.api_key_env) if pc.backend.api_key_env else None,
            timeout_s=phase_timeout(pc, rc), run_context=dict(rc.run_context),
            agent_executable=getattr(rc.installed.get(pc.agent.id), "executable", None),
        )
        make_phase_dirs(home, tmpdir, ctx.xdg)
        proxy = await open_proxy_session(rc.gpm, ctx, mode=rc.proxy_mode or pc.agent.telemetry_proxy_mode,
                                       upstream=upstream, record_path=artifacts / f"proxy.{phase}.http.jsonl",
                                       max_request_body=rc.proxy_max_body)
        if proxy.harness_error:
            process = ProcessResult(status="ok", error=proxy.harness_error)
            summary = summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                                      proxy_status="error", proxy_skip_reason=proxy.skip_reason)
            rec = PhaseRecord(phase=phase, process=process, summary=summary, proxy=proxy.describe(), challenge=facts)
            write_phase_context(artifacts, ctx, harness_error=proxy.harness_error)
            return PhaseResult(rec, [], workspace, facts, requests, harness_error=proxy.harness_error)
        ctx.base_url = proxy.base_url or upstream

        env = base_env(home, tmpdir, ctx.xdg, source=rc.source_env)
        env.update(pc.backend.env)
        env.update(hook.build_env(agent=pc.agent, ctx=ctx) or {})
        command = hook.build_command(agent=pc.agent, ctx=ctx)
        stdout_path, stderr_path = case_dir / f"{phase}.stdout", case_dir / f"{phase}.stderr"
        if command is None:
            process = ProcessResult(status="shell_error",
                                    error=f"no installed plugin builds a command for agent plugin {pc.agent.plugin!r}")
            for p in (stdout_path, stderr_path):
                p.write_bytes(b"")
        else:
            box = rc.sandbox_for(pc)
            argv = [resolve_executable(command.argv[0], env.get("PATH", "")), *command.argv[1:]]
            installed = getattr(rc.installed.get(pc.agent.id), "path", None)
            cwd = command.cwd or workspace
            needs = [*([installed] if installed else []), *command.read_only]
            argv = box.wrap(argv, cwd=cwd, rw=[workspace, home, tmpdir], ro=needs)
            process = await run_process(argv, cwd=cwd, env=env, stdin=command.stdin,
                                        timeout_s=ctx.timeout_s, stdout_path=stdout_path, stderr_path=stderr_path,
                                        cap_bytes=rc.capture_cap, sandboxed=box.confined)
        # The harness's own look at the backend right after the agent: a dead backend is not the agent's fault.
        probe = None if pc.backend.kind == "oracle" else await probe_backend(
            pc.backend.kind, upstream, api_key=ctx.api_key, backend_id=pc.backend.id)
        await proxy.stop()
        if oracle is not None:
            await oracle.stop()
            oracle = None
        if challenge is not None:
            requests = list(challenge.requests)
            await challenge.stop()
            challenge = None
            _write_jsonl(artifacts / f"challenge.{phase}.requests.jsonl", requests)

        if phase == "measured":
            listing = copy_workspace(workspace, case_dir / "workspace")
            atomic_write_json(artifacts / LISTING, listing.as_json())
        extra = _collect_agent_artifacts(rc, pc, ctx, artifacts, phase)
        outputs = PhaseCapture(stdout_path=stdout_path, stderr_path=stderr_path, process=process, extra=extra)
        outputs.final_text = _final_text(rc, pc, ctx, outputs, artifacts / f"{phase}.final.txt")
        write_phase_context(artifacts, ctx, extra=extra)
        events, summary = derive_telemetry(rc.gpm, pc.agent, ctx, outputs,
                                           ProxyEvidence(proxy.events(), proxy.summary_kwargs()),
                                           run_id=rc.run_id, case_id=pc.case_id)
        _write_jsonl(artifacts / f"events.{phase}.jsonl", [e.model_dump(mode="json") for e in events])
        rec = PhaseRecord(phase=phase, process=process, summary=summary, proxy=proxy.describe(), challenge=facts,
                          backend_probe=probe)
        return PhaseResult(rec, events, workspace, facts, requests)
    finally:
        if proxy is not None:
            await proxy.stop()
        if oracle is not None:
            await oracle.stop()
        if challenge is not None:
            await challenge.stop()


def _strip_v1(url: str) -> str:
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _collect_agent_artifacts(rc: ActiveRun, pc: PlannedCase, ctx: PhaseContext, artifacts: Path,
                             phase: str) -> dict[str, Path]:
    extra: dict[str, Path] = {}
    for answer in rc.gpm.hook.phase_artifacts(agent=pc.agent, ctx=ctx) or []:
        for name, src in (answer or {}).items():
            dst = artifacts / f"{phase}.{name}"
            if copy_file(Path(src), dst):  # agent-written: never a symlink followed, a FIFO opened
                extra[name] = dst
    return extra


def _final_text(rc: ActiveRun, pc: PlannedCase, ctx: PhaseContext, outputs: PhaseCapture, keep: Path) -> str | None:
    """The agent's final answer (for tier D), kept as ``<phase>.final.txt`` so its events can point at it."""
    try:
        text = rc.gpm.hook.final_output_text(agent=pc.agent, ctx=ctx, outputs=outputs)
    except Exception:  # a plugin bug must not lose the case; tier D is only ever an explanation
        return None
    if text:
        atomic_write_text(keep, text)
    return text or None


def _skipped_verdict(reason: str) -> Verdict:
    return Verdict(status="SKIPPED", evaluator_reason_code="skipped", evaluator_reason_text=reason,
                   failure_reason=None, trajectory="clean", invoked="maybe", artifact_match=0.0,
                   tool_invocation_match=0.0, protocol_match=None, strict_pass_score=0.0, overall_score=0.0,
                   tool_event_verdict="tool_event_not_observable", tool_event_verdict_reason="none")


def _not_run_summary() -> TelemetrySummary:
    return summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                           proxy_status="skipped", proxy_skip_reason="disabled")


async def run_case(pc: PlannedCase, rc: ActiveRun) -> CaseResult:
    """Run one case and write everything it produced. Returns the case result (also in case.json)."""
    started_at, t0 = utc_now_iso(), time.monotonic()
    case_dir = rc.run_dir.case(pc.case_id)
    case_dir.mkdir(parents=True, exist_ok=True)
    (case_dir / "artifacts").mkdir(exist_ok=True)
    base = dict(run_id=rc.run_id, case_id=pc.case_id, key=pc.key, tags=list(pc.test.tags),
                language=pc.test.language, started_at=started_at, run_context=dict(rc.run_context),
                agent_version=getattr(rc.installed.get(pc.agent.id), "version", None) or pc.agent.version,
                model_hash=pc.backend.model_hash, hardware_profile=rc.hardware_profile,
                telemetry_proxy_mode=rc.proxy_mode or pc.agent.telemetry_proxy_mode)
    box = rc.sandbox_for(pc)

    def finish(**kw: Any) -> CaseResult:
        res = CaseResult(finished_at=utc_now_iso(), duration_s=round(time.monotonic() - t0, 4), **base,
                         sandbox=box.kind if kw.get("phases") else None, **kw)
        write_case(case_dir, res)
        return res

    if pc.skip_reason:
        return finish(verdict=_skipped_verdict(pc.skip_reason), telemetry=_not_run_summary(), skip_reason=pc.skip_reason)
    if pc.agent.plugin not in rc.gpm.registry.agents:
        reason = (f"agent plugin {pc.agent.plugin!r} is not installed "
                  f"(pip install gripprobe-{pc.agent.plugin}); see `gripprobe plugins`")
        return finish(verdict=_skipped_verdict(reason), telemetry=_not_run_summary(), skip_reason=reason)
    if rc.gpm.hook.agent_install_recipe(agent=pc.agent) is not None and pc.agent.id not in rc.installed:
        reason = f"agent {pc.agent.id!r} is not installed; run `gripprobe agents install {pc.agent.id}`"
        return finish(verdict=_skipped_verdict(reason), telemetry=_not_run_summary(), skip_reason=reason)
    missing = missing_tool_kinds(pc.agent, pc.test)
    if missing:
        summary = _not_run_summary()
        verdict = rc.gpm.hook.evaluate(inputs=EvaluationInputs(
            validators=[], process=ProcessResult(status="ok"), events=[], summary=summary,
            required_kinds=list(pc.test.requires), tool_unsupported="agent_tool_unsupported"))
        return finish(verdict=verdict, telemetry=summary,
                      skip_reason=f"agent {pc.agent.id!r} cannot perform: {', '.join(missing)}")

    atomic_write_json(case_dir / "artifacts" / CASE_INPUTS, {
        "agent": pc.agent.model_dump(mode="json"), "model": pc.model.model_dump(mode="json"),
        "backend": pc.backend.model_dump(mode="json"), "test": pc.test.model_dump(mode="json"), "format": pc.format})
    scratch = rc.work_root / pc.case_id
    phases: list[PhaseResult] = []
    try:
        for phase in PHASES:
            pr = await run_phase(pc, rc, phase, case_dir, scratch)
            phases.append(pr)
            if pr.harness_error:
                break
    finally:
        _remove_tree(scratch)  # homes may hold config files with keys: never kept

    last = phases[-1]
    harness_error = last.harness_error
    validators: list[ValidatorResult] = []
    if harness_error is None and last.record.phase == "measured":
        # Judged on the harness's copy (what a recompute judges too), not on the agent's own directory.
        validators, harness_error = run_validators(rc.gpm, pc.test, ValidatorContext(
            workspace=case_dir / "workspace", test=pc.test, run_context=dict(rc.run_context),
            challenge=last.challenge_facts, challenge_requests=last.challenge_requests, events=last.events,
            agent_workspace=str(last.workspace), sandbox=box))
    verdict = derive_verdict(rc.gpm, pc.test, process=last.record.process, events=last.events,
                             summary=last.record.summary, validators=validators, harness_error=harness_error,
                             phase_harness_error=bool(last.harness_error),
                             backend_unreachable=backend_was_unreachable(last.record, case_dir / "artifacts"))
    return finish(phases=[p.record for p in phases], validators=validators, verdict=verdict,
                  telemetry=last.record.summary, harness_error=harness_error)


def _remove_tree(path: Path) -> None:
    """Remove an agent's scratch tree, even where it took away its own permissions (chmod 000)."""
    def fix(func: Any, p: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            else:
                func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)


def write_case(case_dir: Path, res: CaseResult, *, keep_evidence: bool = False) -> None:
    """Write case.json last: its presence means the case is complete (resume relies on this).

    The sha256 of every evidence file goes into case.json (``evidence``) unless ``keep_evidence`` (a
    recompute keeps what the run recorded, so tampering stays detectable on every later recompute)."""
    artifacts = case_dir / "artifacts"
    phases = {p.phase: p.summary.model_dump(mode="json") for p in res.phases}
    atomic_write_json(artifacts / "events.summary.json", {**res.telemetry.model_dump(mode="json"), "phases": phases})
    atomic_write_text(case_dir / "expected.txt", "".join(f"## {v.kind}\n{v.expected}\n" for v in res.validators))
    atomic_write_text(case_dir / "observed.txt", "".join(
        f"## {v.kind}: {'pass' if v.passed else 'fail'}\n{v.observed}\n" for v in res.validators))
    if not keep_evidence:
        res.evidence = evidence_digests(case_dir) if res.phases else None
    atomic_write_json(case_dir / "case.json", res.model_dump(mode="json"))

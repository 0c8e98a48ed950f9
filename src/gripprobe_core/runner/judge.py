"""From what a phase left behind to telemetry and verdict: the part of a case that is pure derivation.

A live run and ``rebuild-reports --recompute`` both go through these functions, so re-deriving a
stored case runs exactly the code that judged it: parsers (every plugin's ``parse_wrapper_events``
plus the proxy's tier A), the merge, the telemetry summary, the validators and the evaluator.

What a live phase knows that files alone would not (the prompt, paths, which agent artifacts were
kept) is written next to the artifacts as ``artifacts/<phase>.context.json``; the specs the case ran
with are ``artifacts/case_inputs.json``. Neither holds a secret: the API key is never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..phase import EvaluationInputs, PhaseContext, PhaseCapture, ValidatorContext
from ..errors import WrapperParseError
from ..models.events import Event
from ..models.results import PhaseRecord, ProcessResult, TelemetrySummary, ValidatorResult, Verdict
from ..models.specs import CliAgentSpec, TestSpec
from ..pluginmanager import GripProbePluginManager
from ..store import atomic_write_json
from ..telemetry.summary import merge_events, summarize_phase
from ..validators import is_invalid_options

CASE_INPUTS = "case_inputs.json"


def phase_context_name(phase: str) -> str:
    return f"{phase}.context.json"


@dataclass
class ProxyEvidence:
    """What the recording proxy of one phase contributes: tier A events and the summary's proxy fields."""

    events: list[Event]
    summary_kwargs: dict[str, Any]


def write_phase_context(artifacts: Path, ctx: PhaseContext, *, extra: dict[str, Path] | None = None,
                        harness_error: str | None = None) -> None:
    atomic_write_json(artifacts / phase_context_name(ctx.phase), {
        "phase": ctx.phase, "prompt": ctx.prompt, "workspace": str(ctx.workspace), "home": str(ctx.home),
        "tmpdir": str(ctx.tmpdir), "base_url": ctx.base_url, "model_name": ctx.model_name,
        "timeout_s": ctx.timeout_s,
        "agent_executable": str(ctx.agent_executable) if ctx.agent_executable else None,
        "extra": sorted((extra or {}).keys()), "harness_error": harness_error,
    })


def parse_events(gpm: GripProbePluginManager, agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture,
                 proxy_events: list[Event], *, run_id: str, case_id: str) -> tuple[list[Event], str | None]:
    """Every parser's events plus the proxy's tier A, merged and stamped. Never raises."""
    groups: list[list[Event]] = []
    parse_error = None
    caller = gpm.hook.parse_wrapper_events
    for impl in reversed(caller.get_hookimpls()):
        try:
            got = impl.function(**{a: {"agent": agent, "ctx": ctx, "outputs": outputs}[a] for a in impl.argnames})
        except WrapperParseError as exc:
            parse_error = f"{impl.plugin_name}: {exc}"
            continue
        except Exception as exc:  # a broken parser is a harness problem, not the agent's
            parse_error = f"{impl.plugin_name}: {type(exc).__name__}: {exc}"
            continue
        if got:
            groups.append(list(got))
    groups.insert(0, list(proxy_events))
    merged = merge_events(groups)
    trace_id = f"{run_id}/{case_id}/{ctx.phase}"
    for e in merged:
        e.run_id, e.case_id, e.phase, e.trace_id = run_id, case_id, ctx.phase, trace_id  # type: ignore[assignment]
    return merged, parse_error


def derive_telemetry(gpm: GripProbePluginManager, agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture,
                     proxy: ProxyEvidence, *, run_id: str, case_id: str) -> tuple[list[Event], TelemetrySummary]:
    """The phase's normalized events and its telemetry summary (``events.summary.json``)."""
    ctx.marker_patterns = [p for got in gpm.hook.tier_c_patterns(agent=agent) or [] for p in got or []]
    events, parse_error = parse_events(gpm, agent, ctx, outputs, proxy.events, run_id=run_id, case_id=case_id)
    info = gpm.registry.agents.get(agent.plugin)
    proxy_kw = dict(proxy.summary_kwargs)
    # The backend refusing tools is evidence whichever tier saw it (proxy record or agent output).
    proxy_kw["backend_tool_unsupported"] = bool(proxy_kw.get("backend_tool_unsupported")) or any(
        e.error_type == "backend_tool_unsupported" for e in events)
    summary = summarize_phase(
        events, observability=getattr(info, "observability", "none"),
        capture_missing=not outputs.stdout_path.exists(), parse_error=parse_error is not None, **proxy_kw,
        wire_witnessed=ctx.format in getattr(info, "wire_formats", ()),
    )
    if parse_error:
        summary.telemetry_capture_skip_reason = "wrapper_parse_error"
    return events, summary


def run_validators(gpm: GripProbePluginManager, test: TestSpec, ctx: ValidatorContext
                   ) -> tuple[list[ValidatorResult], str | None]:
    """Every validator's result, and the last harness-side problem among them (a kind not installed, a
    validator that raised, options the validator refused), which makes the case HARNESS_ERROR
    (failure_reason ``validator_error``) whatever the agent did."""
    results, error = [], None
    for spec in test.validators:
        options = spec.model_dump(exclude={"kind"})
        fn = gpm.registry.validators.get(spec.kind)
        if fn is None:
            error = f"validator kind {spec.kind!r} is not installed"
            results.append(ValidatorResult(kind=spec.kind, passed=False, message=error))
            continue
        try:
            result = fn(ctx, options)
        except Exception as exc:
            error = f"validator {spec.kind!r} crashed: {type(exc).__name__}: {exc}"
            results.append(ValidatorResult(kind=spec.kind, passed=False, message=error))
            continue
        if is_invalid_options(result):  # the spec is wrong (a path leaving the workspace ...): not the agent
            error = result.message
        results.append(result)
    return results, error


def backend_was_unreachable(rec: PhaseRecord, artifacts: Path) -> bool:
    """Did the harness itself find the model backend unreachable at the end of phase ``rec``?

    Yes when the probe the runner made right after the phase (``rec.backend_probe``, case.json) failed,
    or when the recording proxy's last exchange that reached for the upstream
    (``proxy.<phase>.http.jsonl``) could not connect to it: the backend was gone when the agent last
    asked. Nothing the agent printed counts. A transient connect error the agent got past does not.
    """
    if rec.backend_probe is not None and not rec.backend_probe.reachable:
        return True
    if not (rec.proxy or {}).get("started"):
        return False
    from ..proxy.server import UPSTREAM_ERRORS, read_records

    last = None
    for r in read_records(artifacts / f"proxy.{rec.phase}.http.jsonl"):
        err = r.get("x_gripprobe_proxy_error")
        if err is None or err in UPSTREAM_ERRORS:  # exchanges that reached for the upstream
            last = err
    return last == "proxy_connect_error"


def derive_verdict(gpm: GripProbePluginManager, test: TestSpec, *, process: ProcessResult, events: list[Event],
                   summary: TelemetrySummary, validators: list[ValidatorResult], harness_error: str | None,
                   phase_harness_error: bool, backend_unreachable: bool = False) -> Verdict:
    rules = test.rules.model_dump()
    if harness_error:
        rules["harness_error"] = "proxy_required_but_not_available" if phase_harness_error else "validator_error"
    return gpm.hook.evaluate(inputs=EvaluationInputs(
        validators=validators, process=process, events=events, summary=summary,
        required_kinds=list(test.requires), rules=rules, backend_unreachable=backend_unreachable,
        tool_unsupported="backend_tool_unsupported" if summary.telemetry_backend_tool_unsupported else None))


def harness_error_verdict(gpm: GripProbePluginManager, reason: str) -> tuple[Verdict, TelemetrySummary]:
    """The verdict and summary of a case that could not be judged at all (a harness exception, its
    artifacts missing): HARNESS_ERROR with ``reason`` as failure reason, capture missing."""
    summary = summarize_phase([], observability="none", capture_missing=True, parse_error=False)
    verdict = gpm.hook.evaluate(inputs=EvaluationInputs(
        validators=[], process=ProcessResult(status="ok"), events=[], summary=summary,
        rules={"harness_error": reason}))
    return verdict, summary

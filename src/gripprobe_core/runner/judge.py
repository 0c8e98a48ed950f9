"""The one judge: from what a case's phases left behind to events, telemetry and verdict.

:func:`judge_case` is the only place a case is judged. A live run calls it on what its phases just
collected (runner/case.py), ``rebuild-reports --recompute`` on what a stored run holds
(runner/recompute.py); both hand it the same :class:`CaseEvidence` — each phase's process result, its
captures and kept files, its proxy's report and records, the oracle's record, the challenge facts and
log, and the harness's copy of the measured workspace — and it runs the same steps on it: the agent
driver's parser, every plugin's ``parse_wrapper_events`` (tiers C and D), the proxy's tier A, the merge,
the telemetry summary with its tool-use verdict, the validators, and the evaluator the case's suite names.
It writes nothing; the caller writes what it returns.

What a live phase knows that files alone would not (the prompt, paths, which agent files were kept)
is written next to the artifacts as ``artifacts/<phase>.context.json``; the specs the case ran with
(and its judge) are ``artifacts/case_inputs.json``. Neither holds a secret: the API key is never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..drivers import AgentDriver, off_wire_reason
from ..errors import WrapperParseError
from ..evaluator import EvaluationInputs, event_evaluator
from ..hooks import Hooks
from ..models.events import Event
from ..models.results import (
    BackendProbe, PhaseRecord, ProcessResult, TelemetrySummary, Usage, ValidatorResult, Verdict,
)
from ..models.specs import BackendSpec, InteractionSpec, TestSpec
from ..phase import PhaseCapture, PhaseContext, Transcript
from ..pluginmanager import GripProbePluginManager, Registry
from ..telemetry.permissions import interaction_record, violations
from ..telemetry.summary import merge_events, summarize_phase
from ..telemetry.usage import ModelCall, calls_from_events, calls_from_records, summarize, with_agent_tokens
from ..validators import is_invalid_options
from ..validators.context import ValidatorContext

from .phase_files import (  # noqa: F401  (also read from here: recompute, tests)
    CASE_INPUTS, PhaseEvidence, phase_context_name, phase_context_record, proxy_record_name, stored_seen_at,
)

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

_PROXY_ERROR, _REQUEST, _RESPONSE = "x_gripprobe_proxy_error", "x_gripprobe_request", "x_gripprobe_response"


@dataclass(frozen=True)
class ProxyEvidence:
    """What the recording proxy of one phase contributes: tier A events, the summary's proxy fields and
    the model calls it relayed (usage, timing)."""

    events: list[Event]
    summary_kwargs: dict[str, Any]
    calls: list[ModelCall] = field(default_factory=list)
    watched: bool = False
    """The proxy ran for the phase: what the backend answered is known from the wire, not the agent."""


@dataclass(frozen=True)
class Derived:
    """What a phase's outputs give: its merged events, telemetry summary, the driver's transcript and usage."""

    events: list[Event]
    summary: TelemetrySummary
    transcript: Transcript
    usage: Usage


def proxy_evidence(phase: str, proxy: dict[str, Any] | None, record_path: Path,
                   driver: AgentDriver | None) -> ProxyEvidence:
    """Tier A of ``phase`` from its proxy record file, given what case.json says of its proxy
    (``phases[].proxy``); tool names normalized with the driver's table."""
    from ..proxy.events import proxy_counts, records_to_events
    from ..proxy.server import iter_records
    from ..telemetry.toolnames import GENERIC

    p = proxy or {}
    kw: dict[str, Any] = {"proxy_status": p.get("status", "skipped"), "proxy_skip_reason": p.get("skip_reason")}
    started = p.get("started")
    if started is None:  # results written before "started" was recorded
        started = record_path.exists()
    if not started:
        return ProxyEvidence([], kw)
    # the bodies are what makes a record big, and nothing here reads them: memory stays one record's
    records = list(iter_records(record_path, without=(_REQUEST, _RESPONSE)))
    kw.update(proxy_counts(records))
    names = driver.tool_names if driver is not None else GENERIC
    return ProxyEvidence(records_to_events(records, phase=phase, artifact_name=record_path.name, tool_names=names), kw,
                         calls_from_records(records), watched=True)


def read_transcript(driver: AgentDriver, ctx: PhaseContext, capture: PhaseCapture) -> tuple[Transcript, str | None]:
    """The driver's reading of its agent's outputs, and the parse error (None when it read them).

    Never raises: a driver that raises is a harness problem (wrapper_parse_error), not the agent's; so is a
    driver whose events claim tier A, which is the recording proxy's alone (the model's calls on the wire)."""
    try:
        got = driver.parse(ctx, capture)
    except WrapperParseError as exc:
        return Transcript(), f"{driver.name}: {exc}"
    except Exception as exc:
        return Transcript(), f"{driver.name}: {type(exc).__name__}: {exc}"
    if not isinstance(got, Transcript):
        return Transcript(), f"{driver.name}: parse returned {type(got).__name__}, not a Transcript"
    claimed = _tier_a_claim(got.events)
    if claimed:
        return Transcript(), f"{driver.name}: parse returned {claimed}"
    return got, None


def _tier_a_claim(events: list[Event]) -> str | None:
    """What is wrong with a parser's events that claim tier A (None when none does): only the recording
    proxy's records give tier A, so that an agent's word can never pass for the model's."""
    forged = next((e for e in events if isinstance(e, Event) and e.source_tier == "A"), None)
    if forged is None:
        return None
    return f"an event at tier A ({forged.event_id}); tier A is the recording proxy's alone, use B, C or D"


def parse_events(hooks: Hooks, driver: AgentDriver, ctx: PhaseContext, capture: PhaseCapture, transcript: Transcript,
                 proxy_events: list[Event], *, run_id: str, case_id: str) -> tuple[list[Event], str | None]:
    """Tier A, the driver's events and every contributing parser's, merged and stamped. Never raises; a
    contributing parser that raises, or whose events claim tier A, is the parse error."""
    groups: list[list[Event]] = [list(proxy_events), list(transcript.events)]
    parse_error = None
    try:
        contributed = hooks.parse_wrapper_events(driver, ctx, capture, transcript)
    except WrapperParseError as exc:
        parse_error = str(exc)
    except Exception as exc:  # a broken parser is a harness problem, not the agent's
        parse_error = f"{type(exc).__name__}: {exc}"
    else:
        for group in contributed:
            claimed = _tier_a_claim(group)
            if claimed:  # the group is dropped: the case is HARNESS_ERROR (wrapper_parse_error) anyway
                parse_error = f"parse_wrapper_events returned {claimed}"
            else:
                groups.append(group)
    merged = merge_events(groups)
    trace_id = f"{run_id}/{case_id}/{ctx.phase}"
    for e in merged:
        e.run_id, e.case_id, e.phase, e.trace_id = run_id, case_id, ctx.phase, trace_id
    return merged, parse_error


def derive_telemetry(hooks: Hooks, driver: AgentDriver, ctx: PhaseContext, capture: PhaseCapture,
                     proxy: ProxyEvidence, *, run_id: str, case_id: str) -> Derived:
    """The phase's normalized events, its telemetry summary (``events.summary.json``), the driver's
    transcript (its final text is kept as ``<phase>.final.txt``) and its usage (tier A's model calls when
    the proxy relayed any, else what the agent reported, priced by the model spec)."""
    transcript, driver_error = read_transcript(driver, ctx, capture)
    events, parse_error = parse_events(hooks, driver, ctx, capture, transcript, proxy.events,
                                       run_id=run_id, case_id=case_id)
    parse_error = driver_error or parse_error
    proxy_kw = dict(proxy.summary_kwargs)
    # The backend refusing tools (TOOL_UNSUPPORTED, out of n) is the backend's own answer about the case's model:
    # when the proxy watched the phase only its records say so (the agent's word, or an answer the proxy made
    # itself, never does); without a proxy the agent's output is all there is.
    proxy_kw["backend_tool_unsupported"] = bool(proxy_kw.get("backend_tool_unsupported")) or (
        not proxy.watched and any(e.error_type == "backend_tool_unsupported" for e in events))
    summary = summarize_phase(
        events, observability=driver.observability, capture_missing=not capture.stdout_path.exists(),
        parse_error=parse_error is not None, **proxy_kw,
        wire_witnessed=off_wire_reason(driver, ctx.format) is None,
    )
    if parse_error:
        summary.telemetry_capture_skip_reason = "wrapper_parse_error"
    if proxy.calls:  # the wire; its token counts from the agent's own report when the wire carried none
        usage = with_agent_tokens(summarize(proxy.calls, "A", ctx.model.pricing),
                                  calls_from_events(transcript.events, ("B", "C")), ctx.model.pricing)
    else:
        usage = summarize(calls_from_events(transcript.events), "B", ctx.model.pricing)
    return Derived(events, summary, transcript, usage)


#: failure_reason of a case whose validator runs code and there was no sandbox to run it in (a recompute
#: where bubblewrap is missing or broken): it was not run, and never unconfined.
SANDBOX_UNAVAILABLE = "sandbox_unavailable"


def run_validators(registry: Registry, test: TestSpec, ctx: ValidatorContext) -> tuple[list[ValidatorResult], str | None]:
    """Every validator's result, and the harness-side problem among them, which makes the case HARNESS_ERROR
    whatever the agent did: a validator that runs code (:func:`~gripprobe_core.validators.context.runs_code`)
    and no sandbox to run it in (``ctx.sandbox`` unavailable): not run, ``sandbox_unavailable: …`` (this one
    wins); else the last of a kind not installed, a validator that raised, options the validator refused
    (failure_reason ``validator_error``)."""
    from ..validators.context import validator_runs_code
    from .sandbox import SandboxUnavailable

    results: list[ValidatorResult] = []
    error = unconfined = None
    box = ctx.sandbox
    for spec in test.validators:
        options = spec.model_dump(exclude={"kind"})
        fn = registry.validators.get(spec.kind)
        if fn is None:
            error = f"validator kind {spec.kind!r} is not installed"
            results.append(ValidatorResult(kind=spec.kind, passed=False, message=error))
            continue
        if validator_runs_code(fn) and box is not None and getattr(box, "kind", None) == "unavailable":
            why = getattr(box, "warning", None) or "no sandbox here"
            unconfined = unconfined or f"{SANDBOX_UNAVAILABLE}: validator {spec.kind!r} runs code and was not run: {why}"
            results.append(ValidatorResult(kind=spec.kind, passed=False, observed="<not run: no sandbox>",
                                           message=f"validator not run: sandbox unavailable ({why})"))
            continue
        try:
            result = fn(ctx, options)
        except SandboxUnavailable as exc:  # a validator that runs code without saying so
            unconfined = unconfined or f"{SANDBOX_UNAVAILABLE}: validator {spec.kind!r} was stopped: {exc}"
            results.append(ValidatorResult(kind=spec.kind, passed=False, observed="<not run: no sandbox>",
                                           message=f"validator not run: sandbox unavailable ({exc})"))
            continue
        except Exception as exc:
            error = f"validator {spec.kind!r} crashed: {type(exc).__name__}: {exc}"
            results.append(ValidatorResult(kind=spec.kind, passed=False, message=error))
            continue
        if is_invalid_options(result):  # the spec is wrong (a path leaving the workspace ...): not the agent
            error = result.message
        results.append(result)
    return results, unconfined or error


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
    from ..proxy.server import UPSTREAM_ERRORS, iter_records

    last = None
    for r in iter_records(artifacts / proxy_record_name(rec.phase), keys=(_PROXY_ERROR,)):
        err = r.get("x_gripprobe_proxy_error")
        if err is None or err in UPSTREAM_ERRORS:  # exchanges that reached for the upstream
            last = err
    return last == "proxy_connect_error"


def model_not_under_test(rec: PhaseRecord, artifacts: Path, backend: BackendSpec) -> str | None:
    """Did phase ``rec`` ask for a model other than the case's? Why (one sentence), or None.

    Yes when its recording proxy refused a model call for the model it named (case.json's
    ``phases[].proxy.model_not_under_test``, or a record with that ``proxy_error``), or, for the oracle
    backend, when the oracle's own record of the tool calls it made (``oracle.<phase>.jsonl``) names a
    profile other than the case's model: another model answered, whatever the proxy says (a proxy plugin
    that does not pin the model, a run from before the pin)."""
    from ..proxy.pin import MODEL_NOT_UNDER_TEST
    from ..proxy.server import iter_records

    proxy = rec.proxy or {}
    refused = proxy.get("model_not_under_test")
    if isinstance(refused, int) and not isinstance(refused, bool) and refused > 0:
        return f"the proxy refused {refused} model call(s) naming another model"
    if proxy.get("started"):
        for r in iter_records(artifacts / proxy_record_name(rec.phase), keys=(_PROXY_ERROR,)):
            if r.get(_PROXY_ERROR) == MODEL_NOT_UNDER_TEST:
                return "the proxy refused a model call naming another model"
    if backend.kind == "oracle":
        from ..jsonl import json_lines

        try:
            data = (artifacts / f"oracle.{rec.phase}.jsonl").read_bytes()
        except OSError:
            return None
        for _, entry in json_lines(data):
            profile = entry.get("profile")
            if isinstance(profile, str) and profile != backend.model_id:
                return (f"the oracle answered as profile {profile!r}, not the case's model "
                        f"{backend.model_id!r} (oracle.{rec.phase}.jsonl)")
    return None




def budget_was_exceeded(rec: PhaseRecord) -> bool:
    """Did phase ``rec`` spend its token budget (the proxy refused a model call; case.json says so)?"""
    return bool((rec.proxy or {}).get("token_budget_exceeded"))


def phase_harness_failure(phase_error: str | None, validator_error: str | None) -> str | None:
    """The failure_reason of a case the harness could not measure: its phase never ran (the proxy it
    required was not available, ``proxy_required_but_not_available``; a sandboxed agent could not reach
    its backend, ``backend_unreachable_in_sandbox``: the phase's error starts with the reason), a validator
    that runs code had no sandbox to run in (``sandbox_unavailable``), or a validator could not judge (the
    spec, not the agent: ``validator_error``)."""
    if phase_error:
        return phase_error.split(":", 1)[0].strip()
    if validator_error and validator_error.startswith(SANDBOX_UNAVAILABLE + ":"):
        return SANDBOX_UNAVAILABLE
    return "validator_error" if validator_error else None


#: failure_reason of a case whose judge (the evaluator its suite names) is not installed, or failed.
JUDGE_NOT_INSTALLED, JUDGE_ERROR = "judge_not_installed", "judge_error"


def evaluate(registry: Registry, judge: str, inputs: EvaluationInputs) -> tuple[Verdict, str | None]:
    """The verdict of the registered evaluator ``judge``, its ``verdict_source`` the name it is registered
    under (never what it wrote there itself); and the harness problem, None when it judged. A judge that is
    not installed, raises or returns anything but a valid :class:`Verdict` leaves the case to the core's
    ``event_evaluator`` as HARNESS_ERROR (``judge_not_installed`` / ``judge_error``), its problem named."""
    fn = registry.evaluators.get(judge)
    if fn is None:
        known = ", ".join(sorted(registry.evaluators)) or "none"
        return (_core_verdict(inputs, JUDGE_NOT_INSTALLED),
                f"judge {judge!r} is not installed (registered: {known}); install the plugin that registers it")
    try:
        got = fn(inputs)
        if not isinstance(got, Verdict):
            raise TypeError(f"returned {type(got).__name__}, not a Verdict")
        return Verdict.model_validate({**got.model_dump(), "verdict_source": judge}), None
    except Exception as exc:  # a plugin's bug is a harness problem, never the agent's
        return _core_verdict(inputs, JUDGE_ERROR), f"judge {judge!r} failed: {type(exc).__name__}: {exc}"


def _core_verdict(inputs: EvaluationInputs, reason: str) -> Verdict:
    from dataclasses import replace

    return event_evaluator(replace(inputs, harness_error=reason))


def derive_verdict(registry: Registry, judge: str, test: TestSpec, *, process: ProcessResult, events: list[Event],
                   summary: TelemetrySummary, validators: list[ValidatorResult], harness_error: str | None = None,
                   backend_unreachable: bool = False, budget_exceeded: bool = False,
                   model_swapped: str | None = None,
                   interaction: Mapping[str, Any] | None = None) -> tuple[Verdict, str | None]:
    """The verdict of the evaluator ``judge`` (and the harness problem when it could not judge, see
    :func:`evaluate`). ``harness_error`` is a failure_reason (``validator_error``,
    ``proxy_required_but_not_available`` ...) that makes the case HARNESS_ERROR; ``model_swapped`` (from
    :func:`model_not_under_test`) makes it FAIL ``model_not_under_test``."""
    return evaluate(registry, judge, EvaluationInputs(
        validators=validators, process=process, events=events, summary=summary,
        required_kinds=list(test.requires), rules=test.rules.model_dump(), harness_error=harness_error,
        backend_unreachable=backend_unreachable, budget_exceeded=budget_exceeded,
        model_not_under_test=model_swapped is not None, interaction=interaction,
        tool_unsupported="backend_tool_unsupported" if summary.telemetry_backend_tool_unsupported else None))


def harness_error_verdict(reason: str) -> tuple[Verdict, TelemetrySummary]:
    """The verdict and summary of a case that could not be judged at all (a harness exception, its
    artifacts missing): HARNESS_ERROR with ``reason`` as failure reason, capture missing, judged by the
    core's own ``event_evaluator`` (the harness's verdict on itself, whatever judge the suite names)."""
    summary = summarize_phase([], observability="none", capture_missing=True, parse_error=False)
    verdict = event_evaluator(EvaluationInputs(
        validators=[], process=ProcessResult(status="ok"), events=[], summary=summary, harness_error=reason))
    return verdict, summary


# --------------------------------------------------------------------------------------- the one judge


@dataclass(frozen=True)
class CaseEvidence:
    """Everything :func:`judge_case` judges a case from."""

    folder: Path
    """The case folder the files are read from (the harness's own copy: nothing in it is followed if a link)."""
    run_id: str
    case_id: str
    test: TestSpec
    """The test as specified (validators render their options with the run's values)."""
    backend: BackendSpec
    judge: str
    """The registered evaluator that judges (the suite's ``judge:``, else ``event_evaluator``)."""
    run_values: Mapping[str, Any]
    phases: Sequence[PhaseEvidence]
    interaction: InteractionSpec | None = None
    """The case's interaction policy (the test's, else its suite's); None: none."""


@dataclass(frozen=True)
class Judgement:
    """What the judge derived: each phase's record (its summary and usage), events and final text; the
    validators' results; the verdict; the harness problem, if any (None when the case was measured)."""

    phases: list[PhaseRecord]
    events: dict[str, list[Event]]
    final_texts: dict[str, str]
    validators: list[ValidatorResult]
    verdict: Verdict
    harness_error: str | None
    interaction: dict[str, Any] | None = None
    """case.json ``interaction`` (:func:`~gripprobe_core.telemetry.permissions.interaction_record`)."""

    @property
    def telemetry(self) -> TelemetrySummary:
        """The summary of the last phase (the measured one, unless the case stopped before it)."""
        return self.phases[-1].summary


class MissingEvidence(Exception):
    """Evidence the judge needs is not there (a kept file missing, the agent's plugin not installed to read
    its outputs): the message names it. A live run never meets this; a stored run can."""


def judge_case(plugins: GripProbePluginManager, evidence: CaseEvidence, *, sandbox: "Sandbox") -> Judgement:
    """The one judge (see the module docstring): events and telemetry summary of every phase — the
    tool-use verdict among them —, the validators on the measured workspace copy, the verdict of the
    evaluator ``evidence.judge``. ``sandbox`` is where validators that run code run: the caller decides
    (a live run: the case's sandbox; a recompute: :func:`~.sandbox.stored_data_sandbox`, never unconfined),
    nothing read from the evidence does. Raises :class:`MissingEvidence`; never raises for bad agent output."""
    records: list[PhaseRecord] = []
    events: dict[str, list[Event]] = {}
    finals: dict[str, str] = {}
    for ph in evidence.phases:
        record, phase_events, final = _judge_phase(plugins, evidence, ph)
        records.append(record)
        if ph.never_ran is None:  # a phase that never ran has no events file
            events[ph.ctx.phase] = phase_events
        if final:
            finals[ph.ctx.phase] = final
    last, rec = evidence.phases[-1], records[-1]
    artifacts = evidence.folder / "artifacts"
    validators: list[ValidatorResult] = []
    validator_error = None
    if last.never_ran is None and last.ctx.phase == "measured":
        validators, validator_error = run_validators(plugins.registry, evidence.test, ValidatorContext(
            workspace=evidence.folder / "workspace", test=evidence.test, run_values=dict(evidence.run_values),
            challenge=dict(last.challenge), challenge_requests=_challenge_requests(artifacts, last.ctx.phase),
            events=events.get(last.ctx.phase, []), agent_workspace=str(last.ctx.seen(last.ctx.workspace)), sandbox=sandbox,
            final_text=finals.get(last.ctx.phase)))
    measured_events = events.get(last.ctx.phase, [])
    found = violations(evidence.interaction, measured_events,
                       evidence.folder / "workspace" if last.ctx.phase == "measured" else None,
                       str(last.ctx.seen(last.ctx.workspace))) if last.never_ran is None else []
    interaction = interaction_record(evidence.interaction, last.interaction, measured_events, found)
    verdict, problem = derive_verdict(
        plugins.registry, evidence.judge, evidence.test, process=rec.process, events=measured_events,
        summary=rec.summary, validators=validators,
        harness_error=phase_harness_failure(last.never_ran, validator_error),
        backend_unreachable=backend_was_unreachable(rec, artifacts), budget_exceeded=budget_was_exceeded(rec),
        model_swapped=model_not_under_test(rec, artifacts, evidence.backend), interaction=interaction)
    return Judgement(records, events, finals, validators, verdict, problem or last.never_ran or validator_error,
                     interaction)


def _judge_phase(plugins: GripProbePluginManager, evidence: CaseEvidence,
                 ph: PhaseEvidence) -> tuple[PhaseRecord, list[Event], str | None]:
    ctx = ph.ctx

    def record(summary: TelemetrySummary, usage: Usage | None = None) -> PhaseRecord:
        return PhaseRecord(phase=ctx.phase, process=ph.process, summary=summary, usage=usage, proxy=dict(ph.proxy),
                           challenge=dict(ph.challenge), backend_probe=ph.probe)

    if ph.never_ran is not None:  # nothing ran: nothing to parse
        summary = summarize_phase([], observability="none", capture_missing=False, parse_error=False,
                                  proxy_status="error" if ph.proxy.get("status") == "error" else "skipped",
                                  proxy_skip_reason=ph.proxy.get("skip_reason"))
        return record(summary), [], None
    driver = plugins.registry.agents.get(ctx.agent.plugin)
    if driver is None:
        raise MissingEvidence(f"agent plugin {ctx.agent.plugin!r} is not installed: its outputs cannot be re-read "
                              f"(pip install gripprobe-{ctx.agent.plugin})")
    artifacts = evidence.folder / "artifacts"
    files = {name: artifacts / f"{ctx.phase}.{name}" for name in ph.kept}
    for name, path in files.items():
        if not path.is_file():
            raise MissingEvidence(f"artifacts/{path.name} (the agent's {name}) is missing")
    capture = PhaseCapture(stdout_path=evidence.folder / f"{ctx.phase}.stdout",
                           stderr_path=evidence.folder / f"{ctx.phase}.stderr", process=ph.process, files=files)
    proxy = proxy_evidence(ctx.phase, dict(ph.proxy), artifacts / proxy_record_name(ctx.phase), driver)
    derived = derive_telemetry(plugins.hook, driver, ctx, capture, proxy, run_id=evidence.run_id,
                               case_id=evidence.case_id)
    return record(derived.summary, derived.usage), derived.events, derived.transcript.final_text


def _challenge_requests(artifacts: Path, phase: str) -> list[dict[str, Any]]:
    """The challenge server's request log of ``phase`` as the harness wrote it ([] without a challenge)."""
    from ..jsonl import json_lines

    try:
        data = (artifacts / f"challenge.{phase}.requests.jsonl").read_bytes()
    except OSError:
        return []
    return [r for _, r in json_lines(data)]


def write_events(case_dir: Path, events: Mapping[str, list[Event]]) -> None:
    """``artifacts/events.<phase>.jsonl`` of every phase (derived: written again by every recompute)."""
    from ..jsonl import dumps
    from ..store import atomic_write_text

    for phase, phase_events in events.items():  # strict JSON, inert (jsonl.dumps), as every file the harness writes
        atomic_write_text(case_dir / "artifacts" / f"events.{phase}.jsonl", "".join(
            dumps(e.model_dump(mode="json"), ensure_ascii=False, default=str) + "\n" for e in phase_events),
            sync=False)

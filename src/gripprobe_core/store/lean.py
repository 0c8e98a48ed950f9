"""A stored ``case.json`` checked whole in one fast pass, for readers of many cases (``aggregate-reports``).

:func:`~gripprobe_core.store.layout.parse_case` validates a case.json into the result model (pydantic), about
260 us a case, most of it the models' Python checks (ids, free-form trees); a plain ``json.loads`` of the same
file takes 48 us. :func:`lean_case` checks the same file against a mirror of that contract decoded by msgspec
(typed structs, every range and pattern as a constraint, unknown fields refused) in about 40 us, and is
**never more lenient** than the model: every document it accepts, ``CaseResult.model_validate_json`` accepts
too (tests/test_lean_case.py mutates a real case.json field by field and checks that; and that the mirror
names the model's fields, so a field added there fails the test until it is added here). It is stricter in
a few corners the harness never writes: a number given as a string (``"5"``), an integer written ``5.0``, a
boolean written ``1``; such a file reads as unreadable here, where the model would coerce it.

What is checked, as the model checks it: the status and every other closed word is one of its values; every
number finite and in its range (docs/result-contract.md "Values"); each key part a plain id
(:mod:`gripprobe_core.models.ids`: lowercase ASCII words, at most its length); the free-form objects
(``run_values``, a phase's ``proxy`` and ``challenge``) nested at most 64 deep; no field the contract does
not have. Nothing here is a second contract: it follows ``models/results.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

__all__ = ["LeanCase", "lean_case"]

# The ranges of models/bounds.py (the test checks they are the same numbers).
_TRIALS_MAX = 100
_COUNT_MAX = 10**15
_SECONDS_MAX = 10_000_000.0
_COST_MAX = 1e18
_DEPTH_MAX = 64

Score = Annotated[float, Meta(ge=0.0, le=1.0)]
Count = Annotated[int, Meta(ge=0, le=_COUNT_MAX)]
Seconds = Annotated[float, Meta(ge=0.0, le=_SECONDS_MAX)]
Millis = Annotated[float, Meta(ge=0.0, le=_SECONDS_MAX * 1000)]
Rate = Annotated[float, Meta(ge=0.0, le=float(_COUNT_MAX))]
Cost = Annotated[float, Meta(ge=0.0, le=_COST_MAX)]
ExitCode = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]

# models/ids.py's rule: ID_PATTERN (\Z, not $: Python's $ also matches before a final newline) and ID_MAX.
_ID = r"^[a-z0-9]+(?:[._-][a-z0-9]+)*\Z"
AgentId = Annotated[str, Meta(pattern=_ID, max_length=32)]
BackendId = Annotated[str, Meta(pattern=_ID, max_length=32)]
FormatId = Annotated[str, Meta(pattern=_ID, max_length=16)]
ModelId = Annotated[str, Meta(pattern=_ID, max_length=64)]
TestId = Annotated[str, Meta(pattern=_ID, max_length=64)]

Status = Literal["PASS", "PASS_WITH_POLICY_VIOLATION", "FAIL", "NO_TOOL_CALL", "TIMEOUT", "TOOL_UNSUPPORTED",
                 "SHELL_ERROR", "HARNESS_ERROR", "SKIPPED"]
ToolEventVerdict = Literal["confirmed_tool_use", "no_tool_event_observed", "tool_event_not_observable",
                           "tool_event_inconclusive"]
ToolEventVerdictReason = Literal["none", "parser_not_capable_for_shell", "capture_missing", "proxy_error",
                                 "structured_event_absent", "wrapper_parse_error", "source_parse_inconclusive"]


class _S(Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """The model's ``extra="forbid"``: a field the contract does not have makes the file invalid."""


class ProcessResult(_S, kw_only=True):
    status: Literal["ok", "timeout", "shell_error", "harness_capture_failed", "nonzero_exit"]
    exit_code: ExitCode | None = None
    signal: Annotated[int, Meta(ge=1, le=255)] | None = None
    duration_s: Seconds = 0.0
    started_at: str | None = None
    finished_at: str | None = None
    command: list[str] = []
    stdout_bytes: Count = 0
    stderr_bytes: Count = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: str | None = None


class SourcePointer(_S, kw_only=True):
    kind: Literal["run_event", "tool_call", "final_output"]
    sequence: Count
    event_type: str
    field_path: str | None = None
    phase: str = "measured"


class ValidatorResult(_S, kw_only=True):
    kind: str
    passed: bool
    expected: str = ""
    observed: str = ""
    message: str = ""
    source: SourcePointer | None = None


class TelemetrySummary(_S, kw_only=True):
    event_capture_status: Literal["collected", "partial", "missing", "wrapper_parse_error"]
    telemetry_proxy_status: Literal["collected", "skipped", "error"] = "skipped"
    telemetry_capture_skip_reason: str | None = None
    telemetry_proxy_skip_reason: str | None = None
    telemetry_source_tier: Literal["A", "B", "C", "D", "none"] = "none"
    telemetry_event_count: Count = 0
    telemetry_tool_call_count: Count = 0
    telemetry_proxy_tool_call_nonstructured_count: Count = 0
    telemetry_tool_result_count: Count = 0
    telemetry_tool_error_count: Count = 0
    telemetry_invoked_confidence: Score = 0.0
    telemetry_retry_loop_detected: bool = False
    telemetry_repeat_loop_count: Count = 0
    telemetry_tool_call_without_result_count: Count = 0
    telemetry_tool_call_unwitnessed_count: Count = 0
    telemetry_tool_result_orphan_count: Count = 0
    telemetry_backend_tool_unsupported: bool = False
    telemetry_protocol_structured_count: Count | None = None
    tool_event_verdict: ToolEventVerdict
    tool_event_verdict_reason: ToolEventVerdictReason
    tool_kinds_observed: list[str] = []
    tiers_present: list[str] = []


class Verdict(_S, kw_only=True):
    status: Status
    verdict_source: str = "event_evaluator"
    evaluator_reason_code: str
    evaluator_reason_text: str
    failure_reason: str | None
    trajectory: Literal["clean", "recovered", "violated"]
    invoked: Literal["yes", "no", "maybe"]
    artifact_match: Score
    tool_invocation_match: Score
    protocol_match: Score | None
    strict_pass_score: Score
    overall_score: Score
    tool_event_verdict: ToolEventVerdict
    tool_event_verdict_reason: ToolEventVerdictReason


class CaseKey(_S, kw_only=True):
    agent: AgentId
    model: ModelId
    backend: BackendId
    format: FormatId
    test: TestId
    trial: Annotated[int, Meta(ge=1, le=_TRIALS_MAX)] = 1


class BackendProbe(_S, kw_only=True):
    backend_id: str
    kind: str
    url: str
    reachable: bool
    models: Count | None = None
    latency_ms: Millis
    http_status: Annotated[int, Meta(ge=0, le=999)] | None = None
    problem: Literal["connect", "dns", "timeout", "url", "auth", "http", "body"] | None = None
    error: str | None = None
    checked_at: str


class Usage(_S, kw_only=True):
    source: Literal["A", "B", "none"] = "none"
    model_calls: Count = 0
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    cached_tokens: Count | None = None
    total_tokens: Count | None = None
    ttft_ms: Millis | None = None
    model_time_s: Seconds | None = None
    generation_s: Seconds | None = None
    output_tokens_per_s: Rate | None = None
    cost: Cost | None = None
    currency: Annotated[str, Meta(pattern=r"^[A-Z]{3}\Z")] | None = None
    tokens_from: Literal["agent"] | None = None
    phases: Annotated[list[Literal["warmup", "measured"]], Meta(max_length=2)] | None = None


class PhaseRecord(_S, kw_only=True):
    phase: Literal["warmup", "measured"]
    process: ProcessResult
    summary: TelemetrySummary
    usage: Usage | None = None
    proxy: dict[str, Any] = {}
    challenge: dict[str, Any] = {}
    backend_probe: BackendProbe | None = None


class Attempt(_S, kw_only=True):
    attempt: Annotated[int, Meta(ge=1, le=1000)]
    node_id: str | None = None
    error: str | None = None


class Placement(_S, kw_only=True):
    executor: Literal["ray"]
    node_id: str
    node_ip: str | None = None
    hostname: str | None = None
    attempts: list[Attempt] = []


class InteractionRecord(_S, kw_only=True):
    policy: Literal["auto-approve", "auto-deny", "scripted", "manual"]
    how: Literal["native", "session", "none"] = "none"
    applied: bool = False
    reason: str | None = None
    denies: bool = False
    requests: Count = 0
    allowed: Count = 0
    denied: Count = 0
    answered: Count = 0
    violations: list[str] = []
    excluded_from_scores: bool = False


_UNSET: Any = msgspec.UNSET


class LeanCase(_S, kw_only=True):
    """``case.json`` (models/results.py ``CaseResult``), field for field."""

    schema_version: Annotated[int, Meta(ge=1, le=1000)] = 1
    run_id: str
    case_id: str
    key: CaseKey
    agent_version: str | None = None
    model_hash: str | None = None
    hardware_profile: Annotated[str, Meta(pattern=r"^[!-~]{1,128}\Z")] | None = None
    tags: list[str] = []
    language: str = "en"
    started_at: str
    finished_at: str
    duration_s: Seconds
    run_values: dict[str, Any] | msgspec.UnsetType = _UNSET
    run_context: dict[str, Any] | msgspec.UnsetType = _UNSET
    """The name ``run_values`` had before 0.2 (the model reads either)."""
    phases: list[PhaseRecord] = []
    validators: list[ValidatorResult] = []
    verdict: Verdict
    telemetry: TelemetrySummary
    telemetry_proxy_mode: Literal["off", "auto", "force"] = "auto"
    skip_reason: str | None = None
    harness_error: str | None = None
    sandbox: Literal["bwrap", "none"] | None = None
    usage: Usage | None = None
    placement: Placement | None = None
    evidence: dict[str, str] | None = None
    interaction: InteractionRecord | None = None
    warnings: list[str] = []


_DECODE = msgspec.json.Decoder(LeanCase).decode


def _shallow(tree: Any) -> bool:
    """Whether the JSON value ``tree`` nests no container ``_DEPTH_MAX`` levels below it (models/bounds.py's
    ``finite_tree``; msgspec already refused every non-finite number). Level by level, containers only."""
    level = [tree]
    for _ in range(_DEPTH_MAX):
        level = [x for v in level for x in (v.values() if type(v) is dict else v) if type(x) is dict or type(x) is list]
        if not level:
            return True
    return False


def lean_case(data: bytes) -> LeanCase | None:
    """The case in the bytes of a case.json, checked whole as above; None when it is not a valid result (not
    JSON, a field missing or unknown, a value out of its range, nested too deep). Never raises for what the
    bytes hold."""
    try:
        case = _DECODE(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    if case.run_values is not _UNSET:
        if case.run_context is not _UNSET:  # the model takes one name and refuses the other as unknown
            return None
        free = [case.run_values]
    else:
        free = [case.run_context] if case.run_context is not _UNSET else []
    for p in case.phases:
        if p.proxy:
            free.append(p.proxy)
        if p.challenge:
            free.append(p.challenge)
    if free and not all(_shallow(f) for f in free if f):
        return None
    return case

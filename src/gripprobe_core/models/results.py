"""Result contract: process results, validator results, telemetry summary, verdict, case result."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from .bounds import TRIALS_MAX, Cost, Count, FiniteTree, Millis, Rate, Score, Seconds
from .ids import AgentId, BackendId, FormatId, ModelId, TestId
from .statuses import STATUSES

ProcessStatus = Literal["ok", "timeout", "shell_error", "harness_capture_failed", "nonzero_exit"]
Status = Literal[
    "PASS", "PASS_WITH_POLICY_VIOLATION", "FAIL", "NO_TOOL_CALL", "TIMEOUT", "TOOL_UNSUPPORTED",
    "SHELL_ERROR", "HARNESS_ERROR", "SKIPPED",
]
ToolEventVerdict = Literal[
    "confirmed_tool_use", "no_tool_event_observed", "tool_event_not_observable", "tool_event_inconclusive"]
ToolEventVerdictReason = Literal[
    "none", "parser_not_capable_for_shell", "capture_missing", "proxy_error", "structured_event_absent",
    "wrapper_parse_error", "source_parse_inconclusive"]
EventCaptureStatus = Literal["collected", "partial", "missing", "wrapper_parse_error"]
ProxyStatus = Literal["collected", "skipped", "error"]
Trajectory = Literal["clean", "recovered", "violated"]
Invoked = Literal["yes", "no", "maybe"]


class _M(BaseModel):
    """Every number finite (``nan`` and ``inf`` are refused: a stored case.json holding one is not a valid
    result) and, where it has one, in its range (:mod:`.bounds`).

    Each model's validator is built on its first use (``defer_build``), not when this module is imported: a
    run imports this module before its first agent and makes its first result after it, when
    :func:`build_validators` has built them on the side (runner/run.py)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)


ExitCode = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
FreeForm = Annotated[dict[str, Any], FiniteTree]


class ProcessResult(_M):
    """What happened to the agent process in one phase."""

    status: ProcessStatus
    exit_code: ExitCode | None = None
    signal: int | None = Field(default=None, ge=1, le=255)
    duration_s: Seconds = 0.0
    started_at: str | None = None
    finished_at: str | None = None
    command: list[str] = Field(default_factory=list)
    stdout_bytes: Count = 0
    stderr_bytes: Count = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: str | None = Field(default=None, description="Why the process could not start or be captured.")


class SourcePointer(_M):
    """Points from a validator result to the event that produced the value it judged (SPEC §6)."""

    kind: Literal["run_event", "tool_call", "final_output"]
    sequence: Count
    event_type: str
    field_path: str | None = None
    phase: str = "measured"


class ValidatorResult(_M):
    kind: str
    passed: bool
    expected: str = ""
    observed: str = ""
    message: str = ""
    source: SourcePointer | None = None


class TelemetrySummary(_M):
    """``events.summary.json`` (SPEC §5). Per phase; the case carries the measured one."""

    event_capture_status: EventCaptureStatus
    telemetry_proxy_status: ProxyStatus = "skipped"
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
    telemetry_repeat_loop_count: Count = Field(
        default=0, description="The identical calls (same name and arguments, none failed) the phase ended "
                               "repeating, when at least 3 came back; else 0 (docs/evaluator.md, repeat loop).")
    telemetry_tool_call_without_result_count: Count = 0
    telemetry_tool_call_unwitnessed_count: Count = Field(
        default=0, description="Tool calls the agent reported that the recording proxy never saw the model ask "
                               "for, where every real call travels on the wire (they confirm nothing).")
    telemetry_tool_result_orphan_count: Count = Field(
        default=0, description="Tool results the agent sent in its requests that answer no call a model response "
                               "of the phase made (they confirm nothing; docs/telemetry.md).")
    telemetry_backend_tool_unsupported: bool = False
    telemetry_protocol_structured_count: Count | None = Field(
        default=None, description="Structured tool calls seen at tier A; None without proxy data.")
    tool_event_verdict: ToolEventVerdict
    tool_event_verdict_reason: ToolEventVerdictReason
    tool_kinds_observed: list[str] = Field(default_factory=list)
    tiers_present: list[str] = Field(default_factory=list)


class Verdict(_M):
    """Every verdict field the evaluator writes (SPEC §6)."""

    status: Status
    verdict_source: str = Field(
        default="event_evaluator", description="The judge, by the name it is registered under (written by the core, "
                                               "never by the judge): the core's ``event_evaluator`` unless the "
                                               "case's suite names another (``judge:``).")
    evaluator_reason_code: str
    evaluator_reason_text: str
    failure_reason: str | None
    trajectory: Trajectory
    invoked: Invoked
    artifact_match: Score
    tool_invocation_match: Score
    protocol_match: Score | None
    strict_pass_score: Score
    overall_score: Score
    tool_event_verdict: ToolEventVerdict
    tool_event_verdict_reason: ToolEventVerdictReason


class CaseKey(_M):
    """What a case is: one trial of one cell (agent × model × backend × format × test). Every part is a plain id
    (:mod:`.ids`), so the case id is unique by construction."""

    agent: AgentId
    model: ModelId
    backend: BackendId
    format: FormatId
    test: TestId
    trial: int = Field(default=1, ge=1, le=TRIALS_MAX, description="Which repetition of the cell (--trials N: 1..N).")

    def slug(self) -> str:
        """The case id: the cell's parts joined by ``__``, and ``__t<n>`` for trials after the first (so a
        one-trial run's ids are what they always were). No id holds ``__`` or starts or ends with ``_``, so
        splitting a case id at ``__`` gives its parts back: two keys never share a case folder."""
        base = "__".join((self.agent, self.model, self.backend, self.format, self.test))
        return base if self.trial == 1 else f"{base}__t{self.trial}"

    def cell(self) -> tuple[str, str, str, str, str]:
        """The cell this trial belongs to (the key without the trial)."""
        return self.agent, self.model, self.backend, self.format, self.test


BackendProblem = Literal["connect", "dns", "timeout", "url", "auth", "http", "body"]


class BackendProbe(_M):
    """What one probe of a model backend saw (``GET /v1/models`` or ``GET /api/tags``): in manifest.json
    (the preflight) and in case.json (right after each phase). Never holds the API key."""

    backend_id: str
    kind: str = Field(description="The backend kind (ollama, openai-compatible, or a plugin's).")
    url: str = Field(description="The listing URL probed (credentials in it removed).")
    reachable: bool
    models: Count | None = Field(default=None, description="How many models the listing named (when reachable).")
    latency_ms: Millis = Field(description="From sending the request to the whole answer read.")
    http_status: int | None = Field(default=None, ge=0, le=999)
    problem: BackendProblem | None = Field(
        default=None, description="Why unreachable: connect | dns | timeout | url | auth | http | body.")
    error: str | None = Field(default=None, description="What went wrong, in a few words.")
    checked_at: str


class Usage(_M):
    """Model calls, tokens, latency and cost of a phase (or, summed, of a case), read from the wire (tier A:
    the proxy's records) or, without the proxy, from what the agent reports (tier B)."""

    source: Literal["A", "B", "none"] = Field(
        default="none", description="A: the recording proxy's records; B: the agent's own events; none: unknown.")
    model_calls: Count = 0
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    cached_tokens: Count | None = Field(default=None, description="Prompt tokens the backend served from its cache.")
    total_tokens: Count | None = None
    ttft_ms: Millis | None = Field(default=None, description="Time to first token: median over the model calls "
                                                            "(the proxy's time to the first response object "
                                                            "carrying output).")
    model_time_s: Seconds | None = Field(default=None, description="Time the model calls took, summed.")
    generation_s: Seconds | None = Field(default=None, description="Time from first to last byte of the calls, summed.")
    output_tokens_per_s: Rate | None = Field(default=None, description="completion_tokens / generation_s.")
    cost: Cost | None = Field(default=None, description="From the model spec's pricing; None without one.")
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    tokens_from: Literal["agent"] | None = Field(
        default=None, description="agent: the wire carried no token counts (the agent did not ask for them); these "
                                  "are the ones the agent reported itself (aider's printed `Tokens:` line, rounded "
                                  "as it prints them). None: from this usage's own source.")
    phases: list[Literal["warmup", "measured"]] | None = Field(
        default=None, max_length=2, description="The phases these figures add up: a case's usage counts every "
                                                "phase that ran, the warmup too (its agent time is the measured "
                                                "phase's alone); None on one phase's own usage.")


class PhaseRecord(_M):
    phase: Literal["warmup", "measured"]
    process: ProcessResult
    summary: TelemetrySummary
    usage: Usage | None = Field(default=None, description="Model calls, tokens, latency and cost of the phase.")
    proxy: FreeForm = Field(default_factory=dict)
    challenge: FreeForm = Field(default_factory=dict, description="Per-phase challenge facts (tokens, URL).")
    backend_probe: BackendProbe | None = Field(
        default=None, description="The backend probed by the harness right after the phase (not for the oracle).")


class Attempt(_M):
    """One try at running a case on a cluster node (``--executor ray``)."""

    attempt: int = Field(ge=1, le=1000)
    node_id: str | None = Field(default=None, description="The Ray node that ran it, when it reported back.")
    error: str | None = Field(default=None, description="Why it delivered nothing (its node or worker lost); "
                                                        "None for the attempt whose result this is.")


class Placement(_M):
    """Where a case ran when an executor other than the local one ran it."""

    executor: Literal["ray"]
    node_id: str
    node_ip: str | None = None
    hostname: str | None = None
    attempts: list[Attempt] = Field(default_factory=list, description="Every try, the last one delivered.")


class InteractionRecord(_M):
    """case.json ``interaction``: the case's policy, how its driver met it, what the measured phase asked
    and was answered, and every denial that did not hold (docs/interaction.md)."""

    policy: Literal["auto-approve", "auto-deny", "scripted", "manual"]
    how: Literal["native", "session", "none"] = "none"
    applied: bool = False
    reason: str | None = Field(default=None, description="Why the policy was not applied (the driver's words).")
    denies: bool = Field(default=False, description="The policy can deny a call (else it is approvals-off as ever).")
    requests: Count = 0
    allowed: Count = 0
    denied: Count = 0
    answered: Count = 0
    violations: list[str] = Field(default_factory=list, description="`denied_call_ran: <id>`, "
                                                                    "`denied_change_landed: <path>`.")
    excluded_from_scores: bool = Field(default=False, description="manual: the operator's answers are not "
                                                                  "reproducible, so scores and aggregates leave it out.")


class CaseResult(_M):
    """``case.json``: the whole result contract of one case."""

    schema_version: int = Field(default=1, ge=1, le=1000)
    run_id: str
    case_id: str
    key: CaseKey
    agent_version: str | None = None
    model_hash: str | None = None
    hardware_profile: str | None = Field(
        default=None, pattern=r"^[!-~]{1,128}$",
        description="Hardware profile id (hardware_profiles.yaml) the run declared, if any (printable ASCII).")
    tags: list[str] = Field(default_factory=list)
    language: str = "en"
    started_at: str
    finished_at: str
    duration_s: Seconds
    run_values: FreeForm = Field(
        default_factory=dict, validation_alias=AliasChoices("run_values", "run_context"),
        description="Values fixed at run time (today's date, ...) so a rebuild agrees (``run_context`` in runs "
                    "written before 0.2, still read).")
    phases: list[PhaseRecord] = Field(default_factory=list)
    validators: list[ValidatorResult] = Field(default_factory=list)
    verdict: Verdict
    telemetry: TelemetrySummary
    telemetry_proxy_mode: Literal["off", "auto", "force"] = "auto"
    skip_reason: str | None = None
    harness_error: str | None = None
    sandbox: Literal["bwrap", "none"] | None = Field(
        default=None, description="How the agent's phases were confined (bwrap) or not (none); None when nothing ran.")
    usage: Usage | None = Field(default=None, description="The phases' usage summed (tokens, calls, time, cost).")
    placement: Placement | None = Field(
        default=None, description="The cluster node that ran it and every attempt (--executor ray); None: this "
                                  "machine, in the run's own process (--executor local).")
    evidence: dict[str, str] | None = Field(
        default=None, description="sha256 of every evidence file (path relative to the case directory), "
                                  "checked by rebuild-reports --recompute (artifact_tampered).")
    interaction: InteractionRecord | None = Field(
        default=None, description="The case's interaction policy and how it went; None: the case had none.")
    warnings: list[str] = Field(
        default_factory=list, description="What went wrong around the case without deciding its verdict, one "
                                          "classified line each: `kept_file_refused: …` (a file the driver asked to "
                                          "keep was not kept: a symlink in its path …), `scratch_not_removed: …` "
                                          "(part of the phase folders could not be deleted).")


def build_validators() -> None:
    """Build every result model's validator now (each is otherwise built on its first use), in the order the
    models are defined: a model's fields' models come first, so each schema is built once and reused."""
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, _M) and value is not _M:
            value.model_rebuild()

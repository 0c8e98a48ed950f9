"""Pydantic models for the declarative specs (SPEC §3).

Every model forbids unknown keys, so a misspelt key is an error that names the file, line and key
(see :mod:`gripprobe_core.specs.loader`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from .bounds import COUNT_MAX, PRICE_MAX, TIMEOUT_MAX_S, TRIALS_MAX, finite_tree
from .ids import AgentId, BackendId, FormatId, HardwareId, ModelId, SuiteId, TestId

ToolKind = Literal["read", "write", "execute", "search", "fetch", "other"]
TOOL_KINDS: tuple[str, ...] = ("read", "write", "execute", "search", "fetch", "other")
#: The tags the shipped specs use, and what they mean (docs/specs.md). Tags are free: any ``TAG_PATTERN`` works.
KNOWN_TAGS: dict[str, str] = {
    "sanity": "a basic task every agent should manage; the default suite runs these",
    "non_sanity": "every other shipped test (each shipped test is sanity or non_sanity)",
    "multilingual": "a translation of another test (variant_of), prompt not in English",
    "web": "needs a URL fetched from the test's challenge server",
    "scenario": "a realistic multi-step task on seeded files",
    "interaction": "carries an interaction policy (observe.interaction): a denial that must hold",
}
#: Lowercase words joined by ``-`` or ``_``, starting with a letter: ``demo``, ``my-team``, ``long_context2``.
TAG_PATTERN = r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$"
TAG_MAX_LENGTH = 64
_TAG_RE = re.compile(TAG_PATTERN)


def _check_tag(tag: str) -> str:
    if len(tag) > TAG_MAX_LENGTH or not _TAG_RE.match(tag):
        shown = tag if len(tag) <= 40 else tag[:37] + "..."
        raise ValueError(f"{shown!r} is not a tag: use lowercase letters and digits, words joined by '-' or '_', "
                         f"starting with a letter, at most {TAG_MAX_LENGTH} characters (e.g. my-tag)")
    return tag


Tag = Annotated[str, AfterValidator(_check_tag), WithJsonSchema({
    "type": "string", "pattern": TAG_PATTERN, "maxLength": TAG_MAX_LENGTH, "examples": list(KNOWN_TAGS),
    "description": "A tag of your own (lowercase words joined by '-' or '_'), or a known one: "
                   + "; ".join(f"{k}: {v}" for k, v in KNOWN_TAGS.items()) + "."})]
"""A test's tag: free text in a sane shape (``TAG_PATTERN``); ``KNOWN_TAGS`` are the ones the shipped specs use."""
ProxyMode = Literal["off", "auto", "force"]
SandboxMode = Literal["auto", "bwrap", "none"]
#: The built-in backend kinds that are servers of their own (they need a base_url).
REMOTE_KINDS: tuple[str, ...] = ("ollama", "openai-compatible", "anthropic")


class _Strict(BaseModel):
    """Unknown keys are errors; every number is finite (``.nan`` and ``.inf`` are refused with the key's line)."""

    model_config = ConfigDict(extra="forbid", frozen=False, allow_inf_nan=False)


JOBS_MAX = 64
"""Cases whose agents run at once (a suite's ``jobs``, ``--jobs``); the harness prepares the next case and judges the last beside them."""
RESOURCE_AMOUNT_MAX = 1_000_000
MEMORY_GB_MAX = 1_000_000
Timeout = Annotated[float, Field(gt=0, le=TIMEOUT_MAX_S, allow_inf_nan=False)]
"""Seconds a phase may run: more than 0, at most one day (``TIMEOUT_MAX_S``)."""
TokenBudget = Annotated[int, Field(ge=1, le=COUNT_MAX)]
Price = Annotated[float, Field(ge=0, le=PRICE_MAX, allow_inf_nan=False)]


RESOURCE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
_RESOURCE_RE = re.compile(RESOURCE_NAME_PATTERN)


def _check_resources(value: dict[str, float]) -> dict[str, float]:
    """Ray resources a case needs: names like ``ollama-qwen3-8b`` (``CPU`` and ``GPU`` are Ray's own);
    amounts positive, a fraction of one unit or a whole number of them (what Ray's scheduler accepts)."""
    for name, amount in value.items():
        if not _RESOURCE_RE.match(name):
            raise ValueError(f"{name!r} is not a resource name: use letters, digits and . _ : / - "
                             f"(e.g. ollama-qwen3-8b)")
        if not 0 < amount <= RESOURCE_AMOUNT_MAX or (amount > 1 and amount != int(amount)):
            raise ValueError(f"resource {name!r}: {amount!r} is not an amount Ray can schedule: give a fraction "
                             f"up to 1 (0.25) or a whole number (2, at most {RESOURCE_AMOUNT_MAX:,})")
    return value


Resources = Annotated[dict[str, float], AfterValidator(_check_resources)]
"""Ray resources (``--executor ray``): the cases need them on the node that runs them (docs/scale.md)."""


# --------------------------------------------------------------------------- models

class BackendSpec(_Strict):
    """One way to reach a model. ``kind`` decides how the runner talks to it."""

    id: BackendId
    kind: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="Backend kind: oracle (embedded), openai-compatible, ollama, anthropic, or one a plugin registers "
                    "(`gripprobe plugins` lists them).")
    model_id: str = Field(description="Model name as the backend knows it (for the oracle: the profile).")
    agent_model_id: str | None = Field(
        default=None, description="Model name as handed to the agent, when it differs from model_id.")
    base_url: str | None = Field(default=None, description="Backend base URL (not for the oracle).")
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key. The key is passed only to the agent.")
    model_hash: str | None = None
    recording: str | None = Field(
        default=None, description="kind replay: the folder of a recorded real-model session "
                                  "(scripts/real_model.py record writes one); a relative path is the model spec "
                                  "file's own folder's.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the agent.")
    resources: Resources = Field(
        default_factory=dict,
        description="Ray resources a case with this backend needs (--executor ray): its cases run only on nodes "
                    "that offer them, at most as many at once as the nodes hold (e.g. {ollama-qwen3-8b: 1}).")

    @model_validator(mode="after")
    def _base_url_needed(self) -> "BackendSpec":
        # the built-in remote kinds; a plugin's remote kind is checked against the registry (specs/crossref.py)
        if self.kind in REMOTE_KINDS and not self.base_url:
            raise ValueError(f"backend kind {self.kind!r} needs base_url")
        if (self.kind == "replay") != (self.recording is not None):
            raise ValueError("recording: belongs to a backend of kind replay, which needs one (the recorded "
                             "session's folder)" if self.recording is not None else
                             "backend kind 'replay' needs recording: FOLDER (the recorded session's folder)")
        return self


class ModelPolicy(_Strict):
    timeout_s: Timeout | None = Field(default=None, description="Overrides the agent's timeout per phase.")
    max_tokens_per_phase: TokenBudget | None = Field(
        default=None, description="Token budget of each phase with this model, enforced by the recording proxy.")
    agents: dict[str, "ModelPolicy"] = Field(default_factory=dict, description="Per-agent overrides.")


class Pricing(_Strict):
    """What a model's tokens cost (per million), for the cost columns of reports and compare."""

    input_per_million: Price = Field(description="Price of a million prompt (input) tokens.")
    output_per_million: Price = Field(description="Price of a million completion (output) tokens.")
    cached_input_per_million: Price | None = Field(
        default=None, description="Price of a million cached prompt tokens (default: the input price).")
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")

    def cost(self, prompt: int, completion: int, cached: int = 0) -> float:
        """The cost of these tokens (``cached`` is the part of ``prompt`` the backend served from its cache)."""
        cached = max(0, min(cached, prompt))
        cached_price = self.input_per_million if self.cached_input_per_million is None else self.cached_input_per_million
        return ((prompt - cached) * self.input_per_million + cached * cached_price
                + completion * self.output_per_million) / 1_000_000


class ModelSpec(_Strict):
    id: ModelId
    label: str | None = None
    family: str | None = None
    size: str | None = None
    quantization: str | None = None
    backends: list[BackendSpec] = Field(min_length=1)
    policy: ModelPolicy = Field(default_factory=ModelPolicy)
    pricing: Pricing | None = Field(default=None, description="Token prices, for cost (optional).")

    def backend(self, backend_id: str | None = None) -> BackendSpec:
        if backend_id is None:
            return self.backends[0]
        for b in self.backends:
            if b.id == backend_id:
                return b
        raise KeyError(backend_id)


# --------------------------------------------------------------------------- agents

class CliAgentSpec(_Strict):
    id: AgentId
    plugin: str = Field(description="Name of the agent plugin that builds its command, env and parsers.")
    executable: str
    default_args: list[str] = Field(default_factory=list)
    formats: list[FormatId] = Field(default_factory=lambda: ["tool"], min_length=1)
    tool_kinds: list[ToolKind] = Field(description="Tool kinds the agent can perform.")
    timeout_s: Timeout = 120
    telemetry_proxy_mode: ProxyMode = "auto"
    sandbox: SandboxMode | None = Field(
        default=None, description="auto | bwrap | none: how its phases are confined (default auto; a suite's "
                                  "or the command line's choice wins).")
    version: str | None = Field(default=None, description="Pinned version, when the agent is installed by GripProbe.")
    resources: Resources = Field(
        default_factory=dict,
        description="Ray resources each of its cases needs (--executor ray), e.g. {GPU: 1} or {CPU: 0.5}; "
                    "default one CPU per case.")


# --------------------------------------------------------------------------- tests

class FixtureFile(_Strict):
    """A file seeded into every phase's workspace before the agent starts."""

    path: str
    content: str = ""
    mode: int | None = Field(default=None, ge=0, le=0o7777, description="File mode, e.g. 0o755.")

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError("fixture path must be relative and stay inside the workspace")
        return v


class ChallengeSpec(_Strict):
    """A challenge HTTP server started per phase (nonces and tokens differ between phases)."""

    kind: str = Field(description="Challenge server kind, e.g. 'nonce' or 'search' (pluggable).")
    options: Annotated[dict[str, Any], AfterValidator(finite_tree)] = Field(default_factory=dict)


class ValidatorSpec(_Strict):
    """One validator. ``kind`` selects the validator plugin; the other keys are its options."""

    model_config = ConfigDict(extra="allow")
    kind: str

    @model_validator(mode="after")
    def _finite_options(self) -> "ValidatorSpec":
        finite_tree(self.model_extra or {})
        return self


class ReferenceShell(_Strict):
    shell: str


class ReferenceWrite(_Strict):
    write: "WriteArgs"


class ReferenceEdit(_Strict):
    edit: "EditArgs"


class ReferenceRead(_Strict):
    read: "ReadArgs"


class WriteArgs(_Strict):
    path: str
    content: str


class EditArgs(_Strict):
    path: str
    old: str
    new: str


class ReadArgs(_Strict):
    path: str


ReferenceAction = Union[ReferenceShell, ReferenceWrite, ReferenceEdit, ReferenceRead]


InteractionPolicy = Literal["auto-approve", "auto-deny", "scripted", "manual"]
INTERACTION_POLICIES: tuple[str, ...] = ("auto-approve", "auto-deny", "scripted", "manual")
REGEX_MAX_LENGTH = 1000


def _check_regex(value: str | None) -> str | None:
    if value is None:
        return value
    if len(value) > REGEX_MAX_LENGTH:
        raise ValueError(f"the regular expression is {len(value)} characters long; at most {REGEX_MAX_LENGTH}")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a regular expression: {exc} (Python re syntax; escape special "
                         f"characters with a backslash)") from None
    return value


Regex = Annotated[str, AfterValidator(_check_regex)]


class InteractionRule(_Strict):
    """One scripted rule: what it matches (every key given must match; none: it matches everything) and what
    it answers (exactly one of ``decision``, ``answer``, ``option``)."""

    tool_kind: ToolKind | None = Field(default=None, description="Matches calls of this tool kind.")
    raw_name: str | None = Field(default=None, min_length=1, description="Matches the tool's name verbatim, as the agent calls it.")
    name: str | None = Field(default=None, min_length=1, description="Matches the tool's normalized name (shell, write, edit, read ...).")
    input_regex: Regex | None = Field(default=None, description="Matches when this regular expression is found in the call's input (as JSON).")
    prompt_regex: Regex | None = Field(default=None, description="Matches when it is found in the agent's question text.")
    decision: Literal["allow", "deny"] | None = Field(default=None, description="Allow or deny the call.")
    answer: str | None = Field(default=None, description="The answer to a free-text question.")
    option: str | None = Field(default=None, min_length=1,
                               description="Pick the agent's option with this id, name or kind (allow_once, reject_always ...).")

    @model_validator(mode="after")
    def _one_outcome(self) -> "InteractionRule":
        given = [k for k in ("decision", "answer", "option") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a rule gives exactly one of decision: allow|deny, answer: <text> or option: <id> "
                             + (f"(this one gives {' and '.join(given)})" if given else "(this one gives none)"))
        return self

    def matchers(self) -> dict[str, str]:
        """The match keys this rule gives (empty: a catch-all)."""
        return {k: v for k in ("tool_kind", "raw_name", "name", "input_regex", "prompt_regex")
                if (v := getattr(self, k)) is not None}


class InteractionSpec(_Strict):
    """How the harness answers the agent's mid-run requests ("may I run this tool?"); docs/interaction.md."""

    policy: InteractionPolicy = Field(description="auto-approve | auto-deny | scripted | manual (asks on the "
                                                  "terminal; its cases are excluded from scores).")
    default: Literal["allow", "deny"] = Field(default="allow", description="scripted: the answer when no rule matches.")
    rules: list[InteractionRule] = Field(default_factory=list, max_length=COUNT_MAX,
                                         description="scripted: ordered rules, the first that matches decides.")

    @model_validator(mode="after")
    def _rules_only_when_scripted(self) -> "InteractionSpec":
        if self.rules and self.policy != "scripted":
            raise ValueError(f"rules apply to policy: scripted only (this policy is {self.policy}); "
                             f"drop the rules or use policy: scripted")
        return self


class ObserveSpec(_Strict):
    """What the harness does beyond watching: ``interaction`` answers the agent's requests."""

    interaction: InteractionSpec | None = None


class TestRules(_Strict):
    no_retry_on_error: bool = False


class TestSpec(_Strict):
    __test__ = False  # not a pytest class

    id: TestId
    title: str
    prompt: str = Field(description="Prompt text; ${name} placeholders are filled at run time.")
    language: str = "en"
    variant_of: TestId | None = Field(default=None, description="Id of the test this one translates.")
    requires: list[Union[ToolKind, list[ToolKind]]] = Field(
        default_factory=list,
        description="Tool kinds the agent must be able to perform; a list inside means any one of them.")
    tags: list[Tag] = Field(
        default_factory=list,
        description="Tags select tests in suites and on the command line (tag:<tag>); free, lowercase words "
                    "joined by '-' or '_'. Known: " + ", ".join(KNOWN_TAGS) + ".")
    fixtures: list[FixtureFile] = Field(default_factory=list)
    challenge: ChallengeSpec | None = None
    validators: list[ValidatorSpec] = Field(min_length=1)
    reference: list[ReferenceAction] = Field(
        min_length=1, description="Actions that solve the test; the oracle performs them.")
    rules: TestRules = Field(default_factory=TestRules)
    timeout_s: Timeout | None = None
    observe: ObserveSpec | None = Field(
        default=None, description="observe.interaction: how the harness answers the agent's permission requests "
                                  "for this test (wins over the suite's); docs/interaction.md.")


# --------------------------------------------------------------------------- suites, hardware

class SuiteCase(_Strict):
    agent: AgentId
    model: ModelId
    test: TestId
    format: FormatId = "tool"
    backend: BackendId | None = None


class SuiteSpec(_Strict):
    id: SuiteId
    title: str | None = None
    agents: list[AgentId] = Field(default_factory=list)
    models: list[ModelId] = Field(default_factory=list)
    tests: list[str] = Field(default_factory=list, description="Test ids; 'tag:<tag>' selects by tag.")
    formats: list[FormatId] = Field(default_factory=list, description="Formats to run, for each agent those of them it supports (an agent with none gets its first); empty means every format the agent supports.")
    cases: list[SuiteCase] = Field(default_factory=list, description="Explicit cases, added to the matrix.")
    telemetry_proxy_mode: ProxyMode | None = None
    jobs: int | None = Field(default=None, ge=1, le=JOBS_MAX)
    sandbox: SandboxMode | None = Field(
        default=None, description="auto | bwrap | none for every agent of the suite (the command line's --sandbox wins).")
    trials: int | None = Field(default=None, ge=1, le=TRIALS_MAX,
                               description="How many times each cell runs (the command line's --trials wins).")
    warmup: bool = Field(
        default=True, description="Run each case's warmup phase before the measured one (false: the measured phase "
                                  "alone, for slow models; the command line's --no-warmup also turns it off).")
    max_tokens_per_phase: TokenBudget | None = Field(
        default=None, description="Token budget of each phase, enforced by the recording proxy "
                                        "(the command line's --max-tokens-per-phase wins over this, this over a model's).")
    judge: str | None = Field(
        default=None, min_length=1, description="The registered evaluator that judges the suite's cases (`gripprobe "
                                                "plugins` lists them; their verdicts name it in verdict_source); "
                                                "default: the core's event_evaluator.")
    observe: ObserveSpec | None = Field(
        default=None, description="observe.interaction for every test of the suite that has none of its own "
                                  "(docs/interaction.md).")


class HardwareProfile(_Strict):
    id: HardwareId
    label: str | None = None
    cpu: str | None = None
    gpu: str | None = None
    memory_gb: float | None = Field(default=None, ge=0, le=MEMORY_GB_MAX)
    notes: str | None = None


class HardwareProfiles(_Strict):
    profiles: list[HardwareProfile] = Field(default_factory=list)


for _m in (ModelPolicy, ReferenceWrite, ReferenceEdit, ReferenceRead, TestSpec):
    _m.model_rebuild()

"""The objects plugins register: one :class:`AgentDriver` per agent, one :class:`Backend` per backend kind.

The runner never asks "which plugin handles this agent?": it looks the agent's driver up by name
(``plugin:`` in a cli_agents spec) in the registry, and the backend by ``kind`` in a model spec, and
calls them. A plugin registers its driver with ``register_agents(register)`` and backends with
``register_backends(register)`` (see :mod:`gripprobe_core.hookspecs`).

A phase, as the runner drives it (docs/architecture.md)::

    driver.environment(ctx)    env vars for the agent; writes its config files under ctx.home
    driver.command(ctx)        the command line (and stdin)
    ... the agent runs, sandboxed ...
    driver.artifacts(ctx)      files to keep (session logs ...): copied by the harness, from the
                               phase's own folders only, never through a link; then
    driver.parse(ctx, capture) → Transcript(events, final_text)

``driver.route`` says whether the agent can be pointed at the recording proxy, ``driver.model_aliases``
(optional) names the models it sends side requests to, ``driver.markers`` lists
tier-C text markers, ``driver.tool_names`` its tool names, ``driver.oracle_dialects`` teaches the oracle
backend how to speak to it, ``driver.calls_off_wire`` names the formats in which the agent's own log may
confirm a call the wire never carried (none by default), each with the reason. :class:`BaseAgentDriver`
gives every member a sensible default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, Sequence, runtime_checkable

from .models.results import BackendProbe
from .models.specs import BackendSpec, CliAgentSpec, ReferenceAction
from .interaction import InteractionSupport
from .phase import AgentCommand, InstallRecipe, MarkerPattern, PhaseCapture, PhaseContext, RouteDecision, Transcript
from .telemetry.toolnames import GENERIC, ToolNames

if TYPE_CHECKING:  # pragma: no cover
    from .oracle.dialects import Dialect

Observability = Literal["structured", "markers", "none"]

__all__ = [
    "EVERY_FORMAT", "AgentDriver", "Backend", "BackendEndpoint", "BackendPhase", "BaseAgentDriver", "ListedModel",
    "Observability", "ProxyHandle", "ProxyStatus", "ToolCallOutcome", "ToolCallProbe", "calls_off_wire_problems",
    "off_wire_reason",
]

EVERY_FORMAT = "*"
"""The :attr:`AgentDriver.calls_off_wire` key that stands for every format."""


# ------------------------------------------------------------------------------------------ agents

@runtime_checkable
class AgentDriver(Protocol):
    """Everything the runner needs to drive one agent (see the module docstring for the order)."""

    name: str
    """What a cli_agents spec puts in ``plugin:``."""
    description: str
    observability: Observability
    """What its outputs can show: structured tool events (tier B), only text markers (tier C), nothing."""
    install_hint: str
    calls_off_wire: Mapping[str, str]
    """Formats in which the agent runs tool calls the wire does not carry as structured calls (edits it
    parses from the reply text, tool blocks written in it), each with the reason, ``{format: reason}``;
    :data:`EVERY_FORMAT` (``"*"``) for every format. A reason must be a non-empty string: registration and
    the plugin kit's ``DriverContract`` refuse a blank one.

    Empty (the default) is the safe choice for an agent that runs only the model's structured calls: in
    every format, when the recording proxy watched the phase, a call the agent's own output (tier B/C)
    reports confirms tool use only when the model asked for it on the wire, so an agent cannot print its way
    to PASS (docs/evaluator.md, "Claims the wire contradicts"). In a format listed here the agent's log
    stands as its word (marked with its tier), because the wire cannot witness those calls."""
    tool_names: ToolNames
    """Its tool names → ``(normalized name, kind)`` (the generic vocabulary plus the agent's own)."""

    def install_recipe(self, agent: CliAgentSpec) -> InstallRecipe | None:
        """How to install the agent at its pinned version; None when it needs no install."""
        ...

    def environment(self, ctx: PhaseContext) -> Mapping[str, str]:
        """Environment variables beyond the allowlist; write the agent's config files under ``ctx.home``
        (or its XDG dirs) here. HOME, XDG_* and TMPDIR are already fresh and set by the runner."""
        ...

    def command(self, ctx: PhaseContext) -> AgentCommand:
        """The command that runs the agent for this phase. ``argv[0]`` may be a bare name (looked up next
        to the running Python, then on PATH); without ``stdin`` the agent's stdin is /dev/null."""
        ...

    def route(self, agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision:
        """Can this agent be pointed at an arbitrary base URL (the recording proxy's)?"""
        ...

    def artifacts(self, ctx: PhaseContext) -> Mapping[str, Path | bytes]:
        """Files the agent left outside stdout/stderr that parsing needs, by name (called after it exited);
        the harness keeps each as ``<phase>.<name>`` in the case's artifacts.

        A path is kept only when it lies in the phase's workspace, HOME (XDG folders included) or TMPDIR
        and is a regular file reached from there with no symlink in any component; anything else is
        refused and listed (``<phase>.context.json`` → ``kept_refused``, a ``kept_file_refused`` warning),
        never followed. ``bytes`` are kept as they are: a copy the driver derived itself (read with
        :func:`gripprobe_core.plugin.read_agent_file`, e.g. a log with the API key redacted). Never write
        into the agent's folders here (find with :func:`~gripprobe_core.plugin.find_agent_files`)."""
        ...

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        """The agent's events (``source_tier`` B, or C for text-only agents; never A, the recording proxy's
        alone: a tier-A event makes the case HARNESS_ERROR / wrapper_parse_error) and its final answer.

        Raise :class:`gripprobe_core.errors.WrapperParseError` when a required artifact is unreadable
        (the case becomes HARNESS_ERROR / wrapper_parse_error); never raise anything else on bad bytes."""
        ...

    def markers(self, agent: CliAgentSpec) -> Sequence[MarkerPattern]:
        """Tier-C text markers the generic marker parser applies to the agent's stdout/stderr."""
        ...

    def oracle_dialects(self) -> Mapping[str, "Dialect"]:
        """How the oracle backend says actions in this agent's own terms, by dialect name."""
        ...


class BaseAgentDriver:
    """Defaults for every :class:`AgentDriver` member but :meth:`command`: subclass it and override what
    your agent needs. Class attributes may be set directly::

        class MyDriver(BaseAgentDriver):
            name = "myagent"
            description = "My agent (npm my-agent)"

            def command(self, ctx):
                return AgentCommand([ctx.executable("my-agent"), "--prompt", ctx.prompt])
    """

    name: str = ""
    description: str = ""
    observability: Observability = "structured"
    install_hint: str = ""
    calls_off_wire: Mapping[str, str] = MappingProxyType({})
    """Empty: in every format, every call the agent reports must be one the wire carried (see
    :attr:`AgentDriver.calls_off_wire`)."""
    tool_names: ToolNames = GENERIC
    install: InstallRecipe | None = None
    """The agent's pinned install (``InstallRecipe("npm", "my-agent", "1.2.3", "my-agent")``); a cli_agents
    spec's ``version`` overrides the version. None: the agent needs no install."""

    def install_recipe(self, agent: CliAgentSpec) -> InstallRecipe | None:
        if self.install is None:
            return None
        return replace(self.install, version=agent.version or self.install.version)

    def environment(self, ctx: PhaseContext) -> Mapping[str, str]:
        return {}

    def command(self, ctx: PhaseContext) -> AgentCommand:
        raise NotImplementedError(f"{type(self).__name__} must say how to start its agent (command)")

    def route(self, agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision:
        return RouteDecision(True)

    def model_aliases(self, ctx: PhaseContext) -> Sequence[str]:
        """Optional (the runner reads it with ``getattr``; a driver without it declares none). Model names,
        besides ``ctx.model_name`` and the backend's ``model_id``, that the agent sends on the wire for side
        requests configured to the *same* model (a title or summary model under its own name). The
        recording proxy serves only the case's model: a model call naming anything else is refused
        (403 ``model_not_under_test``) and the case is FAIL / ``model_not_under_test``. An agent that
        sends the bare model name when given ``<provider>/<m>`` needs no alias: ``<m>`` is the model_id."""
        return ()

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """Optional (read with ``getattr``): how this driver meets ``ctx.interaction``, the case's policy,
        asked once per phase before :meth:`environment` and :meth:`command` (which apply it). The default:
        no policy or ``auto-approve`` is applied natively (every driver runs its agent with approvals off);
        any other is not applied (the run warns, case.json records it, the evaluator does not pass a case
        that depends on it). A driver that answers requests itself (a session) or sets the agent's own
        approval settings says so here (docs/interaction.md)."""
        spec = ctx.interaction
        if spec is None or spec.policy == "auto-approve":
            return InteractionSupport("native", True)
        return InteractionSupport("none", False, f"the {self.name} driver cannot apply interaction policies "
                                                 f"(its agent runs with approvals off)")

    def artifacts(self, ctx: PhaseContext) -> Mapping[str, Path | bytes]:
        return {}

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        return Transcript()

    def markers(self, agent: CliAgentSpec) -> Sequence[MarkerPattern]:
        return ()

    def oracle_dialects(self) -> Mapping[str, "Dialect"]:
        return {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def off_wire_reason(driver: AgentDriver, fmt: str) -> str | None:
    """Why the agent's own log may confirm calls the wire never carried in format ``fmt`` (its driver's
    :attr:`~AgentDriver.calls_off_wire` entry for ``fmt``, else for :data:`EVERY_FORMAT`); None when the wire
    must witness every call (the default, and the answer for a table that is not a valid one)."""
    table = getattr(driver, "calls_off_wire", None)
    if not isinstance(table, Mapping) or calls_off_wire_problems(driver):
        return None
    reason = table.get(fmt) or table.get(EVERY_FORMAT)
    return reason.strip() if isinstance(reason, str) and reason.strip() else None


def calls_off_wire_problems(driver: Any) -> list[str]:
    """What is wrong with a driver's :attr:`~AgentDriver.calls_off_wire` (empty when nothing): it must be a
    mapping of format names (or ``"*"``) to the reason, a non-empty string, why the agent's own log must
    confirm calls there. Checked when a plugin registers the driver and by ``DriverContract``."""
    table: Any = getattr(driver, "calls_off_wire", MappingProxyType({}))
    if not isinstance(table, Mapping):
        return [f"calls_off_wire must be a mapping {{format: reason}}, not {type(table).__name__}"]
    problems = []
    for fmt, reason in table.items():
        if not isinstance(fmt, str) or not fmt.strip() or fmt != fmt.strip():
            problems.append(f"calls_off_wire key {fmt!r} is not a format name (or {EVERY_FORMAT!r} for every format)")
        elif not isinstance(reason, str) or not reason.strip():
            problems.append(f"calls_off_wire[{fmt!r}] gives no reason ({reason!r}): say in a sentence why the "
                            f"agent runs calls the wire does not carry there, or drop the entry")
    return problems


# ---------------------------------------------------------------------------------------- backends

@dataclass(frozen=True)
class BackendPhase:
    """What a backend is opened for: one phase of one case."""

    spec: BackendSpec
    url: str | None
    """Where to reach it: ``--base-url`` when given, else the spec's ``base_url`` (None for the oracle)."""
    phase: str
    format: str
    reference: Sequence[ReferenceAction] = ()
    """The test's reference solution as rendered for this phase (what the oracle performs)."""
    dialects: Mapping[str, "Dialect"] = field(default_factory=dict)
    """Every registered oracle dialect (the oracle picks the one that speaks to the agent's requests)."""
    record_path: Path | None = None
    """Where a backend that records what it was asked and answered (the oracle's ground truth) writes it."""
    trial: int = 1
    """Which trial of its cell the phase belongs to (``--trials N``); the oracle's ``flaky`` profile reads it."""


class BackendEndpoint(Protocol):
    """An opened backend: where the agent (or its proxy) reaches it for one phase."""

    @property
    def base_url(self) -> str:
        """The server root (without ``/v1``)."""
        ...

    async def close(self) -> None:
        """Stop what :meth:`Backend.open` started (nothing for a remote server). Never raises."""
        ...


@dataclass(frozen=True)
class ListedModel:
    """One model a backend serves."""

    name: str
    digest: str | None = None
    """Content hash of its weights (``sha256:…``) when the backend says it; None otherwise."""


ToolCallOutcome = Literal["structured", "malformed", "text", "error"]


@dataclass(frozen=True)
class ToolCallProbe:
    """What a model did when asked, in one real request offering one tool, to call it
    (``gripprobe doctor --model``; the request is :mod:`gripprobe_core.backends.toolprobe`'s).

    ``outcome``: ``structured`` (the answer carries a structured call of the offered tool with valid
    arguments), ``malformed`` (a structured call, but of another tool or with arguments that are not a
    JSON object holding the required parameter), ``text`` (no structured call: the model answered in
    text, possibly writing the call as text, which the server's tool-call parser did not recognize),
    ``error`` (no answer: HTTP error, timeout, connection failure, a body that is not the protocol's)."""

    outcome: ToolCallOutcome
    endpoint: str
    """``POST <url>`` of the request (credentials removed)."""
    http_status: int | None = None
    tool_name: str | None = None
    arguments: Any = None
    """The call's arguments: parsed when they are JSON, else the raw string."""
    text: str | None = None
    """The start of the answer's text (at most 300 characters), when it has text."""
    text_tool_calls: tuple[str, ...] = ()
    """Names of the tool calls the model wrote as text (``<tool_call>{…}</tool_call>`` …)."""
    text_tool_syntaxes: tuple[str, ...] = ()
    """How it wrote them (``tool_call_tag``, ``function_tag``, ``invoke``, ``tool_use``: a chat template's own
    formats, which a server's tool-call parser reads; ``json_fence``, ``json``, ``gptme_at``: formats no
    template asks for)."""
    server_tool_template: bool | None = None
    """llama-server's ``GET /props``: whether its chat template supports tool calls (``chat_template_caps``);
    None when the server does not say."""
    error: str | None = None
    """Why the outcome is not ``structured``, in one clause (the server's error message for ``error``)."""
    latency_ms: float = 0.0
    served_by: str | None = None
    """The ``model`` the answer names, when it names one."""

    @property
    def ok(self) -> bool:
        return self.outcome == "structured"

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["text_tool_calls"] = list(self.text_tool_calls)
        out["text_tool_syntaxes"] = list(self.text_tool_syntaxes)
        out["ok"] = self.ok
        return out


@runtime_checkable
class Backend(Protocol):
    """A kind of model backend (``kind:`` in a model spec's backends): how to reach or start it, check it,
    list its models and learn a model's hash, and (``gripprobe doctor --model``) whether a model gives
    structured tool calls through it."""

    kind: str
    description: str
    remote: bool
    """A server outside GripProbe: checked before a run trusts it (preflight) and after each phase."""

    async def open(self, phase: BackendPhase) -> BackendEndpoint:
        """Start (the oracle) or connect to the backend for one phase."""
        ...

    async def probe(self, url: str, *, api_key: str | None, backend_id: str,
                    timeout_s: float) -> BackendProbe:
        """Is it there? One listing request; never raises for what the server does."""
        ...

    async def list_models(self, url: str, *, api_key: str | None, timeout_s: float) -> list[ListedModel]:
        """The models it serves. Raises ``LookupError`` (with the reason) when it cannot say."""
        ...

    async def probe_tool_call(self, url: str, *, model_id: str, api_key: str | None,
                              timeout_s: float) -> ToolCallProbe:
        """Ask ``model_id`` for one tool call in one real request on the backend's own protocol (the
        request of :mod:`gripprobe_core.backends.toolprobe`) and say whether a *structured* call came
        back. Never raises for what the server does (``outcome="error"`` says it)."""
        ...


# ------------------------------------------------------------------------------------------- proxy

ProxyStatus = Mapping[str, Any]
"""``{"error": str | None, "reason": str | None, "exchanges": int, "recorder_error": str | None,
"token_budget_exceeded": bool, "tokens_spent": int}``: ``error`` is set when an exchange failed because of the
upstream (connect, reset, malformed, timeout), with ``reason`` its proxy_error; ``recorder_error`` when
exchanges were recorded as metadata only; ``token_budget_exceeded`` when a model call was refused for the budget."""


ProxyActivity = Mapping[str, Any]
"""What a proxy has open right now (the optional ``ProxyHandle.activity()``): ``{"open": int, "open_s": float |
None, "output_s": float | None}``: calls being relayed, seconds since the oldest of them started, seconds since
response bytes of an open call were last relayed (None: none open / no output yet)."""


class ProxyHandle(Protocol):
    """A phase-scoped recording proxy (answer of ``start_proxy``), not yet started.

    Optional, not a member (a handle without it is still one): ``activity() -> ProxyActivity | None``, what
    the proxy has open right now, asked from the progress display's thread at most once a second while the
    phase runs; it must not block (a few numbers the relay keeps). Without it a running case's line shows
    only the calls whose records are written (a call's record comes when it ends)."""

    record_path: Path
    """Where it writes one JSON line per HTTP exchange (SPEC §5 record keys)."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the server root the agent talks to (valid once started)."""
        ...

    async def start(self) -> None:
        """Bind and start relaying. Raises ``OSError`` when it cannot bind (proxy_bind_error)."""
        ...

    async def stop(self) -> None:
        """Stop relaying; returns once every record is in :attr:`record_path`. Never hangs."""
        ...

    def status(self) -> ProxyStatus:
        """What went wrong, if anything (valid after :meth:`stop`)."""
        ...

    def token_budget_exceeded(self) -> bool:
        """Did the proxy refuse a model call because the phase spent its token budget? (The runner asks
        while the agent runs, and stops it.) A proxy without budgets answers False."""
        ...

"""Objects the runner hands to hooks. Public: plugin authors read them, never build them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal, Protocol

from .models.events import Event
from .models.results import ProcessResult, ValidatorResult
from .models.specs import BackendSpec, CliAgentSpec, ModelSpec, TestSpec


@dataclass
class PhaseContext:
    """Everything about one phase of one case, as the runner prepared it."""

    run_id: str
    case_id: str
    phase: Literal["warmup", "measured"]
    agent: CliAgentSpec
    model: ModelSpec
    backend: BackendSpec
    test: TestSpec
    format: str
    prompt: str
    workspace: Path
    home: Path
    tmpdir: Path
    artifacts_dir: Path
    base_url: str
    """Server root the agent must talk to (the proxy's when one runs), without ``/v1``."""
    model_name: str
    """Model name to hand to the agent (the backend's agent_model_id, else model_id)."""
    api_key: str | None = None
    """The backend's API key, for the agent's environment only. Never write it to an artifact."""
    timeout_s: float = 120.0
    run_context: dict[str, Any] = field(default_factory=dict)
    marker_patterns: list[MarkerPattern] = field(default_factory=list)
    """Tier C :class:`MarkerPattern` objects for this agent, collected by the runner from every
    plugin's ``tier_c_patterns`` hook before parsing; the generic tier C parser applies them."""
    agent_executable: Path | None = None
    """The installed agent's command (from ``agent_install_recipe``), None when the agent needs no install."""

    @property
    def openai_base_url(self) -> str:
        """The OpenAI-compatible base URL (``<base_url>/v1``)."""
        return self.base_url.rstrip("/") + "/v1"

    @property
    def xdg(self) -> dict[str, str]:
        """Fresh XDG_* directories under this phase's HOME."""
        return {
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
        }


@dataclass
class AgentCommand:
    """How to start the agent: argv (argv[0] is resolved by the runner), optional stdin bytes."""

    argv: list[str]
    stdin: bytes | None = None
    cwd: Path | None = None
    """Working directory; the phase workspace when None."""
    read_only: list[Path] = field(default_factory=list)
    """Paths the command needs read-only besides the system, the Python runtime and the agent's cached
    install, e.g. a directory of scripts shipped in the plugin's package. Under the sandbox nothing else
    outside the phase's workspace, HOME and TMPDIR exists (docs/sandbox.md); files named by absolute
    path on the command line are bound automatically."""


@dataclass
class PhaseCapture:
    """What one phase left behind, for the parsers."""

    stdout_path: Path
    stderr_path: Path
    process: ProcessResult
    extra: dict[str, Path] = field(default_factory=dict)
    """Other artifacts the agent plugin asked the runner to keep (session files ...), by name."""
    final_text: str | None = None
    """The agent's final answer text (from the ``final_output_text`` hook, filled by the runner);
    the tier D self-report parser reads it. None when no plugin could say."""


@dataclass(frozen=True)
class AgentInfo:
    """What an agent plugin registers about its agent."""

    name: str
    description: str = ""
    observability: Literal["structured", "markers", "none"] = "structured"
    """What its outputs can show: structured tool events (tier B), only text markers (tier C), nothing."""
    install_hint: str = ""
    wire_formats: tuple[str, ...] = ()
    """Formats in which every tool call the agent runs is one the model asked for as a structured call
    on the wire. In them, when the proxy collected the phase's traffic, a call the agent reports that the
    wire never carried confirms nothing (the agent cannot talk its way to PASS; docs/evaluator.md)."""


@dataclass
class ValidatorContext:
    """What a validator may look at. Validators read; they never change the workspace."""

    workspace: Path
    test: TestSpec
    run_context: dict[str, Any]
    """Values fixed at run time: ``today`` (YYYY-MM-DD), ``next_week_heading`` ... (recorded in case.json)."""
    challenge: dict[str, Any]
    """The measured phase's challenge facts (nonce, payload, token, ...), empty without a challenge."""
    challenge_requests: list[dict[str, Any]]
    """The measured phase's challenge request log."""
    events: list[Event]
    """The measured phase's normalized events, in sequence order."""
    agent_workspace: str | None = None
    """The measured workspace path as the agent saw it, when ``workspace`` is elsewhere (a rebuild
    judging the stored copy). None means ``workspace`` itself; ``workspace_path`` checks use this."""
    sandbox: Any = None
    """The run's sandbox (``runner.sandbox.Sandbox``): a validator that runs a command on the agent's
    work (``command_output``) runs it confined like the agent. None: unconfined."""


Validator = Callable[[ValidatorContext, dict[str, Any]], ValidatorResult]


class ChallengeServer(Protocol):
    """A per-phase challenge server (see :func:`hookspecs.register_challenge_servers`)."""

    url: str
    facts: dict[str, Any]
    requests: list[dict[str, Any]]

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


ChallengeFactory = Callable[[dict[str, Any], str], ChallengeServer]
"""``factory(options, phase) -> ChallengeServer`` (not started)."""


@dataclass
class RouteDecision:
    """Answer of :func:`hookspecs.route_base_url`."""

    routable: bool
    reason: str | None = None
    """Why not, when not routable (becomes telemetry_proxy_skip_reason, e.g. ``unsupported_shell``)."""


@dataclass
class EvaluationInputs:
    """Everything the evaluator reads."""

    validators: list[ValidatorResult]
    process: ProcessResult
    events: list[Event]
    summary: Any  # TelemetrySummary
    required_kinds: list[Any] = field(default_factory=list)
    rules: dict[str, Any] = field(default_factory=dict)
    tool_unsupported: str | None = None
    """Set when the case cannot run: 'agent_tool_unsupported' (capabilities) or 'backend_tool_unsupported'."""
    backend_unreachable: bool = False
    """The harness itself found the model backend unreachable at the end of the measured phase (its probe
    right after the phase, or the recording proxy's last attempt to reach it). Never set from what the
    agent says: the agent's failure is then the backend's, HARNESS_ERROR ``backend_unreachable``."""


AsyncStop = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class InstallRecipe:
    """How to install an agent at a pinned version (answer of ``agent_install_recipe``)."""

    kind: Literal["pypi", "npm"]
    package: str
    """Package name on PyPI or npm."""
    version: str
    """Exact version to install; also part of the cache directory name."""
    executable: str
    """Name of the installed command (``aider``, ``codex``, ``cn`` ...)."""
    extra: tuple[str, ...] = ()
    """Further exact requirements installed alongside (``name==1.2`` for pip, ``name@1.2`` for npm)."""
    version_args: tuple[str, ...] = ("--version",)
    """Arguments that make the executable print its version."""


@dataclass(frozen=True)
class MarkerPattern:
    """A tier C marker: a regular expression matched line by line against an agent's stdout/stderr.

    Named groups the generic tier C parser understands: ``tool`` (raw tool name), ``args`` (argument
    text), ``id`` (tool call id), ``path`` (a file the call touched), ``code`` (an exit code; 0 → success).
    """

    name: str
    regex: str
    event_type: Literal["tool_call_start", "tool_call_result"] = "tool_call_result"
    stream: Literal["stdout", "stderr", "both"] = "both"
    tool: str | None = None
    """Raw tool name when the regex has no ``tool`` group."""
    kind: Literal["read", "write", "execute", "search", "fetch", "other"] | None = None
    status: Literal["started", "success", "error", "timeout", "unknown"] = "success"

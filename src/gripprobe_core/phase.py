"""What one agent phase is made of, as a driver sees it: the context it runs in, the command that starts
the agent, what the phase left behind, and what the driver reads from it.

The runner builds these; drivers and hook implementations read them and never change them (they are
frozen). Public: plugin authors import them from :mod:`gripprobe_core.plugin`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, runtime_checkable

from .models.events import Event
from .models.results import ProcessResult
from .models.specs import BackendSpec, CliAgentSpec, InteractionSpec, ModelSpec, TestSpec

if TYPE_CHECKING:  # pragma: no cover
    from .interaction import Responder

Phase = Literal["warmup", "measured"]

#: Where a sandboxed phase's folder (its workspace, HOME and TMPDIR) appears to the agent: one path for every
#: phase, trial and case, so the agent's prompts, which name its working directory, are the same from one run to
#: the next and a model server's prompt cache serves the warmup's prefix to the measured phase.
SEEN_ROOT = Path("/tmp/gripprobe-case")


@dataclass(frozen=True)
class PhaseContext:
    """Everything about one phase of one case, as the runner prepared it."""

    run_id: str
    case_id: str
    phase: Phase
    agent: CliAgentSpec
    model: ModelSpec
    backend: BackendSpec
    test: TestSpec
    """The test as the agent is given it (prompt, fixtures and reference rendered for this phase)."""
    format: str
    prompt: str
    workspace: Path
    home: Path
    tmpdir: Path
    artifacts_dir: Path
    base_url: str
    """Server root the agent must talk to (the recording proxy's when one runs), without ``/v1``."""
    model_name: str
    """Model name to hand to the agent (the backend's agent_model_id, else model_id)."""
    api_key: str | None = None
    """The backend's API key, for the agent's environment only. Never write it to an artifact."""
    timeout_s: float = 120.0
    run_values: Mapping[str, Any] = field(default_factory=dict)
    """Values the run fixed at its start (``today`` ...; see :mod:`gripprobe_core.runvalues`)."""
    agent_executable: Path | None = None
    """The installed agent's command (from the driver's install recipe), None when it needs no install."""
    interaction: InteractionSpec | None = None
    """How the harness answers the agent's requests (the test's ``observe.interaction``, else its suite's);
    None: no policy asked, the agent runs with its approvals off as always (docs/interaction.md)."""
    seen_at: Path | None = None
    """Where the agent sees the phase's folder (the parent of ``workspace``, ``home`` and ``tmpdir``): the
    sandbox shows it at :data:`SEEN_ROOT` for every phase and trial (besides at its own path, so config files
    naming the real path still work); None without a sandbox, where the agent sees the real paths."""

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

    def seen(self, path: Path | str) -> Path:
        """``path`` as the agent sees it: under the phase's folder, moved to ``seen_at``; anything else as it is."""
        path = Path(path)
        if self.seen_at is None:
            return path
        try:
            return self.seen_at / path.relative_to(self.workspace.parent)
        except ValueError:
            return path

    def executable(self, default: str) -> str:
        """The command that starts the agent: its installed executable, else ``default`` (the spec's)."""
        return str(self.agent_executable) if self.agent_executable is not None else default


@dataclass(frozen=True)
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
    session: "AgentSession | None" = None
    """When set, the harness talks to the agent over its stdin and stdout while it runs (ACP, a control
    protocol): ``stdin`` must be None; the runner awaits ``session.run(channel)`` (see :class:`SessionChannel`)."""

    def __post_init__(self) -> None:
        if self.session is not None and self.stdin is not None:
            raise ValueError("an AgentCommand with a session talks over stdin: give stdin=None")


class SessionError(Exception):
    """Raised by a session when the conversation with the agent broke: it spoke no protocol, or left in the
    middle (process status ``shell_error`` with this message); or, with ``agent_failed=True``, the agent
    said it failed at the task (its answer to the prompt was an error, as an exit code would say:
    ``nonzero_exit``)."""

    def __init__(self, message: str, *, agent_failed: bool = False) -> None:
        super().__init__(message)
        self.agent_failed = agent_failed


@dataclass(frozen=True)
class SessionChannel:
    """What a session gets: the agent's stdout (``reader``; every byte is also copied to ``<phase>.stdout``,
    and past the capture cap it reads EOF) and stdin (``writer``), the case's :class:`Responder` (its
    interaction policy; auto-approve when the case has none), and ``transcript``, a file the session writes
    its own record to (JSON lines, never a secret), kept as ``artifacts/<phase>.conversation.jsonl`` and
    handed to ``parse`` as ``capture.files[SESSION_TRANSCRIPT]`` (``"conversation.jsonl"``).

    When :meth:`AgentSession.run` returns, the runner closes stdin, gives the agent
    :data:`SESSION_EXIT_GRACE_S` to exit, then stops its process tree; the phase's process status is ``ok``."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    responder: "Responder"
    transcript: Path
    ctx: PhaseContext


SESSION_EXIT_GRACE_S = 2.0
"""After a session ends, how long the agent has to exit on its own before the runner stops it."""
SESSION_TRANSCRIPT = "conversation.jsonl"
"""The name under which a session's transcript reaches ``parse`` (``capture.files[SESSION_TRANSCRIPT]``)."""


@runtime_checkable
class AgentSession(Protocol):
    """A conversation the harness holds with the agent over its stdin/stdout while it runs."""

    async def run(self, channel: SessionChannel) -> None:
        """Talk to the agent until the task is done (then return), answering its requests with
        ``channel.responder``; raise :class:`SessionError` when the agent broke the protocol."""
        ...


@dataclass(frozen=True)
class PhaseCapture:
    """What one phase left behind, for the parsers: its output files, its process result, and the files
    the driver asked the harness to keep (copies in the case's artifacts, never the agent's originals)."""

    stdout_path: Path
    stderr_path: Path
    process: ProcessResult
    files: Mapping[str, Path] = field(default_factory=dict)
    """The kept files (session logs, rollouts ...), by the name the driver gave them."""


@dataclass(frozen=True)
class Transcript:
    """What a driver read from its agent's outputs: normalized events (tier B, or C for text-only
    agents) and the agent's final answer text (the tier D self-report parser reads it; None when the
    agent gave none)."""

    events: list[Event] = field(default_factory=list)
    final_text: str | None = None


@dataclass(frozen=True)
class RouteDecision:
    """Can an agent be pointed at an arbitrary base URL (the recording proxy's)?"""

    routable: bool
    reason: str | None = None
    """Why not, when not routable (becomes telemetry_proxy_skip_reason, e.g. ``unsupported_shell``)."""


@dataclass(frozen=True)
class InstallRecipe:
    """How to install an agent at a pinned version (``gripprobe agents install``)."""

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
    npm_args: tuple[str, ...] = ()
    """Further arguments to ``npm install`` (``--omit=optional`` to leave out a bundled native binary the
    agent does not need); npm only."""


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

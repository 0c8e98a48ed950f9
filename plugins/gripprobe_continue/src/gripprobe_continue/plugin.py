"""Continue CLI's driver (``plugin: continue``; npm ``@continuedev/cli``, command ``cn``).

One phase runs ``cn -p --auto --verbose --config <home>/.continue/config.yaml -- "<prompt>"`` in the
workspace with stdin closed. ``--auto`` is what makes ``cn`` offer Write/Edit in headless mode;
``--verbose`` makes its log time every stream and tool call. Tier B comes from the session file,
timed by the (redacted) log; see :mod:`.parse` and :mod:`.config`. A case's interaction policy that denies
a tool replaces ``--auto`` by cn's own ``--exclude``/``--allow`` flags (:mod:`.interaction`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, Event, InstallRecipe, InteractionSpec, InteractionSupport, PhaseCapture,
    PhaseContext, Transcript, WrapperParseError, find_agent_files, hookimpl, read_agent_file,
)

from . import config
from .names import TOOL_NAMES

if TYPE_CHECKING:
    from .interaction import Permissions

NAME = "continue"
PACKAGE = "@continuedev/cli"
VERSION = "1.5.47"
EXECUTABLE = "cn"
SESSION_ARTIFACT = "session.json"
#: Kept as a redacted copy (the original holds the API key), made by the driver, never written into HOME.
LOG_ARTIFACT = "cn.log"
#: At most this much of the log is kept (verbose logs every streamed chunk).
LOG_COPY_LIMIT = 8 * 1024 * 1024


class ContinueDriver(BaseAgentDriver):
    """``cn`` headless: config and environment under the phase's HOME, its session file and redacted log
    kept, tier B read from them (routable to the proxy, no markers, the generic oracle dialect)."""

    name = NAME
    description = "Continue CLI (cn) headless with --auto: tool calls from its session file, timed by its log"
    install_hint = f"gripprobe agents install continue  (npm {PACKAGE}@{VERSION})"
    install = InstallRecipe(kind="npm", package=PACKAGE, version=VERSION, executable=EXECUTABLE)
    tool_names = TOOL_NAMES

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        config.write_config(ctx.home, model_name=ctx.model_name, api_base=ctx.openai_base_url, api_key=ctx.api_key)
        return config.agent_env(ctx.home, api_base=ctx.openai_base_url)

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """The case's policy as cn's ``--exclude``/``--allow`` flags (:func:`.interaction.permissions`)."""
        return permissions(ctx.interaction).support

    def command(self, ctx: PhaseContext) -> AgentCommand:
        flags = permissions(ctx.interaction).flags
        return AgentCommand([ctx.executable(ctx.agent.executable), *ctx.agent.default_args, "-p", *flags,
                             "--verbose", "--config", str(config.config_path(ctx.home)), "--", ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path | bytes]:
        """The newest session file (a path: the harness copies it, never through a link) and the log,
        redacted here and kept as bytes: nothing is written into the agent's HOME."""
        found: dict[str, Path | bytes] = {}
        session = newest_session(ctx)
        if session is not None:
            found[SESSION_ARTIFACT] = session
        redacted = redacted_log(ctx)
        if redacted is not None:
            found[LOG_ARTIFACT] = redacted
        return found

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        """Events from the session file (timed by the log) and from stderr's error lines; the final text is
        the session's last assistant message, else stdout.

        A missing or broken session is a :class:`WrapperParseError` only after a clean exit: after a
        failure or a timeout it is normal (cn leaves no session on a backend error)."""
        from .parse import final_text, load_session, parse_log, session_events, stderr_events

        session_path = capture.files.get(SESSION_ARTIFACT)
        clean_exit = capture.process.status == "ok" and capture.process.exit_code == 0
        events: list[Event] = []
        session = None
        if session_path is not None:
            try:
                data = session_path.read_bytes()
            except OSError as exc:
                raise WrapperParseError(f"cannot read the continue session file {session_path}: {exc}") from exc
            session = load_session(data)
            if session is None and clean_exit:
                raise WrapperParseError(f"{session_path.name} is not a continue session (no history list)")
            if session is not None:
                timeline = parse_log(_read(capture.files.get(LOG_ARTIFACT)), anchor=capture.process.started_at)
                events = session_events(session, phase=ctx.phase, file_name=session_path.name,
                                        file_text=data.decode("utf-8", "replace"), timeline=timeline,
                                        excluded=permissions(ctx.interaction).denied)
        elif clean_exit:
            raise WrapperParseError("cn exited 0 but left no session file under $CONTINUE_GLOBAL_DIR/sessions")
        events += stderr_events(_read(capture.stderr_path), phase=ctx.phase, file_name=capture.stderr_path.name,
                                first_sequence=len(events) + 1)
        answer = final_text(session)
        if answer is None:
            answer = _read(capture.stdout_path).decode("utf-8", "replace").strip() or None
        return Transcript(events, answer)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ContinueDriver())


# ---------------------------------------------------------------------------------------- helpers


def permissions(spec: InteractionSpec | None) -> "Permissions":
    """:func:`.interaction.permissions` (the module, and the parser it reads refusals with, load with a phase)."""
    from .interaction import permissions as of

    return of(spec)


def newest_session(ctx: PhaseContext) -> Path | None:
    """The most recently written ``<uuid>.json`` under ``$CONTINUE_GLOBAL_DIR/sessions`` (not the
    ``sessions.json`` index); a symlink or a FIFO is never a candidate."""
    candidates = []
    for p in find_agent_files(ctx, config.sessions_dir(ctx.home), "*.json"):
        if p.name == "sessions.json":
            continue
        try:
            candidates.append((os.lstat(p).st_mtime_ns, p.name, p))
        except OSError:
            continue
    return max(candidates)[2] if candidates else None


def redacted_log(ctx: PhaseContext) -> bytes | None:
    """``cn.log``'s first :data:`LOG_COPY_LIMIT` bytes (cut at a line end) with the API key redacted, or
    None when there is no log that can be reached safely (a FIFO, a link anywhere on its path, missing).

    The verbose log prints the model config, key included, so the original never leaves HOME; the
    redacted copy is returned, not written: nothing is ever written into the agent's folders after it ran."""
    from .parse import redact_text

    data = read_agent_file(ctx, config.log_path(ctx.home), LOG_COPY_LIMIT)
    if data is None:
        return None
    cut = data.rfind(b"\n") + 1 if len(data) == LOG_COPY_LIMIT else len(data)
    return redact_text(data[:cut].decode("utf-8", "replace"), (ctx.api_key,) if ctx.api_key else ()).encode("utf-8")


def _read(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError:
        return b""

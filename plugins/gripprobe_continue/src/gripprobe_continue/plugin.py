"""Continue CLI's driver (``plugin: continue``; npm ``@continuedev/cli``, command ``cn``).

One phase runs ``cn -p --auto --verbose --config <home>/.continue/config.yaml -- "<prompt>"`` in the
workspace with stdin closed. ``--auto`` is what makes ``cn`` offer Write/Edit in headless mode;
``--verbose`` makes its log time every stream and tool call. Tier B comes from the session file,
timed by the (redacted) log; see :mod:`.parse` and :mod:`.config`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from gripprobe_core.plugin import (
    AgentCommand, AgentDriver, BaseAgentDriver, Event, InstallRecipe, PhaseCapture, PhaseContext,
    Transcript, WrapperParseError, hookimpl,
)

from . import config
from .parse import TOOL_NAMES, final_text, load_session, parse_log, redact_text, session_events, stderr_events

NAME = "continue"
PACKAGE = "@continuedev/cli"
VERSION = "1.5.47"
EXECUTABLE = "cn"
SESSION_ARTIFACT = "session.json"
LOG_ARTIFACT = "cn.log"
#: The redacted log copy written next to cn.log after the run (the original holds the API key).
REDACTED_LOG_NAME = "cn.redacted.log"
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

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand([ctx.executable(ctx.agent.executable), *ctx.agent.default_args, "-p", "--auto",
                             "--verbose", "--config", str(config.config_path(ctx.home)), "--", ctx.prompt])

    def artifacts(self, ctx: PhaseContext) -> dict[str, Path]:
        found: dict[str, Path] = {}
        session = newest_session(config.sessions_dir(ctx.home))
        if session is not None:
            found[SESSION_ARTIFACT] = session
        redacted = write_redacted_log(config.log_path(ctx.home), ctx.api_key)
        if redacted is not None:
            found[LOG_ARTIFACT] = redacted
        return found

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        """Events from the session file (timed by the log) and from stderr's error lines; the final text is
        the session's last assistant message, else stdout.

        A missing or broken session is a :class:`WrapperParseError` only after a clean exit: after a
        failure or a timeout it is normal (cn leaves no session on a backend error)."""
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
                                        file_text=data.decode("utf-8", "replace"), timeline=timeline)
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


def newest_session(sessions: Path) -> Path | None:
    """The most recently written ``<uuid>.json`` in ``sessions`` (not the ``sessions.json`` index)."""
    try:
        candidates = [p for p in sessions.glob("*.json") if p.name != "sessions.json" and p.is_file()]
    except OSError:
        return None
    if not candidates:
        return None
    return max(candidates, key=lambda p: (p.stat().st_mtime_ns, p.name))


def write_redacted_log(log: Path, api_key: str | None) -> Path | None:
    """Write a redacted copy of ``cn.log`` beside it (first :data:`LOG_COPY_LIMIT` bytes); its path or None.

    The verbose log prints the model config, key included, so the original never leaves HOME.
    """
    try:  # the agent wrote it: a regular file only, never a FIFO (it would block) or a symlink out of HOME
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(LOG_COPY_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    cut = data.rfind(b"\n") + 1 if len(data) == LOG_COPY_LIMIT else len(data)
    text = redact_text(data[:cut].decode("utf-8", "replace"), (api_key,) if api_key else ())
    target = log.with_name(REDACTED_LOG_NAME)
    try:
        target.write_text(text, encoding="utf-8")
    except OSError:
        return None
    return target


def _read(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError:
        return b""

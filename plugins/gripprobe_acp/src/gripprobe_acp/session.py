"""The ACP session: GripProbe as the client of an ACP agent over its stdin/stdout (the core's ``AgentSession``).

:meth:`AcpSession.run` builds the SDK's ``acp.ClientSideConnection`` over the channel's streams
(``acp.connect_to_agent``; its reader reads a line of any length in pieces, so the runner's 64 MiB line limit is
the only one) and then:

1. ``initialize`` with no client capabilities: no ``fs`` (the agent reads and writes files with its own tools,
   inside the sandbox; advertised, Qwen Code and opencode hand their writes to the *client*, which would write
   outside the sandbox) and no ``terminal``; every ``fs/*`` or ``terminal/*`` request is answered with JSON-RPC
   error -32601 (opencode 1.18.33 sends ``fs/write_text_file`` regardless and then writes the file itself);
2. ``session/new`` in the workspace (the path the agent sees it at, `ctx.seen`), with no MCP servers;
3. the agent's permission mode (``session/set_mode``) and config options (``session/set_config_option``) when
   its driver names them and the agent is not in them already (a mode it does not offer is a SessionError:
   the policy would not be in force), and the session's title (``session/set_title``) when the driver gives one;
4. ``session/prompt`` with the case's prompt, and returns when its response arrives (the runner then closes
   stdin and stops the agent). A JSON-RPC error answering any of these, or the agent closing its stdout first, is a
   :class:`SessionError` (process status ``shell_error``; a prompt answered with an error is the agent failing at
   its task, ``agent_failed``: ``nonzero_exit``) — except a prompt refused because the backend takes no
   tools ("does not support tools"), which is the case's answer (the proxy records it: TOOL_UNSUPPORTED).

Meanwhile every ``session/request_permission`` is answered by the case's policy: a
:class:`~gripprobe_core.plugin.PermissionRequest` (the call's id, its name as the agent's earlier updates gave
it, its GripProbe kind, input and the options offered) goes to ``channel.responder``, and the option it picks
(by id; the policy picks by the option's kind) is sent back; no fitting option → ``cancelled``.

The transcript (``channel.transcript``, JSON lines) records every JSON-RPC message both ways as the SDK's
``observers`` hook hands it over (``{"seq", "time", "dir": "outgoing"|"incoming", "message"}``), plus the
harness's own lines (``"dir": "harness"``): each permission request and the decision (``"event":
"permission"``), and errors. The phase's API key is replaced by ``[REDACTED]`` wherever it would appear.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import IO, Any, Mapping, cast

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    AllowedOutcome, ClientCapabilities, DeniedOutcome, Implementation, RequestPermissionResponse,
)

from gripprobe_core.plugin import (
    GENERIC_TOOL_NAMES, PermissionDecision, PermissionOption, PermissionRequest, SessionChannel, SessionError,
    ToolNames, mapping, text, utc_now_iso,
)

from . import __version__
from .calls import CallTracker, explicit_name, gripprobe_kind, name_from_title

__all__ = ["AcpSession", "Recorder", "CLIENT_NAME", "REDACTED"]

CLIENT_NAME = "gripprobe"
REDACTED = "[REDACTED]"
#: Methods the client refuses (its capabilities advertise none of them).
FS_METHODS = ("fs/read_text_file", "fs/write_text_file")
SET_TITLE = "session/set_title"
#: What a backend that takes no tools answers (Ollama's HTTP 400, which the oracle imitates), as agents pass it on.
TOOLS_UNSUPPORTED = "does not support tools"
TERMINAL_METHODS = ("terminal/create", "terminal/output", "terminal/release", "terminal/wait_for_exit",
                    "terminal/kill")


# -------------------------------------------------------------------------------------------- transcript

class Recorder:
    """Writes the transcript: one JSON object per line, flushed at once, the API key never written."""

    def __init__(self, stream: IO[bytes], api_key: str | None = None) -> None:
        self.stream = stream
        self.seq = 0
        secrets = {api_key, json.dumps(api_key)[1:-1]} if api_key else set()
        self.secrets = sorted((s for s in secrets if s), key=len, reverse=True)

    def write(self, record: dict[str, Any]) -> None:
        self.seq += 1
        try:
            line = json.dumps({"seq": self.seq, "time": utc_now_iso(), **record}, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError) as exc:
            line = json.dumps({"seq": self.seq, "time": utc_now_iso(), "dir": "harness", "event": "unrecordable",
                               "error": f"{type(exc).__name__}: {exc}"})
        for secret in self.secrets:
            line = line.replace(secret, REDACTED)
        try:
            self.stream.write(line.encode("utf-8", "replace") + b"\n")
            self.stream.flush()
        except (OSError, ValueError):  # the file is gone or closed: the session goes on without its record
            pass

    def observe(self, event: StreamEvent) -> None:
        """The SDK's observer: every raw JSON-RPC message, both ways."""
        self.write({"dir": event.direction.value, "message": event.message})

    def note(self, event: str, **fields: Any) -> None:
        self.write({"dir": "harness", "event": event, **fields})


# -------------------------------------------------------------------------------------------- the client

class _Client:
    """The ``acp.Client`` GripProbe is: it answers permission requests and refuses everything else."""

    def __init__(self, session: "AcpSession", channel: SessionChannel, recorder: Recorder) -> None:
        self.session, self.channel, self.recorder = session, channel, recorder
        self.tracker = CallTracker()
        #: JSON-RPC ids of the permission requests not answered yet, per toolCallId, oldest first.
        self.waiting: dict[str, deque[tuple[Any, dict[str, Any]]]] = defaultdict(deque)

    def observe(self, event: StreamEvent) -> None:
        """Follows the raw messages (before the SDK dispatches them): the calls' state, the permission ids."""
        message = event.message
        if event.direction.value != "incoming" or not isinstance(message, dict):
            return
        self.tracker.see(message)
        if message.get("method") == "session/request_permission" and "id" in message:
            call = mapping(mapping(message.get("params")).get("toolCall"))
            self.waiting[text(call.get("toolCallId")) or ""].append((message["id"], call))

    # ----------------------------------------------------------------------------- session/update
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # the transcript holds it; the parser reads it from there

    # --------------------------------------------------------------------- session/request_permission
    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        call_id = getattr(tool_call, "tool_call_id", None) or ""
        queue = self.waiting.get(call_id)
        rpc_id, raw_call = queue.popleft() if queue else (None, {})
        request = self.session.permission_request(rpc_id, raw_call, options, self.tracker)
        try:
            decision = await self.channel.responder.decide(request)
        except Exception as exc:  # a responder's failure must not leave the agent waiting: refuse, say why
            decision = PermissionDecision("deny", f"responder failed: {type(exc).__name__}: {exc}",
                                          _first(request.options, ("reject_once", "reject_always")))
        sent = _outcome(decision, request.options)
        decided_by = "manual" if decision.rule.startswith("manual") else "policy"
        self.recorder.note("permission", id=rpc_id, tool_call_id=request.tool_call_id,
                           request=request.as_payload(), decision=decision.as_payload(request, decided_by),
                           sent=sent.model_dump(mode="json", by_alias=True, exclude_none=True))
        return RequestPermissionResponse(outcome=sent)

    # ------------------------------------------------------------------------ refused: fs, terminal
    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/kill")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _first(options: tuple[PermissionOption, ...], kinds: tuple[str, ...]) -> str | None:
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


def _outcome(decision: PermissionDecision, options: tuple[PermissionOption, ...]) -> AllowedOutcome | DeniedOutcome:
    """What goes back to the agent: the option the decision picked when the agent offered it, else one of the
    decision's kind, else ``cancelled`` (ACP's only answer that picks nothing)."""
    offered = {o.option_id for o in options}
    picked = decision.option_id if decision.option_id in offered else None
    if picked is None and decision.outcome in ("allow", "deny"):
        picked = _first(options, ("allow_once", "allow_always") if decision.outcome == "allow"
                        else ("reject_once", "reject_always"))
    if picked is None:
        return DeniedOutcome(outcome="cancelled")
    return AllowedOutcome(outcome="selected", option_id=picked)


# ------------------------------------------------------------------------------------------- the session

@dataclass(frozen=True)
class AcpSession:
    """One ACP conversation: the prompt, in ``mode`` (a ``session/set_mode`` id; None: the agent's own) with
    ``config`` (``session/set_config_option`` id → value), naming tools with ``tool_names``."""

    mode: str | None = None
    config: Mapping[str, str | bool] = field(default_factory=dict)
    tool_names: ToolNames = GENERIC_TOOL_NAMES
    title: str | None = None
    """Set as the session's title (``session/set_title``, newer than this SDK) before the prompt: an agent that
    names its sessions with a model call of its own (codex-acp asks a hard-coded small model) then does not."""

    async def run(self, channel: SessionChannel) -> None:
        ctx = channel.ctx
        with open(channel.transcript, "ab") as stream:
            recorder = Recorder(stream, ctx.api_key)
            client = _Client(self, channel, recorder)
            # _Client answers every Client method the agents here call (the rest are refused -32601)
            conn = connect_to_agent(cast(Any, client), channel.writer, channel.reader,
                                    observers=[client.observe, recorder.observe])
            try:
                await self._converse(conn, channel, recorder)
            finally:
                await _close(conn)

    async def _converse(self, conn: ClientSideConnection, channel: SessionChannel, recorder: Recorder) -> None:
        ctx = channel.ctx
        await _ask(recorder, "initialize", conn.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
            client_info=Implementation(name=CLIENT_NAME, title="GripProbe", version=__version__)))
        new = await _ask(recorder, "session/new", conn.new_session(cwd=str(ctx.seen(ctx.workspace)), mcp_servers=[]))
        session_id = new.session_id
        if self.mode is not None:
            modes = new.modes
            current = modes.current_mode_id if modes is not None else None
            offered = [m.id for m in modes.available_modes] if modes is not None else []
            if current != self.mode:
                if self.mode not in offered:
                    recorder.note("error", stage="session/set_mode",
                                  error=f"mode {self.mode!r} not offered (offered: {offered})")
                    raise SessionError(f"the agent offers no session mode {self.mode!r} (it offers "
                                       f"{', '.join(offered) or 'none'}; current {current!r})")
                await _ask(recorder, "session/set_mode",
                           conn.set_session_mode(session_id=session_id, mode_id=self.mode))
        if self.title is not None:
            await _ask(recorder, SET_TITLE, _request(conn, SET_TITLE, {"sessionId": session_id, "title": self.title}))
        for config_id, value in self.config.items():
            await _ask(recorder, "session/set_config_option",
                       conn.set_config_option(config_id=config_id, session_id=session_id, value=value))
        try:
            await conn.prompt(session_id=session_id, prompt=[text_block(ctx.prompt)])
        except (RequestError, ConnectionError, EOFError) as exc:
            failure = _failure(recorder, "session/prompt", exc)
            if isinstance(exc, RequestError) and TOOLS_UNSUPPORTED in _said(exc).lower():
                return  # the backend refused the tools: the case's answer (the proxy records it), no broken session
            if isinstance(exc, RequestError):  # the agent answered its task with an error: as an exit code says
                raise SessionError(str(failure), agent_failed=True) from exc
            raise failure from exc

    def permission_request(self, rpc_id: Any, raw_call: dict[str, Any], options: list[Any],
                           tracker: CallTracker) -> PermissionRequest:
        """The core's request for one ``session/request_permission``: what the request's ``toolCall`` says,
        completed by what the call's own updates said (its name, kind and input)."""
        call_id = text(raw_call.get("toolCallId"))
        state = tracker.calls.get(call_id) if call_id else None
        raw_name = explicit_name(raw_call) or (state.raw_name if state else None) or name_from_title(
            text(raw_call.get("title")))
        acp_kind = raw_call.get("kind") if isinstance(raw_call.get("kind"), str) else (state.acp_kind if state else None)
        name, by_name = self.tool_names.normalize(raw_name) if raw_name else (None, "other")
        kind = gripprobe_kind(acp_kind)
        if kind == "other" and raw_name:
            kind = by_name
        raw_input = raw_call.get("rawInput")
        if raw_input in (None, {}, "", []) and state is not None:
            raw_input = state.raw_input
        offered = tuple(PermissionOption(option_id=str(getattr(o, "option_id", "")), name=str(getattr(o, "name", "") or ""),
                                         kind=str(getattr(getattr(o, "kind", ""), "value", getattr(o, "kind", "")) or ""))
                        for o in options)
        return PermissionRequest(request_id=str(rpc_id) if rpc_id is not None else "", tool_call_id=call_id,
                                 raw_name=raw_name, name=name or None, kind=kind, input=raw_input,
                                 prompt=text(raw_call.get("title")), options=offered)


async def _ask(recorder: Recorder, stage: str, call: Any) -> Any:
    """Await one request to the agent; a JSON-RPC error or a closed connection is a SessionError."""
    try:
        return await call
    except (RequestError, ConnectionError, EOFError) as exc:
        raise _failure(recorder, stage, exc) from exc


def _said(exc: RequestError) -> str:
    """A JSON-RPC error's message with its details (Qwen Code says only "Internal error" and puts the backend's
    words in ``data.details``)."""
    data = exc.data if isinstance(exc.data, dict) else {}
    detail = data.get("details") if isinstance(data.get("details"), str) else None
    return f"{exc}: {detail}" if detail and detail not in str(exc) else str(exc)


def _failure(recorder: Recorder, stage: str, exc: BaseException) -> SessionError:
    """Record why ``stage`` failed; the SessionError saying so."""
    if isinstance(exc, RequestError):
        recorder.note("error", stage=stage, error=str(exc), code=exc.code, data=exc.data)
        return SessionError(f"{stage} failed: {_said(exc)} (JSON-RPC error {exc.code})")
    recorder.note("error", stage=stage, error=f"{type(exc).__name__}: {exc}")
    return SessionError(f"the agent closed the connection before answering {stage}")


async def _request(conn: ClientSideConnection, method: str, params: dict[str, Any]) -> Any:
    """A request this SDK has no method for (``ext_method`` would prefix ``_``), sent on its JSON-RPC connection
    (``ClientSideConnection._conn``, an ``acp.connection.Connection``: the SDK is pinned to the release read)."""
    raw = getattr(conn, "_conn", None)
    if raw is None or not callable(getattr(raw, "send_request", None)):
        raise ConnectionError(f"this agent-client-protocol release cannot send {method}")
    return await raw.send_request(method, params)


async def _close(conn: ClientSideConnection) -> None:
    try:
        await conn.close()
    except (OSError, RuntimeError, ConnectionError):
        pass


# ---------------------------------------------------------------------------------- the SDK's log noise

class _QuietUnknownNotifications(logging.Filter):
    """The SDK logs a traceback (root logger, ERROR) for every notification it has no route for (Qwen Code's
    ``qwen/notify/session/mode-update``) or cannot validate (an update kind newer than its schema). The
    transcript keeps those messages whole, so these records are dropped; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Unhandled error while handling notification"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        not_found = isinstance(exc, RequestError) and exc.code == -32601
        return not (not_found or type(exc).__name__ == "ValidationError")


_FILTER = _QuietUnknownNotifications()
if not any(isinstance(f, _QuietUnknownNotifications) for f in logging.getLogger().filters):
    logging.getLogger().addFilter(_FILTER)


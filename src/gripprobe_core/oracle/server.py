"""The oracle backend's HTTP server (127.0.0.1, port 0): routes, pacing, ground truth.

One server per case phase. Each model request is parsed by its protocol's adapter (``chat_api``,
``responses_api``, ``ollama_api``, ``anthropic_api``; see :class:`~.wire.WireProtocol`), handed to the profile its model
name selects, and the profile's :class:`~.plan.Reply` is encoded by the same adapter as one JSON
reply or a stream. Every tool call issued (structured or written as text) is appended to
:attr:`OracleServer.ground_truth` and to ``record_path``.

The routes are served by :mod:`.http` (asyncio and httptools: a run never imports aiohttp for its
oracle); :meth:`OracleServer.make_app` offers the same handlers as an aiohttp application for a caller
that serves them itself. A handler answers an :class:`~.http.Out` or a :class:`~.http.StreamOut`, which
either server writes.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from .http import HttpServer, Out, StreamOut, serve
from .probe import PROBE_PATH, PROBE_PROMPT
from ..models.specs import ReadArgs, ReferenceAction, ReferenceRead
from ..timeutil import utc_now_iso
from .anthropic_api import AnthropicMessagesWire, count_tokens
from .chat_api import ChatCompletionsWire, chat_completion_json, chat_stream_chunks
from .dialects import Dialect, ToolsDialect
from .ollama_api import OLLAMA_VERSION, OllamaChatWire, OllamaGenerateWire, ps_json, show_json, tags_json
from .conversation import ChatRequest, Reply, RequestError, Turn, message_text
from .profiles import Profile, ProfileContext, builtin_profiles
from .responses_api import ResponsesWire
from .wire import JSONDict, ReplyMeta, WireProtocol, estimate_usage, openai_error, split_pieces

if TYPE_CHECKING:
    from aiohttp import web

Answer = Out | StreamOut

__all__ = ["OracleServer", "chat_completion_json", "chat_stream_chunks", "error_response", "estimate_usage",
           "split_pieces"]

SHUTDOWN_TIMEOUT_S = 1.0
"""How long :meth:`OracleServer.stop` lets in-flight replies finish before cancelling them."""

STALL_POLL_S = 0.05


class OracleServer:
    """A deterministic model server that performs ``actions`` (already rendered reference actions).

    ``dialects`` maps names to :class:`~.dialects.Dialect` objects (the ``tools`` dialect is always
    present); ``profiles`` defaults to :func:`.profiles.builtin_profiles`. A request's model name
    selects the profile (the part after the last ``/`` or ``:``, else the name without an Ollama tag;
    unknown → ``default_profile``). ``format`` is the case's format, passed to each dialect's ``accepts``.
    """

    def __init__(self, actions: Sequence[ReferenceAction], *, dialects: Mapping[str, Dialect] | None = None,
                 record_path: Path | None = None, default_profile: str = "perfect", format: str = "tool",
                 profiles: Mapping[str, Profile] | None = None, trial: int = 1) -> None:
        self.actions = list(actions)
        self.trial = trial
        self.dialects: dict[str, Dialect] = dict(dialects or {})
        self.dialects.setdefault("tools", ToolsDialect())
        self.profiles: dict[str, Profile] = dict(profiles) if profiles is not None else builtin_profiles()
        if default_profile not in self.profiles:
            raise ValueError(f"unknown oracle profile {default_profile!r}; known: {', '.join(sorted(self.profiles))}")
        self.default_profile = default_profile
        self.format = format
        self.record_path = record_path
        self.ground_truth: list[JSONDict] = []
        """Every tool call issued: {seq, profile, protocol, tool_call_id, name, arguments, kind,
        structured, action_index, ts}. ``structured`` is False for calls written as text
        (``text-tools``); their ``tool_call_id`` is ``text-<k>`` (k-th call in that reply)."""
        self.request_log: list[JSONDict] = []
        """One entry per model request: {n, ts, path, protocol, model, profile, stream, tools, authorized,
        reply} (``authorized``: a Bearer token or an ``x-api-key`` was sent; the token itself is never kept; ``reply``:
        tool_call | text | error | stall)."""
        self._http: HttpServer | None = None
        self._base_url: str | None = None
        self._requests = 0
        self._closing = asyncio.Event()
        self._stalled: set[asyncio.BaseTransport] = set()
        self._models_seen: set[str] = set()

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (server root, without ``/v1``). Only valid after :meth:`start`."""
        if self._base_url is None:
            raise RuntimeError("oracle server not started")
        return self._base_url

    @property
    def pending_stalls(self) -> int:
        """Requests a stalling profile holds open right now."""
        return len(self._stalled)

    def routes(self) -> list[tuple[str, str, Callable[[Any], Awaitable[Answer]]]]:
        """``(method, path, handler)`` of every endpoint; a handler takes a request with ``path``,
        ``headers.get``, ``transport`` and ``await read()``."""
        model_routes: list[tuple[str, WireProtocol]] = [
            ("/v1/chat/completions", ChatCompletionsWire()), ("/chat/completions", ChatCompletionsWire()),
            ("/v1/responses", ResponsesWire()), ("/responses", ResponsesWire()),
            ("/api/chat", OllamaChatWire()), ("/api/generate", OllamaGenerateWire()),
            ("/v1/messages", AnthropicMessagesWire()), ("/messages", AnthropicMessagesWire()),
        ]
        out: list[tuple[str, str, Callable[[Any], Awaitable[Answer]]]] = [
            ("POST", path, self._handler(wire)) for path, wire in model_routes]
        out += [("POST", "/v1/messages/count_tokens", self._count_tokens),
                ("GET", "/v1/models", self._models), ("GET", "/models", self._models),
                ("GET", "/api/version", self._ollama_version), ("GET", "/api/tags", self._ollama_tags),
                ("POST", "/api/show", self._ollama_show), ("GET", "/api/ps", self._ollama_ps),
                ("GET", "/", self._root)]
        return out

    def make_app(self) -> "web.Application":
        """The same routes as an aiohttp application (aiohttp imported here), for a caller that serves it
        itself; :meth:`start` serves them without aiohttp."""
        from aiohttp import web

        app = web.Application()
        for method, path, handler in self.routes():
            if method == "GET":
                app.router.add_get(path, _aiohttp_handler(handler))  # with HEAD, as the server here
            else:
                app.router.add_route(method, path, _aiohttp_handler(handler))
        return app

    async def start(self) -> None:
        if self.record_path is not None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            self.record_path.write_text("", encoding="utf-8")
        self._closing = asyncio.Event()
        self._http = await serve(self.routes(), "127.0.0.1", 0, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        self._base_url = f"http://127.0.0.1:{self._http.port}"

    async def stop(self) -> None:
        """Stop serving (stalled requests are dropped at once, others get :data:`SHUTDOWN_TIMEOUT_S`)
        and write the ground truth (JSON lines) to ``record_path`` if given. Safe to call twice."""
        self._closing.set()
        for transport in list(self._stalled):
            transport.close()
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self.record_path is not None:
            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            with self.record_path.open("w", encoding="utf-8") as fh:
                for entry in self.ground_truth:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    async def __aenter__(self) -> "OracleServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -------------------------------------------------------------------------------- deciding

    def dialect_for(self, request: ChatRequest) -> Dialect:
        """First dialect (by name, ``tools`` last) that accepts the request."""
        names = sorted(n for n in self.dialects if n != "tools") + ["tools"]
        for name in names:
            if self.dialects[name].accepts(request, self.format):
                return self.dialects[name]
        return self.dialects["tools"]

    def profile_for(self, request: ChatRequest) -> tuple[str, Profile]:
        name = next((n for n in request.profile_candidates if n in self.profiles), self.default_profile)
        return name, self.profiles[name]

    def actions_for(self, request: ChatRequest) -> list[ReferenceAction]:
        """What the profile performs: the case's reference actions, or, for the tool-call probe of
        ``gripprobe doctor --model`` (its prompt as the last user message), one read of the probe's file."""
        return PROBE_PLAN if is_tool_probe(request) else self.actions

    def decide(self, request: ChatRequest) -> tuple[str, Reply]:
        name, profile = self.profile_for(request)
        ctx = ProfileContext(request=request, actions=self.actions_for(request), dialect=self.dialect_for(request),
                             trial=self.trial)
        return name, profile.respond(ctx)

    def _issue(self, profile: str, turn: Turn, protocol: str) -> str | None:
        """Record the turn's calls in the ground truth (text calls first, as they come first on the
        wire); return the structured call's tool_call_id."""
        for k, text_call in enumerate(turn.text_calls, start=1):
            self._record(profile, protocol, f"text-{k}", text_call.call.name, text_call.call.arguments,
                         text_call.call.kind, structured=False, action_index=text_call.action_index)
        if turn.tool_call is None:
            return None
        call_id = f"call_oracle_{len(self.ground_truth) + 1:04d}"
        self._record(profile, protocol, call_id, turn.tool_call.name, turn.tool_call.arguments, turn.tool_call.kind,
                     structured=True, action_index=turn.action_index)
        return call_id

    def _record(self, profile: str, protocol: str, call_id: str, name: str, raw_arguments: str, kind: str, *,
                structured: bool, action_index: int | None) -> None:
        arguments: Any = raw_arguments
        if kind == "function":
            try:
                arguments = json.loads(raw_arguments)
            except ValueError:
                pass
        entry = {"seq": len(self.ground_truth) + 1, "profile": profile, "protocol": protocol, "tool_call_id": call_id,
                 "name": name, "arguments": arguments, "kind": kind, "structured": structured,
                 "action_index": action_index, "ts": utc_now_iso()}
        self.ground_truth.append(entry)
        if self.record_path is not None:
            try:
                with self.record_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            except OSError:
                pass  # the full record is written again on stop()

    # -------------------------------------------------------------------------- model requests

    def _handler(self, wire: WireProtocol) -> Callable[[Any], Awaitable[Answer]]:
        async def handle(http: Any) -> Answer:
            return await self._serve(wire, http)
        return handle

    async def _serve(self, wire: WireProtocol, http: Any) -> Answer:
        self._requests += 1
        n = self._requests
        try:
            request = wire.parse(json.loads(await http.read()))
        except (ValueError, RequestError) as exc:
            return Out.json(wire.error_body(400, f"invalid request: {exc}"), status=400)
        self._models_seen.add(request.model)
        try:
            profile, reply = self.decide(request)
        except Exception as exc:  # a bug in a profile or dialect: say so, do not hang the agent
            return Out.json(wire.error_body(500, f"oracle internal error: {type(exc).__name__}: {exc}"), status=500)
        turn = reply.turn if wire.carries_tool_calls else replace(reply.turn, tool_call=None, action_index=None)
        self.request_log.append({
            "n": n, "ts": utc_now_iso(), "path": http.path, "protocol": wire.name, "model": request.model,
            "profile": profile, "stream": request.stream,
            "tools": [t.name for t in request.tools] + [t.name for t in request.custom_tools],
            "authorized": (http.headers.get("Authorization", "").startswith("Bearer ")
                           or bool(http.headers.get("x-api-key"))),
            "reply": ("stall" if reply.stall else "error" if reply.http_status != 200 else
                      "tool_call" if turn.tool_call else "text")})
        if reply.stall:
            return await self._stall(http)
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        if reply.http_status != 200:
            # Retry right away if you retry at all: agents that honour these headers (the OpenAI SDKs,
            # opencode) then finish their retry storm in a second instead of minutes of back-off, so a
            # backend failure is cheap to detect. How many times they retry is still theirs to decide.
            return Out.json(wire.error_body(reply.http_status, reply.error or "oracle error"),
                            status=reply.http_status, headers={"retry-after-ms": "0", "retry-after": "0"})
        call_id = self._issue(profile, turn, wire.name)
        meta = ReplyMeta(n=n, request=request, call_id=call_id, usage=estimate_usage(request, turn),
                         created=int(time.time()), pieces=reply.stream_pieces)
        if not request.stream:
            return Out.json(wire.reply_json(turn, meta))
        return StreamOut(wire.stream_content_type, wire.reply_frames(turn, meta), reply.chunk_delay_s,
                         min_gaps=reply.stream_pieces)

    async def _stall(self, http: Any) -> Answer:
        """Hold the request without answering until the client leaves or the server stops; then drop
        the connection without a response."""
        transport = http.transport
        if transport is None:
            return Out(status=499)
        self._stalled.add(transport)
        try:
            while not self._closing.is_set() and not transport.is_closing():
                try:
                    await asyncio.wait_for(self._closing.wait(), STALL_POLL_S)
                except asyncio.TimeoutError:
                    pass
        finally:
            self._stalled.discard(transport)
            transport.close()
        raise asyncio.CancelledError  # nothing to send: the server drops the connection

    # ------------------------------------------------------------------------ listing endpoints

    async def _models(self, request: Any) -> Answer:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "gripprobe-oracle"}
                for name in sorted(self.profiles)]
        return Out.json({"object": "list", "data": data})

    async def _count_tokens(self, http: Any) -> Answer:
        """Anthropic's ``count_tokens`` (not a model call: no profile, no ground truth)."""
        try:
            return Out.json(count_tokens(json.loads(await http.read())))
        except (ValueError, RequestError) as exc:
            return Out.json(AnthropicMessagesWire().error_body(400, f"invalid request: {exc}"), status=400)

    async def _ollama_version(self, request: Any) -> Answer:
        return Out.json({"version": OLLAMA_VERSION})

    async def _ollama_tags(self, request: Any) -> Answer:
        return Out.json(tags_json(self.profiles))

    async def _ollama_ps(self, request: Any) -> Answer:
        names = {m if ":" in m.rsplit("/", 1)[-1] else f"{m}:latest" for m in self._models_seen if m}
        return Out.json(ps_json(names))

    async def _ollama_show(self, http: Any) -> Answer:
        try:
            body = json.loads(await http.read())
        except ValueError as exc:
            return Out.json({"error": f"invalid request: {exc}"}, status=400)
        model = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if not isinstance(model, str) or not model:
            return Out.json({"error": "model is required"}, status=400)
        _, profile = self.profile_for(ChatRequest(model=model, messages=[], tools=[]))
        return Out.json(show_json(model, supports_tools=bool(getattr(profile, "supports_tools", True))))

    async def _root(self, request: Any) -> Answer:
        return Out.text("Ollama is running")


def is_tool_probe(request: ChatRequest) -> bool:
    """Is this the tool-call probe of ``gripprobe doctor --model`` (backends/toolprobe.py)? Its prompt
    is the last user message, whatever the protocol."""
    last = next((m for m in reversed(request.messages) if m.get("role") == "user"), None)
    return last is not None and message_text(last).strip() == PROBE_PROMPT


PROBE_PLAN: list[ReferenceAction] = [ReferenceRead(read=ReadArgs(path=PROBE_PATH))]
"""The plan every profile follows for the tool-call probe: read its file."""


def error_response(status: int, message: str, kind: str | None = None) -> "web.Response":
    """An OpenAI-style JSON error response, as an aiohttp response (kept for callers of the first version)."""
    from aiohttp import web

    body = openai_error(status, message)
    if kind:
        body["error"]["type"] = kind
    return web.json_response(body, status=status)


def _aiohttp_handler(handler: Callable[[Any], Awaitable[Answer]]) -> Callable[["web.Request"], Awaitable[Any]]:
    """``handler`` as an aiohttp handler: its :class:`~.http.Out` as a response, its :class:`~.http.StreamOut`
    written frame by frame (the same bytes of body as :mod:`.http` writes)."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        answer = await handler(request)
        if isinstance(answer, Out):
            return web.Response(status=answer.status, body=answer.body, headers={
                **({"Content-Type": answer.content_type} if answer.content_type else {}), **answer.headers})
        resp = web.StreamResponse(status=200, headers={"Content-Type": answer.content_type, **answer.headers})
        await resp.prepare(request)
        try:
            for wait, frame in answer.waits():
                if wait > 0:
                    await asyncio.sleep(wait)
                if frame:
                    await resp.write(frame)
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the agent hung up mid-stream; nothing to tell it
        return resp

    return handle

"""The oracle backend's HTTP server (aiohttp, 127.0.0.1, port 0) and its Chat Completions encoding.

One server per case phase. Each request is normalized (:func:`.plan.parse_chat_request`), handed to
the profile its model name selects, and the profile's :class:`~.plan.Reply` is encoded as a JSON reply
or an SSE stream. Every tool call issued is appended to :attr:`OracleServer.ground_truth`.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from aiohttp import web

from ..models.specs import ReferenceAction
from ..timeutil import utc_now_iso
from .dialects import Dialect, ToolsDialect
from .plan import ChatRequest, Reply, RequestError, Turn, parse_chat_request
from .profiles import Profile, ProfileContext, builtin_profiles

JSONDict = dict[str, Any]


class OracleServer:
    """A deterministic model server that performs ``actions`` (already rendered reference actions).

    ``dialects`` maps names to :class:`~.dialects.Dialect` objects (the ``tools`` dialect is always
    present); ``profiles`` defaults to :func:`.profiles.builtin_profiles`. A request's model name
    selects the profile (the part after the last ``/`` or ``:``; unknown → ``default_profile``).
    ``format`` is the case's format, passed to each dialect's ``accepts``.
    """

    def __init__(self, actions: Sequence[ReferenceAction], *, dialects: Mapping[str, Dialect] | None = None,
                 record_path: Path | None = None, default_profile: str = "perfect", format: str = "tool",
                 profiles: Mapping[str, Profile] | None = None) -> None:
        self.actions = list(actions)
        self.dialects: dict[str, Dialect] = dict(dialects or {})
        self.dialects.setdefault("tools", ToolsDialect())
        self.profiles: dict[str, Profile] = dict(profiles) if profiles is not None else builtin_profiles()
        if default_profile not in self.profiles:
            raise ValueError(f"unknown oracle profile {default_profile!r}; known: {', '.join(sorted(self.profiles))}")
        self.default_profile = default_profile
        self.format = format
        self.record_path = record_path
        self.ground_truth: list[JSONDict] = []
        """Every tool call issued: {seq, profile, tool_call_id, name, arguments, action_index, ts}."""
        self.request_log: list[JSONDict] = []
        """One entry per model request: {n, ts, path, model, profile, stream, tools, authorized, reply}
        (``authorized``: a Bearer token was sent; the token itself is never kept)."""
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._requests = 0

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (server root, without ``/v1``). Only valid after :meth:`start`."""
        if self._base_url is None:
            raise RuntimeError("oracle server not started")
        return self._base_url

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._models)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.make_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Stop serving and write the ground truth (JSON lines) to ``record_path`` if given."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
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
        name = request.profile_name
        if name not in self.profiles:
            name = self.default_profile
        return name, self.profiles[name]

    def decide(self, request: ChatRequest) -> tuple[str, Reply]:
        name, profile = self.profile_for(request)
        ctx = ProfileContext(request=request, actions=self.actions, dialect=self.dialect_for(request))
        return name, profile.respond(ctx)

    def _issue(self, profile: str, turn: Turn) -> str | None:
        """Record the turn's tool call (if any) in the ground truth; return its tool_call_id."""
        if turn.tool_call is None:
            return None
        seq = len(self.ground_truth) + 1
        call_id = f"call_oracle_{seq:04d}"
        try:
            arguments: Any = json.loads(turn.tool_call.arguments)
        except ValueError:
            arguments = turn.tool_call.arguments
        self.ground_truth.append({
            "seq": seq, "profile": profile, "tool_call_id": call_id, "name": turn.tool_call.name,
            "arguments": arguments, "action_index": turn.action_index, "ts": utc_now_iso()})
        return call_id

    # -------------------------------------------------------------------------------- handlers

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "gripprobe-oracle"}
                for name in sorted(self.profiles)]
        return web.json_response({"object": "list", "data": data})

    async def _chat_completions(self, http: web.Request) -> web.StreamResponse:
        self._requests += 1
        n = self._requests
        try:
            body = json.loads(await http.read())
            request = parse_chat_request(body)
        except (ValueError, RequestError) as exc:
            return error_response(400, f"invalid request: {exc}", "invalid_request_error")
        try:
            profile, reply = self.decide(request)
        except Exception as exc:  # a bug in a profile or dialect: say so, do not hang the agent
            return error_response(500, f"oracle internal error: {type(exc).__name__}: {exc}", "server_error")
        self.request_log.append({
            "n": n, "ts": utc_now_iso(), "path": http.path, "model": request.model, "profile": profile,
            "stream": request.stream, "tools": [t.name for t in request.tools],
            "authorized": http.headers.get("Authorization", "").startswith("Bearer "),
            "reply": ("error" if reply.http_status != 200 else
                      "tool_call" if reply.turn.tool_call else "text")})
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        if reply.http_status != 200:
            return error_response(reply.http_status, reply.error or "oracle error", "server_error")
        call_id = self._issue(profile, reply.turn)
        response_id = f"chatcmpl-oracle-{n}"
        usage = estimate_usage(request, reply.turn)
        if not request.stream:
            return web.json_response(chat_completion_json(
                reply.turn, response_id=response_id, model=request.model, tool_call_id=call_id, usage=usage))
        chunks = chat_stream_chunks(reply.turn, response_id=response_id, model=request.model,
                                    tool_call_id=call_id, usage=usage if request.include_usage else None)
        return await self._stream(http, chunks, reply.chunk_delay_s)

    @staticmethod
    async def _stream(http: web.Request, chunks: list[JSONDict], delay_s: float) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(http)
        try:
            for chunk in chunks:
                await resp.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
                if delay_s > 0:
                    await asyncio.sleep(delay_s)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the agent hung up mid-stream; nothing to tell it
        return resp


# ----------------------------------------------------------------------------- wire encoding

def error_response(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def estimate_usage(request: ChatRequest, turn: Turn) -> JSONDict:
    """Deterministic token counts (~4 characters a token)."""
    prompt = max(1, len(json.dumps(request.messages, ensure_ascii=False)) // 4)
    out = len(turn.text) + (len(turn.tool_call.name) + len(turn.tool_call.arguments) if turn.tool_call else 0)
    completion = max(1, out // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _tool_call_json(turn: Turn, tool_call_id: str | None) -> list[JSONDict]:
    if turn.tool_call is None:
        return []
    return [{"id": tool_call_id, "type": "function",
             "function": {"name": turn.tool_call.name, "arguments": turn.tool_call.arguments}}]


def chat_completion_json(turn: Turn, *, response_id: str, model: str, tool_call_id: str | None,
                         usage: JSONDict) -> JSONDict:
    """A non-streamed ``chat.completion`` object."""
    message: JSONDict = {"role": "assistant", "content": turn.text or None}
    if turn.tool_call is not None:
        message["tool_calls"] = _tool_call_json(turn, tool_call_id)
    return {"id": response_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
            "usage": usage}


def split_pieces(text: str, n: int = 3) -> list[str]:
    """``text`` cut into at most ``n`` non-empty consecutive pieces (``[]`` for empty text)."""
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


def chat_stream_chunks(turn: Turn, *, response_id: str, model: str, tool_call_id: str | None,
                       usage: JSONDict | None) -> list[JSONDict]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order (without ``[DONE]``).

    Role first, then text in pieces, then the tool call: id and name with empty arguments, then the
    arguments in pieces; a finish chunk; a usage chunk (empty choices) when ``usage`` is given.
    """
    created = int(time.time())

    def chunk(delta: JSONDict, finish: str | None = None) -> JSONDict:
        return {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in split_pieces(turn.text)]
    if turn.tool_call is not None:
        chunks.append(chunk({"tool_calls": [{"index": 0, "id": tool_call_id, "type": "function",
                                             "function": {"name": turn.tool_call.name, "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                   for piece in split_pieces(turn.tool_call.arguments, 4)]
    chunks.append(chunk({}, turn.finish_reason))
    if usage is not None:
        chunks.append({"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage})
    return chunks

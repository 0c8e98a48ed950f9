"""Ollama's native API: ``/api/chat``, ``/api/generate`` (NDJSON streams) and the listing endpoints.

Shapes follow Ollama 0.13: streaming is the default (``"stream": false`` gives one JSON object);
each stream line is a JSON object with ``done: false`` until a last line ``done: true`` carrying
``done_reason``, durations (nanoseconds), ``prompt_eval_count`` and ``eval_count``. Tool calls are
``message.tool_calls: [{"id", "function": {"index", "name", "arguments": {…}}}]`` with arguments as
an object. Errors are ``{"error": "<message>"}``.

Incoming Ollama messages are converted to the Chat Completions shape the profiles read (tool call
arguments become JSON strings; ``tool`` messages keep ``tool_name``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..timeutil import utc_now_iso
from .conversation import ChatRequest, RequestError, Turn, parse_tools
from .fingerprint import profile_digest
from .wire import JSONDict, ReplyMeta, json_bytes, split_pieces

OLLAMA_VERSION = "0.13.5"
"""What ``/api/version`` reports (codex refuses servers older than 0.13.4)."""

CONTEXT_LENGTH = 131072


class OllamaChatWire:
    """The :class:`~.wire.WireProtocol` adapter for ``POST /api/chat``."""

    name = "ollama_chat"
    stream_content_type = "application/x-ndjson"
    carries_tool_calls = True

    def parse(self, body: Any) -> ChatRequest:
        return parse_ollama_chat(body)

    def error_body(self, status: int, message: str) -> JSONDict:
        return {"error": message}

    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict:
        message = _message(turn, meta, turn.text, with_call=True)
        if turn.reasoning:
            message["thinking"] = turn.reasoning
        return {**_head(meta), "message": message, **_done(meta)}

    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]:
        lines = [{**_head(meta), "message": {"role": "assistant", "content": "", "thinking": piece}, "done": False}
                 for piece in (split_pieces(turn.reasoning, meta.pieces or 3) if turn.reasoning else [])]
        lines += [{**_head(meta), "message": _message(turn, meta, piece, with_call=False), "done": False}
                  for piece in split_pieces(turn.text, meta.pieces or 3)]
        if turn.tool_call is not None:
            lines.append({**_head(meta), "message": _message(turn, meta, "", with_call=True), "done": False})
        lines.append({**_head(meta), "message": {"role": "assistant", "content": ""}, **_done(meta)})
        return ndjson(lines)


class OllamaGenerateWire:
    """The :class:`~.wire.WireProtocol` adapter for ``POST /api/generate`` (text only, no tools)."""

    name = "ollama_generate"
    stream_content_type = "application/x-ndjson"
    carries_tool_calls = False

    def parse(self, body: Any) -> ChatRequest:
        return parse_ollama_generate(body)

    def error_body(self, status: int, message: str) -> JSONDict:
        return {"error": message}

    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict:
        return {**_head(meta), "response": turn.text, **_done(meta), "context": []}

    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]:
        lines = [{**_head(meta), "response": piece, "done": False}
                 for piece in split_pieces(turn.text, meta.pieces or 3)]
        lines.append({**_head(meta), "response": "", **_done(meta), "context": []})
        return ndjson(lines)


def ndjson(lines: Iterable[JSONDict]) -> list[bytes]:
    return [json_bytes(line) + b"\n" for line in lines]


# ------------------------------------------------------------------------------------------ parsing

def _stream_flag(body: JSONDict) -> bool:
    """Ollama streams unless ``stream`` is exactly false."""
    return body.get("stream", True) is not False


def parse_ollama_chat(body: Any) -> ChatRequest:
    """Normalize a decoded ``/api/chat`` body. Raises :class:`~.plan.RequestError` on a bad shape."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    raw_messages = body.get("messages", [])
    if not isinstance(raw_messages, list) or not all(isinstance(m, dict) for m in raw_messages):
        raise RequestError("'messages' must be a list of objects")
    model = body.get("model")
    return ChatRequest(model=model if isinstance(model, str) else "",
                       messages=[_chat_message(m) for m in raw_messages], tools=parse_tools(body.get("tools")),
                       stream=_stream_flag(body), include_usage=True, raw=body, protocol="ollama_chat")


def _chat_message(msg: JSONDict) -> JSONDict:
    out = dict(msg)
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        converted = []
        for i, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict):
                continue
            args = fn.get("arguments")
            converted.append({"id": str(call.get("id") or f"ollama_call_{i}"), "type": "function",
                              "function": {"name": str(fn.get("name") or ""),
                                           "arguments": args if isinstance(args, str)
                                           else json.dumps(args if args is not None else {}, ensure_ascii=False)}})
        out["tool_calls"] = converted
    return out


def parse_ollama_generate(body: Any) -> ChatRequest:
    """Normalize a decoded ``/api/generate`` body: ``system`` and ``prompt`` become two messages."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    prompt, system = body.get("prompt", ""), body.get("system")
    if not isinstance(prompt, str):
        raise RequestError("'prompt' must be a string")
    messages: list[JSONDict] = []
    if isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": prompt})
    model = body.get("model")
    return ChatRequest(model=model if isinstance(model, str) else "", messages=messages, tools=[],
                       stream=_stream_flag(body), include_usage=True, raw=body, protocol="ollama_generate")


# ----------------------------------------------------------------------------------------- encoding

def _head(meta: ReplyMeta) -> JSONDict:
    return {"model": meta.request.model, "created_at": utc_now_iso()}


def _done(meta: ReplyMeta) -> JSONDict:
    """The fields of the last line: reason, durations (ns, deterministic) and token counts."""
    prompt, completion = meta.usage["prompt_tokens"], meta.usage["completion_tokens"]
    return {"done": True, "done_reason": "stop", "total_duration": 1_000_000 * (1 + completion),
            "load_duration": 1_000_000, "prompt_eval_count": prompt, "prompt_eval_duration": 1_000 * prompt,
            "eval_count": completion, "eval_duration": 1_000_000 * completion}


def _message(turn: Turn, meta: ReplyMeta, content: str, *, with_call: bool) -> JSONDict:
    message: JSONDict = {"role": "assistant", "content": content}
    if with_call and turn.tool_call is not None:
        message["tool_calls"] = [{"id": meta.call_id, "function": {
            "index": 0, "name": turn.tool_call.name, "arguments": arguments_object(turn.tool_call.arguments)}}]
    return message


def arguments_object(raw: str) -> Any:
    """Ollama sends arguments as an object: the parsed JSON when it is one, else the raw string."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


# --------------------------------------------------------------------------------- listing endpoints

def ollama_model_ref(model: str) -> str:
    """The fully qualified name Ollama's errors use: ``perfect`` → ``registry.ollama.ai/library/perfect:latest``."""
    name = model or "oracle"
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    if "/" not in name:
        name = "library/" + name
    if name.count("/") < 2:
        name = "registry.ollama.ai/" + name
    return name


def _details() -> JSONDict:
    return {"parent_model": "", "format": "gguf", "family": "oracle", "families": ["oracle"],
            "parameter_size": "0B", "quantization_level": "none"}


def tags_json(profile_names: Iterable[str]) -> JSONDict:
    """``GET /api/tags``: one local model per profile (``<profile>:latest``)."""
    return {"models": [{"name": f"{p}:latest", "model": f"{p}:latest", "modified_at": "2026-01-01T00:00:00Z",
                        "size": 0, "digest": profile_digest(p), "details": _details()}
                       for p in sorted(profile_names)]}


def show_json(model: str, *, supports_tools: bool) -> JSONDict:
    """``POST /api/show``: details, model_info with a context length, and capabilities."""
    return {"modelfile": f"# GripProbe oracle backend\nFROM {model or 'oracle'}\n", "parameters": "",
            "template": "{{ .Prompt }}", "details": _details(),
            "model_info": {"general.architecture": "oracle", "general.parameter_count": 0,
                           "oracle.context_length": CONTEXT_LENGTH},
            "capabilities": ["completion", "tools"] if supports_tools else ["completion"],
            "modified_at": "2026-01-01T00:00:00Z"}


def ps_json(models: Iterable[str]) -> JSONDict:
    """``GET /api/ps``: the models requested so far, as loaded models."""
    return {"models": [{"name": m, "model": m, "size": 0, "digest": profile_digest(m), "details": _details(),
                        "expires_at": "2099-01-01T00:00:00Z", "size_vram": 0, "context_length": CONTEXT_LENGTH}
                       for m in sorted(models)]}

"""Model-server wire protocols: which one an exchange speaks, and the reply it carried.

:func:`detect_protocol` names the protocol from the method, path and request body.
:class:`ReplyAssembler` rebuilds one reply (tool calls, text, usage, response id, errors) from the
objects a response carried, one at a time, whatever the shape:

* **Chat Completions** — ``chat.completion.chunk`` objects (``choices[].delta`` with ``content`` and
  ``tool_calls[]`` pieces keyed by ``index``: ``id`` and ``function.name`` once, ``function.arguments``
  in pieces) or one ``chat.completion`` (``choices[].message.tool_calls``); a usage chunk.
* **Responses API** — ``response.output_item.added``/``.done`` (``function_call`` and
  ``custom_tool_call`` items), ``response.function_call_arguments.delta``/``.done``,
  ``response.custom_tool_call_input.delta``/``.done``, ``response.output_text.delta``,
  ``response.completed`` (``response.output`` and ``usage``), ``error``/``response.failed``; or one
  non-streamed ``response`` object (``output[]``).
* **Ollama** ``/api/chat`` — NDJSON lines or one JSON object with ``message.content`` and complete
  ``message.tool_calls[]`` (``function.arguments`` is an object; ``id`` optional), usage in
  ``prompt_eval_count``/``eval_count``; ``/api/generate`` — ``response`` text pieces.
* **Anthropic Messages** ``/v1/messages`` — the events ``message_start`` (id, input usage),
  ``content_block_start`` (a ``text`` or ``tool_use`` block: ``id``, ``name``), ``content_block_delta``
  (``text_delta``, ``input_json_delta`` pieces of the arguments; ``thinking_delta`` is not reply text),
  ``content_block_stop``, ``message_delta`` (stop reason, output usage), ``message_stop``, ``ping``,
  ``error``; or one non-streamed ``message`` (``content[]`` blocks). Usage is merged across events and
  counts the prompt as Anthropic splits it: ``input_tokens`` + ``cache_read_input_tokens`` +
  ``cache_creation_input_tokens``, the cache reads being the cached tokens.
  ``/v1/messages/count_tokens`` is ``count_tokens``: recorded, never a model call.

The assembler keeps only what it assembles: per call, arguments up to ``args_limit`` characters (a
longer argument stream is cut and flagged), and the text up to ``text_limit`` characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..models.wire import MODEL_PROTOCOLS

__all__ = ["AssembledCall", "MODEL_PROTOCOLS", "ReplyAssembler", "detect_protocol", "iter_text_parts", "json_text",
           "usage_of"]

_ANTHROPIC_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                               "message_delta", "message_stop", "ping", "error"})
_MODEL_LIST_PATHS = ("/models", "/api/tags", "/api/show", "/api/version", "/api/ps")
DEFAULT_ARGS_LIMIT = 1024 * 1024
DEFAULT_TEXT_LIMIT = 1024 * 1024


def detect_protocol(method: str, path: str, body: Any = None) -> str:
    """``chat_completions | responses | ollama_chat | ollama_generate | anthropic_messages | count_tokens |
    models | other``.

    The path decides (with or without ``/v1``, any prefix); an unknown path falls back on the
    body's shape (``messages`` → Chat Completions, ``input`` → Responses, ``prompt`` → generate).
    """
    p = (path or "").split("?", 1)[0].rstrip("/").lower()
    if p.endswith("/chat/completions") or p == "chat/completions":
        return "chat_completions"
    if p.endswith("/responses") or p == "responses":
        return "responses"
    if p.endswith("/messages/count_tokens"):
        return "count_tokens"
    if p.endswith("/v1/messages") or p in ("/messages", "messages"):
        return "anthropic_messages"
    if p.endswith("/api/chat"):
        return "ollama_chat"
    if p.endswith("/api/generate"):
        return "ollama_generate"
    if any(p.endswith(suffix) for suffix in _MODEL_LIST_PATHS) or "/models/" in p:
        return "models"
    if (method or "").upper() == "POST" and isinstance(body, dict):
        if isinstance(body.get("messages"), list):
            return "chat_completions"
        if "input" in body and "model" in body:
            return "responses"
        if isinstance(body.get("prompt"), str) and "model" in body:
            return "ollama_generate"
    return "other"


def json_text(value: Any) -> str:
    """Arguments as the text a model would have sent: strings unchanged, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(obj: Any) -> dict[str, int | None] | None:
    """``{prompt_tokens, completion_tokens, total_tokens}`` from any protocol's usage shape, with
    ``cached_tokens`` when the backend says how much of the prompt its cache served (Chat Completions
    ``prompt_tokens_details``, Responses ``input_tokens_details``, Anthropic ``cache_read_input_tokens``:
    there the prompt is ``input_tokens`` plus cache reads and writes), else None."""
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage")
    cached = None
    if isinstance(usage, dict):
        prompt = _int(usage.get("prompt_tokens"))
        if prompt is None:
            prompt = _int(usage.get("input_tokens"))
        completion = _int(usage.get("completion_tokens"))
        if completion is None:
            completion = _int(usage.get("output_tokens"))
        total = _int(usage.get("total_tokens"))
        for details in ("prompt_tokens_details", "input_tokens_details"):
            if isinstance(usage.get(details), dict) and cached is None:
                cached = _int(usage[details].get("cached_tokens"))
        read, written = _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens"))
        if (read is not None or written is not None) and _int(usage.get("prompt_tokens")) is None:
            # Anthropic: input_tokens is only what the cache neither served nor stored
            prompt = (prompt or 0) + (read or 0) + (written or 0)
            cached = read if read is not None else cached
    elif "prompt_eval_count" in obj or "eval_count" in obj:
        prompt, completion, total = _int(obj.get("prompt_eval_count")), _int(obj.get("eval_count")), None
    else:
        return None
    if prompt is None and completion is None and total is None:
        return None
    if total is None and (prompt is not None or completion is not None):
        total = (prompt or 0) + (completion or 0)
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
    if cached is not None:
        out["cached_tokens"] = cached
    return out


@dataclass
class AssembledCall:
    """One structured tool call the reply requested."""

    id: str | None
    name: str = ""
    kind: str = "function"  # function | custom
    pieces: list[str] = field(default_factory=list)
    size: int = 0
    truncated: bool = False
    final: bool = False
    """Arguments came whole from a "done" object: later pieces do not change them."""

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)

    def add(self, piece: str, limit: int) -> None:
        if self.final or not piece:
            return
        room = limit - self.size
        if room <= 0:
            self.truncated = True
            return
        if len(piece) > room:
            piece, self.truncated = piece[:room], True
        self.pieces.append(piece)
        self.size += len(piece)

    def set(self, text: str, limit: int, *, final: bool) -> None:
        if self.final:
            return
        self.pieces, self.size, self.truncated = [], 0, False
        self.add(text, limit)
        self.final = final

    def set_name(self, name: Any) -> None:
        if not isinstance(name, str) or not name:
            return
        if not self.name or name == self.name or name.startswith(self.name):
            self.name = name
        elif not self.name.endswith(name):
            self.name += name  # a name streamed in pieces

    @property
    def json_valid(self) -> bool | None:
        """Do the arguments parse as JSON? None for custom (free-form) calls and cut-off arguments."""
        if self.kind != "function" or self.truncated:
            return None
        text = self.arguments
        if not text.strip():
            return True  # no arguments at all: some servers send "" for a tool without parameters
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            return False
        return True


class ReplyAssembler:
    """Rebuilds one reply from the JSON objects its response carried (see the module docstring)."""

    def __init__(self, *, args_limit: int = DEFAULT_ARGS_LIMIT, text_limit: int = DEFAULT_TEXT_LIMIT) -> None:
        self.args_limit = max(1, args_limit)
        self.text_limit = max(0, text_limit)
        self.calls: list[AssembledCall] = []
        self.usage: dict[str, int | None] | None = None
        self.response_id: str | None = None
        self.errors: list[str] = []
        self._text: list[str] = []
        self._text_size = 0
        self._delta_text = False
        self._reasoning: list[str] = []
        self._reasoning_size = 0
        self._delta_reasoning = False
        self._by_key: dict[Any, AssembledCall] = {}
        self._anthropic_usage: dict[str, Any] = {}
        self._anthropic_streamed: set[Any] = set()

    # ------------------------------------------------------------------------------ results

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def text_full(self) -> bool:
        return self._text_size >= self.text_limit

    @property
    def reasoning(self) -> str:
        """The reply's reasoning: ``reasoning_content`` (Chat), reasoning summaries and text (Responses),
        ``thinking`` blocks (Anthropic), ``thinking`` (Ollama); at most ``text_limit`` characters."""
        return "".join(self._reasoning)

    # -------------------------------------------------------------------------------- input

    def on_object(self, obj: Any, event: str | None = None) -> None:
        """Take one object of the response (a stream chunk, an event's data, or a whole body)."""
        if not isinstance(obj, dict):
            return
        typ = obj.get("type")
        if typ in _ANTHROPIC_EVENTS or (typ == "message" and isinstance(obj.get("content"), list)):
            self._anthropic(obj, typ)
            return
        self._error(obj.get("error"))
        if isinstance(obj.get("choices"), list) or obj.get("object") in ("chat.completion", "chat.completion.chunk"):
            self._chat(obj)
        elif (isinstance(typ, str) and typ.startswith("response.")) or obj.get("object") == "response" \
                or (isinstance(event, str) and event.startswith("response.")):
            self._responses(obj, typ if isinstance(typ, str) else event)
        elif typ == "error":
            self._error(obj.get("message") or obj)
        elif isinstance(obj.get("message"), dict) or isinstance(obj.get("response"), str) or "done" in obj:
            self._ollama(obj)
        usage = usage_of(obj)
        if usage is not None:
            self.usage = usage

    # ------------------------------------------------------------------------------ helpers

    def _add_text(self, value: Any) -> None:
        if isinstance(value, list):  # content parts
            for part in value:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    self._add_text(part["text"])
            return
        if not isinstance(value, str) or not value:
            return
        room = self.text_limit - self._text_size
        if room <= 0:
            return
        piece = value[:room]
        self._text.append(piece)
        self._text_size += len(piece)

    def _add_reasoning(self, value: Any) -> None:
        if isinstance(value, list):  # Responses summary / content parts
            for part in value:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    self._add_reasoning(part["text"])
            return
        if not isinstance(value, str) or not value:
            return
        room = self.text_limit - self._reasoning_size
        if room <= 0:
            return
        piece = value[:room]
        self._reasoning.append(piece)
        self._reasoning_size += len(piece)

    def _error(self, err: Any) -> None:
        if not err:
            return
        if isinstance(err, dict):
            msg = err.get("message") or err.get("error") or err.get("detail")
            text = msg if isinstance(msg, str) else json_text(err)
        else:
            text = err if isinstance(err, str) else json_text(err)
        if text and len(self.errors) < 20:
            self.errors.append(text[:4096])

    def _set_id(self, value: Any) -> None:
        if self.response_id is None and isinstance(value, str) and value:
            self.response_id = value

    def _new(self, key: Any, call_id: str | None, kind: str = "function") -> AssembledCall:
        call = AssembledCall(id=call_id, kind=kind)
        self.calls.append(call)
        if key is not None:
            self._by_key[key] = call
        return call

    # --------------------------------------------------------------------- Chat Completions

    def _chat(self, obj: dict[str, Any]) -> None:
        self._set_id(obj.get("id"))
        choices = obj.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            cidx = _int(choice.get("index")) or 0
            for part_name in ("delta", "message"):
                part = choice.get(part_name)
                if not isinstance(part, dict):
                    continue
                self._add_text(part.get("content"))
                self._add_reasoning(part.get("reasoning_content") if isinstance(part.get("reasoning_content"), str)
                                    else part.get("reasoning"))
                self._chat_calls(part.get("tool_calls"), cidx, streamed=part_name == "delta")
                legacy = part.get("function_call")
                if isinstance(legacy, dict):
                    call = self._by_key.get(("legacy", cidx)) or self._new(("legacy", cidx), None)
                    call.set_name(legacy.get("name"))
                    call.add(json_text(legacy.get("arguments")), self.args_limit)
            if isinstance(choice.get("text"), str):  # legacy completions
                self._add_text(choice["text"])

    def _chat_calls(self, calls: Any, cidx: int, *, streamed: bool) -> None:
        if not isinstance(calls, list):
            return
        for pos, tc in enumerate(calls):
            if not isinstance(tc, dict):
                continue
            idx = _int(tc.get("index"))
            call_id = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            if not streamed:
                call = self._by_key.get(("id", call_id)) if call_id else None
                if call is None:
                    call = self._new(("id", call_id) if call_id else None, call_id)
                call.set_name(fn.get("name"))
                call.set(json_text(fn.get("arguments")), self.args_limit, final=True)
                continue
            key = ("chat", cidx, idx) if idx is not None else None
            call = self._by_key.get(key) if key is not None else None
            if call is None and call_id:
                call = self._by_key.get(("id", call_id))
            if call is not None and call_id and call.id and call.id != call_id:
                call = None  # a server that reuses index 0 for every call: a new id is a new call
            if call is None and key is None and not call_id and not fn.get("name"):
                call = self._by_key.get(("chat-last", cidx))  # a continuation without index or id
            if call is None:
                call = self._new(key, call_id)
                if call_id:
                    self._by_key[("id", call_id)] = call
            elif call_id and not call.id:
                call.id = call_id
                self._by_key[("id", call_id)] = call
            self._by_key[("chat-last", cidx)] = call
            call.set_name(fn.get("name"))
            call.add(json_text(fn.get("arguments")) if fn.get("arguments") is not None else "", self.args_limit)

    # ------------------------------------------------------------------------ Responses API

    def _responses(self, obj: dict[str, Any], typ: str | None) -> None:
        if obj.get("object") == "response" and not (isinstance(typ, str) and typ.startswith("response.")):
            self._response_object(obj)
            return
        resp = obj.get("response")
        if isinstance(resp, dict):
            self._set_id(resp.get("id"))
            self._error(resp.get("error"))
            usage = usage_of(resp)
            if usage is not None:
                self.usage = usage
            if typ in ("response.completed", "response.incomplete", "response.failed", "response.done"):
                self._output_items(resp.get("output"), final=True)
        if typ == "response.output_item.added":
            self._item(obj.get("item"), obj.get("output_index"), final=False)
        elif typ == "response.output_item.done":
            self._item(obj.get("item"), obj.get("output_index"), final=True)
        elif typ in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            call = self._item_call(obj, custom=typ.startswith("response.custom"))
            if isinstance(obj.get("delta"), str):
                call.add(obj["delta"], self.args_limit)
        elif typ in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            call = self._item_call(obj, custom=typ.startswith("response.custom"))
            whole = obj.get("arguments") if "arguments" in obj else obj.get("input")
            if isinstance(whole, str):
                call.set(whole, self.args_limit, final=True)
        elif typ == "response.output_text.delta":
            self._delta_text = True
            self._add_text(obj.get("delta"))
        elif typ == "response.output_text.done" and not self._delta_text:
            self._add_text(obj.get("text"))
        elif typ in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._delta_reasoning = True
            self._add_reasoning(obj.get("delta"))

    def _response_object(self, resp: dict[str, Any]) -> None:
        self._set_id(resp.get("id"))
        self._error(resp.get("error"))
        self._output_items(resp.get("output"), final=True)

    def _output_items(self, items: Any, *, final: bool) -> None:
        for i, item in enumerate(items if isinstance(items, list) else []):
            self._item(item, i, final=final)

    def _item_key(self, item: dict[str, Any], output_index: Any) -> Any:
        for name in ("id", "call_id"):
            if isinstance(item.get(name), str) and item[name]:
                return ("item", item[name])
        return ("output", output_index) if _int(output_index) is not None else None

    def _item(self, item: Any, output_index: Any, *, final: bool) -> None:
        if not isinstance(item, dict):
            return
        typ = item.get("type")
        if typ == "message":
            if not self._delta_text and final:
                self._add_text(item.get("content"))
            return
        if typ == "reasoning":
            if not self._delta_reasoning and final and ("item", item.get("id")) not in self._by_key:
                self._by_key[("item", item.get("id"))] = None  # type: ignore[assignment]  # once per item
                self._add_reasoning(item.get("summary"))
                self._add_reasoning(item.get("content"))
            return
        if typ not in ("function_call", "custom_tool_call"):
            return
        kind = "custom" if typ == "custom_tool_call" else "function"
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        key = self._item_key(item, output_index)
        call = None
        for k in (key, ("item", call_id) if call_id else None, ("output", _int(output_index))):
            if k is not None and k in self._by_key:
                call = self._by_key[k]
                break
        if call is None:
            call = self._new(key, call_id, kind)
        call.kind = kind
        if call_id and not call.id:
            call.id = call_id
        for k in (key, ("item", call_id) if call_id else None,
                  ("output", output_index) if _int(output_index) is not None else None):
            if k is not None:
                self._by_key[k] = call
        call.set_name(item.get("name"))
        whole = item.get("arguments") if kind == "function" else item.get("input")
        if isinstance(whole, (str, dict, list)) and (final or json_text(whole)):
            call.set(json_text(whole), self.args_limit, final=final)

    def _item_call(self, obj: dict[str, Any], *, custom: bool) -> AssembledCall:
        for k in (("item", obj.get("item_id")), ("output", _int(obj.get("output_index")))):
            if k[1] is not None and k in self._by_key:
                return self._by_key[k]
        key = ("item", obj["item_id"]) if isinstance(obj.get("item_id"), str) else None
        call = self._new(key, None, "custom" if custom else "function")
        if _int(obj.get("output_index")) is not None:
            self._by_key[("output", obj["output_index"])] = call
        return call

    # ------------------------------------------------------------------------- Anthropic

    def _anthropic(self, obj: dict[str, Any], typ: str) -> None:
        if typ == "error":
            self._error(obj.get("error") or obj)
            return
        message = obj.get("message") if typ == "message_start" else obj if typ == "message" else None
        if isinstance(message, dict):
            self._set_id(message.get("id"))
            self._anthropic_usage_of(message.get("usage"))
            for i, block in enumerate(message.get("content") if isinstance(message.get("content"), list) else []):
                self._anthropic_block(("block", i), block, final=typ == "message")
        if typ == "message_delta":
            self._anthropic_usage_of(obj.get("usage"))
        index = _int(obj.get("index"))
        if typ == "content_block_start":
            self._anthropic_block(("block", index), obj.get("content_block"), final=False)
        elif typ == "content_block_delta" and isinstance(obj.get("delta"), dict):
            delta = obj["delta"]
            if delta.get("type") == "text_delta":
                self._add_text(delta.get("text"))
            elif delta.get("type") == "thinking_delta":
                self._add_reasoning(delta.get("thinking"))
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                key = ("block", index)
                call = self._by_key.get(key) or self._new(key, None)
                if key not in self._anthropic_streamed:  # deltas replace an input the start block carried
                    self._anthropic_streamed.add(key)
                    call.set("", self.args_limit, final=False)
                call.add(delta["partial_json"], self.args_limit)

    def _anthropic_block(self, key: Any, block: Any, *, final: bool) -> None:
        if not isinstance(block, dict):
            return
        if block.get("type") == "text":
            self._add_text(block.get("text"))
        elif block.get("type") == "thinking":
            self._add_reasoning(block.get("thinking"))
        elif block.get("type") == "tool_use":
            call_id = block.get("id") if isinstance(block.get("id"), str) and block.get("id") else None
            call = self._by_key.get(key) or self._new(key, call_id)
            call.id = call.id or call_id
            call.set_name(block.get("name"))
            value = block.get("input")
            if final or value not in (None, {}, ""):
                call.set(json_text(value) if value is not None else "", self.args_limit, final=final)

    def _anthropic_usage_of(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._anthropic_usage.update({k: v for k, v in usage.items() if v is not None})
            self.usage = usage_of({"usage": self._anthropic_usage})

    # ---------------------------------------------------------------------------- Ollama

    def _ollama(self, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if isinstance(message, dict):
            self._add_text(message.get("content"))
            self._add_reasoning(message.get("thinking"))
            calls = message.get("tool_calls")
            for tc in calls if isinstance(calls, list) else []:
                if not isinstance(tc, dict):
                    continue
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                call_id = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
                call = self._by_key.get(("id", call_id)) if call_id else None
                if call is None:
                    call = self._new(("id", call_id) if call_id else None, call_id)
                call.set_name(fn.get("name"))
                call.set(json_text(fn.get("arguments")), self.args_limit, final=True)
        if isinstance(obj.get("response"), str):
            self._add_text(obj["response"])


def iter_text_parts(value: Any) -> Iterable[str]:
    """Text of a message ``content`` (a string, or a list of parts with ``text``)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for part in value:
            if isinstance(part, str):
                yield part
            elif isinstance(part, dict):
                for key in ("text", "output", "content"):
                    if isinstance(part.get(key), str):
                        yield part[key]
                        break

"""A minimal OpenAI Chat Completions client (JSON and SSE), standard library only.

It talks to exactly the base URL it is given: proxy environment variables are ignored, so a
benchmark's recording proxy is never bypassed or doubled.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterator


class BackendError(Exception):
    """The backend could not be reached or answered something unusable.

    ``kind``: ``connection`` | ``timeout`` | ``http`` | ``protocol``.
    """

    def __init__(self, kind: str, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status


@dataclass
class ModelReply:
    """One assistant turn. ``tool_calls`` items are ``{"id", "name", "arguments"}`` (arguments raw)."""

    response_id: str | None = None
    text: str = ""
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    reasoning: str = ""
    """The model's reasoning (``reasoning_content``, or ``reasoning`` as some servers name it)."""


class ChatClient:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, stream: bool = True,
                 timeout_s: float = 300.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.stream = stream
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """Send one request; raise :class:`BackendError` on any transport or protocol failure."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools}
        if self.stream:
            body.update(stream=True, stream_options={"include_usage": True})
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                     method="POST")
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                ctype = resp.headers.get("Content-Type", "")
                if "text/event-stream" in ctype:
                    return decode_stream(_sse_data(resp))
                return decode_json(resp.read())
        except urllib.error.HTTPError as exc:
            raise BackendError("http", f"HTTP {exc.code}: {_error_message(exc)}", exc.code) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            kind = "timeout" if isinstance(reason, (socket.timeout, TimeoutError)) else "connection"
            raise BackendError(kind, f"cannot reach {self.url}: {reason}") from None
        except (TimeoutError, socket.timeout):
            raise BackendError("timeout", f"no answer from {self.url} within {self.timeout_s:g} s") from None
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            raise BackendError("connection", f"connection to {self.url} failed: {type(exc).__name__}: {exc}") \
                from None


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(4000)
    except Exception:  # noqa: BLE001 - the status alone is enough
        return str(exc.reason)
    try:
        doc = json.loads(raw)
        err = doc.get("error") if isinstance(doc, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err  # OpenAI object or Ollama's plain string
        if isinstance(msg, str):
            return msg
    except ValueError:
        pass
    return raw.decode("utf-8", "replace").strip()[:500] or str(exc.reason)


def _sse_data(resp: Any) -> Iterator[str]:
    """The ``data`` payloads of an SSE stream, one per event."""
    lines: list[str] = []
    for raw in resp:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
    if lines:
        yield "\n".join(lines)


def decode_json(raw: bytes) -> ModelReply:
    """A non-streamed ``chat.completion``."""
    try:
        doc = json.loads(raw)
        choice = doc["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BackendError("protocol", f"not a chat completion: {raw[:200]!r}") from None
    if not isinstance(message, dict):
        raise BackendError("protocol", "choices[0].message is not an object")
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        args = fn.get("arguments")
        calls.append({"id": str(call.get("id") or f"call_{i}"), "name": str(fn.get("name") or ""),
                      "arguments": args if isinstance(args, str) else json.dumps(args)})
    content = message.get("content")
    usage = doc.get("usage")
    return ModelReply(response_id=_str_or_none(doc.get("id")), text=content if isinstance(content, str) else "",
                      tool_calls=calls, finish_reason=_str_or_none(choice.get("finish_reason")),
                      usage=usage if isinstance(usage, dict) else None, reasoning=_reasoning_of(message))


def _reasoning_of(message: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str):
            return message[key]
    return ""


def decode_stream(payloads: Iterator[str]) -> ModelReply:
    """Assemble ``chat.completion.chunk`` payloads (text deltas, tool-call deltas by index, usage)."""
    reply = ModelReply()
    text: list[str] = []
    thinking: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    seen = False
    for data in payloads:
        if data.strip() == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise BackendError("protocol", f"stream chunk is not JSON: {data[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise BackendError("protocol", "stream chunk is not an object")
        if "error" in chunk:
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise BackendError("protocol", f"error in stream: {msg}")
        seen = True
        reply.response_id = reply.response_id or _str_or_none(chunk.get("id"))
        if isinstance(chunk.get("usage"), dict):
            reply.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason"):
                reply.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            thinking.append(_reasoning_of(delta))
            for tc in delta.get("tool_calls") or []:
                if isinstance(tc, dict):
                    _merge_tool_delta(calls, tc)
    if not seen:
        raise BackendError("protocol", "the stream carried no chunks")
    reply.text = "".join(text)
    reply.reasoning = "".join(thinking)
    reply.tool_calls = [{"id": c["id"] or f"call_{i}", "name": c["name"], "arguments": c["arguments"]}
                        for i, c in sorted(calls.items())]
    return reply


def _merge_tool_delta(calls: dict[int, dict[str, str]], tc: dict[str, Any]) -> None:
    index = tc.get("index", len(calls))
    if not isinstance(index, int):
        index = len(calls)
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if isinstance(tc.get("id"), str) and tc["id"]:
        call["id"] = tc["id"]
    fn = tc.get("function")
    if not isinstance(fn, dict):
        return
    name = fn.get("name")
    if isinstance(name, str) and name and name != call["name"]:
        call["name"] += name  # names normally arrive once; some servers split them
    args = fn.get("arguments")
    if isinstance(args, str):
        call["arguments"] += args
    elif isinstance(args, dict):
        call["arguments"] += json.dumps(args)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None

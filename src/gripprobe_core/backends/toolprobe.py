"""The tool-call probe of ``gripprobe doctor --model``: one real request offering one tool.

The model is asked, in one user message, to read a file with the one tool offered (``read_file`` with a
required string ``path``). The request goes out on the backend's own protocol — OpenAI Chat Completions
(``POST <root>/v1/chat/completions``, what every agent but codex speaks) or Ollama's native chat
(``POST <root>/api/chat``) — without streaming, at temperature 0. What matters is the *shape* of the
answer: a structured tool call (``tool_calls`` in the message) is what an agent can run; a call written
as text in the answer (``<tool_call>{…}</tool_call>``, a JSON block) means the server did not parse the
model's tool-call format (a missing ``--tool-call-parser``, ``--jinja``, or a template without tools),
and the agent would have nothing to run.

The embedded oracle recognizes :data:`PROBE_PROMPT` and answers it as if its reference solution were one
``read`` of :data:`PROBE_PATH` (docs/oracle.md), so each profile answers the probe in its own character.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any, Callable

from ..drivers import ToolCallOutcome, ToolCallProbe
from ..oracle.probe import PROBE_PATH, PROBE_PROMPT, PROBE_TOOL_NAME
from .http import server_root, shown_url

__all__ = ["PROBE_PATH", "PROBE_PROMPT", "PROBE_TOOL", "PROBE_TOOL_NAME", "anthropic_messages_request",
           "chat_completions_request", "judge_anthropic_messages", "judge_chat_completions", "judge_ollama_chat",
           "ollama_chat_request", "post_probe"]

PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Read a text file from the workspace and return its content.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Path of the file, relative to the workspace."}},
            "required": ["path"],
        },
    },
}
"""The one tool offered, in the function-tool shape both Chat Completions and Ollama's ``/api/chat`` take."""

TEXT_EXCERPT = 300
MAX_ANSWER_BYTES = 4 * 1024 * 1024


def _messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": PROBE_PROMPT}]


def chat_completions_request(model_id: str) -> dict[str, Any]:
    """The Chat Completions body: the probe prompt, the one tool, ``tool_choice: auto`` (what agents send;
    vLLM refuses it unless started with ``--enable-auto-tool-choice``), no stream, temperature 0."""
    return {"model": model_id, "messages": _messages(), "tools": [PROBE_TOOL], "tool_choice": "auto",
            "stream": False, "temperature": 0}


def anthropic_messages_request(model_id: str) -> dict[str, Any]:
    """The Anthropic Messages body: the probe prompt, the one tool (``input_schema``), no stream,
    temperature 0 (``max_tokens`` is required on this wire)."""
    fn = PROBE_TOOL["function"]
    return {"model": model_id, "max_tokens": 1024, "messages": _messages(), "stream": False, "temperature": 0,
            "tools": [{"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]}]}


def ollama_chat_request(model_id: str) -> dict[str, Any]:
    """The Ollama ``/api/chat`` body: the probe prompt, the one tool, no stream, temperature 0."""
    return {"model": model_id, "messages": _messages(), "tools": [PROBE_TOOL], "stream": False,
            "options": {"temperature": 0}}


# ------------------------------------------------------------------------------------- judging

Judged = dict[str, Any]
"""Keyword arguments of :class:`ToolCallProbe` (all but ``endpoint`` and ``latency_ms``)."""


def _error_message(data: Any) -> str | None:
    """The server's error text: OpenAI ``{"error": {"message"}}``, Ollama ``{"error": "…"}``, vLLM's
    ``{"message": …}``, FastAPI's ``{"detail": …}``."""
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    for key in ("error", "message", "detail"):
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    return None


def _judge_http(status: int, body: bytes) -> tuple[Any, Judged | None]:
    """``(decoded JSON, None)`` for a 2xx JSON answer, else ``(None, the error outcome)``."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    if not 200 <= status < 300:
        said = _error_message(data) or body[:200].decode("utf-8", "replace").strip() or "no body"
        return None, {"outcome": "error", "http_status": status, "error": f"HTTP {status}: {said}"[:400]}
    if len(body) > MAX_ANSWER_BYTES:
        return None, {"outcome": "error", "http_status": status, "error": "the answer is over 4 MiB"}
    if not isinstance(data, dict):
        return None, {"outcome": "error", "http_status": status, "error": "the answer is not a JSON object"}
    return data, None


def _call_of(raw: Any) -> tuple[str | None, Any]:
    """``(name, arguments)`` of one tool call in either shape (``{"function": {name, arguments}}`` or flat)."""
    if not isinstance(raw, dict):
        return None, None
    inner = raw.get("function")
    fn: dict[str, Any] = inner if isinstance(inner, dict) else raw
    name = fn.get("name")
    return (name if isinstance(name, str) and name else None), fn.get("arguments")


def _judge_calls(calls: list[Any], status: int) -> Judged:
    name, args = _call_of(calls[0])
    parsed = args
    if isinstance(args, str):
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError:
            return {"outcome": "malformed", "http_status": status, "tool_name": name, "arguments": args,
                    "error": "a structured call whose arguments are not valid JSON"}
    out: Judged = {"http_status": status, "tool_name": name, "arguments": parsed}
    if name != PROBE_TOOL_NAME:
        return {**out, "outcome": "malformed",
                "error": f"a structured call of {name!r}, not of the one tool offered ({PROBE_TOOL_NAME!r})"
                if name else "a structured call without a tool name"}
    if not isinstance(parsed, dict):
        return {**out, "outcome": "malformed", "error": "a structured call whose arguments are not a JSON object"}
    if not isinstance(parsed.get("path"), str) or not parsed["path"]:
        return {**out, "outcome": "malformed", "error": "a structured call without its required 'path' argument"}
    return {**out, "outcome": "structured"}


def _judge_text(content: Any, reasoning: Any, status: int, finish: Any = None) -> Judged:
    from ..proxy.text_tools import scan_text_tool_calls

    text = content if isinstance(content, str) else ""
    found = scan_text_tool_calls(text) if text else []
    written = tuple(dict.fromkeys(c.name for c in found))
    if written:
        why = (f"no structured call: the model wrote {', '.join(written)} as text, which the server did not "
               "parse into tool_calls")
    elif text.strip():
        why = "no structured call: the model answered in text"
    elif isinstance(reasoning, str) and reasoning.strip():
        why = "no structured call and no answer text (the model only reasoned)"
        text = reasoning
    else:
        why = "no structured call and an empty answer"
    if finish == "length":
        why += " (cut off at the token limit)"
    excerpt = " ".join(text.split())[:TEXT_EXCERPT] or None
    return {"outcome": "text", "http_status": status, "text": excerpt, "text_tool_calls": written,
            "text_tool_syntaxes": tuple(dict.fromkeys(c.syntax for c in found)), "error": why}


def judge_chat_completions(status: int, body: bytes) -> Judged:
    """A Chat Completions answer: ``choices[0].message.tool_calls``, else its ``content``."""
    data, failed = _judge_http(status, body)
    if failed is not None:
        return failed
    choices = data.get("choices")
    msg = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
        else None
    if not isinstance(msg, dict):
        return {"outcome": "error", "http_status": status,
                "error": "not a Chat Completions answer (no choices[0].message)"}
    served = data.get("model") if isinstance(data.get("model"), str) else None
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and calls:
        return {**_judge_calls(calls, status), "served_by": served}
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    return {**_judge_text(msg.get("content"), reasoning, status, choices[0].get("finish_reason")), "served_by": served}


def judge_ollama_chat(status: int, body: bytes) -> Judged:
    """An Ollama ``/api/chat`` answer (``"stream": false``): ``message.tool_calls``, else ``message.content``."""
    data, failed = _judge_http(status, body)
    if failed is not None:
        return failed
    msg = data.get("message")
    if not isinstance(msg, dict):
        return {"outcome": "error", "http_status": status, "error": "not an Ollama chat answer (no message)"}
    served = data.get("model") if isinstance(data.get("model"), str) else None
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and calls:
        return {**_judge_calls(calls, status), "served_by": served}
    return {**_judge_text(msg.get("content"), msg.get("thinking"), status, data.get("done_reason")),
            "served_by": served}


def judge_anthropic_messages(status: int, body: bytes) -> Judged:
    """An Anthropic ``message``: its ``tool_use`` blocks, else its ``text`` (``thinking`` as reasoning)."""
    data, failed = _judge_http(status, body)
    if failed is not None:
        return failed
    blocks = data.get("content")
    if data.get("type") != "message" or not isinstance(blocks, list):
        return {"outcome": "error", "http_status": status, "error": "not an Anthropic message (no content blocks)"}
    blocks = [b for b in blocks if isinstance(b, dict)]
    served = data.get("model") if isinstance(data.get("model"), str) else None
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    if uses:
        calls = [{"name": b.get("name"), "arguments": b.get("input")} for b in uses]
        return {**_judge_calls(calls, status), "served_by": served}
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    thinking = "".join(b["thinking"] for b in blocks if isinstance(b.get("thinking"), str))
    finish = "length" if data.get("stop_reason") == "max_tokens" else None
    return {**_judge_text(text, thinking, status, finish), "served_by": served}


# ------------------------------------------------------------------------------------- sending

async def post_probe(url: str, path: str, body: dict[str, Any], judge: Callable[[int, bytes], Judged], *,
                     api_key: str | None, timeout_s: float, headers: dict[str, str] | None = None) -> ToolCallProbe:
    """POST ``body`` to ``<root of url><path>`` and judge the answer; never raises for what the server does."""
    import aiohttp

    target = server_root(url) + path
    endpoint = f"POST {shown_url(target)}"
    headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    t0 = time.monotonic()
    outcome: ToolCallOutcome = "error"
    judged: Judged
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.post(target, json=body, headers=headers) as resp:
                raw = await resp.content.read(MAX_ANSWER_BYTES + 1)
                judged = judge(resp.status, raw)
    except asyncio.TimeoutError:
        judged = {"outcome": outcome, "error": f"no answer within {timeout_s:g} s"}
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        judged = {"outcome": outcome, "error": "connection refused" if refused else f"cannot connect: {exc.os_error}"}
    except (aiohttp.InvalidURL, ValueError):
        judged = {"outcome": outcome, "error": "not an http(s) URL"}
    except (aiohttp.ClientError, OSError, socket.error) as exc:
        judged = {"outcome": outcome, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return ToolCallProbe(endpoint=endpoint, latency_ms=round((time.monotonic() - t0) * 1000, 1), **judged)

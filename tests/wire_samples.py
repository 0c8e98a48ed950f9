"""Real-shaped model-server traffic for the wire-parser tests (no test functions here).

Chat Completions bytes come from the real oracle backend (a real aiohttp server on 127.0.0.1, read by
a real client). Responses API streams are shaped like OpenAI's (``event:`` + ``data:`` lines, the
event sequence codex consumes, items as in ``/work/shared/agents/codex/samples/*/rollout.jsonl``);
Ollama streams follow Ollama's documented NDJSON for ``/api/chat`` and ``/api/generate``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterable

import aiohttp
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import OracleServer
from gripprobe_core.proxy.observe import ExchangeObserver

S = {"type": "string"}


def fn(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": list(props)}}}


REF_TOOLS = [fn("shell", {"command": S}), fn("read", {"path": S}), fn("write", {"path": S, "content": S}),
             fn("edit", {"path": S, "old": S, "new": S})]
ACTIONS = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "cat hello.txt"},
])


# ------------------------------------------------------------------------------- the real oracle

async def _oracle_exchanges(bodies: list[dict[str, Any]]) -> list[tuple[bytes, int, str, bytes]]:
    """POST each body to a fresh oracle; ``(request bytes, status, content type, raw response bytes)``."""
    out = []
    async with OracleServer(ACTIONS) as oracle:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for body in bodies:
                data = json.dumps(body).encode()
                async with session.post(oracle.base_url + "/v1/chat/completions", data=data,
                                        headers={"Content-Type": "application/json"}) as resp:
                    raw = await resp.read()
                    out.append((data, resp.status, resp.headers.get("Content-Type", ""), raw))
    return out


def oracle_chat(*, stream: bool = True, conversation: list[dict[str, Any]] | None = None,
                model: str = "perfect") -> tuple[bytes, int, str, bytes]:
    """One real Chat Completions exchange with the oracle (tools: the reference agent's)."""
    body: dict[str, Any] = {"model": model, "stream": stream, "tools": REF_TOOLS,
                            "messages": conversation or [{"role": "user", "content": "create hello.txt"}]}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return asyncio.run(_oracle_exchanges([body]))[0]


def oracle_conversation(model: str = "perfect") -> list[tuple[bytes, int, str, bytes]]:
    """A whole tool loop against the oracle, the way an agent runs it: call → result → call → result → answer.

    Tool results are written the way the reference agent writes them (``exit code: N`` for shell).
    """
    async def main() -> list[tuple[bytes, int, str, bytes]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "create hello.txt then show it"}]
        exchanges = []
        async with OracleServer(ACTIONS) as oracle:
            async with aiohttp.ClientSession() as session:
                for _ in range(6):
                    body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                            "tools": REF_TOOLS, "messages": messages}
                    data = json.dumps(body).encode()
                    async with session.post(oracle.base_url + "/v1/chat/completions", data=data,
                                            headers={"Content-Type": "application/json"}) as resp:
                        raw = await resp.read()
                        exchanges.append((data, resp.status, resp.headers.get("Content-Type", ""), raw))
                    calls = chat_calls(raw)
                    if not calls:
                        break
                    messages = messages + [{"role": "assistant", "content": None, "tool_calls": calls}]
                    for call in calls:
                        output = ("exit code: 0\nhello world\n" if call["function"]["name"] == "shell"
                                  else "wrote 12 bytes to hello.txt")
                        messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        return exchanges
    return asyncio.run(main())


def chat_calls(raw: bytes) -> list[dict[str, Any]]:
    """The tool calls of a Chat Completions SSE body, assembled naively (for driving the loop)."""
    calls: dict[int, dict[str, Any]] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for choice in chunk.get("choices") or []:
            for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": None, "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                call["id"] = tc.get("id") or call["id"]
                call["function"]["name"] += (tc.get("function") or {}).get("name") or ""
                call["function"]["arguments"] += (tc.get("function") or {}).get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


# ------------------------------------------------------------------------------ Responses API

def sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


CODEX_CMD_ARGS = json.dumps({"cmd": "printf 'hello world\\n' > hello.txt"})
CODEX_PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello world\n*** End Patch\n"
RESPONSES_USAGE = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                   "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}


def _pieces(text: str, n: int = 4) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


def responses_stream(*, custom: bool = False, text: str = "", response_id: str = "resp_55c7761f31f94cd9") -> bytes:
    """A Responses API SSE stream: optional text message, then one function_call (exec_command) or
    custom_tool_call (apply_patch), then response.completed with usage."""
    seq = iter(range(1000))
    base = {"id": response_id, "object": "response", "created_at": 1795342466, "model": "fake-model",
            "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "sequence_number": next(seq), "response": base}),
        ("response.in_progress", {"type": "response.in_progress", "sequence_number": next(seq), "response": base}),
    ]
    output: list[dict[str, Any]] = []
    index = 0
    if text:
        msg = {"id": "msg_ffe41a41e5ab", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                      "sequence_number": next(seq), "output_index": index, "item": msg}))
        for piece in _pieces(text):
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": msg["id"],
                "output_index": index, "content_index": 0, "delta": piece}))
        events.append(("response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(seq),
                                                     "item_id": msg["id"], "output_index": index, "content_index": 0,
                                                     "text": text}))
        done_msg = {**msg, "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        events.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                     "output_index": index, "item": done_msg}))
        output.append(done_msg)
        index += 1
    if custom:
        item = {"id": "ctc_46b234fadbbb", "type": "custom_tool_call", "status": "in_progress",
                "call_id": "call_19f644bbda", "name": "apply_patch", "input": ""}
        whole, delta_type, done_type, key = CODEX_PATCH, "response.custom_tool_call_input.delta", \
            "response.custom_tool_call_input.done", "input"
    else:
        item = {"id": "fc_1ea69bf0e501", "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": "call_a3b8c7985e", "name": "exec_command"}
        whole, delta_type, done_type, key = CODEX_CMD_ARGS, "response.function_call_arguments.delta", \
            "response.function_call_arguments.done", "arguments"
    events.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                  "output_index": index, "item": item}))
    for piece in _pieces(whole):
        events.append((delta_type, {"type": delta_type, "sequence_number": next(seq), "item_id": item["id"],
                                    "output_index": index, "delta": piece}))
    events.append((done_type, {"type": done_type, "sequence_number": next(seq), "item_id": item["id"],
                               "output_index": index, key: whole}))
    done_item = {**item, "status": "completed", key: whole}
    events.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                 "output_index": index, "item": done_item}))
    output.append(done_item)
    final = {**base, "status": "completed", "output": output, "usage": RESPONSES_USAGE}
    events.append(("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                          "response": final}))
    return sse(events)


def responses_request(*, results: bool = False, stream: bool = True) -> bytes:
    """A codex-shaped Responses request; with ``results``, the conversation holds one
    function_call + function_call_output and one custom_tool_call + custom_tool_call_output."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Create hello.txt"}]}]
    if results:
        items += [
            {"type": "function_call", "name": "exec_command", "arguments": CODEX_CMD_ARGS, "call_id": "call_a3b8c7985e"},
            {"type": "function_call_output", "call_id": "call_a3b8c7985e",
             "output": "Chunk ID: 7cbf58\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
                       "Original token count: 0\nOutput:\n"},
            {"type": "custom_tool_call", "name": "apply_patch", "input": CODEX_PATCH, "call_id": "call_19f644bbda"},
            {"type": "custom_tool_call_output", "call_id": "call_19f644bbda",
             "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA hello.txt\n"},
            {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"printf hello > hello.txt",
             "call_id": "call_ec528305f9"},
            {"type": "function_call_output", "call_id": "call_ec528305f9",
             "output": "failed to parse function arguments: EOF while parsing a string at line 1 column 33"},
        ]
    return json.dumps({"model": "fake-model", "instructions": "You are Codex.", "input": items,
                       "tools": [{"type": "function", "name": "exec_command", "parameters": {}},
                                 {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}],
                       "tool_choice": "auto", "parallel_tool_calls": False, "store": False, "stream": stream,
                       "include": []}).encode()


def responses_json() -> bytes:
    """A non-streamed Responses API reply: a message and one function call."""
    return json.dumps({
        "id": "resp_nonstream", "object": "response", "status": "completed", "model": "fake-model",
        "output": [
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Running it.", "annotations": []}]},
            {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
             "name": "exec_command", "arguments": CODEX_CMD_ARGS}],
        "usage": RESPONSES_USAGE}).encode()


# -------------------------------------------------------------------------------------- Ollama

def ndjson(lines: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _ollama_head() -> dict[str, Any]:
    return {"model": "qwen3:8b", "created_at": "2025-07-22T20:33:28.123648Z"}


OLLAMA_DONE = {"done_reason": "stop", "done": True, "total_duration": 885095291, "load_duration": 3753500,
               "prompt_eval_count": 122, "prompt_eval_duration": 328493000, "eval_count": 33,
               "eval_duration": 552222000}


def ollama_chat_stream(*, with_ids: bool = False, text: str = "") -> bytes:
    """``/api/chat`` NDJSON: text pieces, one chunk with two complete tool calls (arguments are
    objects), then the ``done`` line with the counters."""
    lines = [{**_ollama_head(), "message": {"role": "assistant", "content": piece}, "done": False}
             for piece in _pieces(text)] if text else []
    calls = [{"function": {"name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}}},
             {"function": {"name": "shell", "arguments": {"command": "cat hello.txt"}}}]
    if with_ids:
        calls = [{"id": f"call_ol{i}", "function": {"index": i, **c["function"]}} for i, c in enumerate(calls)]
    lines.append({**_ollama_head(), "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False})
    lines.append({**_ollama_head(), "message": {"role": "assistant", "content": ""}, **OLLAMA_DONE})
    return ndjson(lines)


def ollama_chat_json() -> bytes:
    """``/api/chat`` with ``"stream": false``: one JSON object."""
    return json.dumps({**_ollama_head(), "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "read", "arguments": {"path": "hello.txt"}}}]}, **OLLAMA_DONE}).encode()


def ollama_generate_stream(text: str = "The sky is blue.") -> bytes:
    lines = [{**_ollama_head(), "response": piece, "done": False} for piece in _pieces(text)]
    lines.append({**_ollama_head(), "response": "", **OLLAMA_DONE, "context": [1, 2, 3]})
    return ndjson(lines)


def ollama_request(*, results: bool = False, stream: bool | None = None) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "create hello.txt"}]
    if results:
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}}}]},
            {"role": "tool", "content": "wrote 12 bytes to hello.txt", "tool_name": "write"},
        ]
    body: dict[str, Any] = {"model": "qwen3:8b", "messages": messages, "tools": REF_TOOLS}
    if stream is not None:
        body["stream"] = stream
    return json.dumps(body).encode()


OLLAMA_UNSUPPORTED = json.dumps(
    {"error": "registry.ollama.ai/library/gemma2:latest does not support tools"}).encode()


# ---------------------------------------------------------------------------------- observing

def observe(body: bytes, chunks: Iterable[bytes], *, path: str = "/v1/chat/completions", method: str = "POST",
            status: int | None = 200, content_type: str = "text/event-stream", query: str = "",
            headers: dict[str, str] | None = None, budget: int = 256 * 1024,
            proxy_error: str | None = None) -> dict[str, Any]:
    """Run a real :class:`ExchangeObserver` over one exchange and return its record."""
    obs = ExchangeObserver(method=method, path=path, query=query, upstream_url="http://127.0.0.1:11434",
                           request_headers=headers or {"Content-Type": "application/json"},
                           request_body=body, body_budget=budget)
    for chunk in chunks:
        obs.feed(chunk)
    return obs.finish(status=status, response_headers={"Content-Type": content_type}, duration_ms=12.5,
                      ttfb_ms=1.5, proxy_error=proxy_error)


def split_at(data: bytes, *cuts: int) -> list[bytes]:
    points = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:])]


def stable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the fields that differ between two runs of the same exchange."""
    return {k: v for k, v in record.items() if k != "x_gripprobe_timestamp"}

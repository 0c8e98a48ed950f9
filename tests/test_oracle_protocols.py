"""The oracle's protocol front ends over real HTTP: Responses (JSON + SSE), Ollama native (NDJSON + JSON),
the listing endpoints, error shapes per protocol, pacing, stalls, and freeform (custom) tool calls. The
V4A patches said to codex are the codex plugin's (plugins/gripprobe_codex/tests/test_codex_dialect.py)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import OracleServer, parse_responses_request
from gripprobe_core.oracle.chat_api import ChatCompletionsWire
from gripprobe_core.oracle.dialects import MISSING_FILE, known_content
from gripprobe_core.oracle.ollama_api import OLLAMA_VERSION, OllamaChatWire, OllamaGenerateWire
from gripprobe_core.oracle.conversation import RequestError
from gripprobe_core.oracle.profiles import SIDE_ANSWER, ProfileContext
from gripprobe_core.oracle.responses_api import ResponsesWire
from gripprobe_core.oracle.wire import ReplyMeta, estimate_usage
from gripprobe_core.testing import read_sse_events, responses_user_item

CODEX_TOOLS = json.loads((Path(__file__).parent / "fixtures" / "codex_0.169.0_tools.json").read_text())
"""The exact ``tools`` array codex 0.169.0 sends (exec_command, apply_patch as a custom tool, web_search …)."""

S = {"type": "string"}
RESPONSES_TOOLS: list[dict[str, Any]] = CODEX_TOOLS
OLLAMA_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": props, "required": list(props)}}}
    for n, props in [("shell", {"command": S}), ("write", {"path": S, "content": S}),
                     ("edit", {"path": S, "old": S, "new": S})]]

PLAN = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "ls -1"},
    {"edit": {"path": "hello.txt", "old": "world", "new": "there"}},
])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def read_ndjson(resp: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/x-ndjson")
    raw = await resp.read()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.decode().split("\n")[:-1]]


def test_responses_text_stream_and_request_normalization() -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            body = {"model": "lazy", "input": [responses_user_item("go")], "tools": RESPONSES_TOOLS, "stream": True}
            events = await read_sse_events(await s.post(oracle.base_url + "/responses", json=body))
            names = [n for n, _ in events]
            n = names.count("response.output_text.delta")
            assert n >= 2 and names == [
                "response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", *["response.output_text.delta"] * n, "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed"]
            text = "".join(d["delta"] for nm, d in events if nm == "response.output_text.delta")
            assert text.startswith("To solve this I would") and events[-4][1]["text"] == text
            assert events[-1][1]["response"]["output"][0]["content"] == [
                {"type": "output_text", "text": text, "annotations": []}]
            # no tools at all: a side request, answered in text, no call issued
            doc = await (await s.post(oracle.base_url + "/v1/responses",
                                      json={"model": "perfect", "input": "title please"})).json()
            assert doc["output"][0]["content"][0]["text"] == SIDE_ANSWER and oracle.ground_truth == []
            for bad in (b"\xff", b"[]", json.dumps({"model": "perfect", "input": 3}).encode(),
                        json.dumps({"model": "perfect", "input": ["not an object"]}).encode()):
                resp = await s.post(oracle.base_url + "/v1/responses", data=bad)
                assert resp.status == 400 and "invalid request" in (await resp.json())["error"]["message"]

    run(main())

    req = parse_responses_request({"model": "m", "instructions": "sys", "tools": RESPONSES_TOOLS, "input": [
        responses_user_item("do it"),
        {"role": "assistant", "content": "thinking out loud"},
        {"type": "function_call", "call_id": "a", "name": "exec_command", "arguments": "{\"cmd\": \"ls\"}"},
        {"type": "function_call", "call_id": "b", "name": "exec_command", "arguments": "{\"cmd\": \"pwd\"}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
        {"type": "function_call_output", "call_id": "b", "output": "/w"},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "P"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "done"}]})
    assert req.protocol == "responses" and req.messages[0] == {"role": "system", "content": "sys"}
    assert req.tool_call_turns() == 2  # parallel calls of one response are one turn
    assert req.messages[2]["content"] == "thinking out loud" and len(req.messages[2]["tool_calls"]) == 2
    assert req.last_tool_output() == "done"
    assert [t.name for t in req.custom_tools] == ["apply_patch"] and "exec_command" in [t.name for t in req.tools]


# ------------------------------------------------------------------------------------ Ollama API

def test_ollama_chat_ndjson_json_and_tool_results() -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            url = oracle.base_url + "/api/chat"
            messages: list[dict[str, Any]] = [{"role": "user", "content": "do it"}]
            lines = await read_ndjson(await s.post(url, json={"model": "perfect:latest", "messages": messages,
                                                             "tools": OLLAMA_TOOLS}))
            assert [x["done"] for x in lines] == [False] * (len(lines) - 1) + [True]
            (call,) = [c for x in lines for c in x["message"].get("tool_calls", [])]
            assert call == {"id": "call_oracle_0001", "function": {
                "index": 0, "name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}}}
            last = lines[-1]
            assert last["done_reason"] == "stop" and last["eval_count"] > 0 and last["prompt_eval_count"] > 0
            assert last["message"] == {"role": "assistant", "content": ""} and last["model"] == "perfect:latest"
            # the tool result in Ollama's shape (arguments as an object, tool_name) advances the plan
            messages += [{"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "write", "arguments": call["function"]["arguments"]}}]},
                         {"role": "tool", "tool_name": "write", "content": "ok"}]
            resp = await s.post(url, json={"model": "perfect", "messages": messages, "tools": OLLAMA_TOOLS,
                                           "stream": False})
            assert resp.headers["Content-Type"].startswith("application/json")
            doc = await resp.json()
            assert doc["done"] is True and doc["eval_count"] > 0
            assert doc["message"]["tool_calls"][0]["function"]["arguments"] == {"command": "ls -1"}
            # text streams in pieces
            lines = await read_ndjson(await s.post(url, json={"model": "lazy", "messages": messages[:1],
                                                             "tools": OLLAMA_TOOLS}))
            assert len(lines) >= 3 and "".join(x["message"]["content"] for x in lines).startswith("To solve")
            assert [g["protocol"] for g in oracle.ground_truth] == ["ollama_chat"] * 2
            for bad in (b"{", b'"x"', json.dumps({"model": "perfect", "messages": [1]}).encode()):
                resp = await s.post(url, data=bad)
                assert resp.status == 400 and isinstance((await resp.json())["error"], str)

    run(main())


def test_ollama_generate_and_listing_endpoints() -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            base = oracle.base_url
            lines = await read_ndjson(await s.post(base + "/api/generate", json={"model": "perfect", "prompt": "hi"}))
            assert "".join(x["response"] for x in lines) == SIDE_ANSWER
            assert lines[-1]["done"] is True and lines[-1]["eval_count"] > 0 and "context" in lines[-1]
            doc = await (await s.post(base + "/api/generate", json={"model": "perfect", "prompt": "hi",
                                                                    "system": "s", "stream": False})).json()
            assert doc["response"] == SIDE_ANSWER and doc["done"] is True
            assert (await s.post(base + "/api/generate", json={"prompt": 5})).status == 400

            assert await (await s.get(base + "/api/version")).json() == {"version": OLLAMA_VERSION}
            version = tuple(int(x) for x in OLLAMA_VERSION.split("."))
            assert version >= (0, 13, 4)  # codex --oss refuses older servers
            tags = await (await s.get(base + "/api/tags")).json()
            assert {m["name"] for m in tags["models"]} >= {"perfect:latest", "stall:latest", "tools-unsupported:latest"}
            assert all(m["details"]["format"] == "gguf" for m in tags["models"])
            show = await (await s.post(base + "/api/show", json={"model": "perfect:latest"})).json()
            assert show["capabilities"] == ["completion", "tools"] and show["model_info"]["oracle.context_length"] > 0
            show = await (await s.post(base + "/api/show", json={"name": "tools-unsupported"})).json()
            assert show["capabilities"] == ["completion"]
            assert (await s.post(base + "/api/show", json={})).status == 400
            assert (await s.post(base + "/api/show", data=b"\xfe")).status == 400
            ps = await (await s.get(base + "/api/ps")).json()
            assert [m["name"] for m in ps["models"]] == ["perfect:latest"]
            assert await (await s.get(base + "/")).text() == "Ollama is running"
            models = await (await s.get(base + "/models")).json()
            assert "slow-stream" in {m["id"] for m in models["data"]}

    run(main())


# --------------------------------------------------------------------------- profiles on every wire

def test_error_profiles_use_each_protocols_error_shape() -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            base = oracle.base_url
            chat = {"messages": [{"role": "user", "content": "x"}], "tools": OLLAMA_TOOLS}
            cases = [("/v1/chat/completions", chat), ("/api/chat", chat),
                     ("/v1/responses", {"input": "x", "tools": RESPONSES_TOOLS})]
            for path, body in cases:
                resp = await s.post(base + path, json={**body, "model": "http-500"})
                assert resp.status == 500, path
                err = (await resp.json())["error"]
                assert ("internal server error" in (err if path.startswith("/api") else err["message"])), path

                resp = await s.post(base + path, json={**body, "model": "tools-unsupported"})
                assert resp.status == 400
                err = (await resp.json())["error"]
                message = err if path.startswith("/api") else err["message"]
                assert message == "registry.ollama.ai/library/tools-unsupported:latest does not support tools"
            # without tools, tools-unsupported and http-500 still answer (a side request)
            doc = await (await s.post(base + "/api/chat", json={"model": "tools-unsupported", "stream": False,
                                                               "messages": [{"role": "user", "content": "x"}]})).json()
            assert doc["message"]["content"] == SIDE_ANSWER
            assert oracle.ground_truth == []
            assert {e["reply"] for e in oracle.request_log} == {"error", "text"}

    run(main())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/api/chat"])
def test_misbehaving_profiles_on_every_protocol(path: str) -> None:
    """malformed-args, retry-loop, text-tools and error-then-recover speak every tool protocol."""
    responses = path == "/v1/responses"
    tools = RESPONSES_TOOLS if responses else OLLAMA_TOOLS

    def body(model: str, history: list[dict[str, Any]]) -> dict[str, Any]:
        key = "input" if responses else "messages"
        return {"model": model, key: history, "tools": tools, "stream": False}

    def first_call(doc: dict[str, Any]) -> tuple[str, Any] | None:
        if responses:
            calls = [o for o in doc["output"] if o["type"] != "message"]
            return (calls[0]["name"], calls[0].get("arguments", calls[0].get("input"))) if calls else None
        msg = doc["choices"][0]["message"] if "choices" in doc else doc["message"]
        calls = msg.get("tool_calls") or []
        return (calls[0]["function"]["name"], calls[0]["function"]["arguments"]) if calls else None

    def text_of(doc: dict[str, Any]) -> str:
        if responses:
            return "".join(c["text"] for o in doc["output"] if o["type"] == "message" for c in o["content"])
        msg = doc["choices"][0]["message"] if "choices" in doc else doc["message"]
        return msg["content"] or ""

    def after(history: list[dict[str, Any]], call: tuple[str, Any], output: str) -> list[dict[str, Any]]:
        if responses:
            return history + [{"type": "function_call", "call_id": "x", "name": call[0],
                               "arguments": call[1] if isinstance(call[1], str) else json.dumps(call[1])},
                              {"type": "function_call_output", "call_id": "x", "output": output}]
        args = call[1] if isinstance(call[1], str) else json.dumps(call[1])
        return history + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": call[0], "arguments": args}}]},
                          {"role": "tool", "tool_call_id": "x", "content": output}]

    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            async def ask(model: str, history: list[dict[str, Any]]) -> dict[str, Any]:
                resp = await s.post(oracle.base_url + path, json=body(model, history))
                assert resp.status == 200
                return await resp.json()

            start = [{"role": "user", "content": "do it"}]
            # malformed-args: a function call whose arguments are broken, then a give-up text
            call = first_call(await ask("malformed-args", start))
            assert call is not None
            if path == "/api/chat":
                assert call[1] == {}  # Ollama arguments are objects: the required ones are missing
            else:
                assert isinstance(call[1], str)
                with pytest.raises(ValueError):
                    json.loads(call[1])
            doc = await ask("malformed-args", after(start, call, "error: invalid arguments"))
            assert first_call(doc) is None and "give up" in text_of(doc)

            # retry-loop: the same failing call three times, then a give-up text
            history, seen = start, []
            for _ in range(3):
                call = first_call(await ask("retry-loop", history))
                assert call is not None
                seen.append(call)
                history = after(history, call, "cat: gripprobe-missing-file.txt: No such file or directory")
            assert seen[0] == seen[1] == seen[2] and MISSING_FILE in json.dumps(seen[0])
            doc = await ask("retry-loop", history)
            assert first_call(doc) is None and "give up" in text_of(doc)

            # error-then-recover: the failing call, then the plan's first action
            call = first_call(await ask("error-then-recover", start))
            assert call == seen[0]
            call = first_call(await ask("error-then-recover", after(start, call, "exit code: 1")))
            assert call is not None and call[0] in ("exec_command", "write")  # codex's shell without its dialect

            # text-tools: every planned call as <tool_call> text, no structured call; then it stops
            doc = await ask("text-tools", start)
            assert first_call(doc) is None
            text = text_of(doc)
            assert text.count("<tool_call>") == text.count("</tool_call>") == len(PLAN)
            assert ('"name": "exec_command"' if responses else '"name": "write"') in text
            history = start + ([{"role": "assistant", "content": [{"type": "output_text", "text": text}]}]
                               if responses else [{"role": "assistant", "content": text}])
            doc = await ask("text-tools", history)
            assert first_call(doc) is None and "<tool_call>" not in text_of(doc)

            truth = oracle.ground_truth
            protocol = {"/v1/chat/completions": "chat_completions", "/v1/responses": "responses",
                        "/api/chat": "ollama_chat"}[path]
            assert {g["protocol"] for g in truth} == {protocol}
            text_entries = [g for g in truth if not g["structured"]]
            assert [g["tool_call_id"] for g in text_entries] == ["text-1", "text-2", "text-3"]
            assert [g["action_index"] for g in text_entries] == [0, 1, 2]
            assert [g["profile"] for g in truth if g["structured"]] == (
                ["malformed-args"] + ["retry-loop"] * 3 + ["error-then-recover"] * 2)

    run(main())


def test_slow_stream_paces_every_protocol() -> None:
    async def main() -> None:
        async with OracleServer(PLAN) as oracle, aiohttp.ClientSession() as s:
            for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                         "tools": OLLAMA_TOOLS, "stream": True}),
                               ("/api/chat", {"messages": [{"role": "user", "content": "x"}], "tools": OLLAMA_TOOLS}),
                               ("/v1/responses", {"input": "x", "tools": RESPONSES_TOOLS, "stream": True})]:
                started = time.monotonic()
                resp = await s.post(oracle.base_url + path, json={**body, "model": "slow-stream"})
                chunks = 0
                async for _ in resp.content.iter_any():
                    chunks += 1
                elapsed = time.monotonic() - started
                assert elapsed >= 0.55, (path, elapsed)
                # bytes really arrive over time (an Ollama tool call is a single line after the wait)
                assert chunks >= (2 if path == "/api/chat" else 10), (path, chunks)
            started = time.monotonic()
            doc = await (await s.post(oracle.base_url + "/api/chat", json={
                "model": "slow-stream", "messages": [{"role": "user", "content": "x"}], "tools": OLLAMA_TOOLS,
                "stream": False})).json()
            assert time.monotonic() - started >= 0.55 and doc["message"]["tool_calls"]
            assert [g["profile"] for g in oracle.ground_truth] == ["slow-stream"] * 4

    run(main())


def test_stall_never_answers_and_stop_does_not_hang() -> None:
    async def main() -> None:
        oracle = OracleServer(PLAN)
        await oracle.start()
        async with aiohttp.ClientSession() as s:
            # a client that gives up frees its stalled request
            with pytest.raises(asyncio.TimeoutError):
                await s.post(oracle.base_url + "/v1/responses", json={"model": "stall", "input": "x",
                                                                      "tools": RESPONSES_TOOLS},
                             timeout=aiohttp.ClientTimeout(total=0.3))
            for _ in range(40):
                if oracle.pending_stalls == 0:
                    break
                await asyncio.sleep(0.05)
            assert oracle.pending_stalls == 0
            # side requests are still answered by the stall profile
            doc = await (await s.post(oracle.base_url + "/api/chat", json={
                "model": "stall", "stream": False, "messages": [{"role": "user", "content": "x"}]})).json()
            assert doc["message"]["content"] == SIDE_ANSWER
            pending = [asyncio.create_task(s.post(oracle.base_url + path, json=body)) for path, body in [
                ("/api/chat", {"model": "stall", "messages": [], "tools": OLLAMA_TOOLS}),
                ("/v1/chat/completions", {"model": "stall", "messages": [], "tools": OLLAMA_TOOLS, "stream": True})]]
            await asyncio.sleep(0.5)
            assert not any(t.done() for t in pending) and oracle.pending_stalls == 2
            started = time.monotonic()
            await oracle.stop()
            assert time.monotonic() - started < 0.5
            for task in pending:
                with pytest.raises(aiohttp.ClientError):
                    await task
        assert oracle.ground_truth == [] and [e["reply"] for e in oracle.request_log] == ["stall", "text",
                                                                                          "stall", "stall"]

    run(main())


def test_record_is_written_incrementally_and_on_stop(tmp_path: Path) -> None:
    record = tmp_path / "deep" / "oracle.jsonl"
    record.parent.mkdir()
    record.write_text("stale\n")

    async def main() -> None:
        async with OracleServer(PLAN, record_path=record) as oracle, aiohttp.ClientSession() as s:
            assert record.read_text() == ""
            await s.post(oracle.base_url + "/api/chat", json={
                "model": "ollama/perfect:7b", "stream": False, "messages": [{"role": "user", "content": "x"}],
                "tools": OLLAMA_TOOLS})
            lines = [json.loads(x) for x in record.read_text().splitlines()]
            assert lines == oracle.ground_truth and lines[0]["profile"] == "perfect"
        assert [json.loads(x) for x in record.read_text().splitlines()] == oracle.ground_truth

    run(main())


# --------------------------------------------------------------------------- bad input never breaks

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from(
        ["user", "assistant", "tool", "function_call", "custom_tool_call", "function_call_output", "message",
         "custom", "function", "apply_patch", "exec_command", "perfect", "text-tools", "malformed-args"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["model", "input", "messages", "tools", "type", "role", "content", "name", "call_id", "arguments",
         "input", "output", "function", "parameters", "tool_calls", "stream", "prompt", "instructions"]),
        inner, max_size=6),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(body=json_values)
def test_any_json_body_is_parsed_or_refused_and_every_profile_answers(body: Any) -> None:
    """Parsers raise only RequestError; whatever parses, every profile decides and every encoder encodes."""
    oracle = OracleServer(PLAN)
    for wire in (ChatCompletionsWire(), ResponsesWire(), OllamaChatWire(), OllamaGenerateWire()):
        try:
            request = wire.parse(body)
        except RequestError:
            continue
        for name, profile in oracle.profiles.items():
            reply = profile.respond(ProfileContext(request=request, actions=PLAN, dialect=oracle.dialect_for(request)))
            meta = ReplyMeta(n=1, request=request, call_id="c", usage=estimate_usage(request, reply.turn), created=0)
            json.dumps(wire.reply_json(reply.turn, meta))
            assert all(isinstance(f, bytes) for f in wire.reply_frames(reply.turn, meta)), name

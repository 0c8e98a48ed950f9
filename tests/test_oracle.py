"""The oracle backend: a real aiohttp server on 127.0.0.1 decoded by a real aiohttp client."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import (
    OracleServer, Reply, ToolsDialect, Turn, builtin_profiles, parse_chat_request, shell_command_for,
)
from gripprobe_core.oracle.profiles import SIDE_ANSWER

ACTIONS = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "ls -1"},
    {"edit": {"path": "hello.txt", "old": "world", "new": "there"}},
])


def fn(name: str, props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": list(props) if required is None else required}}}


S = {"type": "string"}
REF_TOOLS = [fn("shell", {"command": S}), fn("read", {"path": S}), fn("write", {"path": S, "content": S}),
             fn("edit", {"path": S, "old": S, "new": S})]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def post(session: aiohttp.ClientSession, oracle: OracleServer, body: dict[str, Any]) -> aiohttp.ClientResponse:
    return await session.post(oracle.base_url + "/v1/chat/completions", json=body)


async def read_sse(resp: aiohttp.ClientResponse) -> list[Any]:
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    out = []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def assistant_call(call: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]


# ------------------------------------------------------------------------------------ JSON replies

def test_perfect_json_walks_the_plan_then_answers(tmp_path: Path) -> None:
    record = tmp_path / "truth.jsonl"

    async def main() -> None:
        oracle = OracleServer(ACTIONS, record_path=record)
        await oracle.start()
        try:
            assert oracle.base_url.startswith("http://127.0.0.1:")
            messages: list[dict[str, Any]] = [{"role": "user", "content": "do it"}]
            names = []
            async with aiohttp.ClientSession() as s:
                for _ in ACTIONS:
                    resp = await post(s, oracle, {"model": "openai/perfect", "messages": messages, "tools": REF_TOOLS})
                    doc = await resp.json()
                    choice = doc["choices"][0]
                    assert choice["finish_reason"] == "tool_calls"
                    usage = doc["usage"]
                    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
                    (call,) = choice["message"]["tool_calls"]
                    names.append(call["function"]["name"])
                    messages += assistant_call(call)
                resp = await post(s, oracle, {"model": "openai/perfect", "messages": messages, "tools": REF_TOOLS})
                doc = await resp.json()
            assert names == ["write", "shell", "edit"]
            assert doc["choices"][0]["finish_reason"] == "stop"
            assert "message" in doc["choices"][0] and "tool_calls" not in doc["choices"][0]["message"]
            assert doc["choices"][0]["message"]["content"].startswith("Done.")
            assert [g["action_index"] for g in oracle.ground_truth] == [0, 1, 2]
            assert oracle.ground_truth[0]["arguments"] == {"path": "hello.txt", "content": "hello world\n"}
            assert oracle.ground_truth[2]["arguments"] == {"path": "hello.txt", "old": "world", "new": "there"}
        finally:
            await oracle.stop()
        lines = [json.loads(x) for x in record.read_text().splitlines()]
        assert lines == oracle.ground_truth
        assert [x["seq"] for x in lines] == [1, 2, 3]

    run(main())


def test_side_requests_lazy_unknown_model_and_models_endpoint() -> None:
    async def main() -> None:
        async with OracleServer(ACTIONS) as oracle, aiohttp.ClientSession() as s:
            user = [{"role": "user", "content": "do it"}]
            # a title request without tools: plain text, nothing issued
            doc = await (await post(s, oracle, {"model": "perfect", "messages": user})).json()
            assert doc["choices"][0]["message"]["content"] == SIDE_ANSWER
            # lazy never calls a tool, even with tools offered
            doc = await (await post(s, oracle, {"model": "local/lazy", "messages": user, "tools": REF_TOOLS})).json()
            assert doc["choices"][0]["finish_reason"] == "stop"
            assert "write hello.txt" in doc["choices"][0]["message"]["content"]
            assert oracle.ground_truth == []
            # an unknown model name falls back to the default profile (perfect)
            body = {"model": "ollama:no-such", "messages": user, "tools": REF_TOOLS}
            doc = await (await post(s, oracle, body)).json()
            assert doc["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "write"
            assert oracle.ground_truth[0]["profile"] == "perfect"
            models = await (await s.get(oracle.base_url + "/v1/models")).json()
            assert {m["id"] for m in models["data"]} == set(builtin_profiles()) >= {"perfect", "lazy"}
            # garbage bodies get a 400 with an OpenAI-style error, never a hang
            resp = await s.post(oracle.base_url + "/v1/chat/completions", data=b"\xff{not json")
            assert resp.status == 400 and "invalid request" in (await resp.json())["error"]["message"]
            resp = await post(s, oracle, {"model": "perfect", "messages": "nope"})
            assert resp.status == 400

    run(main())


# ------------------------------------------------------------------------------------- SSE replies

def test_perfect_sse_splits_tool_call_and_reports_usage() -> None:
    async def main() -> None:
        async with OracleServer(ACTIONS) as oracle, aiohttp.ClientSession() as s:
            body = {"model": "perfect", "messages": [{"role": "user", "content": "go"}], "tools": REF_TOOLS,
                    "stream": True, "stream_options": {"include_usage": True}}
            events = await read_sse(await post(s, oracle, body))
            assert events[-1] == "[DONE]"
            chunks = events[:-1]
            assert all(c["object"] == "chat.completion.chunk" for c in chunks)
            deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
            tc = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
            assert tc[0]["id"] == "call_oracle_0001" and tc[0]["function"] == {"name": "write", "arguments": ""}
            pieces = [t["function"]["arguments"] for t in tc[1:]]
            assert len(pieces) >= 2 and all("name" not in t["function"] for t in tc[1:])
            assert json.loads("".join(pieces)) == {"path": "hello.txt", "content": "hello world\n"}
            finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
            assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
            assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0

            # without include_usage there is no usage chunk; a final text streams in pieces
            body = {"model": "lazy", "messages": [{"role": "user", "content": "go"}], "tools": REF_TOOLS,
                    "stream": True}
            events = await read_sse(await post(s, oracle, body))
            chunks = events[:-1]
            assert all(c["choices"] for c in chunks)
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
            assert text.startswith("To solve this I would") and len(chunks) >= 4
            assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

    run(main())


def test_custom_profile_can_fail_with_http_status() -> None:
    """A profile added without touching the server: the documented extension path."""

    class Broken:
        name = "broken"
        description = "always answers HTTP 503"

        def respond(self, ctx: Any) -> Reply:
            return Reply(http_status=503, error="model overloaded")

    async def main() -> None:
        profiles = {**builtin_profiles(), "broken": Broken()}
        async with OracleServer(ACTIONS, profiles=profiles) as oracle, aiohttp.ClientSession() as s:
            resp = await post(s, oracle, {"model": "x/broken", "messages": [{"role": "user", "content": "go"}]})
            assert resp.status == 503
            assert (await resp.json())["error"]["message"] == "model overloaded"
            models = await (await s.get(oracle.base_url + "/v1/models")).json()
            assert "broken" in {m["id"] for m in models["data"]}
        assert oracle.ground_truth == []

    run(main())


def test_unknown_default_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown oracle profile 'nope'"):
        OracleServer(ACTIONS, default_profile="nope")


# ---------------------------------------------------------------------------------- tools dialect

def say(tools: list[dict[str, Any]], action_index: int) -> Turn:
    request = parse_chat_request({"model": "perfect", "messages": [{"role": "user", "content": "x"}], "tools": tools})
    return ToolsDialect().say(ACTIONS[action_index], action_index, request)


def args_of(turn: Turn) -> dict[str, Any]:
    assert turn.tool_call is not None, turn.text
    return json.loads(turn.tool_call.arguments)


def test_dialect_uses_the_agents_own_parameter_names() -> None:
    opencode_like = [
        fn("bash", {"command": S, "description": S, "timeout": {"type": "integer"}}, ["command", "description"]),
        fn("task", {"description": S, "prompt": S, "command": S}),
        fn("write", {"content": S, "filePath": S}),
        fn("edit", {"filePath": S, "oldString": S, "newString": S, "replaceAll": {"type": "boolean"}},
           ["filePath", "oldString", "newString"]),
    ]
    turn = say(opencode_like, 0)
    assert turn.tool_call.name == "write" and args_of(turn) == {"filePath": "hello.txt", "content": "hello world\n"}
    turn = say(opencode_like, 1)
    assert turn.tool_call.name == "bash"
    assert args_of(turn) == {"command": "ls -1", "description": "GripProbe reference step"}
    turn = say(opencode_like, 2)
    assert args_of(turn) == {"filePath": "hello.txt", "oldString": "world", "newString": "there"}

    continue_like = [fn("Bash", {"command": S}), fn("Write", {"filepath": S, "content": S}),
                     fn("Edit", {"file_path": S, "old_string": S, "new_string": S})]
    assert say(continue_like, 0).tool_call.name == "Write"
    assert args_of(say(continue_like, 2)) == {"file_path": "hello.txt", "old_string": "world", "new_string": "there"}

    gptme_like = [fn("append", {"path": S, "content": S}), fn("save", {"path": S, "content": S}),
                  fn("tmux", {"command": S}), fn("shell", {"command": S})]
    assert say(gptme_like, 0).tool_call.name == "save"
    assert say(gptme_like, 1).tool_call.name == "shell"

    codex_like = [fn("exec_command", {"cmd": S, "workdir": S}, ["cmd"])]
    assert args_of(say(codex_like, 1)) == {"cmd": "ls -1"}
    array_shell = [fn("shell", {"command": {"type": "array", "items": S}})]
    assert args_of(say(array_shell, 1)) == {"command": ["bash", "-lc", "ls -1"]}


def test_dialect_without_a_fitting_tool_explains_in_text() -> None:
    turn = say([fn("web_fetch", {"url": S})], 0)
    assert turn.tool_call is None and turn.action_index is None
    assert "no write tool and no shell tool" in turn.text and "web_fetch" in turn.text


@pytest.mark.parametrize("content", [
    "hello world\n", "no newline at end", "héllo ✓ wörld\n", "it's $HOME `x` \\n\nGRIPPROBE_EOF\n"])
def test_shell_fallbacks_really_perform_the_action(tmp_path: Path, content: str) -> None:
    """Only a shell tool offered: write/edit/read go through it, and the command does exactly that."""
    actions = TypeAdapter(list[ReferenceAction]).validate_python([
        {"write": {"path": "sub/dir/f.txt", "content": content}},
        {"edit": {"path": "sub/dir/f.txt", "old": content[:5], "new": "<<'X'>>"}},
        {"read": {"path": "sub/dir/f.txt"}},
    ])
    request = parse_chat_request({"model": "m", "messages": [], "tools": [fn("run_command", {"command": S})]})
    outputs = []
    for i, action in enumerate(actions):
        turn = ToolsDialect().say(action, i, request)
        assert turn.tool_call is not None and turn.tool_call.name == "run_command"
        command = json.loads(turn.tool_call.arguments)["command"]
        assert command == shell_command_for(action)
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=10)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout.decode())
    expected = "<<'X'>>" + content[5:]
    assert (tmp_path / "sub/dir/f.txt").read_text() == expected
    assert outputs[2] == expected


def test_the_generic_tools_dialect_is_always_there_and_answers_last() -> None:
    """The oracle's own ``tools`` dialect names no agent: it is the fallback every request gets when no
    agent driver's dialect accepts it."""
    oracle = OracleServer([])
    assert isinstance(oracle.dialects["tools"], ToolsDialect)
    request = parse_chat_request({"model": "perfect", "messages": [{"role": "user", "content": "hi"}]})
    assert oracle.dialect_for(request) is oracle.dialects["tools"]

"""The oracle's pi dialect: pi's real tools array (captured from pi 0.73.1's first request), every reference
action said with pi's own tools, and the real oracle server saying an edit as pi's ``edit`` call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import TypeAdapter

from gripprobe_core.plugin import MISSING_FILE, ReferenceAction, ToolsDialect, parse_chat_request
from gripprobe_core.testing import oracle_server
from gripprobe_pi.dialect import PiDialect, edits_tool_of

PI_TOOLS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "pi_0.73.1_tools.json").read_text())
"""The exact ``tools`` array pi 0.73.1 sends (read, bash, edit, write)."""

PLAN = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "ls -1"},
    {"edit": {"path": "hello.txt", "old": "world", "new": "there"}},
    {"read": {"path": "hello.txt"}},
])


def request(tools: list[dict[str, Any]] = PI_TOOLS, messages: list[dict[str, Any]] | None = None):
    return parse_chat_request({"model": "perfect", "tools": tools,
                               "messages": messages or [{"role": "user", "content": "do it"}]})


def said(dialect: Any, index: int, tools: list[dict[str, Any]] = PI_TOOLS) -> tuple[str, dict[str, Any]]:
    turn = dialect.say_in_plan(PLAN, index, request(tools))
    assert turn.tool_call is not None and turn.action_index == index
    return turn.tool_call.name, json.loads(turn.tool_call.arguments)


def test_the_captured_tools_are_pis_four():
    assert [t["function"]["name"] for t in PI_TOOLS] == ["read", "bash", "edit", "write"]


def test_every_action_goes_to_pis_own_tool():
    d = PiDialect()
    assert d.accepts(request(), "tool")
    assert said(d, 0) == ("write", {"path": "hello.txt", "content": "hello world\n"})
    assert said(d, 1) == ("bash", {"command": "ls -1"})
    assert said(d, 2) == ("edit", {"path": "hello.txt", "edits": [{"oldText": "world", "newText": "there"}]})
    assert said(d, 3) == ("read", {"path": "hello.txt"})


def test_the_generic_dialect_alone_would_edit_through_bash():
    """Why the plugin brings a dialect: the generic one finds no old/new text among edit's parameters."""
    name, args = said(ToolsDialect(), 2)
    assert name == "bash" and args["command"].startswith("python3 - <<'GRIPPROBE_PY'")


def test_requests_without_an_edits_list_are_left_to_others():
    d = PiDialect()
    flat_edit = {"type": "function", "function": {"name": "edit", "parameters": {
        "type": "object", "required": ["path", "old_string", "new_string"],
        "properties": {"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}}}}
    assert not d.accepts(request([flat_edit]), "tool")
    assert not d.accepts(request([t for t in PI_TOOLS if t["function"]["name"] != "edit"]), "tool")
    assert not d.accepts(request([]), "tool")
    # a request with both shapes: the flat edit tool wins (the generic dialect's choice)
    assert said(d, 2, [flat_edit, *PI_TOOLS])[0] == "edit"
    assert said(d, 2, [flat_edit, *PI_TOOLS])[1] == {"path": "hello.txt", "old_string": "world", "new_string": "there"}


def test_edits_tool_shapes():
    info = request().tools[2]
    got = edits_tool_of(info)
    assert got is not None and (got.path, got.edits, got.old, got.new) == ("path", "edits", "oldText", "newText")
    odd = {"type": "function", "function": {"name": "change", "parameters": {"type": "object", "properties": {
        "file_path": {"type": "string"}, "edits": {"type": "array", "items": {"type": "string"}}}}}}
    assert edits_tool_of(request([odd]).tools[0]) is None
    for junk in ({"type": "array"}, {"type": "array", "items": []}, {"type": ["array", "null"], "items": {}}):
        tool = {"type": "function", "function": {"name": "e", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "edits": junk}}}}
        assert edits_tool_of(request([tool]).tools[0]) is None


def test_failing_calls_use_bash_else_the_edits_tool():
    d = PiDialect()
    call = d.failing_call(request())
    assert call is not None and (call.name, json.loads(call.arguments)) == ("bash", {"command": f"cat {MISSING_FILE}"})
    only_edit = [t for t in PI_TOOLS if t["function"]["name"] == "edit"]
    call = d.failing_call(request(only_edit))
    assert call is not None and call.name == "edit"
    assert json.loads(call.arguments) == {"path": MISSING_FILE, "edits": [{"oldText": "missing", "newText": "present"}]}


def test_the_real_oracle_says_the_edit_as_pis_edit_call():
    """Through the real oracle server (every installed dialect): after the write and the shell step, the
    edit comes back as pi's ``edit`` with one replacement, streamed as Chat Completions SSE."""
    history = [
        {"role": "system", "content": "You are pi."}, {"role": "user", "content": "do it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {
            "name": "write", "arguments": json.dumps({"path": "hello.txt", "content": "hello world\n"})}}]},
        {"role": "tool", "tool_call_id": "a", "content": "Successfully wrote 12 bytes to hello.txt"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "b", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"command": "ls -1"})}}]},
        {"role": "tool", "tool_call_id": "b", "content": "hello.txt\n"},
    ]

    async def main() -> None:
        async with oracle_server(PLAN) as oracle, aiohttp.ClientSession() as s:
            body = {"model": "perfect", "messages": history, "tools": PI_TOOLS, "stream": True,
                    "stream_options": {"include_usage": True}, "store": False, "max_completion_tokens": 16384}
            resp = await s.post(oracle.base_url + "/v1/chat/completions", json=body)
            assert resp.status == 200
            raw = (await resp.read()).decode()
            chunks = [json.loads(line[6:]) for line in raw.splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
            calls = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
            assert calls[0]["function"]["name"] == "edit" and calls[0]["id"] == "call_oracle_0001"
            arguments = "".join(tc["function"].get("arguments") or "" for tc in calls)
            assert json.loads(arguments) == {"path": "hello.txt", "edits": [{"oldText": "world", "newText": "there"}]}
            (truth,) = oracle.ground_truth
            assert (truth["name"], truth["action_index"], truth["arguments"]) == (
                "edit", 2, {"path": "hello.txt", "edits": [{"oldText": "world", "newText": "there"}]})

    asyncio.run(main())

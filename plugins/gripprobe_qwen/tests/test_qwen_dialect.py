"""Qwen Code's oracle dialect (gripprobe_qwen.dialect): file paths made absolute against the working
directory Qwen Code states, with the exact ``tools`` array Qwen Code 0.24.4 sends, unit by unit and
through the real oracle on the wire."""

from __future__ import annotations

import asyncio
import json
import posixpath
from pathlib import Path
from typing import Any

import aiohttp
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gripprobe_core.plugin import MISSING_FILE, ReferenceAction, ToolsDialect, parse_chat_request, shell_command_for
from gripprobe_core.testing import oracle_server
from gripprobe_qwen.dialect import QwenDialect, absolute_path, wants_absolute_path, working_directory

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QWEN_TOOLS: list[dict[str, Any]] = json.loads((FIXTURES / "qwen_0.24.4_tools.json").read_text())
"""The exact ``tools`` array Qwen Code 0.24.4 sends (14 function tools; paths scrubbed)."""
WORKDIR = "/tmp/gripprobe-RUN/case/measured/workspace"
#: The environment context Qwen Code sends as its first user message (shortened; its own wording).
CONTEXT = ("<system-reminder>\nThis is the Qwen Code. We are setting up the context for our chat.\n"
           "Today's date is Friday, November 27, 2026.\nMy operating system is: linux\n"
           f"I'm currently working in the directory: {WORKDIR}\n"
           "Here is the folder structure of the current working directories:\n\n"
           f"Showing up to 20 items:\n\n{WORKDIR}/\n</system-reminder>")

PLAN = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "greeting.txt", "content": "Hello, GripProbe!\n"}},
    {"shell": "ls -1"},
    {"read": {"path": "sub/../greeting.txt"}},
    {"edit": {"path": "greeting.txt", "old": "Hello", "new": "Hi"}},
    {"write": {"path": "/elsewhere/abs.txt", "content": "x\n"}},
])


def body(*extra: dict[str, Any], context: str | None = CONTEXT, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are Qwen Code."}]
    if context is not None:
        messages.append({"role": "user", "content": [{"type": "text", "text": context},
                                                     {"type": "text", "text": "Create greeting.txt"}]})
    return {"model": "perfect", "messages": messages + list(extra), "tools": QWEN_TOOLS if tools is None else tools,
            "stream": False}


def args_of(turn: Any) -> dict[str, Any]:
    assert turn.tool_call is not None, turn.text
    return json.loads(turn.tool_call.arguments)


def test_qwen_file_tools_want_absolute_paths_and_the_context_names_the_directory() -> None:
    request = parse_chat_request(body())
    assert working_directory(request) == WORKDIR
    assert {t.name for t in request.tools if wants_absolute_path(t)} == {"write_file", "edit", "read_file"}
    assert not wants_absolute_path(request.tool("run_shell_command")) and not wants_absolute_path(None)
    dialect = QwenDialect()
    assert dialect.accepts(request, "tool")
    assert not dialect.accepts(parse_chat_request(body(context=None)), "tool")
    plain = [{"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
    assert not dialect.accepts(parse_chat_request(body(tools=plain)), "tool")


def test_writes_reads_and_edits_get_absolute_paths_shell_commands_stay() -> None:
    request = parse_chat_request(body())
    dialect = QwenDialect()
    write = dialect.say_in_plan(PLAN, 0, request)
    assert write.tool_call.name == "write_file" and write.action_index == 0
    assert args_of(write) == {"file_path": f"{WORKDIR}/greeting.txt", "content": "Hello, GripProbe!\n"}
    shell = dialect.say_in_plan(PLAN, 1, request)
    assert shell.tool_call.name == "run_shell_command" and args_of(shell)["command"] == "ls -1"
    read = dialect.say_in_plan(PLAN, 2, request)
    assert read.tool_call.name == "read_file" and args_of(read)["file_path"] == f"{WORKDIR}/greeting.txt"
    edit = dialect.say_in_plan(PLAN, 3, request)
    assert edit.tool_call.name == "edit"
    assert args_of(edit) == {"file_path": f"{WORKDIR}/greeting.txt", "old_string": "Hello", "new_string": "Hi"}
    assert args_of(dialect.say_in_plan(PLAN, 4, request))["file_path"] == "/elsewhere/abs.txt"
    # the generic dialect says the test's relative path, which Qwen Code refuses before running
    assert args_of(ToolsDialect().say_in_plan(PLAN, 0, request))["file_path"] == "greeting.txt"


def test_the_failing_call_is_the_shell_else_an_absolute_read_of_the_missing_file() -> None:
    dialect = QwenDialect()
    call = dialect.failing_call(parse_chat_request(body()))
    assert call.name == "run_shell_command" and json.loads(call.arguments)["command"] == f"cat {MISSING_FILE}"
    no_shell = [t for t in QWEN_TOOLS if t["function"]["name"] != "run_shell_command"]
    call = dialect.failing_call(parse_chat_request(body(tools=no_shell)))
    assert call.name == "read_file" and json.loads(call.arguments)["file_path"] == f"{WORKDIR}/{MISSING_FILE}"
    only_edit = [t for t in QWEN_TOOLS if t["function"]["name"] == "edit"]
    call = dialect.failing_call(parse_chat_request(body(tools=only_edit)))
    assert call.name == "edit" and json.loads(call.arguments)["file_path"] == f"{WORKDIR}/{MISSING_FILE}"


def test_without_a_write_tool_the_write_goes_through_the_shell_unchanged() -> None:
    shell_only = [t for t in QWEN_TOOLS if t["function"]["name"] in ("run_shell_command", "read_file")]
    turn = QwenDialect().say_in_plan(PLAN, 0, parse_chat_request(body(tools=shell_only)))
    assert turn.tool_call.name == "run_shell_command" and args_of(turn)["command"] == shell_command_for(PLAN[0])


@settings(max_examples=200, deadline=None)
@given(directory=st.lists(st.sampled_from(["a", "b c", "ws", "..", ".", "é"]), min_size=1, max_size=4),
       path=st.lists(st.sampled_from(["x.txt", "d", "..", ".", "sub dir", "ü.py"]), min_size=1, max_size=4))
def test_absolute_path_is_the_join_and_leaves_absolute_paths(directory: list[str], path: list[str]) -> None:
    base = "/" + "/".join(directory)
    rel = "/".join(path)
    got = absolute_path(base, rel)
    assert got.startswith("/") and got == posixpath.normpath(posixpath.join(base, rel))
    assert absolute_path(base, "/" + rel) == "/" + rel


def test_through_the_real_oracle_the_write_on_the_wire_is_absolute() -> None:
    """The oracle (with every installed dialect, this one included) answers a Qwen Code request with a
    write_file call whose file_path is absolute; without the context sentence it is not Qwen's request."""
    plan = TypeAdapter(list[ReferenceAction]).validate_python([{"write": {"path": "greeting.txt", "content": "hi\n"}}])

    async def main() -> None:
        async with oracle_server(plan) as oracle, aiohttp.ClientSession() as s:
            url = oracle.base_url + "/v1/chat/completions"
            doc = await (await s.post(url, json=body())).json()
            (call,) = doc["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == "write_file"
            assert json.loads(call["function"]["arguments"]) == {"file_path": f"{WORKDIR}/greeting.txt", "content": "hi\n"}
            doc = await (await s.post(url, json=body(context=None))).json()
            (call,) = doc["choices"][0]["message"]["tool_calls"]
            assert json.loads(call["function"]["arguments"])["file_path"] == "greeting.txt"
            assert [t["arguments"]["file_path"] for t in oracle.ground_truth] == [f"{WORKDIR}/greeting.txt", "greeting.txt"]

    asyncio.run(main())

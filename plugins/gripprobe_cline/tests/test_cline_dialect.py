"""The oracle's Cline dialect on the exact tools cline 3.0.65 sends (fixtures/cline_3.0.65_tools*.json, taken
from the recording proxy: ``editor`` for model ids like ``perfect``, ``apply_patch`` for ids containing
``gpt``), and through the real oracle server with every installed dialect."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from gripprobe_core.plugin import ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite, parse_chat_request
from gripprobe_core.testing import oracle_server
from gripprobe_cline.dialect import ClineDialect, add_file_patch

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOOLS = json.loads((FIXTURES / "cline_3.0.65_tools.json").read_text())
GPT_TOOLS = json.loads((FIXTURES / "cline_3.0.65_tools_gpt.json").read_text())
WRITE = ReferenceWrite.model_validate({"write": {"path": "greeting.txt", "content": "Hello\nWorld\n"}})
EDIT = ReferenceEdit.model_validate({"edit": {"path": "settings.py", "old": "DEBUG = True", "new": "DEBUG = False"}})
READ = ReferenceRead.model_validate({"read": {"path": "settings.py"}})
SHELL = ReferenceShell.model_validate({"shell": "pwd > pwd.txt"})


def request(tools=TOOLS, messages=None):
    return parse_chat_request({"model": "perfect", "stream": True, "tools": tools,
                               "messages": messages or [{"role": "user", "content": "do it"}]})


def args(turn):
    assert turn.tool_call is not None, turn.text
    return turn.tool_call.name, json.loads(turn.tool_call.arguments)


def test_accepts_clines_requests_only():
    d = ClineDialect()
    assert d.accepts(request(), "tool") and d.accepts(request(GPT_TOOLS), "tool")
    other = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
    assert not d.accepts(request(other), "tool")


def test_each_action_in_clines_own_tools():
    d = ClineDialect()
    assert args(d.say(WRITE, 0, request())) == ("editor", {"path": "greeting.txt", "new_text": "Hello\nWorld\n"})
    assert args(d.say(EDIT, 0, request())) == ("editor", {
        "path": "settings.py", "old_text": "DEBUG = True", "new_text": "DEBUG = False"})
    assert args(d.say(READ, 0, request())) == ("read_files", {"files": [{"path": "settings.py"}]})
    assert args(d.say(SHELL, 0, request())) == ("run_commands", {"commands": ["pwd > pwd.txt"]})
    failing = d.failing_call(request())
    assert (failing.name, json.loads(failing.arguments)) == (
        "run_commands", {"commands": ["cat gripprobe-missing-file.txt"]})


def test_second_write_of_the_same_file_goes_through_the_shell():
    """The editor only creates missing files: a file the plan already wrote is overwritten by the shell."""
    again = ReferenceWrite.model_validate({"write": {"path": "greeting.txt", "content": "Bye\n"}})
    name, arguments = args(ClineDialect().say_in_plan([WRITE, again], 1, request()))
    assert name == "run_commands" and "greeting.txt" in arguments["commands"][0]
    assert arguments["commands"][0].startswith("cat > greeting.txt <<'GRIPPROBE_EOF'\nBye\n")


def test_gpt_model_ids_get_apply_patch_writes_and_shell_edits():
    d = ClineDialect()
    name, arguments = args(d.say(WRITE, 0, request(GPT_TOOLS)))
    assert name == "apply_patch"
    assert arguments == {"input": "*** Begin Patch\n*** Add File: greeting.txt\n+Hello\n+World\n+\n*** End Patch"}
    name, arguments = args(d.say(EDIT, 0, request(GPT_TOOLS)))
    assert name == "run_commands" and arguments["commands"][0].startswith("python3 - <<'GRIPPROBE_PY'")


def test_add_file_patch_keeps_content_exactly():
    assert add_file_patch("a.txt", "x") == "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch"
    assert add_file_patch("", "x") is None and add_file_patch("a\nb", "x") is None


def test_the_real_oracle_picks_the_cline_dialect_and_records_its_calls(tmp_path):
    """Through the real oracle server (every installed dialect): the write is said with ``editor``, the
    call is ground truth, and the final answer follows the tool result."""
    async def go():
        async with oracle_server([WRITE], record_path=tmp_path / "oracle.jsonl") as oracle:
            url = oracle.base_url + "/v1/chat/completions"
            async with aiohttp.ClientSession() as client:
                body = {"model": "perfect", "tools": TOOLS, "messages": [{"role": "user", "content": "write it"}]}
                async with client.post(url, json=body) as resp:
                    first = await resp.json()
                call = first["choices"][0]["message"]["tool_calls"][0]
                body["messages"] += [first["choices"][0]["message"],
                                     {"role": "tool", "tool_call_id": call["id"], "content": "File created"}]
                async with client.post(url, json=body) as resp:
                    second = await resp.json()
            return call, second, oracle.ground_truth
    call, second, truth = asyncio.run(go())
    assert call["function"]["name"] == "editor"
    assert json.loads(call["function"]["arguments"]) == {"path": "greeting.txt", "new_text": "Hello\nWorld\n"}
    assert [(t["name"], t["tool_call_id"]) for t in truth] == [("editor", call["id"])]
    assert second["choices"][0]["message"]["content"].startswith("Done.")


@pytest.mark.parametrize("tools", [TOOLS, GPT_TOOLS], ids=["editor", "apply_patch"])
def test_every_reference_action_becomes_a_call(tools):
    d = ClineDialect()
    for action in (WRITE, EDIT, READ, SHELL):
        assert d.say(action, 0, request(tools)).tool_call is not None, action

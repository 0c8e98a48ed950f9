"""codex's oracle dialect (gripprobe_codex.dialect) against the real oracle: the freeform ``apply_patch``
said as a V4A patch on the Responses API, the plan's steps from codex's input items, the patch writer
(property-tested: a patch, when produced, applies to exactly the edit), and the choices between
``exec_command`` and ``apply_patch``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gripprobe_codex.dialect import CodexDialect, add_file_patch, update_file_patch
from gripprobe_core.plugin import ReferenceAction, known_content, parse_responses_request, shell_command_for
from gripprobe_core.testing import oracle_server, read_sse_events, responses_user_item

CODEX_TOOLS = json.loads((Path(__file__).parent / "fixtures" / "codex_0.169.0_tools.json").read_text())
"""The exact ``tools`` array codex 0.169.0 sends (exec_command, apply_patch as a custom tool, web_search …)."""

S = {"type": "string"}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "edit files (freeform V4A patch)",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}}
EXEC = {"type": "function", "name": "exec_command", "strict": False, "parameters": {
    "type": "object", "properties": {"cmd": S, "workdir": S, "login": {"type": "boolean"}}, "required": ["cmd"],
    "additionalProperties": False}}
RESPONSES_TOOLS: list[dict[str, Any]] = CODEX_TOOLS

PLAN = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "ls -1"},
    {"edit": {"path": "hello.txt", "old": "world", "new": "there"}},
])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --------------------------------------------------------------------------------- Responses API

def test_responses_sse_follows_the_real_event_sequence_with_apply_patch() -> None:
    async def main() -> None:
        async with oracle_server(PLAN) as oracle, aiohttp.ClientSession() as s:
            body = {"model": "perfect", "instructions": "be brief", "input": [responses_user_item("do it")],
                    "tools": RESPONSES_TOOLS, "stream": True, "tool_choice": "auto", "parallel_tool_calls": False}
            events = await read_sse_events(await s.post(oracle.base_url + "/v1/responses", json=body))
            names = [n for n, _ in events]
            deltas = [d for n, d in events if n == "response.custom_tool_call_input.delta"]
            assert names == ["response.created", "response.in_progress", "response.output_item.added",
                             *["response.custom_tool_call_input.delta"] * len(deltas),
                             "response.custom_tool_call_input.done", "response.output_item.done",
                             "response.completed"]
            assert len(deltas) >= 2
            assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
            created = events[0][1]["response"]
            assert created["status"] == "in_progress" and created["output"] == [] and created["usage"] is None
            added = events[2][1]["item"]
            assert added == {"id": added["id"], "type": "custom_tool_call", "status": "in_progress",
                             "call_id": "call_oracle_0001", "name": "apply_patch", "input": ""}
            patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello world\n*** End Patch\n"
            assert "".join(d["delta"] for d in deltas) == patch
            assert all(d["item_id"] == added["id"] and d["output_index"] == 0 for d in deltas)
            done_item = events[-2][1]["item"]
            assert done_item == {**added, "status": "completed", "input": patch}
            final = events[-1][1]["response"]
            assert final["status"] == "completed" and final["output"] == [done_item]
            assert final["instructions"] == "be brief" and final["parallel_tool_calls"] is False
            usage = final["usage"]
            assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
            (truth,) = oracle.ground_truth
            assert truth | {"ts": None} == {
                "seq": 1, "profile": "perfect", "protocol": "responses", "tool_call_id": "call_oracle_0001",
                "name": "apply_patch", "arguments": patch, "kind": "custom", "structured": True,
                "action_index": 0, "ts": None}

    run(main())


def test_responses_step_logic_from_input_items_and_function_call_stream() -> None:
    """Steps come from function_call/custom_tool_call items since the last user message."""
    async def main() -> None:
        async with oracle_server(PLAN) as oracle, aiohttp.ClientSession() as s:
            url = oracle.base_url + "/v1/responses"
            history: list[dict[str, Any]] = [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                responses_user_item("<environment_context/>"), responses_user_item("do it"),
                {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "Exit code: 0\nOutput:\nA hello.txt\n"},
                {"type": "reasoning", "summary": []},
            ]
            body = {"model": "openai/perfect", "input": history, "tools": RESPONSES_TOOLS, "stream": True}
            events = await read_sse_events(await s.post(url, json=body))
            names = [n for n, _ in events]
            n_deltas = names.count("response.function_call_arguments.delta")
            assert n_deltas >= 2 and names == [
                "response.created", "response.in_progress", "response.output_item.added",
                *["response.function_call_arguments.delta"] * n_deltas, "response.function_call_arguments.done",
                "response.output_item.done", "response.completed"]
            item = events[-2][1]["item"]
            assert item["type"] == "function_call" and item["name"] == "exec_command"
            assert json.loads(item["arguments"]) == {"cmd": "ls -1"}
            assert events[-3][1]["arguments"] == item["arguments"]

            # JSON: two tool turns done (one of them a function_call) → the third action, an edit via apply_patch
            history += [item | {"status": "completed"},
                        {"type": "function_call_output", "call_id": item["call_id"], "output": "hello.txt\n"}]
            doc = await (await s.post(url, json={**body, "input": history, "stream": False})).json()
            (out,) = doc["output"]
            assert out["type"] == "custom_tool_call" and out["input"] == (
                "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hello world\n+hello there\n*** End Patch\n")
            # all three done → a final message with the last tool output
            history += [out, {"type": "custom_tool_call_output", "call_id": out["call_id"],
                              "output": [{"type": "input_text", "text": "patched"}]}]
            doc = await (await s.post(url, json={**body, "input": history, "stream": False})).json()
            (msg,) = doc["output"]
            assert msg["type"] == "message" and msg["role"] == "assistant"
            assert msg["content"][0]["text"].startswith("Done.") and msg["content"][0]["text"].endswith("patched")
            # a new user message starts over; a string input is a user message too
            doc = await (await s.post(url, json={**body, "input": history + [responses_user_item("again")], "stream": False})).json()
            assert doc["output"][0]["type"] == "custom_tool_call" and "Add File" in doc["output"][0]["input"]
            doc = await (await s.post(url, json={**body, "input": "hi", "stream": False})).json()
            assert doc["output"][0]["type"] == "custom_tool_call"
            assert [g["action_index"] for g in oracle.ground_truth] == [1, 2, 0, 0]
            assert {g["protocol"] for g in oracle.ground_truth} == {"responses"}

    run(main())


# ------------------------------------------------------------------------------- V4A patches

def apply_v4a(patch: str, files: dict[str, str]) -> dict[str, str]:
    """A small V4A applier (Add File, Update File with context/-/+ lines), strict about matches."""
    lines = patch.split("\n")
    assert lines[0] == "*** Begin Patch" and lines[-2:] == ["*** End Patch", ""]
    body, out, i = lines[1:-2], dict(files), 0
    while i < len(body):
        head = body[i]
        if head.startswith("*** Add File: "):
            i += 1
            added = []
            while i < len(body) and body[i].startswith("+"):
                added.append(body[i][1:])
                i += 1
            out[head[14:]] = "".join(x + "\n" for x in added)
        elif head.startswith("*** Update File: "):
            path, i = head[17:], i + 1
            assert body[i] == "@@"
            i += 1
            old, new = [], []
            while i < len(body) and body[i][:1] in (" ", "-", "+"):
                tag, text = body[i][0], body[i][1:]
                if tag in " -":
                    old.append(text)
                if tag in " +":
                    new.append(text)
                i += 1
            file_lines = out[path].split("\n")[:-1]
            hits = [k for k in range(len(file_lines) - len(old) + 1) if file_lines[k:k + len(old)] == old]
            assert len(hits) == 1, (old, file_lines)
            k = hits[0]
            file_lines[k:k + len(old)] = new
            out[path] = "".join(x + "\n" for x in file_lines)
        else:
            raise AssertionError(f"unexpected patch line {head!r}")
    return out


def test_patch_text_examples() -> None:
    assert add_file_patch("a/b.txt", "x\n\ny\n") == "*** Begin Patch\n*** Add File: a/b.txt\n+x\n+\n+y\n*** End Patch\n"
    assert add_file_patch("a.txt", "no newline") is None and add_file_patch("a.txt", "") is None
    patch = update_file_patch("f.py", "b = 2", "b = 3\nc = 4", "a = 1\nb = 2  # two\nz = 9\n")
    assert patch == ("*** Begin Patch\n*** Update File: f.py\n@@\n a = 1\n-b = 2  # two\n+b = 3\n+c = 4  # two\n"
                     "*** End Patch\n")
    assert update_file_patch("f", "x", "y", None) is None           # content unknown
    assert update_file_patch("f", "a", "b", "a a\n") is None        # ambiguous
    assert update_file_patch("f", "a\n", "b", "a\nc\n") is None     # would join two lines


lines_st = st.lists(st.sampled_from(["alpha", "beta", "", "  gamma  ", "x = 1", "déjà"]), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(lines=lines_st, start=st.integers(0, 60), length=st.integers(1, 20),
       new=st.sampled_from(["", "NEW", "n1\nn2", "z\n", "\n"]))
def test_update_patch_says_the_edit_exactly(lines: list[str], start: int, length: int, new: str) -> None:
    """Whenever a patch is produced, applying it gives exactly content.replace(old, new, 1)."""
    content = "".join(x + "\n" for x in lines)
    start = min(start, len(content) - 1)
    old = content[start:start + length]
    patch = update_file_patch("f.txt", old, new, content)
    if patch is None:
        return
    assert apply_v4a(patch, {"f.txt": content})["f.txt"] == content.replace(old, new, 1)


def test_codex_dialect_choices_without_a_model_catalog_and_with_only_apply_patch() -> None:
    """No apply_patch offered (codex with an unknown model) → everything through exec_command; an edit of
    a file the plan never wrote → exec_command's exact python edit; only apply_patch → a rough patch."""
    plan = TypeAdapter(list[ReferenceAction]).validate_python([
        {"edit": {"path": "seeded.txt", "old": "old line\n", "new": "new line\n"}},
        {"write": {"path": "n.txt", "content": "no newline"}}])
    dialect = CodexDialect()
    both = parse_responses_request({"model": "m", "input": "x", "tools": [EXEC, APPLY_PATCH]})
    turn = dialect.say_in_plan(plan, 0, both)
    assert turn.tool_call.name == "exec_command"
    assert json.loads(turn.tool_call.arguments) == {"cmd": shell_command_for(plan[0])}
    turn = dialect.say_in_plan(plan, 1, both)
    assert json.loads(turn.tool_call.arguments) == {"cmd": shell_command_for(plan[1])}
    only_patch = parse_responses_request({"model": "m", "input": "x", "tools": [APPLY_PATCH]})
    turn = dialect.say_in_plan(plan, 0, only_patch)
    assert turn.tool_call.kind == "custom" and turn.tool_call.arguments == (
        "*** Begin Patch\n*** Update File: seeded.txt\n@@\n-old line\n+new line\n*** End Patch\n")
    no_patch = parse_responses_request({"model": "m", "input": "x", "tools": [EXEC]})
    assert dialect.say_in_plan(PLAN, 0, no_patch).tool_call.name == "exec_command"
    # an older codex's apply_patch as a function tool taking one string
    fn_patch = {"type": "function", "name": "apply_patch", "parameters": {
        "type": "object", "properties": {"input": S}, "required": ["input"]}}
    req = parse_responses_request({"model": "m", "input": "x", "tools": [fn_patch]})
    turn = dialect.say_in_plan(PLAN, 0, req)
    assert turn.tool_call.kind == "function" and json.loads(turn.tool_call.arguments)["input"].startswith(
        "*** Begin Patch\n*** Add File: hello.txt")
    assert known_content(PLAN, 2, "./hello.txt") == "hello world\n"

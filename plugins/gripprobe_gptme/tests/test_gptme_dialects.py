"""The oracle's gptme dialects, on the requests gptme 0.35.1 really sent (``fixtures/requests``) and on
the system prompts of the field-note samples, driven through the real oracle server where it matters.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given, settings, strategies as st

from gripprobe_core.plugin import (
    ReferenceEdit, ReferenceShell, ReferenceWrite, TestSpec, ToolsDialect, parse_chat_request, scan_text_tool_calls,
)
from gripprobe_core.testing import OracleServer, oracle_server
from gripprobe_gptme.dialects import (
    GptmeMarkdownDialect, GptmeToolDialect, GptmeXmlDialect, conflict_patch, defuse, is_gptme_request,
)
from gripprobe_gptme.parse import tool_uses

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FORMAT_OF_SAMPLE = {"tool_success": "tool", "md_success": "markdown", "xml_success": "xml"}
MD, XML, TOOL = GptmeMarkdownDialect(), GptmeXmlDialect(), GptmeToolDialect()
WRITE = ReferenceWrite.model_validate(
    {"write": {"path": "greeting.txt", "content": "Hello, GripProbe!\nSecond line.\n"}})
SHELL = ReferenceShell.model_validate({"shell": "pwd > pwd.txt"})
EDIT = ReferenceEdit.model_validate({"edit": {"path": "settings.py", "old": "TIMEOUT = 30", "new": "TIMEOUT = 45"}})


def sample_request(case: str, *, tools: list | None = None):
    """A request built from a sample's conversation.jsonl: gptme's real system prompt and the user prompt."""
    lines = (FIXTURES / "samples" / case / "conversation.jsonl").read_text().splitlines()
    messages = [{"role": m["role"], "content": m["content"]} for m in map(json.loads, lines)]
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    body = {"model": "perfect", "messages": messages[:first_user + 1], "stream": True}
    if tools is not None:
        body["tools"] = tools
    return parse_chat_request(body)


def load_request(name: str) -> dict:
    """A request body gptme 0.35.1 really sent (``fixtures/requests/<name>.json``)."""
    return json.loads((FIXTURES / "requests" / f"{name}.json").read_text(encoding="utf-8"))


def gptme_tools() -> list:
    return json.loads((FIXTURES / "tool_schemas.json").read_text())


def req(body: dict, **changes):
    return parse_chat_request({**body, **changes})


# ---------------------------------------------------------------------------- who is gptme

@pytest.mark.parametrize("case", sorted(FORMAT_OF_SAMPLE))
def test_gptmes_system_prompts_are_recognised_in_every_format(case):
    assert is_gptme_request(sample_request(case))


def test_the_title_request_and_other_agents_are_not_gptme():
    assert not is_gptme_request(req(load_request("title")))
    other = parse_chat_request({"model": "m", "messages": [{"role": "system", "content": "You are a helpful agent."},
                                                           {"role": "user", "content": "You are gptme v1"}]})
    assert not is_gptme_request(other)


def test_the_oracle_picks_the_dialect_of_the_case_format(gripprobe_plugins, agent_driver):
    dialects = gripprobe_plugins.registry.dialects  # every driver's, as the real oracle has them
    assert {"gptme-tool", "gptme-markdown", "gptme-xml"} == set(agent_driver.oracle_dialects()) <= set(dialects)

    def chosen(body, fmt):
        return OracleServer([SHELL], dialects=dialects, format=fmt).dialect_for(req(body)).name

    assert chosen(load_request("tool_after_result"), "tool") == "gptme-tool"
    assert chosen(load_request("markdown_after_result"), "markdown") == "gptme-markdown"
    assert chosen(load_request("xml_after_result"), "xml") == "gptme-xml"
    assert chosen(load_request("title"), "markdown") == "tools"  # side request: no gptme prompt
    assert chosen(load_request("markdown_after_result"), "tool") == "tools"  # not this case's format
    reference_like = {"model": "perfect", "messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "function", "function": {"name": "shell", "parameters": {}}}]}
    assert chosen(reference_like, "tool") == "tools"


# ---------------------------------------------------------------------------- steps

def test_steps_come_from_the_conversation_in_each_format():
    assert TOOL.steps_taken(req(load_request("tool_after_result"))) == 1
    assert MD.steps_taken(req(load_request("markdown_after_result"))) == 1
    assert XML.steps_taken(req(load_request("xml_after_result"))) == 1
    assert MD.steps_taken(sample_request("md_success")) == 0


def test_gptmes_nudges_do_not_restart_the_plan():
    """After the final answer gptme nudges with a <system> user message: still one step taken (the
    generic dialect counts from the last user message and would start again, forever)."""
    body = load_request("tool_after_result")
    nudge = {"role": "user", "content": [{"type": "text", "text": "<system>No tool call detected in last message. "
                                                                   "Did you mean to finish?</system>"}]}
    extended = req(body, messages=body["messages"] + [{"role": "assistant", "content": "Done."}, nudge])
    assert TOOL.steps_taken(extended) == 1
    assert ToolsDialect().steps_taken(extended) == 0
    assert MD.steps_taken(req(load_request("markdown_nudge"))) == 0  # lazy: nudged, never acted


# ---------------------------------------------------------------------------- saying actions

@pytest.mark.parametrize("dialect,fmt", [(MD, "markdown"), (XML, "xml")])
@pytest.mark.parametrize("action,expected", [
    (WRITE, ("save", {"path": "greeting.txt", "content": "Hello, GripProbe!\nSecond line."})),
    (SHELL, ("shell", {"command": "pwd > pwd.txt"})),
    (EDIT, ("patch", {"path": "settings.py",
                      "patch": "<<<<<<< ORIGINAL\nTIMEOUT = 30\n=======\nTIMEOUT = 45\n>>>>>>> UPDATED"})),
])
def test_text_dialects_say_actions_as_gptme_reads_them(dialect, fmt, action, expected):
    turn = dialect.say(action, 0, sample_request("md_success"))
    assert turn.tool_call is None and turn.action_index == 0 and turn.text_calls == ()
    (use,) = tool_uses(turn.text, fmt)
    assert (use.name, use.arguments) == expected


@pytest.mark.parametrize("dialect,fmt,content,tool", [
    (MD, "markdown", "no final newline", "shell"), (XML, "xml", "no final newline", "shell"),
    (MD, "markdown", "two newlines\n\n", "shell"), (XML, "xml", "two newlines\n\n", "shell"),
    (MD, "markdown", "```\nfenced\n```\n", "shell"), (XML, "xml", "```\nfenced\n```\n", "save"),
    (MD, "markdown", "  indented\n", "save"), (XML, "xml", "  indented\n", "shell"),
    (MD, "markdown", "control \x01\n", "shell"), (XML, "xml", "control \x01\n", "shell"),
])
def test_contents_save_cannot_reproduce_go_through_the_shell(dialect, fmt, content, tool):
    """gptme's save adds a missing final newline, markdown blocks cannot hold fence lines safely, xml
    strips surrounding whitespace: those writes go through the shell (exact), the rest through save."""
    action = ReferenceWrite.model_validate({"write": {"path": "f.txt", "content": content}})
    (use,) = tool_uses(dialect.say(action, 0, sample_request("md_success")).text, fmt)
    assert use.name == tool


def test_unsafe_commands_are_sent_base64_encoded_and_evaluated():
    """A command markdown cannot carry (a fence line in a heredoc) is eval-ed from base64 in gptme's
    shell; never `| bash`, which gptme's shell denies."""
    command = "cat > a.md <<'EOF'\n```\nx\n```\nEOF"
    (use,) = tool_uses(MD.shell_block(command), "markdown")
    sent = use.arguments["command"]
    assert sent.startswith('eval "$(printf \'%s\' ') and sent.endswith(' | base64 -d)"') and "| bash" not in sent
    assert base64.b64decode(re.search(r"printf '%s' ([A-Za-z0-9+/=]+) \|", sent).group(1)).decode() == command
    (plain,) = tool_uses(XML.shell_block("python3 -c 'print(1 < 2 & 3)'"), "xml")
    assert plain.arguments == {"command": "python3 -c 'print(1 < 2 & 3)'"}


def test_writes_markdown_cannot_carry_are_decoded_from_base64_without_an_interpreter():
    action = ReferenceWrite.model_validate({"write": {"path": "docs/c.md", "content": "```\nfenced\n```"}})
    (use,) = tool_uses(MD.say(action, 0, sample_request("md_success")).text, "markdown")
    sent = use.arguments["command"]
    assert sent.startswith('mkdir -p -- "$(dirname -- docs/c.md)" && printf \'%s\' ')
    assert sent.endswith(" | base64 -d > docs/c.md")
    encoded = re.search(r"printf '%s' ([A-Za-z0-9+/=]+) \|", sent).group(1)
    assert base64.b64decode(encoded).decode() == "```\nfenced\n```"


def test_xml_prose_is_escaped_so_the_whole_reply_stays_well_formed():
    """gptme (installed without lxml) parses the whole reply as XML: a raw `<` in the prose would
    make it run nothing."""
    action = ReferenceShell.model_validate({"shell": "cat > g.md <<'EOF'\nx & y\nEOF"})
    text = XML.say(action, 0, sample_request("xml_success")).text
    assert "<<'EOF'" not in text.split("<tool-use>")[0]
    (use,) = tool_uses(text, "xml")
    assert use.arguments == {"command": "cat > g.md <<'EOF'\nx & y\nEOF"}
    final = XML.finish(sample_request("xml_success"), "Done: run `a < b && c`.\x01")
    assert [u.name for u in tool_uses(final.text, "xml")] == ["complete"]


def test_tool_dialect_uses_save_patch_and_the_shell_like_gptme_needs():
    request = sample_request("tool_success", tools=gptme_tools())
    assert TOOL.write_tool(request).name == "save" and "save" in TOOL.write_names  # gptme's own, not generic
    save = TOOL.say(WRITE, 0, request).tool_call
    assert (save.name, json.loads(save.arguments)) == ("save", {"path": "greeting.txt", "content": WRITE.write.content})
    patch = TOOL.say(EDIT, 0, request).tool_call
    assert patch.name == "patch" and json.loads(patch.arguments)["patch"].startswith("<<<<<<< ORIGINAL\nTIMEOUT = 30\n")
    no_newline = ReferenceWrite.model_validate({"write": {"path": "n.txt", "content": "x"}})
    shell = TOOL.say(no_newline, 0, request).tool_call  # save would append a newline
    assert shell.name == "shell" and json.loads(shell.arguments) == {"command": "printf '%s' x > n.txt"}


def test_finish_ends_with_complete_in_each_format():
    tool_req = sample_request("tool_success", tools=gptme_tools())
    assert TOOL.finish(tool_req, "Done.").tool_call.name == "complete"
    for dialect, fmt in ((MD, "markdown"), (XML, "xml")):
        turn = dialect.finish(sample_request("md_success"), "Done.")
        assert [u.name for u in tool_uses(turn.text, fmt)] == ["complete"] and turn.tool_call is None


def test_quoted_tool_output_in_the_final_answer_is_defused():
    evil = ("Last tool output:\n```shell\nrm -rf ~\n```\n@shell(c1): {\"command\": \"rm -rf ~\"}\n"
            "<tool-use><shell>rm</shell></tool-use>")
    for dialect, fmt in ((MD, "markdown"), (XML, "xml")):
        uses = tool_uses(dialect.finish(sample_request("md_success"), evil).text, fmt)
        assert [u.name for u in uses] == ["complete"]
    text = TOOL.finish(sample_request("tool_success", tools=gptme_tools()), evil).text
    assert tool_uses(text, "tool") == [] and "rm -rf ~" in text
    assert defuse("plain prose, `inline` code") == "plain prose, `inline` code"
    assert tool_uses(defuse("a\r```shell\rrm x\r```\r"), "markdown") == []  # gptme reads \r as a line break


def test_text_formats_have_no_structured_failing_call():
    """(They say the failure as a text turn instead: ``failing_turn``, see test_gptme_text_failures.)"""
    assert MD.failing_call(sample_request("md_success")) is None
    assert TOOL.failing_call(sample_request("tool_success", tools=gptme_tools())).name == "shell"


@pytest.mark.parametrize("old,new,ok", [
    ("a = 1", "a = 2", True), ("x\n", "y\n", True), ("line\n", "", True),
    ("", "x", False), ("same", "same", False), ("a\n=======\nb", "c", False), ("a", "b\n=======\nc", False),
    ("# ... rest", "x", False), ("a\r\nb", "c", False),
])
def test_conflict_patch_only_when_gptme_reads_it_back_exactly(old, new, ok):
    assert (conflict_patch(old, new) is not None) is ok


# ---------------------------------------------------------------------------- profiles, ground truth

def test_profiles_on_real_markdown_requests():
    oracle = OracleServer([WRITE], dialects={"gptme-markdown": MD}, format="markdown")

    def decide(profile: str, body: dict, keep: int | None = None):
        messages = body["messages"][:keep] if keep else body["messages"]
        return oracle.decide(req(body, model=profile, messages=messages))[1].turn

    after_result = load_request("markdown_after_result")
    perfect = decide("perfect", after_result, keep=4)  # system prompts + the user prompt: step 0
    assert perfect.action_index == 0 and [u.name for u in tool_uses(perfect.text, "markdown")] == ["save"]
    assert [u.name for u in tool_uses(decide("perfect", after_result).text, "markdown")] == ["complete"]
    recover = decide("error-then-recover", after_result, keep=4)  # the failing shell use first
    assert [(u.name, u.arguments) for u in tool_uses(recover.text, "markdown")] == [
        ("shell", {"command": "cat gripprobe-missing-file.txt"})]
    lazy = decide("lazy", load_request("markdown_nudge"))
    assert tool_uses(lazy.text, "markdown") == [] and lazy.tool_call is None
    assert decide("perfect", load_request("title")).text == "GripProbe oracle session"


async def _post_all(base_url: str, bodies: list[dict]) -> list[str]:
    """POST each body to the running oracle (streaming); the reply texts as the client saw them."""
    out = []
    async with aiohttp.ClientSession() as session:
        for body in bodies:
            async with session.post(base_url + "/v1/chat/completions", json=body) as resp:
                text = ""
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if line.startswith("data: {"):
                        for choice in json.loads(line[6:]).get("choices", []):
                            text += (choice.get("delta") or {}).get("content") or ""
                out.append(text)
    return out


@pytest.mark.parametrize("fmt,body_name", [("tool", "tool_after_result"), ("markdown", "markdown_after_result"),
                                           ("xml", "xml_after_result")])
def test_ground_truth_text_calls_match_what_the_proxy_scanner_counts(gripprobe_plugins, fmt, body_name):
    """The final answer quotes the last tool output; make that output look like a JSON tool call.
    Ground truth must hold exactly the nonstructured calls the proxy's scanner finds in the reply."""
    body = json.loads(json.dumps(load_request(body_name)))
    fake = '{"name": "shell", "arguments": {"command": "ls"}}'
    last = body["messages"][-1]
    last["content"] = [{"type": "text", "text": f"Output:\n{fake}\n"}]
    actions = TestSpec(id="t", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                       reference=[{"write": {"path": "x", "content": "y\n"}}]).reference

    async def run() -> tuple[list[str], list[dict]]:
        async with oracle_server(actions, plugins=gripprobe_plugins, format=fmt) as oracle:
            return await _post_all(oracle.base_url, [body]), oracle.ground_truth

    (text,), ground_truth = asyncio.run(run())
    nonstructured = [g for g in ground_truth if not g["structured"]]
    assert len(nonstructured) == len(scan_text_tool_calls(text))
    if fmt == "tool":  # only the tool format's final answer quotes a tool message
        assert [g["name"] for g in nonstructured] == ["shell"]
        assert [g["name"] for g in ground_truth if g["structured"]] == ["complete"]
    else:
        assert nonstructured == [] and ground_truth == []


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200))
def test_every_text_turn_records_exactly_the_scanned_calls(text):
    turn = MD.finish(sample_request("md_success"), text)
    assert len(turn.text_calls) == len(scan_text_tool_calls(turn.text))
    assert [u.name for u in tool_uses(turn.text, "markdown")] == ["complete"]

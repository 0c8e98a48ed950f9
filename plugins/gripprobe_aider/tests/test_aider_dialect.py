"""The oracle's aider dialects against aider's REAL requests (``fixtures/requests/*.json``: bodies
aider 0.86.2 sent to the oracle with this plugin's command line), directly and through the real
oracle server over HTTP (127.0.0.1, port 0)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gripprobe_core.plugin import TestSpec, find_text_tool_calls, parse_chat_request
from gripprobe_core.testing import OracleServer, oracle_server
from gripprobe_aider.conversation import parse_file_listings, read_chat
from gripprobe_aider.dialect import AiderDialect, steps_in_reply
from gripprobe_aider.edits import line_block

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SETTINGS = '"""Service settings."""\n\nHOST = "127.0.0.1"\nPORT = 8080\nTIMEOUT_SECONDS = 30\nRETRIES = 3\n'
PATCH_PLAN = TestSpec(id="patch_file", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                      reference=[{"read": {"path": "settings.py"}},
                                 {"edit": {"path": "settings.py", "old": "TIMEOUT_SECONDS = 30",
                                           "new": "TIMEOUT_SECONDS = 45"}}]).reference
SAVE_PLAN = TestSpec(id="save_file", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                     reference=[{"write": {"path": "greeting.txt", "content": "Hello, GripProbe!\nSaved.\n"}}]).reference
FENCE_PLAN = TestSpec(id="fence", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                      reference=[{"edit": {"path": "notes.md", "old": "draft", "new": "final"}},
                                 {"write": {"path": "new.txt", "content": "no final newline"}}]).reference


def bodies(name: str) -> list[dict]:
    """Real aider request bodies captured from the oracle (``fixtures/requests/<name>.json``)."""
    return json.loads((FIXTURES / "requests" / f"{name}.json").read_text())


def req(name: str, n: int = 0):
    return parse_chat_request(bodies(name)[n])


# ------------------------------------------------------------------------------------ recognising

@pytest.mark.parametrize("name, fmt", [("whole_patch_file", "whole"), ("diff_fence", "diff"),
                                       ("udiff_patch_file", "udiff"), ("whole_fence", "whole")])
def test_each_dialect_accepts_only_aiders_requests_in_its_own_format(name, fmt):
    request = req(name)
    for other in ("whole", "diff", "udiff"):
        dialect = AiderDialect(other)
        assert dialect.accepts(request, other) is (other == fmt)
        assert dialect.accepts(request, "tool") is False
    assert AiderDialect(fmt).is_task_request(request)


def test_requests_that_are_not_aiders_are_left_to_other_dialects():
    body = bodies("whole_patch_file")[0]
    architect = dict(body, messages=[{"role": "system", "content": "Act as an expert architect engineer."},
                                     *body["messages"][1:]])
    tools = {"model": "perfect", "messages": [{"role": "user", "content": "hi"}],
             "tools": [{"type": "function", "function": {"name": "shell", "parameters": {}}}]}
    for body in (architect, tools, {"model": "x", "messages": []}):
        request = parse_chat_request(body)
        assert not any(AiderDialect(f).accepts(request, f) for f in ("whole", "diff", "udiff"))


def test_chat_files_and_fence_are_read_from_the_request():
    chat = read_chat(bodies("whole_patch_file")[0]["messages"])
    assert (chat.edit_format, chat.fence, chat.files) == ("whole", ("```", "```"), {"settings.py": SETTINGS})
    fenced = read_chat(bodies("whole_fence")[0]["messages"])
    assert fenced.fence == ("````", "````")  # aider avoids ``` because notes.md holds a ``` line
    assert fenced.files["notes.md"] == '# Notes (draft)\n\n```python\nprint("hi")\n```\n'
    # the udiff prompt never shows the fence: the listing itself says it
    assert read_chat(bodies("udiff_fence")[0]["messages"]).files == fenced.files
    assert read_chat(bodies("whole_retry_loop_save_file")[0]["messages"]).files == {}


def test_content_without_a_final_newline_is_read_back_exactly():
    text = "\nnotes.txt\n```\nline one\nno newline```\n\nb.txt\n<source>\nx\n</source>\n"
    assert parse_file_listings(text) == {"notes.txt": "line one\nno newline", "b.txt": "x\n"}


def test_steps_are_counted_over_the_session_even_after_aider_moves_an_exchange_to_its_history():
    loop = [AiderDialect("whole").steps_taken(parse_chat_request(b)) for b in bodies("whole_retry_loop_save_file")]
    assert loop == [0, 1, 2, 3]
    # after a failed diff edit that created a file, aider files the exchange under "I updated the files."
    first, second = (parse_chat_request(b) for b in bodies("diff_error_then_recover_save_file"))
    assert [AiderDialect("diff").steps_taken(r) for r in (first, second)] == [0, 1]


def test_steps_in_reply():
    assert steps_in_reply("I will perform steps 2-4 of the plan: x.\n\nfile") == 3
    assert steps_in_reply("I will perform step 1 of the plan: write a.") == 1
    assert steps_in_reply("Let me try one edit first: x.") == 1
    assert steps_in_reply("Ok.") == steps_in_reply("") == steps_in_reply(None) == 0  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ saying

def test_whole_lists_the_entire_new_file():
    turn = AiderDialect("whole").say_in_plan(PATCH_PLAN, 0, req("whole_patch_file"))
    assert turn.text == ("I will perform steps 1-2 of the plan: read settings.py; edit settings.py.\n\n"
                         "settings.py\n```\n" + SETTINGS.replace("= 30", "= 45") + "```\n")
    assert (turn.tool_call, turn.text_calls) == (None, ())


def test_udiff_hunk_has_context_and_whole_lines():
    turn = AiderDialect("udiff").say_in_plan(PATCH_PLAN, 0, req("udiff_patch_file"))
    assert turn.text.endswith("```diff\n--- settings.py\n+++ settings.py\n@@ ... @@\n \n HOST = \"127.0.0.1\"\n"
                              " PORT = 8080\n-TIMEOUT_SECONDS = 30\n+TIMEOUT_SECONDS = 45\n```\n")


def test_diff_uses_aiders_fence_and_an_empty_search_for_a_new_file():
    turn = AiderDialect("diff").say_in_plan(FENCE_PLAN, 0, req("diff_fence"))
    assert turn.text == (
        "I will perform steps 1-2 of the plan: edit notes.md; write new.txt.\n"
        "(new.txt will end with a newline: aider writes whole lines.)\n\n"
        "notes.md\n````\n<<<<<<< SEARCH\n# Notes (draft)\n=======\n# Notes (final)\n>>>>>>> REPLACE\n````\n\n"
        "new.txt\n````\n<<<<<<< SEARCH\n=======\nno final newline\n>>>>>>> REPLACE\n````\n")
    whole = AiderDialect("whole").say_in_plan(FENCE_PLAN, 0, req("whole_fence")).text
    assert 'notes.md\n````\n# Notes (final)\n\n```python\nprint("hi")\n```\n````\n' in whole


def test_whole_cannot_rewrite_a_file_it_has_not_seen():
    plan = TestSpec(id="t", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                    reference=[{"edit": {"path": "other.py", "old": "a", "new": "b"}}, {"shell": "pwd"}]).reference
    text = AiderDialect("whole").say_in_plan(plan, 0, req("whole_patch_file")).text
    assert "```" not in text
    assert "I cannot list other.py in full" in text and "I cannot run `pwd`" in text
    udiff = AiderDialect("udiff").say_in_plan(plan, 0, req("udiff_patch_file")).text
    assert "--- other.py\n+++ other.py\n@@ ... @@\n-a\n+b\n" in udiff


def test_failing_and_malformed_turns():
    diff = AiderDialect("diff")
    bad = diff.failing_turn(req("diff_fence"))
    assert "gripprobe-missing-file.txt\n````\n<<<<<<< SEARCH\nGripProbe oracle: this line is in no file\n" in bad.text
    assert steps_in_reply(bad.text) == 1
    # whole: a nameless listing fails only when the chat does not hold exactly one file
    assert AiderDialect("whole").failing_turn(req("whole_patch_file")) is None
    nameless = AiderDialect("whole").failing_turn(req("whole_retry_loop_save_file"))
    assert nameless.text == "Let me try one edit first.\n\n```\npresent\n```\n"
    broken = diff.malformed_turn(PATCH_PLAN, 0, req("diff_fence"))
    # settings.py is not in that chat: the edit is given as whole lines, and its block is left open
    assert broken.text.endswith("settings.py\n````\n<<<<<<< SEARCH\nTIMEOUT_SECONDS = 30\n=======\n"
                                "TIMEOUT_SECONDS = 45\n````\n")
    assert broken.text.startswith("I will perform steps 1-2 of the plan")
    header_less = AiderDialect("udiff").malformed_turn(PATCH_PLAN, 0, req("udiff_patch_file")).text
    assert "```diff\n@@ ... @@\n" in header_less and "+++" not in header_less
    only_reads = PATCH_PLAN[:1]
    assert diff.malformed_turn(only_reads, 0, req("diff_fence")) is None


@given(prefix=st.text(alphabet="ab\n ", max_size=30), old=st.text(alphabet="xy\n", min_size=1, max_size=10),
       suffix=st.text(alphabet="ab\n ", max_size=30), new=st.text(alphabet="zy\n", max_size=10))
def test_line_block_replaces_whole_lines_to_the_same_effect(prefix, old, suffix, new):
    content = prefix + old + suffix
    got = line_block(content, old, new)
    if content.count(old) != 1:
        assert got is None
        return
    old_lines, new_lines, context = got
    base = content if content.endswith("\n") else content + "\n"
    assert base.count(old_lines) >= 1 and old_lines.endswith("\n") and len(context) <= 3
    expected = content.replace(old, new, 1)
    assert base.replace(old_lines, new_lines, 1).rstrip("\n") == expected.rstrip("\n")


# --------------------------------------------------------------------------- through the real oracle

def serve(plugins, plan, fmt: str, posts: list[dict], model: str) -> tuple[list[str], OracleServer]:
    """POST each of ``posts`` (with ``model`` = profile) to the real oracle with every registered dialect."""
    async def go():
        texts = []
        async with oracle_server(plan, plugins=plugins, format=fmt) as oracle:
            async with aiohttp.ClientSession() as http:
                for body in posts:
                    async with http.post(oracle.base_url + "/v1/chat/completions",
                                         json={**body, "model": model, "stream": False}) as resp:
                        assert resp.status == 200
                        texts.append((await resp.json())["choices"][0]["message"]["content"])
        return texts, oracle
    return asyncio.run(go())


def test_the_driver_brings_the_three_dialects_and_they_are_registered(agent_driver, gripprobe_plugins):
    want = {"aider-diff": "AiderDialect", "aider-udiff": "AiderDialect", "aider-whole": "AiderDialect"}
    assert {n: type(d).__name__ for n, d in agent_driver.oracle_dialects().items()} == want
    registered = gripprobe_plugins.registry.dialects
    assert {n: type(d).__name__ for n, d in registered.items() if n.startswith("aider")} == want


def test_profiles_speak_aider_through_the_server(gripprobe_plugins):
    plugins, loop = gripprobe_plugins, bodies("whole_retry_loop_save_file")
    texts, oracle = serve(plugins, SAVE_PLAN, "whole", loop, "retry-loop")
    assert texts[:3] == ["Let me try one edit first.\n\n```\npresent\n```\n"] * 3
    assert texts[3] == "The same call failed 3 times. I give up."
    assert oracle.ground_truth == [] and {r["reply"] for r in oracle.request_log} == {"text"}
    (perfect,), _ = serve(plugins, SAVE_PLAN, "whole", loop[:1], "perfect")
    assert perfect.endswith("greeting.txt\n```\nHello, GripProbe!\nSaved.\n```\n")
    (lazy,), _ = serve(plugins, SAVE_PLAN, "whole", loop[:1], "lazy")
    assert "```" not in lazy
    recover, _ = serve(plugins, SAVE_PLAN, "diff", bodies("diff_error_then_recover_save_file"), "error-then-recover")
    assert recover[0].startswith("Let me try one edit first") and "greeting.txt\n```\n<<<<<<< SEARCH\n=======\n" in recover[1]
    (malformed,), _ = serve(plugins, PATCH_PLAN, "whole", bodies("whole_patch_file"), "malformed-args")
    assert "\n\n```\n\"\"\"Service settings.\"\"\"" in malformed and "settings.py\n```" not in malformed
    # a case in another format is not aider's: the tools dialect answers it
    (side,), _ = serve(plugins, SAVE_PLAN, "tool", loop[:1], "perfect")
    assert side == "GripProbe oracle session"


def test_ground_truth_holds_exactly_what_the_proxys_detector_counts(gripprobe_plugins):
    call = json.dumps({"name": "write", "arguments": {"path": "a.txt", "content": "x"}})
    plan = TestSpec(id="t", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                    reference=[{"write": {"path": "call.json", "content": call + "\n"}},
                               {"write": {"path": "plain.txt", "content": "hello\n"}}]).reference
    for fmt, name in (("whole", "whole_retry_loop_save_file"), ("diff", "diff_error_then_recover_save_file"),
                      ("udiff", "udiff_patch_file")):
        (text,), oracle = serve(gripprobe_plugins, plan, fmt, bodies(name)[:1], "perfect")
        counted = find_text_tool_calls(text)
        assert [(g["name"], g["structured"]) for g in oracle.ground_truth] == [(n, False) for n, _ in counted]
        # a whole listing's fenced body is a bare JSON call object: the detector counts it
        assert len(counted) == (1 if fmt == "whole" else 0), (fmt, text)

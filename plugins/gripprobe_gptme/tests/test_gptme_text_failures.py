"""The markdown and xml formats' deliberate failures: the dialects' ``failing_turn`` and
``malformed_turn``, the profiles that use them (driven on the requests gptme 0.35.1 really sent,
``fixtures/requests``), and the parser on what the real gptme did with them
(``fixtures/captured/{markdown,xml}_*``, this plugin's own runs against the oracle).
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gripprobe_core.plugin import (
    MISSING_FILE, ReferenceEdit, ReferenceShell, ReferenceWrite, ToolsDialect, detect_retry_loop, parse_chat_request,
    tool_attempts,
)
from gripprobe_core.testing import RETRY_LIMIT, OracleServer
from gripprobe_gptme.dialects import FAILING_COMMAND, GptmeMarkdownDialect, GptmeXmlDialect
from gripprobe_gptme.parse import parse_conversation, tool_uses

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MD, XML = GptmeMarkdownDialect(), GptmeXmlDialect()
#: (dialect, format, a request gptme really sent in that format)
TEXT = [pytest.param(MD, "markdown", "markdown_after_result", id="markdown"),
        pytest.param(XML, "xml", "xml_after_result", id="xml")]
WRITE = ReferenceWrite.model_validate(
    {"write": {"path": "greeting.txt", "content": "Hello, GripProbe!\nSecond line.\n"}})
SHELL = ReferenceShell.model_validate({"shell": "pwd > pwd.txt"})
EDIT = ReferenceEdit.model_validate({"edit": {"path": "settings.py", "old": "TIMEOUT = 30", "new": "TIMEOUT = 45"}})
FAILED = ("Ran allowlisted command: `cat gripprobe-missing-file.txt`\n\n"
          "`cat: gripprobe-missing-file.txt: No such file or directory`\n\nReturn code: 1\n")
NUDGE = ("<system>No tool call detected in last message. Did you mean to finish? If so, make sure you are "
         "completely done and then use the `complete` tool to end the session.</system>")


def load(name: str) -> dict:
    return json.loads((FIXTURES / "requests" / f"{name}.json").read_text(encoding="utf-8"))


def conversation(body: dict, *turns: tuple[str, str], model: str = "perfect"):
    """gptme's request: its system prompts and the user prompt (the fixture's first four messages),
    then each ``(role, text)``: the oracle's replies and what gptme sent back (a ``system`` result
    after a tool use, a ``user`` nudge after none)."""
    messages = body["messages"][:4] + [{"role": role, "content": text} for role, text in turns]
    return parse_chat_request({**body, "model": model, "messages": messages})


def uses(text: str, fmt: str) -> list[tuple[str, object, bool]]:
    return [(u.name, u.arguments, u.malformed) for u in tool_uses(text, fmt)]


def gptme_reads(text: str, fmt: str) -> list[str]:
    """The tool uses gptme would run (malformed ones are the ones it cannot read)."""
    return [u.name for u in tool_uses(text, fmt) if not u.malformed]


# ---------------------------------------------------------------------------- failing_turn

@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_the_failing_turn_is_one_shell_use_of_the_generic_failing_command(dialect, fmt, body):
    request = conversation(load(body))
    turn = dialect.failing_turn(request)
    assert uses(turn.text, fmt) == [("shell", {"command": f"cat {MISSING_FILE}"}, False)]
    assert turn.tool_call is None and turn.action_index is None and turn.text_calls == ()
    generic = ToolsDialect().failing_call(parse_chat_request({
        "model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]}))
    assert json.loads(generic.arguments) == {"command": FAILING_COMMAND}
    if fmt == "xml":  # gptme reads the whole reply as one XML document
        ElementTree.fromstring(f"<root>{turn.text}</root>")


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_the_failing_turn_is_identical_whatever_the_conversation(dialect, fmt, body):
    """Retry-loop detection needs the same call (name and arguments) every time."""
    first = dialect.failing_turn(conversation(load(body)))
    later = dialect.failing_turn(conversation(load(body), ("assistant", first.text), ("system", FAILED)))
    assert later == first == dialect.failing_turn(conversation(load(body), model="retry-loop"))


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_each_failing_turn_counts_as_a_step_and_nudges_do_not(dialect, fmt, body):
    text = dialect.failing_turn(conversation(load(body))).text
    turns: list[tuple[str, str]] = []
    assert dialect.steps_taken(conversation(load(body))) == 0
    for n in range(1, 4):
        turns += [("assistant", text), ("system", FAILED)]
        assert dialect.steps_taken(conversation(load(body), *turns)) == n
    turns += [("assistant", "I give up."), ("user", NUDGE)]
    assert dialect.steps_taken(conversation(load(body), *turns)) == 3


# ---------------------------------------------------------------------------- the profiles

def decide(dialect, fmt: str, body: str, profile: str, *turns: tuple[str, str], actions=(WRITE,)):
    oracle = OracleServer(list(actions), dialects={dialect.name: dialect}, format=fmt)
    return oracle.decide(conversation(load(body), *turns, model=profile))[1].turn


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_error_then_recover_fails_once_then_plays_the_plan_then_completes(dialect, fmt, body):
    bad = decide(dialect, fmt, body, "error-then-recover")
    assert uses(bad.text, fmt) == [("shell", {"command": FAILING_COMMAND}, False)]
    step = decide(dialect, fmt, body, "error-then-recover", ("assistant", bad.text), ("system", FAILED))
    assert step.action_index == 0 and gptme_reads(step.text, fmt) == ["save"]
    assert step == dialect.say(WRITE, 0, conversation(load(body)))
    done = decide(dialect, fmt, body, "error-then-recover", ("assistant", bad.text), ("system", FAILED),
                  ("assistant", step.text), ("system", "Saved to greeting.txt"))
    assert gptme_reads(done.text, fmt) == ["complete"]


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_retry_loop_sends_the_same_failing_use_three_times_then_gives_up(dialect, fmt, body):
    turns: list[tuple[str, str]] = []
    sent = []
    for _ in range(RETRY_LIMIT):
        turn = decide(dialect, fmt, body, "retry-loop", *turns)
        sent.append(turn.text)
        turns += [("assistant", turn.text), ("system", FAILED)]
    assert len(set(sent)) == 1 and gptme_reads(sent[0], fmt) == ["shell"]
    give_up = decide(dialect, fmt, body, "retry-loop", *turns)
    assert tool_uses(give_up.text, fmt) == [] and "failed 3 times" in give_up.text
    nudged = decide(dialect, fmt, body, "retry-loop", *turns, ("assistant", give_up.text), ("user", NUDGE))
    assert nudged == give_up  # gptme's nudge never restarts the loop


# ---------------------------------------------------------------------------- malformed_turn

@pytest.mark.parametrize("dialect,fmt,body", TEXT)
@pytest.mark.parametrize("action,tool", [(WRITE, "save"), (SHELL, "shell"), (EDIT, "patch")])
def test_the_malformed_turn_is_the_action_cut_short(dialect, fmt, body, action, tool):
    """The well-formed turn minus its closing fence (markdown) or the tool's closing tag (xml): the
    tool use is still recognisable (and counted as a step) but gptme cannot read it."""
    request = conversation(load(body))
    whole = dialect.say(action, 0, request)
    broken = dialect.malformed_turn([action, WRITE], 0, request)
    assert broken.action_index == 0 and broken.tool_call is None and broken.text_calls == ()
    if fmt == "markdown":
        assert broken.text + "```\n" == whole.text
    else:
        assert broken.text == whole.text.replace(f"\n</{tool}>\n</tool-use>", "\n</tool-use>")
        with pytest.raises(ElementTree.ParseError):  # what gptme's stdlib parser does: runs nothing
            ElementTree.fromstring(f"<root>{broken.text}</root>")
    ((name, raw, malformed),) = uses(broken.text, fmt)
    assert (name, malformed) == (tool, True) and isinstance(raw, str)
    assert gptme_reads(broken.text, fmt) == []
    assert dialect.steps_taken(conversation(load(body), ("assistant", broken.text), ("user", NUDGE))) == 1


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_malformed_turn_without_an_action_left_is_none(dialect, fmt, body):
    request = conversation(load(body))
    assert dialect.malformed_turn([], 0, request) is None
    assert dialect.malformed_turn([WRITE], 1, request) is None
    assert dialect.malformed_turn([WRITE, SHELL], 1, request).text.count("shell") == 1


@pytest.mark.parametrize("dialect,fmt,body", TEXT)
def test_malformed_args_sends_the_broken_turn_once_then_gives_up(dialect, fmt, body):
    broken = decide(dialect, fmt, body, "malformed-args")
    assert broken == dialect.malformed_turn([WRITE], 0, conversation(load(body)))
    after = decide(dialect, fmt, body, "malformed-args", ("assistant", broken.text), ("user", NUDGE))
    assert tool_uses(after.text, fmt) == [] and "malformed" in after.text


# ---------------------------------------------------------------------------- what gptme did (captured)

def captured(case: str, fmt: str):
    data = (FIXTURES / "captured" / case / "conversation.jsonl").read_bytes()
    return parse_conversation(data, "measured", fmt).events


def test_captured_markdown_retry_loop_is_three_identical_failed_shell_calls():
    events = captured("markdown_retry_loop", "markdown")
    attempts = tool_attempts(events)
    assert [(a.name, a.status) for a in attempts] == [("shell", "error")] * 3
    assert {json.dumps(a.start.payload["arguments"]) for a in attempts} == {json.dumps({"command": FAILING_COMMAND})}
    assert all(a.result.exit_code == 1 for a in attempts)
    assert detect_retry_loop(events)
    responses = [e for e in events if e.event_type == "model_response"]
    assert len(responses) == 6  # three failing uses, the give-up answer, two answers to gptme's nudges


def test_captured_xml_error_then_recover_fails_then_saves_then_completes():
    attempts = tool_attempts(captured("xml_error_then_recover", "xml"))
    assert [(a.start.payload["raw_name"], a.status) for a in attempts] == [
        ("shell", "error"), ("save", "success"), ("complete", "success")]
    assert attempts[0].result.exit_code == 1
    assert not detect_retry_loop(captured("xml_error_then_recover", "xml"))


@pytest.mark.parametrize("case,fmt,tool", [("markdown_malformed_args", "markdown", "save"),
                                           ("xml_malformed_args", "xml", "shell")])
def test_captured_malformed_use_is_evidence_on_the_response_not_a_tool_event(case, fmt, tool):
    """gptme ran nothing and nudged twice: no tool event (a tier-B start would say it ran), the
    reply's model_response carries protocol_malformed and the unreadable use."""
    events = captured(case, fmt)
    assert [e.event_type for e in events] == ["model_response"] * 3
    first, *rest = events
    assert first.error_type == "protocol_malformed" and first.status == "success"
    assert first.payload["tool_call_count"] == 0
    assert [u["raw_name"] for u in first.payload["unreadable_tool_uses"]] == [tool]
    assert all(e.error_type is None and "unreadable_tool_uses" not in e.payload for e in rest)
    log = (FIXTURES / "captured" / case / "conversation.jsonl").read_text()
    assert log.count("No tool call detected") == 2

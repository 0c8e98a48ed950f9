"""The oracle's mini dialects on the requests mini 2.4.6 really sent (``fixtures/requests``, taken from the
recording proxy's records of this plugin's runs): which requests they take, what they say, what mini reads
back from it with its own regular expression, and what the commands really do when ``/bin/sh`` runs them
(mini runs every command with ``subprocess`` and ``shell=True``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gripprobe_core.plugin import (
    MISSING_FILE, ReferenceEdit, ReferenceShell, ReferenceWrite, ToolsDialect, parse_chat_request, shell_command_for,
)
from gripprobe_core.testing import RETRY_LIMIT, OracleServer
from gripprobe_miniswe.dialect import (
    DEFAULT_FENCE, FAILING_COMMAND, SUBMIT_COMMAND, MiniMarkdownDialect, MiniToolDialect, action_blocks, block, defuse,
    fence_language, is_mini_request, mini_dialects,
)

REQUESTS = Path(__file__).resolve().parent / "fixtures" / "requests"
MD, TOOL = MiniMarkdownDialect(), MiniToolDialect()
WRITE = ReferenceWrite.model_validate(
    {"write": {"path": "greeting.txt", "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}})
SHELL = ReferenceShell.model_validate({"shell": "pwd > pwd.txt"})
EDIT = ReferenceEdit.model_validate({"edit": {"path": "settings.py", "old": "TIMEOUT = 30", "new": "TIMEOUT = 45"}})
#: mini's answer to a reply without an action (its format_error_template, rendered), and to a command
OBSERVATION = "<returncode>0</returncode>\n<output>\n</output>"
FAILED = "<returncode>1</returncode>\n<output>\ncat: gripprobe-missing-file.txt: No such file or directory\n</output>"
FORMAT_ERROR = ("Format error:\n\n<error>\nExpected exactly 1 action, found 0.\n</error>\n\nHere is general guidance on "
                "how to format your response:\n\nPlease always provide EXACTLY ONE action in triple backticks, found 0 actions.")
TOOL_FORMAT_ERROR = ("Tool call error:\n\n<error>\nNo tool calls found in the response. Every response MUST include at "
                     "least one tool call.\n</error>")


def load(name: str) -> dict:
    return json.loads((REQUESTS / f"{name}.json").read_text(encoding="utf-8"))


def conversation(fmt: str, *turns: dict, model: str = "perfect"):
    """mini's request in ``fmt``: its system prompt and task (the fixture's first two messages), then
    ``turns`` (Chat Completions messages)."""
    body = load(f"{fmt}_first")
    return parse_chat_request({**body, "model": model, "messages": body["messages"][:2] + list(turns)})


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def tool_turn(call_id: str, command: str) -> list[dict]:
    """An assistant ``bash`` call and mini's tool message answering it."""
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": command})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": '{\n  "returncode": 0,\n  "output": ""\n}'}]


def run_sh(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """``command`` as mini runs it: ``subprocess`` with ``shell=True`` (``/bin/sh``)."""
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=30)


# ---------------------------------------------------------------------------- which requests

def test_the_dialects_take_exactly_minis_requests_in_their_format():
    md, tool = conversation("markdown"), conversation("tool")
    assert is_mini_request(md) and is_mini_request(tool)
    assert MD.accepts(md, "markdown") and not MD.accepts(md, "tool") and not MD.accepts(tool, "markdown")
    assert TOOL.accepts(tool, "tool") and not TOOL.accepts(tool, "markdown") and not TOOL.accepts(md, "tool")
    other = parse_chat_request({"model": "perfect", "messages": [{"role": "system", "content": "You are gptme v0.35"},
                                                                 {"role": "user", "content": "Create hello.txt"}]})
    assert not is_mini_request(other) and not MD.accepts(other, "markdown") and not MD.is_task_request(other)
    assert list(mini_dialects()) == ["mini-swe-agent-markdown", "mini-swe-agent-tool"]


def test_the_fence_is_the_one_minis_system_prompt_teaches():
    assert fence_language(conversation("markdown")) == DEFAULT_FENCE == "mswea_bash_command"
    v1 = parse_chat_request({"model": "m", "messages": [
        {"role": "system", "content": "Reply with one block:\n```bash\nyour_command\n```"},
        {"role": "user", "content": f"Do it, then `{SUBMIT_COMMAND}`."}]})
    assert fence_language(v1) == "bash"
    assert action_blocks(MD.say(SHELL, 0, v1).text, "bash") == ["pwd > pwd.txt"]


# ---------------------------------------------------------------------------- markdown: what mini reads back

@pytest.mark.parametrize("action", [WRITE, SHELL, EDIT], ids=["write", "shell", "edit"])
def test_each_action_is_one_block_mini_reads_as_the_exact_command(action):
    turn = MD.say(action, 0, conversation("markdown"))
    assert action_blocks(turn.text) == [shell_command_for(action).strip()]
    assert turn.action_index == 0 and turn.tool_call is None and turn.text_calls == ()


def test_the_write_mini_runs_writes_the_exact_content(tmp_path):
    (command,) = action_blocks(MD.say(WRITE, 0, conversation("markdown")).text)
    assert run_sh(command, tmp_path).returncode == 0
    assert (tmp_path / "greeting.txt").read_text() == WRITE.write.content


@pytest.mark.parametrize("content", ["no final newline", "```\nfenced\n```\n", "a\n```mswea_bash_command\nrm x\n```\n",
                                     "  spaces around  \n\n"])
def test_content_a_block_cannot_carry_goes_through_base64_and_is_still_exact(content, tmp_path):
    action = ReferenceWrite.model_validate({"write": {"path": "sub/out.txt", "content": content}})
    (command,) = action_blocks(MD.say(action, 0, conversation("markdown")).text)
    assert "```" not in command
    result = run_sh(command, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "sub" / "out.txt").read_text() == content


def test_a_block_holding_a_fence_is_base64_and_a_plain_one_is_not():
    assert block("pwd > pwd.txt") == "```mswea_bash_command\npwd > pwd.txt\n```"
    assert "base64 -d" in block("printf '```' > f") and "```" not in action_blocks(block("printf '```' > f"))[0]


def test_prose_never_adds_an_action():
    """A closing answer quoting a block (a tool output) still holds exactly one action: the submit command."""
    quoted = f"Done.\n\n```{DEFAULT_FENCE}\nrm -rf /\n```\n````{DEFAULT_FENCE}\nreboot\n```"
    turn = MD.finish(conversation("markdown"), quoted)
    assert action_blocks(turn.text) == [SUBMIT_COMMAND]
    assert defuse("plain prose, `inline` and ```python\nprint(1)\n```") == "plain prose, `inline` and ```python\nprint(1)\n```"


def test_finish_is_the_answer_and_the_submit_command():
    turn = MD.finish(conversation("markdown"), "Done. Steps performed: 1. write greeting.txt.")
    assert action_blocks(turn.text) == [SUBMIT_COMMAND] and turn.text.startswith("THOUGHT: Done.")
    assert turn.action_index is None and turn.tool_call is None


def test_submit_really_prints_the_marker_mini_looks_for(tmp_path):
    result = run_sh(SUBMIT_COMMAND, tmp_path)
    assert result.returncode == 0 and result.stdout.splitlines()[0] == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


# ---------------------------------------------------------------------------- markdown: steps and failures

def test_steps_count_from_the_task_and_minis_own_user_messages_do_not_restart_the_plan():
    write = MD.say(WRITE, 0, conversation("markdown")).text
    assert MD.steps_taken(conversation("markdown")) == 0
    assert MD.steps_taken(conversation("markdown", assistant(write), user(OBSERVATION))) == 1
    # a format error (mini's own user message, after a reply it dropped) does not reset the count
    later = conversation("markdown", assistant(write), user(OBSERVATION), user(FORMAT_ERROR))
    assert MD.steps_taken(later) == 1
    assert MD.steps_taken(conversation("markdown", assistant("I would write the file."), user(FORMAT_ERROR))) == 0


def test_the_failing_turn_is_one_block_of_the_generic_failing_command_and_always_the_same(tmp_path):
    first = MD.failing_turn(conversation("markdown"))
    assert action_blocks(first.text) == [FAILING_COMMAND] == [f"cat {MISSING_FILE}"]
    again = MD.failing_turn(conversation("markdown", assistant(first.text), user(FAILED), model="retry-loop"))
    assert again == first and MD.failing_call(conversation("markdown")) is None
    assert run_sh(FAILING_COMMAND, tmp_path).returncode == 1


@pytest.mark.parametrize("action", [WRITE, SHELL, EDIT], ids=["write", "shell", "edit"])
def test_the_malformed_turn_is_the_block_without_its_closing_fence(action):
    request = conversation("markdown")
    whole, broken = MD.say(action, 0, request), MD.malformed_turn([action, WRITE], 0, request)
    assert broken.text.rstrip("\n") + "\n```" == whole.text.rstrip("\n")
    assert action_blocks(broken.text) == [] and broken.action_index == 0  # mini reads no action: a format error
    assert MD.malformed_turn([], 0, request) is None and MD.malformed_turn([WRITE], 1, request) is None


def decide(fmt: str, profile: str, *turns: dict, actions=(WRITE,)):
    oracle = OracleServer(list(actions), dialects=mini_dialects(), format=fmt)
    return oracle.decide(conversation(fmt, *turns, model=profile))[1].turn


def test_perfect_in_markdown_writes_then_submits():
    first = decide("markdown", "perfect")
    assert first.action_index == 0 and action_blocks(first.text) == [shell_command_for(WRITE)]
    done = decide("markdown", "perfect", assistant(first.text), user(OBSERVATION))
    assert action_blocks(done.text) == [SUBMIT_COMMAND]


def test_retry_loop_in_markdown_is_three_identical_failures_then_gives_up_for_good():
    turns: list[dict] = []
    sent = []
    for _ in range(RETRY_LIMIT):
        turn = decide("markdown", "retry-loop", *turns)
        sent.append(turn.text)
        turns += [assistant(turn.text), user(FAILED)]
    assert len(set(sent)) == 1 and action_blocks(sent[0]) == [FAILING_COMMAND]
    give_up = decide("markdown", "retry-loop", *turns)
    assert action_blocks(give_up.text) == []
    # mini drops the action-less reply and asks again: the loop does not start over
    assert decide("markdown", "retry-loop", *turns, user(FORMAT_ERROR)) == give_up


def test_malformed_args_in_markdown_is_sent_again_while_mini_drops_it():
    broken = decide("markdown", "malformed-args")
    assert action_blocks(broken.text) == [] and broken.action_index == 0
    assert decide("markdown", "malformed-args", user(FORMAT_ERROR)) == broken


# ---------------------------------------------------------------------------- the tool format

def test_tool_format_says_writes_through_bash_and_finishes_with_the_submit_call():
    request = conversation("tool")
    turn = TOOL.say(WRITE, 0, request)
    assert turn.tool_call.name == "bash"
    assert json.loads(turn.tool_call.arguments) == {"command": shell_command_for(WRITE)}
    done = TOOL.finish(request, "Done.")
    assert done.text == "Done." and json.loads(done.tool_call.arguments) == {"command": SUBMIT_COMMAND}
    assert json.loads(TOOL.failing_call(request).arguments) == {"command": FAILING_COMMAND}


def test_tool_format_steps_survive_minis_format_errors_where_the_generic_count_restarts():
    turns = [*tool_turn("call_1", shell_command_for(WRITE)), user(TOOL_FORMAT_ERROR)]
    request = conversation("tool", *turns)
    assert ToolsDialect().steps_taken(request) == 0  # the generic dialect would write again, forever
    assert TOOL.steps_taken(request) == 1
    assert json.loads(decide("tool", "perfect", *turns).tool_call.arguments) == {"command": SUBMIT_COMMAND}


def test_tool_format_retry_loop_gives_up_for_good_after_three_failures():
    turns: list[dict] = []
    for n in range(RETRY_LIMIT):
        turn = decide("tool", "retry-loop", *turns)
        assert json.loads(turn.tool_call.arguments) == {"command": FAILING_COMMAND}
        turns += tool_turn(f"call_{n}", FAILING_COMMAND)
    assert decide("tool", "retry-loop", *turns).tool_call is None
    assert decide("tool", "retry-loop", *turns, user(TOOL_FORMAT_ERROR)).tool_call is None


@pytest.mark.parametrize("fmt,dialect", [("markdown", MD), ("tool", TOOL)])
def test_on_minis_real_second_request_the_write_is_one_step_and_the_oracle_submits(fmt, dialect):
    """The request mini really sent after running the write (its output as a user or a tool message)."""
    body = load(f"{fmt}_after_result")
    request = parse_chat_request({**body, "model": "perfect"})
    assert dialect.accepts(request, fmt) and dialect.steps_taken(request) == 1
    turn = OracleServer([WRITE], dialects=mini_dialects(), format=fmt).decide(request)[1].turn
    if fmt == "markdown":
        assert action_blocks(turn.text) == [SUBMIT_COMMAND]
    else:
        assert json.loads(turn.tool_call.arguments) == {"command": SUBMIT_COMMAND}

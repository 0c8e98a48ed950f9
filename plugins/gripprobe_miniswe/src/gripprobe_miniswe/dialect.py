"""Oracle dialects for mini-swe-agent: how the oracle backend says a reference action in mini's terms.

mini has exactly one tool, a shell, and two ways of being asked to use it (its model class, chosen by the
format; :mod:`gripprobe_miniswe.config`):

- ``tool`` (:class:`MiniToolDialect`, named ``mini-swe-agent-tool``): one OpenAI function tool, ``bash``
  ``{command}``. The generic ``tools`` dialect already says every action through it (writes and edits as
  the exact shell commands of ``shell_command_for``); what mini needs on top is its way of ending and of
  complaining.
- ``markdown`` (:class:`MiniMarkdownDialect`, ``mini-swe-agent-markdown``): no tools are offered; the
  reply text must hold exactly one fenced block in the language mini's system prompt teaches
  (```` ```mswea_bash_command ```` in 2.4.6), which mini finds with the regular expression
  `````mswea_bash_command\\s*\\n(.*?)\\n```.`` and runs.

A request is mini's when its first user message (mini's instance template) names mini's submit command,
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``. mini sends no side request (no title, no summary).

**Ending.** mini stops only when a command it runs prints ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` as its
first line; a reply without an action is a *format error*, answered with a new user message asking for
one, and after three format errors in a row mini exits (exit status ``RepeatedFormatError``, exit code
0). So both dialects finish with the closing answer's text *and* the submit command (a ``bash`` call, or a
block), which is a tool call like any other (ground truth: ``action_index`` null).

**Counting steps.** Every later user message is mini's own (a format error; in ``markdown`` also every
command's output), so steps are counted from the task message, not from the last user message as the
generic dialect does (which would restart the plan after each format error, forever). mini never keeps a
reply it rejected (its conversation goes on without it), so a rejected reply is no step: a deliberately
broken turn is sent again until mini gives up.

**Deliberate failures** (the profiles' optional hooks): ``tool`` keeps the generic ``failing_call`` (``cat
gripprobe-missing-file.txt`` through ``bash``, exit 1) and the generic malformed arguments (the JSON cut
short: mini answers "Error parsing tool call arguments", a format error, runs nothing). ``markdown`` has
no structured call: ``failing_turn`` is a reply whose one block runs that same ``cat`` (the same text every
time, so three are a retry loop), and ``malformed_turn`` the action's block without its closing fence, which
mini's regular expression cannot match: "found 0 actions", a format error, nothing runs.

**Ground truth.** In ``markdown`` the recording proxy's nonstructured scanner
(:func:`~gripprobe_core.plugin.scan_text_tool_calls`) counts model-native tool-call syntaxes only, not an
agent's own text protocol such as mini's fenced blocks, so a text turn records exactly the calls that
scanner finds in the reply (normally none): ground truth and tier A agree by construction, and mini's
trajectory is the evidence (tier B).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Sequence

from gripprobe_core.plugin import (
    MISSING_FILE, ChatRequest, Dialect, ReferenceAction, TextCall, ToolCall, ToolsDialect, Turn, describe_action,
    message_text, scan_text_tool_calls, shell_command_for,
)

__all__ = [
    "DEFAULT_FENCE", "FAILING_COMMAND", "MiniMarkdownDialect", "MiniToolDialect", "SUBMIT_COMMAND", "SUBMIT_MARKER",
    "action_blocks", "defuse", "fence_language", "is_mini_request", "mini_dialects", "task_index",
]

#: What a command mini runs must print first for mini to stop (``LocalEnvironment._check_finished``).
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: The submit command mini's instance template teaches (both shipped configs).
SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"
#: The fence language of mini 2.4.6's text-based model class (``LitellmTextbasedModelConfig.action_regex``).
DEFAULT_FENCE = "mswea_bash_command"
#: The deliberately failing command (the generic dialect's ``failing_call``): ``cat`` of a file no test
#: creates, which exits 1.
FAILING_COMMAND = f"cat {MISSING_FILE}"

_TAUGHT_FENCE = re.compile(r"```([A-Za-z_][\w-]*)[ \t]*\n")


# ------------------------------------------------------------------------------ recognising mini

def task_index(request: ChatRequest) -> int:
    """Index of the first user message (mini's instance template holding the task), -1 when none."""
    return next((i for i, m in enumerate(request.messages) if m.get("role") == "user"), -1)


def is_mini_request(request: ChatRequest) -> bool:
    """Is ``request`` mini's: does its first user message name mini's submit command?"""
    i = task_index(request)
    return i >= 0 and SUBMIT_COMMAND in message_text(request.messages[i])


def fence_language(request: ChatRequest) -> str:
    """The fence language mini's system prompt teaches (the first fenced block it shows), else
    :data:`DEFAULT_FENCE`."""
    for m in request.messages:
        if m.get("role") == "system" and (found := _TAUGHT_FENCE.search(message_text(m))):
            return found.group(1)
    return DEFAULT_FENCE


def _opener(fence: str) -> re.Pattern[str]:
    return re.compile(r"```" + re.escape(fence) + r"\s*\n")


def action_blocks(text: str, fence: str = DEFAULT_FENCE) -> list[str]:
    """The commands mini reads from ``text``: its own regular expression, each stripped (mini runs the
    reply only when there is exactly one)."""
    if not isinstance(text, str):
        return []
    return [a.strip() for a in re.findall(r"```" + re.escape(fence) + r"\s*\n(.*?)\n```", text, re.DOTALL)]


def defuse(text: str, fence: str = DEFAULT_FENCE) -> str:
    """``text`` with every opening of an action block made inert (a space between the backticks and the
    language: ```` ``` mswea_bash_command ```` opens nothing), so prose standing next to the reply's block
    never adds a second action. Anything else is unchanged."""
    return re.sub(r"(?<=``)`(?=" + re.escape(fence) + r")", "` ", text)


def _text_calls(text: str) -> tuple[TextCall, ...]:
    """The calls the recording proxy's nonstructured scanner finds in ``text``, as ground truth
    (``structured: false``): what makes ground truth and tier A agree."""
    return tuple(TextCall(ToolCall(c.name, c.arguments)) for c in scan_text_tool_calls(text))


def _turn(text: str, *, tool_call: ToolCall | None = None, action_index: int | None = None) -> Turn:
    return Turn(text=text, tool_call=tool_call, action_index=action_index, text_calls=_text_calls(text))


# ------------------------------------------------------------------------------ the tool format

class MiniToolDialect(ToolsDialect):
    """mini's default model class: one ``bash`` function tool. The generic dialect, plus the submit
    command to end and steps counted from the task (see the module docstring)."""

    name = "mini-swe-agent-tool"
    format = "tool"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return format == self.format and request.has_tools and is_mini_request(request)

    def steps_taken(self, request: ChatRequest) -> int:
        return sum(1 for m in request.messages[task_index(request) + 1:]
                   if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list) and m["tool_calls"])

    def finish(self, request: ChatRequest, text: str) -> Turn:
        shell = self.shell_tool(request)
        call = self._shell_call(shell, SUBMIT_COMMAND) if shell is not None else None
        return _turn(text, tool_call=call)


# ------------------------------------------------------------------------------ the text format

class MiniMarkdownDialect:
    """mini's text-based model class: one ```` ```mswea_bash_command ```` block per reply, no tools."""

    name = "mini-swe-agent-markdown"
    format = "markdown"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return format == self.format and not request.has_tools and is_mini_request(request)

    def is_task_request(self, request: ChatRequest) -> bool:
        return is_mini_request(request)

    def steps_taken(self, request: ChatRequest) -> int:
        """Assistant replies since the task that hold an action block mini ran (it keeps no other)."""
        opener = _opener(fence_language(request))
        return sum(1 for m in request.messages[task_index(request) + 1:]
                   if m.get("role") == "assistant" and opener.search(message_text(m)))

    # -------------------------------------------------------------------- speaking

    def say(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        fence = fence_language(request)
        return _turn(self._reply(f"I will {describe_action(action)}.", shell_command_for(action), fence),
                     action_index=index)

    def say_in_plan(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        return self.say(actions[index], index, request)

    def finish(self, request: ChatRequest, text: str) -> Turn:
        return _turn(self._reply(text, SUBMIT_COMMAND, fence_language(request)))

    def failing_call(self, request: ChatRequest) -> ToolCall | None:
        """None: the text format has no structured call; :meth:`failing_turn` says the failure instead."""
        return None

    def failing_turn(self, request: ChatRequest) -> Turn:
        """A reply whose one block mini runs and which fails (``cat`` of the missing file, exit 1); the
        same text whatever the request, so a retry repeats it exactly; it counts as a step."""
        return _turn(self._reply("Let me look at the existing file first.", FAILING_COMMAND,
                                 fence_language(request)))

    def malformed_turn(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn | None:
        """The turn performing ``actions[index]`` with its block cut short (no closing fence): mini's
        regular expression finds no action, mini runs nothing and answers with a format error. None when no
        action is left."""
        if not 0 <= index < len(actions):
            return None
        whole = self.say(actions[index], index, request).text
        broken = whole.rstrip("\n")
        broken = broken[:-3].rstrip("\n") if broken.endswith("```") else broken
        return _turn(broken + "\n", action_index=index)

    # -------------------------------------------------------------------- the block

    @staticmethod
    def _reply(prose: str, command: str, fence: str) -> str:
        return f"THOUGHT: {defuse(prose, fence)}\n\n{block(command, fence)}\n"


def block(command: str, fence: str = DEFAULT_FENCE) -> str:
    """The fenced block running ``command``, read back by mini exactly (it strips the command, which a shell
    command never minds). A command holding a fence (which would end the block early) goes base64-encoded
    and ``eval``-ed: mini runs commands with ``/bin/sh``, where ``eval "$(…)"`` is exact."""
    command = command.strip()
    if not command or "```" in command:
        encoded = base64.b64encode(command.encode("utf-8")).decode("ascii")
        command = f"eval \"$(printf '%s' {encoded} | base64 -d)\""
    return f"```{fence}\n{command}\n```"


def mini_dialects() -> dict[str, Dialect]:
    """The two mini dialects by name (what the driver's ``oracle_dialects`` gives the oracle)."""
    dialects: list[Any] = [MiniMarkdownDialect(), MiniToolDialect()]
    return {d.name: d for d in dialects}

"""Behaviour profiles of the oracle backend: the "model name" decides how it behaves.

A profile is any object with ``name``, ``description`` and ``respond(ctx) -> Reply``. It decides what
to say (a :class:`~.plan.Turn`, an HTTP error, pacing) and never touches the wire. Profiles are
stateless: everything they need is in the request's conversation and the reference plan, so a
retried request gets the same answer.

To add one, write a class here and list it in :func:`builtin_profiles`; or pass your own mapping as
``OracleServer(..., profiles=...)``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Protocol, Sequence, runtime_checkable

from ..models.specs import ReferenceAction
from .dialects import Dialect
from .ollama_api import ollama_model_ref
from .conversation import ChatRequest, Reply, TextCall, ToolCall, Turn, describe_plan

SIDE_ANSWER = "GripProbe oracle session"
"""Answer to side requests (no tools: an agent's title or summary request). Never advances a plan."""

FINAL_OUTPUT_LIMIT = 2000


@dataclass(frozen=True)
class ProfileContext:
    """What a profile decides from: the normalized request, the reference plan, the chosen dialect."""

    request: ChatRequest
    actions: Sequence[ReferenceAction]
    dialect: Dialect
    trial: int = 1
    """Which trial of its cell the case is (``--trials N``); only ``flaky`` looks at it."""


@runtime_checkable
class Profile(Protocol):
    name: str
    description: str

    def respond(self, ctx: ProfileContext) -> Reply: ...


def final_text(ctx: ProfileContext) -> str:
    """The closing answer: what was done, plus the last tool output (so "tell me what the file says"
    tests get their answer)."""
    text = f"Done. Steps performed: {describe_plan(ctx.actions)}."
    last = ctx.request.last_tool_output()
    if last:
        text += "\n\nLast tool output:\n" + last[:FINAL_OUTPUT_LIMIT]
    return text


class PerfectProfile:
    """Performs the reference actions in order, one tool call per assistant turn, then answers."""

    name = "perfect"
    description = "performs the test's reference solution with the agent's own tools, then answers"

    def respond(self, ctx: ProfileContext) -> Reply:
        request, dialect = ctx.request, ctx.dialect
        if not dialect.is_task_request(request):
            return Reply(Turn(text=SIDE_ANSWER))
        step = dialect.steps_taken(request)
        if step < len(ctx.actions):
            return Reply(say_step(ctx, step))
        return Reply(dialect.finish(request, final_text(ctx)))


class LazyProfile:
    """Never calls a tool: describes what it would do and stops."""

    name = "lazy"
    description = "never calls a tool; answers with text describing what it would do"

    def respond(self, ctx: ProfileContext) -> Reply:
        if not ctx.dialect.is_task_request(ctx.request):
            return Reply(Turn(text=SIDE_ANSWER))
        return Reply(Turn(text=f"To solve this I would: {describe_plan(ctx.actions)}. "
                               "I have not run anything."))


def say_step(ctx: ProfileContext, index: int) -> Turn:
    """The turn performing ``ctx.actions[index]``: the dialect's ``say_in_plan`` when it has one."""
    in_plan = getattr(ctx.dialect, "say_in_plan", None)
    if callable(in_plan):
        return in_plan(ctx.actions, index, ctx.request)
    return ctx.dialect.say(ctx.actions[index], index, ctx.request)


def failing_call(ctx: ProfileContext) -> ToolCall | None:
    """The dialect's deliberately failing call (``failing_call``), None when it has none."""
    make = getattr(ctx.dialect, "failing_call", None)
    return make(ctx.request) if callable(make) else None


def failing_turn(ctx: ProfileContext, text: str = "") -> Turn | None:
    """A turn bound to fail: the dialect's own ``failing_turn(request)`` when it has one (text dialects
    such as aider's write a failing edit into the reply), else ``text`` plus :func:`failing_call`;
    None when the dialect can say neither."""
    make = getattr(ctx.dialect, "failing_turn", None)
    if callable(make):
        return make(ctx.request)
    bad = failing_call(ctx)
    return Turn(text=text, tool_call=bad) if bad is not None else None


def side_reply(ctx: ProfileContext) -> Reply | None:
    """The side answer when the request is not a task request, else None."""
    return None if ctx.dialect.is_task_request(ctx.request) else Reply(Turn(text=SIDE_ANSWER))


# -------------------------------------------------------------------------------- misbehaviours

TEXT_CALL_OPEN, TEXT_CALL_CLOSE = "<tool_call>", "</tool_call>"


def text_call_block(call: ToolCall) -> str:
    """``<tool_call>{"name": …, "arguments": …}</tool_call>`` (function arguments parsed when they are
    JSON; a freeform call's input as a string)."""
    args: Any = call.arguments
    if call.kind == "function":
        try:
            args = json.loads(call.arguments)
        except ValueError:
            pass
    return TEXT_CALL_OPEN + json.dumps({"name": call.name, "arguments": args}, ensure_ascii=False) + TEXT_CALL_CLOSE


class TextToolsProfile:
    """Writes the plan's tool calls as text (``<tool_call>{…}</tool_call>`` blocks), never structured."""

    name = "text-tools"
    description = "writes every tool call of the plan as <tool_call> JSON text in one reply; no structured call"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        if any(TEXT_CALL_OPEN in text for text in ctx.request.assistant_texts()):
            return Reply(Turn(text="I have written the tool calls above; run them to finish the task."))
        calls = [TextCall(t.tool_call, t.action_index) for i in range(len(ctx.actions))
                 if (t := say_step(ctx, i)).tool_call is not None]
        if not calls:
            return Reply(Turn(text=f"To solve this I would: {describe_plan(ctx.actions)}."))
        text = "I will use these tools:\n" + "\n".join(text_call_block(c.call) for c in calls)
        return Reply(Turn(text=text, text_calls=tuple(calls)))


def malformed(call: ToolCall, ctx: ProfileContext, index: int) -> ToolCall:
    """``call`` with broken arguments: JSON cut short (its closing brace dropped); on Ollama, whose
    arguments are always an object, an empty object (the required parameters missing); a freeform
    call becomes a function call where the dialect can say one, else a patch without its end marker."""
    if call.kind == "custom":
        with_functions = getattr(ctx.dialect, "say_with_functions", None)
        alt = with_functions(ctx.actions[index], index, ctx.request) if callable(with_functions) else None
        if alt is not None and alt.tool_call is not None and alt.tool_call.kind == "function":
            call = alt.tool_call
        else:
            return replace(call, arguments=call.arguments.replace("*** End Patch", "").rstrip("\n"))
    if ctx.request.protocol.startswith("ollama"):
        return replace(call, arguments="{}")
    return replace(call, arguments=call.arguments[:-1])


class MalformedArgsProfile:
    """First step: the first action's call with arguments that are not valid JSON; then gives up."""

    name = "malformed-args"
    description = "sends the first call with arguments that are not valid JSON, then gives up in text"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        if ctx.dialect.steps_taken(ctx.request) == 0 and ctx.actions:
            turn = say_step(ctx, 0)
            if turn.tool_call is None:
                # text dialects (aider's edit blocks) break their own block when they can
                make = getattr(ctx.dialect, "malformed_turn", None)
                broken = make(ctx.actions, 0, ctx.request) if callable(make) else None
                return Reply(broken if broken is not None else turn)
            return Reply(Turn(tool_call=malformed(turn.tool_call, ctx, 0), action_index=0))
        return Reply(Turn(text="My tool call was malformed and I cannot fix it. I give up."))


class ErrorThenRecoverProfile:
    """A call that fails (``cat`` of a missing file), then the whole reference plan, then the answer."""

    name = "error-then-recover"
    description = "first a failing call (cat of a missing file), then the reference solution, then the answer"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        step = ctx.dialect.steps_taken(ctx.request)
        bad = failing_turn(ctx, "Let me look at the existing file first.")
        if bad is not None and step == 0:
            return Reply(bad)
        index = step - (1 if bad is not None else 0)
        if index < len(ctx.actions):
            return Reply(say_step(ctx, index))
        return Reply(ctx.dialect.finish(ctx.request, final_text(ctx)))


RETRY_LIMIT = 3


class RetryLoopProfile:
    """The same failing call (same name, same arguments) three times in a row, then gives up."""

    name = "retry-loop"
    description = f"repeats one failing call {RETRY_LIMIT} times with identical arguments, then gives up"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        bad = failing_turn(ctx)
        if bad is not None and ctx.dialect.steps_taken(ctx.request) < RETRY_LIMIT:
            return Reply(bad)
        return Reply(Turn(text=f"The same call failed {RETRY_LIMIT} times. I give up."))


REPEAT_COMMAND, REPEAT_DELAY_S = "ls", 0.25


class RepeatLoopProfile:
    """The same call that succeeds (``ls`` through the shell tool; without one, the first reference step) on
    every task request, never an answer: a model stuck re-reading until the agent's timeout. Each reply waits
    ``REPEAT_DELAY_S`` so a short timeout sees a handful of calls, not thousands."""

    name = "repeat-loop"
    description = (f"repeats one successful call ({REPEAT_COMMAND} through the shell) with identical arguments "
                   "on every turn, never answering")

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        find, make = getattr(ctx.dialect, "shell_tool", None), getattr(ctx.dialect, "_shell_call", None)
        shell = find(ctx.request) if callable(find) else None
        if shell is not None and callable(make):
            turn = Turn(text="Let me look at the workspace again.", tool_call=make(shell, REPEAT_COMMAND))
        elif ctx.actions:
            turn = say_step(ctx, 0)
        else:
            turn = Turn(text="There is nothing I can look at.")
        return Reply(turn, delay_s=REPEAT_DELAY_S)


class Http500Profile:
    """HTTP 500 on every task request (side requests are still answered)."""

    name = "http-500"
    description = "answers every task request with HTTP 500"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        return Reply(http_status=500, error="oracle profile http-500: internal server error")


class ToolsUnsupportedProfile:
    """Ollama's HTTP 400 "… does not support tools" for any request offering tools; without tools it
    behaves like ``perfect`` (a text-format agent is served normally)."""

    name = "tools-unsupported"
    description = "rejects any request with tools with Ollama's HTTP 400 'does not support tools'"
    supports_tools = False
    """Read by ``/api/show`` (capabilities); a profile without this attribute supports tools."""

    def respond(self, ctx: ProfileContext) -> Reply:
        if ctx.request.has_tools:
            return Reply(http_status=400, error=f"{ollama_model_ref(ctx.request.model)} does not support tools")
        return PerfectProfile().respond(ctx)


class StallProfile:
    """Accepts a task request and never answers (the agent must time out)."""

    name = "stall"
    description = "accepts every task request and never answers"

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        return Reply(stall=True)


SLOW_PIECES, SLOW_DELAY_S = 20, 0.03


class SlowStreamProfile:
    """``perfect``, but streams text and arguments in many small pieces with a pause between chunks
    (a JSON reply waits as long as the stream would have taken)."""

    name = "slow-stream"
    description = f"the perfect plan, streamed in ~{SLOW_PIECES} pieces {int(SLOW_DELAY_S * 1000)} ms apart"

    def respond(self, ctx: ProfileContext) -> Reply:
        reply = PerfectProfile().respond(ctx)
        if ctx.request.stream:
            return replace(reply, stream_pieces=SLOW_PIECES, chunk_delay_s=SLOW_DELAY_S)
        return replace(reply, delay_s=SLOW_PIECES * SLOW_DELAY_S)


class FlakyProfile:
    """A model that is right only some of the time, deterministically: ``perfect`` on odd-numbered trials,
    ``lazy`` on even ones (both phases of a case follow its trial), so three trials give two passes."""

    name = "flaky"
    description = "perfect on odd-numbered trials, lazy on even ones (a model right two times in three)"

    def respond(self, ctx: ProfileContext) -> Reply:
        return (PerfectProfile() if ctx.trial % 2 else LazyProfile()).respond(ctx)


REFUSAL = re.compile(r"(?i)\b(?:den(?:y|ied|ial)|not (?:allowed|permitted|available|executed|found)|permission"
                     r"|reject(?:ed)?|refus(?:e|ed|al)|declin(?:e|ed)|blocked|cancel(?:l)?ed|disallowed|forbidden"
                     r"|aborted|requires approval|unavailable)\b")
"""What a tool result says when the agent (or its user) refused the call rather than ran it."""


def first_tool_output(request: ChatRequest) -> str | None:
    """Text of the first ``tool`` message since the last user message (the answer to the first call)."""
    for msg in request.since_last_user():
        if msg.get("role") == "tool":
            from .conversation import message_text
            return message_text(msg)
    return None


class DenyThenRecoverProfile:
    """Asks first for a shell command that does the first reference action; when the agent answers that the
    call was refused (or it failed), performs the whole reference with the agent's file tools instead, and
    says the shell was denied; when the shell ran, goes on with the rest of the plan. Its turns carry
    reasoning text (``thinking`` / ``reasoning_content`` / reasoning items), so traces get thought events."""

    name = "deny-then-recover"
    description = ("first a shell command doing the first step; if it is refused, the reference with the file "
                   "tools instead, and a final answer saying the shell was denied; reasons aloud on every turn")

    def respond(self, ctx: ProfileContext) -> Reply:
        if (side := side_reply(ctx)) is not None:
            return side
        request, dialect = ctx.request, ctx.dialect
        shell_call = self._shell_call(ctx)
        if shell_call is None:  # no shell offered (an agent may withhold a denied tool): the plan without it
            reply = PerfectProfile().respond(ctx)
            turn = reply.turn
            finishing = dialect.steps_taken(request) >= len(ctx.actions)  # (a finish may be a call: gptme's complete)
            if turn.tool_call is None or finishing:  # nothing left to call, or nothing that could: say what was missing
                note = ("The shell is not available to me (not allowed here), so I used the file tools. "
                        if dialect.steps_taken(request) else
                        "I am not allowed to use a tool that could do this, so I did nothing. ")
                turn = replace(turn, text=note + turn.text)
            return replace(reply, turn=replace(turn, reasoning="There is no shell tool here; I will do without it."))
        step = dialect.steps_taken(request)
        if step == 0:
            return Reply(Turn(text="I will do the first step with one shell command.", tool_call=shell_call,
                              action_index=0, reasoning="A single shell command is the quickest way to do this."))
        first = first_tool_output(request) or ""
        refused = bool(REFUSAL.search(first))
        index = step - 1 if refused else step
        if index < len(ctx.actions):
            turn = self._recover(ctx, index) if refused else say_step(ctx, index)
            if refused and turn.tool_call is not None and turn.tool_call.name == shell_call.name:
                return Reply(Turn(text="The shell command was denied and I have no other tool for this, so I "
                                       "stopped without changing anything.",
                                  reasoning="The shell is refused; every way I have goes through it."))
            why = ("The shell command was refused, so I will use the file tools instead." if refused
                   else "The shell command ran; on to the next step.")
            return Reply(replace(turn, reasoning=why))
        text = final_text(ctx)
        if refused:
            text = "The shell command was denied, so I used the file tools instead. " + text
        return Reply(replace(dialect.finish(request, text), reasoning="All steps are done; time to report."))

    @staticmethod
    def _shell_call(ctx: ProfileContext) -> ToolCall | None:
        if not ctx.actions:
            return None
        find, make = getattr(ctx.dialect, "shell_tool", None), getattr(ctx.dialect, "_shell_call", None)
        tool = find(ctx.request) if callable(find) else None
        if tool is None or not callable(make):
            return None
        from .dialects import shell_command_for
        return make(tool, shell_command_for(ctx.actions[0]))

    @staticmethod
    def _recover(ctx: ProfileContext, index: int) -> Turn:
        with_functions = getattr(ctx.dialect, "say_with_functions", None)
        if callable(with_functions):
            return with_functions(ctx.actions[index], index, ctx.request)
        return say_step(ctx, index)


EXPECTED_REFERENCE_STATUS: dict[str, tuple[str, str | None]] = {
    "perfect": ("PASS", None),
    "lazy": ("NO_TOOL_CALL", None),
    "text-tools": ("NO_TOOL_CALL", "protocol_malformed"),
    "malformed-args": ("FAIL", "protocol_malformed"),
    "error-then-recover": ("PASS", None),
    "retry-loop": ("FAIL", "tool_retry_loop"),
    "repeat-loop": ("TIMEOUT", "tool_repeat_loop"),
    "http-500": ("SHELL_ERROR", "nonzero_exit"),
    "tools-unsupported": ("TOOL_UNSUPPORTED", "backend_tool_unsupported"),
    "stall": ("TIMEOUT", None),
    "slow-stream": ("PASS", None),
    "flaky": ("PASS", None),
    "deny-then-recover": ("PASS", None),
}
"""Per built-in profile: the (status, failure_reason) the reference agent's case should get on a test
whose reference solution writes a file (docs/oracle.md); ``flaky``'s is its first trial's."""


def builtin_profiles() -> dict[str, Profile]:
    """A fresh name → profile mapping of every built-in profile."""
    profiles: list[Profile] = [
        PerfectProfile(), LazyProfile(), TextToolsProfile(), MalformedArgsProfile(), ErrorThenRecoverProfile(),
        RetryLoopProfile(), RepeatLoopProfile(), Http500Profile(), ToolsUnsupportedProfile(), StallProfile(),
        SlowStreamProfile(), FlakyProfile(), DenyThenRecoverProfile()]
    return {p.name: p for p in profiles}

"""Behaviour profiles of the oracle backend: the "model name" decides how it behaves.

A profile is any object with ``name``, ``description`` and ``respond(ctx) -> Reply``. It decides what
to say (a :class:`~.plan.Turn`, an HTTP error, pacing) and never touches the wire. Profiles are
stateless: everything they need is in the request's conversation and the reference plan, so a
retried request gets the same answer.

To add one, write a class here and list it in :func:`builtin_profiles`; or pass your own mapping as
``OracleServer(..., profiles=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from ..models.specs import ReferenceAction
from .dialects import Dialect
from .plan import ChatRequest, Reply, Turn, describe_plan

SIDE_ANSWER = "GripProbe oracle session"
"""Answer to side requests (no tools: an agent's title or summary request). Never advances a plan."""

FINAL_OUTPUT_LIMIT = 2000


@dataclass(frozen=True)
class ProfileContext:
    """What a profile decides from: the normalized request, the reference plan, the chosen dialect."""

    request: ChatRequest
    actions: Sequence[ReferenceAction]
    dialect: Dialect


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
            return Reply(dialect.say(ctx.actions[step], step, request))
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


def builtin_profiles() -> dict[str, Profile]:
    """A fresh name → profile mapping of every built-in profile."""
    profiles: list[Profile] = [PerfectProfile(), LazyProfile()]
    return {p.name: p for p in profiles}

"""Answering the agent (SPEC §12, docs/interaction.md): a case's interaction policy, the decision it gives
for each of the agent's mid-run requests ("may I run this tool?"), and the events that record both.

A policy is the ``observe.interaction`` block of a test (or its suite): ``auto-approve``, ``auto-deny``,
``scripted`` (ordered rules, the first that matches decides, else ``default``) or ``manual`` (the operator
answers on the terminal; its cases are excluded from scores). Drivers meet it in one of two ways:

* **session**: the harness is the agent's client (ACP, Claude Code's control protocol) and answers every
  request itself, through :class:`Responder` (the runner hands one to the driver's session);
* **native**: the driver turns the policy into the agent's own approval settings before it starts
  (:func:`static_policy` says what can be set up front, and why not when it cannot).

A driver that can do neither says so (:class:`InteractionSupport`, ``applied=False``): the run warns, the
case records it, and the evaluator never passes a case whose policy mattered (docs/evaluator.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Protocol

from .models.specs import InteractionRule, InteractionSpec

__all__ = [
    "InteractionSupport", "PermissionDecision", "PermissionOption", "PermissionRequest", "PolicyResponder",
    "Responder", "StaticPolicy", "ToolRef", "decide", "denies_anything", "permission_events", "static_policy",
]

Outcome = Literal["allow", "deny", "answer", "cancelled"]
"""``cancelled``: the agent withdrew its request before it was answered (a driver records it; never decided)."""
ALLOW_KINDS = ("allow_once", "allow_always")
REJECT_KINDS = ("reject_once", "reject_always")
MAX_INPUT_CHARS = 100_000
"""How much of a call's input (as JSON) an ``input_regex`` is matched against."""


@dataclass(frozen=True)
class ToolRef:
    """A tool the agent has: its name verbatim, and (when known) its normalized name and kind."""

    raw_name: str
    name: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class PermissionOption:
    """One answer the agent offers: ``kind`` is ACP's ``allow_once | allow_always | reject_once |
    reject_always``, or empty when the agent gives none."""

    option_id: str
    name: str = ""
    kind: str = ""

    def as_json(self) -> dict[str, str]:
        return {"option_id": self.option_id, "name": self.name, "kind": self.kind}


@dataclass(frozen=True)
class PermissionRequest:
    """One request from the agent: permission for a tool call (``tool_call_id``, names, ``input``, the
    ``options`` it offers), or a free-text question (``prompt`` alone)."""

    request_id: str
    tool_call_id: str | None = None
    raw_name: str | None = None
    name: str | None = None
    kind: str | None = None
    input: Any = None
    prompt: str | None = None
    options: tuple[PermissionOption, ...] = ()

    @property
    def is_question(self) -> bool:
        """A free-text question (a prompt and no tool named; it may still carry the id of the call that asked
        it, e.g. Claude Code's AskUserQuestion): only ``answer:`` rules answer it."""
        return self.prompt is not None and self.raw_name is None and self.name is None and self.kind is None

    def input_text(self) -> str:
        if self.input is None:
            return ""
        if isinstance(self.input, str):
            return self.input[:MAX_INPUT_CHARS]
        try:
            return json.dumps(self.input, ensure_ascii=False, sort_keys=True, default=str)[:MAX_INPUT_CHARS]
        except (TypeError, ValueError):
            return str(self.input)[:MAX_INPUT_CHARS]

    def as_payload(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "raw_name": self.raw_name, "name": self.name, "kind": self.kind,
                "input": self.input, "prompt": self.prompt, "options": [o.as_json() for o in self.options]}


@dataclass(frozen=True)
class PermissionDecision:
    """The answer to one request: ``allow`` / ``deny`` (``option_id`` the option picked, None when the agent
    offered none) or ``answer`` (free text). ``rule`` says what decided: ``rule 2 (tool_kind: execute)``,
    ``default``, ``auto-deny``, ``manual`` ..."""

    outcome: Outcome
    rule: str
    option_id: str | None = None
    answer: str | None = None

    def as_payload(self, request: PermissionRequest, decided_by: str = "policy") -> dict[str, Any]:
        option = next((o for o in request.options if o.option_id == self.option_id), None)
        return {"request_id": request.request_id, "outcome": self.outcome, "option_id": self.option_id,
                "option_kind": option.kind if option is not None else None, "answer": self.answer,
                "rule": self.rule, "decided_by": decided_by}


@dataclass(frozen=True)
class InteractionSupport:
    """How a driver meets the case's policy: ``session`` (the harness answers each request), ``native``
    (the agent's own settings), ``none``; ``applied`` False (with ``reason``) when the policy is not in force."""

    how: Literal["native", "session", "none"]
    applied: bool
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"how": self.how, "applied": self.applied, "reason": self.reason}


# ------------------------------------------------------------------------------------------ deciding

def _matches(rule: InteractionRule, req: PermissionRequest) -> bool:
    if rule.answer is not None:  # answers are for questions, decisions and options for tool calls
        if not req.is_question:
            return False
    elif req.is_question:
        return False
    if rule.tool_kind is not None and req.kind != rule.tool_kind:
        return False
    if rule.raw_name is not None and req.raw_name != rule.raw_name:
        return False
    if rule.name is not None and req.name != rule.name:
        return False
    if rule.input_regex is not None and not re.search(rule.input_regex, req.input_text()):
        return False
    if rule.prompt_regex is not None and not re.search(rule.prompt_regex, (req.prompt or "")[:MAX_INPUT_CHARS]):
        return False
    return True


def _describe(index: int, rule: InteractionRule) -> str:
    keys = rule.matchers()
    shown = ", ".join(f"{k}: {v}" for k, v in keys.items()) if keys else "any request"
    return f"rule {index} ({shown})"


def _pick(options: tuple[PermissionOption, ...], kinds: tuple[str, ...]) -> str | None:
    for kind in kinds:
        for o in options:
            if o.kind == kind:
                return o.option_id
    return None


def _decision(outcome: Literal["allow", "deny"], rule: str, options: tuple[PermissionOption, ...]) -> PermissionDecision:
    return PermissionDecision(outcome, rule, _pick(options, ALLOW_KINDS if outcome == "allow" else REJECT_KINDS))


def decide(spec: InteractionSpec | None, request: PermissionRequest) -> PermissionDecision:
    """The policy's answer to ``request`` (pure; ``manual`` is :class:`ManualResponder`'s, and here it denies
    with rule ``manual (no operator)``). No policy is ``auto-approve``: what every agent did before policies."""
    if spec is None or spec.policy == "auto-approve":
        return _decision("allow", "auto-approve", request.options)
    if spec.policy == "auto-deny":
        return _decision("deny", "auto-deny", request.options)
    if spec.policy == "manual":
        return _decision("deny", "manual (no operator)", request.options)
    for i, rule in enumerate(spec.rules, 1):
        if not _matches(rule, request):
            continue
        label = _describe(i, rule)
        if rule.decision is not None:
            return _decision(rule.decision, label, request.options)
        if rule.answer is not None:
            return PermissionDecision("answer", label, answer=rule.answer)
        wanted = rule.option
        picked = next((o for o in request.options if wanted in (o.option_id, o.name, o.kind)), None)
        if picked is not None:
            return PermissionDecision("deny" if picked.kind in REJECT_KINDS else "allow", label, picked.option_id)
        # the option is not offered: the rule cannot answer, the default does
        return _decision(spec.default, f"default ({label}: option {wanted!r} not offered)", request.options)
    if request.is_question:
        return PermissionDecision("deny", "default (a question no answer rule matched)")
    return _decision(spec.default, "default", request.options)


def denies_anything(spec: InteractionSpec | None) -> bool:
    """Can this policy deny a call? (auto-deny, manual, or scripted with a deny rule, a reject option or a
    deny default.) A policy that cannot is no different from running with approvals off."""
    if spec is None or spec.policy == "auto-approve":
        return False
    if spec.policy in ("auto-deny", "manual"):
        return True
    return spec.default == "deny" or any(
        r.decision == "deny" or (r.option is not None and r.option in REJECT_KINDS) or
        (r.option is not None and r.option not in ALLOW_KINDS) for r in spec.rules)


@dataclass(frozen=True)
class StaticPolicy:
    """A policy as settings fixed before the agent starts: ``decisions`` per raw tool name, and
    ``unapplied`` (why) when the policy cannot be expressed that way exactly."""

    decisions: Mapping[str, Literal["allow", "deny"]] = field(default_factory=dict)
    unapplied: str | None = None

    def denied(self) -> list[str]:
        return sorted(n for n, d in self.decisions.items() if d == "deny")

    def allowed(self) -> list[str]:
        return sorted(n for n, d in self.decisions.items() if d == "allow")


def static_policy(spec: InteractionSpec | None, tools: Iterable[ToolRef]) -> StaticPolicy:
    """Decide every tool up front, for a driver that can only configure its agent before it starts. A rule
    that looks at the call's input or the agent's question (``input_regex``, ``prompt_regex``), a ``manual``
    policy, or an ``option:`` that is not an option kind cannot be decided per tool: ``unapplied`` says so
    (the decisions given are then the best approximation, never to be reported as applied)."""
    tools = list(tools)
    if spec is not None and spec.policy == "manual":
        return StaticPolicy({t.raw_name: "deny" for t in tools},
                            "manual asks the operator for each call, which cannot be set up before the agent starts")
    decisions: dict[str, Literal["allow", "deny"]] = {}
    problems: list[str] = []
    for tool in tools:
        probe = PermissionRequest(request_id="static", tool_call_id="static", raw_name=tool.raw_name,
                                  name=tool.name, kind=tool.kind)
        outcome: Literal["allow", "deny"] | None = None
        if spec is not None and spec.policy == "scripted":
            for i, rule in enumerate(spec.rules, 1):
                if rule.answer is not None or not _matches_static(rule, tool):
                    continue
                if rule.input_regex is not None or rule.prompt_regex is not None:
                    problems.append(f"{_describe(i, rule)} looks at each call's "
                                    f"{'input' if rule.input_regex is not None else 'question'}, which cannot be "
                                    f"set up before the agent starts")
                    break
                if rule.decision is not None:
                    outcome = rule.decision
                elif rule.option in ALLOW_KINDS or rule.option in REJECT_KINDS:
                    outcome = "deny" if rule.option in REJECT_KINDS else "allow"
                else:
                    problems.append(f"{_describe(i, rule)} picks option {rule.option!r}, which only an agent that "
                                    f"asks can offer")
                    break
                break
        decisions[tool.raw_name] = outcome or decide(spec, probe).outcome  # type: ignore[assignment]
    unique = list(dict.fromkeys(problems))
    return StaticPolicy(decisions, "; ".join(unique) if unique else None)


def _matches_static(rule: InteractionRule, tool: ToolRef) -> bool:
    if rule.tool_kind is not None and tool.kind != rule.tool_kind:
        return False
    if rule.raw_name is not None and tool.raw_name != rule.raw_name:
        return False
    if rule.name is not None and tool.name != rule.name:
        return False
    return True


# ----------------------------------------------------------------------------------------- responders

class Responder(Protocol):
    """Answers the agent's requests for a session driver (the runner gives one to each session)."""

    async def decide(self, request: PermissionRequest) -> PermissionDecision:
        ...


class PolicyResponder:
    """The case's policy, as :func:`decide` gives it (no policy: auto-approve)."""

    def __init__(self, spec: InteractionSpec | None) -> None:
        self.spec = spec

    async def decide(self, request: PermissionRequest) -> PermissionDecision:
        return decide(self.spec, request)


# ---------------------------------------------------------------------------------------------- events

def permission_events(builder: Any, line: int | None, request: PermissionRequest, decision: PermissionDecision, *,
                      decided_by: str = "policy", timestamp: str | None = None, ref: str | None = None) -> None:
    """Add the ``permission_request`` and ``permission_response`` events of one request to ``builder`` (an
    :class:`~gripprobe_core.telemetry.builder.EventBuilder`). ``decided_by``: ``policy`` (the harness, by the
    case's policy), ``manual`` (the operator), ``native`` (the agent's own settings, seen in its log);
    ``ref``: the file they were read from when it is not the builder's (``<phase>.conversation.jsonl``)."""
    extra = {"raw_artifact_ref": ref} if ref else {}
    builder.add(line, event_type="permission_request", tool_call_id=request.tool_call_id, status="started",
                payload=request.as_payload(), timestamp=timestamp, **extra)
    builder.add(line, event_type="permission_response", tool_call_id=request.tool_call_id, status="success",
                payload=decision.as_payload(request, decided_by), timestamp=timestamp, **extra)


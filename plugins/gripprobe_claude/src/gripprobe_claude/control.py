"""Claude Code's control protocol, as the pinned 2.1.332 speaks it with ``--input-format stream-json
--output-format stream-json --verbose --permission-prompt-tool stdio`` (measured against the oracle and a
scripted Messages server; the shapes agree with the Claude Agent SDK's type declarations):

- **The prompt** is one JSON line on stdin: ``{"type": "user", "message": {"role": "user", "content":
  "<prompt>"}, "parent_tool_use_id": null, "session_id": ""}``. No ``initialize`` request is needed (the
  SDK sends one to register hooks and MCP servers; without it the ``init`` line comes as in print mode).
- **A permission question** is a line on stdout::

      {"type": "control_request", "request_id": "<uuid>", "request": {"subtype": "can_use_tool",
       "tool_name": "Write", "display_name": "Write", "input": {"file_path": "/abs/hello.txt", ...},
       "description": "hello.txt", "permission_suggestions": [...], "decision_reason_type": "rule",
       "matched_ask_rule": {...}, "blocked_path": ..., "tool_use_id": "call_oracle_0001",
       "agent_id": "<sub-agent>", "requires_user_interaction": true}}

  (``input`` has the paths made absolute; ``tool_use_id`` is the model's call id on the wire).
- **The answer** is a line on stdin::

      {"type": "control_response", "response": {"subtype": "success", "request_id": "<uuid>",
       "response": {"behavior": "allow", "updatedInput": {...}, "updatedPermissions": [...]}}}
      ... "response": {"behavior": "deny", "message": "<what the model reads as the tool result>"}

  A denied call's ``tool_result`` is ``{"is_error": true, "content": "<message>"}`` with
  ``tool_result_meta[].permission_decision = {"decision": "reject", "source": "user_reject"}``, and the
  ``result`` line lists it in ``permission_denials`` (``tool_name``, ``tool_use_id``, ``tool_input``).
- **A question to the user** is the ``AskUserQuestion`` tool asking the same way (``input.questions``:
  1–4 ``{question, header, options: [{label, description}], multiSelect}``,
  ``requires_user_interaction: true``); it is answered with ``behavior: allow`` and ``updatedInput`` =
  the input plus ``answers: {<question text>: <answer>}`` (the tool result says ``Your questions have
  been answered: "<q>"="<a>"``), or refused with ``deny``.
- **Withdrawn**: ``{"type": "control_cancel_request", "request_id": ...}``; any other request the host
  does not handle is answered ``{"subtype": "error", "request_id", "error"}``.
- **The end**: after the ``result`` line Claude Code waits for the next user message; closing stdin makes
  it exit (0, or 1 after a request failed for good) within 30–350 ms (median ~90 ms, measured).

Its own refusals (a deny rule, ``dontAsk`` mode in print mode) are ``{"type": "system", "subtype":
"permission_denied", "tool_name", "tool_use_id", "decision_reason_type", "message"}`` lines.

The harness's record of a session (``capture.files[SESSION_TRANSCRIPT]``) is JSON lines, one per line
either way and one per decision::

    {"seq": 1, "ts": "<ISO UTC>", "dir": "send", "line": {...}}          # written to Claude Code's stdin
    {"seq": 2, "ts": ..., "dir": "recv", "line": {...}}                  # read from its stdout ("raw": text
                                                                         #   when a line is not JSON)
    {"seq": 3, "ts": ..., "dir": "decision", "agent_request_id": "<uuid>", "tool_call_id": "call_…",
     "request": {PermissionRequest payload}, "decision": {PermissionDecision payload, decided_by}}
    {"seq": 4, "ts": ..., "dir": "note", "text": "stdin closed after the result"}

The API key never appears in it: the session replaces it wherever a line holds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from gripprobe_core.plugin import (
    PermissionDecision, PermissionOption, PermissionRequest, ToolNames, json_lines, mapping, text,
)

#: The subtype of a permission question.
CAN_USE_TOOL = "can_use_tool"
#: The tool through which Claude Code asks the user free-text questions.
ASK_USER_QUESTION = "AskUserQuestion"

#: What Claude Code lets the host answer: allow once, allow and add its suggested rules for the session
#: (offered only when it suggests some), deny.
ALLOW_ONCE = PermissionOption("allow", "Allow", "allow_once")
ALLOW_ALWAYS = PermissionOption("allow_always", "Allow, and add Claude Code's suggested rules for the session",
                                "allow_always")
REJECT_ONCE = PermissionOption("deny", "Deny", "reject_once")

#: Replaces the API key wherever a recorded line holds it.
REDACTED = "[REDACTED]"


def user_message(prompt: str) -> dict[str, Any]:
    """The first (and only) user turn of a session."""
    return {"type": "user", "message": {"role": "user", "content": prompt}, "parent_tool_use_id": None,
            "session_id": ""}


def is_permission_question(obj: Any) -> bool:
    """Whether a stdout line is a ``can_use_tool`` control request."""
    return (isinstance(obj, dict) and obj.get("type") == "control_request"
            and mapping(obj.get("request")).get("subtype") == CAN_USE_TOOL)


def _questions(tool_input: Any) -> list[dict[str, Any]]:
    questions = mapping(tool_input).get("questions")
    return [q for q in questions if isinstance(q, dict)] if isinstance(questions, list) else []


def permission_requests(obj: dict[str, Any], names: ToolNames) -> list[PermissionRequest]:
    """The :class:`PermissionRequest`\\ s of one ``can_use_tool`` line: one for a tool call, or one per
    question of an ``AskUserQuestion`` call (``<request_id>#<n>``, a free-text question: no tool named,
    ``prompt`` the question, its choices as options without a kind). Empty when the line is not one."""
    if not is_permission_question(obj):
        return []
    request_id = text(obj.get("request_id")) or ""
    req = mapping(obj.get("request"))
    raw_name = text(req.get("tool_name"))
    tool_input = req.get("input")
    if raw_name == ASK_USER_QUESTION and _questions(tool_input):
        out = []
        for n, q in enumerate(_questions(tool_input), 1):
            labels = [text(mapping(o).get("label")) for o in q.get("options") or [] if isinstance(q.get("options"), list)]
            out.append(PermissionRequest(
                request_id=f"{request_id}#{n}", prompt=text(q.get("question")) or "",
                options=tuple(PermissionOption(label, label, "") for label in labels if label)))
        return out
    name, kind = names.normalize(raw_name)
    options = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE) if req.get("permission_suggestions") else (ALLOW_ONCE, REJECT_ONCE)
    return [PermissionRequest(request_id=request_id, tool_call_id=text(req.get("tool_use_id")) or None,
                              raw_name=raw_name, name=name or None, kind=kind, input=tool_input, options=options)]


def denial_message(decision: PermissionDecision, raw_name: str | None) -> str:
    """What the model reads as the denied call's result."""
    if decision.outcome == "answer" and decision.answer:
        return decision.answer  # "no, and tell Claude what to do instead"
    tool = raw_name or "this tool"
    return f"Permission to use {tool} was denied by the user ({decision.rule}). Do not retry it."


def control_response(obj: dict[str, Any], requests: list[PermissionRequest],
                     decisions: list[PermissionDecision]) -> dict[str, Any]:
    """The ``control_response`` line answering one ``can_use_tool`` line with the given decisions (one per
    request of :func:`permission_requests`)."""
    request_id = text(obj.get("request_id")) or ""
    req = mapping(obj.get("request"))
    raw_name = text(req.get("tool_name"))
    tool_input = req.get("input")
    if requests and requests[0].tool_call_id is None and raw_name == ASK_USER_QUESTION:
        answers = {}
        for request, decision in zip(requests, decisions):
            if decision.outcome != "answer" or decision.answer is None:
                why = decision.rule if decision.outcome != "allow" else f"{decision.rule}: no answer given"
                body: dict[str, Any] = {"behavior": "deny",
                                        "message": f"The user did not answer {request.prompt!r} ({why})."}
                break
            answers[request.prompt or ""] = decision.answer
        else:
            body = {"behavior": "allow", "updatedInput": {**mapping(tool_input), "answers": answers}}
    else:
        decision = decisions[0] if decisions else PermissionDecision("deny", "no decision")
        if decision.outcome == "allow":
            body = {"behavior": "allow", "updatedInput": tool_input if isinstance(tool_input, dict) else {}}
            if decision.option_id == ALLOW_ALWAYS.option_id:
                body["updatedPermissions"] = [
                    {**s, "destination": "session"} for s in req.get("permission_suggestions") or []
                    if isinstance(s, dict)]  # never written into the workspace's or HOME's settings
        else:
            body = {"behavior": "deny", "message": denial_message(decision, raw_name)}
    return {"type": "control_response", "response": {"subtype": "success", "request_id": request_id,
                                                     "response": body}}


def error_response(obj: dict[str, Any], why: str) -> dict[str, Any]:
    """The answer to a control request the harness does not handle."""
    return {"type": "control_response", "response": {"subtype": "error", "request_id": text(obj.get("request_id")) or "",
                                                     "error": why}}


# ---------------------------------------------------------------------------------- the session record

@dataclass(frozen=True)
class Decided:
    """One recorded decision: the request as the responder saw it, its answer, and when."""

    request: PermissionRequest
    decision: PermissionDecision
    decided_by: str
    ts: str | None
    line: int


@dataclass
class Conversation:
    """What a session transcript says: decisions by Claude Code's request id (in order), the requests it
    withdrew, and whether the file was a session transcript at all."""

    decisions: dict[str, list[Decided]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    recognized: bool = False

    def all(self) -> Iterable[tuple[str, Decided]]:
        for rid, items in self.decisions.items():
            for item in items:
                yield rid, item


def _option(value: Any) -> PermissionOption | None:
    o = mapping(value)
    option_id = text(o.get("option_id"))
    return PermissionOption(option_id, text(o.get("name")) or "", text(o.get("kind")) or "") if option_id else None


def _request_from(payload: dict[str, Any], tool_call_id: str | None) -> PermissionRequest | None:
    request_id = text(payload.get("request_id"))
    if request_id is None:
        return None
    options = payload.get("options")
    return PermissionRequest(
        request_id=request_id, tool_call_id=tool_call_id, raw_name=text(payload.get("raw_name")),
        name=text(payload.get("name")), kind=text(payload.get("kind")), input=payload.get("input"),
        prompt=text(payload.get("prompt")),
        options=tuple(o for o in map(_option, options if isinstance(options, list) else []) if o is not None))


_OUTCOMES = ("allow", "deny", "answer")


def _decision_from(payload: dict[str, Any]) -> PermissionDecision | None:
    outcome = payload.get("outcome")
    if outcome not in _OUTCOMES:
        return None
    return PermissionDecision(outcome, text(payload.get("rule")) or "", text(payload.get("option_id")),
                              text(payload.get("answer")))


def read_conversation(data: bytes) -> Conversation:
    """The decisions recorded in a session transcript (see the module docstring). Never raises: a record
    that does not parse, or has an unexpected shape, is skipped."""
    out = Conversation()
    for lineno, obj in json_lines(data):
        try:
            kind = obj.get("dir")
            if kind in ("send", "recv", "note", "decision"):
                out.recognized = True
            if kind == "recv":
                line = mapping(obj.get("line"))
                if line.get("type") == "control_cancel_request" and text(line.get("request_id")):
                    out.cancelled.add(line["request_id"])
                continue
            if kind != "decision":
                continue
            rid = text(obj.get("agent_request_id"))
            request = _request_from(mapping(obj.get("request")), text(obj.get("tool_call_id")))
            payload = mapping(obj.get("decision"))
            decision = _decision_from(payload)
            if rid is None or request is None or decision is None:
                continue
            decided_by = text(payload.get("decided_by"))
            out.decisions.setdefault(rid, []).append(Decided(
                request, decision, decided_by if decided_by in ("policy", "manual") else "policy",
                text(obj.get("ts")), lineno))
        except Exception:  # an odd record costs itself only
            continue
    return out


def redact(line: str, secret: str | None) -> str:
    """``line`` with every occurrence of ``secret`` (the API key), as it is and as JSON escapes it, replaced."""
    if not secret or len(secret) < 4:
        return line
    for form in dict.fromkeys((secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])):
        line = line.replace(form, REDACTED)
    return line


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)

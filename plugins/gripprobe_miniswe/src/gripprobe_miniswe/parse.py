"""mini-swe-agent's trajectory → normalized tier B events.

Source: the trajectory JSON mini saves after every step (``-o``; kept by the runner as the phase artifact
``trajectory.json``): ``{"info": {…, "config": {"model": {…}}, "exit_status", "submission"}, "messages":
[…], "trajectory_format": "mini-swe-agent-1.1"}``, written with ``indent=2``. What a message means (mini
2.4.6, measured in ``tests/fixtures/captured``):

- ``system``, then ``user``: mini's system prompt and instance template (the task).
- ``assistant``: one model reply mini accepted, the Chat Completions message as litellm returned it, plus
  ``extra``: ``actions`` (``[{command, tool_call_id?}]``: the commands mini is about to run), ``response``
  (the whole response: ``id``, ``usage``), ``timestamp`` (unix seconds, after the reply arrived). In the
  ``tool`` format the actions are its ``tool_calls`` of ``bash``; in ``markdown`` the one fenced block mini's
  regular expression found (``info.config.model.action_regex``). Each action becomes a
  ``tool_call_start`` (``parent_id`` = the reply's ``model_response``; tool format: the model's call id); the
  reply's ``reasoning_content`` (litellm keeps it on the message) a ``thought``.
- ``tool`` (tool format) / ``user`` with ``extra.returncode`` (markdown): a command's output (``extra``:
  ``returncode``, ``raw_output``, ``exception_info``, ``exception_type``, ``timestamp``), matched by
  ``tool_call_id``, else in order. Status: ``timeout`` when mini's ``subprocess`` timed out, else
  ``success`` for exit 0 and ``error`` otherwise.
- ``user`` with ``extra.interrupt_type == "FormatError"``: a reply mini **rejected** (no action, several
  actions, arguments it cannot decode, another tool than ``bash``) and never ran: mini keeps it only here
  (``extra.response``; markdown also ``extra.model_response`` and ``n_actions``), never as an assistant
  message. It is a ``model_response`` and no tool event (a tier-B start says "it ran"); when the reply
  did try an action mini could not read, the response carries the error type
  (``malformed_arguments``: arguments that are not JSON; ``invalid_arguments``: another tool, no
  ``command``; ``protocol_malformed``: markdown with several blocks, or a block never closed) and lists it
  under ``payload.unreadable_tool_uses``. A reply without any action attempt (a model that only talks)
  has no error type.
- ``exit``: the end. ``Submitted``: the last command printed ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` first
  (how mini is told to stop); mini then records that command as "not executed" (tool format, returncode -1)
  or records no output (markdown), though it ran: it is a ``success`` result with exit code 0. Other
  commands marked "not executed" never ran: no tool event. ``RepeatedFormatError`` (three rejected replies in
  a row), ``LimitsExceeded``: no event. An exception's class name (``InternalServerError`` …: the model call
  failed after mini's retries, and mini exits 1): an errored ``model_response`` (``http_<code>``, or
  ``backend_tool_unsupported`` for Ollama's "does not support tools").

Tool names go through :data:`TOOL_NAMES` (``bash`` and the fence language are the shell). Events go through
the shared :class:`~gripprobe_core.plugin.EventBuilder` (``<phase>-B-<n>``, ``raw_artifact_ref``
``trajectory.json:<line of the message>``). A trajectory cut short (mini killed while writing it) is read
message by message as far as it goes. Nothing here raises on bad bytes; :func:`parse_phase` raises
:class:`~gripprobe_core.plugin.WrapperParseError` only when mini exited 0 yet left no readable trajectory.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gripprobe_core.plugin import (
    EventBuilder, PermissionDecision, PermissionRequest, PhaseCapture, Transcript, WrapperParseError, iso,
    mapping, number, permission_events, text,
)

from .dialect import DEFAULT_FENCE, SUBMIT_MARKER
from .names import TOOL_NAMES

__all__ = [
    "TOOL_NAMES", "TRAJECTORY_ARTIFACT", "fence_of", "parse_phase", "parse_trajectory", "read_trajectory",
    "strip_blocks",
]

TRAJECTORY_ARTIFACT = "trajectory.json"
OUTPUT_LIMIT = 2000
TEXT_LIMIT = 2000
#: What mini writes as the output of an action it did not run.
NOT_EXECUTED = "action was not executed"
#: Exception class names of litellm (and the OpenAI SDK) → the HTTP status they stand for.
HTTP_ERRORS = {
    "BadRequestError": 400, "AuthenticationError": 401, "PermissionDeniedError": 403, "NotFoundError": 404,
    "UnprocessableEntityError": 422, "RateLimitError": 429, "InternalServerError": 500,
    "ServiceUnavailableError": 503, "BadGatewayError": 502,
}
_HTTP_CODE = re.compile(r"(?:Error code:|status[_ ]code[=: ]+)\s*(\d{3})", re.I)
_UNSUPPORTED = re.compile(r"does not support tools", re.I)
_MESSAGE_LINE = re.compile(r"^    \{", re.M)
_MESSAGES_KEY = re.compile(r'^  "messages": \[', re.M)
_FENCE_OF_REGEX = re.compile(r"^```([A-Za-z_][\w-]*)")
_DECODER = json.JSONDecoder()


# ------------------------------------------------------------------------------ reading the file

@dataclass
class Trajectory:
    """What could be read: ``messages`` as ``(line, message)`` (line None when unknown) and ``info``."""

    messages: list[tuple[int | None, dict[str, Any]]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    complete: bool = False


def read_trajectory(data: bytes) -> Trajectory:
    """The messages of a trajectory file. A whole JSON document is read as one; a cut-short one (mini is
    killed while rewriting it) message by message, each from its opening line (mini writes ``indent=2``).
    Never raises."""
    try:
        raw = data.decode("utf-8", "replace")
    except (AttributeError, MemoryError):
        return Trajectory()
    starts = _message_starts(raw)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        messages = [m for m in doc["messages"]]
        lines: list[int | None] = list(_line_numbers(raw, starts)) if len(starts) == len(messages) \
            else [None] * len(messages)
        return Trajectory([(ln, m) for ln, m in zip(lines, messages) if _is_message(m)],
                          mapping(doc.get("info")), complete=True)
    out = Trajectory()
    for start, line in zip(starts, _line_numbers(raw, starts)):
        try:
            value, _ = _DECODER.raw_decode(raw, start + 4)
        except (ValueError, RecursionError):
            break  # the rest was cut short
        if _is_message(value):
            out.messages.append((line, value))
    return out


def _line_numbers(raw: str, starts: list[int]) -> list[int]:
    """The 1-based line of each offset in ``starts`` (ascending), counting the text once."""
    lines, line, at = [], 1, 0
    for start in starts:
        line += raw.count("\n", at, start)
        at = start
        lines.append(line)
    return lines


def _message_starts(raw: str) -> list[int]:
    key = _MESSAGES_KEY.search(raw)
    if key is None:
        return []
    return [m.start() for m in _MESSAGE_LINE.finditer(raw, key.end())]


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def fence_of(info: dict[str, Any]) -> str:
    """The fence language of the text format, from the trajectory's ``info.config.model.action_regex``
    (``DEFAULT_FENCE`` when it is not there)."""
    regex = text(mapping(mapping(mapping(info).get("config")).get("model")).get("action_regex"))
    found = _FENCE_OF_REGEX.match(regex or "")
    return found.group(1) if found else DEFAULT_FENCE


def strip_blocks(content: Any, fence: str = DEFAULT_FENCE) -> str:
    """``content`` without its action blocks (mini's regular expression), stripped."""
    if not isinstance(content, str):
        return ""
    return re.sub(r"```" + re.escape(fence) + r"\s*\n.*?\n```", "", content, flags=re.DOTALL).strip()


def _openers(content: str, fence: str) -> int:
    return len(re.findall(r"```" + re.escape(fence) + r"\s*\n", content)) if isinstance(content, str) else 0


def _timestamp(value: Any) -> str | None:
    seconds = number(value, minimum=0)
    if seconds is None:
        return None
    try:
        return iso(datetime.fromtimestamp(seconds, timezone.utc))
    except (ValueError, OverflowError, OSError):
        return None


# ------------------------------------------------------------------------------ messages → events

def parse_trajectory(data: bytes, phase: str, tool_format: str, *,
                     file_name: str = TRAJECTORY_ARTIFACT, refusal_rule: str | None = None) -> Transcript:
    """Events and final answer from the bytes of a trajectory file. ``refusal_rule``: the driver ran mini in
    confirm mode with every action rejected (a case's policy denying the shell); it names that setting in
    the native ``permission_request`` + ``permission_response`` (deny) of each rejected action, and mini's
    stop at the end of those answers (``EOFError``) is no agent error."""
    trajectory = read_trajectory(data)
    return _Reader(phase, tool_format, file_name, fence_of(trajectory.info), refusal_rule).read(trajectory.messages)


def parse_phase(capture: PhaseCapture, phase: str, tool_format: str, *, refusal_rule: str | None = None) -> Transcript:
    """The phase's events and final answer, from the kept trajectory.

    Raises :class:`WrapperParseError` when the kept file cannot be read, or when mini exited 0 but left no
    readable trajectory (it saves one after every step: the harness lost it). A crash before the first step
    or a timeout gives no events."""
    kept = capture.files.get(TRAJECTORY_ARTIFACT)
    data = b""
    if kept is not None:
        try:
            data = Path(kept).read_bytes()
        except OSError as exc:
            raise WrapperParseError(f"cannot read mini-swe-agent trajectory {kept}: {exc}") from exc
    parsed = parse_trajectory(data, phase, tool_format, file_name=Path(kept).name if kept else TRAJECTORY_ARTIFACT,
                              refusal_rule=refusal_rule)
    if not parsed.events and capture.process.status == "ok" and capture.process.exit_code == 0:
        raise WrapperParseError("mini-swe-agent exited 0 but left no readable trajectory (-o) in its HOME")
    return parsed


@dataclass
class _Action:
    """One command mini accepted: where it was written, what it was, what came of it."""

    line: int | None
    ts: str | None
    parent: int  # position of the reply's message
    raw_name: str
    arguments: Any
    call_id: str | None
    outcome: tuple[int, int | None, dict[str, Any]] | None = None  # (position, line, result message extra)
    not_run: bool = False
    submitted: tuple[int, str] | None = None  # (position of the exit message, submission) when it ended the run


class _Reader:
    """Reads one phase's messages in two passes: first what became of each command (mini marks the one that
    submitted as "not executed" and writes its outcome only in the exit message), then the events in file
    order."""

    def __init__(self, phase: str, tool_format: str, file_name: str, fence: str,
                 refusal_rule: str | None = None) -> None:
        self.format, self.fence = tool_format, fence
        self.refusal_rule = refusal_rule
        self.out = EventBuilder(phase, file_name)
        self.final: str | None = None
        self.parents: dict[int, str | None] = {}

    def read(self, messages: list[tuple[int | None, dict[str, Any]]]) -> Transcript:
        emit: list[tuple[int, int, Any]] = []  # (position, order within it, callable)
        waiting: list[_Action] = []
        by_id: dict[str, _Action] = {}
        unrun: list[_Action] = []
        submission: str | None = None
        last_reply: int | None = None
        for pos, (line, msg) in enumerate(messages):
            try:
                role = msg.get("role")
                extra = mapping(msg.get("extra"))
                if role == "assistant":
                    last_reply = pos
                    actions = self._actions(line, msg, pos)
                    emit.append((pos, 0, lambda line=line, msg=msg, pos=pos, actions=actions:
                                 self._response(pos, line, msg, actions)))
                    waiting = [a for a in actions if not a.call_id]
                    by_id.update({a.call_id: a for a in actions if a.call_id})
                    content = strip_blocks(msg.get("content"), self.fence) if self.format == "markdown" \
                        else (text(msg.get("content")) or "").strip()
                    if content:
                        self.final = content
                elif role == "user" and extra.get("interrupt_type") == "FormatError":
                    emit.append((pos, 0, lambda line=line, msg=msg: self._rejected(line, msg)))
                elif role == "user" and extra.get("interrupt_type") == "UserRejection":
                    # mini's confirmation was answered with a rejection: the reply's actions never ran
                    refused = [a for a in [*unrun, *waiting, *by_id.values()] if a.parent == last_reply]
                    unrun = [a for a in unrun if a not in refused]
                    waiting = [a for a in waiting if a not in refused]
                    by_id = {k: a for k, a in by_id.items() if a not in refused}
                    for action in refused:
                        action.not_run = True
                    emit.append((pos, 0, lambda line=line, refused=refused, ts=_timestamp(extra.get("timestamp")):
                                 self._refusals(line, refused, ts)))
                elif role in ("tool", "user") and "returncode" in extra:
                    call_id = text(msg.get("tool_call_id"))
                    answered = by_id.pop(call_id, None) if call_id else (waiting.pop(0) if waiting else None)
                    if answered is None:
                        continue
                    action = answered
                    if text(extra.get("exception_info")) == NOT_EXECUTED:
                        action.not_run = True
                        unrun.append(action)
                    else:
                        action.outcome = (pos, line, extra)
                        emit.append((pos, 0, lambda action=action: self._result(action)))
                elif role == "exit":
                    status = text(extra.get("exit_status")) or ""
                    if status == "Submitted":
                        submission = text(extra.get("submission")) or ""
                        done = unrun[0] if unrun else (waiting[0] if waiting else None)
                        if done is not None:
                            done.not_run, done.submitted = False, (pos, submission)
                            emit.append((pos, 0, lambda action=done: self._result(action)))
                    elif status == "EOFError" and self.refusal_rule is not None:
                        # the driver's rejections ran out while mini asked about the last reply's actions:
                        # mini stopped there, they never ran (no start), and no model call failed
                        for action in [*unrun, *waiting, *by_id.values()]:
                            if action.parent == last_reply and action.outcome is None and action.submitted is None:
                                action.not_run = True
                    elif status and status not in ("RepeatedFormatError", "LimitsExceeded", "TimeExceeded"):
                        emit.append((pos, 1, lambda line=line, msg=msg: self._failed(line, msg)))
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
                continue  # one odd message never hides the others
        for _, _, make in sorted(emit, key=lambda e: (e[0], e[1])):
            try:
                make()
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
                continue
        if self.final is None and submission:
            self.final = submission.strip() or None
        return Transcript(self.out.events, self.final)

    # -------------------------------------------------------------------- the commands

    def _actions(self, line: int | None, msg: dict[str, Any], pos: int) -> list[_Action]:
        extra = mapping(msg.get("extra"))
        ts = _timestamp(extra.get("timestamp"))
        calls = {text(c.get("id")): mapping(c.get("function")) for c in msg.get("tool_calls") or []
                 if isinstance(c, dict) and text(c.get("id"))}
        out = []
        for action in extra.get("actions") or []:
            if not isinstance(action, dict):
                continue
            call_id = text(action.get("tool_call_id"))
            command = action.get("command")
            if call_id:
                function = calls.get(call_id, {})
                raw_name = text(function.get("name")) or "bash"
                arguments = _decoded(function.get("arguments"))
                if not isinstance(arguments, dict):
                    arguments = {"command": command}
            else:
                raw_name, arguments = self.fence, {"command": command}
            out.append(_Action(line, ts, pos, raw_name, arguments, call_id))
        return out

    # -------------------------------------------------------------------- the events

    def _response(self, pos: int, line: int | None, msg: dict[str, Any], actions: list[_Action]) -> None:
        """A reply mini accepted, and a start for each of its commands that ran."""
        extra = mapping(msg.get("extra"))
        response = mapping(extra.get("response"))
        content = text(msg.get("content")) or ""
        payload: dict[str, Any] = {"text": content[:TEXT_LIMIT], "tool_call_count": len(actions)}
        for key in ("model", "usage"):
            if key in response:
                payload[key] = response[key]
        event = self.out.add(line, event_type="model_response", response_id=text(response.get("id")) or None,
                             timestamp=_timestamp(extra.get("timestamp")), status="success", payload=payload)
        parent = event.event_id if event is not None else None
        self.parents[pos] = parent
        reasoning = msg.get("reasoning_content")  # litellm keeps the reply's reasoning on the message
        if isinstance(reasoning, str) and reasoning.strip():
            self.out.add(line, event_type="thought", response_id=text(response.get("id")) or None,
                         timestamp=_timestamp(extra.get("timestamp")), status="success", parent_id=parent,
                         payload={"text": reasoning.strip()[:TEXT_LIMIT]})
        for action in actions:
            if action.not_run:
                continue  # mini never ran it: no tool event
            name, kind = TOOL_NAMES.normalize(action.raw_name)
            self.out.add(action.line, event_type="tool_call_start", tool_call_id=action.call_id, timestamp=action.ts,
                         status="started", parent_id=parent,
                         payload={"raw_name": action.raw_name, "name": name or None, "kind": kind,
                                  "arguments": action.arguments})

    def _result(self, action: _Action) -> None:
        name, kind = TOOL_NAMES.normalize(action.raw_name)
        parent = self.parents.get(action.parent)
        payload: dict[str, Any] = {"raw_name": action.raw_name, "name": name or None, "kind": kind,
                                   "arguments": action.arguments}
        if action.submitted is not None:
            payload["output"] = f"{SUBMIT_MARKER}\n{action.submitted[1]}"[:OUTPUT_LIMIT]
            payload["submitted"] = True
            self.out.add(action.line, event_type="tool_call_result", tool_call_id=action.call_id, timestamp=action.ts,
                         status="success", parent_id=parent, exit_code=0, payload=payload)
            return
        if action.outcome is None:
            return
        _, line, extra = action.outcome
        code = extra.get("returncode")
        exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        info = text(extra.get("exception_info")) or ""
        if text(extra.get("exception_type")) == "TimeoutExpired":
            status = "timeout"
        elif exit_code == 0 and not info:
            status = "success"
        else:
            status = "error"
        output = extra.get("raw_output")
        payload["output"] = output[:OUTPUT_LIMIT] if isinstance(output, str) else None
        if info:
            payload["exception_info"] = info[:TEXT_LIMIT]
        self.out.add(line, event_type="tool_call_result", tool_call_id=action.call_id,
                     timestamp=_timestamp(extra.get("timestamp")), status=status, parent_id=parent,
                     exit_code=exit_code if exit_code is not None and exit_code >= 0 else None,
                     error_type="tool_error" if status != "success" else None, payload=payload)

    def _refusals(self, line: int | None, actions: list[_Action], ts: str | None) -> None:
        """The native permission pair of each action mini's confirmation rejected (it never ran: no start)."""
        for action in actions:
            name, kind = TOOL_NAMES.normalize(action.raw_name)
            request = PermissionRequest(request_id=f"native-{action.call_id or len(self.out.events) + 1}",
                                        tool_call_id=action.call_id, raw_name=action.raw_name, name=name or None,
                                        kind=kind, input=action.arguments)
            rule = self.refusal_rule or "native: mini confirmation rejected"
            permission_events(self.out, line, request, PermissionDecision("deny", rule), decided_by="native",
                              timestamp=ts or action.ts)

    def _rejected(self, line: int | None, msg: dict[str, Any]) -> None:
        """A reply mini rejected (format error): a response, with what it failed to read."""
        extra = mapping(msg.get("extra"))
        response = mapping(extra.get("response"))
        choices = response.get("choices")
        first = mapping(choices[0]) if isinstance(choices, list) and choices else {}
        message = mapping(first.get("message"))
        content = text(extra.get("model_response")) or text(message.get("content")) or ""
        unreadable, error_type = self._unreadable(content, message, extra)
        payload: dict[str, Any] = {"text": content[:TEXT_LIMIT], "tool_call_count": 0,
                                   "rejected_by_agent": (text(msg.get("content")) or "")[:TEXT_LIMIT]}
        if unreadable:
            payload["unreadable_tool_uses"] = unreadable
        for key in ("model", "usage"):
            if key in response:
                payload[key] = response[key]
        self.out.add(line, event_type="model_response", response_id=text(response.get("id")) or None,
                     status="success", error_type=error_type, payload=payload)

    def _unreadable(self, content: str, message: dict[str, Any], extra: dict[str, Any]) -> tuple[list[dict], str | None]:
        """The action attempts of a rejected reply, and the error type they earn (None: there was none)."""
        out: list[dict[str, Any]] = []
        error_type: str | None = None
        for call in message.get("tool_calls") or []:
            function = mapping(mapping(call).get("function"))
            raw_name = text(function.get("name")) or ""
            arguments = function.get("arguments")
            decoded = _decoded(arguments)
            name, kind = TOOL_NAMES.normalize(raw_name) if raw_name else (None, "other")
            out.append({"raw_name": raw_name, "name": name or None, "kind": kind, "tool_call_id": text(mapping(call).get("id")),
                        "arguments": arguments[:OUTPUT_LIMIT] if isinstance(arguments, str) else arguments})
            if decoded is _UNDECODABLE:
                error_type = "malformed_arguments"
            elif error_type is None and (raw_name != "bash" or not isinstance(decoded, dict) or "command" not in decoded):
                error_type = "invalid_arguments"
        if self.format == "markdown" and not out:
            opened = _openers(content, self.fence)
            n = extra.get("n_actions")
            read = n if isinstance(n, int) and not isinstance(n, bool) else None
            if opened and (read is None or read != 1):
                error_type = "protocol_malformed"
                for block in re.split(r"```" + re.escape(self.fence) + r"\s*\n", content)[1:]:
                    name, kind = TOOL_NAMES.normalize(self.fence)
                    out.append({"raw_name": self.fence, "name": name or None, "kind": kind,
                                "arguments": block[:OUTPUT_LIMIT]})
        return out, error_type

    def _failed(self, line: int | None, msg: dict[str, Any]) -> None:
        """mini stopped on an exception (a model call that failed after its retries)."""
        extra = mapping(msg.get("extra"))
        name = text(extra.get("exit_status")) or ""
        detail = text(extra.get("exception_str")) or text(msg.get("content")) or ""
        code = _HTTP_CODE.search(detail)
        if _UNSUPPORTED.search(detail):
            error_type = "backend_tool_unsupported"
        elif code:
            error_type = f"http_{code.group(1)}"
        elif name in HTTP_ERRORS:
            error_type = f"http_{HTTP_ERRORS[name]}"
        else:
            error_type = "agent_error"
        self.out.add(line, event_type="model_response", status="error", error_type=error_type,
                     payload={"error": detail[:TEXT_LIMIT], "error_class": name})


_UNDECODABLE = object()


def _decoded(value: Any) -> Any:
    """JSON arguments decoded (a dict stays as it is); :data:`_UNDECODABLE` when they are not JSON."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return _UNDECODABLE
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return _UNDECODABLE

"""Default plugin ``reference``: the driver of the reference agent (``plugin: reference``).

It is also the template for agent plugins: a driver says how to start its agent and reads the agent's
structured output back as tier-B events; everything else keeps :class:`BaseAgentDriver`'s defaults
(routable to the proxy, no install, no kept files, no markers, and no ``calls_off_wire``: it runs only the
structured calls the model sends, so in every format the wire must witness each call it reports).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from .. import hookimpl
from ..drivers import AgentDriver, BaseAgentDriver
from ..errors import WrapperParseError
from ..interaction import InteractionSupport, PermissionDecision, PermissionRequest, permission_events
from ..jsonl import dumps, json_lines
from ..phase import SESSION_TRANSCRIPT, AgentCommand, PhaseCapture, PhaseContext, SessionChannel, Transcript
from ..telemetry.builder import EventBuilder, mapping, number, text
from ..telemetry.toolnames import GENERIC, ToolNames
from ..timeutil import utc_now_iso

NAME = "reference"

RESULT_STATUSES = ("success", "error", "timeout")


class ReferenceDriver(BaseAgentDriver):
    name = NAME
    description = "GripProbe's reference agent: an OpenAI tool loop (shell/read/write/edit) with JSON events"
    install_hint = "ships with gripprobe-core (command: gripprobe-refagent)"
    tool_names = GENERIC  # shell, read, write, edit: the common vocabulary

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return {"OPENAI_API_KEY": ctx.api_key or "oracle"}

    def interaction_support(self, ctx: PhaseContext) -> InteractionSupport:
        """Any policy: with one, the agent asks before every call (``--ask``) and the harness answers."""
        if ctx.interaction is None:
            return InteractionSupport("native", True)
        return InteractionSupport("session", True)

    def command(self, ctx: PhaseContext) -> AgentCommand:
        # it waits on the backend as long as its phase may last (a slow model may take minutes to its first
        # token), not its own default of 300 s: the phase's timeout ends it either way
        argv = [ctx.agent.executable, *ctx.agent.default_args, "--base-url", ctx.openai_base_url,
                "--model", ctx.model_name, "--workspace", str(ctx.workspace),
                "--request-timeout", f"{ctx.timeout_s:g}", "--prompt", ctx.prompt]
        if ctx.interaction is None:
            return AgentCommand(argv)
        return AgentCommand([*argv, "--ask"], session=AskSession(self.tool_names))

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        return parse_stdout(capture.stdout_path, ctx.phase, self.tool_names,
                            answers=read_answers(capture.files.get(SESSION_TRANSCRIPT)))


#: At most this many requests are answered and recorded per phase; past it every request is denied unrecorded
#: (and the count of those is the transcript's last line): an agent cannot fill the disk by asking.
MAX_RECORDED_REQUESTS = 10_000
MAX_ID_CHARS = 200


class AskSession:
    """Answers the reference agent's ``--ask`` requests with the case's policy and records each request and
    answer in the harness's transcript (``conversation.jsonl``): the agent only asks, it never says what was
    answered, so its own stdout cannot forge a permission."""

    def __init__(self, tool_names: ToolNames = GENERIC) -> None:
        self.tool_names = tool_names

    async def run(self, channel: SessionChannel) -> None:
        decided_by = "manual" if channel.ctx.interaction is not None and channel.ctx.interaction.policy == "manual" \
            else "policy"
        unrecorded = 0
        with open(channel.transcript, "a", encoding="utf-8") as out:
            recorded = 0
            while True:
                try:
                    line = await channel.reader.readline()
                except ValueError:  # a line past the reader's limit: dropped, not a request
                    continue
                if not line:
                    break
                obj = _json_object(line)
                if obj is None or obj.get("type") != "permission.request":
                    continue
                request = self.request_of(obj)
                if recorded >= MAX_RECORDED_REQUESTS:
                    unrecorded += 1
                    decision = PermissionDecision("deny", f"over {MAX_RECORDED_REQUESTS} requests")
                else:
                    decision = await channel.responder.decide(request)
                    recorded += 1
                    out.write(dumps({"type": "permission", "ts": utc_now_iso(),
                                     "request": {**request.as_payload(), "tool_call_id": request.tool_call_id},
                                     "decision": decision.as_payload(request, decided_by)},
                                    ensure_ascii=False, default=str) + "\n")
                    out.flush()
                try:
                    channel.writer.write((json.dumps({"request_id": request.request_id,
                                                      "outcome": decision.outcome}) + "\n").encode())
                    await channel.writer.drain()
                except (ConnectionError, OSError, RuntimeError):
                    break  # the agent closed its stdin: it is leaving
            if unrecorded:
                out.write(dumps({"type": "unrecorded", "denied": unrecorded}) + "\n")

    def request_of(self, obj: Mapping[str, Any]) -> PermissionRequest:
        raw_name = text(obj.get("name"))
        name, kind = self.tool_names.normalize(raw_name)
        return PermissionRequest(request_id=str(obj.get("request_id") or "")[:MAX_ID_CHARS],
                                 tool_call_id=(text(obj.get("call_id")) or "")[:MAX_ID_CHARS] or None,
                                 raw_name=raw_name, name=name or None, kind=kind, input=obj.get("arguments"))


def _json_object(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def read_answers(path: Path | None) -> dict[str, dict[str, Any]]:
    """The harness's record of a session (``conversation.jsonl``): request_id → ``{request, decision, ts}``."""
    if path is None:
        return {}
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WrapperParseError(f"cannot read the session transcript {path.name}: {exc}") from exc
    answers: dict[str, dict[str, Any]] = {}
    for _, obj in json_lines(data):
        request, decision = mapping(obj.get("request")), mapping(obj.get("decision"))
        rid = text(request.get("request_id"))
        if obj.get("type") == "permission" and rid is not None and rid not in answers:
            answers[rid] = {"request": request, "decision": decision, "ts": text(obj.get("ts"))}
    return answers


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ReferenceDriver())


def parse_stdout(path: Path, phase: str, tool_names: ToolNames = GENERIC,
                 answers: Mapping[str, Mapping[str, Any]] | None = None) -> Transcript:
    """Tier-B events and the final answer from the agent's JSON-lines stdout. Lines that do not parse
    are skipped. Raises :class:`WrapperParseError` only when the file cannot be read at all.

    ``answers`` (:func:`read_answers`): the harness's record of the agent's permission requests; each
    becomes a permission_request / permission_response pair where the agent's stdout asked it (a request
    the agent claims on stdout but the harness never answered is not an event)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WrapperParseError(f"cannot read reference agent stdout {path}: {exc}") from exc
    parser = _StdoutParser(EventBuilder(phase, path.name), tool_names, dict(answers or {}))
    for lineno, obj in json_lines(data):
        parser.feed(obj, lineno)
    for rid in list(parser.answers):  # answered but not on stdout (its output was cut): still in the trace
        parser.permission(rid, None)
    return Transcript(parser.out.events, parser.final_text)


class _StdoutParser:
    def __init__(self, out: EventBuilder, tool_names: ToolNames,
                 answers: dict[str, Mapping[str, Any]] | None = None) -> None:
        self.out = out
        self.tool_names = tool_names
        self.answers = answers or {}
        self.last_response: str | None = None
        self.parent_of_call: dict[str, str] = {}
        self.final_text: str | None = None

    def feed(self, obj: dict[str, Any], lineno: int) -> None:
        kind = obj.get("type")
        ts = text(obj.get("ts"))
        if kind == "model.response":
            payload: dict[str, Any] = {k: obj[k] for k in ("turn", "text", "finish_reason", "usage") if k in obj}
            calls = obj.get("tool_calls")
            if isinstance(calls, list):
                payload["tool_call_count"] = len(calls)
            event = self.out.add(lineno, event_type="model_response", response_id=text(obj.get("response_id")),
                                 timestamp=ts, status="success", latency_ms=number(obj.get("latency_ms")),
                                 payload=payload)
            if event is not None:
                self.last_response = event.event_id
                reasoning = text(obj.get("reasoning"))
                if reasoning:
                    self.out.add(lineno, event_type="thought", timestamp=ts, status="success",
                                 response_id=event.response_id, parent_id=event.event_id, payload={"text": reasoning})
                for call in calls if isinstance(calls, list) else []:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.parent_of_call[call["id"]] = event.event_id
        elif kind == "tool.start":
            call_id = text(obj.get("call_id"))
            raw_name = text(obj.get("name"))
            name, tool_kind = self.tool_names.normalize(raw_name)
            self.out.add(lineno, event_type="tool_call_start", tool_call_id=call_id, timestamp=ts, status="started",
                         parent_id=self._parent(call_id),
                         payload={"raw_name": raw_name, "name": name or None, "kind": tool_kind,
                                  "arguments": obj.get("arguments")})
        elif kind == "tool.result":
            call_id = text(obj.get("call_id"))
            raw_name = text(obj.get("name"))
            name, tool_kind = self.tool_names.normalize(raw_name)
            status = obj.get("status")
            exit_code = obj.get("exit_code")
            self.out.add(lineno, event_type="tool_call_result", tool_call_id=call_id, timestamp=ts,
                         status=status if status in RESULT_STATUSES else "unknown",
                         parent_id=self._parent(call_id),
                         exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                         latency_ms=number(obj.get("duration_ms")),
                         payload={"raw_name": raw_name, "name": name or None, "kind": tool_kind,
                                  "output": text(obj.get("output"))})
        elif kind == "permission.request":
            rid = text(obj.get("request_id"))
            if rid is not None and rid in self.answers:
                self.permission(rid, lineno)
        elif kind == "final" and isinstance(obj.get("text"), str):
            self.final_text = obj["text"]  # its last answer

    def permission(self, rid: str, lineno: int | None) -> None:
        """The request ``rid`` and its answer, as the harness recorded them."""
        record = self.answers.pop(rid)
        req, dec = mapping(record.get("request")), mapping(record.get("decision"))
        request = PermissionRequest(
            request_id=rid, tool_call_id=text(req.get("tool_call_id")), raw_name=text(req.get("raw_name")),
            name=text(req.get("name")), kind=text(req.get("kind")), input=req.get("input"), prompt=text(req.get("prompt")))
        outcome: Literal["allow", "deny", "answer"] = "allow" if dec.get("outcome") == "allow" else \
            "answer" if dec.get("outcome") == "answer" else "deny"
        decision = PermissionDecision(outcome, text(dec.get("rule")) or "unknown", text(dec.get("option_id")),
                                      text(dec.get("answer")))
        permission_events(self.out, lineno, request, decision, decided_by=text(dec.get("decided_by")) or "policy",
                          timestamp=text(record.get("ts")), ref=f"{self.out.phase}.{SESSION_TRANSCRIPT}")

    def _parent(self, call_id: str | None) -> str | None:
        if call_id is not None and call_id in self.parent_of_call:
            return self.parent_of_call[call_id]
        return self.last_response

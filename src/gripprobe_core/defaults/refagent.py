"""Default plugin ``reference``: the driver of the reference agent (``plugin: reference``).

It is also the template for agent plugins: a driver says how to start its agent and reads the agent's
structured output back as tier-B events; everything else keeps :class:`BaseAgentDriver`'s defaults
(routable to the proxy, no install, no kept files, no markers, and no ``calls_off_wire``: it runs only the
structured calls the model sends, so in every format the wire must witness each call it reports).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .. import hookimpl
from ..drivers import AgentDriver, BaseAgentDriver
from ..errors import WrapperParseError
from ..jsonl import json_lines
from ..phase import AgentCommand, PhaseCapture, PhaseContext, Transcript
from ..telemetry.builder import EventBuilder, number, text
from ..telemetry.toolnames import GENERIC, ToolNames

NAME = "reference"

RESULT_STATUSES = ("success", "error", "timeout")


class ReferenceDriver(BaseAgentDriver):
    name = NAME
    description = "GripProbe's reference agent: an OpenAI tool loop (shell/read/write/edit) with JSON events"
    install_hint = "ships with gripprobe-core (command: gripprobe-refagent)"
    tool_names = GENERIC  # shell, read, write, edit: the common vocabulary

    def environment(self, ctx: PhaseContext) -> dict[str, str]:
        return {"OPENAI_API_KEY": ctx.api_key or "oracle"}

    def command(self, ctx: PhaseContext) -> AgentCommand:
        return AgentCommand([ctx.agent.executable, *ctx.agent.default_args, "--base-url", ctx.openai_base_url,
                             "--model", ctx.model_name, "--workspace", str(ctx.workspace), "--prompt", ctx.prompt])

    def parse(self, ctx: PhaseContext, capture: PhaseCapture) -> Transcript:
        return parse_stdout(capture.stdout_path, ctx.phase, self.tool_names)


@hookimpl
def register_agents(register: Callable[[AgentDriver], None]) -> None:
    register(ReferenceDriver())


def parse_stdout(path: Path, phase: str, tool_names: ToolNames = GENERIC) -> Transcript:
    """Tier-B events and the final answer from the agent's JSON-lines stdout. Lines that do not parse
    are skipped. Raises :class:`WrapperParseError` only when the file cannot be read at all."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WrapperParseError(f"cannot read reference agent stdout {path}: {exc}") from exc
    parser = _StdoutParser(EventBuilder(phase, path.name), tool_names)
    for lineno, obj in json_lines(data):
        parser.feed(obj, lineno)
    return Transcript(parser.out.events, parser.final_text)


class _StdoutParser:
    def __init__(self, out: EventBuilder, tool_names: ToolNames) -> None:
        self.out = out
        self.tool_names = tool_names
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
        elif kind == "final" and isinstance(obj.get("text"), str):
            self.final_text = obj["text"]  # its last answer

    def _parent(self, call_id: str | None) -> str | None:
        if call_id is not None and call_id in self.parent_of_call:
            return self.parent_of_call[call_id]
        return self.last_response

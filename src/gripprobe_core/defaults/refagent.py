"""In-tree default plugin for the reference agent (``plugin: reference``).

It is also the template for agent plugins: register the agent, build its environment and command,
say whether it can be routed through the proxy, and turn its structured output into tier-B events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from gripprobe_core import hookimpl
from gripprobe_core.phase import AgentCommand, AgentInfo, PhaseContext, PhaseCapture, RouteDecision
from gripprobe_core.errors import WrapperParseError
from gripprobe_core.jsonl import json_lines
from gripprobe_core.models.events import Event
from gripprobe_core.models.specs import BackendSpec, CliAgentSpec
from gripprobe_core.telemetry.toolnames import normalize

NAME = "reference"

RESULT_STATUSES = ("success", "error", "timeout")


def _ours(agent: CliAgentSpec) -> bool:
    return agent.plugin == NAME


@hookimpl
def register_agents(register: Callable[[AgentInfo], None]) -> None:
    register(AgentInfo(
        name=NAME, observability="structured",
        description="GripProbe's reference agent: an OpenAI tool loop (shell/read/write/edit) with JSON events",
        wire_formats=("tool",),  # it runs only the structured calls the model sends
        install_hint="ships with gripprobe-core (command: gripprobe-refagent)"))


@hookimpl
def build_env(agent: CliAgentSpec, ctx: PhaseContext) -> dict[str, str] | None:
    if not _ours(agent):
        return None
    return {"OPENAI_API_KEY": ctx.api_key or "oracle"}


@hookimpl
def build_command(agent: CliAgentSpec, ctx: PhaseContext) -> AgentCommand | None:
    if not _ours(agent):
        return None
    return AgentCommand([agent.executable, *agent.default_args, "--base-url", ctx.openai_base_url,
                         "--model", ctx.model_name, "--workspace", str(ctx.workspace), "--prompt", ctx.prompt])


@hookimpl
def route_base_url(agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision | None:
    if not _ours(agent):
        return None
    return RouteDecision(True)


@hookimpl
def parse_wrapper_events(agent: CliAgentSpec, ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    if not _ours(agent):
        return None
    return parse_stdout(outputs.stdout_path, ctx.phase)


def parse_stdout(path: Path, phase: str) -> list[Event]:
    """Tier-B events from the agent's JSON-lines stdout. Lines that do not parse are skipped.

    Raises :class:`WrapperParseError` only when the file cannot be read at all.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WrapperParseError(f"cannot read reference agent stdout {path}: {exc}") from exc
    parser = _StdoutParser(phase, path.name)
    for lineno, obj in json_lines(data):
        parser.feed(obj, lineno)
    return parser.events


class _StdoutParser:
    def __init__(self, phase: str, file_name: str) -> None:
        self.phase = phase
        self.file_name = file_name
        self.events: list[Event] = []
        self.last_response: str | None = None
        self.parent_of_call: dict[str, str] = {}

    def _next_id(self) -> tuple[str, int]:
        n = len(self.events) + 1
        return f"{self.phase}-B-{n}", n

    def _add(self, lineno: int, **fields: Any) -> Event | None:
        event_id, n = self._next_id()
        try:
            event = Event(event_id=event_id, sequence=n, phase=self.phase, source_tier="B", source="agent_output",
                          raw_artifact_ref=f"{self.file_name}:{lineno}", **fields)
        except (ValidationError, ValueError, TypeError):
            return None
        self.events.append(event)
        return event

    def feed(self, obj: dict[str, Any], lineno: int) -> None:
        kind = obj.get("type")
        ts = _str(obj.get("ts"))
        if kind == "model.response":
            payload = {k: obj[k] for k in ("turn", "text", "finish_reason", "usage") if k in obj}
            calls = obj.get("tool_calls")
            if isinstance(calls, list):
                payload["tool_call_count"] = len(calls)
            event = self._add(lineno, event_type="model_response", response_id=_str(obj.get("response_id")),
                              timestamp=ts, status="success", latency_ms=_num(obj.get("latency_ms")),
                              payload=payload)
            if event is not None:
                self.last_response = event.event_id
                for call in calls if isinstance(calls, list) else []:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.parent_of_call[call["id"]] = event.event_id
        elif kind == "tool.start":
            call_id = _str(obj.get("call_id"))
            raw_name = _str(obj.get("name"))
            name, tool_kind = _tool_name(raw_name)
            self._add(lineno, event_type="tool_call_start", tool_call_id=call_id, timestamp=ts, status="started",
                      parent_id=self._parent(call_id),
                      payload={"raw_name": raw_name, "name": name, "kind": tool_kind,
                               "arguments": obj.get("arguments")})
        elif kind == "tool.result":
            call_id = _str(obj.get("call_id"))
            raw_name = _str(obj.get("name"))
            name, tool_kind = _tool_name(raw_name)
            status = obj.get("status")
            exit_code = obj.get("exit_code")
            self._add(lineno, event_type="tool_call_result", tool_call_id=call_id, timestamp=ts,
                      status=status if status in RESULT_STATUSES else "unknown",
                      parent_id=self._parent(call_id),
                      exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                      latency_ms=_num(obj.get("duration_ms")),
                      payload={"raw_name": raw_name, "name": name, "kind": tool_kind,
                               "output": _str(obj.get("output"))})

    def _parent(self, call_id: str | None) -> str | None:
        if call_id is not None and call_id in self.parent_of_call:
            return self.parent_of_call[call_id]
        return self.last_response


def _tool_name(raw_name: str | None) -> tuple[str | None, str]:
    """``(normalized name, kind)`` via :func:`gripprobe_core.telemetry.toolnames.normalize`."""
    name, kind = normalize(raw_name)
    return name or None, kind


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


@hookimpl
def final_output_text(agent, ctx, outputs):
    """The text of the reference agent's ``final`` event (its last answer)."""
    if agent.plugin != NAME:
        return None
    text = None
    try:
        with open(outputs.stdout_path, "rb") as fh:
            for raw in fh:
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get("type") == "final" and isinstance(obj.get("text"), str):
                    text = obj["text"]
    except OSError:
        return None
    return text

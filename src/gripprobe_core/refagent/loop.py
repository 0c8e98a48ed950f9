"""The reference agent's tool loop and its JSON-lines event output (docs/reference-agent.md).

Exit codes: 0 final answer given; 1 backend/HTTP/protocol error; 3 max turns exhausted;
4 tool loop aborted by an internal error. (2, usage errors, is decided by the CLI.)
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from .client import BackendError, ChatClient
from .tools import TOOL_SCHEMAS, Toolbox, truncate

EXIT_OK, EXIT_BACKEND, EXIT_USAGE, EXIT_MAX_TURNS, EXIT_INTERNAL = 0, 1, 2, 3, 4
EVENT_OUTPUT_LIMIT = 2000

SYSTEM_PROMPT = (
    "You are a careful coding agent working in the directory {workspace}. Use the tools to do the task: "
    "shell (run a bash command), read, write and edit (exact text replacement). Paths are relative to "
    "that directory. When the task is done, reply with a short summary and no tool call."
)


@dataclass
class AgentConfig:
    base_url: str
    model: str
    workspace: Path
    prompt: str
    max_turns: int = 12
    tool_timeout_s: float = 60.0
    stream: bool = True
    api_key: str | None = None
    request_timeout_s: float = 300.0
    ask: bool = False
    """Ask before every tool call: a ``permission.request`` event on stdout, then one JSON line on stdin
    ``{"request_id": …, "outcome": "allow" | "deny"}`` (anything else, or stdin closed, is a denial)."""


def utc_ts() -> str:
    """ISO-8601 UTC with milliseconds: ``2026-01-02T03:04:05.678Z``."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class EventWriter:
    """Writes one JSON object per line to ``out``; human progress to ``err``."""

    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.out, self.err = out, err

    def emit(self, type_: str, **fields: Any) -> None:
        line = json.dumps({"type": type_, "ts": utc_ts(), **fields}, ensure_ascii=False)
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody is listening any more; the exit code still tells

    def progress(self, message: str) -> None:
        try:
            self.err.write(f"[refagent] {message}\n")
            self.err.flush()
        except (BrokenPipeError, ValueError):
            pass


def _permitted(events: EventWriter, request_id: str, call: dict[str, str]) -> bool:
    """Ask the client (stdin) whether ``call`` may run: True only for an ``allow`` naming this request."""
    events.emit("permission.request", request_id=request_id, call_id=call["id"], name=call["name"],
                arguments=parse_or_raw(call["arguments"]))
    try:
        line = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    try:
        answer = json.loads(line)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("request_id") == request_id and answer.get("outcome") == "allow"


def parse_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def run_agent(cfg: AgentConfig, events: EventWriter | None = None) -> int:
    """Run one session to completion and return the exit code. Never raises for model or tool trouble."""
    events = events or EventWriter()
    events.emit("session.start", model=cfg.model, base_url=cfg.base_url, workspace=str(cfg.workspace))
    try:
        return _loop(cfg, events)
    except Exception as exc:  # a bug: report it as an event, exit 4
        events.emit("error", kind="internal", message=f"{type(exc).__name__}: {exc}")
        events.progress(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


def _loop(cfg: AgentConfig, events: EventWriter) -> int:
    client = ChatClient(cfg.base_url, cfg.model, api_key=cfg.api_key, stream=cfg.stream,
                        timeout_s=cfg.request_timeout_s)
    toolbox = Toolbox(cfg.workspace, cfg.tool_timeout_s)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT.format(workspace=cfg.workspace)},
        {"role": "user", "content": cfg.prompt},
    ]
    for turn in range(1, cfg.max_turns + 1):
        started = time.monotonic()
        try:
            reply = client.complete(messages, TOOL_SCHEMAS)
        except BackendError as exc:
            fields: dict[str, Any] = {"kind": exc.kind, "message": exc.message}
            if exc.http_status is not None:
                fields["http_status"] = exc.http_status
            events.emit("error", **fields)
            events.progress(f"backend error ({exc.kind}): {exc.message}")
            return EXIT_BACKEND
        latency_ms = round((time.monotonic() - started) * 1000, 1)
        events.emit("model.response", response_id=reply.response_id, turn=turn, text=reply.text,
                    tool_calls=reply.tool_calls, finish_reason=reply.finish_reason, usage=reply.usage,
                    latency_ms=latency_ms, **({"reasoning": reply.reasoning} if reply.reasoning else {}))
        assistant: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            assistant["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in reply.tool_calls]
        messages.append(assistant)
        if not reply.tool_calls:
            events.emit("final", text=reply.text)
            events.progress(f"turn {turn}: final answer")
            return EXIT_OK
        for n, call in enumerate(reply.tool_calls, 1):
            if cfg.ask and not _permitted(events, f"perm-{turn}-{n}", call):
                refusal = f"permission denied: the user did not allow {call['name']}; it was not run"
                events.emit("tool.result", call_id=call["id"], name=call["name"], status="error",
                            error_type="permission_denied", output=refusal, duration_ms=0)
                events.progress(f"turn {turn}: {call['name']} denied")
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": refusal})
                continue
            events.emit("tool.start", call_id=call["id"], name=call["name"],
                        arguments=parse_or_raw(call["arguments"]))
            events.progress(f"turn {turn}: {call['name']} {truncate(call['arguments'], 200)}")
            outcome = toolbox.run(call["name"], call["arguments"])
            result: dict[str, Any] = {"call_id": call["id"], "name": call["name"], "status": outcome.status}
            if call["name"] == "shell":
                result["exit_code"] = outcome.exit_code
            result.update(output=truncate(outcome.output, EVENT_OUTPUT_LIMIT), duration_ms=outcome.duration_ms)
            events.emit("tool.result", **result)
            events.progress(f"turn {turn}: {call['name']} → {outcome.status}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": outcome.output})
    events.emit("error", kind="max_turns", message=f"no final answer after {cfg.max_turns} turns")
    events.progress(f"gave up after {cfg.max_turns} turns")
    return EXIT_MAX_TURNS

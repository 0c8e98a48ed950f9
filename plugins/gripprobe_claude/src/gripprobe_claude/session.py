"""The harness as Claude Code's client: :class:`ClaudeControlSession` writes the prompt on stdin, answers
every ``can_use_tool`` question with the case's policy (``channel.responder``), records every line both
ways and every decision in ``channel.transcript``, and closes stdin after the ``result`` line so Claude
Code exits by itself (its exit code stays the phase's). The protocol's shapes are in
:mod:`gripprobe_claude.control`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from gripprobe_core.plugin import PermissionDecision, SessionChannel, SessionError, ToolNames, mapping, text

from .control import (
    control_response, dumps, error_response, is_permission_question, permission_requests, redact, user_message,
)
from .names import TOOL_NAMES

#: Control requests that must not be answered when the host did not declare them (Claude Code then
#: cancels them itself); every other unknown request gets an error answer.
UNANSWERED_SUBTYPES = frozenset({"request_user_dialog"})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Record:
    """The session's JSON-lines record (see :mod:`gripprobe_claude.control`); the API key never in it."""

    def __init__(self, path: Path, secret: str | None) -> None:
        self.secret = secret
        self.seq = 0
        self.fh: IO[str] | None
        try:
            self.fh = open(path, "a", encoding="utf-8")
        except OSError:
            self.fh = None

    def add(self, kind: str, **fields: Any) -> None:
        if self.fh is None:
            return
        self.seq += 1
        line = redact(dumps({"seq": self.seq, "ts": _now(), "dir": kind, **fields}), self.secret)
        try:
            self.fh.write(line + "\n")
            self.fh.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass


class ClaudeControlSession:
    """One conversation with ``claude -p --input-format stream-json … --permission-prompt-tool stdio``
    (:data:`gripprobe_claude.config.SESSION_OPTIONS`): an :class:`~gripprobe_core.plugin.AgentSession`."""

    def __init__(self, prompt: str, *, names: ToolNames = TOOL_NAMES) -> None:
        self.prompt = prompt
        self.names = names
        self.stdin_open = True

    async def run(self, channel: SessionChannel) -> None:
        spec = channel.ctx.interaction
        decided_by = "manual" if spec is not None and spec.policy == "manual" else "policy"
        record = _Record(channel.transcript, channel.ctx.api_key)
        self.stdin_open = True
        try:
            await self._send(channel, record, user_message(self.prompt))
            while True:
                try:
                    raw = await channel.reader.readline()
                except ValueError as exc:  # a line past the reader's limit: dropped by the reader
                    record.add("note", text=f"a line was dropped: {exc}")
                    continue
                if not raw:
                    record.add("note", text="Claude Code's stdout ended")
                    break
                try:
                    obj = json.loads(raw)
                except ValueError:
                    record.add("recv", raw=raw.decode("utf-8", "replace").rstrip("\n"))
                    continue
                record.add("recv", line=obj)
                if not isinstance(obj, dict):
                    continue
                await self._handle(channel, record, obj, decided_by)
        finally:
            record.close()

    async def _handle(self, channel: SessionChannel, record: _Record, obj: dict[str, Any], decided_by: str) -> None:
        kind = obj.get("type")
        if is_permission_question(obj):
            requests = permission_requests(obj, self.names)
            tool_call_id = text(mapping(obj.get("request")).get("tool_use_id"))
            decisions: list[PermissionDecision] = []
            for request in requests:
                try:
                    decision = await channel.responder.decide(request)
                except Exception as exc:
                    raise SessionError(f"no answer to Claude Code's request {request.request_id}: {exc}") from exc
                decisions.append(decision)
                record.add("decision", agent_request_id=text(obj.get("request_id")), tool_call_id=tool_call_id,
                           request=request.as_payload(), decision=decision.as_payload(request, decided_by))
            await self._send(channel, record, control_response(obj, requests, decisions))
        elif kind == "control_request":
            subtype = text(mapping(obj.get("request")).get("subtype"))
            if subtype not in UNANSWERED_SUBTYPES:
                await self._send(channel, record, error_response(
                    obj, f"GripProbe's session does not handle {subtype or 'this request'}"))
        elif kind == "result" and not obj.get("parent_tool_use_id") and self.stdin_open:
            # The turn is over: closing stdin makes Claude Code finish (a background agent first) and exit.
            self.stdin_open = False
            record.add("note", text="stdin closed after the result")
            try:
                channel.writer.close()
            except (OSError, RuntimeError):
                pass

    async def _send(self, channel: SessionChannel, record: _Record, obj: dict[str, Any]) -> None:
        if not self.stdin_open:
            record.add("note", text="not sent (stdin closed)", line=obj)
            return
        record.add("send", line=obj)
        try:
            channel.writer.write((dumps(obj) + "\n").encode("utf-8"))
            await channel.writer.drain()
        except (OSError, RuntimeError) as exc:  # Claude Code is gone: what it printed is still read to the end
            self.stdin_open = False
            record.add("note", text=f"stdin write failed: {exc}")

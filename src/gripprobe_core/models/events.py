"""The normalized event (SPEC §5): one JSON object per line in ``events.<phase>.jsonl``."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .wire import MODEL_PROTOCOLS  # noqa: F401  (re-exported: defined without pydantic, for the recorder)

EventType = Literal["tool_call_start", "tool_call_result", "model_response", "permission_request",
                    "permission_response", "thought"]
"""``permission_request`` / ``permission_response``: one of the agent's requests and the harness's (or its own
settings') answer (docs/interaction.md); ``thought``: reasoning text (``payload.text``)."""
Tier = Literal["A", "B", "C", "D"]
TIER_ORDER: dict[str, int] = {"A": 0, "B": 1, "C": 2, "D": 3}
EventSource = Literal["wrapper", "proxy", "agent_output"]
EventStatus = Literal["started", "success", "error", "timeout", "unknown"]
Phase = Literal["warmup", "measured"]


class ToolCallPayload(BaseModel):
    """Payload of tool_call_start / tool_call_result events."""

    model_config = ConfigDict(extra="allow")
    raw_name: str | None = Field(default=None, description="The tool's name verbatim, as the agent called it.")
    name: str | None = Field(default=None, description="Normalized name (shell, read, write, edit, fetch, ...).")
    kind: Literal["read", "write", "execute", "search", "fetch", "other"] | None = None
    arguments: Any = None
    output: str | None = Field(default=None, description="Tool output (results only), truncated.")


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_type: EventType
    run_id: str = ""
    case_id: str = ""
    phase: Phase = "measured"
    event_id: str
    trace_id: str = ""
    tool_call_id: str | None = None
    response_id: str | None = None
    parent_id: str | None = Field(default=None, description="event_id of the model_response that spawned a tool call.")
    source_tier: Tier
    source: EventSource
    payload: dict[str, Any] = Field(default_factory=dict)
    timestamp: str | None = Field(default=None, description="ISO-8601 UTC time when it happened (not when parsed).")
    sequence: int = 0
    status: EventStatus = "unknown"
    latency_ms: float | None = None
    exit_code: int | None = None
    error_type: str | None = None
    raw_artifact_ref: str | None = Field(default=None, description="file:line the event was parsed from.")
    redaction_status: Literal["raw_internal", "redacted", "summary_only"] = "redacted"
    seen_by: list[Tier] | None = Field(
        default=None, description="Set by the merge when several sources saw this event and it was kept once: "
                                  "every tier that saw it, best first (the event itself is the best tier's).")

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _finite_latency(cls, value: Any) -> Any:
        """A latency an agent reported as ``NaN`` or infinite (its own JSON may hold them) is unknown."""
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    def is_tool_event(self) -> bool:
        return self.event_type in ("tool_call_start", "tool_call_result")

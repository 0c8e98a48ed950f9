"""Models of the ATIF spec, to validate what `gripprobe export --format atif` writes.

Written from Harbor's RFC 0001 "Agent Trajectory Interchange Format (ATIF) Specification" (v1.4) and the
rules its reference models enforce: every object closed (extra fields forbidden), the required fields of
the root and of each step, step ids running 1..n, only agent steps carrying model_name, reasoning,
tool_calls and metrics, an observation's source_call_id naming a tool call of its own step, ISO 8601
timestamps, tool-call arguments an object.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifToolCall(_Closed):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class AtifObservationResult(_Closed):
    source_call_id: str | None = None
    content: str | None = None
    subagent_trajectory_ref: list[dict[str, Any]] | None = None


class AtifObservation(_Closed):
    results: list[AtifObservationResult]


class AtifMetrics(_Closed):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class AtifStep(_Closed):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, v: str | None) -> str | None:
        if v is not None:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        return v

    @model_validator(mode="after")
    def _agent_only(self) -> "AtifStep":
        if self.source != "agent":
            for name in ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"):
                assert getattr(self, name) is None, f"{name} on a {self.source} step"
        return self


class AtifAgent(_Closed):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class AtifFinalMetrics(_Closed):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = None
    extra: dict[str, Any] | None = None


class AtifTrajectory(_Closed):
    schema_version: Literal["ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4"]
    session_id: str
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _rules(self) -> "AtifTrajectory":
        assert [s.step_id for s in self.steps] == list(range(1, len(self.steps) + 1)), "step ids not 1..n"
        for s in self.steps:
            ids = {c.tool_call_id for c in s.tool_calls or []}
            for r in (s.observation.results if s.observation else []):
                assert r.source_call_id is None or r.source_call_id in ids, f"step {s.step_id}: {r.source_call_id}"
        return self

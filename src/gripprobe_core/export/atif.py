"""ATIF trajectories (Harbor's Agent Trajectory Interchange Format, ``ATIF-v1.4``), one per case.

Built from the measured phase's normalized events (see docs/export.md for the field mapping):

* step 1, ``source: user``: the prompt the agent got (``prompt.txt``);
* one ``source: agent`` step per ``model_response``: its text as ``message``, the tool calls it asked
  for as ``tool_calls`` (``function_name`` the tool's name verbatim, ``arguments`` an object), their
  results as ``observation.results`` (``source_call_id`` = the call's id), token usage as ``metrics``, its
  reasoning (``thought`` events) as ``reasoning_content``; a call the agent asked permission for lists each
  request and answer in ``extra.tool_calls[].permissions`` (docs/interaction.md);
* a tool call with no model response of the timeline (an agent whose model traffic was not seen) is an
  agent step of its own with an empty message;
* with no model response at all, the agent's final answer (``measured.final.txt``) is a last agent step;
* tier D events (the agent's claims about what it did) are not tool calls and are left out.

Trajectories are written under ``<RUN_DIR>/exports/atif/<case_id>.json`` (never into ``artifacts/``,
whose files are evidence with recorded digests). The output is valid against Harbor's models: step ids
run from 1, only agent steps carry tool calls and metrics, every ``source_call_id`` names a tool call of
its own step, every timestamp is ISO 8601.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..jsonl import dumps
from ..store import RunFolder
from .common import (
    Call, ExportCase, Response, Timeline, clean, iso, read_text, read_timeline, readable_cases, when, write_file)

__all__ = ["SCHEMA_VERSION", "build_trajectory", "write_atif"]

SCHEMA_VERSION = "ATIF-v1.4"


def _arguments(call: Call) -> dict[str, Any]:
    """ATIF wants an object: a dict as it is; a string that parses as a JSON object, parsed; any other
    value wrapped (``input`` for a freeform/custom tool's text, ``raw_arguments`` otherwise, e.g.
    malformed JSON the model sent)."""
    value = call.arguments
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            value = parsed
    if isinstance(value, dict):
        return _jsonable(value)
    if value is None:
        return {}
    key = "input" if call.call_kind == "custom" else "raw_arguments"
    return {key: _jsonable(value)}


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A copy that ``json.dumps(allow_nan=False)`` writes: every string clean UTF-8 (lone surrogates
    replaced), non-finite floats None, nesting deeper than 64 levels cut (a marker string)."""
    if isinstance(value, str):
        return clean(value)
    if depth > 64 and isinstance(value, (dict, list)):
        return "[nested too deep]"
    if isinstance(value, dict):
        return {clean(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clean(value)


def _call_id(call: Call) -> str:
    return call.tool_call_id or f"gripprobe-{call.start_event or call.result_event}"


def _tool_part(calls: list[Call]) -> dict[str, Any]:
    step: dict[str, Any] = {}
    if not calls:
        return step
    step["tool_calls"] = [{"tool_call_id": _call_id(c), "function_name": c.raw_name, "arguments": _arguments(c)}
                          for c in calls]
    results = [{"source_call_id": _call_id(c), "content": c.output or ""} for c in calls if c.has_result]
    if results:
        step["observation"] = {"results": results}
    return step


def _call_extra(calls: list[Call]) -> list[dict[str, Any]]:
    return [{"tool_call_id": _call_id(c), "name": c.name, "kind": c.kind, "source_tier": c.tier, "status": c.status,
             "exit_code": c.exit_code, "error_type": c.error_type, "permissions": c.permissions or None}
            for c in calls]


def _prune(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _response_step(r: Response, calls: list[Call]) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent"}
    if r.timestamp is not None:
        step["timestamp"] = iso(r.timestamp)
    step["message"] = r.text or ""
    if r.reasoning:
        step["reasoning_content"] = r.reasoning
    step.update(_tool_part(calls))
    metrics = _prune({"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                      "cached_tokens": r.cached_tokens})
    if r.total_tokens is not None:
        metrics["extra"] = {"total_tokens": r.total_tokens}
    if metrics:
        step["metrics"] = metrics
    step["extra"] = _prune({"event_id": r.event_id, "response_id": r.response_id, "source_tier": r.tier,
                            "status": r.status, "error_type": r.error_type, "latency_ms": r.latency_ms,
                            "protocol": r.protocol})
    if calls:
        step["extra"]["tool_calls"] = [_prune(x) for x in _call_extra(calls)]
    return step


def _orphan_step(call: Call) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent"}
    ts = call.start_ts if call.start_ts is not None else call.result_ts
    if ts is not None:
        step["timestamp"] = iso(ts)
    step["message"] = ""
    step.update(_tool_part([call]))
    step["extra"] = {"note": "tool call seen without the model response that asked for it",
                     "tool_calls": [_prune(x) for x in _call_extra([call])]}
    return step


def build_trajectory(case: ExportCase, run_id: str, timeline: Timeline | None = None) -> dict[str, Any] | None:
    """The ATIF trajectory of a case (a JSON-ready dict), or None when its case.json is unreadable."""
    r = case.result
    if r is None:
        return None
    if timeline is None:
        timeline = read_timeline(case.path)
    measured = next((p for p in r.phases if p.phase == "measured"), None)
    started = when(measured.process.started_at) if measured is not None else None
    prompt = read_text(case.path / "prompt.txt")
    user: dict[str, Any] = {"step_id": 1, "source": "user"}
    if started is not None:
        user["timestamp"] = iso(started)
    user["message"] = clean(prompt or "")
    steps: list[dict[str, Any]] = [user]
    for item in timeline.items():
        if isinstance(item, Response):
            steps.append(_response_step(item, [c for c in item.calls if c.tier != "D"]))
        elif item.tier != "D":
            steps.append(_orphan_step(item))
    if not timeline.responses:
        final = read_text(case.path / "artifacts" / "measured.final.txt")
        if final and final.strip():
            finished = when(measured.process.finished_at) if measured is not None else None
            step: dict[str, Any] = {"source": "agent"}
            if finished is not None:
                step["timestamp"] = iso(finished)
            step["message"] = clean(final)
            step["extra"] = {"source": "measured.final.txt"}
            steps.append(step)
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    steps = [{"step_id": s["step_id"], **{k: v for k, v in s.items() if k != "step_id"}} for s in steps]

    final_metrics: dict[str, Any] = {}
    for key, total in (("prompt_tokens", "total_prompt_tokens"), ("completion_tokens", "total_completion_tokens"),
                       ("cached_tokens", "total_cached_tokens")):
        values = [getattr(x, key) for x in timeline.responses if getattr(x, key) is not None]
        if values:
            final_metrics[total] = sum(values)
    final_metrics["total_steps"] = len(steps)

    v = r.verdict
    left_out = sum(1 for c in timeline.calls if c.tier == "D")
    notes = ("Exported by GripProbe from the measured phase's normalized events (events.measured.jsonl): "
             "one agent step per model response, tool calls with their results as observations.")
    if left_out:
        notes += f" {left_out} tier D claim(s) (what the agent said it did, not observed) left out."
    if timeline.state != "ok":
        notes += f" The events file was {timeline.state} ({timeline.bad_lines} unreadable line(s))."
    agent = {"name": r.key.agent, "version": r.agent_version or "unknown", "model_name": r.key.model,
             "extra": _prune({"backend": r.key.backend, "format": r.key.format, "model_hash": r.model_hash})}
    return _jsonable({
        "schema_version": SCHEMA_VERSION,
        "session_id": f"{run_id}/{case.name}",
        "agent": agent,
        "steps": steps,
        "notes": notes,
        "final_metrics": final_metrics,
        "extra": {"gripprobe": _prune({
            "version": __version__, "run_id": run_id, "case_id": case.name, "phase": "measured",
            "test": r.key.test, "status": v.status, "failure_reason": v.failure_reason,
            "evaluator_reason_code": v.evaluator_reason_code, "trajectory": v.trajectory,
            "tool_event_verdict": v.tool_event_verdict, "telemetry_source_tier": r.telemetry.telemetry_source_tier,
            "strict_pass_score": v.strict_pass_score, "overall_score": v.overall_score,
            "events_state": timeline.state})},
    })


def trajectory_bytes(trajectory: dict[str, Any]) -> bytes:
    return (dumps(trajectory, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_atif(run: RunFolder, cases: list[ExportCase], out: Path | None = None,
               note: Callable[[str], None] = lambda s: None) -> tuple[Path, int]:
    """One ``<case_id>.json`` per readable case into ``out`` (default ``<RUN_DIR>/exports/atif``);
    returns the folder and how many were written. Unreadable cases are skipped with a ``note``."""
    folder = out if out is not None else run.path / "exports" / "atif"
    written = 0
    for case, timeline in readable_cases(cases, note):
        trajectory = build_trajectory(case, run.run_id, timeline)
        if trajectory is None:
            continue
        target = folder / f"{case.name}.json"
        write_file(target, trajectory_bytes(trajectory), inside=run.path if out is None else None)
        written += 1
    return folder, written

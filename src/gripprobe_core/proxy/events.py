"""Tier A events from the proxy's records (one record per HTTP exchange, see :mod:`.observe`).

:func:`records_to_events` turns the records of one phase, in order, into normalized events:

* per exchange of a model protocol, a ``model_response`` (``response_id``; payload ``usage``,
  ``text``, ``tool_call_count``, ``tool_call_nonstructured_count``; status ``success``, or ``error``
  with ``error_type`` when the HTTP status is ≥ 400 or the exchange failed in the proxy);
* per structured tool call the response requested, a ``tool_call_start`` (``parent_id`` = that
  ``model_response``; payload ``raw_name``, ``name``/``kind`` from
  :meth:`gripprobe_core.telemetry.toolnames.ToolNames.normalize` (the driver's table), ``arguments`` parsed if JSON else the raw
  string); a function call whose arguments are not JSON gets ``error_type: malformed_arguments``;
* per tool result carried by a LATER request, a ``tool_call_result`` — once per call, however many
  later requests repeat the conversation. It comes before that request's ``model_response``.

Results are paired with calls by ``tool_call_id``; a result without an id (Ollama) goes to the oldest
unanswered call of the same tool name. Tool calls written as text (nonstructured) produce no events:
they are only counted (:func:`proxy_counts`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ..models.events import Event
from ..telemetry.toolnames import GENERIC, ToolNames
from .protocols import MODEL_PROTOCOLS

__all__ = ["proxy_counts", "records_to_events"]

P = "x_gripprobe_"
_RESULT_STATUSES = frozenset({"success", "error", "unknown"})


def _get(record: dict[str, Any], key: str, default: Any = None) -> Any:
    value = record.get(P + key, default)
    return default if value is None else value


def _list(record: dict[str, Any], key: str) -> list[Any]:
    value = record.get(P + key)
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_model(record: dict[str, Any]) -> bool:
    return record.get(P + "protocol") in MODEL_PROTOCOLS


def _parse_arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


class _Builder:
    def __init__(self, phase: str, artifact_name: str, tool_names: ToolNames) -> None:
        self.phase = phase
        self.artifact_name = artifact_name
        self.tool_names = tool_names
        self.events: list[Event] = []
        self.calls_by_id: dict[str, Event] = {}
        self.unanswered: list[Event] = []
        self.seen_results: set[Any] = set()

    def add(self, line: int, **fields: Any) -> Event | None:
        n = len(self.events) + 1
        try:
            event = Event(event_id=f"{self.phase}-A-{n}", sequence=n, source="proxy",
                          phase=self.phase,  # type: ignore[arg-type]
                          source_tier="A", raw_artifact_ref=f"{self.artifact_name}:{line}", **fields)
        except (ValidationError, ValueError, TypeError):
            return None
        self.events.append(event)
        return event

    def record(self, record: dict[str, Any], line: int) -> None:
        if not _is_model(record):
            return
        timestamp = record.get(P + "timestamp") if isinstance(record.get(P + "timestamp"), str) else None
        self.results(record, line, timestamp)
        response = self.response(record, line, timestamp)
        for call in _list(record, "tool_calls"):
            if isinstance(call, dict):
                self.start(call, response, line, timestamp)

    def results(self, record: dict[str, Any], line: int, timestamp: str | None) -> None:
        for position, result in enumerate(_list(record, "tool_results")):
            if not isinstance(result, dict):
                continue
            call_id = result.get("tool_call_id") if isinstance(result.get("tool_call_id"), str) else None
            raw_name = result.get("name") if isinstance(result.get("name"), str) else None
            output = result.get("output") if isinstance(result.get("output"), str) else None
            key: Any = ("id", call_id) if call_id else ("position", position, raw_name, output)
            if key in self.seen_results:
                continue
            self.seen_results.add(key)
            call = self._owner(call_id, raw_name)
            if call is not None:
                self.unanswered.remove(call)
                raw_name = raw_name or call.payload.get("raw_name")
            name, kind = self.tool_names.normalize(raw_name)
            status = result.get("status") if result.get("status") in _RESULT_STATUSES else "unknown"
            self.add(line, event_type="tool_call_result", tool_call_id=call_id or (call.tool_call_id if call else None),
                     parent_id=call.parent_id if call is not None else None, timestamp=timestamp, status=status,
                     exit_code=_int(result.get("exit_code")),
                     error_type="tool_error" if status == "error" else None,
                     payload={"raw_name": raw_name, "name": name or None, "kind": kind, "output": output})

    def _owner(self, call_id: str | None, raw_name: str | None) -> Event | None:
        if call_id:
            call = self.calls_by_id.get(call_id)
            return call if call is not None and call in self.unanswered else None
        for call in self.unanswered:
            if call.tool_call_id is None and (raw_name is None or call.payload.get("raw_name") == raw_name):
                return call
        return None

    def response(self, record: dict[str, Any], line: int, timestamp: str | None) -> Event | None:
        status = _int(record.get(P + "status"))
        proxy_error = record.get(P + "proxy_error") if isinstance(record.get(P + "proxy_error"), str) else None
        failed = (status is not None and status >= 400) or proxy_error is not None
        error_type = None
        if failed:
            if proxy_error:  # the proxy's own answer (a refused call, a fault) is never the backend's word
                error_type = proxy_error
            elif record.get(P + "backend_tool_unsupported") is True:
                error_type = "backend_tool_unsupported"
            else:
                error_type = f"http_{status}"
        payload: dict[str, Any] = {
            "usage": record.get(P + "usage") if isinstance(record.get(P + "usage"), dict) else None,
            "text": record.get(P + "text") if isinstance(record.get(P + "text"), str) else None,
            "tool_call_count": _int(record.get(P + "tool_call_count")) or 0,
            "tool_call_nonstructured_count": _int(record.get(P + "tool_call_nonstructured_count")) or 0,
            "protocol": record.get(P + "protocol"),
            "http_status": status,
        }
        if isinstance(record.get(P + "error"), str):
            payload["error"] = record[P + "error"]
        if record.get(P + "tool_names_nonstructured"):
            payload["tool_names_nonstructured"] = _list(record, "tool_names_nonstructured")
        duration = record.get(P + "duration_ms")
        latency = float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
        return self.add(line, event_type="model_response", response_id=_get(record, "response_id") or None,
                        timestamp=timestamp, status="error" if failed else "success", error_type=error_type,
                        latency_ms=latency,
                        payload=payload)

    def start(self, call: dict[str, Any], response: Event | None, line: int, timestamp: str | None) -> None:
        raw_name = call.get("name") if isinstance(call.get("name"), str) else None
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        name, kind = self.tool_names.normalize(raw_name)
        arguments = call.get("arguments")
        call_kind = call.get("kind") if call.get("kind") in ("function", "custom") else "function"
        valid = call.get("arguments_json_valid")
        parsed = _parse_arguments(arguments) if call_kind == "function" else arguments
        malformed = call_kind == "function" and (
            valid is False or (valid is None and not call.get("arguments_truncated")
                               and isinstance(arguments, str) and arguments.strip() and parsed is arguments))
        event = self.add(line, event_type="tool_call_start", tool_call_id=call_id,
                         parent_id=response.event_id if response is not None else None,
                         response_id=response.response_id if response is not None else None,
                         timestamp=timestamp, status="started",
                         error_type="malformed_arguments" if malformed else None,
                         payload={"raw_name": raw_name, "name": name or None, "kind": kind, "arguments": parsed,
                                  "call_kind": call_kind, "structured": True})
        if event is None:
            return
        self.unanswered.append(event)
        if call_id and call_id not in self.calls_by_id:
            self.calls_by_id[call_id] = event


def records_to_events(records: list[dict], *, phase: str, artifact_name: str,
                      tool_names: ToolNames = GENERIC) -> list[Event]:
    """Tier A events of one phase from its proxy records, in record order (see the module docstring).

    ``records`` are the lines of ``artifact_name`` in order (line n = ``records[n-1]``); anything that
    is not a dict is skipped but keeps its line number. Tool names are normalized with ``tool_names``
    (the agent driver's table). Never raises.
    """
    builder = _Builder(phase, artifact_name, tool_names)
    for line, record in enumerate(records or [], start=1):
        if not isinstance(record, dict):
            continue
        try:
            builder.record(record, line)
        except Exception:  # a strange record costs its own events, never the phase's
            continue
    return builder.events


def proxy_counts(records: list[dict]) -> dict[str, Any]:
    """``proxy_structured_count``, ``proxy_nonstructured_count``, ``backend_tool_unsupported``: the
    keyword arguments of :func:`gripprobe_core.telemetry.summarize_phase` the proxy decides. The backend
    rejected tools only when an exchange it answered itself says so (never one the proxy refused)."""
    structured = nonstructured = 0
    unsupported = False
    for record in records or []:
        if not isinstance(record, dict):
            continue
        if _is_model(record):
            structured += max(0, _int(record.get(P + "tool_call_count")) or 0)
            nonstructured += max(0, _int(record.get(P + "tool_call_nonstructured_count")) or 0)
        unsupported = unsupported or (record.get(P + "backend_tool_unsupported") is True
                                      and not record.get(P + "proxy_error"))
    return {"proxy_structured_count": structured, "proxy_nonstructured_count": nonstructured,
            "backend_tool_unsupported": unsupported}

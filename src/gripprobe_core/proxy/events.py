"""Tier A events from the proxy's records (one record per HTTP exchange, see :mod:`.observe`).

:func:`records_to_events` turns the records of one phase, in order, into normalized events:

* per exchange of a model protocol, a ``model_response`` (``response_id``; payload ``usage``,
  ``text``, ``tool_call_count``, ``tool_call_nonstructured_count``; status ``success``, or ``error``
  with ``error_type`` when the HTTP status is ≥ 400 or the exchange failed in the proxy);
* per exchange whose reply carried reasoning (``reasoning_content``, a reasoning item, a ``thinking``
  block), a ``thought`` right after its ``model_response`` (payload ``text``; ``parent_id`` that response);
* per structured tool call the response requested, a ``tool_call_start`` (``parent_id`` = that
  ``model_response``; payload ``raw_name``, ``name``/``kind`` from
  :meth:`gripprobe_core.telemetry.toolnames.ToolNames.normalize` (the driver's table), ``arguments`` parsed if JSON else the raw
  string); a function call whose arguments are not JSON gets ``error_type: malformed_arguments``;
* per tool result carried by a LATER request that *answers* one of those calls (:class:`_Calls`), a
  ``tool_call_result`` — once per call, however many later requests repeat the conversation. It comes
  before that request's ``model_response``.

**Only the model creates calls.** A call exists only when a model *response* of this phase carried it;
what the agent writes in its request (an assistant ``tool_calls`` message, a ``function_call`` item, a
``role: tool`` result) never creates one. A result answering no call makes no event: it is only counted
(:func:`proxy_counts`, ``proxy_orphan_result_count``). Tool calls written as text (nonstructured)
produce no events either: they are only counted. The rules are in ``docs/telemetry.md``
("What answers a call").
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


class _Calls:
    """The calls the model made so far in one phase, and which of them a result has answered.

    The tool results of a request are read in the request's order (``docs/telemetry.md``, "What answers a
    call"). A result is identified by its id and how many results with that id came before it in the same
    request, else (no id) by its tool name, output and how many results with that name and output came
    before it; a result identified so in an earlier request is a repeat (a request carries the whole
    conversation) and answers nothing new. A new result answers the oldest call that nothing answered yet
    among:

    1. the calls the model gave the result's id;
    2. for a result whose id the model never gave (a client's own id for a call without one), the calls the
       model made without an id, of the result's tool name (any name when the result names none);
    3. for a result without an id (Ollama clients need not send one back), the calls of the result's tool
       name (any name when it names none).

    When there is none, it answers nothing: an orphan (counted, never an event). A call is only ever added
    from a model *response* (:meth:`add`), before the next request is read, so a request can only answer
    calls of earlier responses of the same phase.
    """

    def __init__(self) -> None:
        self.made: list[Event] = []
        self.ids: set[str] = set()
        self.answered: set[str] = set()  # event ids of the answered calls
        self.seen: set[Any] = set()  # identities of the results read so far
        self.orphans = 0

    def add(self, call: Event) -> None:
        self.made.append(call)
        if call.tool_call_id:
            self.ids.add(call.tool_call_id)

    def answer(self, results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Event]]:
        """The calls that this request's ``results`` answer for the first time, each with its result."""
        out: list[tuple[dict[str, Any], Event]] = []
        occurrences: dict[Any, int] = {}
        for result in results:
            call_id = _str(result.get("tool_call_id"))
            name, output = _str(result.get("name")), _str(result.get("output"))
            key: Any = ("id", call_id) if call_id else ("text", name, output)
            k = occurrences.get(key, 0)
            occurrences[key] = k + 1
            if (key, k) in self.seen:
                continue  # the same result again, in a later request
            self.seen.add((key, k))
            call = next((c for c in self.made if c.event_id not in self.answered and self._fits(c, call_id, name)),
                        None)
            if call is None:
                self.orphans += 1
                continue
            self.answered.add(call.event_id)
            out.append((result, call))
        return out

    def _fits(self, call: Event, call_id: str | None, name: str | None) -> bool:
        if call_id and call_id in self.ids:
            return call.tool_call_id == call_id
        if call_id and call.tool_call_id:
            return False
        return name is None or call.payload.get("raw_name") == name


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _Builder:
    def __init__(self, phase: str, artifact_name: str, tool_names: ToolNames) -> None:
        self.phase = phase
        self.artifact_name = artifact_name
        self.tool_names = tool_names
        self.events: list[Event] = []
        self.calls = _Calls()

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
        reasoning = record.get(P + "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.add(line, event_type="thought", parent_id=response.event_id if response is not None else None,
                     response_id=response.response_id if response is not None else None, timestamp=timestamp,
                     status="success", payload={"text": reasoning})
        for call in _list(record, "tool_calls"):
            if isinstance(call, dict):
                self.start(call, response, line, timestamp)

    def results(self, record: dict[str, Any], line: int, timestamp: str | None) -> None:
        """A ``tool_call_result`` for each call this request's results answer (:class:`_Calls`): named by the
        call (the model's name and id, never the request's), with the status the agent's output shows."""
        results = [r for r in _list(record, "tool_results") if isinstance(r, dict)]
        for result, call in self.calls.answer(results):
            raw_name = call.payload.get("raw_name")
            name, kind = self.tool_names.normalize(raw_name)
            status = result.get("status") if result.get("status") in _RESULT_STATUSES else "unknown"
            self.add(line, event_type="tool_call_result", tool_call_id=call.tool_call_id, parent_id=call.parent_id,
                     timestamp=timestamp, status=status, exit_code=_int(result.get("exit_code")),
                     error_type="tool_error" if status == "error" else None,
                     payload={"raw_name": raw_name, "name": name or None, "kind": kind,
                              "output": _str(result.get("output"))})

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
        if event is not None:
            self.calls.add(event)


def _build(records: list[dict], phase: str, artifact_name: str, tool_names: ToolNames) -> _Builder:
    builder = _Builder(phase, artifact_name, tool_names)
    for line, record in enumerate(records or [], start=1):
        if not isinstance(record, dict):
            continue
        try:
            builder.record(record, line)
        except Exception:  # a strange record costs its own events, never the phase's
            continue
    return builder


def records_to_events(records: list[dict], *, phase: str, artifact_name: str,
                      tool_names: ToolNames = GENERIC) -> list[Event]:
    """Tier A events of one phase from its proxy records, in record order (see the module docstring).

    ``records`` are the lines of ``artifact_name`` in order (line n = ``records[n-1]``); anything that
    is not a dict is skipped but keeps its line number. Tool names are normalized with ``tool_names``
    (the agent driver's table). Only one phase's records: a result never answers a call of another
    phase. Never raises.
    """
    return _build(records, phase, artifact_name, tool_names).events


def proxy_counts(records: list[dict]) -> dict[str, Any]:
    """``proxy_structured_count``, ``proxy_nonstructured_count``, ``proxy_orphan_result_count`` (tool results
    the agent sent that answer no call a model response of the phase made), ``backend_tool_unsupported``: the
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
    orphans = _build(records, "measured", "", GENERIC).calls.orphans
    return {"proxy_structured_count": structured, "proxy_nonstructured_count": nonstructured,
            "proxy_orphan_result_count": orphans, "backend_tool_unsupported": unsupported}

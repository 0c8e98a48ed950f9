"""OpenTelemetry GenAI spans over OTLP/HTTP, with the official SDK and its protobuf exporter.

One trace per case, from the **measured** phase only (the one that is judged):

* ``invoke_agent <agent>`` (kind CLIENT: the agent is another process), timed by the measured agent
  process, carrying the verdict (``gripprobe.status`` …);
* a child ``chat <model>`` span (kind CLIENT) per ``model_response``: ``gen_ai.request.model``,
  ``gen_ai.response.id``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` where known; timed from the
  event's timestamp and ``latency_ms``;
* an ``execute_tool <tool>`` span (kind INTERNAL) per tool call, under the ``chat`` span of the model
  response that asked for it (``parent_id``), else under the agent span; ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``; from the end of that response (or the start event) to the result event. A call
  the agent asked permission for carries the last answer (``gripprobe.permission.outcome``, ``.rule``,
  ``.decided_by``) and one ``gripprobe.permission`` span event per request (docs/interaction.md); a
  response's reasoning is a ``reasoning`` part of ``gen_ai.output.messages`` (with ``include_content``).

Every span carries its evidence tier as ``gripprobe.source_tier``. Attribute names follow the GenAI
semantic conventions (development status); tool arguments, results and message texts are recorded
only with ``include_content`` (they can hold workspace data).

Spans are collected in memory and handed to the OTLP exporter in batches synchronously, so every
export's result is known: the first batch the endpoint refuses stops the export with
:class:`OtlpError`, and the provider and exporter are always shut down.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from .. import __version__
from ..errors import UserError
from ..jsonl import dumps
from ..textsafe import safe_text
from .common import LATEST, Call, ExportCase, Response, Timeline, clean, read_text, readable_cases, when

__all__ = ["DEFAULT_ENDPOINT", "OtlpError", "OtlpSummary", "export_otlp", "load_sdk", "shown_url"]

DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
#: Spans per OTLP request.
BATCH = 512
#: Longest content attribute (characters), with include_content.
CONTENT_LIMIT = 16 * 1024
#: Statuses whose agent span is marked as an error (error.type = the status).
ERROR_STATUSES = ("FAIL", "NO_TOOL_CALL", "TIMEOUT", "SHELL_ERROR", "HARNESS_ERROR")


class OtlpError(UserError):
    """The OTLP endpoint refused or could not be reached (one line, exit 2)."""


def load_sdk() -> Any:
    """The OpenTelemetry SDK modules this exporter needs, or a :class:`UserError` naming the extra."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON
        from opentelemetry.trace import SpanKind, Status, StatusCode
    except ImportError as exc:
        raise UserError(f"--format otlp needs the OpenTelemetry SDK, which is not installed ({exc.name or exc}); "
                        f"install it with: pip install 'gripprobe-core[otlp]'") from None

    class SDK:
        pass

    sdk = SDK()
    for name, value in (("trace", trace), ("OTLPSpanExporter", OTLPSpanExporter), ("Resource", Resource),
                        ("TracerProvider", TracerProvider), ("SimpleSpanProcessor", SimpleSpanProcessor),
                        ("SpanExportResult", SpanExportResult), ("InMemorySpanExporter", InMemorySpanExporter),
                        ("ALWAYS_ON", ALWAYS_ON), ("SpanKind", SpanKind), ("Status", Status),
                        ("StatusCode", StatusCode)):
        setattr(sdk, name, value)
    return sdk


@dataclass
class OtlpSummary:
    cases: int = 0
    spans: int = 0
    chat_spans: int = 0
    tool_spans: int = 0
    batches: int = 0


# ------------------------------------------------------------------------------------------ attributes


def _attrs(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """OTLP attribute values: clean strings (control characters shown escaped), int64 ints, finite floats, bools,
    string lists; None dropped."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            out[key] = value
        elif isinstance(value, int):
            if -(2 ** 63) <= value < 2 ** 63:
                out[key] = value
        elif isinstance(value, float):
            if value == value and value not in (float("inf"), float("-inf")):
                out[key] = value
        elif isinstance(value, (list, tuple)):
            out[key] = [safe_text(clean(v, 256)) for v in value]
        else:
            out[key] = safe_text(clean(value, CONTENT_LIMIT))
    return out


def _content(value: Any) -> str:
    """A content attribute: text with its control characters shown escaped (``safe_text``); structured
    content as JSON, whose string escapes keep the exact characters and no raw control byte."""
    if isinstance(value, str):
        return safe_text(clean(value, CONTENT_LIMIT))
    return clean(dumps(value, ensure_ascii=False, default=str), CONTENT_LIMIT)


def _json_file(path) -> dict[str, Any]:
    text = read_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _ns(seconds: float) -> int:
    """Epoch nanoseconds, kept within what OTLP's fields hold whatever a stored latency says."""
    return int(round(min(max(seconds, 0.0), LATEST) * 1e9))


# ----------------------------------------------------------------------------------------- one case


@dataclass
class _Times:
    start: float
    end: float


def _call_times(call: Call, parent_end: float | None, fallback: float) -> _Times:
    start = call.start_ts
    end = call.result_ts
    if start is not None and parent_end is not None and start < parent_end and (end is None or parent_end <= end):
        start = parent_end  # the agent runs the tool once the model's reply is complete
    if start is None:
        if end is not None and call.latency_ms is not None:
            start = max(end - call.latency_ms / 1000.0, 0.0)
        else:
            start = end if end is not None else (parent_end if parent_end is not None else fallback)
    if end is None or end < start:
        end = start + (call.latency_ms or 0.0) / 1000.0
    return _Times(start, end)


def _case_spans(sdk: Any, tracer: Any, case: ExportCase, timeline: Timeline, run_id: str, *,
                include_content: bool) -> tuple[int, int]:
    """Emit one case's spans; returns (chat spans, tool spans)."""
    r = case.result
    assert r is not None
    inputs = _json_file(case.path / "artifacts" / "case_inputs.json")
    backend = inputs.get("backend") if isinstance(inputs.get("backend"), dict) else {}
    provider = backend.get("kind") if isinstance(backend.get("kind"), str) and backend.get("kind") else r.key.backend
    context = _json_file(case.path / "artifacts" / "measured.context.json")
    wire_model = context.get("model_name")
    model = wire_model if isinstance(wire_model, str) and wire_model else r.key.model

    measured = next((p for p in r.phases if p.phase == "measured"), None)
    agent_start = (when(measured.process.started_at) if measured else None) or when(r.started_at)
    agent_end = (when(measured.process.finished_at) if measured else None) or when(r.finished_at)
    moments = [t for x in timeline.responses for t in (x.timestamp, x.end) if t is not None]
    moments += [t for c in timeline.calls for t in (c.start_ts, c.result_ts) if t is not None]
    now = time.time()
    start = min([t for t in (agent_start, *moments) if t is not None], default=now)
    end = max([t for t in (agent_end, *moments) if t is not None], default=start)
    # spans of calls without a timestamp are placed at the latest known moment before them
    v = r.verdict
    root_attrs = _attrs([
        ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.provider.name", provider),
        ("gen_ai.agent.name", r.key.agent), ("gen_ai.agent.version", r.agent_version),
        ("gen_ai.request.model", model),
        ("gripprobe.run_id", run_id), ("gripprobe.case_id", case.name), ("gripprobe.phase", "measured"),
        ("gripprobe.agent", r.key.agent), ("gripprobe.model", r.key.model), ("gripprobe.backend", r.key.backend),
        ("gripprobe.format", r.key.format), ("gripprobe.test", r.key.test),
        ("gripprobe.trial", r.key.trial), ("gripprobe.model_hash", r.model_hash),
        ("gripprobe.status", v.status), ("gripprobe.evaluator_reason_code", v.evaluator_reason_code),
        ("gripprobe.failure_reason", v.failure_reason), ("gripprobe.trajectory", v.trajectory),
        ("gripprobe.tool_event_verdict", v.tool_event_verdict),
        ("gripprobe.tool_event_verdict_reason", v.tool_event_verdict_reason),
        ("gripprobe.source_tier", r.telemetry.telemetry_source_tier),
        ("gripprobe.strict_pass_score", v.strict_pass_score), ("gripprobe.overall_score", v.overall_score),
        ("gripprobe.sandbox", r.sandbox), ("gripprobe.events_state", timeline.state),
    ])
    if v.status in ERROR_STATUSES:
        root_attrs["error.type"] = v.status
    if include_content:
        prompt = read_text(case.path / "prompt.txt")
        if prompt:
            root_attrs["gen_ai.input.messages"] = _content(
                [{"role": "user", "parts": [{"type": "text", "content": clean(prompt)}]}])
        final = read_text(case.path / "artifacts" / "measured.final.txt")
        if final:
            root_attrs["gen_ai.output.messages"] = _content(
                [{"role": "assistant", "parts": [{"type": "text", "content": clean(final)}]}])
    root = tracer.start_span(clean(f"invoke_agent {r.key.agent}", 256), kind=sdk.SpanKind.CLIENT,
                             attributes=root_attrs, start_time=_ns(start))
    if v.status in ERROR_STATUSES:
        root.set_status(sdk.Status(sdk.StatusCode.ERROR, clean(f"{v.status}: {v.evaluator_reason_text}", 1024)))
    root_ctx = sdk.trace.set_span_in_context(root)
    chats = tools = 0
    cursor = start
    for item in timeline.items():
        if isinstance(item, Response):
            chat_start = item.timestamp if item.timestamp is not None else cursor
            chat_end = max(item.end if item.end is not None else chat_start, chat_start)
            attrs = _attrs([
                ("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", provider),
                ("gen_ai.request.model", model), ("gen_ai.response.id", item.response_id),
                ("gen_ai.usage.input_tokens", item.prompt_tokens),
                ("gen_ai.usage.output_tokens", item.completion_tokens),
                ("gen_ai.usage.cache_read.input_tokens", item.cached_tokens),
                ("gripprobe.source_tier", item.tier), ("gripprobe.event_id", item.event_id),
                ("gripprobe.protocol", item.protocol), ("gripprobe.status", item.status),
                ("gripprobe.tool_call_count", len(item.calls)),
            ])
            if item.status in ("error", "timeout"):
                attrs["error.type"] = clean(item.error_type or item.status, 256)
            if include_content:
                parts: list[dict[str, Any]] = []
                if item.reasoning:
                    parts.append({"type": "reasoning", "content": item.reasoning})
                if item.text:
                    parts.append({"type": "text", "content": item.text})
                parts += [{"type": "tool_call", "id": c.tool_call_id, "name": c.raw_name, "arguments": c.arguments}
                          for c in item.calls]
                if parts:
                    attrs["gen_ai.output.messages"] = _content([{"role": "assistant", "parts": parts}])
            chat = tracer.start_span(clean(f"chat {model}", 256), context=root_ctx, kind=sdk.SpanKind.CLIENT,
                                     attributes=attrs, start_time=_ns(chat_start))
            if item.status in ("error", "timeout"):
                chat.set_status(sdk.Status(sdk.StatusCode.ERROR, attrs["error.type"]))
            chat_ctx = sdk.trace.set_span_in_context(chat)
            last = chat_end
            for call in item.calls:
                t = _call_times(call, item.end, chat_end)
                _tool_span(sdk, tracer, call, t, chat_ctx, include_content)
                tools += 1
                last = max(last, t.end)
            chat.end(end_time=_ns(chat_end))
            chats += 1
            cursor = max(cursor, last)
        else:
            t = _call_times(item, None, cursor)
            _tool_span(sdk, tracer, item, t, root_ctx, include_content)
            tools += 1
            cursor = max(cursor, t.end)
    root.end(end_time=_ns(max(end, cursor)))
    return chats, tools


def _tool_span(sdk: Any, tracer: Any, call: Call, t: _Times, ctx: Any, include_content: bool) -> None:
    attrs = _attrs([
        ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", call.raw_name),
        ("gen_ai.tool.call.id", call.tool_call_id), ("gen_ai.tool.type", "function"),
        ("gripprobe.source_tier", call.tier), ("gripprobe.source_tiers", sorted(call.tiers)),
        ("gripprobe.tool.name", call.name), ("gripprobe.tool.kind", call.kind),
        ("gripprobe.tool.status", call.status), ("gripprobe.tool.exit_code", call.exit_code),
        ("gripprobe.tool.result_seen", call.has_result), ("gripprobe.tool.error_type", call.error_type),
    ])
    failed = call.status in ("error", "timeout")
    if failed:
        attrs["error.type"] = clean(call.error_type or call.status, 256)
    if include_content:
        if call.arguments is not None:
            attrs["gen_ai.tool.call.arguments"] = _content(call.arguments)
        if call.output is not None:
            attrs["gen_ai.tool.call.result"] = _content(call.output)
    if call.permissions:  # the last answer decides whether it ran; every request is a span event below
        last = call.permissions[-1]
        attrs.update(_attrs([("gripprobe.permission.outcome", last.get("outcome")),
                             ("gripprobe.permission.rule", last.get("rule")),
                             ("gripprobe.permission.decided_by", last.get("decided_by")),
                             ("gripprobe.permission.requests", len(call.permissions))]))
    span = tracer.start_span(clean(f"execute_tool {call.raw_name}", 256), context=ctx, kind=sdk.SpanKind.INTERNAL,
                             attributes=attrs, start_time=_ns(t.start))
    for ask in call.permissions:
        span.add_event("gripprobe.permission", attributes=_attrs([
            ("gripprobe.permission.request_id", ask.get("request_id")),
            ("gripprobe.permission.outcome", ask.get("outcome")), ("gripprobe.permission.option_id", ask.get("option_id")),
            ("gripprobe.permission.rule", ask.get("rule")), ("gripprobe.permission.decided_by", ask.get("decided_by"))]),
            timestamp=_ns(t.start))
    if failed:
        span.set_status(sdk.Status(sdk.StatusCode.ERROR, attrs["error.type"]))
    span.end(end_time=_ns(t.end))


# ------------------------------------------------------------------------------------------- export

_CODE = re.compile(r"code: (\d{3})")


class _Capture(logging.Handler):
    """Keeps what the SDK and exporter log while exporting (instead of printing it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # noqa: BLE001 - a log record that cannot format is still a failure sign
            self.messages.append(str(record.msg))


def _probe(endpoint: str, timeout_s: float) -> str | None:
    """Why a TCP connection to the endpoint's host fails (the exporter's own log often only says it gave
    up), or None when it connects."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, 3.0)):
            return None
    except ConnectionRefusedError:
        return "connection refused (is an OTLP/HTTP collector listening there?)"
    except socket.gaierror:
        return f"cannot resolve the host {clean(host)}"
    except TimeoutError:
        return "no answer (timed out connecting)"
    except OSError as exc:
        return clean(exc.strerror or exc, 200)


def shown_url(endpoint: str) -> str:
    """A URL for display: credentials in it (``user:secret@``) removed, control characters replaced."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        if parts.password is not None or parts.username is not None:
            endpoint = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()
    except (ValueError, TypeError):
        pass
    return clean(endpoint)


def _path_hint(endpoint: str) -> str:
    """What to say when the server refused the endpoint's path (404 / 405): the path it refused and the
    usual one, as a URL on the same host when the given path was not already it."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        path = parts.path or "/"
        same_host = shown_url(parts._replace(path="/v1/traces", query="", fragment="").geturl())
    except ValueError:
        path, same_host = "?", ""
    hint = (f"the server refused the path {safe_text(clean(path, 200))} (no OTLP traces receiver there); "
            "OTLP/HTTP takes traces at /v1/traces (a collector or Jaeger: http://HOST:4318/v1/traces, "
            "Phoenix: http://HOST:6006/v1/traces)")
    if same_host and not path.rstrip("/").endswith("/v1/traces"):
        hint += f", here probably --otlp-endpoint {same_host}"
    else:
        hint += ("; check the port (OTLP/HTTP, not gRPC's 4317 nor a UI port) and any prefix the server needs "
                 "(Langfuse: /api/public/otel/v1/traces)")
    return hint


def _failure_line(endpoint: str, messages: list[str], sent: int, timeout_s: float) -> str:
    text = " ".join(messages)
    code = _CODE.search(text)
    if code and code.group(1) in ("401", "403"):
        why = f"HTTP {code.group(1)}: the endpoint wants credentials (pass them with --otlp-header KEY=VALUE)"
    elif code and code.group(1) in ("404", "405"):
        why = f"HTTP {code.group(1)}: {_path_hint(endpoint)}"
    elif code and code.group(1) != "None":
        why = f"HTTP {code.group(1)}"
    elif (probed := _probe(endpoint, timeout_s)) is not None:
        why = probed
    elif "refused" in text.lower():
        why = "connection refused (is an OTLP/HTTP collector listening there?)"
    elif "timeout" in text.lower() or "timed out" in text.lower():
        why = "no success within the time allowed (see --otlp-timeout)"
    else:
        last = next((m for m in reversed(messages) if m), "the exporter reported a failure")
        why = clean(last, 300)
    return f"OTLP export to {shown_url(endpoint)} failed: {why}; {sent} span(s) were delivered before it"


def export_otlp(run_id: str, cases: list[ExportCase], *, endpoint: str, headers: Mapping[str, str] | None = None,
                timeout_s: float = 10.0, include_content: bool = False,
                note: Callable[[str], None] = lambda s: None) -> OtlpSummary:
    """Send every readable case of a run as GenAI spans to ``endpoint``; raises :class:`OtlpError` when
    the endpoint refuses or cannot be reached. Cases whose case.json is unreadable are skipped (``note``)."""
    sdk = load_sdk()
    summary = OtlpSummary()
    collected = sdk.InMemorySpanExporter()
    resource = sdk.Resource.create({"service.name": "gripprobe", "service.version": __version__,
                                    "gripprobe.run_id": clean(run_id)})
    provider = sdk.TracerProvider(resource=resource, sampler=sdk.ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(sdk.SimpleSpanProcessor(collected))
    tracer = provider.get_tracer("gripprobe.export", __version__)
    exporter = sdk.OTLPSpanExporter(endpoint=endpoint, headers=dict(headers) if headers else None, timeout=timeout_s)
    capture = _Capture()
    otel_logger = logging.getLogger("opentelemetry")
    saved = otel_logger.propagate
    otel_logger.addHandler(capture)
    otel_logger.propagate = False

    def flush() -> None:
        spans = list(collected.get_finished_spans())
        collected.clear()
        for i in range(0, len(spans), BATCH):
            batch = spans[i:i + BATCH]
            capture.messages.clear()
            if exporter.export(batch) != sdk.SpanExportResult.SUCCESS:
                raise OtlpError(_failure_line(endpoint, capture.messages, summary.spans, timeout_s))
            summary.spans += len(batch)
            summary.batches += 1

    try:
        made = 0
        for case, timeline in readable_cases(cases, note):
            chats, tools = _case_spans(sdk, tracer, case, timeline, run_id, include_content=include_content)
            summary.cases += 1
            summary.chat_spans += chats
            summary.tool_spans += tools
            made += 1 + chats + tools
            if made - summary.spans >= BATCH:
                flush()
        flush()
    finally:
        provider.shutdown()
        exporter.shutdown()
        otel_logger.removeHandler(capture)
        otel_logger.propagate = saved
    return summary

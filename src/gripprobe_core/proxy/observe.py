"""The exchange observer: watches one HTTP exchange through the recording proxy and writes its record.

The relay (``proxy/server.py``) makes one :class:`ExchangeObserver` per exchange, feeds it the
response bytes exactly as relayed (after writing them to the client), and calls :meth:`finish`
once at the end; the dict it returns is one line of ``proxy.<phase>.http.jsonl``. The observer
never raises and never writes anything itself.

What it costs: :meth:`ExchangeObserver.feed` is linear in the bytes with small constants. The
response is recognized from its first bytes (SSE, JSON/NDJSON, or anything else) and decoded line
by line (:mod:`.sse`, :mod:`.ndjson`); each JSON object goes to a :class:`~.protocols.ReplyAssembler`.
Kept in memory: one partial line, the assembled reply (arguments and text are capped), a raw copy of
the first ``body_budget`` bytes and the parsed events up to the same budget. Once the budget is spent
and the text cap reached, lines that cannot matter (plain text deltas) are no longer parsed at all,
so a 100 MB stream costs flat memory and little time.

The record's keys (all ``x_gripprobe_``-prefixed) are listed in :data:`RECORD_KEYS` and described in
``docs/telemetry.md``. Everything in it is redacted (:mod:`.redact`); headers are never recorded.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from ..timeutil import utc_now_iso
from .lines import LineSplitter
from .ndjson import BLANK, Garbage, loads_or_none, parse_line
from .protocols import MODEL_PROTOCOLS, ReplyAssembler, detect_protocol
from .redact import Redactor, secrets_from_headers
from .sse import SSEDecoder
from .text_tools import scan_text_tool_calls
from .tokens import call_tokens
from .tool_results import request_tool_results

__all__ = ["ARGUMENTS_LIMIT", "OUTPUT_LIMIT", "PREFIX", "RECORD_KEYS", "TEXT_LIMIT", "ExchangeObserver", "fit_json"]

log = logging.getLogger(__name__)

PREFIX = "x_gripprobe_"
ARGUMENTS_LIMIT = 4096
"""Characters of a tool call's arguments kept in the record."""
OUTPUT_LIMIT = 2048
"""Characters of a tool result's output kept in the record."""
TEXT_LIMIT = 4096
"""Characters of the assistant text kept in the record."""
ERROR_LIMIT = 1024
TEXT_SCAN_LIMIT = 256 * 1024
"""Characters of assistant text assembled (and scanned for text tool calls) per exchange."""
UNSUPPORTED_MARKER = "does not support tools"

RECORD_KEYS: tuple[str, ...] = tuple(PREFIX + k for k in (
    "timestamp", "method", "path", "query", "upstream_url", "status", "duration_ms", "ttfb_ms", "protocol",
    "stream", "request", "response", "budget_exceeded", "tool_call_count", "tool_calls", "tool_names",
    "tool_call_ids", "tool_call_nonstructured_count", "tool_names_nonstructured", "tool_call_ids_nonstructured",
    "tool_result_count", "tool_results", "usage", "tokens", "response_id", "text", "reasoning", "backend_tool_unsupported",
    "error", "proxy_error", "ttft_ms", "server_timings",
))
SERVER_TIMINGS_KEYS = 16
"""At most this many of a server's own ``timings`` fields are kept (numbers only)."""


def _filled(value: Any) -> bool:
    return bool(value) and (not isinstance(value, str) or bool(value.strip()))


def carries_output(value: Any, event: str | None = None) -> bool:
    """Whether one decoded response object (an SSE event's data, a JSON line, a whole body) carries model
    output: text, reasoning or a tool call, on any of the four wires. Role-only deltas, empty text, usage
    and keep-alive objects do not (an SSE comment, a server's ping while it prefills, is no object at all)."""
    if not isinstance(value, dict):
        return False
    choices = value.get("choices")
    if isinstance(choices, list):  # OpenAI chat completions (chunk or whole), legacy completions
        for c in choices:
            if not isinstance(c, dict):
                continue
            if _filled(c.get("text")):
                return True
            for part in (c.get("delta"), c.get("message")):
                if isinstance(part, dict) and any(_filled(part.get(k)) for k in (
                        "content", "reasoning_content", "reasoning", "tool_calls", "function_call")):
                    return True
        return False
    kind = value.get("type") if isinstance(value.get("type"), str) else event
    if kind == "content_block_delta":  # Anthropic Messages
        delta = value.get("delta")
        return isinstance(delta, dict) and any(_filled(delta.get(k)) for k in ("text", "thinking", "partial_json"))
    if kind == "content_block_start":
        block = value.get("content_block")
        return isinstance(block, dict) and (block.get("type") in ("tool_use", "server_tool_use")
                                            or _filled(block.get("text")) or _filled(block.get("thinking")))
    if kind == "message" and isinstance(value.get("content"), list):
        return any(isinstance(b, dict) and (b.get("type") == "tool_use" or _filled(b.get("text"))
                                            or _filled(b.get("thinking"))) for b in value["content"])
    if isinstance(kind, str) and kind.startswith("response."):  # OpenAI Responses
        if kind.endswith(".delta"):
            return _filled(value.get("delta"))
        item = value.get("item")
        return kind == "response.output_item.added" and isinstance(item, dict) and \
            item.get("type") in ("function_call", "custom_tool_call")
    if kind == "response" or value.get("object") == "response":
        return any(isinstance(o, dict) and o.get("type") in ("message", "function_call", "custom_tool_call", "reasoning")
                   for o in value.get("output") or [] if isinstance(value.get("output"), list))
    msg = value.get("message")  # Ollama chat (a line or a whole body); /api/generate's "response"
    if isinstance(msg, dict):
        return any(_filled(msg.get(k)) for k in ("content", "thinking", "tool_calls"))
    return _filled(value.get("response")) and isinstance(value.get("response"), str)


def server_timings(value: Any) -> dict[str, float] | None:
    """A server's own ``timings`` object (llama.cpp's ``prompt_ms``, ``predicted_per_second`` …): its numeric
    fields, at most :data:`SERVER_TIMINGS_KEYS`; None when there is none."""
    timings = value.get("timings") if isinstance(value, dict) else None
    if not isinstance(timings, dict):
        return None
    out = {str(k)[:64]: float(v) for k, v in timings.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")}
    return dict(list(out.items())[:SERVER_TIMINGS_KEYS]) or None
_STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/jsonl", "application/stream+json")
_SSE_PREFIXES = (b"data:", b"event:", b"id:", b"retry:", b":")
_SNIFF_LIMIT = 1024
#: Substrings of a line that may matter even after the budget is spent and the text cap reached.
_KEEP_PARSING = ("tool_call", "function", "usage", "eval_count", "error", "done\":true", "\"done\": true",
                 "response.completed", "response.output_item", "custom_tool_call", "response.failed",
                 "response.incomplete", "response.created", "tool_use", "input_json")
_KEEP_KEYS = tuple(k.encode() for k in _KEEP_PARSING)
_KEEP_OVERLAP = max(len(k) for k in _KEEP_KEYS) - 1


def _has_key(data: bytes) -> bool:
    for key in _KEEP_KEYS:
        if key in data:
            return True
    return False
_SKIP_EVENTS = frozenset({"response.output_text.delta", "response.reasoning_text.delta",
                          "response.reasoning_summary_text.delta", "response.refusal.delta"})


def _content_type(headers: Any) -> str:
    """The response's Content-Type, lowercased ("" when absent or unreadable); any header container."""
    try:
        for name, value in (headers or {}).items():
            if isinstance(name, str) and name.lower() == "content-type":
                return str(value or "").lower()
    except Exception:
        pass
    return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text) - limit} more chars]"


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    except (TypeError, ValueError, RecursionError):
        return len(str(value))


def _shrink(value: Any, limit: int, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _clip(value, limit)
    if depth > 100:
        return "[too deep]"
    if isinstance(value, dict):
        return {k: _shrink(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_shrink(v, limit, depth + 1) for v in value]
    return value


def fit_json(value: Any, budget: int) -> tuple[Any, bool]:
    """``(value, cut)``: ``value`` as is when its JSON fits ``budget`` bytes; else with long strings
    shortened (4096, 1024, 256, 64 characters); else its JSON text cut to the budget."""
    if _json_size(value) <= budget:
        return value, False
    shrunk = value
    for limit in (4096, 1024, 256, 64):
        shrunk = _shrink(value, limit)
        if _json_size(shrunk) <= budget:
            return shrunk, True
    try:
        text = json.dumps(shrunk, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = str(shrunk)
    return _clip(text, max(0, budget)), True


class ExchangeObserver:
    """One exchange's observer (the interface the relay calls; see the module docstring)."""

    def __init__(self, *, method: str, path: str, query: str, upstream_url: str,
                 request_headers: Mapping[str, str], request_body: bytes, body_budget: int = 256 * 1024,
                 text_scan_limit: int = TEXT_SCAN_LIMIT, request_size: int | None = None) -> None:
        self.timestamp = utc_now_iso()
        self.method = method if isinstance(method, str) else str(method)
        self.path = path if isinstance(path, str) else str(path)
        self.query = query if isinstance(query, str) else ""
        self.upstream_url = upstream_url if isinstance(upstream_url, str) else str(upstream_url)
        self.budget = max(0, int(body_budget)) if isinstance(body_budget, int) else 256 * 1024
        if isinstance(request_body, str):
            request_body = request_body.encode("utf-8", "replace")
        try:
            self.request_body = bytes(request_body or b"")
        except (TypeError, ValueError):
            self.request_body = b""
        self.request_size = request_size if isinstance(request_size, int) and request_size >= 0 \
            else len(self.request_body)
        """The request body's size (given apart when the body itself was left out: a record past its cap)."""
        self.redactor = Redactor(secrets_from_headers(request_headers or {}))
        self.protocol = detect_protocol(self.method, self.path)
        self.text_scan_limit = text_scan_limit if isinstance(text_scan_limit, int) else TEXT_SCAN_LIMIT
        self.assembler = ReplyAssembler(text_limit=self.text_scan_limit)
        self.mode: str | None = None  # sse | json | text
        self._pending = bytearray()
        self._raw = bytearray()
        self._total = 0
        self._kept: list[Any] = []
        self._kept_size = 0
        self._kept_cut = False
        self._values = 0
        self._garbage = 0
        self._first_value: Any = None
        self._sse: SSEDecoder | None = None
        self._lines: LineSplitter | None = None
        self._failed = False
        self._tail = b""
        self._partial_hit = True  # unknown until a newline is seen in lazy mode
        self._at: float | None = None
        """When the bytes being fed arrived (ms since the request, :meth:`arrived`); None: not told."""
        self._ttft: float | None = None
        self._timings: dict[str, float] | None = None

    # ------------------------------------------------------------------------------ feeding

    def arrived(self, at_ms: float) -> None:
        """The next :meth:`feed` holds bytes that reached the proxy ``at_ms`` after the request did: the first
        object carrying output (:func:`carries_output`) gives the record's ``ttft_ms``."""
        if isinstance(at_ms, (int, float)) and not isinstance(at_ms, bool):
            self._at = float(at_ms)

    def _seen(self, value: Any, event: str | None = None) -> None:
        if self._ttft is None and self._at is not None and carries_output(value, event):
            self._ttft = self._at
        if isinstance(value, dict) and "timings" in value:
            self._timings = server_timings(value) or self._timings

    def feed(self, chunk: bytes) -> None:
        """Take the next response bytes. Never raises (a parser bug only stops the parsing)."""
        if self._failed or not chunk:
            return
        try:
            self._feed(bytes(chunk))
        except Exception:  # never let the observer break the relay
            log.exception("exchange observer: parsing stopped")
            self._failed = True

    def _feed(self, chunk: bytes) -> None:
        self._total += len(chunk)
        room = self.budget - len(self._raw)
        if room > 0:
            self._raw += chunk[:room]
        if self.mode is None:
            self._pending += chunk
            mode = self._sniff(bytes(self._pending[:_SNIFF_LIMIT]))
            if mode is None and len(self._pending) < _SNIFF_LIMIT:
                return
            chunk, self._pending = bytes(self._pending), bytearray()
            self._start(mode or "text")
        if self._lazy():
            chunk = self._skip_plain(chunk)
        if self.mode == "sse":
            assert self._sse is not None
            for event in self._sse.feed(chunk):
                self._on_sse(event.event, event.data)
        elif self.mode == "json":
            assert self._lines is not None
            for line in self._lines.feed(chunk):
                self._on_line(line)

    @staticmethod
    def _sniff(head: bytes) -> str | None:
        data = head.lstrip(b" \t\r\n")
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:].lstrip(b" \t\r\n")
        if not data:
            return None
        if data[:1] in (b"{", b"["):
            return "json"
        for prefix in _SSE_PREFIXES:
            if data.startswith(prefix):
                return "sse"
        if any(prefix.startswith(data) for prefix in _SSE_PREFIXES):
            return None  # too few bytes to tell
        return "text"

    def _start(self, mode: str) -> None:
        self.mode = mode
        if mode == "sse":
            self._sse = SSEDecoder()
        elif mode == "json":
            self._lines = LineSplitter()

    def _lazy(self) -> bool:
        """Budget spent and text cap reached: only lines that may hold calls, usage or errors matter."""
        return self._kept_cut and self.assembler.text_full and self.mode in ("sse", "json")

    def _skip_plain(self, chunk: bytes) -> bytes:
        """The part of ``chunk`` still worth decoding once :meth:`_lazy`.

        When neither ``chunk`` (with the tail of the previous one, for a key cut in two) nor the
        current partial line holds any :data:`_KEEP_PARSING` key, every line that ``chunk`` completes
        would be skipped anyway: drop them undecoded (up to the last ``\\n``) and decode only the
        rest. This keeps a long plain-text stream at the cost of a few ``bytes`` searches per chunk.
        """
        hit = _has_key(self._tail + chunk)
        self._tail = chunk[-_KEEP_OVERLAP:]
        newline = chunk.rfind(b"\n")
        if hit or self._partial_hit:
            self._partial_hit = (self._partial_hit or hit) if newline < 0 else _has_key(chunk[newline + 1:])
            return chunk
        if newline < 0:
            return chunk
        if self._sse is not None:
            for event in self._sse.flush():  # a blank line in the dropped part would have ended it
                self._on_sse(event.event, event.data)
            self._sse.discard_partial()
        elif self._lines is not None:
            self._lines.discard_partial()
        return chunk[newline + 1:]

    def _keep(self, item: Any, size: int) -> None:
        if self._kept_cut:
            return
        if self._kept_size + size > self.budget:
            self._kept_cut = True
            return
        self._kept.append(item)
        self._kept_size += size

    def _on_sse(self, event: str | None, data: str) -> None:
        if self._lazy() and (event in _SKIP_EVENTS or not _has_key(data.encode("utf-8", "replace"))):
            return
        stripped = data.lstrip()
        value: Any = data
        if stripped[:1] in ("{", "["):
            value = loads_or_none(data, data)
        if value is not data:
            self._values += 1
            self.assembler.on_object(value, event)
            self._seen(value, event)
        item = {"event": event, "data": value} if event else {"data": value}
        self._keep(item, len(data) + (len(event) if event else 0))

    def _on_line(self, line: bytes) -> None:
        if self._lazy() and not _has_key(line):
            return
        value = parse_line(line)
        if isinstance(value, Garbage):
            self._garbage += 1
            self._keep(value.text, len(line))
            return
        if value is BLANK:
            return
        self._values += 1
        if self._values == 1:
            self._first_value = value
        self.assembler.on_object(value)
        self._seen(value)
        self._keep(value, len(line))

    # ----------------------------------------------------------------------------- finishing

    def finish(self, *, status: int | None, response_headers: Mapping[str, str], duration_ms: float,
               ttfb_ms: float | None, proxy_error: str | None) -> dict[str, Any]:
        """The exchange's record (see :data:`RECORD_KEYS`). Never raises."""
        try:
            return self._finish(status, response_headers, duration_ms, ttfb_ms, proxy_error)
        except Exception as exc:
            log.exception("exchange observer: finish failed")
            return self._minimal(status, duration_ms, ttfb_ms, proxy_error,
                                 f"observer_error: {type(exc).__name__}")

    def _close_decoders(self) -> None:
        if self._failed:
            return
        try:
            if self.mode is None and self._pending:
                pending, self._pending = bytes(self._pending), bytearray()
                self._start(self._sniff(pending[:_SNIFF_LIMIT]) or "text")
                self._feed_decoded(pending)
            if self.mode == "sse" and self._sse is not None:
                for event in self._sse.close():
                    self._on_sse(event.event, event.data)
            elif self.mode == "json" and self._lines is not None:
                for line in self._lines.close():
                    self._on_line(line)
        except Exception:
            log.exception("exchange observer: closing the decoders failed")
            self._failed = True

    def _feed_decoded(self, data: bytes) -> None:
        if self.mode == "sse" and self._sse is not None:
            for event in self._sse.feed(data):
                self._on_sse(event.event, event.data)
        elif self.mode == "json" and self._lines is not None:
            for line in self._lines.feed(data):
                self._on_line(line)

    def _whole_json(self) -> tuple[bool, Any]:
        """The response parsed as one JSON document, when it was complete within the budget."""
        if self.mode != "json" or self._total > self.budget or not self._raw:
            return False, None
        sentinel = object()
        value = loads_or_none(bytes(self._raw), sentinel)
        return (value is not sentinel), (None if value is sentinel else value)

    def _finish(self, status: int | None, response_headers: Mapping[str, str], duration_ms: float,
                ttfb_ms: float | None, proxy_error: str | None) -> dict[str, Any]:
        self._close_decoders()
        red = self.redactor
        body, request_value, request_cut = self._request_record()
        if self.protocol == "other":
            self.protocol = detect_protocol(self.method, self.path, body)

        whole_ok, whole = self._whole_json()
        if whole_ok and (self._values != 1 or self._garbage):
            # a pretty-printed JSON body: its lines meant nothing one by one
            self.assembler = ReplyAssembler(text_limit=self.text_scan_limit)
            self.assembler.on_object(whole)
            self._seen(whole)  # complete only with its last bytes
        content_type = _content_type(response_headers)
        if self.mode == "json" and whole_ok:
            response_value: Any = whole
            stream = any(t in content_type for t in _STREAM_TYPES)
        elif self.mode == "json" and self._values == 1 and not self._garbage and not self._kept_cut:
            response_value = self._first_value
            stream = any(t in content_type for t in _STREAM_TYPES)
        elif self.mode in ("json", "sse"):
            response_value = list(self._kept)
            stream = True
        else:
            response_value = bytes(self._raw).decode("utf-8", "replace") if self._raw else None
            stream = any(t in content_type for t in _STREAM_TYPES)
        response_value, response_cut = fit_json(red.value(response_value), self.budget)

        asm = self.assembler
        is_model = self.protocol in MODEL_PROTOCOLS
        calls = asm.calls if is_model else []
        tool_calls = [{
            "id": c.id, "name": c.name, "arguments": _clip(red.text(c.arguments), ARGUMENTS_LIMIT),
            "kind": c.kind, "arguments_truncated": c.truncated or len(c.arguments) > ARGUMENTS_LIMIT,
            "arguments_json_valid": c.json_valid,
        } for c in calls]
        text = asm.text if is_model else ""
        text_calls = scan_text_tool_calls(text) if text else []
        results = request_tool_results(body) if is_model else []
        tool_results = [{
            "tool_call_id": r.tool_call_id, "name": r.name, "status": r.status, "exit_code": r.exit_code,
            "output": _clip(red.text(r.output), OUTPUT_LIMIT),
        } for r in results]
        errors = list(asm.errors)
        if isinstance(status, int) and status >= 400 and not errors and self._raw:
            errors.append(bytes(self._raw[:ERROR_LIMIT * 4]).decode("utf-8", "replace"))
        # Only the backend's own answer says it cannot do tools: an error the proxy made itself (a refused
        # model call, a spent budget, a fault) never does, whatever its text.
        unsupported = proxy_error is None and any(UNSUPPORTED_MARKER in e.lower() for e in errors)

        record = {
            "timestamp": self.timestamp,
            "method": self.method,
            "path": self.path,
            "query": red.query(self.query),
            "upstream_url": red.text(self.upstream_url),
            "status": status if isinstance(status, int) else None,
            "duration_ms": round(float(duration_ms), 3) if isinstance(duration_ms, (int, float)) else None,
            "ttfb_ms": round(float(ttfb_ms), 3) if isinstance(ttfb_ms, (int, float)) else None,
            "protocol": self.protocol,
            "stream": bool(stream),
            "request": request_value,
            "response": response_value,
            "budget_exceeded": bool(request_cut or response_cut or self._total > self.budget or self._kept_cut),
            "tool_call_count": len(tool_calls),
            "tool_calls": tool_calls,
            "tool_names": [c["name"] for c in tool_calls],
            "tool_call_ids": [c["id"] for c in tool_calls],
            "tool_call_nonstructured_count": len(text_calls),
            "tool_names_nonstructured": [c.name for c in text_calls],
            "tool_call_ids_nonstructured": [c.id or f"text-{i}" for i, c in enumerate(text_calls, start=1)],
            "tool_result_count": len(tool_results),
            "tool_results": tool_results,
            "usage": asm.usage if is_model else None,
            "tokens": self._tokens(status, asm, calls) if is_model else None,
            "response_id": asm.response_id if is_model else None,
            "text": _clip(red.text(text), TEXT_LIMIT) if text else None,
            "reasoning": _clip(red.text(asm.reasoning), TEXT_LIMIT) if is_model and asm.reasoning else None,
            "backend_tool_unsupported": unsupported,
            "error": _clip(red.text(errors[0]), ERROR_LIMIT) if errors else None,
            "proxy_error": proxy_error if isinstance(proxy_error, str) else None,
            "ttft_ms": round(self._ttft, 3) if self._ttft is not None and is_model else None,
            "server_timings": self._timings if is_model else None,
        }
        out = {PREFIX + k: v for k, v in record.items()}
        # A final pass over every string (names, ids, paths ...) — bodies were redacted before cutting.
        keep = {PREFIX + "request", PREFIX + "response"}
        return {k: (v if k in keep else red.value(v)) for k, v in out.items()}

    def _tokens(self, status: Any, asm: ReplyAssembler, calls: list[Any]) -> dict[str, Any]:
        """``{"counted", "estimated"}``: what the call cost for the phase's token budget (:mod:`.tokens`)."""
        reply = len(asm.text.encode("utf-8", "replace")) + sum(
            len(c.name.encode("utf-8", "replace")) + len(c.arguments.encode("utf-8", "replace")) for c in calls)
        counted, estimated = call_tokens(status=status, usage=asm.usage, request_bytes=self.request_size,
                                         reply_bytes=reply, response_bytes=self._total, reply_cut=asm.text_full)
        return {"counted": counted, "estimated": estimated}

    def _request_record(self) -> tuple[Any, Any, bool]:
        """(parsed body or None, the body for the record, cut?). The record's copy is parsed JSON if the body
        is JSON, else text; redacted; fit to budget. The body is parsed once for both uses."""
        if not self.request_body:
            return None, None, False
        sentinel = object()
        parsed = loads_or_none(self.request_body, sentinel)
        if parsed is sentinel:
            raw = self.request_body[: self.budget * 4 + 16]
            value = self.redactor.value(raw.decode("utf-8", "replace"))
            cut = len(self.request_body) > self.budget
            return None, (_clip(value, self.budget) if cut else value), cut
        value, cut = fit_json(self.redactor.value(parsed), self.budget)
        return parsed, value, cut

    def _minimal(self, status: Any, duration_ms: Any, ttfb_ms: Any, proxy_error: Any, error: str) -> dict[str, Any]:
        try:
            query = self.redactor.query(self.query)
        except Exception:
            query = ""
        return {
            PREFIX + "timestamp": self.timestamp, PREFIX + "method": self.method, PREFIX + "path": self.path,
            PREFIX + "query": query, PREFIX + "upstream_url": self.upstream_url,
            PREFIX + "status": status if isinstance(status, int) else None,
            PREFIX + "duration_ms": duration_ms if isinstance(duration_ms, (int, float)) else None,
            PREFIX + "ttfb_ms": ttfb_ms if isinstance(ttfb_ms, (int, float)) else None,
            PREFIX + "protocol": self.protocol, PREFIX + "stream": False, PREFIX + "request": None,
            PREFIX + "response": None, PREFIX + "budget_exceeded": False, PREFIX + "tool_call_count": 0,
            PREFIX + "tool_calls": [], PREFIX + "tool_names": [], PREFIX + "tool_call_ids": [],
            PREFIX + "tool_call_nonstructured_count": 0, PREFIX + "tool_names_nonstructured": [],
            PREFIX + "tool_call_ids_nonstructured": [], PREFIX + "tool_result_count": 0, PREFIX + "tool_results": [],
            PREFIX + "usage": None, PREFIX + "tokens": None, PREFIX + "response_id": None, PREFIX + "text": None,
            PREFIX + "reasoning": None, PREFIX + "backend_tool_unsupported": False, PREFIX + "error": error,
            PREFIX + "proxy_error": proxy_error if isinstance(proxy_error, str) else None,
        }

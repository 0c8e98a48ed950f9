"""Property tests for the wire parsers: arbitrary bytes never raise, and the split never matters."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_samples import ollama_chat_stream, responses_stream, stable

from gripprobe_core.proxy.lines import LineSplitter
from gripprobe_core.proxy.ndjson import NDJSONDecoder, decode_ndjson
from gripprobe_core.proxy.observe import RECORD_KEYS, ExchangeObserver
from gripprobe_core.proxy.sse import SSEDecoder, decode_sse
from gripprobe_core.proxy.text_tools import find_text_tool_calls, scan_text_tool_calls
from gripprobe_core.proxy.tool_results import request_tool_results

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Byte soup that hits the interesting paths: field names, colons, every line end, JSON and junk.
TOKENS = st.sampled_from([
    b"data:", b"data: ", b"event: ", b"id: 1", b"retry: 5", b":", b"\n", b"\r", b"\r\n", b"\n\n", b"{", b"}",
    b'{"a": 1}', b"[DONE]", b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xa9", b" ", b"x", b'"tool_calls"',
    b'{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "n", '
    b'"arguments": "{}"}}]}}]}',
    b'{"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "k", '
    b'"name": "f", "arguments": ""}}',
    b'{"message": {"tool_calls": [{"function": {"name": "w", "arguments": {"p": 1}}}]}, "done": false}',
    b'{"error": "x does not support tools"}',
])
SOUP = st.one_of(st.binary(max_size=400), st.lists(TOKENS, max_size=60).map(b"".join))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:])]


def feed_all(decoder, pieces: list[bytes]) -> list:
    out = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out + decoder.close()


@SETTINGS
@given(SOUP, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_sse_decoder_never_raises_and_ignores_the_split(data, cuts):
    assert feed_all(SSEDecoder(), split(data, cuts)) == decode_sse(data)


@SETTINGS
@given(SOUP, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12), st.integers(1, 40))
def test_small_limits_are_split_independent_too(data, cuts, limit):
    whole = SSEDecoder(max_line=limit, max_event=limit)
    assert feed_all(SSEDecoder(max_line=limit, max_event=limit), split(data, cuts)) == whole.feed(data) + whole.close()
    lines = LineSplitter(max_line=limit)
    assert feed_all(LineSplitter(max_line=limit), split(data, cuts)) == lines.feed(data) + lines.close()


@SETTINGS
@given(SOUP, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_ndjson_decoder_never_raises_and_ignores_the_split(data, cuts):
    assert feed_all(NDJSONDecoder(), split(data, cuts)) == decode_ndjson(data)


@SETTINGS
@given(st.text(max_size=600))
def test_text_tool_call_scanner_never_raises(text):
    found = find_text_tool_calls(text)
    assert all(isinstance(n, str) and isinstance(a, str) for n, a in found)


TEXTY = st.lists(st.sampled_from([
    "<tool_call>", "</tool_call>", "<function=", "shell>", "</function>", "<parameter=", "x>", "</parameter>",
    '<invoke name="w">', "</invoke>", "<tool_use>", "</tool_use>", "```", "```json", "\n", "{", "}", "[", "]",
    '"name"', ": ", '"arguments"', '"shell"', ", ", "{}", "[TOOL_CALLS]", " ", "text", '"parameters"',
]), max_size=80).map("".join)


@SETTINGS
@given(TEXTY)
def test_text_tool_call_scanner_never_raises_on_tag_soup(text):
    for call in scan_text_tool_calls(text):
        assert 0 <= call.start <= len(text) and call.name


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                           st.sampled_from(["role", "tool_call_id", "content", "messages", "input", "type",
                                            "call_id", "output", "name", "tool_calls", "status", "x"]),
                           inner, max_size=5), max_leaves=30)


@SETTINGS
@given(JSONISH)
def test_request_tool_results_never_raise_on_odd_bodies(body):
    for result in request_tool_results(body):
        assert result.status in ("success", "error", "unknown")


@SETTINGS
@given(SOUP, st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
       st.sampled_from(["/v1/chat/completions", "/v1/responses", "/api/chat", "/api/generate", "/api/tags", "/x"]),
       st.binary(max_size=200), st.sampled_from([None, 200, 400, 500]), st.integers(0, 300))
def test_observer_never_raises_on_arbitrary_traffic(data, cuts, path, body, status, budget):
    obs = ExchangeObserver(method="POST", path=path, query="a=%zz&api_key=1", upstream_url="http://127.0.0.1:1",
                           request_headers={"Authorization": "Bearer 0123456789abcdef"}, request_body=body,
                           body_budget=budget)
    for piece in split(data, cuts):
        obs.feed(piece)
    record = obs.finish(status=status, response_headers={"Content-Type": "text/event-stream"}, duration_ms=1.0,
                        ttfb_ms=None, proxy_error=None)
    assert set(record) == set(RECORD_KEYS)
    assert "0123456789abcdef" not in json.dumps(record)
    assert record["x_gripprobe_tool_call_count"] == len(record["x_gripprobe_tool_calls"])


def record_of(path: str, raw: bytes, pieces: list[bytes]) -> dict:
    obs = ExchangeObserver(method="POST", path=path, query="", upstream_url="u", request_headers={},
                           request_body=b"{}", body_budget=2048, text_scan_limit=100)
    for piece in pieces:
        obs.feed(piece)
    return stable(obs.finish(status=200, response_headers={}, duration_ms=1.0, ttfb_ms=1.0, proxy_error=None))


RESPONSES_RAW = responses_stream(text="thinking out loud " * 40) + responses_stream(custom=True, response_id="r2")
OLLAMA_RAW = ollama_chat_stream(text="some words " * 60) * 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=100_000), max_size=20))
def test_observer_record_does_not_depend_on_the_split_even_past_the_budget(cuts):
    """With a 2 KiB budget and a 100-character text cap the lazy path (skipping plain lines) runs too."""
    for path, raw in (("/v1/responses", RESPONSES_RAW), ("/api/chat", OLLAMA_RAW)):
        whole = record_of(path, raw, [raw])
        assert whole["x_gripprobe_budget_exceeded"] is True and whole["x_gripprobe_tool_call_count"] >= 1
        assert record_of(path, raw, split(raw, cuts)) == whole

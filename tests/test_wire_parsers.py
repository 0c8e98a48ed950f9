"""Wire parsing for the recording proxy: SSE/NDJSON decoders, tool-call assembly for Chat Completions,
the Responses API and Ollama, tool results, usage, text tool calls, redaction and the body budget.

Chat Completions traffic comes from the real oracle server; Responses and Ollama streams are shaped
like the real servers' (see ``wire_samples``). Every stream is also fed in every two-piece split and
byte by byte: the record must not depend on how the network cut the bytes.
"""

from __future__ import annotations

import json

import pytest
from wire_samples import (
    CODEX_CMD_ARGS, CODEX_PATCH, OLLAMA_UNSUPPORTED, REF_TOOLS, observe, ollama_chat_json, ollama_chat_stream,
    ollama_generate_stream, ollama_request, oracle_chat, responses_json, responses_request, responses_stream,
    split_at, stable,
)

from gripprobe_core.proxy.lines import LineSplitter
from gripprobe_core.proxy.ndjson import Garbage, decode_ndjson, NDJSONDecoder
from gripprobe_core.proxy.observe import RECORD_KEYS, ExchangeObserver
from gripprobe_core.proxy.protocols import detect_protocol
from gripprobe_core.proxy.redact import REDACTED, Redactor, secrets_from_headers
from gripprobe_core.proxy.sse import SSEDecoder, SSEEvent, decode_sse
from gripprobe_core.proxy.text_tools import find_text_tool_calls, scan_text_tool_calls
from gripprobe_core.proxy.tool_results import classify_output, request_tool_results

P = "x_gripprobe_"


def every_split(data: bytes, decoder_factory):
    """Results of feeding ``data`` in every 2-piece split, and byte by byte."""
    outs = []
    for cut in range(len(data) + 1):
        dec = decoder_factory()
        outs.append(dec.feed(data[:cut]) + dec.feed(data[cut:]) + dec.close())
    dec = decoder_factory()
    got = []
    for i in range(len(data)):
        got += dec.feed(data[i:i + 1])
    outs.append(got + dec.close())
    return outs


# ----------------------------------------------------------------------------------- SSE decoder

SSE_TRICKY = (
    b"\xef\xbb\xbf: a comment first\r\n"
    b"event: response.created\r\n"
    b"data: {\"a\": 1}\r\n\r\n"
    b"data: line one\n"
    b"data:line two\n"
    b"id: 7\nretry: 100\nunknown: x\n\n"
    b"event: named\rdata: cr only\r\r"
    b"data\n\n"
    b":keepalive\n\n"
    b"data: \xff\xfe not utf-8\n\n"
    b"event: orphan\n\n"
    b"data: [DONE]\n\n"
    b"data: trailing without blank line"
)
SSE_EXPECTED = [
    SSEEvent('{"a": 1}', "response.created"),
    SSEEvent("line one\nline two"),
    SSEEvent("cr only", "named"),
    SSEEvent(""),
    SSEEvent("\ufffd\ufffd not utf-8"),
    SSEEvent("[DONE]"),
    SSEEvent("trailing without blank line"),
]


def test_sse_decoder_follows_the_event_stream_rules():
    assert decode_sse(SSE_TRICKY) == SSE_EXPECTED


def test_sse_decoder_result_does_not_depend_on_the_split():
    for got in every_split(SSE_TRICKY, SSEDecoder):
        assert got == SSE_EXPECTED


def test_sse_decoder_on_a_real_oracle_stream_in_every_split():
    _, status, content_type, raw = oracle_chat()
    assert status == 200 and content_type.startswith("text/event-stream")
    whole = decode_sse(raw)
    assert whole[-1] == SSEEvent("[DONE]") and all(json.loads(e.data) for e in whole[:-1])
    for got in every_split(raw, SSEDecoder):
        assert got == whole


def test_sse_crlf_split_between_cr_and_lf_is_one_line_end():
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    assert dec.feed(b"\n\r") == [SSEEvent("x")]  # "\r\n" ends the data line, the lone "\r" the event
    assert dec.feed(b"\ndata: y\n\n") == [SSEEvent("y")]


def test_sse_event_data_is_capped_and_overlong_lines_dropped():
    dec = SSEDecoder(max_line=64, max_event=10)
    got = dec.feed(b"data: 0123456789abcdef\n\ndata: " + b"x" * 100 + b"\ndata: ok\n\n") + dec.close()
    assert got == [SSEEvent("0123456789"), SSEEvent("ok")]
    assert dec.truncated == 1 and dec.overflow == 1


def test_line_splitter_drops_an_overlong_line_whatever_the_split():
    data = b"short\n" + b"y" * 50 + b"\nnext\nlast"
    for cut in range(len(data) + 1):
        splitter = LineSplitter(max_line=20)
        lines = splitter.feed(data[:cut]) + splitter.feed(data[cut:]) + splitter.close()
        assert lines == [b"short", b"next", b"last"], cut
        assert splitter.overflow == 1


# -------------------------------------------------------------------------------- NDJSON decoder

def test_ndjson_decoder_parses_lines_keeps_garbage_skips_blanks_in_every_split():
    data = ollama_chat_stream() + b"\r\n\nnot json\n{\"tail\": true}"
    expected = [json.loads(line) for line in ollama_chat_stream().splitlines()] + [Garbage("not json"), {"tail": True}]
    assert decode_ndjson(data) == expected
    for got in every_split(data, NDJSONDecoder):
        assert got == expected


# ------------------------------------------------------------------------------ protocol detection

@pytest.mark.parametrize("method,path,body,want", [
    ("POST", "/v1/chat/completions", None, "chat_completions"),
    ("POST", "/chat/completions", None, "chat_completions"),
    ("POST", "/openai/v1/chat/completions/", None, "chat_completions"),
    ("POST", "/v1/responses", None, "responses"),
    ("POST", "/api/chat", None, "ollama_chat"),
    ("POST", "/api/generate", None, "ollama_generate"),
    ("GET", "/v1/models", None, "models"),
    ("GET", "/api/tags", None, "models"),
    ("POST", "/api/show", None, "models"),
    ("GET", "/api/version", None, "models"),
    ("GET", "/api/ps", None, "models"),
    ("POST", "/custom", {"model": "m", "messages": []}, "chat_completions"),
    ("POST", "/custom", {"model": "m", "input": "hi"}, "responses"),
    ("POST", "/custom", {"model": "m", "prompt": "hi"}, "ollama_generate"),
    ("GET", "/healthz", None, "other"),
])
def test_protocol_detection(method, path, body, want):
    assert detect_protocol(method, path, body) == want


# ------------------------------------------------------------------------------- Chat Completions

def test_chat_completions_sse_from_the_oracle_assembles_the_call_in_every_split():
    body, status, content_type, raw = oracle_chat()
    whole = observe(body, [raw], content_type=content_type)
    assert whole[P + "protocol"] == "chat_completions" and whole[P + "stream"] is True
    assert whole[P + "tool_call_count"] == 1
    call = whole[P + "tool_calls"][0]
    assert call["name"] == "write" and call["kind"] == "function" and call["id"].startswith("call_")
    assert json.loads(call["arguments"]) == {"path": "hello.txt", "content": "hello world\n"}
    assert call["arguments_json_valid"] is True and call["arguments_truncated"] is False
    assert whole[P + "tool_names"] == ["write"] and whole[P + "tool_call_ids"] == [call["id"]]
    assert whole[P + "usage"]["total_tokens"] == whole[P + "usage"]["prompt_tokens"] + whole[P + "usage"]["completion_tokens"]
    assert whole[P + "response_id"] == "chatcmpl-oracle-1"
    assert whole[P + "tool_call_nonstructured_count"] == 0 and whole[P + "tool_result_count"] == 0
    assert whole[P + "response"][-1] == {"data": "[DONE]"} and whole[P + "budget_exceeded"] is False
    assert set(whole) == set(RECORD_KEYS)
    for cut in range(len(raw) + 1):
        assert stable(observe(body, split_at(raw, cut), content_type=content_type)) == stable(whole), cut
    bytewise = observe(body, [raw[i:i + 1] for i in range(len(raw))], content_type=content_type)
    assert stable(bytewise) == stable(whole)


def test_chat_completions_json_from_the_oracle():
    body, status, content_type, raw = oracle_chat(stream=False)
    rec = observe(body, split_at(raw, 10, 50), content_type=content_type)
    assert rec[P + "stream"] is False and isinstance(rec[P + "response"], dict)
    assert [(c["name"], json.loads(c["arguments"])["path"]) for c in rec[P + "tool_calls"]] == [("write", "hello.txt")]
    assert rec[P + "usage"] is not None and rec[P + "response_id"] == "chatcmpl-oracle-1"


def chunk(delta, **extra):
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}


def sse_data(objs) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs) + b"data: [DONE]\n\n"


def test_chat_parallel_calls_pieces_and_a_server_that_reuses_index_zero():
    parallel = sse_data([
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{\"comm"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"a\"}"}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "and\": \"ls\"}"}}]}),
        {"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": [],
         "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}},
    ])
    rec = observe(b"{}", [parallel])
    assert [(c["id"], c["name"], c["arguments"]) for c in rec[P + "tool_calls"]] == [
        ("c1", "read", '{"path": "a"}'), ("c2", "shell", '{"command": "ls"}')]
    assert rec[P + "usage"] == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    reused = sse_data([
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "write", "arguments": "{}"}}]}),
    ])
    assert observe(b"{}", [reused])[P + "tool_names"] == ["read", "write"]


def test_chat_malformed_and_long_arguments_are_flagged_not_guessed():
    long_args = json.dumps({"path": "big.txt", "content": "z" * 10_000})
    data = sse_data([
        chunk({"tool_calls": [{"index": 0, "id": "bad", "function": {"name": "shell", "arguments": "{\"command\": \"ls"}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "long", "function": {"name": "write", "arguments": long_args}}]}),
    ])
    bad, long_ = observe(b"{}", [data])[P + "tool_calls"]
    assert bad["arguments_json_valid"] is False and bad["arguments_truncated"] is False
    assert long_["arguments_json_valid"] is True and long_["arguments_truncated"] is True
    assert len(long_["arguments"]) < 4200


# ---------------------------------------------------------------------------------- Responses API

def test_responses_function_call_stream_in_every_split():
    raw = responses_stream(text="I will run it.")
    body = responses_request()
    whole = observe(body, [raw], path="/v1/responses")
    assert whole[P + "protocol"] == "responses" and whole[P + "stream"] is True
    assert whole[P + "tool_calls"] == [{
        "id": "call_a3b8c7985e", "name": "exec_command", "arguments": CODEX_CMD_ARGS, "kind": "function",
        "arguments_truncated": False, "arguments_json_valid": True}]
    # Responses reports input_tokens_details.cached_tokens: kept (0 here), as for Chat Completions
    assert whole[P + "usage"] == {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                                  "cached_tokens": 0}
    assert whole[P + "response_id"] == "resp_55c7761f31f94cd9"
    assert whole[P + "text"] == "I will run it."
    assert whole[P + "response"][0]["event"] == "response.created"
    for cut in range(0, len(raw) + 1, 7):
        assert stable(observe(body, split_at(raw, cut, cut + 300), path="/v1/responses")) == stable(whole), cut


def test_responses_custom_tool_call_apply_patch():
    rec = observe(responses_request(), split_at(responses_stream(custom=True), 333), path="/v1/responses")
    assert [(c["id"], c["name"], c["kind"], c["arguments"], c["arguments_json_valid"]) for c in rec[P + "tool_calls"]] \
        == [("call_19f644bbda", "apply_patch", "custom", CODEX_PATCH, None)]


def test_responses_calls_only_in_response_completed_are_still_seen():
    final = {"type": "response.completed", "response": {"id": "resp_z", "object": "response", "output": [
        {"id": "fc_9", "type": "function_call", "call_id": "call_9", "name": "exec_command", "arguments": "{}"}],
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}}
    rec = observe(b"{}", [b"event: response.completed\ndata: " + json.dumps(final).encode() + b"\n\n"],
                  path="/v1/responses")
    assert rec[P + "tool_call_ids"] == ["call_9"] and rec[P + "response_id"] == "resp_z"


def test_responses_non_streamed_json():
    rec = observe(responses_request(stream=False), [responses_json()], path="/v1/responses",
                  content_type="application/json")
    assert rec[P + "stream"] is False and rec[P + "response"]["id"] == "resp_nonstream"
    assert rec[P + "tool_names"] == ["exec_command"] and rec[P + "text"] == "Running it."
    assert rec[P + "usage"]["prompt_tokens"] == 100


def test_responses_tool_results_from_the_request_with_their_status():
    rec = observe(responses_request(results=True), [responses_stream()], path="/v1/responses")
    assert rec[P + "tool_result_count"] == 3
    assert [(r["tool_call_id"], r["name"], r["status"], r["exit_code"]) for r in rec[P + "tool_results"]] == [
        ("call_a3b8c7985e", "exec_command", "success", 0),
        ("call_19f644bbda", "apply_patch", "success", 0),
        ("call_ec528305f9", "exec_command", "error", None)]


# ------------------------------------------------------------------------------------------ Ollama

def test_ollama_chat_ndjson_calls_without_ids_usage_in_every_split():
    raw = ollama_chat_stream(text="Let me do that.")
    body = ollama_request()
    whole = observe(body, [raw], path="/api/chat", content_type="application/x-ndjson")
    assert whole[P + "protocol"] == "ollama_chat" and whole[P + "stream"] is True
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in whole[P + "tool_calls"]] == [
        (None, "write", {"path": "hello.txt", "content": "hello world\n"}),
        (None, "shell", {"command": "cat hello.txt"})]
    assert whole[P + "usage"] == {"prompt_tokens": 122, "completion_tokens": 33, "total_tokens": 155}
    assert whole[P + "text"] == "Let me do that." and whole[P + "response_id"] is None
    assert isinstance(whole[P + "response"], list) and whole[P + "response"][-1]["done"] is True
    for cut in range(len(raw) + 1):
        assert stable(observe(body, split_at(raw, cut), path="/api/chat",
                              content_type="application/x-ndjson")) == stable(whole), cut


def test_ollama_chat_with_ids_and_the_single_json_reply():
    rec = observe(ollama_request(), [ollama_chat_stream(with_ids=True)], path="/api/chat")
    assert rec[P + "tool_call_ids"] == ["call_ol0", "call_ol1"]
    one = observe(ollama_request(stream=False), [ollama_chat_json()], path="/api/chat", content_type="application/json")
    assert one[P + "stream"] is False and isinstance(one[P + "response"], dict)
    assert one[P + "tool_names"] == ["read"] and one[P + "usage"]["completion_tokens"] == 33


def test_ollama_generate_text_and_usage_no_tools():
    rec = observe(json.dumps({"model": "qwen3:8b", "prompt": "why?"}).encode(), [ollama_generate_stream()],
                  path="/api/generate", content_type="application/x-ndjson")
    assert rec[P + "protocol"] == "ollama_generate" and rec[P + "text"] == "The sky is blue."
    assert rec[P + "tool_call_count"] == 0 and rec[P + "usage"]["prompt_tokens"] == 122


def test_ollama_tool_results_by_tool_name():
    rec = observe(ollama_request(results=True), [ollama_chat_stream()], path="/api/chat")
    assert rec[P + "tool_results"] == [{"tool_call_id": None, "name": "write", "status": "unknown", "exit_code": None,
                                        "output": "wrote 12 bytes to hello.txt"}]


def test_ollama_tools_unsupported_is_detected_from_the_error_body():
    rec = observe(ollama_request(), [OLLAMA_UNSUPPORTED], path="/api/chat", status=400,
                  content_type="application/json; charset=utf-8")
    assert rec[P + "backend_tool_unsupported"] is True and "does not support tools" in rec[P + "error"]
    compat = json.dumps({"error": {"message": "registry.ollama.ai/library/gemma2:latest does not support tools",
                                   "type": "api_error", "param": None, "code": None}}).encode()
    assert observe(b"{}", [compat], status=400, content_type="application/json")[P + "backend_tool_unsupported"]
    server_error = json.dumps({"error": {"message": "boom", "type": "server_error", "code": 500}}).encode()
    rec = observe(b"{}", [server_error], status=500, content_type="application/json")
    assert rec[P + "backend_tool_unsupported"] is False and rec[P + "error"] == "boom"
    plain = observe(b"{}", [b"model does not support tools"], status=400, content_type="text/plain")
    assert plain[P + "backend_tool_unsupported"] is True and plain[P + "response"] == "model does not support tools"


# ---------------------------------------------------------------------------------- tool results

def test_chat_tool_results_are_named_from_the_conversation_and_classified():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "write", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "exit code: 1\ncat: missing: No such file"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "wrote 5 bytes"}]},
        {"role": "tool", "tool_call_id": "c3", "content": "error: 'x' does not exist"},
    ]
    results = request_tool_results({"messages": messages})
    assert [(r.tool_call_id, r.name, r.status, r.exit_code, r.output[:5]) for r in results] == [
        ("c1", "shell", "error", 1, "exit "), ("c2", "write", "unknown", None, "wrote"), ("c3", "read", "error", None, "error")]


@pytest.mark.parametrize("output,status,want", [
    ("exit code: 0\nok", None, ("success", 0)),
    ("exit code: 2\n", None, ("error", 2)),
    ("Process exited with code 127\n", None, ("error", 127)),
    ('{"exit_code": 0, "stdout": ""}', None, ("success", 0)),
    ("Error: file not found", None, ("error", None)),
    ("Traceback (most recent call last):\n  File", None, ("error", None)),
    ("timed out after 30 s", None, ("error", None)),
    ('{"error": "denied"}', None, ("error", None)),
    ("all good", "failed", ("error", None)),
    ("all good", "success", ("success", None)),
    ("all good", "completed", ("unknown", None)),  # an item status, not the tool's outcome
    ("errors: 0 found", None, ("unknown", None)),
    ("hello world\n", None, ("unknown", None)),
])
def test_tool_result_status_rules(output, status, want):
    assert classify_output(output, status) == want


def test_results_are_counted_per_request_and_truncated():
    big = "x" * 10_000
    body = json.dumps({"messages": [{"role": "tool", "tool_call_id": f"c{i}", "content": big} for i in range(3)]}).encode()
    rec = observe(body, [sse_data([chunk({"content": "ok"})])])
    assert rec[P + "tool_result_count"] == 3
    assert all(len(r["output"]) < 2100 for r in rec[P + "tool_results"])


# ------------------------------------------------------------------------- nonstructured tool calls

POSITIVE_TEXT_CALLS = [
    ('<tool_call>\n{"name": "write", "arguments": {"path": "a.txt", "content": "hi"}}\n</tool_call>',
     [("write", '{"path": "a.txt", "content": "hi"}')]),
    ('Sure.<tool_call>{"name": "shell", "arguments": "{\\"command\\": \\"ls\\"}"}',  # unclosed, string arguments
     [("shell", '{"command": "ls"}')]),
    ('<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>{"name": "b", "arguments": {}}</tool_call>',
     [("a", "{}"), ("b", "{}")]),
    ("<tool_call>\n<function=write_file>\n<parameter=path>\nhello.txt\n</parameter>\n<parameter=content>\nhi\n"
     "</parameter>\n</function>\n</tool_call>", [("write_file", '{"path": "hello.txt", "content": "hi"}')]),
    ('<function=shell>{"command": "pwd"}</function>', [("shell", '{"command": "pwd"}')]),
    ('Calling:\n```json\n{"name": "read", "parameters": {"path": "x.md"}}\n```\n', [("read", '{"path": "x.md"}')]),
    ('```\n[{"name": "read", "arguments": {"path": "a"}}, {"name": "read", "arguments": {"path": "b"}}]\n```',
     [("read", '{"path": "a"}'), ("read", '{"path": "b"}')]),
    ('{"name": "shell", "arguments": {"command": "ls"}}', [("shell", '{"command": "ls"}')]),
    ('I will list files.\n  {"type": "function", "function": {"name": "shell", "arguments": "{}"}}\n',
     [("shell", "{}")]),
    ('<function_calls>\n<invoke name="Write">\n<parameter name="file_path">a.txt</parameter>\n'
     '<parameter name="content">hi</parameter>\n</invoke>\n</function_calls>',
     [("Write", '{"file_path": "a.txt", "content": "hi"}')]),
    ('<tool_use>{"name": "read", "input": {"path": "x"}}</tool_use>', [("read", '{"path": "x"}')]),
    ("<tool_use><name>shell</name><arguments>{\"command\": \"ls\"}</arguments></tool_use>",
     [("shell", '{"command": "ls"}')]),
    ('[TOOL_CALLS][{"name": "shell", "arguments": {"command": "ls"}}]', [("shell", '{"command": "ls"}')]),
    # gptme's own call lines, as a model copied them from gptme's tool examples (issue 22)
    ('I will create the file.\n@save: {"path": "hello.txt", "content": "hi"}', [("save", '{"path": "hello.txt", "content": "hi"}')]),
    ('@save: {\n  "path": "hello.py",\n  "content": "print(1)"\n}\n@complete: {}',
     [("save", '{"path": "hello.py", "content": "print(1)"}'), ("complete", "{}")]),
    ('Done.\n@shell(call_a1): {"command": "pwd"}', [("shell", '{"command": "pwd"}')]),
]

NEGATIVE_TEXT = [
    "I created hello.txt with the content hello world.",
    "To call a tool, wrap it in <tool_call> tags.",
    '```json\n{"name": "my-package", "version": "1.0.0", "scripts": {"test": "pytest"}}\n```',
    '```python\ncall = {"name": "shell", "arguments": {"command": "ls"}}\n```',
    'The payload is {"name": "shell", "arguments": {}} as you can see.',
    'x = {"name": "shell", "arguments": {}}',
    '{"name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {}}}',
    '```json\n{"type": "function", "function": {"name": "read", "description": "d", "parameters": '
    '{"type": "object", "properties": {"path": {"type": "string"}}}}}\n```',
    "```save hello.txt\nhello world\n```",
    '<tool-use>\n<save args="hello.txt">\nhello world\n</save>\n</tool-use>',
    '```json\n[{"name": "a", "arguments": {}}, {"id": 3}]\n```',
    "function=shell is how it is called",
    "",
    "@save: hello.txt please",
    'Write to me @john: {"path": "x"} or not',
    '@save: {"path": "a"} and then more prose',
    '```\n@save: {"path": "a", "content": "b"}\n```',
    "@save: {not json}",
]


@pytest.mark.parametrize("text,want", POSITIVE_TEXT_CALLS)
def test_text_tool_calls_are_found(text, want):
    assert find_text_tool_calls(text) == want


@pytest.mark.parametrize("text", NEGATIVE_TEXT)
def test_prose_and_code_are_not_tool_calls(text):
    assert find_text_tool_calls(text) == []


def test_gptme_call_lines_keep_their_id_and_syntax():
    calls = scan_text_tool_calls('@save(call_9): {"path": "a", "content": "b"}\n@complete: {}')
    assert [(c.name, c.id, c.syntax) for c in calls] == [("save", "call_9", "gptme_at"), ("complete", None, "gptme_at")]


def test_text_tool_call_ids_are_kept_or_synthesized_in_the_record():
    text = ('I will write the file.\n<tool_call>{"name": "write", "arguments": {"path": "a"}}</tool_call>\n'
            '```json\n{"id": "call_77", "name": "shell", "arguments": {"command": "ls"}}\n```')
    pieces = [text[i:i + 5] for i in range(0, len(text), 5)]
    rec = observe(b"{}", [sse_data([chunk({"content": p}) for p in pieces])])
    assert rec[P + "tool_call_count"] == 0
    assert rec[P + "tool_call_nonstructured_count"] == 2
    assert rec[P + "tool_names_nonstructured"] == ["write", "shell"]
    assert rec[P + "tool_call_ids_nonstructured"] == ["text-1", "call_77"]
    assert [c.syntax for c in scan_text_tool_calls(text)] == ["tool_call_tag", "json_fence"]


# ------------------------------------------------------------------------------------ redaction

CANARY = "sk-canary0123456789abcdefXYZ"
CANARY2 = "zz-header-only-secret-42"


def test_no_credential_reaches_the_record():
    body = json.dumps({
        "model": "m", "api_key": "plain-body-secret-1", "metadata": {"client_secret": {"v": "nested-secret-2"}},
        "max_tokens": 512, "messages": [
            {"role": "user", "content": f"my key is {CANARY} and header {CANARY2}"},
            {"role": "tool", "tool_call_id": "c1", "content": f"Authorization: Bearer {CANARY2}"}]}).encode()
    reply = sse_data([chunk({"content": f"Your key {CANARY} is safe"}),
                      chunk({"tool_calls": [{"index": 0, "id": "c9", "function": {
                          "name": "shell", "arguments": json.dumps({"command": f"curl -H 'x-api-key: {CANARY2}'"})}}]})])
    rec = observe(body, split_at(reply, 17), query=f"api_key={CANARY}&key=k-secret-3&stream=1",
                  headers={"Authorization": f"Bearer {CANARY2}", "x-api-key": CANARY2, "Cookie": "session=cookie-secret-4"})
    text = json.dumps(rec)
    for secret in (CANARY, CANARY2, "plain-body-secret-1", "nested-secret-2", "k-secret-3"):
        assert secret not in text, secret
    assert REDACTED in rec[P + "text"] and rec[P + "request"]["max_tokens"] == 512
    assert rec[P + "request"]["api_key"] == REDACTED
    assert "stream=1" in rec[P + "query"] and rec[P + "tool_result_count"] == 1


def test_redactor_rules():
    red = Redactor(secrets_from_headers({"Authorization": "Bearer abcdefgh12345678", "Accept": "text/plain"}))
    assert red.text("token abcdefgh12345678 here") == f"token {REDACTED} here"
    assert red.text("use sk-proj-ABCDEFGHIJKLMNOPQRST now") == f"use {REDACTED} now"
    assert red.text("task-manager and sk-learn stay") == "task-manager and sk-learn stay"
    assert red.value({"usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1}}}) == \
        {"usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1}}}
    assert red.value({"password": "p", "Token": ["a", 1]}) == {"password": REDACTED, "Token": [REDACTED, 1]}


# --------------------------------------------------------------------------------------- budget

def test_a_ten_megabyte_stream_exceeds_the_budget_and_still_counts_right():
    content = chunk({"content": "lorem ipsum dolor sit amet " * 4})
    line = b"data: " + json.dumps(content).encode() + b"\n\n"
    filler = line * (10 * 1024 * 1024 // len(line) + 1)
    tail = sse_data([
        chunk({"tool_calls": [{"index": 0, "id": "late", "function": {"name": "write", "arguments": "{\"path\": \"z\"}"}}]}),
        {"id": "chatcmpl-x", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
    ])
    raw = filler + tail
    obs = ExchangeObserver(method="POST", path="/v1/chat/completions", query="", upstream_url="u",
                           request_headers={}, request_body=b'{"model": "m", "stream": true}', body_budget=64 * 1024)
    for i in range(0, len(raw), 16 * 1024):
        obs.feed(raw[i:i + 16 * 1024])
    rec = obs.finish(status=200, response_headers={}, duration_ms=1.0, ttfb_ms=0.1, proxy_error=None)
    assert rec[P + "budget_exceeded"] is True
    assert rec[P + "tool_call_ids"] == ["late"] and rec[P + "usage"]["total_tokens"] == 3
    assert len(json.dumps(rec[P + "response"])) < 80 * 1024 and len(rec[P + "text"]) < 4200
    assert len(json.dumps(rec)) < 200 * 1024


def test_a_big_request_is_cut_to_the_budget_but_its_results_are_all_counted():
    messages = [{"role": "tool", "tool_call_id": f"c{i}", "content": "exit code: 0\n" + "y" * 5000} for i in range(100)]
    body = json.dumps({"model": "m", "messages": messages}).encode()
    rec = observe(body, [sse_data([chunk({"content": "ok"})])], budget=32 * 1024)
    assert rec[P + "budget_exceeded"] is True and rec[P + "tool_result_count"] == 100
    assert len(json.dumps(rec[P + "request"])) <= 33 * 1024


# ------------------------------------------------------------------------------- odd exchanges

def test_non_model_routes_and_odd_bodies_never_raise():
    tags = observe(b"", [b'{"models": [{"name": "qwen3:8b"}]}'], method="GET", path="/api/tags",
                   content_type="application/json")
    assert tags[P + "protocol"] == "models" and tags[P + "tool_call_count"] == 0 and tags[P + "request"] is None
    html = observe(b"not json", [b"<html>bad gateway</html>"], status=502, content_type="text/html")
    assert html[P + "response"] == "<html>bad gateway</html>" and html[P + "request"] == "not json"
    pretty = json.dumps(json.loads(responses_json()), indent=2).encode()
    assert observe(b"{}", [pretty], path="/v1/responses", content_type="application/json")[P + "tool_names"] == \
        ["exec_command"]
    empty = observe(b"{}", [], status=None, proxy_error="proxy_connect_error")
    assert empty[P + "proxy_error"] == "proxy_connect_error" and empty[P + "response"] is None
    obs = ExchangeObserver(method="POST", path="/v1/chat/completions", query="", upstream_url="u",
                           request_headers={}, request_body=b"{")
    obs.feed(b"data: {broken\n\n\x00\xff")
    rec = obs.finish(status=200, response_headers=None, duration_ms=float("nan"), ttfb_ms=None,  # type: ignore[arg-type]
                     proxy_error=None)
    assert set(rec) == set(RECORD_KEYS)
    json.dumps(rec)


def test_tools_request_shape_is_recorded_for_the_reference_agent():
    body = json.dumps({"model": "m", "tools": REF_TOOLS, "messages": [{"role": "user", "content": "hi"}]}).encode()
    rec = observe(body, [sse_data([chunk({"content": "hello"})])])
    assert [t["function"]["name"] for t in rec[P + "request"]["tools"]] == ["shell", "read", "write", "edit"]


PATHOLOGICAL_TEXTS = [
    '<invoke name="x">' * 15000, '<function=x>' * 20000, '<tool_call>' * 20000, '<tool_use>' * 20000,
    '<invoke name="x">' + '<parameter name="a">' * 10000, '<function=x>' + '<parameter=a>' * 20000,
    '{"name": ' * 30000, '{"name": "a", "arguments": {}}\n' * 8000, "```" + " " * 200000 + "x", "```\n" * 50000,
    '```json\n{"name": "a", "arguments": {}}\n```\n' * 5000,
]


def test_pathological_texts_scan_in_linear_time():
    """Each of these took 30 s or more with naive patterns; all of them together must stay quick."""
    import time

    started = time.monotonic()
    for text in PATHOLOGICAL_TEXTS:
        assert len(scan_text_tool_calls(text)) <= 100
    assert time.monotonic() - started < 5

"""The Anthropic Messages wire (``/v1/messages``), everywhere the other three are: the oracle serves it
(JSON and SSE, every profile, errors in Anthropic's shape, ``count_tokens``), the recording proxy reads
it at tier A (calls, text, usage with the prompt cache, tool results from the request, in every split of
the bytes), and the proxy's rules hold for it (the model pin, the token budget, redaction). Real oracle,
real proxy, real client on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import OracleServer
from gripprobe_core.oracle.anthropic_api import parse_messages_request
from gripprobe_core.oracle.conversation import RequestError
from gripprobe_core.proxy import read_records
from gripprobe_core.proxy.events import records_to_events
from gripprobe_core.proxy.protocols import detect_protocol
from gripprobe_core.testing import read_sse_events
from proxy_helpers import proxied, run
from wire_samples import observe, split_at, stable

P = "x_gripprobe_"
S = {"type": "string"}
#: Claude Code's own tools, as it offers them (name, input_schema), cut to what the oracle drives.
CLAUDE_TOOLS = [
    {"name": "Bash", "description": "Run a shell command", "input_schema": {
        "type": "object", "properties": {"command": S, "description": S}, "required": ["command"]}},
    {"name": "Write", "description": "Write a file", "input_schema": {
        "type": "object", "properties": {"file_path": S, "content": S}, "required": ["file_path", "content"]}},
    {"name": "Read", "description": "Read a file", "input_schema": {
        "type": "object", "properties": {"file_path": S}, "required": ["file_path"]}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 1},  # a server tool: never offered
]
ACTIONS = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "cat hello.txt"},
])
HEADERS = {"x-api-key": "sk-ant-gripprobe-secret-0123456789", "anthropic-version": "2023-06-01"}


def body_of(model: str = "perfect", *, stream: bool = True, messages: list[dict] | None = None) -> dict[str, Any]:
    return {"model": model, "max_tokens": 4096, "stream": stream, "tools": CLAUDE_TOOLS,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": messages or [{"role": "user", "content": [{"type": "text", "text": "create hello.txt"}]}]}


def sse_message(raw: bytes) -> dict[str, Any]:
    """A streamed reply folded into the message it stands for (a naive client, to drive the loop)."""
    msg: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for frame in raw.decode().split("\n\n"):
        data = next((ln[6:] for ln in frame.splitlines() if ln.startswith("data: ")), None)
        if data is None:
            continue
        ev = json.loads(data)
        if ev["type"] == "message_start":
            msg = ev["message"]
        elif ev["type"] == "content_block_start":
            blocks[ev["index"]] = dict(ev["content_block"])
        elif ev["type"] == "content_block_delta" and ev["delta"]["type"] == "text_delta":
            blocks[ev["index"]]["text"] += ev["delta"]["text"]
        elif ev["type"] == "content_block_delta" and ev["delta"]["type"] == "input_json_delta":
            partial[ev["index"]] = partial.get(ev["index"], "") + ev["delta"]["partial_json"]
        elif ev["type"] == "message_delta":
            msg["stop_reason"] = ev["delta"]["stop_reason"]
            msg["usage"] = {**msg["usage"], **ev["usage"]}
    for i, text in partial.items():
        blocks[i]["input"] = json.loads(text)
    msg["content"] = [blocks[i] for i in sorted(blocks)]
    return msg


async def _loop(base_url: str, model: str = "perfect", *, stream: bool = True, path: str = "/v1/messages",
                limit: int = 6) -> list[tuple[bytes, int, str, bytes]]:
    """The tool loop an agent runs over /v1/messages: call → tool_result → call → tool_result → answer."""
    messages: list[dict[str, Any]] = body_of()["messages"]
    out = []
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for _ in range(limit):
            data = json.dumps(body_of(model, stream=stream, messages=messages)).encode()
            async with s.post(base_url + path, data=data, headers={**HEADERS, "Content-Type": "application/json"}) as r:
                raw = await r.read()
                out.append((data, r.status, r.headers.get("Content-Type", ""), raw))
            if r.status != 200:
                break
            msg = sse_message(raw) if stream else json.loads(raw)
            uses = [b for b in msg["content"] if b["type"] == "tool_use"]
            if not uses:
                break
            messages = messages + [{"role": "assistant", "content": msg["content"]}, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u["id"],
                 "content": [{"type": "text", "text": "hello world" if u["name"] == "Bash" else "File created"}]}
                for u in uses] + [{"type": "text", "text": "<system-reminder>keep going</system-reminder>"}]}]
    return out


# ------------------------------------------------------------------------------------- the oracle

def test_the_oracle_runs_a_whole_tool_loop_over_messages_streamed_and_not() -> None:
    async def main(stream: bool):
        async with OracleServer(ACTIONS) as oracle:
            exchanges = await _loop(oracle.base_url, stream=stream)
        return exchanges, oracle

    for stream in (True, False):
        exchanges, oracle = run(main(stream))
        assert [s for _, s, _, _ in exchanges] == [200, 200, 200]
        truth = oracle.ground_truth
        assert [(t["name"], t["protocol"], t["structured"]) for t in truth] == [
            ("Write", "anthropic_messages", True), ("Bash", "anthropic_messages", True)]
        assert truth[0]["arguments"] == {"file_path": "hello.txt", "content": "hello world\n"}
        assert truth[1]["arguments"]["command"] == "cat hello.txt"
        replies = [sse_message(raw) if stream else json.loads(raw) for _, _, _, raw in exchanges]
        assert [r["stop_reason"] for r in replies] == ["tool_use", "tool_use", "end_turn"]
        assert [b["id"] for r in replies for b in r["content"] if b["type"] == "tool_use"] == \
            [t["tool_call_id"] for t in truth]
        assert all(r["type"] == "message" and r["role"] == "assistant" for r in replies)
        # a prefix cache as Anthropic reports one: the conversation before the last message was read from it
        usage = replies[-1]["usage"]
        assert usage["cache_read_input_tokens"] > 0 and usage["input_tokens"] > 0
        assert usage["cache_creation_input_tokens"] == 0 and usage["output_tokens"] > 0
        assert replies[0]["usage"]["cache_read_input_tokens"] == 0
        assert [e["protocol"] for e in oracle.request_log] == ["anthropic_messages"] * 3
        assert all(e["authorized"] for e in oracle.request_log)  # x-api-key counts as credentials


def test_the_stream_is_the_real_event_sequence() -> None:
    async def main():
        async with OracleServer(ACTIONS) as oracle, aiohttp.ClientSession() as s:
            events = await read_sse_events(await s.post(oracle.base_url + "/v1/messages", json=body_of()))
            lazy = await read_sse_events(await s.post(oracle.base_url + "/v1/messages", json=body_of("lazy")))
        return events, lazy

    events, lazy = run(main())
    names = [n for n, _ in events]
    deltas = names.count("content_block_delta")
    assert deltas >= 2 and names == ["message_start", "ping", "content_block_start", *["content_block_delta"] * deltas,
                                     "content_block_stop", "message_delta", "message_stop"]
    assert all(n == d["type"] for n, d in events)
    start = events[2][1]["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Write" and start["input"] == {}
    assert all(d["delta"]["type"] == "input_json_delta" for n, d in events if n == "content_block_delta")
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert [n for n, _ in lazy][2:4] == ["content_block_start", "content_block_delta"]
    assert lazy[2][1]["content_block"] == {"type": "text", "text": ""}
    assert lazy[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_requests_are_read_as_one_conversation() -> None:
    req = parse_messages_request({
        "model": "claude-x", "system": "sys", "stream": True, "tools": CLAUDE_TOOLS,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                              {"type": "text", "text": "on it"},
                                              {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                          "content": "no such dir"},
                                         {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        ]})
    assert [t.name for t in req.tools] == ["Bash", "Write", "Read"]  # the server tool is not offered
    assert req.messages == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "go"},
        {"role": "assistant", "content": "on it", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "Error: no such dir\n<system-reminder>x</system-reminder>"}]
    assert req.tool_call_turns() == 1  # the reminder beside a result is not a new user turn
    assert req.stream and req.include_usage and req.protocol == "anthropic_messages"
    for bad in ([], {"model": "m"}, {"model": "m", "messages": ["x"]}, {"model": "m", "messages": {}}):
        with pytest.raises(RequestError):
            parse_messages_request(bad)


def test_errors_count_tokens_and_tool_less_models_speak_anthropic() -> None:
    async def main():
        async with OracleServer(ACTIONS) as oracle, aiohttp.ClientSession() as s:
            out = {}
            for model in ("http-500", "tools-unsupported"):
                r = await s.post(oracle.base_url + "/v1/messages", json=body_of(model, stream=False))
                out[model] = (r.status, await r.json())
            r = await s.post(oracle.base_url + "/v1/messages", data=b"\xff")
            out["bad"] = (r.status, await r.json())
            r = await s.post(oracle.base_url + "/v1/messages/count_tokens", json=body_of())
            out["count"] = (r.status, await r.json())
            return out, list(oracle.ground_truth), list(oracle.request_log)

    out, truth, log = run(main())
    assert out["http-500"][0] == 500 and out["http-500"][1]["type"] == "error"
    assert out["http-500"][1]["error"]["type"] == "api_error"
    status, doc = out["tools-unsupported"]
    assert status == 400 and doc["error"]["type"] == "invalid_request_error"
    assert "does not support tools" in doc["error"]["message"]
    assert out["bad"][0] == 400 and "invalid request" in out["bad"][1]["error"]["message"]
    assert out["count"][0] == 200 and out["count"][1]["input_tokens"] > 0
    assert truth == [] and len(log) == 2  # count_tokens is not a model call


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["model", "messages", "role", "content", "type", "tool_use_id", "input",
                                         "tools", "system", "text", "id", "name", "input_schema", "is_error"]),
                        inner, max_size=5), max_leaves=30))
def test_any_json_body_is_read_or_refused_never_raises_otherwise(body: Any) -> None:
    try:
        req = parse_messages_request(body)
    except RequestError:
        return
    assert all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in req.messages)


# ----------------------------------------------------------------------------- tier A: the proxy

def _oracle_loop(stream: bool = True) -> tuple[list[tuple[bytes, int, str, bytes]], list[dict]]:
    async def main():
        async with OracleServer(ACTIONS) as oracle:
            exchanges = await _loop(oracle.base_url, stream=stream)
        return exchanges, list(oracle.ground_truth)
    return run(main())


def test_tier_a_reads_the_stream_in_every_split() -> None:
    exchanges, truth = _oracle_loop()
    data, _, content_type, raw = exchanges[0]
    whole = observe(data, [raw], path="/v1/messages", content_type=content_type)
    assert whole[P + "protocol"] == "anthropic_messages" and whole[P + "stream"] is True
    [call] = whole[P + "tool_calls"]
    assert (call["id"], call["name"], json.loads(call["arguments"])) == (
        truth[0]["tool_call_id"], "Write", truth[0]["arguments"])
    assert call["arguments_json_valid"] is True and whole[P + "response_id"] == "msg_oracle_1"
    usage = whole[P + "usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 1  # message_delta's count, not the start's 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    for cut in range(0, len(raw) + 1, 7):
        assert stable(observe(data, split_at(raw, cut), path="/v1/messages", content_type=content_type)) == stable(whole)
    bytewise = observe(data, [raw[i:i + 1] for i in range(len(raw))], path="/v1/messages", content_type=content_type)
    assert stable(bytewise) == stable(whole)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_tier_a_counts_the_prompt_cache_and_reads_results_from_requests(stream: bool) -> None:
    exchanges, truth = _oracle_loop(stream)
    recs = [observe(d, [raw], path="/v1/messages", content_type=ct) for d, _, ct, raw in exchanges]
    assert [c["name"] for r in recs for c in r[P + "tool_calls"]] == [t["name"] for t in truth]
    assert [c["id"] for r in recs for c in r[P + "tool_calls"]] == [t["tool_call_id"] for t in truth]
    last = recs[-1]
    reply = sse_message(exchanges[-1][3]) if stream else json.loads(exchanges[-1][3])
    u = reply["usage"]
    assert last[P + "usage"]["prompt_tokens"] == u["input_tokens"] + u["cache_read_input_tokens"] \
        + u["cache_creation_input_tokens"]
    assert last[P + "usage"]["cached_tokens"] == u["cache_read_input_tokens"] > 0
    results = last[P + "tool_results"]
    assert [(r["tool_call_id"], r["name"]) for r in results] == [(t["tool_call_id"], t["name"]) for t in truth]
    assert last[P + "text"].startswith("Done.")


def test_an_error_result_is_read_and_named_after_its_call() -> None:
    body = json.dumps(body_of(messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                      "content": "command not found"}]}])).encode()
    raw = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_9","type":"message",'
           b'"role":"assistant","content":[],"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
           b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')
    rec = observe(body, [raw], path="/v1/messages")
    [result] = rec[P + "tool_results"]
    assert (result["tool_call_id"], result["name"], result["status"]) == ("toolu_1", "Bash", "error")


@pytest.mark.parametrize("block,want", [
    ({"is_error": True, "content": "Exit code 1\ncat: x: No such file or directory"}, ("error", 1)),
    ({"content": "File created successfully at: greeting.txt"}, ("success", None)),  # absent is_error: false
    ({"is_error": False, "content": [{"type": "text", "text": "ok"}]}, ("success", None)),
    ({"content": "Exit code 2\nboom"}, ("error", 2)),  # the text still speaks when the flag is silent
])
def test_a_tool_result_blocks_status_and_exit_code(block: dict, want: tuple) -> None:
    body = json.dumps(body_of(messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", **block}]}])).encode()
    [result] = observe(body, [b""], path="/v1/messages")[P + "tool_results"]
    assert (result["status"], result["exit_code"]) == want


def test_an_error_event_is_read() -> None:
    raw = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_9","type":"message",'
           b'"role":"assistant","content":[],"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
           b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')
    rec = observe(json.dumps(body_of()).encode(), [raw], path="/v1/messages")
    assert rec[P + "error"] == "Overloaded" and rec[P + "response_id"] == "msg_9"


def test_a_start_block_with_its_whole_input_and_no_deltas_is_one_call() -> None:
    """Some servers put the whole input in content_block_start and send no input_json_delta."""
    events = [{"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3}}},
              {"type": "content_block_start", "index": 0, "content_block": {
                  "type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "pwd"}}},
              {"type": "content_block_stop", "index": 0},
              {"type": "content_block_start", "index": 1, "content_block": {
                  "type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"file_path": "x"}}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                                    "partial_json": '{"file_path": "y"}'}},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}]
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    rec = observe(json.dumps(body_of()).encode(), [raw], path="/v1/messages")
    assert [(c["id"], json.loads(c["arguments"])) for c in rec[P + "tool_calls"]] == [
        ("toolu_a", {"command": "pwd"}), ("toolu_b", {"file_path": "y"})]
    assert rec[P + "usage"] == {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}


@pytest.mark.parametrize("path,want", [("/v1/messages", "anthropic_messages"), ("/anthropic/v1/messages", "anthropic_messages"),
                                       ("/v1/messages/count_tokens", "count_tokens"), ("/messages", "anthropic_messages")])
def test_protocol_detection(path: str, want: str) -> None:
    assert detect_protocol("POST", path) == want


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=5))
def test_the_observer_never_raises_on_arbitrary_bytes_on_the_messages_path(raw: bytes, cuts: list[int]) -> None:
    rec = observe(json.dumps(body_of()).encode(), split_at(raw, *cuts), path="/v1/messages")
    assert rec[P + "protocol"] == "anthropic_messages"


# -------------------------------------------------------------------- the proxy's rules hold for it

def test_through_the_proxy_pin_budget_and_redaction_hold(tmp_path: Path) -> None:
    record = tmp_path / "proxy.jsonl"

    async def main():
        async with OracleServer(ACTIONS) as oracle, \
                proxied(oracle.base_url, record, models=("perfect",), token_budget=100_000) as proxy:
            good = await _loop(proxy.base_url)
            other = await _loop(proxy.base_url, model="claude-opus-4")  # not the model under test
            async with aiohttp.ClientSession() as s:
                async with s.post(proxy.base_url + "/v1/messages/count_tokens", json=body_of(), headers=HEADERS) as r:
                    counted = (r.status, await r.json())
        return good, other, counted, list(oracle.ground_truth), proxy

    good, other, counted, truth, proxy = run(main())
    assert [s for _, s, _, _ in good] == [200, 200, 200] and len(truth) == 2
    status, doc = other[0][1], json.loads(other[0][3])
    assert status == 403 and doc["type"] == "error" and doc["error"]["code"] == "model_not_under_test"
    assert isinstance(doc["error"]["message"], str)  # what an Anthropic SDK shows
    assert counted[0] == 200 and counted[1]["input_tokens"] > 0
    records = read_records(record)
    assert [r[P + "protocol"] for r in records] == ["anthropic_messages"] * 4 + ["count_tokens"]
    assert proxy.model_refusal_count == 1
    assert proxy.tokens_spent == sum(r[P + "tokens"]["counted"] for r in records[:3])
    assert all(r[P + "tokens"]["estimated"] is False for r in records[:3])
    assert "sk-ant-gripprobe-secret" not in record.read_text()
    events = records_to_events(records, phase="measured", artifact_name="proxy.measured.http.jsonl")
    starts = [e for e in events if e.event_type == "tool_call_start"]
    assert [(e.tool_call_id, e.payload["raw_name"]) for e in starts] == [(t["tool_call_id"], t["name"]) for t in truth]
    assert [e.error_type for e in events if e.error_type] == ["model_not_under_test"]


def test_a_spent_budget_refuses_the_next_messages_call(tmp_path: Path) -> None:
    async def main():
        async with OracleServer(ACTIONS) as oracle, \
                proxied(oracle.base_url, tmp_path / "r.jsonl", token_budget=50) as proxy:
            return await _loop(proxy.base_url), proxy

    exchanges, proxy = run(main())
    assert [s for _, s, _, _ in exchanges][-1] == 429 and proxy.token_budget_exceeded
    assert json.loads(exchanges[-1][3])["error"]["code"] == "token_budget_exceeded"


def test_a_call_after_megabytes_of_text_is_still_counted() -> None:
    """Past the record's budget and the text cap, only lines that may hold calls or usage are decoded:
    Anthropic's tool_use and input_json_delta lines are among them."""
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 4000}}
    events = [{"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              *[text] * 600,
              {"type": "content_block_stop", "index": 0},
              {"type": "content_block_start", "index": 1, "content_block": {
                  "type": "tool_use", "id": "toolu_z", "name": "Bash", "input": {}}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"comm'}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'and": "ls"}'}},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 600}}]
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    rec = observe(json.dumps(body_of()).encode(), [raw[i:i + 65536] for i in range(0, len(raw), 65536)],
                  path="/v1/messages")
    assert [(c["id"], json.loads(c["arguments"])) for c in rec[P + "tool_calls"]] == [("toolu_z", {"command": "ls"})]
    assert rec[P + "usage"]["completion_tokens"] == 600


def test_the_misbehaving_profiles_speak_messages_too() -> None:
    """malformed-args, retry-loop, error-then-recover, text-tools and slow-stream over /v1/messages, as on
    the other tool protocols (tests/test_oracle_protocols.py)."""
    from gripprobe_core.oracle.dialects import MISSING_FILE

    async def main():
        async with OracleServer(ACTIONS) as oracle, aiohttp.ClientSession() as s:
            async def ask(model: str, messages: list[dict], stream: bool = False) -> dict:
                resp = await s.post(oracle.base_url + "/v1/messages", json=body_of(model, stream=stream,
                                                                                   messages=messages))
                assert resp.status == 200
                return sse_message(await resp.read()) if stream else await resp.json()

            def call_of(doc: dict) -> dict | None:
                return next((b for b in doc["content"] if b["type"] == "tool_use"), None)

            def after(messages: list[dict], use: dict, output: str, error: bool = False) -> list[dict]:
                return messages + [{"role": "assistant", "content": [use]}, {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": use["id"], "content": output, "is_error": error}]}]

            start = body_of()["messages"]
            # malformed-args: a whole message cannot hold half an object: input is the raw text
            use = call_of(await ask("malformed-args", start))
            assert use is not None and isinstance(use["input"], str)
            with pytest.raises(ValueError):
                json.loads(use["input"])
            doc = await ask("malformed-args", after(start, dict(use, input={}), "invalid arguments", error=True))
            assert call_of(doc) is None and "give up" in doc["content"][0]["text"]
            # streamed, the broken text is the input_json_delta, as on every wire
            events = await read_sse_events(await s.post(oracle.base_url + "/v1/messages",
                                                        json=body_of("malformed-args", messages=start)))
            partial = "".join(d["delta"]["partial_json"] for n, d in events
                              if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
            with pytest.raises(ValueError):
                json.loads(partial)
            # retry-loop: the same failing call three times, then a give-up text
            messages, seen = start, []
            for _ in range(3):
                use = call_of(await ask("retry-loop", messages))
                assert use is not None
                seen.append((use["name"], use["input"]))
                messages = after(messages, use, "cat: gripprobe-missing-file.txt: No such file or directory", True)
            assert seen[0] == seen[1] == seen[2] and MISSING_FILE in json.dumps(seen[0])
            assert call_of(await ask("retry-loop", messages)) is None
            # error-then-recover: the failing call, then the plan's first action
            use = call_of(await ask("error-then-recover", start))
            assert use is not None and (use["name"], use["input"]) == seen[0]
            use = call_of(await ask("error-then-recover", after(start, use, "Exit code 1", True)))
            assert use is not None and use["name"] == "Write"
            # text-tools: every planned call as <tool_call> text, no tool_use block
            doc = await ask("text-tools", start, stream=True)
            assert call_of(doc) is None
            text = doc["content"][0]["text"]
            assert text.count("<tool_call>") == len(ACTIONS) and '"name": "Write"' in text
            # slow-stream: paced, and still one call
            t0 = asyncio.get_running_loop().time()
            assert call_of(await ask("slow-stream", start, stream=True))["name"] == "Write"
            assert asyncio.get_running_loop().time() - t0 >= 0.5
            return list(oracle.ground_truth)

    truth = run(main())
    assert {g["protocol"] for g in truth} == {"anthropic_messages"}
    assert [g["tool_call_id"] for g in truth if not g["structured"]] == ["text-1", "text-2"]
    assert [g["profile"] for g in truth if g["structured"]] == (
        ["malformed-args"] * 2 + ["retry-loop"] * 3 + ["error-then-recover"] * 2 + ["slow-stream"])


def test_thinking_blocks_are_neither_text_nor_calls() -> None:
    events = [{"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I should write"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "abc"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Done."}},
              {"type": "content_block_stop", "index": 1},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
              {"type": "message_stop"}]
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    rec = observe(json.dumps(body_of()).encode(), [raw], path="/v1/messages")
    assert rec[P + "text"] == "Done." and rec[P + "tool_calls"] == [] and rec[P + "usage"]["completion_tokens"] == 7
    whole = {"type": "message", "id": "m2", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "redacted_thinking", "data": "x"},
        {"type": "text", "text": "ok"}], "usage": {"input_tokens": 2, "output_tokens": 1}}
    rec = observe(json.dumps(body_of(stream=False)).encode(), [json.dumps(whole).encode()], path="/v1/messages",
                  content_type="application/json")
    assert rec[P + "text"] == "ok" and rec[P + "response_id"] == "m2" and rec[P + "tool_calls"] == []

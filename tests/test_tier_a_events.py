"""Tier A: proxy records → normalized events (model responses, requested calls, results paired once).

Records are made by the real :class:`ExchangeObserver` from real oracle traffic (Chat Completions) or
real-shaped Responses/Ollama traffic; a few odd records are written by hand to check robustness.
"""

from __future__ import annotations

import json

from wire_samples import (
    OLLAMA_UNSUPPORTED, observe, ollama_chat_stream, ollama_request, oracle_conversation, responses_request,
    responses_stream,
)

from gripprobe_core.proxy.events import proxy_counts, records_to_events
from gripprobe_core.telemetry.toolnames import ToolNames
from gripprobe_core.telemetry import merge_events, summarize_phase

ART = "proxy.measured.http.jsonl"


def conversation_records() -> list[dict]:
    return [observe(body, [raw[:40], raw[40:]], content_type=ct) for body, _, ct, raw in oracle_conversation()]


def test_a_real_tool_loop_becomes_responses_calls_and_results():
    records = conversation_records()
    assert len(records) == 3  # write → shell → final answer
    events = records_to_events(records, phase="measured", artifact_name=ART)
    kinds = [(e.event_type, e.payload.get("name")) for e in events]
    assert kinds == [
        ("model_response", None), ("tool_call_start", "write"),
        ("tool_call_result", "write"), ("model_response", None), ("tool_call_start", "shell"),
        ("tool_call_result", "shell"), ("model_response", None)]
    responses = [e for e in events if e.event_type == "model_response"]
    starts = [e for e in events if e.event_type == "tool_call_start"]
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert [s.parent_id for s in starts] == [responses[0].event_id, responses[1].event_id]
    assert [r.tool_call_id for r in results] == [s.tool_call_id for s in starts]
    assert [r.parent_id for r in results] == [s.parent_id for s in starts]
    assert [r.status for r in results] == ["unknown", "success"] and results[1].exit_code == 0
    assert starts[0].payload["arguments"] == {"path": "hello.txt", "content": "hello world\n"}
    assert starts[0].payload["kind"] == "write" and starts[1].payload["kind"] == "execute"
    assert starts[0].status == "started" and starts[0].error_type is None
    assert all(e.source == "proxy" and e.source_tier == "A" for e in events)
    assert [e.event_id for e in events] == [f"measured-A-{n}" for n in range(1, 8)]
    assert [e.raw_artifact_ref for e in events] == [f"{ART}:{n}" for n in (1, 1, 2, 2, 2, 3, 3)]
    assert all(e.timestamp == records[int(e.raw_artifact_ref.rsplit(":", 1)[1]) - 1]["x_gripprobe_timestamp"]
               for e in events)
    assert responses[0].response_id == "chatcmpl-oracle-1" and responses[0].payload["tool_call_count"] == 1
    assert responses[2].payload["text"] and responses[2].payload["usage"]["total_tokens"] > 0
    summary = summarize_phase(merge_events([events]), observability="structured", capture_missing=False,
                              parse_error=False, proxy_status="collected", **proxy_counts(records))
    assert summary.tool_event_verdict == "confirmed_tool_use" and summary.telemetry_source_tier == "A"
    assert summary.telemetry_protocol_structured_count == 2 and summary.telemetry_tool_result_count == 2


def test_a_result_repeated_by_later_requests_is_reported_once():
    records = conversation_records()
    # the third request carries both results; the second carried the first: still one result per call
    assert [r["x_gripprobe_tool_result_count"] for r in records] == [0, 1, 2]
    events = records_to_events(records + [records[-1]], phase="measured", artifact_name=ART)
    assert sum(e.event_type == "tool_call_result" for e in events) == 2


def test_a_call_never_answered_stays_a_request_only():
    records = conversation_records()[:1]
    events = records_to_events(records, phase="warmup", artifact_name="proxy.warmup.http.jsonl")
    assert [e.event_type for e in events] == ["model_response", "tool_call_start"]
    assert events[0].event_id == "warmup-A-1" and events[1].phase == "warmup"
    summary = summarize_phase(events, observability="structured", capture_missing=False, parse_error=False,
                              proxy_status="collected")
    assert summary.telemetry_tool_call_without_result_count == 1
    assert summary.tool_event_verdict == "tool_event_inconclusive"


def test_responses_results_pair_by_call_id_with_error_status():
    first = observe(responses_request(), [responses_stream()], path="/v1/responses")
    second = observe(responses_request(), [responses_stream(custom=True, response_id="resp_2")], path="/v1/responses")
    third = observe(responses_request(results=True), [responses_stream(text="Done.", response_id="resp_3")],
                    path="/v1/responses")
    codex_names = ToolNames({"apply_patch": ("edit", "write"), "exec_command": ("shell", "execute")})
    events = records_to_events([first, second, third], phase="measured", artifact_name=ART, tool_names=codex_names)
    results = {e.tool_call_id: e for e in events if e.event_type == "tool_call_result"}
    starts: dict = {}
    for e in events:
        if e.event_type == "tool_call_start":
            starts.setdefault(e.tool_call_id, e)  # the last reply re-issues call_a3b8c7985e: unanswered
    assert results["call_a3b8c7985e"].status == "success" and results["call_a3b8c7985e"].parent_id == \
        starts["call_a3b8c7985e"].parent_id
    assert results["call_19f644bbda"].payload["name"] == "edit"  # apply_patch, in the driver's table
    # the core's own table names no agent: without the driver's names, apply_patch is just itself
    generic = records_to_events([first, second, third], phase="measured", artifact_name=ART)
    assert {e.payload["name"] for e in generic if e.tool_call_id == "call_19f644bbda"} == {"apply_patch"}
    assert starts["call_19f644bbda"].payload["call_kind"] == "custom"
    assert starts["call_19f644bbda"].payload["arguments"].startswith("*** Begin Patch")
    # a result whose call no response of the phase carried answers nothing: no event, only counted (the
    # request's own function_call item naming it is the agent's word, not the model's)
    assert "call_ec528305f9" not in results and "call_ec528305f9" not in starts
    assert proxy_counts([first, second, third])["proxy_orphan_result_count"] == 1


def test_ollama_results_without_ids_pair_with_the_oldest_call_of_that_name():
    first = observe(ollama_request(), [ollama_chat_stream()], path="/api/chat")
    second = observe(ollama_request(results=True), [ollama_chat_stream()], path="/api/chat")
    events = records_to_events([first, second], phase="measured", artifact_name=ART)
    write_starts = [e for e in events if e.event_type == "tool_call_start" and e.payload["raw_name"] == "write"]
    (result,) = [e for e in events if e.event_type == "tool_call_result"]
    assert result.tool_call_id is None and result.parent_id == write_starts[0].parent_id
    assert result.payload["name"] == "write" and result.status == "unknown"


def test_errors_http_status_unsupported_and_proxy_errors():
    unsupported = observe(ollama_request(), [OLLAMA_UNSUPPORTED], path="/api/chat", status=400,
                          content_type="application/json")
    boom = observe(b"{}", [b'{"error": {"message": "boom"}}'], status=500, content_type="application/json")
    cut = observe(b"{}", [b'data: {"id": "x", "choices": []}\n\n'], proxy_error="upstream_reset")
    events = records_to_events([unsupported, boom, cut], phase="measured", artifact_name=ART)
    assert [(e.status, e.error_type) for e in events] == [
        ("error", "backend_tool_unsupported"), ("error", "http_500"), ("error", "upstream_reset")]
    assert events[1].payload["error"] == "boom" and events[1].payload["http_status"] == 500
    counts = proxy_counts([unsupported, boom, cut])
    assert counts == {"proxy_structured_count": 0, "proxy_nonstructured_count": 0, "proxy_orphan_result_count": 0,
                      "backend_tool_unsupported": True}


def test_malformed_arguments_are_marked_for_the_evaluator_but_long_ones_are_not():
    def stream(args: str) -> bytes:
        chunk = {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "k", "function": {"name": "shell", "arguments": args}}]}}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"
    bad = observe(b"{}", [stream('{"command": "ls')])
    long_ = observe(b"{}", [stream(json.dumps({"command": "echo " + "x" * 9000}))])
    events = records_to_events([bad, long_], phase="measured", artifact_name=ART)
    starts = [e for e in events if e.event_type == "tool_call_start"]
    assert starts[0].error_type == "malformed_arguments" and starts[0].payload["arguments"] == '{"command": "ls'
    assert starts[1].error_type is None  # cut to 4 KiB in the record, but valid JSON on the wire


def test_text_tool_calls_are_counted_not_turned_into_events():
    text = '<tool_call>{"name": "write", "arguments": {"path": "a.txt"}}</tool_call>'
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": text}}]}
    rec = observe(b"{}", [b"data: " + json.dumps(chunk).encode() + b"\n\n"])
    events = records_to_events([rec], phase="measured", artifact_name=ART)
    assert [e.event_type for e in events] == ["model_response"]
    assert events[0].payload["tool_call_nonstructured_count"] == 1
    assert proxy_counts([rec])["proxy_nonstructured_count"] == 1


def test_non_model_routes_and_garbage_records_make_no_events_and_never_raise():
    tags = observe(b"", [b'{"models": []}'], method="GET", path="/api/tags", content_type="application/json")
    odd = [tags, "not a dict", None, {}, {"x_gripprobe_protocol": "chat_completions", "x_gripprobe_tool_calls": "nope",
                                         "x_gripprobe_tool_results": [None, 3, {"tool_call_id": 5}],
                                         "x_gripprobe_status": "200", "x_gripprobe_timestamp": 12}]
    events = records_to_events(odd, phase="measured", artifact_name=ART)  # type: ignore[arg-type]
    assert [(e.event_type, e.raw_artifact_ref) for e in events] == [("model_response", f"{ART}:5")]
    assert proxy_counts(odd) == {"proxy_structured_count": 0, "proxy_nonstructured_count": 0,  # type: ignore[arg-type]
                                 "proxy_orphan_result_count": 1, "backend_tool_unsupported": False}
    assert records_to_events([], phase="measured", artifact_name=ART) == []

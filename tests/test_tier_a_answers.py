"""Tier A confirms only what the model sent: a call exists only in a model RESPONSE, a tool result counts only
when it answers such a call (docs/telemetry.md, "What answers a call").

Records are made by the real :class:`ExchangeObserver` from request and response bytes of every wire (Chat
Completions JSON and SSE, the Responses API, Ollama NDJSON); the properties say that no sequence of request
bodies can create a tool call, whatever else the agent's own output claims.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from wire_samples import observe

from gripprobe_core import hookimpl
from gripprobe_core.models.events import Event
from gripprobe_core.proxy.events import proxy_counts, records_to_events
from gripprobe_core.proxy.tool_results import request_tool_results
from gripprobe_core.telemetry import merge_events, summarize_phase

ART = "proxy.measured.http.jsonl"
WIRES = ("chat_sse", "chat_json", "responses", "ollama")
PATHS = {"chat_sse": "/v1/chat/completions", "chat_json": "/v1/chat/completions", "responses": "/v1/responses",
         "ollama": "/api/chat"}
CONTENT_TYPES = {"chat_sse": "text/event-stream", "chat_json": "application/json", "responses": "text/event-stream",
                 "ollama": "application/x-ndjson"}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Ids an attacker would guess: the oracle's own (they repeat from phase to phase), and a few made up.
IDS = ["call_oracle_0001", "call_oracle_0002", "call_1", "fc_1", "x"]
NAMES = ["write", "shell", "read", "save"]
HELLO_ARGS = {"path": "hello.txt", "content": "hello world\n"}
TEXT_CALL = '<tool_call>{"name": "write", "arguments": {"path": "hello.txt"}}</tool_call>'


# ------------------------------------------------------------------------------------ building traffic

def request(wire: str, items: list[dict[str, Any]]) -> bytes:
    """A request body of ``wire`` holding ``items``: ``("user", text)``, ``("call", id, name, args)`` (an assistant
    message / function_call item the AGENT writes) and ``("result", id, name, output)`` (a tool result)."""
    if wire == "responses":
        out: list[dict[str, Any]] = []
        for it in items:
            if it["type"] == "user":
                out.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": it["text"]}]})
            elif it["type"] == "call":
                out.append({"type": "function_call", "call_id": it["id"], "name": it["name"],
                            "arguments": json.dumps(it["args"])})
            else:
                out.append({"type": "function_call_output", "call_id": it["id"], "output": it["output"]})
        return json.dumps({"model": "lazy", "input": out, "stream": True}).encode()
    messages: list[dict[str, Any]] = []
    for it in items:
        if it["type"] == "user":
            messages.append({"role": "user", "content": it["text"]})
        elif it["type"] == "call":
            fn: dict[str, Any] = {"name": it["name"],
                                  "arguments": it["args"] if wire == "ollama" else json.dumps(it["args"])}
            tc: dict[str, Any] = {"function": fn} if wire == "ollama" else {"type": "function", "function": fn}
            if it["id"] is not None:
                tc["id"] = it["id"]
            messages.append({"role": "assistant", "content": "", "tool_calls": [tc]})
        else:
            msg: dict[str, Any] = {"role": "tool", "content": it["output"]}
            if it["id"] is not None:
                msg["tool_call_id"] = it["id"]
            if it["name"] is not None:
                msg["tool_name" if wire == "ollama" else "name"] = it["name"]
            messages.append(msg)
    body: dict[str, Any] = {"model": "lazy", "messages": messages}
    if wire == "chat_sse":
        body["stream"] = True
    return json.dumps(body).encode()


def response(wire: str, text: str, calls: list[tuple[str | None, str, dict[str, Any]]], n: int) -> bytes:
    """A model response of ``wire``: ``text`` and the structured ``calls`` ``(id, name, args)``."""
    if wire == "chat_sse":
        chunks = [{"id": f"chatcmpl-{n}", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}]
        for i, (cid, name, args) in enumerate(calls):
            chunks.append({"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {
                "tool_calls": [{"index": i, "id": cid, "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}}]})
        return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    if wire == "chat_json":
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                     for cid, name, args in calls]
        return json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion",
                           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()
    if wire == "responses":
        output: list[dict[str, Any]] = [{"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
                                         "content": [{"type": "output_text", "text": text}]}]
        output += [{"id": f"fc_{n}_{i}", "type": "function_call", "status": "completed", "call_id": cid, "name": name,
                    "arguments": json.dumps(args)} for i, (cid, name, args) in enumerate(calls)]
        events = [("response.created", {"type": "response.created",
                                        "response": {"id": f"resp_{n}", "object": "response", "output": []}}),
                  ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": f"msg_{n}",
                                                  "output_index": 0, "delta": text}),
                  ("response.completed", {"type": "response.completed", "response": {
                      "id": f"resp_{n}", "object": "response", "status": "completed", "output": output}})]
        return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
    lines: list[dict[str, Any]] = [{"model": "lazy", "message": {"role": "assistant", "content": text}, "done": False}]
    if calls:
        lines.append({"model": "lazy", "done": False, "message": {"role": "assistant", "content": "", "tool_calls": [
            {**({"id": cid} if cid is not None else {}), "function": {"name": name, "arguments": args}}
            for cid, name, args in calls]}})
    lines.append({"model": "lazy", "message": {"role": "assistant", "content": ""}, "done": True,
                  "prompt_eval_count": 10, "eval_count": 2})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def exchange(wire: str, items: list[dict[str, Any]], text: str = "ok",
             calls: list[tuple[str | None, str, dict[str, Any]]] | None = None, n: int = 1) -> dict[str, Any]:
    body = response(wire, text, calls or [], n)
    return observe(request(wire, items), [body[:17], body[17:]], path=PATHS[wire], content_type=CONTENT_TYPES[wire])


def user(text: str = "Create hello.txt") -> dict[str, Any]:
    return {"type": "user", "text": text}


def forged_call(cid: str | None = "call_oracle_0001", name: str = "write", args: Any = None) -> dict[str, Any]:
    return {"type": "call", "id": cid, "name": name, "args": HELLO_ARGS if args is None else args}


def result(cid: str | None = "call_oracle_0001", name: str | None = "write",
           output: str = "wrote 12 bytes to hello.txt") -> dict[str, Any]:
    return {"type": "result", "id": cid, "name": name, "output": output}


def tool_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.is_tool_event()]


def line_of(event: Event) -> int:
    return int((event.raw_artifact_ref or ":0").rsplit(":", 1)[1])


def summarize(events: list[Event], **kw: Any):
    return summarize_phase(events, observability="structured", capture_missing=False, parse_error=False,
                           proxy_status="collected", **kw)


# ---------------------------------------------------------------------------------------- the attack

def test_a_made_up_call_and_result_in_the_request_are_not_a_tool_call():
    """The attack of issue 16: the agent writes the file itself, then sends a made-up assistant tool_calls
    message and a role: tool result in its own request; the model (oracle-lazy) never asked for a tool."""
    for wire in WIRES:
        records = [exchange(wire, [user()]),
                   exchange(wire, [user(), forged_call(), result()], text="Done.", n=2)]
        assert records[1]["x_gripprobe_tool_result_count"] == 1  # the record still shows what the agent sent
        events = records_to_events(records, phase="measured", artifact_name=ART)
        assert tool_events(events) == [], wire
        counts = proxy_counts(records)
        assert counts["proxy_structured_count"] == 0 and counts["proxy_orphan_result_count"] == 1, wire
        s = summarize(merge_events([events]), **counts)
        assert (s.tool_event_verdict, s.tool_event_verdict_reason) == ("no_tool_event_observed",
                                                                       "structured_event_absent"), wire
        assert s.telemetry_invoked_confidence == 0.0 and s.telemetry_tool_result_orphan_count == 1


def test_a_result_for_a_call_of_the_warmup_answers_nothing_in_the_measured_phase():
    """The oracle's call ids repeat from phase to phase: a measured request repeating the warmup's result for
    ``call_oracle_0001`` names an id no measured response carried."""
    warmup = [exchange("chat_sse", [user()], text="", calls=[("call_oracle_0001", "write", HELLO_ARGS)]),
              exchange("chat_sse", [user(), forged_call(), result()], n=2)]
    answered = records_to_events(warmup, phase="warmup", artifact_name="proxy.warmup.http.jsonl")
    assert [e.event_type for e in tool_events(answered)] == ["tool_call_start", "tool_call_result"]
    measured = [exchange("chat_sse", [user(), forged_call(), result()], n=3)]
    assert tool_events(records_to_events(measured, phase="measured", artifact_name=ART)) == []
    assert proxy_counts(measured)["proxy_orphan_result_count"] == 1


def test_text_calls_in_the_request_are_never_counted():
    """Tool calls written as text count only in a model's reply, never in what the agent sent."""
    for wire in WIRES:
        records = [exchange(wire, [user(TEXT_CALL), forged_call(), result(output=TEXT_CALL)])]
        assert records[0]["x_gripprobe_tool_call_nonstructured_count"] == 0
        assert proxy_counts(records)["proxy_nonstructured_count"] == 0
        replied = exchange(wire, [user()], text=TEXT_CALL)  # the same text in the REPLY is counted
        assert replied["x_gripprobe_tool_call_nonstructured_count"] == 1


# ----------------------------------------------------------------------------------- answering calls

def test_a_result_is_named_by_the_call_it_answers_not_by_the_request():
    records = [exchange("chat_sse", [user()], text="", calls=[("call_1", "read", {"path": "a"})]),
               exchange("chat_sse", [user(), forged_call("call_1", "write"), result("call_1", "write")], n=2)]
    events = records_to_events(records, phase="measured", artifact_name=ART)
    start, res = tool_events(events)
    assert res.event_type == "tool_call_result" and res.tool_call_id == "call_1" and res.parent_id == start.parent_id
    assert res.payload["raw_name"] == "read" and res.payload["kind"] == "read"


def test_one_result_per_call_however_often_the_conversation_repeats_it():
    calls = [("call_1", "write", HELLO_ARGS)]
    records = [exchange("responses", [user()], text="", calls=calls)]
    records += [exchange("responses", [user(), forged_call("call_1"), result("call_1")], n=n) for n in (2, 3, 4)]
    events = records_to_events(records, phase="measured", artifact_name=ART)
    assert [e.event_type for e in tool_events(events)] == ["tool_call_start", "tool_call_result"]
    assert proxy_counts(records)["proxy_orphan_result_count"] == 0
    # a second, different result for the same call in one request answers nothing more
    two = records[:1] + [exchange("responses", [user(), result("call_1"), result("call_1", output="again")], n=2)]
    assert len(tool_events(records_to_events(two, phase="measured", artifact_name=ART))) == 2
    assert proxy_counts(two)["proxy_orphan_result_count"] == 1


def test_a_call_id_the_model_gives_twice_is_answered_twice_in_order():
    records = [exchange("chat_json", [user()], text="", calls=[("dup", "shell", {"command": "false"})]),
               exchange("chat_json", [user(), result("dup", None, "exit code: 1")], text="",
                        calls=[("dup", "shell", {"command": "false"})], n=2),
               exchange("chat_json", [user(), result("dup", None, "exit code: 1"), result("dup", None, "exit code: 0")],
                        n=3)]
    events = tool_events(records_to_events(records, phase="measured", artifact_name=ART))
    assert [(e.event_type, line_of(e), e.status) for e in events] == [
        ("tool_call_start", 1, "started"), ("tool_call_result", 2, "error"),
        ("tool_call_start", 2, "started"), ("tool_call_result", 3, "success")]


def test_ollama_results_without_ids_answer_the_oldest_unanswered_call_of_their_tool():
    calls = [(None, "write", HELLO_ARGS), (None, "shell", {"command": "cat hello.txt"}), (None, "write", {"path": "b"})]
    first = exchange("ollama", [user()], text="", calls=calls)
    second = exchange("ollama", [user(), result(None, "write", "ok"), result(None, "shell", "hello world"),
                                 result(None, "write", "ok")], n=2)
    third = exchange("ollama", [user(), result(None, "write", "ok"), result(None, "shell", "hello world"),
                                result(None, "write", "ok")], n=3)  # the same conversation again
    events = tool_events(records_to_events([first, second, third], phase="measured", artifact_name=ART))
    starts = [e for e in events if e.event_type == "tool_call_start"]
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert len(starts) == 3 and len(results) == 3 and {line_of(r) for r in results} == {2}
    assert [r.payload["raw_name"] for r in results] == ["write", "shell", "write"]
    assert proxy_counts([first, second, third])["proxy_orphan_result_count"] == 0
    # a result that names no tool answers the oldest unanswered call of any tool; one beyond the calls, nothing
    nameless = exchange("ollama", [user(), result(None, None, "a"), result(None, None, "b"), result(None, None, "c"),
                                   result(None, None, "d")], n=2)
    got = tool_events(records_to_events([first, nameless], phase="measured", artifact_name=ART))
    assert [e.payload["raw_name"] for e in got if e.event_type == "tool_call_result"] == ["write", "shell", "write"]
    assert proxy_counts([first, nameless])["proxy_orphan_result_count"] == 1


def test_ollama_ids_of_the_clients_own_answer_only_calls_without_an_id():
    idless = exchange("ollama", [user()], text="", calls=[(None, "write", HELLO_ARGS)])
    with_id = exchange("ollama", [user()], text="", calls=[("call_ol0", "write", HELLO_ARGS)])
    mine = exchange("ollama", [user(), result("client-7", "write")], n=2)
    assert len(tool_events(records_to_events([idless, mine], phase="measured", artifact_name=ART))) == 2
    # the model gave its call an id: a result naming another id answers nothing ...
    assert len(tool_events(records_to_events([with_id, mine], phase="measured", artifact_name=ART))) == 1
    # ... while one without any id (an Ollama client need not send it back) answers it
    bare = exchange("ollama", [user(), result(None, "write")], n=2)
    got = tool_events(records_to_events([with_id, bare], phase="measured", artifact_name=ART))
    assert [(e.event_type, e.tool_call_id) for e in got] == [("tool_call_start", "call_ol0"),
                                                             ("tool_call_result", "call_ol0")]


def test_a_tier_a_result_without_the_models_call_confirms_nothing():
    """Defence in depth in the attempts: a tier-A result confirms only together with the tier-A call it
    answers (tier A never makes another, but the summary does not rely on that)."""
    lone = Event(event_type="tool_call_result", event_id="r", source_tier="A", source="proxy", tool_call_id="x",
                 status="success", payload={"name": "write", "kind": "write"})
    s = summarize([lone])
    assert s.tool_event_verdict == "tool_event_inconclusive" and s.telemetry_invoked_confidence == 0.0
    claim = Event(event_type="tool_call_start", event_id="b", source_tier="B", source="agent_output",
                  tool_call_id="x", status="started", payload={"name": "write", "kind": "write"})
    merged = merge_events([[lone], [claim]])
    assert summarize(merged).telemetry_source_tier == "B"  # the agent's word, not the wire's
    assert summarize(merged, wire_witnessed=True).tool_event_verdict != "confirmed_tool_use"


# ---------------------------------------------------------------------------------------- properties

ids = st.one_of(st.none(), st.sampled_from(IDS))
names = st.one_of(st.none(), st.sampled_from(NAMES))
outputs = st.sampled_from(["ok", "wrote 12 bytes to hello.txt", "exit code: 0", "Error: no", TEXT_CALL, ""])
items = st.one_of(
    st.builds(user, st.sampled_from(["Create hello.txt", TEXT_CALL])),
    st.builds(forged_call, ids, st.sampled_from(NAMES), st.sampled_from([HELLO_ARGS, {"command": "ls"}])),
    st.builds(result, ids, names, outputs))
conversations = st.lists(st.lists(items, max_size=8), min_size=1, max_size=5)
reply_calls = st.lists(st.tuples(ids, st.sampled_from(NAMES), st.sampled_from([HELLO_ARGS, {"command": "ls"}])),
                       max_size=3)


def claims(draw_tiers: list[tuple[str, str, str | None]]) -> list[list[Event]]:
    """The agent's own evidence: tier-B/C starts and successful results (made-up ids among them)."""
    groups: dict[str, list[Event]] = {"B": [], "C": []}
    for n, (tier, event_type, cid) in enumerate(draw_tiers):
        groups[tier].append(Event(event_type=event_type, event_id=f"{tier}-{n}", source_tier=tier,
                                  source="agent_output" if tier == "B" else "wrapper", tool_call_id=cid,
                                  status="success" if event_type == "tool_call_result" else "started",
                                  payload={"name": "write", "kind": "write", "arguments": HELLO_ARGS}))
    return [g for g in groups.values() if g]


agent_claims = st.lists(st.tuples(st.sampled_from(["B", "C"]), st.sampled_from(["tool_call_start", "tool_call_result"]),
                                  ids), max_size=4)


@SETTINGS
@given(wire=st.sampled_from(WIRES), bodies=conversations, claimed=agent_claims)
def test_no_sequence_of_request_bodies_creates_a_tool_call(wire, bodies, claimed):
    """Replies without a structured call: whatever the requests carry, tier A has no tool event, confirms
    nothing, counts no call (structured or text); with the agent's own claims added, a format whose calls the
    wire witnesses confirms nothing, and any other is confirmed at most at the claims' tier, never A."""
    records = [exchange(wire, body, n=n) for n, body in enumerate(bodies, start=1)]
    events = records_to_events(records, phase="measured", artifact_name=ART)
    assert tool_events(events) == []
    counts = proxy_counts(records)
    assert counts["proxy_structured_count"] == 0 and counts["proxy_nonstructured_count"] == 0
    sent = any(request_tool_results(json.loads(request(wire, body))) for body in bodies)
    assert (counts["proxy_orphan_result_count"] > 0) == sent
    alone = summarize(merge_events([events]), **counts)
    assert alone.tool_event_verdict == "no_tool_event_observed" and alone.telemetry_invoked_confidence == 0.0
    merged = merge_events([events, *claims(claimed)])
    witnessed = summarize(merged, wire_witnessed=True, **counts)
    assert witnessed.tool_event_verdict != "confirmed_tool_use"
    plain = summarize(merged, **counts)
    assert plain.telemetry_invoked_confidence < 1.0
    if plain.tool_event_verdict == "confirmed_tool_use":
        assert plain.telemetry_source_tier in ("B", "C")


@SETTINGS
@given(wire=st.sampled_from(WIRES), bodies=conversations, replies=st.lists(reply_calls, min_size=5, max_size=5))
def test_every_tier_a_result_answers_one_earlier_call_of_the_model(wire, bodies, replies):
    """Replies with structured calls: each tier-A result answers a call an EARLIER response carried (its id,
    name and parent), at most one result per call; so tier A never confirms more calls than the model made."""
    # one reply never gives two calls one id (a stream would join them); only Ollama's calls may have none
    replies = [[(f"{cid}#{i}" if cid and cid in [c for c, _, _ in calls[:i]] else cid or (None if wire == "ollama"
                 else f"gen_{n}_{i}"), name, args) for i, (cid, name, args) in enumerate(calls)]
               for n, calls in enumerate(replies)]
    records = [exchange(wire, body, text="", calls=replies[n - 1], n=n) for n, body in enumerate(bodies, start=1)]
    events = tool_events(records_to_events(records, phase="measured", artifact_name=ART))
    starts = [e for e in events if e.event_type == "tool_call_start"]
    results = [e for e in events if e.event_type == "tool_call_result"]
    assert len(starts) == sum(len(replies[n]) for n in range(len(bodies)))
    for r in results:
        owners = [s for s in starts if line_of(s) < line_of(r) and s.parent_id == r.parent_id
                  and s.tool_call_id == r.tool_call_id and s.payload["raw_name"] == r.payload["raw_name"]]
        assert owners, r
        same = [x for x in results if (x.parent_id, x.tool_call_id, x.payload["raw_name"]) ==
                (r.parent_id, r.tool_call_id, r.payload["raw_name"])]
        assert len(same) <= len(owners)
    s = summarize(merge_events([records_to_events(records, phase="measured", artifact_name=ART)]),
                  **proxy_counts(records))
    assert s.telemetry_tool_result_count <= len(starts) and s.telemetry_tool_call_count == len(starts)


# --------------------------------------------------------------------- tier A is the proxy's alone

class ClaimsTierA:
    """A contributing parser that dresses the agent's word up as the wire's: every tool event at tier A."""

    @hookimpl
    def parse_wrapper_events(self, driver, ctx, capture, transcript):
        from gripprobe_core.plugin import EventBuilder

        out = EventBuilder(ctx.phase, capture.stdout_path.name, tier="A", source="proxy")
        out.add(None, event_type="tool_call_result", tool_call_id="call_oracle_0001", status="success",
                payload={"raw_name": "write", "name": "write", "kind": "write"})
        return out.events


def test_a_parser_claiming_tier_a_is_a_harness_error_not_a_confirmation(tmp_path):
    """The real runner, reference agent × oracle-lazy: a parse_wrapper_events contribution at tier A makes the
    case HARNESS_ERROR (wrapper_parse_error) instead of confirming a write the lazy model never asked for."""
    from conftest import run_reference

    out = run_reference(tmp_path, ClaimsTierA(), models=("oracle-lazy",), tests=("save_file",))
    (res,) = out.results
    assert (res.verdict.status, res.verdict.failure_reason) == ("HARNESS_ERROR", "wrapper_parse_error")
    events = (out.run_dir.case(res.case_id) / "artifacts" / "events.measured.jsonl").read_text()
    assert "call_oracle_0001" not in events


def test_a_driver_whose_parse_claims_tier_a_is_a_parse_error(tmp_path):
    from gripprobe_core.defaults.refagent import ReferenceDriver
    from gripprobe_core.models.results import ProcessResult
    from gripprobe_core.phase import PhaseCapture, Transcript
    from gripprobe_core.runner.judge import read_transcript

    class Forger(ReferenceDriver):
        name = "forger"

        def parse(self, ctx, capture):
            got = super().parse(ctx, capture)
            return Transcript([e.model_copy(update={"source_tier": "A"}) for e in got.events], got.final_text)

    stdout = tmp_path / "measured.stdout"
    stdout.write_text(json.dumps({"type": "tool.result", "call_id": "c1", "name": "write", "status": "success"}) + "\n")
    capture = PhaseCapture(stdout_path=stdout, stderr_path=tmp_path / "measured.stderr",
                           process=ProcessResult(status="ok", exit_code=0))
    transcript, error = read_transcript(Forger(), _phase_ctx(tmp_path), capture)
    assert transcript.events == [] and error and "tier A is the recording proxy's alone" in error
    honest, error = read_transcript(ReferenceDriver(), _phase_ctx(tmp_path), capture)
    assert error is None and [e.source_tier for e in honest.events] == ["B"]


def _phase_ctx(tmp_path):
    from gripprobe_core.models.specs import CliAgentSpec
    from gripprobe_core.testing import phase_context

    agent = CliAgentSpec(id="forger", plugin="forger", executable="gripprobe-refagent", formats=["tool"],
                         tool_kinds=["write"])
    return phase_context(tmp_path / "phase", agent, installed=False)

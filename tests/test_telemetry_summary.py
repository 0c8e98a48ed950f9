"""merge_events, detect_retry_loop and summarize_phase (SPEC §5)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from gripprobe_core.models.events import Event
from gripprobe_core.telemetry import detect_retry_loop, merge_events, summarize_phase, tool_attempts

_counter = iter(range(10**6))


def ev(event_type: str, tier: str = "B", name: str = "shell", args: Any = "default", status: str = "unknown",
       call_id: str | None = None, ts: str | None = None, kind: str = "execute", **extra: Any) -> Event:
    payload = {} if event_type == "model_response" else {
        "name": name, "kind": kind, "arguments": {"cmd": name} if args == "default" else args}
    return Event(event_type=event_type, event_id=f"e{next(_counter)}", source_tier=tier,
                 source="proxy" if tier == "A" else "agent_output", tool_call_id=call_id, payload=payload,
                 status=status, timestamp=ts, **extra)


def call(status: str, tier: str = "B", name: str = "shell", args: Any = "default", call_id: str | None = None,
         kind: str = "execute") -> list[Event]:
    return [ev("tool_call_start", tier, name, args, "started", call_id, kind=kind),
            ev("tool_call_result", tier, name, args, status, call_id, kind=kind)]


def summarize(events: list[Event], observability: str = "structured", **kw: Any):
    return summarize_phase(events, observability=observability, capture_missing=kw.pop("capture_missing", False),
                           parse_error=kw.pop("parse_error", False), **kw)


# ------------------------------------------------------------------ merge_events

def test_same_call_id_keeps_the_best_tier_with_its_own_ref() -> None:
    a = ev("tool_call_start", "A", call_id="c1", raw_artifact_ref="proxy.measured.http.jsonl:3")
    c = ev("tool_call_start", "C", call_id="c1", raw_artifact_ref="measured.stdout:10")
    merged = merge_events([[c], [a]])
    assert [(e.event_id, e.source_tier, e.raw_artifact_ref, e.sequence) for e in merged] == [
        (a.event_id, "A", "proxy.measured.http.jsonl:3", 1)]


def test_content_match_by_kth_identical_call() -> None:
    proxy = [ev("tool_call_start", "A", args={"cmd": "ls"}, call_id="call_1"),
             ev("tool_call_start", "A", args={"cmd": "cat x"}, call_id="call_2"),
             ev("tool_call_start", "A", args={"cmd": "ls"}, call_id="call_3")]
    # The marker parser missed "cat x", has no ids, and writes arguments as JSON text.
    markers = [ev("tool_call_start", "C", args='{"cmd": "ls"}'), ev("tool_call_start", "C", args='{"cmd":"ls"}'),
               ev("tool_call_start", "C", args={"cmd": "rm y"})]
    merged = merge_events([markers, proxy])
    # No timestamps anywhere: input order (group, then position) decides.
    assert [(e.source_tier, e.payload["arguments"]) for e in merged] == [
        ("C", {"cmd": "rm y"}), ("A", {"cmd": "ls"}), ("A", {"cmd": "cat x"}), ("A", {"cmd": "ls"})]


def test_repeats_inside_one_source_are_never_merged() -> None:
    group = call("error", call_id="c1") + call("error", call_id="c1") + call("error")
    assert len(merge_events([group])) == 6


def test_starts_and_results_are_not_duplicates_of_each_other() -> None:
    start, result = ev("tool_call_start", "A", call_id="c"), ev("tool_call_result", "B", call_id="c")
    assert len(merge_events([[start], [result]])) == 2


def test_model_responses_merge_by_response_id_only() -> None:
    a = ev("model_response", "A", response_id="r1")
    b = ev("model_response", "B", response_id="r1")
    b2 = ev("model_response", "B")
    merged = merge_events([[b, b2], [a]])
    assert sorted(e.event_id for e in merged) == sorted([a.event_id, b2.event_id])


def test_order_by_timestamp_and_renumbered_sequence() -> None:
    late = ev("tool_call_start", "B", name="write", ts="2025-01-01T00:00:05Z", sequence=1)
    early = ev("tool_call_start", "A", name="read", ts="2025-01-01T00:00:01+00:00", sequence=7)
    middle = ev("model_response", "A", ts="2025-01-01T00:00:03")  # naive means UTC
    merged = merge_events([[late], [early, middle]])
    assert [e.event_id for e in merged] == [early.event_id, middle.event_id, late.event_id]
    assert [e.sequence for e in merged] == [1, 2, 3]
    assert (late.sequence, early.sequence) == (1, 7)  # inputs untouched


def test_untimestamped_events_follow_their_group_neighbour_and_untimed_groups_go_last() -> None:
    a1 = ev("tool_call_start", "B", name="a", ts="2025-01-01T00:00:01Z")
    a2 = ev("tool_call_result", "B", name="a")  # no timestamp: right after a1
    b1 = ev("tool_call_start", "A", name="b", ts="2025-01-01T00:00:02Z")
    c1 = ev("tool_call_start", "C", name="c", ts="not a time")
    merged = merge_events([[c1], [b1], [a1, a2]])
    assert [e.event_id for e in merged] == [a1.event_id, a2.event_id, b1.event_id, c1.event_id]


def test_odd_payloads_do_not_raise() -> None:
    odd = [Event(event_type="tool_call_start", event_id="x", source_tier="C", source="wrapper",
                 payload={"name": 5, "arguments": {1: object(), "a": "[" * 5000}}),
           Event(event_type="tool_call_result", event_id="y", source_tier="B", source="wrapper",
                 payload={"arguments": "[" * 100000}, timestamp="9999-99-99")]
    assert len(merge_events([odd, list(odd)])) == 2


TIERS = ["A", "B", "C", "D"]


@st.composite
def tool_events(draw: Any, tier: str | None = None, timed: bool = False) -> list[Event]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        event_type = draw(st.sampled_from(["tool_call_start", "tool_call_result", "model_response"]))
        response_id = draw(st.sampled_from(["r1", "r2"])) if event_type == "model_response" else None
        out.append(ev(event_type, tier or draw(st.sampled_from(TIERS)), name=draw(st.sampled_from(["shell", "read"])),
                      args=draw(st.sampled_from([{"cmd": "ls"}, '{"cmd": "ls"}', None])),
                      call_id=draw(st.sampled_from([None, "c1", "c2"])), response_id=response_id,
                      ts=f"2025-01-01T00:00:{draw(st.integers(0, 59)):02d}Z" if timed else None))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(tool_events(), max_size=4))
def test_merge_keeps_input_events_renumbered(groups: list[list[Event]]) -> None:
    merged = merge_events(groups)
    originals = {e.event_id: e for g in groups for e in g}
    assert [e.sequence for e in merged] == list(range(1, len(merged) + 1))
    assert len({e.event_id for e in merged}) == len(merged) <= len(originals)
    for e in merged:  # unchanged but for sequence, the tiers that saw it and a parent merged away
        o = originals[e.event_id]
        assert e.model_copy(update={"sequence": o.sequence, "seen_by": None, "parent_id": o.parent_id}) == o
        assert e.seen_by is None or (e.seen_by[0] == e.source_tier and len(e.seen_by) == len(set(e.seen_by)))
    # every event of the largest group survives (or a better-tier duplicate stands for it)
    assert len(merged) >= max((len(g) for g in groups), default=0)


@settings(max_examples=200, deadline=None)
@given(tool_events(tier="B"), st.sampled_from(["C", "D"]))
def test_a_worse_tier_copy_of_a_source_adds_nothing(group: list[Event], worse: str) -> None:
    copy = [e.model_copy(update={"event_id": e.event_id + "-copy", "source_tier": worse}) for e in group]
    merged = merge_events([copy, group])
    assert [e.event_id for e in merged] == [e.event_id for e in group]


@settings(max_examples=200, deadline=None)
@given(st.lists(tool_events(timed=True), max_size=4))
def test_timestamped_events_come_out_in_time_order(groups: list[list[Event]]) -> None:
    stamps = [e.timestamp for e in merge_events(groups)]
    assert stamps == sorted(stamps)


# ------------------------------------------------------------------ detect_retry_loop

def test_three_identical_failing_attempts_are_a_loop() -> None:
    assert detect_retry_loop(call("error") + call("error") + call("error"))
    assert detect_retry_loop(call("error") + call("timeout") + call("error") + call("success"))


def test_recovery_and_short_runs_are_not_loops() -> None:
    assert not detect_retry_loop(call("error") + call("success"))
    assert not detect_retry_loop(call("error") + call("error"))
    assert not detect_retry_loop(call("error") + call("error") + call("success"))
    assert not detect_retry_loop([e for _ in range(3) for e in call("success")])


def test_same_tool_name_with_other_arguments_is_not_a_loop() -> None:
    assert not detect_retry_loop(call("error", args={"cmd": "a"}) + call("error", args={"cmd": "b"})
                                 + call("error", args={"cmd": "c"}))


def test_another_call_in_between_breaks_the_run() -> None:
    assert not detect_retry_loop(call("error") + call("error") + call("success", name="read") + call("error"))


def test_tier_d_never_makes_a_loop() -> None:
    assert not detect_retry_loop([e for _ in range(3) for e in call("error", tier="D")])


def test_results_link_to_starts_by_id_even_when_interleaved() -> None:
    starts = [ev("tool_call_start", "A", call_id=f"c{i}") for i in range(3)]
    results = [ev("tool_call_result", "B", call_id=f"c{i}", status="error") for i in (2, 0, 1)]
    assert detect_retry_loop(starts + results)
    attempts = tool_attempts(starts + results)
    assert [a.result.tool_call_id for a in attempts] == ["c0", "c1", "c2"]


# ------------------------------------------------------------------ summarize_phase

def test_confirmed_by_structured_output() -> None:
    s = summarize(call("success", kind="write") + [ev("model_response", "B")] + call("error", name="read", kind="read"))
    assert (s.tool_event_verdict, s.tool_event_verdict_reason) == ("confirmed_tool_use", "none")
    assert (s.telemetry_source_tier, s.telemetry_invoked_confidence) == ("B", 0.9)
    assert (s.telemetry_event_count, s.telemetry_tool_call_count, s.telemetry_tool_result_count,
            s.telemetry_tool_error_count) == (5, 2, 2, 1)
    assert s.tool_kinds_observed == ["read", "write"] and s.tiers_present == ["B"]
    assert s.event_capture_status == "collected" and s.telemetry_retry_loop_detected is False


def test_a_result_seen_by_the_proxy_confirms_at_tier_a() -> None:
    s = summarize([ev("tool_call_start", "A", call_id="c"), ev("tool_call_start", "C", call_id="c2"),
                   ev("tool_call_result", "A", call_id="c", status="success")],
                  proxy_status="collected", proxy_skip_reason="disabled")
    assert (s.tool_event_verdict, s.telemetry_source_tier, s.telemetry_invoked_confidence) == (
        "confirmed_tool_use", "A", 1.0)
    assert s.telemetry_proxy_skip_reason is None and s.telemetry_protocol_structured_count == 1


def test_a_tier_a_request_without_result_does_not_confirm() -> None:
    s = summarize([ev("tool_call_start", "A", call_id="c")], proxy_status="collected")
    assert (s.tool_event_verdict, s.tool_event_verdict_reason) == (
        "tool_event_inconclusive", "source_parse_inconclusive")
    assert s.telemetry_tool_call_without_result_count == 1 and s.telemetry_invoked_confidence == 0.0
    assert s.telemetry_source_tier == "A" and s.tool_kinds_observed == []


def test_a_marker_start_confirms_at_tier_c() -> None:
    s = summarize([ev("tool_call_start", "C")], observability="markers")
    assert (s.tool_event_verdict, s.telemetry_source_tier, s.telemetry_invoked_confidence) == (
        "confirmed_tool_use", "C", 0.7)
    assert s.telemetry_tool_call_without_result_count == 0


def test_tier_d_only_is_inconclusive() -> None:
    s = summarize(call("success", tier="D"))
    assert (s.tool_event_verdict, s.tool_event_verdict_reason) == (
        "tool_event_inconclusive", "source_parse_inconclusive")
    assert (s.telemetry_source_tier, s.telemetry_invoked_confidence, s.tool_kinds_observed) == ("D", 0.3, [])


def test_parse_error_and_capture_missing() -> None:
    s = summarize(call("success"), parse_error=True)
    assert (s.event_capture_status, s.tool_event_verdict, s.tool_event_verdict_reason,
            s.telemetry_capture_skip_reason) == ("wrapper_parse_error", "tool_event_inconclusive",
                                                 "wrapper_parse_error", "wrapper_parse_error")
    s = summarize(call("success"), capture_missing=True, capture_skip_reason="no session file")
    assert (s.event_capture_status, s.tool_event_verdict_reason, s.telemetry_capture_skip_reason) == (
        "missing", "capture_missing", "no session file")


def test_proxy_error_without_confirmation_is_inconclusive_and_partial() -> None:
    s = summarize([], proxy_status="error", proxy_skip_reason="proxy_bind_error")
    assert (s.tool_event_verdict, s.tool_event_verdict_reason, s.event_capture_status) == (
        "tool_event_inconclusive", "proxy_error", "partial")
    assert s.telemetry_proxy_skip_reason == "proxy_bind_error" and s.telemetry_protocol_structured_count is None


def test_absent_versus_not_observable() -> None:
    assert (summarize([]).tool_event_verdict, summarize([]).tool_event_verdict_reason) == (
        "no_tool_event_observed", "structured_event_absent")
    collected = summarize([ev("model_response", "A")], observability="none", proxy_status="collected",
                          proxy_structured_count=0)
    assert collected.tool_event_verdict == "no_tool_event_observed"
    assert collected.telemetry_source_tier == "A" and collected.telemetry_invoked_confidence == 0.0
    for observability in ("markers", "none"):
        s = summarize([ev("model_response", "C")], observability=observability)
        assert (s.tool_event_verdict, s.tool_event_verdict_reason, s.event_capture_status) == (
            "tool_event_not_observable", "parser_not_capable_for_shell", "collected")


def test_flags_and_counts_pass_through() -> None:
    s = summarize(call("error") + call("error") + call("error"), proxy_status="collected",
                  proxy_structured_count=4, proxy_nonstructured_count=2, backend_tool_unsupported=True)
    assert s.telemetry_retry_loop_detected and s.telemetry_backend_tool_unsupported
    assert (s.telemetry_protocol_structured_count, s.telemetry_proxy_tool_call_nonstructured_count) == (4, 2)
    assert s.telemetry_tool_error_count == 3


def test_empty_phase() -> None:
    s = summarize([], observability="none")
    assert (s.telemetry_source_tier, s.telemetry_event_count, s.tiers_present) == ("none", 0, [])


def test_merge_takes_a_definite_status_from_a_lower_tier_duplicate():
    """Tier A sees a tool result whose content does not say success; tier B knows. The merged event
    keeps tier A's identity and takes B's status, so a recovery is seen as one."""
    from gripprobe_core.models.events import Event
    from gripprobe_core.telemetry import merge_events

    a = Event(event_type="tool_call_result", event_id="A-1", source_tier="A", source="proxy", tool_call_id="c1",
              status="unknown", payload={"name": "write"})
    b = Event(event_type="tool_call_result", event_id="B-1", source_tier="B", source="agent_output",
              tool_call_id="c1", status="success", exit_code=0, latency_ms=3.0, payload={"name": "write"})
    merged = merge_events([[a], [b]])
    assert len(merged) == 1
    assert merged[0].source_tier == "A" and merged[0].event_id == "A-1"
    assert merged[0].status == "success" and merged[0].exit_code == 0 and merged[0].latency_ms == 3.0
    # a definite status on the kept event is never overwritten
    a2 = a.model_copy(update={"status": "error"})
    assert merge_events([[a2], [b]])[0].status == "error"


# ------------------------------------------------------------------ claims the wire contradicts

def test_a_reported_call_the_wire_never_carried_confirms_nothing() -> None:
    """wire_witnessed: only calls tier A saw count as run when the proxy watched the phase."""
    claimed = call("success", "B", call_id="forged")
    for status, reason in (("collected", None), ("skipped", "capture_missing")):
        s = summarize(claimed, wire_witnessed=True, proxy_status=status, proxy_skip_reason=reason)
        assert (s.tool_event_verdict, s.tool_event_verdict_reason) == ("tool_event_inconclusive",
                                                                       "source_parse_inconclusive")
        assert s.telemetry_tool_call_unwitnessed_count == 1 and s.telemetry_invoked_confidence == 0.0
    # a proxy that ran and saw an exchange fail upstream still relayed (and recorded) every byte the agent got
    for reason in ("upstream_timeout", "upstream_reset", "upstream_malformed", "proxy_connect_error"):
        s = summarize(claimed, wire_witnessed=True, proxy_status="error", proxy_skip_reason=reason)
        assert (s.tool_event_verdict, s.tool_event_verdict_reason) == ("tool_event_inconclusive", "proxy_error")
        assert s.telemetry_tool_call_unwitnessed_count == 1 and s.telemetry_invoked_confidence == 0.0
    # the same claim stands where the proxy could not watch (never ran, or its records were cut to metadata),
    # or the agent's calls need not travel the wire
    for kw in ({"wire_witnessed": True, "proxy_status": "skipped", "proxy_skip_reason": "disabled"},
               {"wire_witnessed": True, "proxy_status": "error", "proxy_skip_reason": "proxy_bind_error"},
               {"wire_witnessed": True, "proxy_status": "error", "proxy_skip_reason": "capture_missing"},
               {"wire_witnessed": False, "proxy_status": "collected"}):
        s = summarize(claimed, **kw)
        assert s.tool_event_verdict == "confirmed_tool_use" and s.telemetry_tool_call_unwitnessed_count == 0


def test_the_upstream_reasons_are_the_proxys() -> None:
    from gripprobe_core.proxy.server import UPSTREAM_ERRORS
    from gripprobe_core.telemetry.summary import UPSTREAM_REASONS

    assert UPSTREAM_REASONS == UPSTREAM_ERRORS


def test_a_call_the_wire_carried_is_confirmed_by_the_agents_result() -> None:
    merged = merge_events([[ev("tool_call_start", "A", call_id="c1")],
                           call("success", "B", call_id="c1")])
    s = summarize(merged, wire_witnessed=True, proxy_status="collected")
    assert s.tool_event_verdict == "confirmed_tool_use" and s.telemetry_tool_call_unwitnessed_count == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["A", "B", "C", "D"]), max_size=6), st.booleans())
def test_wire_witnessing_never_confirms_more(tiers: list[str], collected: bool) -> None:
    """Witnessing only ever takes confirmations away, never adds one."""
    events = [e for i, t in enumerate(tiers) for e in call("success", t, call_id=f"c{i}")]
    status = "collected" if collected else "skipped"
    plain = summarize(events, proxy_status=status, proxy_skip_reason=None if collected else "capture_missing")
    witnessed = summarize(events, proxy_status=status, proxy_skip_reason=None if collected else "capture_missing",
                          wire_witnessed=True)
    if witnessed.tool_event_verdict == "confirmed_tool_use":
        assert plain.tool_event_verdict == "confirmed_tool_use"
    assert witnessed.telemetry_tool_call_unwitnessed_count == sum(1 for t in tiers if t in ("B", "C"))


# ------------------------------------------------------------------ model responses without a response id
# The proxy (tier A) and an agent's log (tier B, gptme) both see each reply; the log has no response id.

T0 = 1_700_000_000.0


def _iso(t: float, ms: bool = False) -> str:
    from datetime import datetime, timezone
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds" if ms else "microseconds")


def reply(tier: str, truth: Any, t: float, *, text: str | None = None, usage: dict | None = None,
          latency: float | None = None, response_id: str | None = None, **extra: Any) -> Event:
    payload: dict[str, Any] = {"truth": truth}
    if text is not None:
        payload["text"] = text
    if usage is not None:
        payload["usage"] = usage
    return Event(event_type="model_response", event_id=f"{tier}{next(_counter)}", source_tier=tier,
                 source="proxy" if tier == "A" else "agent_output", payload=payload, status="success",
                 timestamp=_iso(t, ms=tier == "A"), latency_ms=latency, response_id=response_id, **extra)


def child(parent: Event, truth: Any) -> Event:
    """A tool call the logged reply spawned: after the merge its parent_id says which reply it was paired with."""
    return Event(event_type="tool_call_start", event_id=f"c{next(_counter)}", source_tier=parent.source_tier,
                 source=parent.source, parent_id=parent.event_id, timestamp=parent.timestamp, status="started",
                 payload={"name": "write", "kind": "write", "arguments": {"truth": truth, "n": next(_counter)}})


def test_the_logged_copy_of_each_reply_merges_into_the_proxys() -> None:
    """gptme: the proxy saw four replies (one a side request gptme never logs), the log three; each logged
    reply is kept once, as tier A, seen_by A and B; the log's tool call now hangs under the A reply."""
    a = [reply("A", 1, T0, text="", usage={"prompt_tokens": 2855, "completion_tokens": 26}, latency=12,
               response_id="chatcmpl-1"),
         reply("A", 2, T0 + 0.030, text="Done.", usage={"prompt_tokens": 2945, "completion_tokens": 24},
               latency=3, response_id="chatcmpl-2"),
         reply("A", "naming", T0 + 0.031, text="GripProbe session", usage={"prompt_tokens": 251,
                                                                            "completion_tokens": 6}, latency=2),
         reply("A", 3, T0 + 0.060, text="Done.", usage={"prompt_tokens": 3000, "completion_tokens": 24}, latency=3)]
    b1 = reply("B", 1, T0 + 0.013, text='@save(call_1): {"path": "a"}', usage={"input_tokens": 2855,
                                                                               "output_tokens": 26})
    b2 = reply("B", 2, T0 + 0.034, text="Done.\n@complete(call_2): {}", usage={"input_tokens": 2945,
                                                                                "output_tokens": 24})
    b3 = reply("B", 3, T0 + 0.064, text="Done.", usage={"input_tokens": 3000, "output_tokens": 24},
               error_type="protocol_malformed")
    merged = merge_events([a, [b1, child(b1, 1), b2, b3]])
    responses = [e for e in merged if e.event_type == "model_response"]
    assert [(e.source_tier, e.payload["truth"], e.seen_by) for e in responses] == [
        ("A", 1, ["A", "B"]), ("A", 2, ["A", "B"]), ("A", "naming", None), ("A", 3, ["A", "B"])]
    # without usage anywhere an equal text is the evidence (aider's log: the reply's text)
    plain = [reply("A", 1, T0, text="I will write a.txt", latency=5), reply("A", 2, T0 + 0.1, text="Done", latency=5)]
    logged = [reply("C", 1, T0 + 0.006, text="I will write a.txt"), reply("C", 2, T0 + 0.106, text="Done")]
    assert [e.seen_by for e in merge_events([plain, logged])] == [["A", "C"], ["A", "C"]]
    start = next(e for e in merged if e.event_type == "tool_call_start")
    assert start.parent_id == a[0].event_id and start.source_tier == "B"
    assert responses[-1].error_type == "protocol_malformed"  # what the log knew about the reply stays
    assert merge_events([a, [b1, b2, b3]], pair_responses=False).__len__() == 7


def test_replies_that_could_be_another_stay_apart() -> None:
    """Two replies of the same text within the window and no usage: the logged one could be either, so
    nothing merges; different usage, a text that is not a prefix, a reply without a time, two response ids,
    an error, or a time outside the window never merge."""
    a = [reply("A", 1, T0, text="ok", latency=5), reply("A", 2, T0 + 0.010, text="ok", latency=5)]
    assert len(merge_events([a, [reply("B", 2, T0 + 0.020, text="ok")]])) == 3
    a1 = reply("A", 1, T0, text="ok", usage={"prompt_tokens": 10, "completion_tokens": 2}, latency=5,
               response_id="r1")
    for other in (reply("B", 9, T0 + 0.01, text="ok", usage={"input_tokens": 11, "output_tokens": 2}),
                  reply("B", 9, T0 + 0.01, text="no"),
                  reply("B", 9, T0 + 0.01, text="ok").model_copy(update={"timestamp": None}),
                  reply("B", 9, T0 + 0.01, text="ok", response_id="other"),
                  reply("B", 9, T0 + 0.01, text="ok").model_copy(update={"status": "error"}),
                  reply("B", 9, T0 - 0.5, text="ok"), reply("B", 9, T0 + 2.5, text="ok"),
                  reply("B", 9, T0 + 0.01)):  # no text, no usage: no evidence
        merged = merge_events([[a1], [other]])
        assert len(merged) == 2 and all(e.seen_by is None for e in merged), other
    # a later reply with the same text is the second, once the first has its own copy
    b = [reply("B", 1, T0 + 0.007, text="ok"), reply("B", 2, T0 + 0.016, text="ok")]
    # ... but both B replies fit the first A reply's window: ambiguous, so neither merges
    assert len(merge_events([a, b])) == 4


@st.composite
def conversation(draw: Any) -> tuple[list[Event], list[Event], bool]:
    """A phase as the proxy and a log see it: the proxy every reply (plus side requests the log never has),
    the log some of them, each logged after its reply ended; texts and token counts often repeat. The
    third value: the log's copies are all unambiguous (distinct usage known on both sides, logged before
    the next request)."""
    t, a, b, clean, used = T0, [], [], True, []
    for k in range(draw(st.integers(1, 7))):
        t += draw(st.floats(0.0005, 3.0))
        duration = draw(st.floats(0.001, 3.0))
        text = draw(st.sampled_from(["", "ok", "Done.", "I will write a.txt"]))
        usage = draw(st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 2))))
        a.append(reply("A", k, t, text=text, latency=duration * 1000, response_id=f"chatcmpl-{k}",
                       usage={"prompt_tokens": usage[0], "completion_tokens": usage[1]} if usage else None))
        if draw(st.booleans()):  # a side request (gptme names the conversation), never logged
            side = draw(st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 2))))
            a.append(reply("A", f"side{k}", t + draw(st.floats(0, duration)), text=draw(st.sampled_from(
                ["ok", "session"])), latency=1.0,
                usage={"prompt_tokens": side[0], "completion_tokens": side[1]} if side else None))
            used.append(side)
        logged_at = t + duration + draw(st.floats(0, 0.5))
        gap = draw(st.floats(0.0005, 1.0))
        if draw(st.booleans()):
            suffix = draw(st.sampled_from(["", "\n@save(c): {}"]))
            b_usage = draw(st.sampled_from([None, usage]))
            r = reply("B", k, logged_at, text=(text + suffix) or None,
                      usage={"input_tokens": b_usage[0], "output_tokens": b_usage[1]} if b_usage else None)
            b += [r, child(r, k)]
            clean &= b_usage is not None and logged_at < t + duration + gap
        used.append(usage)
        t = max(t + duration, logged_at) + gap
    # unambiguous: every reply on the wire has its token counts, and no two the same
    clean &= None not in used and len(set(used)) == len(used)
    return a, b, clean


@settings(max_examples=400, deadline=None)
@given(conversation(), st.booleans())
def test_a_logged_reply_only_ever_merges_with_its_own(conv: tuple, swap: bool) -> None:
    """Whatever repeats, a reply the log recorded is merged into the proxy's record of that very reply or
    into none (its tool call's parent says which); an unambiguous log merges completely."""
    a, b, clean = conv
    merged = merge_events([b, a] if swap else [a, b])
    by_id = {e.event_id: e for e in merged}
    for e in merged:
        if e.event_type == "tool_call_start":
            assert by_id[e.parent_id].payload["truth"] == e.payload["arguments"]["truth"]
    kept_b = [e for e in merged if e.event_type == "model_response" and e.source_tier == "B"]
    paired = [e for e in merged if e.seen_by == ["A", "B"]]
    assert len(kept_b) + len(paired) == sum(1 for e in b if e.event_type == "model_response")
    assert all(e.source_tier == "A" for e in paired)
    if clean:
        assert kept_b == []


@settings(max_examples=300, deadline=None)
@given(st.lists(tool_events(timed=True), max_size=3), conversation())
def test_pairing_replies_changes_no_tool_event_and_no_verdict(groups: list[list[Event]], conv: tuple) -> None:
    a, b, _ = conv
    groups = [*groups, a, [e.model_copy(update={"error_type": "protocol_malformed"}) if i == 0 else e
                           for i, e in enumerate(b)]]
    paired, plain = merge_events(groups), merge_events(groups, pair_responses=False)

    def tools(events: list[Event]) -> list[tuple]:
        return [(e.event_id, e.status, e.source_tier) for e in events if e.is_tool_event()]
    assert tools(paired) == tools(plain)
    s1, s2 = (summarize(m, proxy_status="collected").model_dump(exclude={"telemetry_event_count"})
              for m in (paired, plain))
    assert s1 == s2
    malformed = [any(e.error_type == "protocol_malformed" for e in m) for m in (paired, plain)]
    assert malformed[0] == malformed[1]

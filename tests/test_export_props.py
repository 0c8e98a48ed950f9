"""Property: arbitrary lines in events.measured.jsonl never crash an exporter.

Each example writes a case directory (a valid case.json, an events file of generated lines: event-like
objects with fields of any type, lone surrogates, huge and negative numbers, NaN, garbage text and bytes)
and runs all three exporters on it in process: the JUnit document parses, the ATIF trajectory is valid
JSON that the ATIF models accept, and the OTLP spans encode to the collector's protobuf.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atif_schema import AtifTrajectory
from gripprobe_core.export.atif import build_trajectory, trajectory_bytes
from gripprobe_core.export.common import load_cases, read_timeline
from gripprobe_core.export.junit import render_junit
from gripprobe_core.store import RunFolder

CASE = "agent__model__backend__tool__test"
FIELDS = ["event_type", "event_id", "parent_id", "tool_call_id", "response_id", "source_tier", "source", "payload",
          "timestamp", "sequence", "status", "latency_ms", "exit_code", "error_type"]
PAYLOAD = ["raw_name", "name", "kind", "arguments", "output", "usage", "text", "call_kind", "protocol"]
USAGE = ["prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"]

nasty_text = st.one_of(st.text(max_size=20), st.sampled_from(["\ud800", "a\udcffb", "\x00\x1b[2J", "\uffff", "",
                                                             "2026-11-24T19:25:51.422Z", "9999-99-99T99:99",
                                                             "-0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                                             "2300-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z",
                                                             "measured-A-1", "A", "D"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), nasty_text)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(nasty_text, inner, max_size=3)),
                           max_leaves=8)
usage = st.dictionaries(st.sampled_from(USAGE), json_values, max_size=4)
payload = st.dictionaries(st.sampled_from(PAYLOAD), st.one_of(json_values, usage), max_size=6)
TIMESTAMPS = st.one_of(st.sampled_from(["2026-11-24T19:25:51.422Z", "9999-12-31T23:59:59Z", "2300-01-01T00:00:00+14:00",
                                         "1969-12-31T23:59:59Z", "2026-11-24T19:25:51", "2026-11-24"]),
                       st.datetimes().map(lambda d: d.isoformat()))
IDS = st.sampled_from([f"measured-A-{n}" for n in range(1, 7)])
event = st.fixed_dictionaries(
    {"event_type": st.sampled_from(["model_response", "tool_call_start", "tool_call_result", "other"]),
     "event_id": st.one_of(IDS, IDS, IDS, nasty_text)},
    optional={"parent_id": st.one_of(IDS, IDS, IDS, json_values),
              "timestamp": st.one_of(TIMESTAMPS, TIMESTAMPS, json_values),
              "latency_ms": st.one_of(st.floats(min_value=0), json_values),
              "tool_call_id": st.one_of(*[st.sampled_from(["call_1", "call_2", None])] * 3, json_values),
              "payload": payload | json_values,
              **{f: json_values for f in FIELDS[4:] if f not in ("timestamp", "latency_ms")}})



@st.composite
def conversation(draw) -> list[dict]:
    """A model response and tool events naming it as their parent, every other field drawn at random."""
    rid = draw(IDS)
    out = [dict(draw(event), event_type="model_response", event_id=rid)]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["tool_call_start", "tool_call_result"]))
        out.append(dict(draw(event), event_type=kind, parent_id=rid,
                        tool_call_id=draw(st.sampled_from(["call_1", "call_2", None]))))
    return out


event_line = event.map(lambda e: json.dumps(e, allow_nan=True).encode("utf-8", "surrogatepass"))
line = st.one_of(event_line, event_line, st.binary(max_size=30),
                 nasty_text.map(lambda s: s.encode("utf-8", "surrogatepass")))
lines = st.lists(st.one_of(line.map(lambda x: [x]), conversation().map(
    lambda events: [json.dumps(e, allow_nan=True).encode("utf-8", "surrogatepass") for e in events])),
    max_size=6).map(lambda groups: [x for g in groups for x in g])


def _case_json() -> dict:
    verdict = {"status": "PASS", "evaluator_reason_code": "none", "evaluator_reason_text": "ok",
               "failure_reason": None, "trajectory": "clean", "invoked": "yes", "artifact_match": 1.0,
               "tool_invocation_match": 1.0, "protocol_match": None, "strict_pass_score": 1.0, "overall_score": 1.0,
               "tool_event_verdict": "confirmed_tool_use", "tool_event_verdict_reason": "none"}
    return {"run_id": "R", "case_id": CASE,
            "key": {"agent": "agent", "model": "model", "backend": "backend", "format": "tool", "test": "test"},
            "started_at": "2026-11-24T19:25:51.080Z", "finished_at": "2026-11-24T19:25:51.541Z", "duration_s": 0.46,
            "verdict": verdict, "telemetry": {"event_capture_status": "collected",
                                              "tool_event_verdict": "confirmed_tool_use",
                                              "tool_event_verdict_reason": "none"}}


def _sdk():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider.get_tracer("test"), memory


TRACER, MEMORY = _sdk()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_arbitrary_event_lines_never_crash_the_exporters(lines):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from gripprobe_core.export.otlp import _case_spans, load_sdk

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "R"
        case = run / "cases" / CASE
        (case / "artifacts").mkdir(parents=True)
        (case / "case.json").write_text(json.dumps(_case_json()))
        (case / "prompt.txt").write_text("do it")
        (case / "artifacts" / "events.measured.jsonl").write_bytes(b"\n".join(lines))
        folder = RunFolder(run)
        cases = load_cases(folder)
        assert cases[0].result is not None
        timeline = read_timeline(case)

        data, summary = render_junit(folder, cases)
        ET.fromstring(data)
        assert summary.tests == 1

        traj = build_trajectory(cases[0], "R", timeline)
        AtifTrajectory.model_validate_json(trajectory_bytes(traj))

        MEMORY.clear()
        _case_spans(load_sdk(), TRACER, cases[0], timeline, "R", include_content=True)
        spans = MEMORY.get_finished_spans()
        assert len(spans) == 1 + len(timeline.responses) + len(timeline.calls)
        encode_spans(spans).SerializeToString()


def test_the_atif_example_in_the_docs_validates():
    text = (Path(__file__).resolve().parents[1] / "docs" / "export.md").read_text()
    block = text.split("<!-- atif-example -->", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    traj = AtifTrajectory.model_validate_json(block)
    assert traj.schema_version == "ATIF-v1.4" and any(s.tool_calls for s in traj.steps)

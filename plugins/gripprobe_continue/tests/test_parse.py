"""Parsers on real ``cn`` 1.5.47 outputs (field-note samples and verbose runs against the oracle) + garbage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_continue.parse import (
    final_text, load_session, parse_log, redact_text, session_events, stderr_events,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = FIXTURES / "samples"
CAPTURED = FIXTURES / "captured"


def process_info(case_dir: Path) -> dict:
    path = case_dir / "process.json"
    return json.loads(path.read_text()) if path.exists() else {}


def events_of(case_dir: Path, *, phase: str = "measured", with_log: bool = True):
    data = (case_dir / "session.json").read_bytes()
    session = load_session(data)
    assert session is not None
    log = (case_dir / "cn.log").read_bytes() if with_log and (case_dir / "cn.log").exists() else b""
    timeline = parse_log(log, anchor=process_info(case_dir).get("started_at"))
    return session_events(session, phase=phase, file_name="session.json", file_text=data.decode(), timeline=timeline)


def line_of(case_dir: Path, ref: str) -> str:
    name, _, line = ref.rpartition(":")
    return (case_dir / name).read_text().splitlines()[int(line) - 1]


def test_bash_success_sample():
    case = SAMPLES / "success"
    events = events_of(case)
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "tool_call_result", "model_response"]
    resp, start, result, final = events
    assert start.tool_call_id == result.tool_call_id == "call_3ad1cda60c"
    assert start.parent_id == result.parent_id == resp.event_id == "measured-B-1"
    assert start.payload == {"raw_name": "Bash", "name": "shell", "kind": "execute",
                             "arguments": {"command": "printf 'hello world\\n' > hello.txt"}}
    assert result.status == "success" and result.exit_code == 0 and result.payload["output"] == ""
    assert resp.payload["tool_call_count"] == 1 and resp.payload["usage"]["total_tokens"] == 120
    assert final.payload["text"] == "I created hello.txt containing hello world."
    assert [e.sequence for e in events] == [1, 2, 3, 4]
    assert all(e.source_tier == "B" and e.source == "agent_output" for e in events)
    # every pointer lands on the line it was read from
    assert '"role": "assistant"' in line_of(case, resp.raw_artifact_ref)
    assert '"id": "call_3ad1cda60c"' in line_of(case, start.raw_artifact_ref)
    assert '"toolCallId": "call_3ad1cda60c"' in line_of(case, result.raw_artifact_ref)
    # the field-note samples carry no log: no invented timestamps
    assert all(e.timestamp is None for e in events)


def test_write_sample_is_a_write_kind():
    events = events_of(SAMPLES / "cn_write")
    start = next(e for e in events if e.event_type == "tool_call_start")
    result = next(e for e in events if e.event_type == "tool_call_result")
    assert (start.payload["raw_name"], start.payload["name"], start.payload["kind"]) == ("Write", "write", "write")
    assert start.payload["arguments"] == {"filepath": "hello.txt", "content": "hello world\n"}
    assert result.status == "success" and result.exit_code is None
    assert result.payload["output"] == "Successfully created file: hello.txt"


def test_bad_args_sample_is_an_invalid_argument_error():
    events = events_of(SAMPLES / "bad_args")
    result = next(e for e in events if e.event_type == "tool_call_result")
    assert result.status == "error" and result.error_type == "invalid_arguments"
    assert result.exit_code is None  # the command never ran
    assert 'Required parameter "command" missing' in result.payload["output"]


def test_no_tool_sample_has_only_a_response():
    events = events_of(SAMPLES / "no_tool")
    assert [e.event_type for e in events] == ["model_response"]
    assert events[0].payload["tool_call_count"] == 0


@pytest.mark.parametrize("case, status", [("http400", 400), ("http500_plain", 500)])
def test_http_errors_on_stderr(case, status):
    data = (SAMPLES / case / "stderr.txt").read_bytes()
    events = stderr_events(data, phase="measured", file_name="measured.stderr", first_sequence=3)
    assert len(events) == 1
    e = events[0]
    assert e.event_type == "model_response" and e.status == "error" and e.error_type == "agent_error"
    assert e.payload["http_status"] == status and e.event_id == "measured-B-3" and e.sequence == 3
    assert e.raw_artifact_ref == "measured.stderr:1"


def test_tools_unsupported_on_stderr():
    line = b'{"status":"error","message":"400 registry.ollama.ai/library/gemma:2b does not support tools"}\n'
    (e,) = stderr_events(b"noise\n" + line, phase="warmup", file_name="warmup.stderr")
    assert e.error_type == "backend_tool_unsupported" and e.raw_artifact_ref == "warmup.stderr:2"
    assert e.event_id == "warmup-B-1"


def test_final_text():
    for case in ("success", "cn_write", "bad_args", "no_tool"):
        session = load_session((SAMPLES / case / "session.json").read_bytes())
        assert final_text(session) == (SAMPLES / case / "stdout.txt").read_text().strip()
    assert final_text(None) is None and final_text({"history": [{"message": {"role": "user"}}]}) is None


def test_verbose_log_times_the_write_run():
    """A real run through the runner: the log gives each event its time, in UTC, in causal order."""
    case = CAPTURED / "oracle_write"
    events = events_of(case)
    resp, start, result, final = events
    started = process_info(case)["started_at"]
    assert all(e.timestamp and e.timestamp.endswith("Z") for e in events)
    assert started < resp.timestamp <= start.timestamp <= result.timestamp <= final.timestamp
    assert resp.latency_ms == 26.0  # the log's own stream duration
    assert (resp.response_id, final.response_id) == ("chatcmpl-oracle-1", "chatcmpl-oracle-2")  # as tier A has them
    assert result.latency_ms is not None and 0 <= result.latency_ms < 1000
    # cn exits before its log is flushed: the last response is timed by its last logged chunk
    timeline = parse_log((case / "cn.log").read_bytes(), anchor=started)
    assert timeline.streams[-1].done is None and final.timestamp == timeline.streams[-1].last_chunk.timestamp


def test_verbose_log_bash_error_has_exit_code():
    case = CAPTURED / "bash_error"
    result = next(e for e in events_of(case) if e.event_type == "tool_call_result")
    assert result.status == "error" and result.exit_code == 3 and result.error_type is None
    assert "Error (exit code 3): oops" in result.payload["output"]
    assert result.timestamp is not None and result.latency_ms is not None


def test_log_offset_calibrated_from_the_anchor():
    """Log times are the agent's local time; the anchor (process start, UTC) recovers the zone."""
    log = (b"2026-11-22 13:30:01.000 [ab] [debug]: Creating chat completion stream {}\n"
           b'2026-11-22 13:30:02.500 [ab] [debug]: Stream complete {"duration": 12}\n'
           b'2026-11-22 13:30:03.000 [ab] [debug]: Updated tool call state '
           b'{"toolCallId": "c1", "updates": {"status": "calling"}}\n')
    tl = parse_log(log, anchor="2026-11-22T11:29:59.000Z")  # agent clock at UTC+02:00
    assert tl.streams[0].timestamp == "2026-11-22T11:30:02.500Z" and tl.streams[0].duration_ms == 12
    assert tl.state("c1", ("calling",)).timestamp == "2026-11-22T11:30:03.000Z"
    tl = parse_log(log, anchor="2026-11-22T17:59:58.000Z")  # UTC-04:30
    assert tl.streams[0].start.timestamp == "2026-11-22T18:00:01.000Z"


def test_log_streams_skip_retried_attempts_and_carry_the_response_id():
    log = "".join(f"2026-11-22 11:00:0{i}.000 [ab] [debug]: {m}\n" for i, m in enumerate([
        'Creating chat completion stream {"messageCount":1}',
        'Retry attempt {"attempt":0,"delay":777,"error":"500 boom"}',
        'Creating chat completion stream {"messageCount":1}',
        'Received chunk {"chunkCount":1,"chunk":{"id":"chatcmpl-7","choices":[]}}',
        'Received chunk {"chunkCount":2,"chunk":{"id":"chatcmpl-7","choices":[]}}',
        'Stream complete {"duration":40}',
        'Creating chat completion stream {"messageCount":3}',
        'Received chunk {"chunkCount":1,"chunk":{"id":"chatcmpl-8"}}',
        'Creating chat completion stream {"messageCount":5}',
    ]))
    tl = parse_log(log.encode(), anchor="2026-11-22T11:00:00Z")
    assert [s.response_id for s in tl.streams] == ["chatcmpl-7", "chatcmpl-8", None]
    assert tl.streams[2].timestamp is None  # the log ends before anything of it arrived
    assert tl.streams[0].timestamp == "2026-11-22T11:00:05.000Z" and tl.streams[0].duration_ms == 40
    assert tl.streams[1].timestamp == "2026-11-22T11:00:07.000Z" and tl.streams[1].duration_ms is None


def test_redaction_of_the_log():
    line = ('x {"model":{"apiKey":"sk-abc","apiBase":"http://h/v1"},"authorization":"Bearer zz",'
            '"inputTokens":5} my-secret-key!')
    out = redact_text(line, ("my-secret-key!",))
    assert "sk-abc" not in out and "Bearer zz" not in out and "my-secret-key!" not in out
    assert '"apiBase":"http://h/v1"' in out and '"inputTokens":5' in out and out.count("[REDACTED]") == 3
    for case in (CAPTURED / "oracle_write", CAPTURED / "bash_error"):
        assert "gripprobe-no-key" not in (case / "cn.log").read_text()


# --------------------------------------------------------------------------------------------- garbage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["history", "message", "role", "content", "toolCalls", "toolCallStates", "id",
                         "function", "name", "arguments", "status", "toolCallId", "output", "parsedArgs",
                         "usage", "assistant", "done", "errored", "canceled", "prompt_tokens"]) | st.text(max_size=8),
        inner, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_session_garbage_never_raises(value):
    session = {"history": value} if not isinstance(value, dict) else value
    data = json.dumps(session, indent=2, default=str).encode()
    loaded = load_session(data)
    if loaded is not None:
        for e in session_events(loaded, phase="measured", file_name="s.json", file_text=data.decode()):
            assert e.raw_artifact_ref.startswith("s.json:")
    final_text(loaded)


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, path + (i,))


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


SAMPLE_SESSIONS = [json.loads((SAMPLES / c / "session.json").read_text()) for c in ("success", "bad_args")]


@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, 1), pick=st.integers(0, 10_000), new=json_values)
def test_mutated_real_session_never_raises(which, pick, new):
    """One node of a real session replaced by anything: still events or nothing, never an exception."""
    base = SAMPLE_SESSIONS[which]
    nodes = list(_nodes(base))
    session = _replaced(base, nodes[pick % len(nodes)], new)
    data = json.dumps(session, indent=2, default=str).encode()
    loaded = load_session(data)
    if loaded is not None:
        events = session_events(loaded, phase="measured", file_name="s.json", file_text=data.decode())
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        final_text(loaded)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400), anchor=st.none() | st.text(max_size=30))
def test_bytes_garbage_never_raises(data, anchor):
    assert load_session(data) is None or isinstance(load_session(data), dict)
    parse_log(data, anchor=anchor)
    stderr_events(data, phase="warmup", file_name="e")


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(st.tuples(
    st.sampled_from(["Creating chat completion stream", "Received chunk", "Stream complete ",
                     "Updated tool call state ", "other "]),
    json_values), max_size=8), anchor=st.none() | st.sampled_from(["2026-11-22T11:00:00Z", "garbage"]))
def test_log_garbage_never_raises(lines, anchor):
    text = "".join(f"2026-11-22 11:00:0{i % 10}.000 [x] [debug]: {msg}{json.dumps(meta, default=str)}\n"
                   for i, (msg, meta) in enumerate(lines))
    timeline = parse_log(text.encode(), anchor=anchor)
    session = load_session((SAMPLES / "success" / "session.json").read_bytes())
    session_events(session, phase="measured", file_name="s", timeline=timeline)


def test_a_call_to_an_excluded_tool_is_a_native_denial():
    """Real cn 1.5.47 run with a policy denying writes (``--exclude Write --exclude Edit --exclude MultiEdit``,
    ``--allow`` the rest, no ``--auto``) against a scripted model that calls Write though it was not offered:
    cn refuses it before it runs (``canceled``, "Command blocked by security policy") and ends the run."""
    case = CAPTURED / "write_excluded"
    data = (case / "session.json").read_bytes()
    session = load_session(data)
    timeline = parse_log((case / "cn.log").read_bytes(), anchor=process_info(case)["started_at"])
    events = session_events(session, phase="measured", file_name="session.json", file_text=data.decode(),
                            timeline=timeline, excluded=("Write", "Edit", "MultiEdit"))
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "permission_request",
                                              "permission_response", "tool_call_result"]
    _, start, request, response, result = events
    assert start.tool_call_id == request.tool_call_id == response.tool_call_id == result.tool_call_id == "call_scripted_1"
    assert request.payload["raw_name"] == "Write" and request.payload["kind"] == "write"
    assert request.payload["input"] == {"filepath": "greeting.txt",
                                        "content": "Hello, GripProbe!\nThis file was saved with the write tool.\n"}
    assert request.payload["options"] == [] and request.status == "started"
    assert response.payload["outcome"] == "deny" and response.payload["decided_by"] == "native"
    assert response.payload["rule"] == "native: --exclude Write" and response.status == "success"
    assert response.payload["request_id"] == request.payload["request_id"]
    assert result.status == "error" and result.error_type == "tool_canceled"
    assert result.payload["output"] == "Command blocked by security policy"
    assert '"toolCallId": "call_scripted_1"' in line_of(case, request.raw_artifact_ref)
    # timed like the result (by the log's "canceled" state update when cn flushed it; here it did not)
    assert request.timestamp == response.timestamp == result.timestamp
    # without the driver's flags the rule still names cn's permissions
    plain = session_events(session, phase="measured", file_name="session.json", file_text=data.decode())
    assert next(e for e in plain if e.event_type == "permission_response").payload["rule"] == \
        "native: cn tool permissions"


def test_a_canceled_call_without_the_refusal_text_is_no_denial():
    """Only cn's permission refusal is a denial; another canceled call (the rest of a batch) is not."""
    session = {"history": [{"message": {"role": "assistant", "content": "", "toolCalls": [
        {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
        "toolCallStates": [{"toolCallId": "c1", "status": "canceled", "parsedArgs": {"command": "ls"},
                            "output": [{"content": "Tool call was canceled"}]}]}]}
    events = session_events(session, phase="measured", file_name="session.json")
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "tool_call_result"]


def test_reasoning_in_the_logs_chunks_is_a_thought_when_the_stream_is_complete():
    """Real cn run through ``gripprobe run`` (shell_denied: Bash excluded) against oracle-deny-then-recover,
    whose turns carry ``reasoning_content``: cn keeps it only in its verbose log's chunks. A thought per
    response whose stream the log has complete (cn's last lines are usually lost: no thought for that one)."""
    case = CAPTURED / "reasoning_shell_denied"
    events = events_of(case)
    responses = [e for e in events if e.event_type == "model_response"]
    thoughts = [e for e in events if e.event_type == "thought"]
    assert thoughts and all(t.payload["text"] == "There is no shell tool here; I will do without it." for t in thoughts)
    by_id = {r.event_id: r for r in responses}
    for t in thoughts:
        assert t.parent_id in by_id and t.response_id == by_id[t.parent_id].response_id
        assert t.timestamp == by_id[t.parent_id].timestamp
    assert [e.event_type for e in events][:2] == ["model_response", "thought"]
    assert len(thoughts) <= len(responses)

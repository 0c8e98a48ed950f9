"""The replay backend (``kind: replay``, issue 22): a session recorded from a real run is served back by
conversation, so the agent sees what the model said then; a request the recording does not hold is answered
409 ``replay_mismatch`` and named in the case's warnings; a request the real server never answered is held
until the phase's timeout.

The recordings here are made the way ``scripts/real_model.py`` makes the real model's: from a real run's proxy
records (on the oracle, which is fast), written by the script's own ``write``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core.backends.replay import (
    TOOL_RESULT, RecordingError, conversation, conversation_key, first_difference, load_recording, response_bytes,
    scrub, scrub_pairs,
)
from gripprobe_core.phase import SEEN_ROOT

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "real_model.py"

REPLAY_SPEC = """id: replayed
label: a replayed recording
backends:
  - id: replay
    kind: replay
    model_id: recorded-model
    recording: {recording}
policy:
  timeout_s: {timeout}
"""


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gripprobe_core.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _cases(results: Path) -> dict[str, dict]:
    run = sorted((results / "runs").iterdir())[-1]
    return {json.loads((c / "case.json").read_bytes())["key"]["test"]: json.loads((c / "case.json").read_bytes())
            for c in sorted((run / "cases").iterdir())}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A recording of reference × oracle-perfect on save_file and shell_pwd, written by the recorder."""
    base = tmp_path_factory.mktemp("recorded")
    out = _cli("run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "-t", "shell_pwd", "--no-warmup",
               "--results", str(base / "real"))
    assert out.returncode == 0, out.stdout + out.stderr
    run = next((base / "real" / "runs").iterdir())
    rec = base / "rec" / "session"
    w = subprocess.run([sys.executable, str(SCRIPT), "write", str(run), "--model", "oracle-perfect", "--out", str(rec)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert w.returncode == 0, w.stdout + w.stderr
    assert "| reference | tool | save_file | PASS |" in w.stdout
    return rec


def _specs(tmp_path: Path, recording: Path, timeout: float = 30) -> Path:
    specs = tmp_path / "specs"
    (specs / "models").mkdir(parents=True)
    (specs / "models" / "replayed.yaml").write_text(REPLAY_SPEC.format(recording=recording, timeout=timeout))
    return specs


def _copy(recording: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for p in recording.iterdir():
        (dest / p.name).write_bytes(p.read_bytes())
    return dest


@pytest.mark.e2e
def test_a_replayed_session_gives_the_recorded_verdicts_and_serves_every_exchange(recorded, tmp_path):
    meta = json.loads((recorded / "recording.json").read_bytes())
    assert {(c["test"], c["status"]) for c in meta["cases"]} == {("save_file", "PASS"), ("shell_pwd", "PASS")}
    out = _cli("run", "--specs", str(_specs(tmp_path, recorded)), "-a", "reference", "-m", "replayed",
               "-t", "save_file", "-t", "shell_pwd", "--no-warmup", "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stdout + out.stderr
    cases = _cases(tmp_path / "r")
    assert {t: c["verdict"]["status"] for t, c in cases.items()} == {"save_file": "PASS", "shell_pwd": "PASS"}
    for test, case in cases.items():
        assert not [w for w in case.get("warnings") or [] if w.startswith("replay_mismatch")], case["warnings"]
        recorded_calls = json.loads((recorded / f"reference__{test}__tool.json").read_bytes())["exchanges"]
        run = sorted((tmp_path / "r" / "runs").iterdir())[-1]
        log = (run / "cases" / f"reference__replayed__replay__tool__{test}" / "artifacts" / "replay.measured.jsonl")
        served = [json.loads(line) for line in log.read_text().splitlines()]
        assert [s["served"] for s in served] == [f"reference__{test}__tool#{i}" for i in range(len(recorded_calls))]


@pytest.mark.e2e
def test_a_request_the_recording_does_not_hold_is_named_as_a_mismatch(recorded, tmp_path):
    rec = _copy(recorded, tmp_path / "edited")
    case_file = rec / "reference__save_file__tool.json"
    data = json.loads(case_file.read_bytes())
    for exchange in data["exchanges"]:  # the recording now answers another task
        user = exchange["conversation"][1]
        assert user[0] == "user"
        user[1] = "Write a poem about tool calls."
    case_file.write_text(json.dumps(data))
    out = _cli("run", "--specs", str(_specs(tmp_path, rec)), "-a", "reference", "-m", "replayed", "-t", "save_file",
               "--no-warmup", "--results", str(tmp_path / "r"))
    assert "Traceback" not in out.stderr, out.stderr
    case = _cases(tmp_path / "r")["save_file"]
    assert case["verdict"]["status"] != "PASS"
    mismatch = [w for w in case["warnings"] if w.startswith("replay_mismatch: measured ")]
    assert mismatch, case["warnings"]
    assert "message 2 (user) differs in its text" in mismatch[0] and "reference__save_file__tool exchange 1" in mismatch[0]
    run = sorted((tmp_path / "r" / "runs").iterdir())[-1]
    record = run / "cases" / "reference__replayed__replay__tool__save_file" / "artifacts" / "proxy.measured.http.jsonl"
    first = json.loads(record.read_text().splitlines()[0])
    assert first["x_gripprobe_status"] == 409 and "replay_mismatch" in (first["x_gripprobe_error"] or "")


@pytest.mark.e2e
def test_a_request_the_real_server_never_answered_is_held_until_the_timeout(recorded, tmp_path):
    rec = _copy(recorded, tmp_path / "unanswered")
    case_file = rec / "reference__save_file__tool.json"
    data = json.loads(case_file.read_bytes())
    data["exchanges"][-1]["status"] = 0  # as the recorder writes a call cut by the phase's end
    data["exchanges"][-1]["response"] = None
    case_file.write_text(json.dumps(data))
    out = _cli("run", "--specs", str(_specs(tmp_path, rec, timeout=3)), "-a", "reference", "-m", "replayed",
               "-t", "save_file", "--no-warmup", "--results", str(tmp_path / "r"))
    assert "Traceback" not in out.stderr, out.stderr
    case = _cases(tmp_path / "r")["save_file"]
    assert case["verdict"]["status"] == "TIMEOUT", case["verdict"]
    assert not [w for w in case["warnings"] if w.startswith("replay_mismatch")]


def test_a_replay_spec_needs_a_recording_that_is_there(tmp_path):
    specs = _specs(tmp_path, tmp_path / "nowhere")
    out = _cli("validate", "--specs", str(specs))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "replayed.yaml:7" in out.stdout + out.stderr and "no such recording folder" in out.stdout + out.stderr
    (specs / "models" / "replayed.yaml").write_text(REPLAY_SPEC.format(recording="x", timeout=5).replace(
        "    recording: x\n", ""))
    out = _cli("validate", "--specs", str(specs))
    assert out.returncode == 2 and "needs recording: FOLDER" in out.stdout + out.stderr


def test_the_conversation_keeps_what_the_model_said_and_leaves_out_what_the_machine_printed():
    pairs = scrub_pairs([("/srv/results", "<results>")])
    a = {"messages": [
        {"role": "system", "content": f"Work in {SEEN_ROOT}/workspace. Today is 2026-11-27 13:01."},
        {"role": "user", "content": [{"type": "text", "text": "Save   the date\nin /srv/results/x"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"b": 1, "a": "date"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Fri Nov 27 13:01:07 UTC 2026"}]}
    b = json.loads(json.dumps(a))
    b["messages"][0]["content"] = f"Work in {SEEN_ROOT}/workspace. Today is 2027-01-02 09:15."
    b["messages"][2]["tool_calls"][0]["id"] = "call_other"
    b["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"a":"date","b":1}'
    b["messages"][3]["content"] = "Sat Jan  2 09:15:00 UTC 2027"
    conv = conversation(a, pairs)
    assert conv == conversation(b, pairs)
    assert conv[0][1] == f"Work in {SEEN_ROOT}/workspace. Today is 0-0-0 0:0."
    assert conv[1][1] == "Save the date in <results>/x"
    assert conv[2][2] == [["shell", '{"a":"date","b":1}']]
    assert conv[3] == ["tool", TOOL_RESULT, []]
    c = json.loads(json.dumps(a))
    c["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"a": "pwd", "b": 1}'
    assert conversation_key("/v1/chat/completions", conversation(c, pairs)) != conversation_key(
        "/v1/chat/completions", conv)
    assert "message 3 (assistant) differs in its tool calls" in first_difference(conversation(c, pairs), conv)


def test_anthropic_and_responses_wires_have_a_conversation_too():
    pairs = scrub_pairs()
    anthropic = {"system": [{"type": "text", "text": "be brief"}], "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    assert conversation(anthropic, pairs) == [["system", "be brief", []], ["user", "hi", []],
                                              ["assistant", "", [["Write", '{"path":"a"}']]],
                                              ["user", TOOL_RESULT, []]]
    responses = {"instructions": "be brief", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"ls\"}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": "a b"}]}
    assert conversation(responses, pairs) == [["system", "be brief", []], ["user", "hi", []],
                                              ["function_call", "", [["shell", '{"cmd":"ls"}']]],
                                              ["function_call_output", TOOL_RESULT, []]]


def test_this_machines_paths_are_scrubbed_but_the_sandbox_path_is_not():
    pairs = scrub_pairs()
    home = str(Path.home())
    text = f"{ROOT}/x {home}/y {SEEN_ROOT}/workspace"
    out = scrub(text, pairs)
    assert str(ROOT) not in out and home + "/" not in out and f"{SEEN_ROOT}/workspace" in out


def test_responses_are_served_as_the_server_sent_them(tmp_path):
    from gripprobe_core.backends.replay import Exchange

    sse = Exchange("c", 0, "/v1/chat/completions", [], 200, True,
                   [{"data": {"choices": [{"delta": {"content": "hé"}}]}}, {"event": "x", "data": "[DONE]"}], "")
    body, ctype = response_bytes(sse)
    assert ctype == "text/event-stream"
    assert body.decode() == 'data: {"choices": [{"delta": {"content": "hé"}}]}\n\nevent: x\ndata: [DONE]\n\n'
    ndjson = Exchange("c", 0, "/api/chat", [], 200, True, [{"message": {"content": "a"}}, {"done": True}], "")
    assert response_bytes(ndjson) == (b'{"message": {"content": "a"}}\n{"done": true}\n', "application/x-ndjson")
    whole = Exchange("c", 0, "/v1/chat/completions", [], 200, False, [{"choices": []}], "")
    assert response_bytes(whole) == (b'{"choices": []}', "application/json")


@pytest.mark.parametrize("content, problem", [
    (b"{not json", "unreadable"),
    (b'{"format": 9, "exchanges": []}', "not a recorded case of format 1"),
    (b'{"format": 1, "exchanges": [{"path": "/v1/x", "status": 999, "conversation": []}]}', "status is not an HTTP status"),
    (b'{"format": 1, "exchanges": [{"path": "v1", "status": 200, "conversation": []}]}', "path is not a request path"),
    (b'{"format": 1, "exchanges": [{"path": "/v1", "status": 200, "conversation": [["user"]]}]}', "conversation is not"),
    (b'{"format": 1, "exchanges": ["x"]}', "is not an object"),
])
def test_a_malformed_recording_is_refused_in_one_line(tmp_path, content, problem):
    (tmp_path / "a__b__c.json").write_bytes(content)
    with pytest.raises(RecordingError) as err:
        load_recording(tmp_path)
    assert problem in str(err.value) and "\n" not in str(err.value)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(body=_json | st.dictionaries(st.sampled_from(["messages", "input", "system", "instructions", "prompt"]),
                                    _json | st.lists(st.dictionaries(
                                        st.sampled_from(["role", "content", "type", "tool_calls", "name", "arguments"]),
                                        _json, max_size=5), max_size=4), max_size=5))
def test_the_conversation_never_raises_and_its_key_is_stable(body):
    pairs = scrub_pairs()
    conv = conversation(body, pairs)
    assert conversation_key("/v1/chat/completions", conv) == conversation_key(
        "/v1/chat/completions", json.loads(json.dumps(conv)))


@pytest.mark.e2e
def test_the_scripts_replay_compares_every_recorded_verdict(recorded, tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "replay", str(recorded), "--results", str(tmp_path / "r")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines == ["ok   reference tool save_file: real PASS/None, replay PASS/None",
                     "ok   reference tool shell_pwd: real PASS/None, replay PASS/None"], lines


def test_an_agent_flooding_the_replay_with_unrecorded_requests_costs_a_bounded_record(tmp_path):
    """1,010 requests the recording does not hold: 409 each, 20 named in full and the rest counted in the
    warnings, the phase's replay log cut at its cap (and saying so); a recorded request still answered."""
    import asyncio

    import aiohttp

    from gripprobe_core.backends import replay

    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "a__b__c.json").write_text(json.dumps({"format": 1, "exchanges": [
        {"path": "/v1/chat/completions", "status": 200, "stream": False,
         "conversation": [["user", "hi", []]], "response": {"choices": []}}]}))
    rec = load_recording(tmp_path / "rec")
    log = tmp_path / "replay.measured.jsonl"

    async def flood() -> tuple[list[int], list[str]]:
        server = replay.ReplayServer(rec, model="m", log_path=log)
        await server.start()
        try:
            async with aiohttp.ClientSession() as s:
                codes = []
                for i in range(1010):
                    async with s.post(server.base_url + "/v1/chat/completions",
                                      json={"messages": [{"role": "user", "content": f"other {'x' * (i % 50)}"}]}) as r:
                        codes.append(r.status)
                async with s.post(server.base_url + "/v1/chat/completions",
                                  json={"messages": [{"role": "user", "content": "hi"}]}) as r:
                    codes.append(r.status)
            return codes, replay.ReplayEndpoint(server).warnings
        finally:
            await server.stop()

    codes, warnings = asyncio.run(flood())
    assert codes == [409] * 1010 + [200]
    assert len(warnings) == replay.MAX_MISMATCHES + 1
    assert warnings[-1].endswith("and 990 more request(s) the recording does not hold")
    assert all(w.startswith("replay_mismatch: ") for w in warnings)
    lines = log.read_text().splitlines()
    assert len(lines) == replay.MAX_LOG_LINES and "log_cut" in json.loads(lines[-1])

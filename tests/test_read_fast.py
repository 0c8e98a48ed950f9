"""Reading stored results fast without reading them differently (issue 21, item 5): the fast parser gives
json.loads's value wherever it accepts a text and refuses what strict JSON refuses; ``json_lines`` yields exactly
what it always did, its ``only`` filter skips only lines that cannot hold the words; bounded reads read the
file, not the bound; a case folder opened once reads below it with every refusal :class:`Stored` has; the
aggregate's fidelity from filtered events is the fidelity of every event."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gripprobe_core.jsonl import json_lines, loads
from gripprobe_core.reports.aggregate import case_fidelity
from gripprobe_core.store import NotRegularFile, Stored, read_regular
from gripprobe_core.store.files import read_upto
from gripprobe_core.telemetry.fidelity import EVENT_WORDS, phase_fidelity, wire_text_count

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)


def old_json_lines(data: bytes):
    """What json_lines yielded before the fast parser (the reference it must equal)."""
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield lineno, obj


@given(JSON)
def test_loads_gives_the_value_json_loads_gives(value):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), json.dumps(value, indent=2)):
        got = loads(text.encode())
        assert got == json.loads(text) and type(got) is type(json.loads(text))


@pytest.mark.parametrize("text", [b'{"a": NaN}', b'{"a": Infinity}', b'[-Infinity]', b'{"a": 1e400}',
                                  b'{"a": "\\ud800"}', b'{"a": "\xff"}', b'\xef\xbb\xbf{}', b'{"a": 1} x',
                                  b'{"a": "\x01"}', b"[" * 5000 + b"]" * 5000, b""])
def test_loads_refuses_what_strict_json_refuses(text):
    with pytest.raises(ValueError):
        loads(text)


def test_loads_keeps_big_integers_exact_and_the_last_duplicate_key():
    assert loads(b'{"n": 123456789012345678901234567890}')["n"] == 123456789012345678901234567890
    assert loads(b'{"a": 1, "a": 2}') == {"a": 2} == json.loads('{"a": 1, "a": 2}')


LINES = st.lists(JSON.map(lambda v: json.dumps(v).encode()) | st.sampled_from([
    b'{"event_type": "tool_call_start", "x": NaN}', b'{"event_type": "tool\\u005fcall_start"}', b"not json",
    b'{"a": "\xff\xfe"}', b'{"a": "\\ud800"}', b'{"event_type": "model_response", "n": 1e999}', b"   ", b"[1]",
    b'{"event_type": "thought"}', b'{"a": 123456789012345678901234567890}']), max_size=12)


@settings(max_examples=300)
@given(LINES)
def test_json_lines_yields_exactly_what_it_always_did(lines):
    data = b"\n".join(lines)
    assert list(json_lines(data)) == list(old_json_lines(data))


@settings(max_examples=300)
@given(LINES)
def test_only_skips_just_the_lines_that_cannot_hold_the_words(lines):
    data = b"\n".join(lines)
    raw = data.splitlines()
    want = [(n, o) for n, o in old_json_lines(data)
            if b"\\" in raw[n - 1] or any(w in raw[n - 1] for w in EVENT_WORDS)]
    assert list(json_lines(data, EVENT_WORDS)) == want


def test_an_escaped_event_type_is_still_read():
    (_, obj), = json_lines(b'{"event_type": "tool\\u005fcall_start"}\n{"event_type": "thought"}', EVENT_WORDS)
    assert obj["event_type"] == "tool_call_start"


def test_a_bounded_read_reads_the_file_not_the_bound(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 1000)
    assert read_regular(p, 64 * 1024 * 1024) == b"x" * 1000
    assert read_regular(p, 10) == b"x" * 10 and read_regular(p, 1000) == b"x" * 1000
    assert read_regular(p) == b"x" * 1000 and read_regular(p, 0) == b""
    with open(p, "rb") as fh:  # the file grows between the size and the read: read on, up to the bound
        size_then = os.fstat(fh.fileno()).st_size
        with open(p, "ab") as more:
            more.write(b"y" * 500)
        assert size_then == 1000 and read_upto(fh, 1200) == b"x" * 1000 + b"y" * 200
    with open(p, "rb") as fh:
        assert read_upto(fh, None) == b"x" * 1000 + b"y" * 500


def test_an_open_folder_reads_below_it_and_refuses_what_stored_refuses(tmp_path):
    run = tmp_path / "run"
    case = run / "cases" / "c"
    (case / "artifacts").mkdir(parents=True)
    (case / "artifacts" / "events.measured.jsonl").write_bytes(b'{"a": 1}\n')
    (tmp_path / "secret").write_text("secret")
    (case / "link").symlink_to(tmp_path / "secret")
    (case / "dirlink").symlink_to(tmp_path)
    os.mkfifo(case / "fifo")
    with (Stored(run) / "cases" / "c").opened() as folder:
        assert folder.read("artifacts/events.measured.jsonl", 100) == b'{"a": 1}\n'
        assert folder.read("artifacts/events.measured.jsonl", 3) == b'{"a'
        with pytest.raises(FileNotFoundError):
            folder.read("case.json")
        for bad in ("link", "dirlink/secret", "fifo", "artifacts", "../c/link", "/etc/passwd"):
            with pytest.raises(NotRegularFile):
                folder.read(bad)
        with folder.child("artifacts") as art:
            assert art.read("events.measured.jsonl") == b'{"a": 1}\n' and art.folders() == []
        assert folder.folders() == ["artifacts"]  # the link to a folder is no folder here
        for bad in ("dirlink", "link", "fifo", "..", "/tmp"):
            with pytest.raises(NotRegularFile):
                folder.child(bad)
        with pytest.raises(FileNotFoundError):
            folder.child("nothing")
    (run / "cases" / "d").symlink_to(case)
    with pytest.raises(NotRegularFile):
        (Stored(run) / "cases" / "d").opened()
    with pytest.raises(FileNotFoundError):
        (Stored(run) / "cases" / "e").opened()


def test_case_fidelity_from_the_words_alone_is_the_fidelity_of_every_event(tmp_path):
    """A phase's events with noise around the calls (thoughts, usage, a torn line, a call spelled with an
    escape): the aggregate's filtered read counts what phase_fidelity counts on every line."""
    ev = [
        {"event_type": "model_response", "source_tier": "A", "payload": {"tool_call_nonstructured_count": 0}},
        {"event_type": "thought", "seen_by": ["B"], "payload": {"text": "tool_call_start? no"}},
        {"event_type": "tool_call_start", "seen_by": ["A", "B"], "tool_call_id": "c1",
         "payload": {"name": "write", "arguments": {"path": "a"}}},
        {"event_type": "tool_call_start", "seen_by": ["B"], "tool_call_id": "c2",
         "payload": {"name": "read", "arguments": {"path": "\u00e9"}}},
        {"event_type": "tool_call_result", "seen_by": ["A", "B"], "tool_call_id": "c1", "payload": {"name": "write"}},
        {"event_type": "usage", "source_tier": "A", "payload": {"n": 3}},
    ]
    lines = [json.dumps(e).encode() for e in ev]
    lines.insert(3, b'{"event_type": "tool\\u005fcall_start", "seen_by": ["A"], "tool_call_id": "c3", "payload": {}}')
    lines.insert(1, b'{"event_type": "tool_call_st')  # torn
    data = b"\n".join(lines) + b"\n"
    truth = [{"seq": 1, "name": "write", "tool_call_id": "c1", "arguments": {"path": "a"}}]
    art = tmp_path / "run" / "cases" / "c" / "artifacts"
    art.mkdir(parents=True)
    (art / "events.measured.jsonl").write_bytes(data)
    (art / "oracle.measured.jsonl").write_text("".join(json.dumps(t) + "\n" for t in truth))
    every = [o for _, o in json_lines(data)]
    assert wire_text_count(every) == 0
    want = {k: c.tally().as_dict() for k, c in phase_fidelity(every, truth, []).items()}
    got = case_fidelity(Stored(tmp_path / "run") / "cases" / "c")
    assert {k: t.as_dict() for k, t in got.items()} == want
    assert want["B_vs_A"]["n_reference"] == 2 and want["A_vs_truth"]["n_tested"] == 2  # the escaped call counted



@given(JSON | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x3000)))
@settings(max_examples=300)
def test_dumps_pretty_writes_the_value_dumps_writes_and_escapes_the_same_controls(value):
    from gripprobe_core.jsonl import _RAW_CONTROLS, dumps, dumps_pretty

    fast = dumps_pretty(value)
    assert fast.endswith(b"\n")
    assert json.loads(fast) == json.loads(dumps(value, indent=2, ensure_ascii=False))
    assert not _RAW_CONTROLS.search(fast.decode("utf-8"))  # DEL, C1, U+2028/9, bidi: escaped as dumps escapes them


def test_dumps_pretty_writes_null_for_what_json_cannot_hold():
    from gripprobe_core.jsonl import dumps_pretty

    assert json.loads(dumps_pretty({"a": [float("nan"), float("inf"), -float("inf"), 1.5]})) == {
        "a": [None, None, None, 1.5]}
    assert json.loads(dumps_pretty({"p": Path("/x")})) == {"p": "/x"}  # anything else as its str(), as json_bytes

"""A validator's source pointer names the call that produced the judged file (issue 22: it named the last
`cat` that read it). The rule is find_source's, documented in docs/validators.md ("Source pointer")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import SPECS, read_json, run_reference
from gripprobe_core.models.events import Event
from gripprobe_core.validators import find_source

FILE = "greeting.txt"


def start(seq: int, name: str, kind: str, arguments: Any, *, call_id: str | None = None, tier: str = "B") -> Event:
    return Event(event_type="tool_call_start", event_id=f"s{seq}", source_tier=tier, source="wrapper",
                 sequence=seq, tool_call_id=call_id, status="started",
                 payload={"raw_name": name, "name": name, "kind": kind, "arguments": arguments})


def result(seq: int, name: str, kind: str, status: str, *, call_id: str | None = None, tier: str = "B") -> Event:
    return Event(event_type="tool_call_result", event_id=f"r{seq}", source_tier=tier, source="wrapper",
                 sequence=seq, tool_call_id=call_id, status=status,
                 payload={"raw_name": name, "name": name, "kind": kind, "output": "..."})


def shell(seq: int, command: str, status: str = "success") -> list[Event]:
    """A shell call and its result (sequence ``seq`` and ``seq + 1``)."""
    cid = f"c{seq}"
    return [start(seq, "shell", "execute", {"command": command}, call_id=cid),
            result(seq + 1, "shell", "execute", status, call_id=cid)]


def write(seq: int, path: str = FILE, status: str = "success", content: str = "Hello\n") -> list[Event]:
    cid = f"c{seq}"
    return [start(seq, "write", "write", {"path": path, "content": content}, call_id=cid),
            result(seq + 1, "write", "write", status, call_id=cid)]


def pointed(events: list[Event], path: str = FILE) -> int | None:
    pointer = find_source(events, path)
    return None if pointer is None else pointer.sequence


# ------------------------------------------------------------------------------------------ the case

def test_a_write_then_repeated_cat_points_at_the_write():
    """The real model's session: the file written with the write tool, then `cat greeting.txt` over and over
    (each succeeded). The pointer named the last cat; the write made the file."""
    events = write(2)
    for n in range(12):
        events += shell(4 + 2 * n, f"cat {FILE}")
    pointer = find_source(events, FILE)
    assert pointer is not None
    assert (pointer.kind, pointer.sequence, pointer.event_type, pointer.field_path, pointer.phase) == (
        "tool_call", 2, "tool_call_start", f"file:{FILE}", "measured")


def test_the_proxys_view_of_the_same_calls_points_at_the_write_too():
    """Tier A sees arguments as the JSON text the model wrote, and results by call id."""
    events = [start(2, "write", "write", json.dumps({"path": FILE, "content": "Hello"}), call_id="a", tier="A"),
              result(3, "write", "write", "success", call_id="a", tier="A"),
              start(5, "shell", "execute", json.dumps({"command": f"cat {FILE}"}), call_id="b", tier="A"),
              result(6, "shell", "execute", "success", call_id="b", tier="A")]
    assert pointed(events) == 2


# ------------------------------------------------------------------------------------------------ failures

def test_a_failed_write_then_a_successful_one_points_at_the_successful_one():
    assert pointed([*write(1, status="error"), *write(3), *shell(5, f"cat {FILE}")]) == 3
    # a later failure does not take the pointer from the write that worked
    assert pointed([*write(1), *write(3, status="error"), *write(5, status="timeout")]) == 1
    # a failed shell write after a successful write tool call: the write
    assert pointed([*write(1), *shell(3, f"echo hi > {FILE}", status="error")]) == 1


def test_when_every_write_failed_the_last_write_still_beats_a_read():
    """A failed write is still the only call that tried to make the file; a cat that read it made nothing."""
    assert pointed([*write(1, status="error"), *write(3, status="error"), *shell(5, f"cat {FILE}")]) == 3


def test_results_without_call_ids_pair_with_the_oldest_waiting_call_of_their_name():
    events = [start(1, "write", "write", {"path": FILE, "content": "a"}),
              result(2, "write", "write", "error"),
              start(3, "write", "write", {"path": FILE, "content": "b"}),
              result(4, "write", "write", "success"),
              start(5, "write", "write", {"path": FILE, "content": "c"}),
              result(6, "write", "write", "error")]
    assert pointed(events) == 3


# ------------------------------------------------------------------------------------------------- the shell

#: Shell commands that write greeting.txt (in a workspace where it is judged).
WRITING = [
    f"echo 'Hello' > {FILE}",
    f"echo Hello>{FILE}",
    f"printf '%s\\n' Hello >> {FILE}",
    f"cd sub && echo hi > ../{FILE}",
    f"echo hi 1> {FILE} 2>&1",
    f"ls nothing &> {FILE}",
    f"cat > {FILE} <<'EOF'\nHello, it's me\nEOF",
    f"cat <<EOF > {FILE}\nHello\nEOF",
    f"echo Hello | tee -a {FILE} >/dev/null",
    f"tee {FILE} <<< Hello",
    f"cp /tmp/draft.txt {FILE}",
    f"cp /tmp/{FILE} .",
    f"mv draft.txt ./{FILE}",
    f"install -m 644 draft.txt {FILE}",
    f"touch {FILE}",
    f"sed -i 's/Hi/Hello/' {FILE}",
    f"sed -i.bak -e 's/Hi/Hello/' {FILE}",
    f"perl -pi -e 's/Hi/Hello/' {FILE}",
    f"dd if=/dev/zero of={FILE} bs=1 count=0",
    f"curl -fsS -o {FILE} http://127.0.0.1/x",
    f"wget -q -O {FILE} http://127.0.0.1/x",
    f"curl --output={FILE} http://127.0.0.1/x",
    f"bash -c 'echo Hello > {FILE}'",
    f"sudo FOO=1 tee {FILE} < /tmp/draft.txt",
    f"python3 -c \"open('{FILE}', 'w').write('Hello')\"",
    f"python3 - <<'EOF'\nfrom pathlib import Path\nPath('{FILE}').write_text('Hello')\nEOF",
    f"python3 -c 'import json; json.dump([1], open(\"{FILE}\", \"w\"))'",
    f"node -e \"require('fs').writeFileSync('{FILE}', 'Hello')\"",
]

#: Shell commands that name greeting.txt without writing it.
READING = [
    f"cat {FILE}",
    f"head -n 1 {FILE}",
    f"less {FILE}",
    f"grep Hello {FILE}",
    f"wc -l < {FILE}",
    f"cat {FILE} 2>&1",
    f"cat {FILE} > /tmp/copy.txt",
    f"cp {FILE} backup.txt",
    f"sed -n 1p {FILE}",
    f"echo 'run: echo hi > {FILE}'",
    f"diff {FILE} expected.txt && echo same",
    f"python3 -c \"print(open('{FILE}').read())\"",
    f"ls -l {FILE}",
]


@pytest.mark.parametrize("command", WRITING)
def test_a_shell_command_that_writes_the_file_beats_a_later_cat(command):
    assert pointed([*shell(1, command), *shell(3, f"cat {FILE}")]) == 1
    assert pointed([*shell(1, command), *write(3)]) == 3  # two calls that write: the last


@pytest.mark.parametrize("command", READING)
def test_a_shell_command_that_only_names_the_file_is_a_mention(command):
    assert pointed([*shell(1, command), *shell(3, f"cat {FILE}")]) == 3  # equals: the last
    assert pointed([*write(1), *shell(3, command)]) == 1


def test_shell_redirection_after_a_write_of_another_file():
    events = [*write(1, path="notes.md", content=f"I will write {FILE} with the shell."),
              *shell(3, f"echo Hello > {FILE}"), *shell(5, f"cat {FILE}")]
    assert pointed(events) == 3


def test_a_write_of_another_file_whose_text_names_it_is_only_a_mention():
    assert pointed([*write(1), *write(3, path="README.md", content=f"See {FILE}.")]) == 1
    # a patch tool with no path argument: the patch names the file it changes
    patch = f"*** Begin Patch\n*** Add File: {FILE}\n+Hello\n*** End Patch\n"
    assert pointed([start(1, "apply_patch", "write", {"input": patch}), *shell(2, f"cat {FILE}")]) == 1


def test_the_path_judged_in_a_folder_matches_by_name():
    assert pointed([*shell(1, "cd sub && echo x > a.txt"), *shell(3, "cat sub/a.txt")], "sub/a.txt") == 1


# ------------------------------------------------------------------------------------------------- fallback

def test_a_history_of_reads_only_points_at_the_last_read():
    events = [start(1, "read", "read", {"path": FILE}, call_id="a"), result(2, "read", "read", "success", call_id="a"),
              start(3, "grep", "search", {"pattern": "Hello", "path": FILE}, call_id="b"),
              result(4, "grep", "search", "success", call_id="b"),
              start(5, "read", "read", {"path": FILE}, call_id="c"), result(6, "read", "read", "error", call_id="c")]
    assert pointed(events) == 3  # the last that did not fail
    assert pointed([*events, *shell(7, f"cat {FILE}")]) == 7  # a shell call naming it beats a read
    assert pointed(events, "other.txt") is None
    assert find_source(events, "") is None and find_source([], FILE) is None


# ----------------------------------------------------------------------------------------------- properties

NAMES = ["greeting.txt", "a.txt", "out.json", "x"]
_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(NAMES),
    st.builds(lambda pre, n, post: f"{pre}{n}{post}",
              st.sampled_from(["", "cat ", "echo hi > ", "tee -a ", "cp a ", "sed -i s/a/b/ ", "'", "\"",
                               "python3 -c \"open('", "bash -c '", "2>&", "<<EOF\n", "dd of="]),
              st.sampled_from(NAMES),
              st.sampled_from(["", "'", "\"", " .", "', 'w')\"", " > /dev/null", "\nEOF", " && cat x", "/"])),
)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                         st.sampled_from(["path", "file_path", "command", "content", "cmd", "args", "files", "x"]),
                         inner, max_size=4),
                     max_leaves=12)
_arguments = st.one_of(_json, _json.map(lambda v: json.dumps(v)), st.text(max_size=40))
_payload = st.fixed_dictionaries(
    {"name": st.sampled_from(["shell", "write", "read", "grep", "mystery", ""]),
     "kind": st.sampled_from(["read", "write", "execute", "search", "fetch", "other", None, 7, ["write"]]),
     "arguments": _arguments})
_event = st.builds(
    lambda event_type, seq, payload, call_id, status, tier: Event(
        event_type=event_type, event_id=f"e{seq}", source_tier=tier, source="wrapper", sequence=seq,
        tool_call_id=call_id, status=status, payload=payload),
    st.sampled_from(["tool_call_start", "tool_call_result", "model_response", "thought"]),
    st.integers(0, 50), _payload, st.sampled_from([None, "a", "b", "c"]),
    st.sampled_from(["started", "success", "error", "timeout", "unknown"]), st.sampled_from(["A", "B", "C", "D"]))


def _mentions(event: Event, name: str) -> bool:
    if event.event_type != "tool_call_start":
        return False
    arguments = event.payload.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    return name in text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event, max_size=12), st.sampled_from([*NAMES, "sub/greeting.txt", "", "/", "dir/"]))
def test_find_source_never_raises_and_points_at_a_mention_whenever_there_is_one(events, path):
    pointer = find_source(events, path)
    name = Path(path).name
    mentioning = [e for e in events if name and _mentions(e, name)]
    if not mentioning:
        assert pointer is None
        return
    assert pointer is not None and pointer.kind == "tool_call" and pointer.field_path == f"file:{path}"
    assert any(e.sequence == pointer.sequence and e.phase == pointer.phase for e in mentioning)


# ------------------------------------------------------------------------------------------------ end to end

SAVE_THEN_CAT = f"""\
id: save_then_cat
title: Save a file with the write tool, then read it back twice with the shell
prompt: Create {FILE} with the line Hello, GripProbe! using your write tool, then show it with cat.
requires: [write, execute]
validators:
  - kind: file_equals
    path: {FILE}
    expected: "Hello, GripProbe!"
reference:
  - write:
      path: {FILE}
      content: "Hello, GripProbe!\\n"
  - shell: cat {FILE}
  - shell: cat {FILE}
"""


@pytest.mark.e2e
def test_a_real_run_points_the_validator_at_the_write(tmp_path):
    """The reference agent on the oracle's perfect profile plays the issue's session (write, then cat twice);
    case.json's validator evidence names the write's tool_call_start."""
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "tests" / "save_then_cat.yaml").write_text(SAVE_THEN_CAT)
    out = run_reference(tmp_path / "r", tests=("save_then_cat",), specs=specs)
    (res,) = out.results
    assert res.verdict.status == "PASS"
    case_dir = out.run_dir.case(res.case_id)
    events = [json.loads(line) for line in (case_dir / "artifacts" / "events.measured.jsonl").read_text().splitlines()]
    starts = {e["payload"]["name"]: e["sequence"] for e in reversed(events) if e["event_type"] == "tool_call_start"}
    cats = [e for e in events if e["event_type"] == "tool_call_start" and e["payload"]["name"] == "shell"]
    assert len(cats) == 2 and all(FILE in e["payload"]["arguments"]["command"] for e in cats)
    (validator,) = read_json(case_dir / "case.json")["validators"]
    assert validator["passed"]
    assert validator["source"] == {"kind": "tool_call", "sequence": starts["write"], "event_type": "tool_call_start",
                                   "field_path": f"file:{FILE}", "phase": "measured"}

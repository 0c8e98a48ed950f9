"""Built-in validators: each passes on the right output and fails, without raising, on anything else."""

from __future__ import annotations

from dataclasses import replace

import json
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pluggy
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gripprobe_core import hookspecs
from gripprobe_core.defaults import validators as builtin_validators
from gripprobe_core.defaults.validators import BUILTIN_VALIDATORS
from gripprobe_core.challenges.nonce import nonce_proof
from gripprobe_core import ValidatorContext
from gripprobe_core.models.events import Event
from gripprobe_core.models.specs import FixtureFile, TestSpec
from gripprobe_core.pluginmanager import GripProbePluginManager, Registry
from gripprobe_core.runvalues import make_run_values
from gripprobe_core.validators import find_source

DOCS = Path(__file__).resolve().parents[1] / "docs" / "validators.md"
RUN_VALUES = make_run_values(datetime(2025, 3, 12, 15, 30).astimezone())  # a Wednesday


def make_test(fixtures: list[FixtureFile] | None = None) -> TestSpec:
    return TestSpec(id="t", title="t", prompt="p", validators=[{"kind": "file_exists", "path": "x"}],
                    reference=[{"shell": "true"}], fixtures=fixtures or [])


def ctx_for(workspace: Path, *, challenge: dict[str, Any] | None = None, requests: list[dict] | None = None,
            events: list[Event] | None = None, fixtures: list[FixtureFile] | None = None,
            agent_workspace: str | None = None) -> ValidatorContext:
    return ValidatorContext(workspace=workspace, test=make_test(fixtures), run_values=dict(RUN_VALUES),
                            challenge=challenge or {}, challenge_requests=requests or [], events=events or [],
                            agent_workspace=agent_workspace)


def run(kind: str, ctx: ValidatorContext, **options: Any):
    result = BUILTIN_VALIDATORS[kind](ctx, options)
    assert result.kind == kind
    return result


def tool_call(seq: int, name: str, kind: str, arguments: Any) -> Event:
    return Event(event_type="tool_call_start", event_id=f"e{seq}", source_tier="B", source="wrapper",
                 sequence=seq, payload={"name": name, "kind": kind, "arguments": arguments})


# ------------------------------------------------------------------------------------------- file_equals

def test_file_equals_literal_ignores_trailing_whitespace(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nbeta\n\n  ")
    assert run("file_equals", ctx_for(tmp_path), path="a.txt", expected="alpha\nbeta").passed
    (tmp_path / "b.txt").write_text("alpha\r\nbeta\r\n")
    assert run("file_equals", ctx_for(tmp_path), path="b.txt", expected="alpha\nbeta\n").passed


def test_file_equals_strip_false_is_exact(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    assert run("file_equals", ctx_for(tmp_path), path="a.txt", expected="alpha\n", strip=False).passed
    result = run("file_equals", ctx_for(tmp_path), path="a.txt", expected="alpha", strip=False)
    assert not result.passed


def test_file_equals_reports_what_differs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nBETA\n")
    result = run("file_equals", ctx_for(tmp_path), path="a.txt", expected="alpha\nbeta\n")
    assert not result.passed
    assert result.observed == "alpha\nBETA" and result.expected == "alpha\nbeta\n"
    assert "differs" in result.message


def test_file_equals_today(tmp_path: Path) -> None:
    (tmp_path / "date.txt").write_text("2025-03-12\n")
    assert run("file_equals", ctx_for(tmp_path), path="date.txt", expected={"today": True}).passed
    (tmp_path / "date.txt").write_text("2025-03-11\n")
    result = run("file_equals", ctx_for(tmp_path), path="date.txt", expected={"today": True})
    assert not result.passed and result.expected == "2025-03-12"


def test_file_equals_workspace_path_accepts_real_and_logical_path(tmp_path: Path) -> None:
    """The agent saw its workspace through a link (``pwd`` may print either form); the harness's copy is judged."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    ctx = ctx_for(real, agent_workspace=str(link))
    (real / "pwd.txt").write_text(f"{link}\n")
    assert run("file_equals", ctx, path="pwd.txt", expected={"workspace_path": True}).passed
    (real / "pwd.txt").write_text(f"{real}\n")
    assert run("file_equals", ctx, path="pwd.txt", expected={"workspace_path": True}).passed
    (real / "pwd.txt").write_text(f"{tmp_path}\n")
    assert not run("file_equals", ctx, path="pwd.txt", expected={"workspace_path": True}).passed


def test_file_equals_workspace_path_uses_the_path_the_agent_saw(tmp_path: Path) -> None:
    (tmp_path / "pwd.txt").write_text("/runs/x/measured/workspace\n")
    ctx = ctx_for(tmp_path, agent_workspace="/runs/x/measured/workspace")
    assert run("file_equals", ctx, path="pwd.txt", expected={"workspace_path": True}).passed


def test_file_equals_var_and_templated_literal(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("token=abc123\n")
    ctx = ctx_for(tmp_path, challenge={"token": "abc123"})
    assert run("file_equals", ctx, path="t.txt", expected="token=${challenge_token}").passed
    (tmp_path / "h.txt").write_text("Week of 2025-03-17")
    assert run("file_equals", ctx, path="h.txt", expected={"var": "next_week_heading"}).passed
    assert not run("file_equals", ctx, path="h.txt", expected={"var": "this_week_heading"}).passed


@pytest.mark.parametrize("options", [
    {"expected": "x"},                                          # no path
    {"path": "a", "expected": "x", "colour": "red"},            # unknown key
    {"path": "a", "expected": {"today": True, "var": "x"}},     # two expectations
    {"path": "a", "expected": {}},                              # none
    {"path": "a", "expected": {"var": "no_such_variable"}},     # unknown variable
])
def test_file_equals_bad_options_fail_with_explanation(tmp_path: Path, options: dict) -> None:
    (tmp_path / "a").write_text("x")
    result = BUILTIN_VALIDATORS["file_equals"](ctx_for(tmp_path), options)
    assert not result.passed and result.message.startswith("invalid options for file_equals")


def test_file_equals_missing_file_and_directory(tmp_path: Path) -> None:
    result = run("file_equals", ctx_for(tmp_path), path="nope.txt", expected="x")
    assert not result.passed and "missing" in result.observed and result.source is None
    (tmp_path / "d").mkdir()
    result = run("file_equals", ctx_for(tmp_path), path="d", expected="x")
    assert not result.passed and "directory" in result.message


def test_file_equals_binary_garbage(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"\xff\xfe\x00garbage\x80")
    result = run("file_equals", ctx_for(tmp_path), path="a.txt", expected="garbage")
    assert not result.passed and "UTF-8" in result.message


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/hostname", "a/../../outside.txt", ""])
def test_paths_outside_the_workspace_are_refused(tmp_path: Path, path: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside.txt").write_text("x")
    result = run("file_equals", ctx_for(ws), path=path, expected="x")
    assert not result.passed


def test_no_symlink_is_followed_in_the_workspace_or_on_its_path(tmp_path: Path) -> None:
    """The harness's copy never holds a link, so one there was planted: never followed, whether it leads out
    of the workspace, stays inside it, or is the workspace itself (a stored workspace swapped for /)."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("x")
    (ws / "sub" / "inside.txt").write_text("x")
    (ws / "a.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "b.txt").symlink_to("sub/inside.txt")
    (ws / "c").symlink_to("sub")
    for path, name in (("a.txt", "a.txt"), ("b.txt", "b.txt"), ("c/inside.txt", "c")):
        result = run("file_equals", ctx_for(ws), path=path, expected="x")
        assert not result.passed and f"{name!r} is a symlink (not followed)" in result.message, path
    assert run("file_equals", ctx_for(ws), path="sub/inside.txt", expected="x").passed
    root_link = tmp_path / "ws-link"
    root_link.symlink_to("/")
    result = run("file_exists", ctx_for(root_link), path="etc/hostname")
    assert not result.passed and "a symlink on its path" in result.message and "not followed" in result.message


def test_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")
    started = time.monotonic()
    result = run("file_equals", ctx_for(tmp_path), path="pipe.txt", expected="x")
    assert not result.passed and "regular" in result.message
    assert time.monotonic() - started < 5


def test_file_absent_passes_only_when_nothing_is_there(tmp_path: Path) -> None:
    assert run("file_absent", ctx_for(tmp_path), path="greeting.txt").passed
    assert run("file_absent", ctx_for(tmp_path), path="sub/greeting.txt").passed
    (tmp_path / "greeting.txt").write_text("hi")
    failed = run("file_absent", ctx_for(tmp_path), path="greeting.txt")
    assert not failed.passed and "2 bytes" in failed.observed
    (tmp_path / "d").mkdir()
    assert not run("file_absent", ctx_for(tmp_path), path="d").passed  # a directory is something
    (tmp_path / "link").symlink_to("/etc/hostname")
    assert not run("file_absent", ctx_for(tmp_path), path="link").passed  # a link is something, never followed
    assert not run("file_absent", ctx_for(tmp_path), path="../x").passed  # a spec error, not a pass


def test_final_answer_matches_the_agents_last_words(tmp_path: Path) -> None:
    import dataclasses

    ctx = dataclasses.replace(ctx_for(tmp_path), final_text="The shell command was DENIED, so I used the write tool.")
    assert run("final_answer", ctx, pattern=r"denied|not allowed").passed
    assert not run("final_answer", ctx, pattern=r"denied", ignore_case=False).passed
    assert not run("final_answer", ctx, pattern=r"wrote it with the shell").passed
    silent = run("final_answer", ctx_for(tmp_path), pattern="denied")
    assert not silent.passed and silent.observed == "<no final answer>"
    bad = run("final_answer", ctx, pattern="(unclosed")
    assert not bad.passed and "not a regular expression" in bad.message


def test_file_exists(tmp_path: Path) -> None:
    assert not run("file_exists", ctx_for(tmp_path), path="hello.py").passed
    (tmp_path / "hello.py").write_text("print(1)\n")
    result = run("file_exists", ctx_for(tmp_path), path="hello.py")
    assert result.passed and "9 bytes" in result.observed


# -------------------------------------------------------------------------------------------- find_source

def test_find_source_points_at_the_last_producing_call(tmp_path: Path) -> None:
    events = [
        tool_call(1, "write", "write", {"path": "pwd.txt", "content": "old"}),
        tool_call(2, "shell", "execute", {"command": "pwd > pwd.txt"}),
        tool_call(3, "read", "read", {"path": "pwd.txt"}),  # reading cannot have produced it
        tool_call(4, "shell", "execute", {"command": "ls"}),
    ]
    pointer = find_source(events, "pwd.txt")
    assert pointer is not None
    assert (pointer.kind, pointer.sequence, pointer.event_type, pointer.field_path) == (
        "tool_call", 2, "tool_call_start", "file:pwd.txt")
    assert find_source(events[2:], "pwd.txt").sequence == 3  # only a read: better than nothing
    assert find_source(events, "other.txt") is None
    assert find_source([tool_call(1, "shell", "execute", "cd sub && echo x > a.txt")], "sub/a.txt").sequence == 1


def test_validators_attach_the_source(tmp_path: Path) -> None:
    (tmp_path / "pwd.txt").write_text(f"{tmp_path}\n")
    events = [tool_call(7, "shell", "execute", {"command": "pwd > pwd.txt"})]
    result = run("file_equals", ctx_for(tmp_path, events=events), path="pwd.txt", expected={"workspace_path": True})
    assert result.passed and result.source is not None and result.source.sequence == 7
    result = run("file_equals", ctx_for(tmp_path), path="pwd.txt", expected={"workspace_path": True})
    assert result.source is None


# ------------------------------------------------------------------------------------------ patch_applied

SEED = 'HOST = "127.0.0.1"\nTIMEOUT_SECONDS = 30\nRETRIES = 3\n'


def test_patch_applied_expected(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SEED.replace("30", "45"))
    assert run("patch_applied", ctx_for(tmp_path), path="s.py", expected=SEED.replace("30", "45")).passed
    (tmp_path / "s.py").write_text(SEED.replace("30", "45") + "EXTRA = 1\n")
    result = run("patch_applied", ctx_for(tmp_path), path="s.py", expected=SEED.replace("30", "45"))
    assert not result.passed and "differs" in result.message


def test_patch_applied_contains_and_not_contains(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SEED)
    opts = {"path": "s.py", "contains": ["TIMEOUT_SECONDS = 45"], "not_contains": ["TIMEOUT_SECONDS = 30"]}
    result = run("patch_applied", ctx_for(tmp_path), **opts)
    assert not result.passed and "missing" in result.message and "still contains" in result.message
    (tmp_path / "s.py").write_text(SEED.replace("30", "45"))
    assert run("patch_applied", ctx_for(tmp_path), **opts).passed


def test_patch_applied_needs_something_to_check(tmp_path: Path) -> None:
    result = run("patch_applied", ctx_for(tmp_path), path="s.py")
    assert not result.passed and result.message.startswith("invalid options")


def test_patch_applied_missing_file(tmp_path: Path) -> None:
    assert not run("patch_applied", ctx_for(tmp_path), path="s.py", expected=SEED).passed


# ------------------------------------------------------------------------------------------------- web

NONCE_FACTS = {"url": "http://127.0.0.1:9/challenge/tok", "token": "tok", "nonce": "n0nce", "payload": "amber-1",
               "proof": nonce_proof("n0nce", "amber-1")}
FETCHED = [{"ts": "t", "method": "GET", "path": "/challenge/tok", "query": "", "status": 200}]


def proof_text(nonce: str = "n0nce", payload: str = "amber-1", proof: str | None = None) -> str:
    return f"NONCE={nonce}\nPAYLOAD={payload}\nPROOF={proof or nonce_proof(nonce, payload)}\n"


def test_web_nonce_proof_passes_with_proof_and_fetch(tmp_path: Path) -> None:
    (tmp_path / "proof.txt").write_text(proof_text())
    result = run("web_nonce_proof", ctx_for(tmp_path, challenge=NONCE_FACTS, requests=FETCHED), path="proof.txt")
    assert result.passed, result.message
    (tmp_path / "proof.txt").write_text(proof_text().upper().replace("NONCE=N0NCE", "NONCE=n0nce")
                                        .replace("PAYLOAD=AMBER-1", "PAYLOAD=amber-1"))
    assert run("web_nonce_proof", ctx_for(tmp_path, challenge=NONCE_FACTS, requests=FETCHED), path="proof.txt").passed


@pytest.mark.parametrize("text, requests, fragment", [
    (proof_text(proof="0" * 64), FETCHED, "PROOF wrong"),
    (proof_text(nonce="other"), FETCHED, "NONCE wrong"),
    ("NONCE=n0nce\nPAYLOAD=amber-1\n", FETCHED, "PROOF missing"),
    (proof_text(), [], "never fetched"),
    (proof_text(), [dict(FETCHED[0], status=404)], "never fetched"),
    (proof_text(), [dict(FETCHED[0], method="POST")], "never fetched"),
    (proof_text(), [dict(FETCHED[0], path="/challenge/other")], "never fetched"),
    (proof_text(), ["garbage", {"path": None}, {}], "never fetched"),
])
def test_web_nonce_proof_failures(tmp_path: Path, text: str, requests: list, fragment: str) -> None:
    (tmp_path / "proof.txt").write_text(text)
    result = run("web_nonce_proof", ctx_for(tmp_path, challenge=NONCE_FACTS, requests=requests), path="proof.txt")
    assert not result.passed and fragment in result.message


def test_web_nonce_proof_without_challenge_or_file(tmp_path: Path) -> None:
    (tmp_path / "proof.txt").write_text(proof_text())
    assert "no challenge" in run("web_nonce_proof", ctx_for(tmp_path), path="proof.txt").message
    result = run("web_nonce_proof", ctx_for(tmp_path, challenge=NONCE_FACTS, requests=FETCHED), path="nope.txt")
    assert not result.passed and "missing" in result.message


SEARCH_FACTS = {"url": "http://127.0.0.1:9/search", "query_url": "http://127.0.0.1:9/search?q=abc", "token": "abc",
                "answer": {"id": "r-1", "url": "https://docs.example.test/r-1"},
                "data_url": "http://127.0.0.1:9/data.json", "raw_data": '{"query": "abc", "results": [{"id": "r-2"}]}'}
SEARCHED = [{"ts": "t", "method": "GET", "path": "/search", "query": "q=abc", "status": 200}]


def test_web_search_result_from_challenge(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text(json.dumps({"id": "r-1", "url": "https://docs.example.test/r-1",
                                                      "title": "extra keys are fine"}))
    ctx = ctx_for(tmp_path, challenge=SEARCH_FACTS, requests=SEARCHED)
    assert run("web_search_result", ctx, path="answer.json", expected_from_challenge=True, require_request=True).passed
    ctx = ctx_for(tmp_path, challenge=SEARCH_FACTS, requests=[dict(SEARCHED[0], query="q=abd")])
    result = run("web_search_result", ctx, path="answer.json", expected_from_challenge=True, require_request=True)
    assert not result.passed and "never queried" in result.message
    result = run("web_search_result", ctx, path="answer.json", expected_from_challenge=True)
    assert result.passed  # the request is only checked when asked for


def test_web_search_result_wrong_answer_bad_json_garbage(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, challenge=SEARCH_FACTS, requests=SEARCHED)
    for content in (b'{"id": "r-2", "url": "https://docs.example.test/r-1"}', b'{"id": "r-1"}', b"[1, 2]",
                    b"not json at all", b"\xff\xfe\x00\x01", b"[" * 100000, b""):
        (tmp_path / "answer.json").write_bytes(content)
        result = run("web_search_result", ctx, path="answer.json", expected_from_challenge=True)
        assert not result.passed, content[:40]


def test_web_search_result_literal_and_raw_fact(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text('{"id": "r-9", "url": "u"}')
    assert run("web_search_result", ctx_for(tmp_path), path="answer.json", expected={"id": "r-9"}).passed
    assert not run("web_search_result", ctx_for(tmp_path), path="answer.json", expected={"id": "r-8"}).passed
    (tmp_path / "data.json").write_text('{"results": [{"id": "r-2"}], "query": "abc"}')  # same JSON, other layout
    data_fetch = [{"ts": "t", "method": "GET", "path": "/data.json", "query": "", "status": 200}]
    ctx = ctx_for(tmp_path, challenge=SEARCH_FACTS, requests=data_fetch)
    opts = {"path": "data.json", "expected_from_challenge": "raw_data", "require_request": "data_url"}
    assert run("web_search_result", ctx, **opts).passed
    (tmp_path / "data.json").write_text('{"results": [{"id": "r-2"}, {"id": "r-3"}], "query": "abc"}')
    assert not run("web_search_result", ctx, **opts).passed


def test_web_search_result_bad_options(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text("{}")
    for options in ({"path": "answer.json"}, {"path": "answer.json", "expected_from_challenge": "nope"},
                    {"path": "answer.json", "expected": {}, "require_request": "nope"}):
        result = BUILTIN_VALIDATORS["web_search_result"](ctx_for(tmp_path, challenge=SEARCH_FACTS), options)
        assert not result.passed and result.message.startswith("invalid options"), options
    result = run("web_search_result", ctx_for(tmp_path), path="answer.json", expected_from_challenge=True)
    assert not result.passed and "no challenge" in result.message


# ---------------------------------------------------------------------------------------- weekly_plan_task

PLAN = ("# Plan\n\n## ${this_week_heading}\n\n- [ ] Old task\n\n## ${next_week_heading}\n\n- [ ] Demo\n\n"
        "## Backlog\n\n- [ ] Later\n")
PLAN_FIXTURE = [FixtureFile(path="Plan.md", content=PLAN)]
TASK = "Book a room"


def plan(text: str) -> str:
    return (text.replace("${this_week_heading}", RUN_VALUES["this_week_heading"])
            .replace("${next_week_heading}", RUN_VALUES["next_week_heading"]))


def judge_plan(tmp_path: Path, text: str):
    (tmp_path / "Plan.md").write_text(text)
    return run("weekly_plan_task", ctx_for(tmp_path, fixtures=PLAN_FIXTURE), path="Plan.md", task=TASK)


def test_weekly_plan_task_passes(tmp_path: Path) -> None:
    assert RUN_VALUES["next_week_heading"] == "Week of 2025-03-17"
    good = plan(PLAN).replace("- [ ] Demo\n", f"- [ ] Demo\n- [ ] {TASK}\n")
    assert judge_plan(tmp_path, good).passed
    first = plan(PLAN).replace("- [ ] Demo\n", f"- [ ] {TASK}\n\n- [ ] Demo\n")  # blank lines may change
    assert judge_plan(tmp_path, first).passed


@pytest.mark.parametrize("edit, fragment", [
    (lambda p: p.replace("- [ ] Old task\n", f"- [ ] Old task\n- [ ] {TASK}\n"), "no '- [ ] Book a room'"),
    (lambda p: p.replace("- [ ] Demo\n", f"- [ ] Demo\n- [x] {TASK}\n"), "no '- [ ] Book a room'"),
    (lambda p: p.replace("- [ ] Demo\n", f"- [ ] Demo\n- [ ] {TASK}\n- [ ] {TASK}\n"), "2 times"),
    (lambda p: p.replace("- [ ] Demo\n", f"- [ ] Demo\n- [ ] {TASK}\n").replace("- [ ] Later\n", f"- [ ] {TASK}\n"),
     "also under 'Backlog'"),
    (lambda p: p.replace("- [ ] Demo\n", f"- [ ] {TASK}\n"), "the rest of the plan changed"),
    (lambda p: p.replace("- [ ] Demo\n", f"- [ ] Demo\n- [ ] {TASK}\n").replace("# Plan\n", ""), "changed"),
    (lambda p: p + f"\n## {RUN_VALUES['next_week_heading']}\n- [ ] {TASK}\n", "changed"),
])
def test_weekly_plan_task_failures(tmp_path: Path, edit, fragment: str) -> None:
    result = judge_plan(tmp_path, edit(plan(PLAN)))
    assert not result.passed and fragment in result.message, result.message


def test_weekly_plan_task_garbage_and_missing(tmp_path: Path) -> None:
    assert not run("weekly_plan_task", ctx_for(tmp_path, fixtures=PLAN_FIXTURE), path="Plan.md", task=TASK).passed
    (tmp_path / "Plan.md").write_bytes(b"\x00\xff## \xfe\n- [ ] " + TASK.encode())
    assert not run("weekly_plan_task", ctx_for(tmp_path, fixtures=PLAN_FIXTURE), path="Plan.md", task=TASK).passed
    result = run("weekly_plan_task", ctx_for(tmp_path), path="Plan.md", task=TASK, heading_var="nope")
    assert not result.passed and result.message.startswith("invalid options")


# ------------------------------------------------------------------------------------------ command_output

def test_command_output(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text('print("Hello")\n')
    assert run("command_output", ctx_for(tmp_path), command=["python3", "hello.py"], expected="Hello").passed
    result = run("command_output", ctx_for(tmp_path), command=["python3", "hello.py"], expected="Bye")
    assert not result.passed and result.observed == "Hello"


def test_command_output_exit_code_missing_script_and_binary(tmp_path: Path) -> None:
    (tmp_path / "fail.py").write_text('print("Hello"); raise SystemExit(3)\n')
    result = run("command_output", ctx_for(tmp_path), command=["python3", "fail.py"], expected="Hello")
    assert not result.passed and "exit code 3" in result.message
    assert run("command_output", ctx_for(tmp_path), command=["python3", "fail.py"], expected="Hello",
               exit_code=None).passed
    assert not run("command_output", ctx_for(tmp_path), command=["python3", "nope.py"], expected="Hello").passed
    result = run("command_output", ctx_for(tmp_path), command=["no-such-binary-gripprobe"], expected="x")
    assert not result.passed and "cannot start" in result.message
    (tmp_path / "bin.py").write_text('import sys; sys.stdout.buffer.write(b"\\xff\\x00")\n')
    assert not run("command_output", ctx_for(tmp_path), command=["python3", "bin.py"], expected="x").passed


def test_command_output_times_out_quickly(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("command_output", ctx_for(tmp_path), command=["bash", "-c", "sleep 30 & sleep 30"], expected="",
                 timeout_s=0.5)
    assert not result.passed and "timed out" in result.message
    assert time.monotonic() - started < 10


def test_command_output_templates_and_cwd(tmp_path: Path) -> None:
    """Sandboxed, the command sees the workspace where the agent saw it, and what it writes stays in a
    scratch copy (the stored workspace is evidence)."""
    from gripprobe_core.runner.sandbox import resolve_sandbox

    box = resolve_sandbox("auto")
    if not box.confined and os.environ.get("CI") == "true":
        pytest.fail(f"bubblewrap is required under CI=true: {box.warning}")
    (tmp_path / "sub").mkdir()
    seen = "/tmp/gripprobe-agent-view/measured/workspace"
    ctx = replace(ctx_for(tmp_path, challenge={"token": "zz9"}), sandbox=box, agent_workspace=seen)
    script = "echo ${challenge_token}; pwd; echo x > made.txt"
    result = run("command_output", ctx, command=["bash", "-c", script], cwd="sub", expected="zz9\n" + seen + "/sub")
    assert result.passed == box.confined, result
    assert not (tmp_path / "sub" / "made.txt").exists()
    # unsandboxed: a scratch copy too, at its own path
    ctx = replace(ctx, sandbox=None)
    result = run("command_output", ctx, command=["bash", "-c", script], cwd="sub", expected="zz9")
    assert result.observed.startswith("zz9\n/") and not result.observed.startswith("zz9\n" + str(tmp_path))
    assert not (tmp_path / "sub" / "made.txt").exists()
    result = run("command_output", ctx, command=["pwd"], cwd="../", expected="x")
    assert not result.passed and result.message.startswith("invalid options")


# ------------------------------------------------------------------------------------ never raise on bytes

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.binary(max_size=2000))
def test_no_validator_raises_on_arbitrary_bytes(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for name in ("a.txt", "proof.txt", "answer.json", "Plan.md"):
            (ws / name).write_bytes(content)
        ctx = ctx_for(ws, challenge={**NONCE_FACTS, **SEARCH_FACTS}, requests=FETCHED + SEARCHED,
                      fixtures=PLAN_FIXTURE)
        results = [
            run("file_equals", ctx, path="a.txt", expected="expected text"),
            run("patch_applied", ctx, path="a.txt", expected="x", contains=["y"]),
            run("web_nonce_proof", ctx, path="proof.txt"),
            run("web_search_result", ctx, path="answer.json", expected_from_challenge=True),
            run("weekly_plan_task", ctx, path="Plan.md", task=TASK),
        ]
        assert all(isinstance(r.passed, bool) for r in results)
        assert not any(r.passed for r in results)


# ----------------------------------------------------------------------------------- registration, docs

def test_registered_through_the_hook() -> None:
    pm = pluggy.PluginManager("gripprobe")
    pm.add_hookspecs(hookspecs)
    pm.register(builtin_validators, name="gripprobe_core.defaults.validators")
    registry = Registry.collect(GripProbePluginManager(pm))
    assert registry.validators == BUILTIN_VALIDATORS
    assert set(BUILTIN_VALIDATORS) == {"file_equals", "file_exists", "file_absent", "final_answer", "patch_applied",
                                       "web_nonce_proof", "web_search_result", "weekly_plan_task", "command_output"}


def test_every_validator_has_an_options_model_and_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for kind, fn in BUILTIN_VALIDATORS.items():
        model = fn.options_model  # type: ignore[attr-defined]
        assert f"## `{kind}`" in text, f"docs/validators.md lacks a section for {kind}"
        for option in model.model_fields:
            assert f"`{option}`" in text.split(f"## `{kind}`", 1)[1].split("\n## ", 1)[0], (kind, option)

"""Validator paths: the workspace rule (checked by ``validate`` and again when judging) and the reader that
never leaves the workspace, never blocks on a FIFO and reads at most its cap. Real files, symlinks and
FIFOs in a tmp workspace."""

from __future__ import annotations

import os
import time
import typing

from pathlib import Path

import pytest

from hypothesis import given, settings, strategies as st
from pydantic import BaseModel, ValidationError

from gripprobe_core.defaults.validators import BUILTIN_VALIDATORS
from gripprobe_core import ValidatorContext
from gripprobe_core.models.results import ProcessResult, TelemetrySummary
from gripprobe_core.models.specs import TestSpec
from gripprobe_core.pluginmanager import make_plugin_manager
from gripprobe_core.runner.judge import derive_verdict, phase_harness_failure, run_validators
from gripprobe_core.validators import WorkspacePath, is_invalid_options
from gripprobe_core.validators.workspace import (
    MAX_READ_BYTES, read_workspace_file, workspace_directory, workspace_path_problem,
)
from test_validators import RUN_VALUES, ctx_for, make_test, run

#: Every option of a built-in validator that names a place in the workspace.
PATH_OPTIONS = {
    "file_equals": "path", "file_exists": "path", "file_absent": "path", "patch_applied": "path",
    "web_nonce_proof": "path",
    "web_search_result": "path", "weekly_plan_task": "path", "command_output": "cwd",
}
#: The other options each kind needs, so that only the path decides.
OTHER_OPTIONS: dict[str, dict] = {
    "file_equals": {"expected": "x"}, "file_exists": {}, "file_absent": {}, "patch_applied": {"contains": ["x"]},
    "web_nonce_proof": {}, "web_search_result": {"expected": {}}, "weekly_plan_task": {"task": "t"},
    "command_output": {"command": ["true"], "expected": ""},
}
BAD = ["/etc/hostname", "../outside.txt", "a/../../outside.txt", "./../x", "", "${workspace}/out.txt",
       "../${today}.txt", "/${name}"]
GOOD = ["a.txt", "sub/a.txt", "a/../b.txt", "./a.txt", "${today}.txt", "sub/${challenge_token}", "."]


def _options_model(kind: str) -> type[BaseModel]:
    return BUILTIN_VALIDATORS[kind].options_model  # type: ignore[attr-defined]


def test_every_path_like_option_is_a_workspace_path() -> None:
    for kind, fn in BUILTIN_VALIDATORS.items():
        model = fn.options_model  # type: ignore[attr-defined]
        found = {name for name, field in model.model_fields.items()
                 if field.annotation is str and all(m in field.metadata for m in typing.get_args(WorkspacePath)[1:])}
        named = {name for name in model.model_fields if "path" in name or name in ("cwd", "dir", "file")}
        assert found == ({PATH_OPTIONS[kind]} if kind in PATH_OPTIONS else set()), (kind, found)  # final_answer: none
        # A new option that sounds like a place must be a WorkspacePath too (or be listed here with a reason).
        assert named <= found | {"heading_var"}, (kind, named)


@pytest.mark.parametrize("kind", sorted(PATH_OPTIONS))
@pytest.mark.parametrize("path", BAD)
def test_validate_refuses_paths_that_leave_the_workspace(kind: str, path: str) -> None:
    with pytest.raises(ValidationError) as info:
        _options_model(kind).model_validate({PATH_OPTIONS[kind]: path, **OTHER_OPTIONS[kind]})
    (error,) = info.value.errors()
    assert error["loc"] == (PATH_OPTIONS[kind],)
    assert error["msg"].startswith(f"Value error, path {path!r} ")


@pytest.mark.parametrize("kind", sorted(PATH_OPTIONS))
@pytest.mark.parametrize("path", GOOD)
def test_validate_accepts_paths_inside_the_workspace(kind: str, path: str) -> None:
    _options_model(kind).model_validate({PATH_OPTIONS[kind]: path, **OTHER_OPTIONS[kind]})


def test_the_messages_say_what_is_wrong() -> None:
    assert workspace_path_problem("/etc/x") == "is absolute; give it relative to the workspace (e.g. 'out.txt')"
    assert workspace_path_problem("a/../../x").startswith("leaves the workspace ('..' climbs above it)")
    with pytest.raises(ValidationError, match=r"\$\{workspace\} is the workspace's absolute path"):
        _options_model("file_exists").model_validate({"path": "${workspace}/a"})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(["a", "b", "..", ".", ""]), max_size=8))
def test_the_rule_matches_where_the_path_really_leads(parts: list[str]) -> None:
    path = "/".join(parts)
    depth, escapes = 0, False
    for part in parts:
        depth += {"..": -1, ".": 0, "": 0}.get(part, 1)
        escapes = escapes or depth < 0
    problem = workspace_path_problem(path)
    assert (problem is not None) == (escapes or not path or path.startswith("/")), (path, problem)


# --------------------------------------------------------------------------- at judgment time

@pytest.mark.parametrize("kind", sorted(PATH_OPTIONS))
def test_a_variable_that_leads_out_is_invalid_options_at_run_time(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    ctx = ctx_for(ws, challenge={"token": "../secret.txt", "nonce": "n", "payload": "p", "proof": "q", "url": "u",
                                 "answer": "{}"})
    options = {PATH_OPTIONS[kind]: "${challenge_token}", **OTHER_OPTIONS[kind]}
    _options_model(kind).model_validate(options)  # validate cannot know what the variable holds
    result = run(kind, ctx, **options)
    assert is_invalid_options(result), result
    assert result.message == (f"invalid options for {kind}: path '../secret.txt' (rendered from "
                              f"'${{challenge_token}}') leaves the workspace ('..' climbs above it); paths must "
                              f"stay inside the workspace")


def test_invalid_options_make_the_case_a_harness_error_never_a_fail(tmp_path: Path) -> None:
    gpm = make_plugin_manager()
    (tmp_path / "a.txt").write_text("hello")
    test = TestSpec(id="t", title="t", prompt="p", reference=[{"shell": "true"}], validators=[
        {"kind": "file_equals", "path": "a.txt", "expected": "hello"},
        {"kind": "file_exists", "path": "${challenge_token}"},
    ])
    ctx = ValidatorContext(workspace=tmp_path, test=test, run_values=dict(RUN_VALUES),
                           challenge={"token": "/etc/hostname"}, challenge_requests=[], events=[])
    results, error = run_validators(gpm.registry, test, ctx)
    assert [r.passed for r in results] == [True, False]
    assert error is not None and error.startswith("invalid options for file_exists: path '/etc/hostname'")
    confirmed = TelemetrySummary(event_capture_status="collected", tool_event_verdict="confirmed_tool_use",
                                 tool_event_verdict_reason="none")
    verdict, _ = derive_verdict(gpm.registry, "event_evaluator", test, process=ProcessResult(status="ok"), events=[],
                                summary=confirmed, validators=results, harness_error=phase_harness_failure(None, error))
    assert (verdict.status, verdict.failure_reason) == ("HARNESS_ERROR", "validator_error")


def test_an_agent_made_failure_is_still_a_fail(tmp_path: Path) -> None:
    gpm = make_plugin_manager()
    test = make_test()
    results, error = run_validators(gpm.registry, test, ctx_for(tmp_path))  # file_exists x: the agent never wrote it
    assert error is None and not results[0].passed and not is_invalid_options(results[0])


# --------------------------------------------------------------------------- the reader

@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "a.txt").write_text("inside")
    (workspace / "sub" / "b.txt").write_text("deeper")
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "c.txt").write_text("secret too")
    return workspace


def read(ws: Path, path: str, agent_workspace: str | None = None):
    return read_workspace_file(ctx_for(ws, agent_workspace=agent_workspace), path)


LINKS = [
    ("l.txt", "a.txt", "l.txt"), ("l.txt", "sub/b.txt", "l.txt"), ("sub/l.txt", "../a.txt", "sub/l.txt"),
    ("d", "sub", "d/b.txt"), ("sub/up", "..", "sub/up/a.txt"), ("l.txt", "{ws}/a.txt", "l.txt"),
    ("l.txt", "../secret.txt", "l.txt"), ("l.txt", "{tmp}/secret.txt", "l.txt"),
    ("sub/l.txt", "../../secret.txt", "sub/l.txt"), ("d", "../outdir", "d/c.txt"), ("d", "{tmp}/outdir", "d/c.txt"),
    ("d", "/etc", "d/hostname"), ("d", "/", "d/etc/hostname"), ("l.txt", "/dev/zero", "l.txt"),
    ("l.txt", "/proc/self/environ", "l.txt"), ("l.txt", "l.txt", "l.txt"),
]


@pytest.mark.parametrize("link, target, path", LINKS, ids=[
    "sibling", "into a directory", "up within", "directory link", "parent link within",
    "absolute into the workspace", "relative out", "absolute out", "out from a subdirectory", "directory relative",
    "directory absolute", "/etc", "/", "a device", "proc", "loop"])
def test_no_symlink_in_the_workspace_is_followed(ws: Path, link: str, target: str, path: str) -> None:
    """Validators judge the harness's copy, which never holds a link: one there was planted after the run,
    and is never followed, wherever it leads (inside, out, a device, itself)."""
    (ws / link).symlink_to(target.format(ws=ws, tmp=ws.parent))
    got = read(ws, path)
    first = link.split("/")[-1]
    assert got.text is None and got.problem == f"{first!r} is a symlink (not followed)", got
    assert read(ws, path, agent_workspace=str(ws.parent / "agent-view")).text is None


def test_a_workspace_that_is_a_link_is_not_read(ws: Path, tmp_path: Path) -> None:
    """A stored workspace swapped for a link (to /, to another case's copy) is not entered at all."""
    for target in ("/", str(ws)):
        link = tmp_path / f"link-{len(target)}"
        link.symlink_to(target)
        got = read(link, "etc/hostname" if target == "/" else "a.txt")
        assert got.text is None and "a symlink on its path" in got.problem, got


def test_fifos_are_never_opened(ws: Path) -> None:
    os.mkfifo(ws / "pipe.txt")
    (ws / "via-link.txt").symlink_to("pipe.txt")
    os.mkfifo(ws.parent / "outside-pipe")
    (ws / "out-pipe.txt").symlink_to("../outside-pipe")
    started = time.monotonic()
    assert read(ws, "pipe.txt").problem == "not a regular file"
    assert read(ws, "via-link.txt").problem == "'via-link.txt' is a symlink (not followed)"
    assert read(ws, "out-pipe.txt").problem == "'out-pipe.txt' is a symlink (not followed)"
    for kind in ("file_equals", "file_exists", "patch_applied", "web_nonce_proof"):
        options = {"path": "pipe.txt", **OTHER_OPTIONS[kind]}
        result = run(kind, ctx_for(ws, challenge={"nonce": "n", "payload": "p", "proof": "q", "url": "u"}), **options)
        assert not result.passed and not is_invalid_options(result)
    assert time.monotonic() - started < 5


def test_directories_and_missing_files(ws: Path) -> None:
    assert read(ws, "sub").problem == "is a directory, not a file"
    assert read(ws, ".").problem == "is a directory, not a file"
    assert read(ws, "nope.txt").problem == "file missing"
    assert read(ws, "nope/a.txt").problem == "file missing"
    assert read(ws, "a.txt/b").problem == "'a.txt' is not a directory"


def test_at_most_the_cap_is_read(ws: Path) -> None:
    with open(ws / "big.txt", "wb") as fh:
        fh.truncate(64 * MAX_READ_BYTES)  # sparse: 64 MiB on paper
    got = read(ws, "big.txt")
    assert got.truncated and len(got.text or "") == MAX_READ_BYTES and got.size == 64 * MAX_READ_BYTES


def test_command_output_cwd_never_leads_out(ws: Path) -> None:
    (ws / "etc").symlink_to("/etc")
    (ws / "inner").symlink_to("sub")
    result = run("command_output", ctx_for(ws), command=["pwd"], cwd="etc", expected="/etc")
    assert not result.passed and result.message == "working directory etc: 'etc' is a symlink (not followed)"
    assert workspace_directory(ctx_for(ws), "inner") == "'inner' is a symlink (not followed)"
    # unsandboxed the command runs in a scratch copy of the workspace (docs/validators.md): in its sub/
    result = run("command_output", ctx_for(ws), command=["pwd"], cwd="sub", expected="?")
    assert result.observed.endswith("/workspace/sub"), result
    assert workspace_directory(ctx_for(ws), "sub/../sub") == ws / "sub"
    assert workspace_directory(ctx_for(ws), "a.txt") == "not a directory"

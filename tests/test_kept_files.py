"""Kept files never follow a link: what the harness keeps of what a driver's ``artifacts(ctx)`` names
(runner.evidence.keep_files) and what drivers read and find in the agent's folders (the public
read_agent_file / find_agent_files) — only inside the phase's workspace, HOME and TMPDIR, with no
symlink followed in any component of the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_core.models.specs import TOOL_KINDS, CliAgentSpec
from gripprobe_core.plugin import find_agent_files, read_agent_file
from gripprobe_core.runner.evidence import keep_files
from gripprobe_core.testing import phase_context

CANARY = b"gpcanary-host-0f1e2d3c"


def _ctx(tmp_path: Path):
    agent = CliAgentSpec.model_validate({"id": "a", "plugin": "a", "executable": "a", "tool_kinds": list(TOOL_KINDS)})
    return phase_context(tmp_path / "phase", agent)


def _host(tmp_path: Path) -> Path:
    """A host folder the agent would like the harness to read (or write) through a link."""
    host = tmp_path / "host"
    (host / "sub").mkdir(parents=True)
    for p in (host / "log.txt", host / "sub" / "log.txt", host / "session.json", host / "cn.log"):
        p.write_bytes(CANARY + b"\n")
    return host


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(Path(d, n).relative_to(root)): (Path(d, n).read_bytes() if Path(d, n).is_file() else None)
            for d, dirs, files in os.walk(root) for n in dirs + files}


def _no_canary(folder: Path) -> None:
    for p in folder.rglob("*"):
        assert p.is_symlink() or not p.is_file() or CANARY not in p.read_bytes(), p


def test_files_in_the_phase_folders_are_kept_with_where_they_came_from(tmp_path):
    ctx = _ctx(tmp_path)
    (ctx.home / ".agent" / "logs").mkdir(parents=True)
    (ctx.home / ".agent" / "logs" / "run.log").write_text("home log\n")
    (ctx.tmpdir / "t.json").write_text("{}")
    (ctx.workspace / "notes.md").write_text("notes")
    kept = keep_files(ctx, {"run.log": ctx.home / ".agent" / "logs" / "run.log", "t.json": str(ctx.tmpdir / "t.json"),
                            "notes.md": ctx.workspace / "notes.md", "derived.txt": b"redacted copy"},
                      ctx.artifacts_dir)
    assert kept.refused == []
    assert {n: p.read_bytes() for n, p in kept.files.items()} == {
        "run.log": b"home log\n", "t.json": b"{}", "notes.md": b"notes", "derived.txt": b"redacted copy"}
    assert kept.files["run.log"] == ctx.artifacts_dir / "measured.run.log"
    assert kept.sources == {"run.log": "home/.agent/logs/run.log", "t.json": "tmpdir/t.json",
                            "notes.md": "workspace/notes.md", "derived.txt": "bytes"}


@pytest.mark.parametrize("planted", [".local", ".local/share", ".local/share/agent", ".local/share/agent/log"])
def test_a_symlinked_parent_folder_at_any_depth_is_refused(tmp_path, planted):
    """The attack a real opencode made: a folder on the way to its log replaced by a link to a host folder."""
    ctx = _ctx(tmp_path)
    host = _host(tmp_path)
    before = _tree(host)
    log = ctx.home / ".local" / "share" / "agent" / "log" / "log.txt"
    log.parent.mkdir(parents=True)
    log.write_text("the real log\n")
    link = ctx.home / planted
    # the host folder mirrors what lies below the link, so the path resolves to a canary through it
    below = log.relative_to(link)
    (host / below).parent.mkdir(parents=True, exist_ok=True)
    (host / below).write_bytes(CANARY + b"\n")
    before = _tree(host)
    link.rename(link.with_name(link.name + ".moved"))
    os.symlink(host, link)
    kept = keep_files(ctx, {"log.txt": log}, ctx.artifacts_dir)
    assert kept.files == {} and kept.sources == {}
    assert kept.refused == [{"name": "log.txt", "path": str(log), "reason": "symlink_in_path", "at": f"home/{planted}"}]
    assert read_agent_file(ctx, log) is None
    assert find_agent_files(ctx, ctx.home / ".local", "share/agent/log/*.txt") == []
    _no_canary(ctx.artifacts_dir)
    assert _tree(host) == before


def test_the_final_link_a_fifo_a_folder_and_missing_files_are_refused_without_blocking(tmp_path):
    ctx = _ctx(tmp_path)
    host = _host(tmp_path)
    os.symlink(host / "log.txt", ctx.home / "link.log")
    os.mkfifo(ctx.home / "pipe.log")
    (ctx.home / "dir.log").mkdir()
    kept = keep_files(ctx, {"a": ctx.home / "link.log", "b": ctx.home / "pipe.log", "c": ctx.home / "dir.log",
                            "d": ctx.home / "missing.log"}, ctx.artifacts_dir)
    assert {r["name"]: r["reason"] for r in kept.refused} == {
        "a": "symlink_in_path", "b": "not_a_regular_file", "c": "not_a_regular_file", "d": "missing"}
    assert kept.files == {}
    _no_canary(ctx.artifacts_dir)


@pytest.mark.parametrize("path", ["/etc/hostname", "relative/log.txt", "{home}/../../host/log.txt",
                                  "{home}/../host/log.txt", "{artifacts}/x", "{phase}"])
def test_paths_outside_the_phase_folders_are_refused(tmp_path, path):
    ctx = _ctx(tmp_path)
    _host(tmp_path)
    (ctx.artifacts_dir / "x").write_text("harness file")
    p = path.format(home=ctx.home, artifacts=ctx.artifacts_dir, phase=ctx.home.parent)
    kept = keep_files(ctx, {"f": Path(p)}, ctx.artifacts_dir)
    assert kept.files == {} and [r["reason"] for r in kept.refused] == ["outside_phase_dirs"]
    assert read_agent_file(ctx, p) is None


def test_a_phase_folder_itself_replaced_by_a_link_is_refused(tmp_path):
    """Unsandboxed, an agent can swap its whole HOME (or workspace) for a link to a host folder."""
    ctx = _ctx(tmp_path)
    host = _host(tmp_path)
    ctx.home.rename(ctx.home.with_name("home.moved"))
    os.symlink(host, ctx.home)
    kept = keep_files(ctx, {"log.txt": ctx.home / "log.txt"}, ctx.artifacts_dir)
    assert kept.files == {} and kept.refused[0]["reason"] == "symlink_in_path" and kept.refused[0]["at"] == "home"
    assert read_agent_file(ctx, ctx.home / "log.txt") is None
    assert find_agent_files(ctx, ctx.home, "*.txt") == []


@pytest.mark.parametrize("name", ["", ".", "..", "../escape", "a/b", "x\x00y"])
def test_a_name_that_is_not_a_plain_file_name_is_refused(tmp_path, name):
    ctx = _ctx(tmp_path)
    (ctx.home / "f").write_text("f")
    kept = keep_files(ctx, {name: ctx.home / "f", "ok": b"fine"}, ctx.artifacts_dir)
    assert list(kept.files) == ["ok"] and [r["reason"] for r in kept.refused] == ["bad_name"]
    assert sorted(os.listdir(ctx.artifacts_dir)) == ["measured.ok"]


def test_a_name_too_long_for_its_file_is_refused_not_raised(tmp_path):
    """``<phase>.<name>`` must fit 255 bytes (with its temporary name while written): a 250-byte name is refused
    and listed, never an ENAMETOOLONG."""
    ctx = _ctx(tmp_path)
    (ctx.home / "f").write_text("f")
    longest = "n" * 230
    kept = keep_files(ctx, {"x" * 250: ctx.home / "f", "é" * 116: b"two bytes each", longest: ctx.home / "f"},
                      ctx.artifacts_dir)
    assert list(kept.files) == [longest]
    assert [r["reason"] for r in kept.refused] == ["name_too_long", "name_too_long"]
    assert sorted(os.listdir(ctx.artifacts_dir)) == [f"measured.{longest}"]


def test_kept_copies_and_reads_are_capped(tmp_path):
    ctx = _ctx(tmp_path)
    (ctx.home / "big").write_bytes(b"x" * 5000)
    kept = keep_files(ctx, {"big": ctx.home / "big", "bytes": b"y" * 5000}, ctx.artifacts_dir, limit=100)
    assert [kept.files[n].stat().st_size for n in ("big", "bytes")] == [100, 100]
    assert read_agent_file(ctx, ctx.home / "big", limit=10) == b"x" * 10


def test_find_agent_files_globs_without_walking_through_links(tmp_path):
    ctx = _ctx(tmp_path)
    host = _host(tmp_path)
    sessions = ctx.home / ".codex" / "sessions"
    (sessions / "2026" / "01" / "02").mkdir(parents=True)
    (sessions / "2026" / "01" / "02" / "rollout-a.jsonl").write_text("a")
    (sessions / "2026" / "01" / "02" / "rollout-b.jsonl").write_text("b")
    (sessions / "2026" / "01" / "02" / "other.txt").write_text("c")
    os.mkfifo(sessions / "2026" / "01" / "02" / "rollout-fifo.jsonl")
    os.symlink(host / "log.txt", sessions / "2026" / "01" / "02" / "rollout-link.jsonl")
    (host / "03").mkdir()
    (host / "03" / "rollout-z.jsonl").write_bytes(CANARY)
    os.symlink(host, sessions / "2026" / "01" / "03")
    (sessions / "2026" / "01" / ".hidden").mkdir()
    (sessions / "2026" / "01" / ".hidden" / "rollout-h.jsonl").write_text("h")
    found = find_agent_files(ctx, sessions, "*/*/*/rollout-*.jsonl")
    assert found == [sessions / "2026" / "01" / "02" / "rollout-a.jsonl", sessions / "2026" / "01" / "02" / "rollout-b.jsonl"]
    assert find_agent_files(ctx, sessions, "2026/*/.hidden/*.jsonl") == [sessions / "2026/01/.hidden/rollout-h.jsonl"]
    assert find_agent_files(ctx, sessions, "../*") == [] and find_agent_files(ctx, host, "*") == []
    assert [read_agent_file(ctx, p) for p in found] == [b"a", b"b"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(1, 6), at=st.integers(0, 5), kind=st.sampled_from(["host_dir", "up", "self", "abs_root"]))
def test_no_link_at_any_depth_reaches_a_canary(tmp_path_factory, depth, at, kind):
    """Property: whichever folder on the way to a kept file becomes a link (to a host folder mirroring the
    layout, to a parent, to itself, to /), nothing is kept and nothing outside changes."""
    base = tmp_path_factory.mktemp("prop")
    ctx = _ctx(base)
    host = _host(base)
    names = [f"d{i}" for i in range(depth)]
    target = ctx.home.joinpath(*names, "log.txt")
    target.parent.mkdir(parents=True)
    target.write_text("real")
    link = ctx.home.joinpath(*names[:min(at, depth - 1) + 1])
    mirror = host.joinpath(*target.relative_to(link).parts)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    mirror.write_bytes(CANARY)
    before = _tree(host)
    link.rename(link.with_name(link.name + ".moved"))
    os.symlink({"host_dir": str(host), "up": "..", "self": ".", "abs_root": "/"}[kind], link)
    kept = keep_files(ctx, {"log.txt": target, "again.txt": target}, ctx.artifacts_dir)
    assert kept.files == {} and {r["reason"] for r in kept.refused} == {"symlink_in_path"}
    assert read_agent_file(ctx, target) is None
    _no_canary(ctx.artifacts_dir)
    assert _tree(host) == before

"""What the harness copies out of an agent's workspace, and the evidence digests a recompute checks."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core.integrity.digests import evidence_digests, verify_evidence
from gripprobe_core.store.copytree import CopyLimits, copy_workspace, display_name, listing_key as _key


def _by_path(listing) -> dict[str, dict]:
    return {e["path"]: e for e in listing.entries}


def test_regular_files_are_copied_and_everything_else_listed(tmp_path):
    src, dst = tmp_path / "ws", tmp_path / "copy"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "hello.txt").write_text("hello world\n")
    (src / "sub" / "deeper" / "x.py").write_bytes(b"print(1)\n")
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    os.symlink("/etc/passwd", src / "passwd")
    os.symlink("/", src / "root")
    os.mkfifo(src / "pipe")
    os.mknod(src / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # tests run as root in CI
    odd = os.fsencode(src) + b"/bad\xffname\x1b[31m\n"
    with open(odd, "wb") as fh:
        fh.write(b"odd")

    listing = copy_workspace(src, dst)

    assert (dst / "hello.txt").read_text() == "hello world\n"
    assert (dst / "sub" / "deeper" / "x.py").read_bytes() == b"print(1)\n"
    assert os.access(dst / "run.sh", os.X_OK)
    assert sorted(os.listdir(dst)) == sorted(["hello.txt", "sub", "run.sh", os.fsdecode(b"bad\xffname\x1b[31m\n")])
    entries = _by_path(listing)
    assert entries["passwd"] == {**entries["passwd"], "copied": False, "type": "symlink", "target": "/etc/passwd"}
    assert entries["root"]["reason"] == "symlink_not_followed"
    assert entries["pipe"]["type"] == "fifo" and not entries["pipe"]["copied"]
    assert entries["null"]["type"] == "device" and not entries["null"]["copied"]
    odd_entry = entries["bad\\xffname\\x1b[31m\\x0a"]
    assert odd_entry["copied"] and odd_entry["key"].startswith("hex:")
    assert listing.files == 4 and listing.skipped == 4
    json.dumps(listing.as_json(), ensure_ascii=False).encode("utf-8")  # never a lone surrogate


def test_caps_on_size_count_and_depth(tmp_path):
    src = tmp_path / "ws"
    src.mkdir()
    (src / "big").write_bytes(b"x" * 5000)
    for i in range(30):
        (src / f"f{i:02}").write_bytes(b"y" * 100)
    deep = src
    for i in range(6):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "bottom").write_text("z")
    limits = CopyLimits(max_files=10, max_file_bytes=1000, max_total_bytes=800, max_depth=4, max_listed_skips=5)
    listing = copy_workspace(src, tmp_path / "copy", limits)
    assert listing.files == 8 and listing.bytes == 800  # the total cap bites before the count cap
    reasons = [e.get("reason") for e in listing.entries if not e["copied"]]
    assert reasons == ["file_size_cap", "too_deep", "total_size_cap", "total_size_cap", "total_size_cap"]
    assert listing.skipped == 24 and listing.skipped_unlisted == 19
    assert not (tmp_path / "copy" / "big").exists()


def test_a_file_that_grows_past_its_cap_is_cut_and_marked(tmp_path):
    src = tmp_path / "ws"
    src.mkdir()
    (src / "f").write_bytes(b"a" * 100)
    listing = copy_workspace(src, tmp_path / "copy", CopyLimits(max_file_bytes=100))
    assert listing.entries[0]["size"] == 100 and "truncated" not in listing.entries[0]


def test_a_workspace_swapped_for_a_link_is_not_copied(tmp_path):
    """Unsandboxed, an agent can replace its workspace (or a folder above it) with a link to a host folder."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "hello.txt").write_text("hello world\n")
    (tmp_path / "phase").mkdir()
    os.symlink(host, tmp_path / "phase" / "ws")
    os.symlink(tmp_path / "phase", tmp_path / "alias")
    for src in (tmp_path / "phase" / "ws", tmp_path / "alias" / "ws"):
        listing = copy_workspace(src, tmp_path / "copy")
        assert listing.error and "symlink_in_path" in listing.error and listing.files == 0
        assert os.listdir(tmp_path / "copy") == []


def _case(tmp_path: Path) -> Path:
    case = tmp_path / "case"
    (case / "artifacts").mkdir(parents=True)
    (case / "measured.stdout").write_text("out")
    (case / "artifacts" / "proxy.measured.http.jsonl").write_text('{"a": 1}\n')
    (case / "artifacts" / "events.measured.jsonl").write_text("derived\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hi")
    listing = copy_workspace(ws, case / "workspace")
    (case / "artifacts" / "workspace.listing.json").write_text(json.dumps(listing.as_json()))
    return case


def test_digests_cover_observations_not_derived_files(tmp_path):
    case = _case(tmp_path)
    digests = evidence_digests(case)
    assert set(digests) == {"measured.stdout", "artifacts/proxy.measured.http.jsonl",
                            "artifacts/workspace.listing.json"}
    assert verify_evidence(case, digests) == []
    (case / "artifacts" / "events.measured.jsonl").write_text("re-derived by a recompute\n")
    assert verify_evidence(case, digests) == []


@pytest.mark.parametrize("tamper, expected", [
    (lambda c: (c / "artifacts" / "proxy.measured.http.jsonl").write_text('{"forged": 1}\n'),
     "artifacts/proxy.measured.http.jsonl changed"),
    (lambda c: (c / "measured.stdout").unlink(), "measured.stdout is gone"),
    (lambda c: (c / "artifacts" / "proxy.warmup.http.jsonl").write_text("{}\n"),
     "artifacts/proxy.warmup.http.jsonl appeared after the run"),
    (lambda c: (c / "workspace" / "hello.txt").write_text("forged"), "workspace/hello.txt changed"),
    (lambda c: (c / "workspace" / "new.txt").write_text("x"), "workspace/new.txt appeared after the run"),
    (lambda c: (c / "workspace" / "hello.txt").unlink(), "workspace/hello.txt is gone"),
])
def test_any_change_to_evidence_is_found(tmp_path, tamper, expected):
    case = _case(tmp_path)
    digests = evidence_digests(case)
    tamper(case)
    assert verify_evidence(case, digests) == [expected]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")))
def test_names_are_always_displayable_and_keyed_exactly(name):
    shown = display_name(name)
    shown.encode("utf-8")  # always writable as UTF-8
    key = _key(os.fsdecode(name))
    raw = bytes.fromhex(key[4:]) if key.startswith("hex:") else key.encode("utf-8")
    assert raw == name

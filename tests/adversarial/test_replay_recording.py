"""A replay recording is input like a spec: a folder edited, truncated or planted with links must stop the run
before anything runs (exit 2, one line naming the spec's file:line and the recording's file), never a
traceback, never a read of what a link points at."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SPEC = """id: replayed
label: a replayed recording
backends:
  - id: replay
    kind: replay
    model_id: m
    recording: ../../rec
"""
GOOD = '{"format": 1, "exchanges": [{"path": "/v1/chat/completions", "status": 200, "stream": false, "conversation": [["user", "hi", []]], "response": {"choices": []}}]}'


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "specs" / "models").mkdir(parents=True)
    (tmp_path / "specs" / "models" / "replayed.yaml").write_text(SPEC)
    (tmp_path / "rec").mkdir()
    return tmp_path / "specs", tmp_path / "rec"


def _run(specs: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(specs), "-a", "reference",
                           "-m", "replayed", "-t", "save_file", "--no-warmup", "--results", str(tmp_path / "r")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name, plant, problem", [
    ("garbage", lambda rec: (rec / "a__b__c.json").write_bytes(b"\xff\xfe{{{"), "unreadable"),
    ("truncated", lambda rec: (rec / "a__b__c.json").write_text(GOOD[:60]), "unreadable"),
    ("wrong types", lambda rec: (rec / "a__b__c.json").write_text(GOOD.replace('"status": 200', '"status": "200"')),
     "status is not an HTTP status"),
    ("a link to a secret", lambda rec: (rec / "a__b__c.json").symlink_to("/etc/shadow"), "not a regular file"),
    ("a folder in place of a case", lambda rec: (rec / "a__b__c.json").mkdir(), "not a regular file"),
    ("empty", lambda rec: None, "no recorded cases"),
])
def test_a_tampered_recording_stops_the_run_in_one_line(tmp_path, name, plant, problem):
    specs, rec = _setup(tmp_path)
    plant(rec)
    out = _run(specs, tmp_path)
    assert out.returncode == 2, (name, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    first = out.stderr.strip().splitlines()[0]
    assert first.startswith(f"{specs}/models/replayed.yaml:7: backends[0].recording: ") or \
        "replayed.yaml:7: backends[0].recording" in first, first
    assert problem in first, first
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("runs/*/cases/*")), "nothing runs"

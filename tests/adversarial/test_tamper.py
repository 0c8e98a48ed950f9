"""Attack 12: evidence changed after the run (here by the test itself, as a daemon or anyone with
write access to the results could): `rebuild-reports --recompute` must mark exactly the changed case
HARNESS_ERROR with failure_reason `artifact_tampered`, and leave an untouched run as it was.

Each test works on its own copy of the session's basics run (reference × oracle-perfect/-lazy ×
hello, × victim, and the probe script agent)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .adversary import Arena

pytestmark = pytest.mark.e2e

LAZY = "reference__oracle-lazy__oracle__tool__hello"
PERFECT = "reference__oracle-perfect__oracle__tool__hello"


def _copy(arena: Arena, dest: Path) -> Path:
    """A copy of the pristine basics run (the vault's: an unconfined attack may have hit the original)."""
    run = dest / arena.basics.run_dir.name
    shutil.copytree(arena.vault / "basics" / arena.basics.run_dir.name, run, symlinks=True)
    return run


def _verdicts(run: Path) -> dict[str, tuple[str, str | None]]:
    out = {}
    for p in sorted(run.glob("cases/*/case.json")):
        v = json.loads(p.read_bytes())["verdict"]
        out[p.parent.name] = (v["status"], v.get("failure_reason"))
    return out


def _recompute(arena: Arena, run: Path) -> dict[str, tuple[str, str | None]]:
    out = arena.cli("rebuild-reports", str(run), "--recompute", timeout=120)
    assert not out.timed_out and out.returncode == 0, out.explain()
    return _verdicts(run)


def _only(changed_case: str, before: dict, after: dict) -> None:
    assert after[changed_case] == ("HARNESS_ERROR", "artifact_tampered"), \
        f"{changed_case} after tampering: {after[changed_case]} (was {before[changed_case]})"
    others = {k: (before[k], after[k]) for k in before if k != changed_case and before[k] != after[k]}
    assert not others, f"untouched cases changed: {others}"


def _case_dir(run: Path, name: str) -> Path:
    d = run / "cases" / name
    assert d.is_dir(), f"no case {name} in {run}"
    return d


def test_untouched_run_recomputes_unchanged(arena, tmp_path):
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    assert before[PERFECT][0] == "PASS" and before[LAZY][0] == "NO_TOOL_CALL"
    assert _recompute(arena, run) == before


def test_forged_records_after_the_run_are_flagged(arena, tmp_path):
    """The lazy case gets the perfect case's proxy and oracle records and a hello.txt: what a daemon
    would plant to turn NO_TOOL_CALL into PASS."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    lazy, perfect = _case_dir(run, LAZY), _case_dir(run, PERFECT)
    for name in ("proxy.measured.http.jsonl", "oracle.measured.jsonl"):
        genuine = (perfect / "artifacts" / name).read_bytes()
        with open(lazy / "artifacts" / name, "ab") as fh:
            fh.write(genuine)
    (lazy / "workspace").mkdir(exist_ok=True)
    (lazy / "workspace" / "hello.txt").write_text("hello world\n")
    _only(LAZY, before, _recompute(arena, run))


def test_edited_capture_after_the_run_is_flagged(arena, tmp_path):
    """One byte of the perfect case's captured stdout changed, same length."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    stdout = _case_dir(run, PERFECT) / "measured.stdout"
    data = stdout.read_bytes()
    assert b"hello world" in data
    stdout.write_bytes(data.replace(b"hello world", b"hello w0rld", 1))
    _only(PERFECT, before, _recompute(arena, run))

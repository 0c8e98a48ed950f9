"""Files the harness writes follow the user's umask (0644 under 022, 0640 under 027), writes stay atomic.

Real `gripprobe run`, `rebuild-reports` and `aggregate-reports` subprocesses, each started under the
umask being tested.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, _core_src

pytestmark = pytest.mark.e2e


def _gripprobe_under_umask(umask: int, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    if _core_src():
        env["PYTHONPATH"] = os.pathsep.join(map(str, _core_src()))
    return subprocess.run(["sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", sys.executable, "-m",
                           "gripprobe_core.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300, stdin=subprocess.DEVNULL)


def _harness_files(run: Path) -> list[Path]:
    """Every regular file of the run except what the agent itself made in its workspace."""
    return [p for p in run.rglob("*") if p.is_file() and not p.is_symlink()
            and "workspace" not in p.relative_to(run).parts]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_follow_the_umask(tmp_path, umask):
    want = 0o666 & ~umask
    res = _gripprobe_under_umask(umask, "run", "-m", "oracle-perfect", "-t", "save_file", "-t", "shell_pwd",
                                 "--results", str(tmp_path / "results"))
    assert res.returncode == 0, res.stderr[-3000:]
    run = Path(res.stdout.strip().splitlines()[-1])
    files = _harness_files(run)
    names = {p.relative_to(run).as_posix() for p in files}
    for expected in ("manifest.json", "case.json", "expected.txt", "observed.txt", "prompt.txt",
                     "artifacts/events.measured.jsonl", "artifacts/events.summary.json", "reports/summary.html",
                     "reports/summary.md"):
        assert any(n.endswith(expected) for n in names), (expected, sorted(names))
    wrong = {p.relative_to(run).as_posix(): oct(stat.S_IMODE(p.stat().st_mode)) for p in files
             if stat.S_IMODE(p.stat().st_mode) != want}
    assert not wrong, f"not {oct(want)} under umask {umask:03o}: {wrong}"
    assert not [p for p in run.rglob(".*.tmp")], "a temporary file was left behind"

    # re-rendered reports and an aggregate, written under the same umask
    summary = run / "reports" / "summary.html"
    summary.chmod(0o600)
    res = _gripprobe_under_umask(umask, "rebuild-reports", str(run))
    assert res.returncode == 0, res.stderr[-3000:]
    assert stat.S_IMODE(summary.stat().st_mode) == want  # a new file replaced it atomically, with the umask
    out = tmp_path / "aggregate"
    res = _gripprobe_under_umask(umask, "aggregate-reports", "--runs-root", str(run), "--output", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {"aggregate.json": want, "aggregate.md": want, "index.html": want}, modes

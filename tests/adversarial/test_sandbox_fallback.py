"""Attack 15, on the harness's own set-up: a machine where bubblewrap is installed but does not work (a
freshly started machine, user namespaces switched off). `--sandbox auto` must not then run agents unconfined
behind the user's back: it probes twice and stops with exit 2 and the reason. (Only where bubblewrap is
absent does auto run unconfined, and the run says so in its first line: tests/test_sandbox.py.)"""

from __future__ import annotations

import os
import shutil


def test_auto_with_a_broken_bwrap_stops_instead_of_running_unconfined(tmp_path):
    """bubblewrap installed but failing its probe: tried twice, then exit 2 with the reason; nothing runs."""
    from conftest import gripprobe

    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("sh"), bindir / "sh")
    tries = tmp_path / "tries"
    bwrap = bindir / "bwrap"
    bwrap.write_text(f"#!/bin/sh\necho try >> {tries}\n"
                     "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    proc = gripprobe("run", "--results", str(tmp_path / "r"), "-t", "save_file", "-m", "oracle-perfect",
                     env={"PATH": str(bindir)})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "failed its probe twice" in last and "Permission denied" in last and "--sandbox none" in last, last
    assert tries.read_text().count("try") == 2
    assert not (tmp_path / "r" / "runs").exists() or not any((tmp_path / "r" / "runs").iterdir())
    # --sandbox none still runs, on purpose
    proc = gripprobe("run", "--results", str(tmp_path / "r"), "-t", "save_file", "-m", "oracle-perfect",
                     "--sandbox", "none", env={"PATH": str(bindir)})
    assert proc.returncode == 0, proc.stderr

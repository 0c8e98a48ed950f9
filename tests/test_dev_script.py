"""`./dev` leaves a working `gripprobe` on PATH: a link in ~/.local/bin (when on PATH) or $GRIPPROBE_BIN_DIR,
else the one line that activates the venv. Run against the project's own venv (no install happens: its stamp
is current), with HOME and PATH of a stranger's shell."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent


def dev(*args: str, home: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    e.update(HOME=str(home), PATH=path, GRIPPROBE_VENV=str(VENV), **env)
    return subprocess.run(["bash", str(ROOT / "dev"), *args], capture_output=True, text=True, env=e, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=ROOT)


def test_dev_links_gripprobe_into_local_bin_on_path(tmp_path):
    local_bin = tmp_path / ".local" / "bin"
    path = f"{local_bin}:/usr/bin:/bin"
    res = dev("link", home=tmp_path, path=path)
    assert res.returncode == 0, res.stderr
    link = local_bin / "gripprobe"
    assert link.is_symlink() and Path(os.readlink(link)) == VENV / "bin" / "gripprobe"
    assert f"linked {link}" in res.stdout and "activate" not in res.stdout
    # the newcomer's shell finds it by name
    shell = subprocess.run(["bash", "-c", "gripprobe --version"], capture_output=True, text=True, timeout=60,
                           env={"HOME": str(tmp_path), "PATH": path})
    assert shell.returncode == 0 and "gripprobe" in shell.stdout.lower(), shell.stderr
    # a second time: nothing to say; someone's own gripprobe (not a link) is left alone
    assert dev("link", home=tmp_path, path=path).stdout == ""
    link.unlink()
    link.write_text("#!/bin/sh\necho mine\n")
    res = dev("link", home=tmp_path, path=path)
    assert link.read_text() == "#!/bin/sh\necho mine\n" and "source " in res.stdout


def test_dev_says_how_to_activate_when_no_bin_folder_is_on_path(tmp_path):
    res = dev("link", home=tmp_path, path="/usr/bin:/bin")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"== to run gripprobe directly, activate the venv: source {VENV}/bin/activate"
    assert not (tmp_path / ".local" / "bin" / "gripprobe").exists()

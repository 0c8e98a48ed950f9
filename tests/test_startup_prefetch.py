"""What a command starts early or looks up late so that its start costs less, behaving as before."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT


def _fresh(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_the_store_finds_syncfs_on_first_flush_not_at_import():
    out = _fresh("""
        import sys
        from pathlib import Path
        import tempfile
        import gripprobe_core.store.layout as layout
        print("ctypes.util" in sys.modules, layout._syncfs.cache_info().currsize)
        d = Path(tempfile.mkdtemp()); (d / "f").write_text("x")
        layout.flush_folder(d)
        print(layout._syncfs() is not None, "ctypes.util" in sys.modules)
    """)
    assert out.splitlines() == ["False 0", "True False"]  # Linux: libc's syncfs, without ldconfig's lookup


def test_a_prefetched_sandbox_probe_gives_the_same_sandbox_once():
    out = _fresh("""
        from gripprobe_core.runner import sandbox
        sandbox.prefetch_probe()
        box = sandbox.resolve_sandbox("auto")  # waits for the thread's probe, or probes itself: one answer
        again = sandbox.resolve_sandbox("auto")
        print(box.kind, box is again, sandbox._resolved["probe"].box is box)
    """)
    assert out.split() == ["bwrap", "True", "True"]

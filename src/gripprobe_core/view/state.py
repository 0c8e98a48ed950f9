"""What the view knows about the runs under a results folder, read afresh on every request.

Runs are found the way ``list-runs`` finds them (:func:`~gripprobe_core.store.runs.iter_run_dirs`: a run
folder that is a link is no run) and every stored file is read through the store's own readers
(:meth:`RunFolder.read_manifest`, :func:`read_case` on a :class:`Stored` path: no link followed below the run
folder, never a FIFO or device, every case.json validated as a whole). Parsed case results are cached by the
identity of their case.json (inode, size, modification time), so polling a run costs an ``lstat`` per case.

A run's state as the view shows it comes from its manifest: ``running`` (the runner writes it first, and
rewrites it ``complete`` or ``incomplete`` at the end), ``stopped`` (the manifest says ``running`` but names
a harness process on this machine and boot that is gone: killed with SIGKILL, or the machine's power; a run
from another machine still says ``running``, and the view shows how long ago anything in it changed),
``complete``, ``interrupted`` (``incomplete`` with ``interrupted_by``: Ctrl-C or SIGTERM, resumable),
``incomplete``, ``unknown`` (no readable manifest) and ``invalid`` (a status the harness never writes).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..models.results import CaseResult
from ..reports.html import page_name
from ..store import RunFolder
from ..store.layout import read_case
from ..store.runs import INVALID, iter_run_dirs, manifest_status
from ..textsafe import safe_name, safe_text

__all__ = ["RunState", "RunsIndex", "run_state_name"]

_SIGNALS = ("SIGINT", "SIGTERM")


def run_state_name(manifest: dict[str, Any]) -> str:
    """``running``, ``stopped``, ``complete``, ``interrupted``, ``incomplete``, ``unknown`` or ``invalid``
    (see the module)."""
    status = manifest_status(manifest)
    if status == "incomplete" and manifest.get("interrupted_by") in _SIGNALS:
        return "interrupted"
    if status == "running" and harness_gone(manifest.get("harness")):
        return "stopped"
    return status


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read(64).strip() or None
    except OSError:
        return None


def harness_gone(harness: Any) -> bool:
    """Whether the harness that wrote a ``running`` manifest is known to be gone: the manifest names this
    machine and boot, and its process is no longer a live ``gripprobe`` (a pid since reused by another
    program counts as gone). Anything unknown (another machine, an older run, a value that is not one) is
    not gone: the view then says ``running`` and shows how long ago anything changed."""
    if not isinstance(harness, dict):
        return False
    pid, host, boot = harness.get("pid"), harness.get("hostname"), harness.get("boot_id")
    if type(pid) is not int or not 1 < pid < 2**22 or not isinstance(host, str) or not isinstance(boot, str):
        return False
    if host != socket.gethostname() or boot != _boot_id():
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read(4096)
    except OSError:
        return True  # no such process
    return b"gripprobe" not in cmdline


@dataclass
class RunState:
    """One run as the view shows it: the manifest's facts and the cases present now."""

    run: RunFolder
    slug: str
    """The run's name in URLs and pages: its folder name made display-safe (``safe_name``)."""
    manifest: dict[str, Any]
    state: str
    entries: list[tuple[str, CaseResult | None]]
    """Every case folder present (sorted) with its result, None while its case.json has not landed (or is
    not a valid result)."""
    pending: list[str] = field(default_factory=list)
    """Case folders without a case.json yet: the cases under way (or killed mid-way)."""
    last_change: float = 0.0
    """The newest modification time among the manifest, the case folders and their case.json files."""
    version: str = ""
    """Changes whenever a case lands, a case folder appears or goes, or the manifest is rewritten."""

    @property
    def planned(self) -> int:
        planned = self.manifest.get("planned")
        return len([p for p in planned if isinstance(p, dict)]) if isinstance(planned, list) else 0

    @property
    def counts(self) -> dict[str, int]:
        c: Counter[str] = Counter()
        for name, res in self.entries:
            if res is not None:
                c[res.verdict.status] += 1
            elif name not in self.pending:
                c[INVALID] += 1
        return dict(sorted(c.items()))

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> dict[str, Any]:
        """The small JSON the pages poll (every string display-safe)."""
        m = self.manifest
        text = lambda k: safe_text(m[k]) if isinstance(m.get(k), str) else None  # noqa: E731
        agents = sorted({safe_text(r.key.agent) for _, r in self.entries if r is not None}
                        | {safe_text(p["agent"]) for p in m.get("planned") or []
                           if isinstance(p, dict) and isinstance(p.get("agent"), str)})
        return {"run": self.slug, "version": self.version, "state": self.state, "done": self.done,
                "planned": self.planned, "counts": self.counts, "running_cases": len(self.pending),
                "suite": text("suite"), "started_at": text("started_at"), "finished_at": text("finished_at"),
                "interrupted_by": text("interrupted_by"), "agents": agents,
                "idle_s": round(max(0.0, time.time() - self.last_change), 1) if self.last_change else None}


def _sig(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class RunsIndex:
    """The runs under one results folder (or ``runs/`` folder, or one run folder), read on demand."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cases: dict[tuple[str, str], tuple[tuple[int, int, int, int], CaseResult | None]] = {}
        self._manifests: dict[str, tuple[tuple, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[RunFolder]:
        """Every run, newest first."""
        return sorted(iter_run_dirs(self.root), key=lambda r: r.run_id, reverse=True)

    def find(self, slug: str) -> RunFolder | None:
        """The run whose display name is ``slug``; None for anything else (only listed runs are served)."""
        for run in self.runs():
            if safe_name(run.run_id) == slug:
                return run
        return None

    def state(self, run: RunFolder) -> RunState:
        newest = 0.0
        try:
            mst = os.lstat(run.manifest)
            newest = mst.st_mtime
            manifest_sig: tuple = _sig(mst)
        except OSError:
            manifest_sig = ()
        with self._lock:
            known = self._manifests.get(str(run.path))
        if known is not None and manifest_sig and known[0] == manifest_sig:
            manifest = known[1]
        else:  # parsed again only when it changed (a planned list can be long)
            manifest = run.read_manifest()
            with self._lock:
                self._manifests[str(run.path)] = (manifest_sig, manifest)
        entries: list[tuple[str, CaseResult | None]] = []
        pending: list[str] = []
        sigs: list[tuple] = []
        for name in run.case_names():  # real folders only: a link in cases/ is no case
            case = run.stored_case(name)
            try:
                newest = max(newest, case.lstat().st_mtime)
                st = (case / "case.json").lstat()
            except OSError:
                pending.append(name)
                entries.append((name, None))
                sigs.append((name, None))
                continue
            newest = max(newest, st.st_mtime)
            sig = _sig(st)
            key = (str(run.path), name)
            with self._lock:
                cached = self._cases.get(key)
            if cached is not None and cached[0] == sig:
                res = cached[1]
            else:
                res = read_case(case / "case.json")  # validated as a whole: a bad one is None
                with self._lock:
                    self._cases[key] = (sig, res)
            entries.append((name, res))
            sigs.append((name, sig))
        version = hashlib.sha256(repr((manifest_sig, sigs)).encode("utf-8", "backslashreplace")).hexdigest()[:16]
        return RunState(run=run, slug=safe_name(run.run_id), manifest=manifest, state=run_state_name(manifest),
                        entries=entries, pending=pending, last_change=newest, version=version)

    def case(self, run: RunFolder, page: str) -> tuple[str, CaseResult | None] | None:
        """The case folder whose page is ``page`` (``<case>.html``) with its result; None when there is none."""
        for name in run.case_names():
            if page_name(name) == page:
                return name, read_case(run.stored_case(name) / "case.json")
        return None

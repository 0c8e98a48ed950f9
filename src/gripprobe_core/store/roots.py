"""Checking the results paths a command is given, before any work starts.

Every command that takes a results root or a run directory checks it here and, when it cannot be used,
raises :class:`ResultsPathError`: one line naming the path, what is wrong with it and how to fix it
(exit 2), never a traceback. The shapes covered: a path under a regular file, a ``runs`` that is a
file, a folder on a virtual or read-only file system (``/proc``, ``/sys``), one that cannot be written.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import UserError
from ..textsafe import safe_name
from .files import kind_of

__all__ = ["ResultsPathError", "check_readable_root", "check_run_dir", "explain_os_error", "prepare_results_root"]

#: File systems that hold no user files: a results folder there can never be created or written.
_VIRTUAL_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
               "pstore", "bpf", "configfs", "fusectl", "efivarfs", "mqueue", "hugetlbfs", "binfmt_misc"}


class ResultsPathError(UserError):
    """A results root or run directory that cannot be used (one line, exit 2)."""


def _blocker(path: Path) -> tuple[Path, str] | None:
    """The first existing component of ``path`` that is not a folder, with what it is."""
    for p in (*reversed(path.parents), path):
        try:
            st = os.lstat(p)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(p)
            except OSError:
                return p, "dangling symlink"
        if not stat.S_ISDIR(st.st_mode):
            return p, kind_of(st.st_mode)
    return None


def _fs_type(path: Path) -> str | None:
    """The file system type holding ``path``'s nearest existing folder (Linux; None elsewhere)."""
    p = Path(os.path.abspath(path))
    while not p.is_dir() and p != p.parent:
        p = p.parent
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    best, fs = "", None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (str(p) == point or str(p).startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, fs = point, fields[2]
    return fs


def explain_os_error(label: str, target: Path, exc: OSError, *, creating: bool) -> str:
    """One line for an :class:`OSError` met while creating (or reading) ``target``, given as ``label``
    (``--results results``): what is wrong and the fix."""
    shown = safe_name(label)
    block = _blocker(target)
    if block is not None:
        where, kind = block
        if where == target:
            return f"{shown}: {safe_name(where)} is a {kind}, not a folder; move it away or pass another folder"
        return (f"{shown}: {safe_name(where)} is a {kind}, not a folder, so nothing "
                f"{'can be stored' if creating else 'is'} under it; pass a folder")
    reason = exc.strerror or str(exc)
    fs = _fs_type(target)
    if fs in _VIRTUAL_FS:
        return (f"{shown}: {safe_name(target)} is on the virtual file system {fs}, which holds no files "
                f"({reason}); pass a folder on a real disk, such as ./results")
    if exc.errno == errno.EROFS:
        return f"{shown}: {safe_name(target)} is on a read-only file system; pass a folder you can write to"
    if creating:
        return f"{shown}: cannot create {safe_name(target)} ({reason}); pass a folder you can write to"
    return f"{shown}: cannot read {safe_name(target)} ({reason}); pass a folder you can read"


def prepare_results_root(root: Path, option: str = "--results") -> Path:
    """Make sure ``<root>/runs`` exists and takes new run folders; returns ``root`` resolved.

    Creates what is missing (``root`` and ``runs/``) and proves a folder can be made in ``runs/``."""
    root = Path(root)
    label = f"{option} {root}"
    runs = root / "runs"
    try:
        runs.mkdir(parents=True, exist_ok=True)
        probe = runs / f".gripprobe-probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as exc:
        raise ResultsPathError(explain_os_error(label, runs, exc, creating=True)) from None
    return root.resolve()


def check_readable_root(root: Path, option: str = "--results") -> Path:
    """A results root (or runs/ folder, or one run) to read: it must exist and be a folder, and a
    ``runs`` inside it must be a folder too. Returns ``root`` unchanged."""
    root = Path(root)
    label = f"{option} {root}"
    try:
        st = os.stat(root)
    except FileNotFoundError:
        block = _blocker(root)
        if block is None:
            raise ResultsPathError(f"{safe_name(label)}: no such folder; runs are stored in <results>/runs "
                                   f"(see `gripprobe list-runs --results DIR`)") from None
        raise ResultsPathError(explain_os_error(label, root, FileNotFoundError(), creating=False)) from None
    except OSError as exc:
        raise ResultsPathError(explain_os_error(label, root, exc, creating=False)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise ResultsPathError(f"{safe_name(label)}: this is a {kind_of(st.st_mode)}, not a folder; pass the results "
                               f"folder (the one holding runs/)")
    runs = root / "runs"
    try:
        rst = os.stat(runs)
    except OSError:
        rst = None
    if rst is not None and not stat.S_ISDIR(rst.st_mode):
        raise ResultsPathError(f"{safe_name(label)}: {safe_name(runs)} is a {kind_of(rst.st_mode)}, not a folder; "
                               f"move it away (runs are stored in <results>/runs)")
    if not os.access(root, os.R_OK | os.X_OK):
        raise ResultsPathError(f"{safe_name(label)}: cannot read this folder (permission denied); pass a "
                               f"folder you can read")
    return root


def check_run_dir(path: Path, label: str | None = None) -> Path:
    """A run directory (``manifest.json`` or ``cases/`` inside); returns it resolved."""
    from .runs import is_run_dir

    label = label or str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        block = _blocker(Path(path))
        if block is not None:
            raise ResultsPathError(explain_os_error(label, Path(path), FileNotFoundError(), creating=False)) from None
        raise ResultsPathError(f"{safe_name(label)}: no such run directory; see `gripprobe list-runs`") from None
    except OSError as exc:
        raise ResultsPathError(explain_os_error(label, Path(path), exc, creating=False)) from None
    if not stat.S_ISDIR(st.st_mode) or not is_run_dir(Path(path)):
        raise ResultsPathError(f"{safe_name(label)}: not a run directory (expected manifest.json or cases/ "
                               f"inside); see `gripprobe list-runs`")
    return Path(path).resolve()

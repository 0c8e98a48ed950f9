"""The case page's view of a final workspace, which the agent under test wrote and may have made hostile.

Rules (docs/reports.md, "Hostile workspaces"):
- The workspace itself is reached without following a link below the run folder
  (:class:`~gripprobe_core.store.files.Stored`): a ``workspace/`` (or case folder) that is a link is shown as
  one, never entered.
- Nothing outside the workspace is read: the walk goes folder by folder through file descriptors
  opened with ``O_NOFOLLOW`` (``openat``), so a symlink, to a file or to a folder, is listed with its
  target and never followed, and no component can be swapped for a symlink mid-walk.
- Only regular files are opened, with ``O_NOFOLLOW | O_NONBLOCK``, after ``lstat`` says so and checked
  again with ``fstat``; FIFOs, sockets and device nodes are listed and never opened.
- Bounded work: at most ``WORKSPACE_FILES_MAX`` entries listed, ``WORKSPACE_SCAN_MAX`` looked at,
  ``WORKSPACE_DEPTH_MAX`` folders deep; a file is read only when small (``WORKSPACE_TEXT_LIMIT``) and
  while the page's text budget lasts, so a 5 MB binary costs one ``lstat``.
- Names are shown through :func:`~gripprobe_core.textsafe.safe_name`: a byte that is not UTF-8 shows as
  ``\\xff``, a control character as ``\\x1b``; nothing about a name can fail the page.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store.files import Stored, kind_of, read_regular
from ..textsafe import safe_name

__all__ = ["WORKSPACE_DEPTH_MAX", "WORKSPACE_FILES_MAX", "WORKSPACE_SCAN_MAX", "WORKSPACE_TEXT_BUDGET",
           "WORKSPACE_TEXT_LIMIT", "workspace_view"]

WORKSPACE_FILES_MAX = 500       # entries listed from the final workspace
WORKSPACE_SCAN_MAX = 20_000     # entries looked at; beyond, the count of the rest is a lower bound
WORKSPACE_DEPTH_MAX = 32        # folders deeper than this are not entered
WORKSPACE_TEXT_LIMIT = 32 * 1024  # a workspace file larger than this is listed, not shown
WORKSPACE_TEXT_BUDGET = 256 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class _Walk:
    files: list[dict[str, Any]] = field(default_factory=list)
    more: int = 0
    scanned: int = 0
    cut: bool = False  # the scan or depth limit stopped the walk: ``more`` is a lower bound
    budget: int = WORKSPACE_TEXT_BUDGET


def workspace_view(root: Stored) -> dict[str, Any]:
    """``{"state": ok|missing|symlink|not a folder|unreadable, "files": [...], "more": n, "cut": bool,
    "note": str}``; each file ``{"path", "size", "text", "note"}`` with ``path`` display-safe."""
    empty = {"files": [], "more": 0, "cut": False, "note": ""}
    try:
        st = root.lstat()
    except FileNotFoundError:
        return {**empty, "state": "missing"}
    except OSError as exc:
        return {**empty, "state": "unreadable", "note": type(exc).__name__}
    if stat.S_ISLNK(st.st_mode):
        return {**empty, "state": "symlink", "note": f"workspace/ is a symlink to {_stored_link(root)}; not followed"}
    if not stat.S_ISDIR(st.st_mode):
        return {**empty, "state": "not a folder", "note": f"workspace/ is a {kind_of(st.st_mode)}; not opened"}
    walk = _Walk()
    try:
        fd = root.open_dir()
    except OSError as exc:
        return {**empty, "state": "unreadable", "note": type(exc).__name__}
    try:
        _walk_dir(fd, (), walk, 0)
    finally:
        os.close(fd)
    return {"state": "ok", "files": walk.files, "more": walk.more, "cut": walk.cut, "note": ""}


def _stored_link(path: Stored) -> str:
    try:
        return safe_name(path.readlink())
    except OSError:
        return "(unreadable)"


def _link(path: Path | str, dir_fd: int | None = None) -> str:
    try:
        return safe_name(os.readlink(path, dir_fd=dir_fd))
    except OSError:
        return "(unreadable)"


def _walk_dir(fd: int, parts: tuple[str, ...], walk: _Walk, depth: int) -> None:
    """List one folder (files first, sorted), then enter its subfolders through ``fd``."""
    try:
        with os.scandir(fd) as it:
            entries = []
            for e in it:
                walk.scanned += 1
                if walk.scanned > WORKSPACE_SCAN_MAX:
                    walk.cut = True
                    break
                entries.append(e)
    except OSError:
        _add(walk, {"path": safe_name("/".join(parts) or "."), "size": None, "text": None,
                    "note": "folder unreadable"})
        return
    entries.sort(key=lambda e: e.name)
    subdirs = []
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError as exc:
            _add(walk, {"path": safe_name("/".join((*parts, e.name))), "size": None, "text": None,
                        "note": f"unreadable ({type(exc).__name__})"})
            continue
        if stat.S_ISDIR(st.st_mode):
            subdirs.append(e.name)
            continue
        _add(walk, _entry(fd, parts, e.name, st, walk))
    for name in subdirs:
        if walk.cut:
            return
        if depth + 1 >= WORKSPACE_DEPTH_MAX:
            walk.cut = True
            _add(walk, {"path": safe_name("/".join((*parts, name))), "size": None, "text": None,
                        "note": f"folder not entered (more than {WORKSPACE_DEPTH_MAX} levels deep)"})
            continue
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            _add(walk, {"path": safe_name("/".join((*parts, name))), "size": None, "text": None,
                        "note": f"folder unreadable ({type(exc).__name__})"})
            continue
        try:
            _walk_dir(sub, (*parts, name), walk, depth + 1)
        finally:
            os.close(sub)


def _add(walk: _Walk, entry: dict[str, Any] | None) -> None:
    if len(walk.files) >= WORKSPACE_FILES_MAX:
        walk.more += 1
    elif entry is not None:
        walk.files.append(entry)


def _entry(fd: int, parts: tuple[str, ...], name: str, st: os.stat_result, walk: _Walk) -> dict[str, Any] | None:
    """One non-folder entry. Reads the file only when it will be listed and is small enough."""
    if len(walk.files) >= WORKSPACE_FILES_MAX:
        return None  # counted in ``more``; not looked at further
    entry: dict[str, Any] = {"path": safe_name("/".join((*parts, name))), "size": None, "text": None, "note": ""}
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        entry["note"] = f"symlink to {_link(name, fd)} (not followed)"
        return entry
    if not stat.S_ISREG(mode):
        entry["note"] = f"{kind_of(mode)}, not opened"
        return entry
    entry["size"] = st.st_size
    if st.st_size > WORKSPACE_TEXT_LIMIT or st.st_size > walk.budget:
        entry["note"] = "too large to show"
        return entry
    try:
        data = read_regular(name, WORKSPACE_TEXT_LIMIT + 1, dir_fd=fd, expect=st)
    except OSError as exc:
        entry["note"] = f"unreadable ({type(exc).__name__})"
        return entry
    if len(data) > WORKSPACE_TEXT_LIMIT or len(data) > walk.budget:
        entry["note"] = "too large to show"  # it grew since lstat
    elif b"\0" in data:
        entry["note"] = "binary"
    else:
        try:
            entry["text"] = data.decode("utf-8")
            walk.budget -= len(data)
        except UnicodeDecodeError:
            entry["note"] = "not UTF-8 text"
    return entry

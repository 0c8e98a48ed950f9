"""Workspace paths: the rule a validator's path option must follow, and reading the file it names safely.

**The rule** (:func:`workspace_path_problem`): a path option is relative to the measured workspace and
stays inside it: not empty, not absolute, and no ``..`` that climbs above the workspace (``a/../b`` is
fine). ``validate`` applies it to the path as written, each ``${name}`` standing for one plain name
(``${workspace}`` for an absolute path, which it is); the validator applies it again to the rendered
path when it judges, and a path that breaks it only then is an *invalid options* result, a spec error
(HARNESS_ERROR), never the agent's failure.

**Reading** (:func:`read_workspace_file`, :func:`workspace_directory`): validators judge the harness's
copy of the measured workspace (a live run's fresh copy, or a recompute's copy of a stored one), which
never holds a link. So no link is followed anywhere: the workspace itself is opened from ``/`` one
component at a time with ``O_NOFOLLOW`` (its path, ``ctx.workspace``, holds no link: the harness resolves
the results folder; a workspace replaced by a link is not read), then the path is walked one name at a
time from that descriptor, ``lstat`` before every open, each open with ``O_NOFOLLOW``; a symlink on the
way is a problem, never followed. Only regular files are opened (``O_NONBLOCK`` too, so a FIFO swapped in
after the ``lstat`` cannot hang the read), and at most :data:`MAX_READ_BYTES` are read. Whatever is there
(a FIFO, a device, a symlink), the answer is a problem text, never an exception or a hang.
"""

from __future__ import annotations

import os
import stat

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .context import ValidatorContext
from ..runvalues import render

__all__ = [
    "FileRead", "MAX_READ_BYTES", "read_workspace_file", "static_path_problem", "workspace_directory",
    "workspace_path_problem",
]

#: Files larger than this are judged on their first MAX_READ_BYTES bytes.
MAX_READ_BYTES = 1024 * 1024
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def workspace_path_problem(path: str) -> str | None:
    """Why ``path`` (already rendered) is not a path inside the workspace, or None when it is."""
    if not path:
        return "is empty; give a path relative to the workspace"
    if "\x00" in path:
        return "contains a NUL byte"
    if path.startswith("/"):
        return "is absolute; give it relative to the workspace (e.g. 'out.txt')"
    depth = 0
    for part in path.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return "leaves the workspace ('..' climbs above it); paths must stay inside the workspace"
        elif part not in ("", "."):
            depth += 1
    return None


class _Placeholders:
    """What ``${name}`` stands for when a path is checked before a run: ``${workspace}`` is absolute,
    any other variable one plain name (it may hold more: the rendered path is checked again at run time)."""

    def __getitem__(self, name: str) -> str:
        return "/workspace" if name == "workspace" else "x"


def static_path_problem(path: str) -> str | None:
    """:func:`workspace_path_problem` for a path option as written in a spec (``${name}`` not rendered)."""
    problem = workspace_path_problem(render(path, _Placeholders()))  # type: ignore[arg-type]
    if problem and "${workspace}" in path and problem.startswith("is absolute"):
        return "is absolute (${workspace} is the workspace's absolute path); give it relative to the workspace"
    return problem


@dataclass
class FileRead:
    """One workspace file as a validator sees it: ``text`` is None when it could not be read."""

    path: str
    text: str | None
    problem: str = ""
    size: int = 0
    truncated: bool = False
    valid_utf8: bool = True

    @property
    def observed(self) -> str:
        """What to show as observed when ``text`` is None."""
        return f"<{self.problem}>"


def read_workspace_file(ctx: ValidatorContext, rel_path: str) -> FileRead:
    """Read ``rel_path`` from the measured workspace without ever raising or blocking.

    Only regular files inside the workspace are read (a path breaking the rule, a directory, a FIFO,
    a device or a symlink pointing outside all give ``text=None`` with a ``problem``). At most
    :data:`MAX_READ_BYTES` are read; bytes are decoded as UTF-8 with replacement characters, so binary
    garbage still yields text.
    """
    problem = workspace_path_problem(rel_path)
    if problem:
        return FileRead(rel_path, None, f"path {problem}")
    opened = _open_in_workspace(ctx, rel_path, want="file")
    if isinstance(opened, str):
        return FileRead(rel_path, None, opened)
    fd, size = opened
    try:
        data = _read_capped(fd, MAX_READ_BYTES + 1)
    except OSError as exc:
        return FileRead(rel_path, None, f"cannot read: {type(exc).__name__}")
    finally:
        os.close(fd)
    truncated = len(data) > MAX_READ_BYTES
    data = data[:MAX_READ_BYTES]
    try:
        text = data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        valid = False
    return FileRead(rel_path, text, size=size, truncated=truncated, valid_utf8=valid)


def workspace_directory(ctx: ValidatorContext, rel_path: str) -> Path | str:
    """The directory ``rel_path`` names inside the workspace, as a symlink-free path under
    ``ctx.workspace``, or why it cannot be used (missing, not a directory, leading outside)."""
    problem = workspace_path_problem(rel_path)
    if problem:
        return f"path {problem}"
    found = _open_in_workspace(ctx, rel_path, want="directory")
    if isinstance(found, str):
        return found
    fd, inner = found
    os.close(fd)
    return Path(ctx.workspace) / inner if inner else Path(ctx.workspace)


def _read_capped(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = os.read(fd, min(limit - size, 1 << 20))
        except BlockingIOError:  # cannot happen for a regular file; never wait for it either
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _open_in_workspace(ctx: ValidatorContext, rel_path: str, *, want: str) -> tuple[int, Any] | str:
    """Walk ``rel_path`` inside the workspace without following a link (the workspace's own path included).

    ``want="file"``: ``(fd, size)`` of a regular file. ``want="directory"``: ``(fd, inner)`` where
    ``inner`` is the relative path of the directory. Otherwise a problem text.
    """
    from ..store.trees import Refused, open_dir

    try:
        root_fd = open_dir(ctx.workspace)
    except Refused as exc:
        if exc.reason == "symlink_in_path":
            return f"the workspace is not read: a symlink on its path ({exc.where}), not followed"
        return f"cannot open the workspace: {exc.reason.replace('_', ' ')}"
    except OSError as exc:
        return f"cannot open the workspace: {exc.strerror or type(exc).__name__}"
    stack: list[tuple[int, str]] = [(root_fd, "")]
    parts = deque(rel_path.split("/"))
    try:
        while parts:
            name = parts.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) == 1:
                    return "path resolves outside the workspace"
                os.close(stack.pop()[0])
                continue
            dir_fd = stack[-1][0]
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return "file missing" if want == "file" else "no such directory"
            except OSError as exc:
                return f"cannot stat: {exc.strerror or type(exc).__name__}"
            last = not any(p not in ("", ".") for p in parts)
            if stat.S_ISLNK(st.st_mode):
                return f"{name!r} is a symlink (not followed)"
            if stat.S_ISDIR(st.st_mode):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
                except OSError as exc:
                    return f"cannot open: {exc.strerror or type(exc).__name__}"
                stack.append((fd, f"{stack[-1][1]}/{name}" if stack[-1][1] else name))
                continue
            if not last:
                return f"{name!r} is not a directory"
            if want != "file":
                return "not a directory"
            if not stat.S_ISREG(st.st_mode):
                return "not a regular file"
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
            except OSError as exc:
                return f"cannot open: {exc.strerror or type(exc).__name__}"
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                return "not a regular file (it changed while being opened)"
            return fd, opened.st_size
        if want == "file":
            return "is a directory, not a file"
        return stack.pop()
    finally:
        for fd, _ in stack:
            os.close(fd)

"""Files an agent left in its phase's own folders, reached without ever following a link.

A phase has three folders of its own: its workspace, its HOME (with the XDG folders under it) and its
TMPDIR. After the agent ran, anything in them may be a symlink to a host folder (a real agent, driven by
its model, replaced its log folder with one), a FIFO, or a name that is not UTF-8. So every file the
harness or a driver reads there is reached by :func:`open_agent_file`: the path must lie inside one of
the three folders (lexically: no ``..`` out of it), and it is opened one component at a time from ``/``
with ``O_NOFOLLOW`` (:func:`gripprobe_core.store.trees.open_dir`), so a symlink anywhere on the way is
refused, and only a regular file is opened.

Public for drivers (re-exported by :mod:`gripprobe_core.plugin`): :func:`read_agent_file` (read one of
the agent's files, e.g. to redact it before it is kept) and :func:`find_agent_files` (glob-like search
that never walks through a link). The harness keeps what ``artifacts(ctx)`` names the same way
(:func:`gripprobe_core.runner.evidence.keep_files`).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path

from .phase import PhaseContext
from .store.trees import Refused, open_beneath, open_dir

__all__ = ["MAX_READ_BYTES", "Refused", "find_agent_files", "open_agent_file", "phase_dirs", "read_agent_file"]

MAX_READ_BYTES = 32 * 1024 * 1024
"""What :func:`read_agent_file` reads at most by default."""
MAX_FOUND = 10_000
"""What :func:`find_agent_files` returns at most (an agent may leave 100,000 matching files)."""


def phase_dirs(ctx: PhaseContext) -> dict[str, Path]:
    """The phase's own folders by label: ``workspace``, ``home`` (XDG folders are under it), ``tmpdir``."""
    return {"workspace": Path(ctx.workspace), "home": Path(ctx.home), "tmpdir": Path(ctx.tmpdir)}


def locate(ctx: PhaseContext, path: str | os.PathLike[str]) -> tuple[str, Path, list[str]]:
    """``(label, folder, names below it)`` of ``path`` inside one of the phase's folders (the innermost
    when they nest); :class:`Refused` (``outside_phase_dirs``) for anything else, a relative path or a
    ``..`` leading out included."""
    raw = os.fspath(path)
    if not isinstance(raw, str) or not os.path.isabs(raw) or "\x00" in raw:
        raise Refused("outside_phase_dirs", str(raw))
    p = os.path.normpath(raw)
    best: tuple[str, Path, list[str]] | None = None
    for label, folder in phase_dirs(ctx).items():
        base = os.path.normpath(os.fspath(folder))
        if p == base or p.startswith(base.rstrip("/") + "/"):
            names = [n for n in p[len(base):].split("/") if n]
            if best is None or len(names) < len(best[2]):
                best = (label, folder, names)
    if best is None:
        raise Refused("outside_phase_dirs", p)
    return best


def open_agent_file(ctx: PhaseContext, path: str | os.PathLike[str], *, file: bool = True) -> int:
    """A file descriptor for ``path`` (a regular file, or a folder with ``file=False``) inside the
    phase's folders, reached with no symlink followed; :class:`Refused` with the reason otherwise.
    The caller closes it."""
    label, folder, names = locate(ctx, path)
    try:
        root = open_dir(folder)
    except Refused as exc:
        raise Refused(exc.reason, label) from None
    try:
        return open_beneath(root, names, file=file, prefix=label)
    finally:
        os.close(root)


def read_agent_file(ctx: PhaseContext, path: str | os.PathLike[str], limit: int = MAX_READ_BYTES) -> bytes | None:
    """The first ``limit`` bytes of the agent's file at ``path``, or None when there is no regular file
    there that can be reached safely: outside the phase's workspace, HOME and TMPDIR, reached through a
    symlink in any component, a FIFO or a device, missing, unreadable.

    For a driver that must look into a file before it is kept (e.g. to redact a secret and keep the
    result as bytes from ``artifacts``)."""
    try:
        fd = open_agent_file(ctx, path)
    except OSError:
        return None
    try:
        chunks, left = [], limit
        while left > 0:
            try:
                chunk = os.read(fd, min(left, 1 << 20))
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def find_agent_files(ctx: PhaseContext, folder: str | os.PathLike[str], pattern: str) -> list[Path]:
    """The regular files under ``folder`` (inside the phase's folders) whose path below it matches
    ``pattern`` (``/``-separated, each part a shell pattern as in :mod:`glob`: ``*/*/rollout-*.jsonl``;
    ``*`` does not match a leading dot), sorted, at most :data:`MAX_FOUND`.

    Like ``Path.glob`` but a symlink is never walked through nor returned, and a FIFO never matches;
    [] when ``folder`` itself is outside the phase, missing or reached through a link."""
    parts = [p for p in pattern.split("/") if p]
    if not parts or any(p in (".", "..") or "**" in p for p in parts):
        return []
    try:
        root = open_agent_file(ctx, folder, file=False)
    except OSError:
        return []
    found: list[Path] = []
    try:
        _find(root, Path(folder), parts, found)
    finally:
        os.close(root)
    return sorted(found)


def _matches(name: str, part: str) -> bool:
    if name.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, part)


def _find(dir_fd: int, at: Path, parts: list[str], found: list[Path]) -> None:
    """Depth bounded by the pattern (a few folders), so recursion is bounded too."""
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError:
        return
    last = len(parts) == 1
    for name in names:
        if len(found) >= MAX_FOUND:
            return
        if not _matches(name, parts[0]):
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if last:
            if stat.S_ISREG(st.st_mode):
                found.append(at / name)
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        try:
            child = open_beneath(dir_fd, [name], file=False)
        except OSError:
            continue
        try:
            _find(child, at / name, parts[1:], found)
        finally:
            os.close(child)

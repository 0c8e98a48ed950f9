"""Reading stored files that an agent may have planted or replaced.

A run directory can hold whatever the agent under test left in it: a FIFO where a report expects a
file (opening it would block forever), a device node (opening one can have side effects), a symlink to
``/etc/passwd`` or to a huge file elsewhere. :func:`read_regular` reads only regular files: it looks
with ``lstat`` first and never opens anything else, opens with ``O_NOFOLLOW | O_NONBLOCK`` and checks
the opened file is the same regular file, and reads at most ``limit`` bytes.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NOT_REGULAR", "OPEN_FLAGS", "NotRegularFile", "kind_of", "open_regular", "read_regular", "read_stored"]

OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Flags every reader of untrusted stored files opens with (a symlink fails, a FIFO never blocks)."""

NOT_REGULAR = errno.EINVAL


class NotRegularFile(OSError):
    """The path exists but is a symlink, FIFO, device, socket or folder: it was not opened."""


def json_kind(path: Path) -> str | None:
    """The ``kind`` a report folder's JSON file declares (``aggregate.json``, ``compare.json``: how a command
    knows a folder holds its own earlier output); None when the file is missing, a symlink, not a JSON object."""
    try:
        if path.is_symlink():
            return None
        obj = json.loads(read_regular(path, 1 << 30))
    except (OSError, ValueError, RecursionError):
        return None
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def kind_of(mode: int) -> str:
    """A short name for what a ``st_mode`` is (``file``, ``folder``, ``symlink``, ``FIFO`` ...)."""
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def open_regular(name: str | Path, *, dir_fd: int | None = None, expect: os.stat_result | None = None) -> BinaryIO:
    """Open ``name`` (relative to ``dir_fd`` when given) for binary reading without following a symlink
    or blocking on a FIFO, and check it is a regular file (the very one ``expect`` describes, if given).

    Without ``expect`` it is ``lstat``-ed first, so a FIFO or device is never opened at all."""
    if expect is None:
        expect = os.lstat(name, dir_fd=dir_fd)
    if not stat.S_ISREG(expect.st_mode):
        raise NotRegularFile(NOT_REGULAR, f"not a regular file ({kind_of(expect.st_mode)})", str(name))
    fd = os.open(name, OPEN_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
            raise NotRegularFile(NOT_REGULAR, "replaced while being opened", str(name))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, limit: int | None = None, *, dir_fd: int | None = None,
                 expect: os.stat_result | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``). Raises :class:`FileNotFoundError`
    when nothing is there, :class:`NotRegularFile` (an :class:`OSError`) for anything but a regular file,
    other :class:`OSError` when it cannot be read. FIFOs and devices are never opened."""
    with open_regular(path, dir_fd=dir_fd, expect=expect) as fh:
        return fh.read(-1 if limit is None else limit)


def read_stored(root: str | Path, rel: str | Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``rel`` below the stored run (or case) folder ``root``, read without
    following a link in ANY component below ``root`` (``root`` itself is the path the user named, links and
    all). Raises :class:`FileNotFoundError` when nothing is there and :class:`NotRegularFile` when a
    component below ``root`` is a symlink, or the file is a FIFO, device or folder; never blocks on a FIFO."""
    from .trees import DIR_FLAGS, Refused, open_beneath

    parts = [n for n in Path(rel).parts if n not in ("", ".")]
    if Path(rel).is_absolute() or ".." in parts:
        raise NotRegularFile(NOT_REGULAR, "not a path below the run folder", str(rel))
    top = os.open(root, DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        fd = open_beneath(top, parts, file=True)
    except Refused as exc:
        if exc.reason == "missing":
            raise FileNotFoundError(errno.ENOENT, "no such file", str(Path(root) / rel)) from None
        raise NotRegularFile(NOT_REGULAR, f"not read: {exc.reason} at {exc.where}", str(Path(root) / rel)) from None
    finally:
        os.close(top)
    with os.fdopen(fd, "rb") as fh:
        os.set_blocking(fd, True)
        return fh.read(-1 if limit is None else limit)

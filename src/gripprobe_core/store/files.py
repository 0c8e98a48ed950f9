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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

__all__ = ["NOT_REGULAR", "OPEN_FLAGS", "NotRegularFile", "OpenFolder", "Stored", "kind_of", "open_regular",
           "read_regular", "read_stored"]

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


def read_upto(fh: BinaryIO, limit: int | None) -> bytes:
    """At most ``limit`` bytes of the open file ``fh``. ``fh.read(limit)`` would allocate all of ``limit`` up
    front (64 MiB for a 15 KB case.json: +25 us a file); this asks for the file's size plus one byte, and
    reads on only when the file grew meanwhile."""
    if limit is None:
        return fh.read()
    size = os.fstat(fh.fileno()).st_size
    data = fh.read(max(0, min(limit, size + 1)))
    if len(data) <= size or len(data) >= limit:
        return data
    return data + fh.read(limit - len(data))


def read_fd(fd: int, limit: int | None) -> bytes:
    """:func:`read_upto` of an open regular file's descriptor with ``os.read`` (no file object: a reader of every
    case reads three files a case): the file's size plus one byte, then on only when it grew meanwhile."""
    size = os.fstat(fd).st_size
    want = size + 1 if limit is None else min(limit, size + 1)
    chunks: list[bytes] = []
    got = 0
    while got < want:
        chunk = os.read(fd, want - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > size and (limit is None or got < limit):  # it grew since the fstat: read on, up to the limit
        while limit is None or got < limit:
            chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular(path: str | Path, limit: int | None = None, *, dir_fd: int | None = None,
                 expect: os.stat_result | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``). Raises :class:`FileNotFoundError`
    when nothing is there, :class:`NotRegularFile` (an :class:`OSError`) for anything but a regular file,
    other :class:`OSError` when it cannot be read. FIFOs and devices are never opened."""
    with open_regular(path, dir_fd=dir_fd, expect=expect) as fh:
        return read_upto(fh, limit)


def read_stored(root: str | Path, rel: str | Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``rel`` below the stored run (or case) folder ``root``, read without
    following a link in ANY component below ``root`` (``root`` itself is the path the user named, links and
    all). Raises :class:`FileNotFoundError` when nothing is there and :class:`NotRegularFile` when a
    component below ``root`` is a symlink, or the file is a FIFO, device or folder; never blocks on a FIFO."""
    with Stored(Path(root), PurePosixPath(rel)).open() as fh:
        return read_upto(fh, limit)


@dataclass(frozen=True)
class Stored:
    """A path in a stored run, read without following a link: ``root`` is the folder the user named (the run
    folder, or the results root; links in it are the user's own), ``rel`` the path below it, where no
    component is followed if it is a symlink (each is opened with ``openat`` and ``O_NOFOLLOW``), so nothing
    planted in the run can lead a reader out of it. Every method raises :class:`FileNotFoundError` when
    nothing is there and :class:`NotRegularFile` (an :class:`OSError`) for a link or anything else in the
    way; ``case = run.stored / "cases" / name``, ``(case / "prompt.txt").read(limit)``."""

    root: Path
    rel: PurePosixPath = PurePosixPath()

    def __truediv__(self, name: str | PurePosixPath) -> "Stored":
        return Stored(self.root, self.rel / name)

    @property
    def path(self) -> Path:
        """The path, for messages (never opened as such)."""
        return self.root / self.rel

    @property
    def name(self) -> str:
        return self.rel.name

    @property
    def parent(self) -> "Stored":
        """The folder holding it, below the same root (``case.parent.name`` is a case file's case folder)."""
        return Stored(self.root, self.rel.parent)

    def _parts(self) -> list[str]:
        parts = [n for n in self.rel.parts if n not in ("", ".")]
        if self.rel.is_absolute() or ".." in parts:
            raise NotRegularFile(NOT_REGULAR, "not a path below the stored folder", str(self.path))
        return parts

    def _open(self, parts: list[str], *, file: bool) -> int:
        from .trees import DIR_FLAGS, Refused, open_beneath

        top = os.open(self.root, DIR_FLAGS & ~os.O_NOFOLLOW)  # the folder the user named: links and all
        try:
            return open_beneath(top, parts, file=file)
        except Refused as exc:
            if exc.reason == "missing":
                raise FileNotFoundError(errno.ENOENT, "no such file", str(self.path)) from None
            raise NotRegularFile(NOT_REGULAR, f"not read: {exc.reason} at {exc.where}", str(self.path)) from None
        finally:
            os.close(top)

    def open(self) -> BinaryIO:
        """The regular file, open for binary reading (never a FIFO, device, folder or link)."""
        fd = self._open(self._parts(), file=True)
        try:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read(self, limit: int | None = None) -> bytes:
        """At most ``limit`` bytes of the regular file."""
        with self.open() as fh:
            return read_upto(fh, limit)

    def opened(self) -> "OpenFolder":
        """This folder held open, to read several files below it with one walk (``with case.opened() as f:
        f.read("case.json", limit)``): no link followed on the way to it nor below it."""
        return OpenFolder(self)

    def open_dir(self) -> int:
        """A descriptor of the folder (the caller closes it)."""
        return self._open(self._parts(), file=False)

    def lstat(self) -> os.stat_result:
        """What the last component is (a link is reported as one, never followed); its folders are walked
        without following a link."""
        parts = self._parts()
        if not parts:
            return os.stat(self.root)
        fd = self._open(parts[:-1], file=False)
        try:
            return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def lexists(self) -> bool:
        """Whether anything (a link included) is there."""
        try:
            self.lstat()
        except OSError:
            return False
        return True

    def readlink(self) -> str:
        """The target of the link (its folders walked without following a link)."""
        parts = self._parts()
        fd = self._open(parts[:-1], file=False)
        try:
            return os.readlink(parts[-1], dir_fd=fd)
        finally:
            os.close(fd)

    def folders(self) -> list[str]:
        """The names of the real folders in this folder (links to folders left out), sorted; [] when it is not
        a folder that can be read."""
        try:
            fd = self.open_dir()
        except OSError:
            return []
        try:
            with os.scandir(fd) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            return []
        finally:
            os.close(fd)


class OpenFolder:
    """A stored folder opened once (its path walked as :class:`Stored` walks it), for reading several files below
    it without walking the path again: what a reader of every case does per case. A context manager; each
    :meth:`read` (and :meth:`child`) opens its names with ``openat`` and ``O_NOFOLLOW`` below the held folder,
    so the guarantees are :class:`Stored`'s (no link, FIFO, device or folder read; the folder itself cannot be
    swapped meanwhile). Opening raises what :meth:`Stored.open_dir` raises."""

    def __init__(self, folder: Stored, fd: int | None = None) -> None:
        self._stored: Stored | None = folder
        self._parent: OpenFolder | None = None
        self._rel = ""
        self.fd = folder.open_dir() if fd is None else fd

    @property
    def stored(self) -> Stored:
        """Where the folder is (for messages; made when asked: a reader opens thousands of folders)."""
        if self._stored is None:
            assert self._parent is not None
            self._stored = self._parent.stored / self._rel
        return self._stored

    def __enter__(self) -> "OpenFolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _open(self, rel: str, *, file: bool) -> int:
        from .trees import Refused, open_beneath

        if "/" not in rel and rel not in ("", ".", ".."):  # one name (a reader opens four a case): no splitting
            parts = [rel]
        else:
            parts = [n for n in rel.split("/") if n not in ("", ".")]
        if rel.startswith("/") or ".." in parts:
            raise NotRegularFile(NOT_REGULAR, "not a path below the stored folder", str(self.stored.path / rel))
        try:
            return open_beneath(self.fd, parts, file=file)
        except Refused as exc:
            path = str(self.stored.path / rel)
            if exc.reason == "missing":
                raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
            where = "/".join((str(self.stored.rel), exc.where)).strip("/")
            raise NotRegularFile(NOT_REGULAR, f"not read: {exc.reason} at {where}", path) from None

    def child(self, rel: str) -> "OpenFolder":
        """The folder ``rel`` below this one, opened (the caller closes it)."""
        fd = self._open(rel, file=False)
        out = OpenFolder.__new__(OpenFolder)
        out._stored, out._parent, out._rel, out.fd = None, self, rel, fd
        return out

    def read(self, rel: str, limit: int | None = None) -> bytes:
        """At most ``limit`` bytes of the regular file ``rel`` (``"artifacts/events.measured.jsonl"``) below the
        folder; :class:`FileNotFoundError` when nothing is there, :class:`NotRegularFile` for anything else."""
        fd = self._open(rel, file=True)
        try:
            return read_fd(fd, limit)
        finally:
            os.close(fd)

    def folders(self) -> list[str]:
        """The names of the real folders in this folder (links to folders left out), sorted."""
        try:
            with os.scandir(self.fd) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            return []

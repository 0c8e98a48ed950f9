"""Trees an agent wrote: reaching a path in them without following a link, and removing them whole.

An agent's workspace, HOME and TMPDIR are the agent's own: by the time the harness looks, any folder in
them may be a symlink to a host folder, any entry a FIFO, a socket or a name that is not UTF-8, and a
tree may be thousands of folders deep with some of them ``chmod 000``. Two operations on such trees:

* :func:`open_dir` / :func:`open_beneath` — open a path one component at a time (``openat`` with
  ``O_NOFOLLOW``): a symlink anywhere on the way is :class:`Refused`, never followed. The harness lays
  out every phase under a folder whose path holds no link (``tempfile`` resolved), so a walk from ``/``
  is a walk from a root the harness created.
* :func:`remove_tree` — remove a tree without recursion and without following a link. It empties one
  folder at a time and moves every subfolder it meets up to the top of the tree (``renameat``), so depth
  never matters: no recursion, no path longer than one name, two folder descriptors open. A folder the
  agent locked (``chmod 000``) is made the harness's again first; a mount point (a folder that cannot be
  renamed) is never entered. What cannot be removed comes back as one-line problems, never an exception.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Iterable, Iterator

from ..textsafe import safe_name

__all__ = ["DIR_FLAGS", "FILE_FLAGS", "Refused", "open_beneath", "open_dir", "remove_tree", "scratch_folder"]

log = logging.getLogger(__name__)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""A folder, never through a symlink."""
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""A file, never through a symlink, never blocking on a FIFO (check ``S_ISREG`` on what was opened)."""
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWN = 0o700


class Refused(OSError):
    """A path was not opened: ``reason`` is ``symlink_in_path``, ``not_a_directory``, ``not_a_regular_file``,
    ``missing`` or ``unreadable``; ``where`` the component it stopped at (as the caller named it)."""

    def __init__(self, reason: str, where: str) -> None:
        super().__init__(errno.EPERM, f"{reason}: {safe_name(where)}")
        self.reason = reason
        self.where = where


def _refusal(exc: OSError, st: os.stat_result | None, where: str) -> Refused:
    if st is not None and stat.S_ISLNK(st.st_mode):
        return Refused("symlink_in_path", where)
    if isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOENT:
        return Refused("missing", where)
    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
        return Refused("symlink_in_path" if exc.errno == errno.ELOOP else "not_a_directory", where)
    return Refused("unreadable", where)


def _open_child(dir_fd: int, name: str, *, final_file: bool, where: str) -> int:
    """Open ``name`` in ``dir_fd``: a folder, or (``final_file``) a regular file; never a symlink."""
    st = None
    if not final_file:  # O_DIRECTORY | O_NOFOLLOW opens nothing but a real folder: one call, no check around it
        try:
            return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            try:  # why not (a link, a file, nothing): looked at only when refused
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                st = None
            raise _refusal(exc, st, where) from None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise Refused("symlink_in_path", where)
        if final_file and not stat.S_ISREG(st.st_mode):
            raise Refused("not_a_regular_file", where)
        if not final_file and not stat.S_ISDIR(st.st_mode):
            raise Refused("not_a_directory", where)
        fd = os.open(name, FILE_FLAGS if final_file else DIR_FLAGS, dir_fd=dir_fd)
    except Refused:
        raise
    except OSError as exc:
        raise _refusal(exc, st, where) from None
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or (final_file and not stat.S_ISREG(now.st_mode)):
        os.close(fd)
        raise Refused("not_a_regular_file" if final_file else "not_a_directory", where)  # swapped meanwhile
    return fd


def open_beneath(dir_fd: int, parts: Iterable[str], *, file: bool = True, prefix: str = "") -> int:
    """Open ``parts`` (names, no ``..``) below the open folder ``dir_fd``, one ``openat`` with ``O_NOFOLLOW``
    per name: the last a regular file (``file``, opened ``O_NONBLOCK``) or a folder. Raises :class:`Refused`
    (``where`` is ``prefix`` joined with the names up to the one it stopped at). The caller closes the fd."""
    names = list(parts)
    if any(n in ("", ".", "..") or "/" in n for n in names):
        raise Refused("not_a_directory", "/".join([prefix, *names]).strip("/"))
    if not names:
        if file:
            raise Refused("not_a_regular_file", prefix)
        return os.dup(dir_fd)
    fd = dir_fd
    last = len(names) - 1
    try:
        for i, name in enumerate(names):
            try:
                child = _open_child(fd, name, final_file=file and i == last, where=name)
            except Refused as exc:  # where it stopped, spelled out only when it did (a reader opens 5 names a case)
                raise Refused(exc.reason, "/".join([prefix, *names[:i + 1]]).strip("/")) from None
            if fd != dir_fd:
                os.close(fd)
            fd = child
        return fd
    except BaseException:
        if fd != dir_fd:
            os.close(fd)
        raise


def open_dir(path: Path | str) -> int:
    """Open the folder at the absolute ``path`` walking from ``/`` with ``O_NOFOLLOW`` at every component:
    :class:`Refused` when any component is a symlink (or missing, or not a folder)."""
    p = os.path.normpath(os.fspath(path))
    if not os.path.isabs(p):
        raise Refused("not_a_directory", p)
    root = os.open("/", DIR_FLAGS)
    try:
        return open_beneath(root, [n for n in p.split("/") if n], file=False, prefix="/")
    finally:
        os.close(root)


# ------------------------------------------------------------------------------------------ removal


def remove_tree(path: Path | str) -> list[str]:
    """Remove ``path`` and everything under it; the one-line problems of what could not be removed ([] when
    nothing is left). Never raises for what is in the tree, never follows a symlink (a link is removed,
    never what it points at), never recurses. ``path`` itself may be a folder, a file, a link or missing."""
    path = Path(path)
    try:
        parent = os.open(path.parent, DIR_FLAGS)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            return []
        return [f"{safe_name(str(path))}: parent folder not openable: {exc.strerror or type(exc).__name__}"]
    try:
        return _remove_at(parent, path.name, str(path))
    finally:
        os.close(parent)


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A fresh private folder in the temporary directory, its path resolved (no link in it: walks from ``/``
    hold), removed with :func:`remove_tree` on the way out; what could not be removed is logged as a
    ``scratch_not_removed`` warning, never raised (unlike ``tempfile.TemporaryDirectory``, whose cleanup
    recurses and raises on what agents leave)."""
    path = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    try:
        yield path
    finally:
        for problem in remove_tree(path):
            log.warning("warning: scratch_not_removed: %s", problem)


def _make_own(dir_fd: int, name: str) -> None:
    """Give the folder ``name`` (never a link) back to its owner's full access (``chmod 000`` undone)."""
    try:
        fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.chmod(f"/proc/self/fd/{fd}", _OWN)  # an O_PATH descriptor: the folder itself, never a link
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(dir_fd, _OWN)  # the folder holding it lost its w/x bits
        os.unlink(name, dir_fd=dir_fd)


def _open_for_removal(dir_fd: int, name: str) -> int:
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        _make_own(dir_fd, name)
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        os.chmod(fd, _OWN)
    except OSError:
        pass
    return fd


def _remove_at(parent: int, name: str, shown: str) -> list[str]:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{safe_name(shown)}: {exc.strerror or type(exc).__name__}"]
    try:
        if not stat.S_ISDIR(st.st_mode):
            _unlink(parent, name)
            return []
        top = _open_for_removal(parent, name)
    except OSError as exc:
        return [f"{safe_name(shown)}: {exc.strerror or type(exc).__name__}"]
    try:
        problems = _empty(top, shown)
    finally:
        os.close(top)
    try:
        os.rmdir(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if not problems:
            problems.append(f"{safe_name(shown)}: {exc.strerror or type(exc).__name__}")
    return problems


class _Stuck(Exception):
    def __init__(self, where: str, exc: OSError) -> None:
        super().__init__(where)
        self.where = where
        self.why = exc.strerror or type(exc).__name__


class _Removal:
    """One removal under way: the open top folder, fresh names for folders moved into it, how much was done."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.fresh = count()
        self.origin: dict[str, tuple[str | None, str]] = {}
        """Folders moved into the top by this removal (renamed once: not a mount point), by their new name:
        (the new name of the folder they were in, None for the top itself; their own name there)."""
        self.done = 0

    def where(self, name: str, child: str | None = None) -> str:
        """The path below the top an entry had before anything was moved (for problems)."""
        parts = [child] if child is not None else []
        key: str | None = name
        while key is not None and key in self.origin:
            key, own = self.origin[key]
            parts.append(own)
        if key is not None:
            parts.append(key)
        return "/".join(reversed(parts))

    def spare_name(self) -> str:
        while True:
            candidate = f".gripprobe-rm-{next(self.fresh)}"
            try:
                os.stat(candidate, dir_fd=self.top, follow_symlinks=False)
            except FileNotFoundError:
                return candidate

    def move_up(self, src: int, name: str, src_key: str | None) -> None:
        """Move the folder ``name`` of ``src`` into the top under a fresh name (a mount point cannot move:
        EBUSY, so it is never entered)."""
        new = self.spare_name()
        try:
            os.rename(name, new, src_dir_fd=src, dst_dir_fd=self.top)
        except PermissionError:  # moving a folder rewrites its "..": it needs its own w bit
            _make_own(src, name)
            os.rename(name, new, src_dir_fd=src, dst_dir_fd=self.top)
        self.origin[new] = (src_key, name)
        self.done += 1

    def entry(self, name: str) -> None:
        """Remove one entry of the top; a folder is emptied first (its folders moved up into the top).
        :class:`_Stuck` names what could not be done."""
        try:
            st = os.stat(name, dir_fd=self.top, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                _unlink(self.top, name)
                self.done += 1
                return
            if name not in self.origin:  # a folder of the top itself: renamed once, so a mount point shows
                self.move_up(self.top, name, None)
                return
            fd = _open_for_removal(self.top, name)
        except OSError as exc:
            raise _Stuck(self.where(name), exc) from None
        try:
            for child in os.listdir(fd):
                try:
                    if stat.S_ISDIR(os.stat(child, dir_fd=fd, follow_symlinks=False).st_mode):
                        self.move_up(fd, child, name)
                    else:
                        _unlink(fd, child)
                        self.done += 1
                except OSError as exc:
                    raise _Stuck(self.where(name, child), exc) from None
        except OSError as exc:
            raise _Stuck(self.where(name), exc) from None
        finally:
            os.close(fd)
        try:
            os.rmdir(name, dir_fd=self.top)
        except OSError as exc:
            raise _Stuck(self.where(name), exc) from None
        self.done += 1


def _empty(top: int, shown: str) -> list[str]:
    """Empty the open folder ``top``, in rounds, until it is empty or a round gets nothing done."""
    removal = _Removal(top)
    while True:
        try:
            names = os.listdir(top)
        except OSError as exc:
            return [f"{safe_name(shown)}: not listable: {exc.strerror or type(exc).__name__}"]
        if not names:
            return []
        before = removal.done
        stuck: list[str] = []
        for name in names:
            try:
                removal.entry(name)
            except _Stuck as exc:
                stuck.append(f"{safe_name(shown)}/{safe_name(exc.where)}: {exc.why}")
        if removal.done == before:
            more = [f"{safe_name(shown)}: {len(stuck) - 20} more entries left"] if len(stuck) > 20 else []
            return stuck[:20] + more

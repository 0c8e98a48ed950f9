"""Copying a tree the harness does not trust, without following a link: an agent's workspace into its case,
and a stored case into a scratch folder for a recompute.

The agent's workspace is the agent's: anything in it may be a symlink, a FIFO, a device, a name that is
not UTF-8, a 1 GB file or 100,000 files, and under ``--sandbox none`` something may still be changing it.
So the harness copies only what validators and reports need, walking by directory file descriptor
(``O_NOFOLLOW``: a path swapped for a symlink mid-walk is not followed), opening only regular files
(``O_NONBLOCK``: a FIFO never blocks it), within size and count caps. Symlinks, FIFOs, sockets and
devices are listed (:class:`CopyListing`), never recreated. A stored case is copied the same way
(:func:`copy_stored_case`), so nothing a recompute reads can lead it out of the run.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..textsafe import safe_name
from .files import Stored, kind_of
from .trees import Refused, open_dir

__all__ = ["CopyLimits", "CopyListing", "MAX_FILE_BYTES", "copy_fd", "copy_stored_case", "copy_workspace",
           "display_name", "listing_key"]

MAX_FILE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class CopyLimits:
    """Caps on what is copied out of a workspace (the rest is listed as skipped, with the reason)."""

    max_files: int = 10_000
    max_file_bytes: int = MAX_FILE_BYTES
    max_total_bytes: int = 256 * 1024 * 1024
    max_depth: int = 64
    max_listed_skips: int = 1_000
    """Skipped entries listed one by one; beyond this they are only counted."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


#: A file name as safe one-line text (``\\xNN`` for bytes that are not UTF-8 and for control characters).
display_name = safe_name


def listing_key(rel: str) -> str:
    """The exact bytes of a relative path, as hex when they are not plain UTF-8 (listing ↔ disk key)."""
    raw = os.fsencode(rel)
    try:
        raw.decode("utf-8")
        return rel if "\\" not in rel else "hex:" + raw.hex()
    except UnicodeDecodeError:
        return "hex:" + raw.hex()


def _kind(mode: int) -> str:
    return ("dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "symlink" if stat.S_ISLNK(mode)
            else "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "other")


@dataclass
class CopyListing:
    """What a workspace copy holds and what it left out."""

    root: str
    limits: CopyLimits = field(default_factory=CopyLimits)
    files: int = 0
    bytes: int = 0
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    skipped_unlisted: int = 0
    error: str | None = None

    def skip(self, rel: str, kind: str, reason: str, **extra: Any) -> None:
        self.skipped += 1
        if self.skipped > self.limits.max_listed_skips:
            self.skipped_unlisted += 1
            return
        self.entries.append({"path": display_name(rel), "key": listing_key(rel), "type": kind, "copied": False,
                             "reason": reason, **extra})

    def as_json(self) -> dict[str, Any]:
        return {"root": self.root, "files": self.files, "bytes": self.bytes, "skipped": self.skipped,
                "skipped_unlisted": self.skipped_unlisted, "error": self.error,
                "limits": asdict(self.limits),
                "entries": self.entries}


def copy_fd(src_fd: int, dst: Path, mode: int, limit: int) -> tuple[int, str, bool]:
    """Copy at most ``limit`` bytes of an open file to ``dst``; (bytes, sha256, grew past limit)."""
    h = hashlib.sha256()
    n = 0
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode & 0o777 & ~0o022 | 0o600)
    try:
        while n < limit:
            try:
                chunk = os.read(src_fd, min(_CHUNK, limit - n))
            except BlockingIOError:  # a file that is not what it said (raced): stop here
                break
            if not chunk:
                break
            os.write(fd, chunk)
            h.update(chunk)
            n += len(chunk)
        grew = n >= limit and bool(os.read(src_fd, 1))
    finally:
        os.close(fd)
    return n, h.hexdigest(), grew


def copy_workspace(src: Path, dst: Path, limits: CopyLimits | None = None) -> CopyListing:
    """Copy the workspace at ``src`` into ``dst`` (created) the safe way; never raises for what is in it."""
    listing = CopyListing(root=display_name(str(src)), limits=limits or CopyLimits())
    dst.mkdir(parents=True, exist_ok=True)
    try:
        root_fd = open_dir(src)  # from /, no component followed: the agent cannot swap its workspace for a link
    except Refused as exc:
        listing.error = f"workspace not readable: {exc.reason}: {display_name(exc.where)}"
        return listing
    try:
        _walk(root_fd, "", dst, 0, listing)
    finally:
        os.close(root_fd)
    return listing


#: Largest file of a stored case copied for a recompute (a capture, a kept file, a proxy record file: the
#: harness caps each far below this).
STORED_FILE_MAX = 1024 * 1024 * 1024


def copy_stored_case(case: Stored, dst: Path) -> list[str]:
    """A copy of the stored case folder ``case`` in ``dst`` (created), for a recompute to judge: its files,
    ``artifacts/`` and ``workspace/``, each reached without following a link below the run folder (the case
    folder itself included) and copied as :func:`copy_workspace` copies a workspace. The harness writes only
    regular files and folders there, so anything else (a symlink, a FIFO, a device) is left out and named in
    the problems returned, as is a file past :data:`STORED_FILE_MAX` or a workspace not copied whole."""
    problems: list[str] = []
    dst.mkdir(parents=True, exist_ok=True)
    try:
        top = case.open_dir()
    except OSError as exc:
        return [f"the case folder is not read ({exc.strerror or type(exc).__name__})"]
    try:
        _copy_files(top, "", dst, problems, folders=("artifacts", "workspace"))
        for folder in ("artifacts", "workspace"):
            try:
                st = os.stat(folder, dir_fd=top, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                problems.append(f"{folder}/ is a {kind_of(st.st_mode)}, not followed")
                continue
            fd = os.open(folder, _DIR_FLAGS, dir_fd=top)
            try:
                if folder == "artifacts":
                    (dst / folder).mkdir(exist_ok=True)
                    _copy_files(fd, "artifacts/", dst / folder, problems, folders=())
                else:
                    listing = CopyListing(root=folder)
                    (dst / folder).mkdir(exist_ok=True)
                    _walk(fd, "", dst / folder, 0, listing)
                    problems += [f"workspace/{e['path']}: {e['type']} not copied ({e['reason']})"
                                 for e in listing.entries if not e.get("copied")]
                    if listing.skipped_unlisted:
                        problems.append(f"workspace/: {listing.skipped_unlisted} more entries not copied")
            finally:
                os.close(fd)
    finally:
        os.close(top)
    return problems


def _copy_files(dir_fd: int, shown: str, dst_dir: Path, problems: list[str], *, folders: tuple[str, ...]) -> None:
    """The regular files of one folder (its subfolders other than ``folders`` are no evidence: left alone)."""
    for name in sorted(os.listdir(dir_fd)):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(f"{shown}{display_name(name)} is a {kind_of(st.st_mode)}, not followed")
            continue
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            problems.append(f"{shown}{display_name(name)} is not readable ({exc.strerror or type(exc).__name__})")
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                problems.append(f"{shown}{display_name(name)} is not a regular file")
                continue
            _size, _digest, grew = copy_fd(fd, dst_dir / name, 0o644, STORED_FILE_MAX)
            if grew:
                problems.append(f"{shown}{display_name(name)} is larger than {STORED_FILE_MAX} bytes")
        finally:
            os.close(fd)


def _walk(dir_fd: int, rel_dir: str, dst_dir: Path, depth: int, listing: CopyListing) -> None:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        listing.skip(rel_dir or ".", "dir", f"unreadable: {exc.strerror or type(exc).__name__}")
        return
    for name in names:
        rel = f"{rel_dir}/{name}" if rel_dir else name
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            listing.skip(rel, "other", "vanished")
            continue
        kind = _kind(st.st_mode)
        if kind == "dir":
            if depth + 1 >= listing.limits.max_depth:
                listing.skip(rel, kind, "too_deep")
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                listing.skip(rel, kind, "not_a_directory_when_opened")
                continue
            try:
                (dst_dir / name).mkdir(exist_ok=True)
                _walk(child, rel, dst_dir / name, depth + 1, listing)
            finally:
                os.close(child)
        elif kind == "file":
            _copy_one(dir_fd, name, rel, st, dst_dir, listing)
        elif kind == "symlink":
            try:
                target = display_name(os.readlink(name, dir_fd=dir_fd))
            except OSError:
                target = "?"
            listing.skip(rel, kind, "symlink_not_followed", target=target)
        else:
            listing.skip(rel, kind, "not_a_regular_file")


def _copy_one(dir_fd: int, name: str, rel: str, st: os.stat_result, dst_dir: Path, listing: CopyListing) -> None:
    lim = listing.limits
    if listing.files >= lim.max_files:
        listing.skip(rel, "file", "file_count_cap", size=st.st_size)
        return
    if st.st_size > lim.max_file_bytes:
        listing.skip(rel, "file", "file_size_cap", size=st.st_size)
        return
    if listing.bytes + st.st_size > lim.max_total_bytes:
        listing.skip(rel, "file", "total_size_cap", size=st.st_size)
        return
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        listing.skip(rel, "file", "not_openable")
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
            listing.skip(rel, "other", "not_a_regular_file")
            return
        limit = min(lim.max_file_bytes, lim.max_total_bytes - listing.bytes)
        size, digest, grew = copy_fd(fd, dst_dir / name, st.st_mode, limit)
    except OSError as exc:
        listing.skip(rel, "file", f"copy_failed: {exc.strerror or type(exc).__name__}")
        return
    finally:
        os.close(fd)
    listing.files += 1
    listing.bytes += size
    entry: dict[str, Any] = {"path": display_name(rel), "key": listing_key(rel), "type": "file", "copied": True,
                             "size": size, "sha256": digest}
    if grew:
        entry["truncated"] = True
    listing.entries.append(entry)

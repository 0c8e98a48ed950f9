"""Evidence the agent cannot forge: what the harness itself copies out of a phase, and its digests.

The agent's workspace and HOME are the agent's: anything in them may be a symlink, a FIFO, a device, a
name that is not UTF-8, a 1 GB file or 100,000 files, and under ``--sandbox none`` something may still
be changing them. So after a phase the harness copies only what validators and reports need, walking
by directory file descriptor (``O_NOFOLLOW``: a path swapped for a symlink mid-walk is not followed),
opening only regular files (``O_NONBLOCK``: a FIFO never blocks it), within size and count caps.
Symlinks, FIFOs, sockets and devices are listed, never recreated. The files a driver asks to keep
(:func:`keep_files`) come only from the phase's own folders, reached with no symlink followed in any
component of their path (:mod:`gripprobe_core.agentfiles`); what is refused is listed.

case.json records the sha256 of every evidence file (:func:`evidence_digests`); ``rebuild-reports
--recompute`` checks them (:func:`verify_evidence`) and a case whose evidence changed becomes
HARNESS_ERROR ``artifact_tampered``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..agentfiles import Refused, locate, open_agent_file
from ..phase import PhaseContext
from ..store.files import Stored, kind_of
from ..store.trees import open_dir
from ..textsafe import safe_name

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

LISTING = "workspace.listing.json"
#: Files the harness derives again on every recompute: not evidence.
DERIVED_ARTIFACTS = ("events.summary.json",)
DERIVED_PREFIX_SUFFIX = (("events.", ".jsonl"),)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


#: A file name as safe one-line text (``\\xNN`` for bytes that are not UTF-8 and for control characters).
display_name = safe_name


def _key(rel: str) -> str:
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
        self.entries.append({"path": display_name(rel), "key": _key(rel), "type": kind, "copied": False,
                             "reason": reason, **extra})

    def as_json(self) -> dict[str, Any]:
        return {"root": self.root, "files": self.files, "bytes": self.bytes, "skipped": self.skipped,
                "skipped_unlisted": self.skipped_unlisted, "error": self.error,
                "limits": asdict(self.limits),
                "entries": self.entries}


def _copy_fd(src_fd: int, dst: Path, mode: int, limit: int) -> tuple[int, str, bool]:
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
            _size, _digest, grew = _copy_fd(fd, dst_dir / name, 0o644, STORED_FILE_MAX)
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
        size, digest, grew = _copy_fd(fd, dst_dir / name, st.st_mode, limit)
    except OSError as exc:
        listing.skip(rel, "file", f"copy_failed: {exc.strerror or type(exc).__name__}")
        return
    finally:
        os.close(fd)
    listing.files += 1
    listing.bytes += size
    entry: dict[str, Any] = {"path": display_name(rel), "key": _key(rel), "type": "file", "copied": True,
                             "size": size, "sha256": digest}
    if grew:
        entry["truncated"] = True
    listing.entries.append(entry)


@dataclass
class KeptFiles:
    """What the keep step did with what a driver's ``artifacts(ctx)`` named."""

    files: dict[str, Path] = field(default_factory=dict)
    """Copies in the case's artifacts, by the driver's name."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each kept file came from: ``home/…``, ``workspace/…``, ``tmpdir/…`` (``bytes`` for bytes)."""
    refused: list[dict[str, str]] = field(default_factory=list)
    """``{name, path, reason}`` of every entry not kept (outside the phase's folders, a symlink in the way …)."""


KEPT_NAME_MAX = 255 - len("warmup.") - len("..0123456789ab.tmp")
"""Bytes a kept file's name may have: ``<phase>.<name>`` (and its temporary ``.<phase>.<name>.<hex>.tmp``
while a report or a recompute writes beside it) must fit the file system's 255."""


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name


def _name_too_long(name: str) -> bool:
    return len(name.encode("utf-8", "surrogateescape")) > KEPT_NAME_MAX


def keep_files(ctx: PhaseContext, wanted: Mapping[Any, Any], into: Path, limit: int = MAX_FILE_BYTES) -> KeptFiles:
    """Keep what a driver's ``artifacts(ctx)`` named, as ``into/<phase>.<name>``: a path only when it lies
    in the phase's workspace, HOME or TMPDIR and is a regular file reached from there with no symlink
    followed in any component (:func:`gripprobe_core.agentfiles.open_agent_file`), at most ``limit``
    bytes; ``bytes`` as they are (a driver's own derived copy, e.g. a redacted log). Everything else is
    refused and listed, never raised."""
    kept = KeptFiles()
    for name, src in wanted.items():
        shown = display_name(str(src)) if not isinstance(src, (bytes, bytearray)) else "bytes"
        if not _plain_name(name):
            kept.refused.append({"name": display_name(str(name)), "path": shown, "reason": "bad_name"})
            continue
        if _name_too_long(name):
            kept.refused.append({"name": display_name(name[:60]) + "…", "path": shown, "reason": "name_too_long"})
            continue
        dst = into / f"{ctx.phase}.{name}"
        if isinstance(src, (bytes, bytearray)):
            try:
                _write_new(dst, bytes(src[:limit]))
            except OSError as exc:
                kept.refused.append({"name": name, "path": shown, "reason": f"write_failed: {exc.strerror}"})
                continue
            kept.files[name], kept.sources[name] = dst, "bytes"
            continue
        if not isinstance(src, (str, os.PathLike)):
            kept.refused.append({"name": name, "path": shown, "reason": "not_a_path"})
            continue
        try:
            label, _folder, names = locate(ctx, src)
            fd = open_agent_file(ctx, src)
        except Refused as exc:
            kept.refused.append({"name": name, "path": shown, "reason": exc.reason, "at": display_name(exc.where)})
            continue
        except OSError as exc:
            kept.refused.append({"name": name, "path": shown, "reason": f"unreadable: {exc.strerror}"})
            continue
        try:
            into.mkdir(parents=True, exist_ok=True)
            _copy_fd(fd, dst, 0o644, limit)
        except OSError as exc:
            kept.refused.append({"name": name, "path": shown, "reason": f"copy_failed: {exc.strerror}"})
            continue
        finally:
            os.close(fd)
        kept.files[name] = dst
        kept.sources[name] = display_name("/".join([label, *names]))
    return kept


def _write_new(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- digests


def _sha256(path: Path) -> str | None:
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return None
    h = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _derived(name: str) -> bool:
    return name in DERIVED_ARTIFACTS or any(name.startswith(p) and name.endswith(s) for p, s in DERIVED_PREFIX_SUFFIX)


def _evidence_paths(case_dir: Path) -> list[str]:
    rels = [n for n in ("prompt.txt", "warmup.stdout", "warmup.stderr", "measured.stdout", "measured.stderr")
            if (case_dir / n).is_file()]
    art = case_dir / "artifacts"
    try:
        names = sorted(os.listdir(art)) if stat.S_ISDIR(os.lstat(art).st_mode) else []  # a link is not followed
    except OSError:
        names = []
    rels += [f"artifacts/{n}" for n in names if not _derived(n)]
    return rels


def evidence_digests(case_dir: Path) -> dict[str, str]:
    """sha256 of every evidence file of a case: what the agent printed, what the harness observed
    (proxy records, oracle and challenge logs, phase contexts, the agent's kept files) and the workspace
    listing, which itself holds the sha256 of every copied workspace file."""
    out = {}
    for rel in _evidence_paths(case_dir):
        digest = _sha256(case_dir / rel)
        out[rel] = digest if digest is not None else "not-a-regular-file"
    return out


def verify_evidence(case_dir: Path, recorded: dict[str, str]) -> list[str]:
    """What changed since the run wrote ``recorded``: a list of one-line problems, empty when intact."""
    problems = []
    now = evidence_digests(case_dir)
    for rel, digest in sorted(recorded.items()):
        if rel not in now:
            problems.append(f"{rel} is gone")
        elif now[rel] != digest:
            problems.append(f"{rel} changed")
    problems += [f"{rel} appeared after the run" for rel in sorted(set(now) - set(recorded))]
    listing = case_dir / "artifacts" / LISTING
    if listing.is_file() and f"artifacts/{LISTING}" in recorded:
        problems += _verify_workspace(case_dir / "workspace", listing)
    return problems


def _verify_workspace(root: Path, listing_path: Path) -> list[str]:
    try:
        data = json.loads(listing_path.read_bytes())
        want = {e["key"]: e["sha256"] for e in data.get("entries", []) if e.get("copied")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return [f"artifacts/{LISTING} is unreadable"]
    have: dict[str, str | None] = {}
    _digest_tree(root, "", have)
    problems = []
    for key in sorted(set(want) | set(have)):
        shown = display_name(bytes.fromhex(key[4:])) if key.startswith("hex:") else key
        if key not in have:
            problems.append(f"workspace/{shown} is gone")
        elif key not in want:
            problems.append(f"workspace/{shown} appeared after the run")
        elif have[key] != want[key]:
            problems.append(f"workspace/{shown} changed")
    return problems


def _digest_tree(root: Path, rel_dir: str, out: dict[str, str | None]) -> None:
    base = root / rel_dir if rel_dir else root
    try:
        if not rel_dir and not stat.S_ISDIR(os.lstat(root).st_mode):
            return  # a workspace replaced by a link (to /, say) is not walked: its files are all gone
    except OSError:
        return
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return
    for name in names:
        rel = f"{rel_dir}/{name}" if rel_dir else name
        try:
            st = os.lstat(root / rel)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            _digest_tree(root, rel, out)
        else:
            out[_key(rel)] = _sha256(root / rel) if stat.S_ISREG(st.st_mode) else "not-a-regular-file"

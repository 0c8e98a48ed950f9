"""A finished case directory as bytes, and back: how a case run on another machine reaches the run directory.

The worker that ran a case packs its directory (:func:`pack_case`); the driver writes it into the run
directory (:func:`unpack_case`) and writes ``case.json`` itself, last, so a half-written case is never
taken for a finished one (resume relies on that). No shared filesystem is assumed.

Only regular files and directories travel (the harness's own copies never hold anything else); file
names are kept byte for byte, UTF-8 or not. Unpacking trusts nothing: a member that is not a plain file
or directory (a link, a device, a GNU or PAX *sparse* file, whose few stored bytes would unpack into
gigabytes of holes), whose path is absolute, climbs out with ``..`` or has a name the file system cannot
hold, a file over ``MEMBER_MAX``, more than ``MEMBERS_MAX`` members or more than ``TOTAL_MAX`` bytes in
all, is refused with :class:`ArchiveError` before its bytes are written. The caps are far above what a
case directory holds (the workspace copy is capped at 256 MiB, a file at 32 MiB, each capture at 8 MiB).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

from .layout import flush_folder
from .names import NAME_MAX

CASE_FILE = "case.json"
_ENCODING = dict(encoding="utf-8", errors="surrogateescape")
MEMBER_MAX = 128 << 20
"""Bytes one file of a case archive may unpack to."""
TOTAL_MAX = 1 << 30
"""Bytes a whole case archive may unpack to (and may be)."""
MEMBERS_MAX = 50_000
"""Files and folders in one case archive."""


class ArchiveError(ValueError):
    """A case archive that cannot be written into a run directory as it is."""


def pack_case(case_dir: Path) -> bytes:
    """Every regular file and directory under ``case_dir`` (symlinks, FIFOs, devices left out), as an
    uncompressed tar (GNU format: any byte in a name survives)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, **_ENCODING) as tar:  # type: ignore[call-overload]
        for root, dirs, files in os.walk(case_dir, followlinks=False):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(root, name)
                if os.path.islink(path) or not (os.path.isdir(path) or os.path.isfile(path)):
                    continue
                tar.add(path, arcname=os.path.relpath(path, case_dir), recursive=False)
    return buf.getvalue()


def unpack_case(data: bytes, case_dir: Path, *, member_max: int = MEMBER_MAX, total_max: int = TOTAL_MAX,
                members_max: int = MEMBERS_MAX) -> bytes:
    """Write the archive into ``case_dir`` (replacing what was there), every file but ``case.json``, made
    durable; returns ``case.json``'s bytes for the caller to write last. :class:`ArchiveError` when the
    archive is not a case directory or passes a cap (``member_max`` bytes a file, ``total_max`` in all,
    ``members_max`` files and folders)."""
    if len(data) > total_max + (1 << 20):  # its headers and padding aside
        raise ArchiveError(f"the archive is {len(data):,} bytes, over the {total_max:,} a case may have")
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    case_json: bytes | None = None
    total = members = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:", **_ENCODING) as tar:  # type: ignore[call-overload]
            for member in tar:
                members += 1
                if members > members_max:
                    raise ArchiveError(f"the archive holds more than {members_max:,} files and folders")
                rel = _safe_name(member.name)
                target = case_dir / rel
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if member.issparse() or member.type == tarfile.GNUTYPE_SPARSE:
                    raise ArchiveError(f"{member.name!r} is a sparse file ({member.size:,} bytes from holes); "
                                       f"a case archive holds plain files only")
                if not member.isfile():
                    raise ArchiveError(f"{member.name!r} is neither a file nor a directory")
                if member.size > member_max:
                    raise ArchiveError(f"{member.name!r} is {member.size:,} bytes, over the {member_max:,} a file "
                                       f"of a case may have")
                total += member.size
                if total > total_max:
                    raise ArchiveError(f"the archive unpacks to more than {total_max:,} bytes")
                src = tar.extractfile(member)
                assert src is not None
                if rel == CASE_FILE:
                    case_json = src.read()
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
    except (tarfile.TarError, EOFError) as exc:
        raise ArchiveError(f"not a case archive: {exc}") from None
    if case_json is None:
        raise ArchiveError(f"the archive holds no {CASE_FILE}")
    flush_folder(case_dir)
    return case_json


def _safe_name(name: str) -> str:
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", "..") for p in parts if p != ".") or "\0" in name:
        raise ArchiveError(f"{name!r} is not a path inside the case directory")
    rel = "/".join(p for p in parts if p != ".")
    raw = os.fsencode(rel)
    if len(raw) > 2048 or any(len(p) > NAME_MAX for p in raw.split(b"/")):  # well inside PATH_MAX with the run's
        raise ArchiveError(f"{name[:60]!r}...: a name the file system cannot hold")
    return rel

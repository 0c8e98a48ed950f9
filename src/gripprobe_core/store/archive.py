"""A finished case directory as bytes, and back: how a case run on another machine reaches the run directory.

The worker that ran a case packs its directory (:func:`pack_case`); the driver writes it into the run
directory (:func:`unpack_case`) and writes ``case.json`` itself, last, so a half-written case is never
taken for a finished one (resume relies on that). No shared filesystem is assumed.

Only regular files and directories travel (the harness's own copies never hold anything else); file
names are kept byte for byte, UTF-8 or not. Unpacking trusts nothing: a member that is not a plain file
or directory, or whose path is absolute or climbs out with ``..``, is refused with :class:`ArchiveError`.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

from .layout import flush_folder

CASE_FILE = "case.json"
_ENCODING = dict(encoding="utf-8", errors="surrogateescape")


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


def unpack_case(data: bytes, case_dir: Path) -> bytes:
    """Write the archive into ``case_dir`` (replacing what was there), every file but ``case.json``, made
    durable; returns ``case.json``'s bytes for the caller to write last. :class:`ArchiveError` when the
    archive is not a case directory."""
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    case_json: bytes | None = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:", **_ENCODING) as tar:  # type: ignore[call-overload]
            for member in tar:
                rel = _safe_name(member.name)
                target = case_dir / rel
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    raise ArchiveError(f"{member.name!r} is neither a file nor a directory")
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
    return "/".join(p for p in parts if p != ".")

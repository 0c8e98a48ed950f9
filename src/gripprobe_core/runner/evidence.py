"""Evidence the agent cannot forge: what the harness itself keeps of a phase.

The workspace is copied by :func:`gripprobe_core.store.copytree.copy_workspace` (no link followed, no FIFO
opened, within caps), its digests taken by :mod:`gripprobe_core.integrity.digests`. The files a driver
asks to keep (:func:`keep_files`) come only from the phase's own folders, reached with no symlink followed
in any component of their path (:mod:`gripprobe_core.agentfiles`); what is refused is listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..agentfiles import Refused, locate, open_agent_file
from ..integrity.digests import LISTING, evidence_digests
from ..phase import PhaseContext
from ..store.copytree import MAX_FILE_BYTES, copy_fd, copy_stored_case, copy_workspace, display_name

__all__ = ["LISTING", "KeptFiles", "copy_stored_case", "copy_workspace", "evidence_digests", "keep_files"]


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
            copy_fd(fd, dst, 0o644, limit)
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

"""Signed statements and the tree walk both sides of a seal use.

A signed file is JSON: ``{"statement": {...}, "signature": "<base64>"}``. The signature is Ed25519 over
``gripprobe-signed-v1\\n`` followed by the statement as canonical JSON (keys sorted, no spaces, ASCII).
The file itself must be byte for byte what the harness writes for that statement and signature (sorted
keys, one-space indent, ASCII), so no byte of it can change without the check noticing.

:func:`walk` lists a stored folder the way an attacker cannot steer: by directory descriptor, never
following a link in any component, never opening a FIFO or device; every regular file is hashed with
sha256, anything else is recorded as :data:`NOT_REGULAR`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from .digests import derived_artifact as _derived
from ..store.copytree import listing_key as entry_key
from ..store.trees import DIR_FLAGS, FILE_FLAGS
from .keys import PublicKey, Signer

FORMAT = 1
"""The signing format this harness writes (statements and the manifest's ``signing`` carry it)."""
EVIDENCE_SIG = "evidence.sig.json"
CASE_SIG = "case.sig.json"
RUN_SIG = "run.sig.json"
NOT_REGULAR = "not-a-regular-file"
"""What a digest map holds for a symlink, FIFO, socket or device (the same marker as ``case.json`` →
``evidence``)."""
DERIVED_TOP = ("case.json", "expected.txt", "observed.txt", "case.before-recompute.json")
"""A case's derived files at its top (``artifacts/events.*`` are the others): written anew by a recompute."""
MAX_DEPTH = 128
KEEP_LIMIT = 64 * 1024 * 1024
_PREFIX = b"gripprobe-signed-v1\n"
_CHUNK = 1024 * 1024

__all__ = ["CASE_SIG", "DERIVED_TOP", "EVIDENCE_SIG", "FORMAT", "NOT_REGULAR", "RUN_SIG", "Signed", "Tree",
           "canonical", "entry_key", "is_derived", "open_folder", "parse_signed", "sha256_bytes", "signed_file",
           "walk"]


def is_derived(rel: str) -> bool:
    """Whether a case's file (path relative to the case folder) is derived, not evidence."""
    if rel in DERIVED_TOP:
        return True
    name = rel[len("artifacts/"):] if rel.startswith("artifacts/") else ""
    return bool(name) and "/" not in name and _derived(name)


def canonical(statement: dict[str, Any]) -> bytes:
    return _PREFIX + json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                                allow_nan=False).encode("ascii")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def signed_file(signer: Signer, statement: dict[str, Any]) -> bytes:
    """The bytes of a signed file holding ``statement``."""
    return _file_bytes(statement, base64.b64encode(signer.sign(canonical(statement))).decode("ascii"))


def _file_bytes(statement: dict[str, Any], sig: str) -> bytes:
    return (json.dumps({"statement": statement, "signature": sig}, indent=1, sort_keys=True, ensure_ascii=True,
                       allow_nan=False) + "\n").encode("ascii")


@dataclass
class Signed:
    """A signed file read back: its statement (None when unreadable) and what is wrong with it."""

    statement: dict[str, Any] | None
    signature: bytes | None
    problem: str | None = None

    def valid_under(self, key: PublicKey) -> bool:
        return (self.problem is None and self.statement is not None and self.signature is not None
                and key.verify(self.signature, canonical(self.statement)))


def parse_signed(data: bytes | None) -> Signed:
    if data is None:
        return Signed(None, None, "missing")
    try:
        obj = json.loads(data)
        statement, sig = obj["statement"], obj["signature"]
        if not isinstance(statement, dict) or not isinstance(sig, str):
            raise TypeError
        signature = base64.b64decode(sig, validate=True)
        exact = _file_bytes(statement, sig) == data  # NaN, or anything JSON cannot say, raises here
    except (ValueError, TypeError, KeyError, binascii.Error, RecursionError, UnicodeError):
        return Signed(None, None, "not a signed file")
    # a file the harness did not write byte for byte (spaces, key order, an escape) is not its statement
    return Signed(statement, signature, None if exact else "not byte for byte as the harness writes it")


# ------------------------------------------------------------------------------------ the walk

@dataclass
class Tree:
    """What a stored folder holds, read without following a link."""

    files: dict[str, str] = field(default_factory=dict)
    """Relative path → sha256, or :data:`NOT_REGULAR`."""
    dirs: set[str] = field(default_factory=set)
    kept: dict[str, bytes] = field(default_factory=dict)
    """The bytes of the files asked for (the same bytes that were hashed)."""
    problems: list[str] = field(default_factory=list)


def open_folder(path: os.PathLike | str) -> int:
    """A stored run folder, opened (the path the user named: a link to it is fine; nothing below it is)."""
    return os.open(path, DIR_FLAGS & ~os.O_NOFOLLOW)


def walk(dir_fd: int, *, keep: frozenset[str] = frozenset(), skip: frozenset[str] = frozenset()) -> Tree:
    """Every entry below the open folder ``dir_fd`` (names in ``skip`` at its top left out)."""
    tree = Tree()
    _walk(dir_fd, "", 0, tree, keep, skip)
    return tree


def _walk(dir_fd: int, prefix: str, depth: int, tree: Tree, keep: frozenset[str], skip: frozenset[str]) -> None:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError as exc:
        tree.problems.append(f"{prefix or '.'}: unreadable folder ({exc.strerror})")
        return
    for name in names:
        if not prefix and name in skip:
            continue
        rel = prefix + name
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue  # vanished while listed
        if stat.S_ISDIR(st.st_mode):
            tree.dirs.add(rel)
            if depth + 1 >= MAX_DEPTH:
                tree.problems.append(f"{rel}: deeper than {MAX_DEPTH} folders")
                continue
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                tree.files[rel] = NOT_REGULAR
                continue
            try:
                _walk(child, rel + "/", depth + 1, tree, keep, skip)
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode):
            tree.files[rel] = _hash(dir_fd, name, st, rel, tree, rel in keep)
        else:
            tree.files[rel] = NOT_REGULAR


def _hash(dir_fd: int, name: str, st: os.stat_result, rel: str, tree: Tree, keep: bool) -> str:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return NOT_REGULAR
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return NOT_REGULAR
        os.set_blocking(fd, True)
        h, chunks, size = hashlib.sha256(), [], 0
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
            size += len(chunk)
            if keep and size <= KEEP_LIMIT:
                chunks.append(chunk)
        if keep and size <= KEEP_LIMIT:
            tree.kept[rel] = b"".join(chunks)
        return h.hexdigest()
    except OSError:
        return NOT_REGULAR
    finally:
        os.close(fd)

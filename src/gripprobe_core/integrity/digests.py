"""The sha256 of every piece of a case's evidence, and what changed since they were taken.

case.json records the sha256 of every evidence file (:func:`evidence_digests`): what the agent printed,
what the harness observed (proxy records, oracle and challenge logs, phase contexts, the agent's kept files)
and the workspace listing, which itself holds the sha256 of every copied workspace file. Signed runs sign
them (:mod:`.seal`); :func:`verify_evidence` says what changed since (a run from before signatures is
checked against its digests alone). Files the harness derives again on every recompute are not evidence.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from ..store.copytree import display_name, listing_key

__all__ = ["DERIVED_ARTIFACTS", "DERIVED_PREFIX_SUFFIX", "LISTING", "derived_artifact", "evidence_digests",
           "verify_evidence"]

LISTING = "workspace.listing.json"
#: Files the harness derives again on every recompute: not evidence.
DERIVED_ARTIFACTS = ("events.summary.json",)
DERIVED_PREFIX_SUFFIX = (("events.", ".jsonl"),)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1024 * 1024


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


def derived_artifact(name: str) -> bool:
    return name in DERIVED_ARTIFACTS or any(name.startswith(p) and name.endswith(s) for p, s in DERIVED_PREFIX_SUFFIX)


def _evidence_paths(case_dir: Path) -> list[str]:
    rels = [n for n in ("prompt.txt", "warmup.stdout", "warmup.stderr", "measured.stdout", "measured.stderr")
            if (case_dir / n).is_file()]
    art = case_dir / "artifacts"
    try:
        names = sorted(os.listdir(art)) if stat.S_ISDIR(os.lstat(art).st_mode) else []  # a link is not followed
    except OSError:
        names = []
    rels += [f"artifacts/{n}" for n in names if not derived_artifact(n)]
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
            out[listing_key(rel)] = _sha256(root / rel) if stat.S_ISREG(st.st_mode) else "not-a-regular-file"

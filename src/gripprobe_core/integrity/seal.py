"""Signing what the harness writes into a run (the write side; :mod:`.check` is the read side).

Three signed files, each a statement and its Ed25519 signature (:mod:`.signed`):

- ``cases/<id>/evidence.sig.json``, written once when the harness first writes the case (the live run,
  or the Ray driver as a case arrives) and never again: the case's observations — the sha256 of every
  evidence file (exactly ``case.json`` → ``evidence``), every folder of the case (the workspace copy's
  included), its key, whether it ran and in which sandbox. The workspace listing it covers holds the
  sha256 of every copied workspace file.
- ``cases/<id>/case.sig.json``, written every time the harness writes ``case.json`` (a run, a recompute,
  a backfill), before ``case.json`` itself: the sha256 of every derived file (``case.json``,
  ``expected.txt``, ``observed.txt``, ``events.*``, ``case.before-recompute.json``), of the evidence
  statement, and of the case statement it replaces (``previous``). A rewrite is signed only when the case
  verified just before it (:func:`rewrite_signer`): a case found changed is never re-signed.
- ``run.sig.json``, written whenever the harness writes the manifest or the reports: the sha256 of
  ``manifest.json`` and every report file, and of both signature files of every case, with the public key.
  A re-seal re-hashes only what its caller wrote; everything else keeps the digest it was sealed with.

``manifest.json`` → ``signing`` names the format and the public key (and is itself sealed): a run that
carries any of these marks is a signed run, and every case of it must verify.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from ..models.results import CaseResult
from ..store import atomic_write_bytes, flush_folder, read_stored
from ..store.layout import json_bytes
from ..store.trees import open_beneath
from ..timeutil import utc_now_iso
from .keys import ALGORITHM, PublicKey, Signer, run_signer
from .signed import (
    CASE_SIG, DERIVED_TOP, EVIDENCE_SIG, FORMAT, RUN_SIG, canonical, entry_key, is_derived, open_folder,
    parse_signed, sha256_bytes, signed_file, walk,
)

__all__ = ["REWRITE", "derived_names", "manifest_signing", "reseal_run", "rewrite_signer", "run_public_key",
           "seal_case", "write_case_json"]

REWRITE: Literal["rewrite"] = "rewrite"
"""``signer=`` of :func:`write_case_json` for a case the harness rewrites (see :func:`rewrite_signer`)."""

def manifest_signing(signer: Signer) -> dict[str, Any]:
    """``manifest.json`` → ``signing``: how this run is signed."""
    return {"format": FORMAT, "algorithm": ALGORITHM, "key": signer.public.fingerprint,
            "public_key": signer.public.b64}


def derived_names(case_dir: Path) -> list[str]:
    """The derived files present in a case folder (relative paths; case.json aside)."""
    out = [n for n in DERIVED_TOP[1:] if os.path.lexists(case_dir / n)]
    try:
        names = sorted(os.listdir(case_dir / "artifacts"))
    except OSError:
        names = []
    return out + [f"artifacts/{n}" for n in names if is_derived(f"artifacts/{n}")]


def _stored_sha(root: Path, rel: str) -> str | None:
    try:
        return sha256_bytes(read_stored(root, rel))
    except OSError:
        return None


def seal_case(case_dir: Path, res: CaseResult, case_json: bytes, signer: Signer, *, new: bool) -> None:
    """Sign a case about to get ``case_json`` as its ``case.json`` (written by the caller, after this).
    ``new``: the case's first write, so its evidence statement is made too (never afterwards)."""
    case_id = case_dir.name
    if new:
        fd = open_folder(case_dir)
        try:
            dirs = sorted(entry_key(d) for d in walk(fd, skip=frozenset({EVIDENCE_SIG, CASE_SIG})).dirs)
        finally:
            os.close(fd)
        evidence = {"kind": "gripprobe.case-evidence", "format": FORMAT, "run_id": res.run_id, "case_id": case_id,
                    "case_key": res.key.model_dump(mode="json"), "key": signer.public.fingerprint,
                    "signed_at": utc_now_iso(), "ran": bool(res.phases), "sandbox": res.sandbox,
                    "evidence": dict(res.evidence) if res.evidence is not None else None, "dirs": dirs}
        ev_bytes = signed_file(signer, evidence)
        atomic_write_bytes(case_dir / EVIDENCE_SIG, ev_bytes, sync=False)
        previous = None
    else:
        ev_bytes = read_stored(case_dir, EVIDENCE_SIG)
        previous = _stored_sha(case_dir, CASE_SIG)
    files = {"case.json": sha256_bytes(case_json)}
    for rel in derived_names(case_dir):
        digest = _stored_sha(case_dir, rel)
        if digest is not None:
            files[rel] = digest
    statement = {"kind": "gripprobe.case", "format": FORMAT, "run_id": res.run_id, "case_id": case_id,
                 "key": signer.public.fingerprint, "signed_at": utc_now_iso(),
                 "evidence_statement": sha256_bytes(ev_bytes), "previous": previous, "files": files}
    atomic_write_bytes(case_dir / CASE_SIG, signed_file(signer, statement), sync=False)


def rewrite_signer(case_dir: Path) -> Signer | None:
    """The key to re-sign a case the harness rewrites (recompute, backfill): this machine's key when the
    run is signed with it AND the case verifies as it is now (its evidence, and the case.json about to be
    replaced). None otherwise: the rewritten case stays unsigned, so it keeps failing verification."""
    from .check import check_case_before_rewrite

    run_path = case_dir.parent.parent
    signer = run_signer(run_path)
    if signer is None or not (case_dir / EVIDENCE_SIG).is_file():
        return None
    return signer if not check_case_before_rewrite(run_path, case_dir.name, signer.public) else None


def write_case_json(case_dir: Path, res: CaseResult, *, signer: "Signer | None | Literal['rewrite']" = REWRITE,
                    new: bool = False, durable: bool = True) -> None:
    """Write ``case.json`` last, signed first: with ``signer`` (None: unsigned, as on a cluster worker or in
    a run from before signatures), or, for a rewrite (:data:`REWRITE`), with :func:`rewrite_signer`'s.
    ``new``: the case's first write (its evidence statement is made). ``durable``: everything in the case
    folder is flushed to disk before case.json is written."""
    data = json_bytes(res.model_dump(mode="json"))
    key = rewrite_signer(case_dir) if signer == REWRITE else signer
    if isinstance(key, Signer):
        seal_case(case_dir, res, data, key, new=new)
    if durable:
        flush_folder(case_dir)
    atomic_write_bytes(case_dir / "case.json", data, sync=durable)


def signer_for_run(results_root: Path, resume: Path | None = None) -> Signer | None:
    """The key a run signs with: this user's harness key for a new run (created on first use); for a
    resumed run the same key its first session signed with (a one-line :class:`UserError` when this
    machine holds another), or None when the run is from before signatures (it stays unsigned)."""
    from ..errors import UserError
    from ..textsafe import safe_name
    from .keys import KEY_ENV, load_signer

    if resume is None:
        return load_signer(create=True, results_root=results_root)
    recorded = run_public_key(resume)
    if recorded is None:
        return None
    signer = load_signer(create=False, results_root=results_root)
    if signer is None or signer.public != recorded:
        mine = f"this machine's is {signer.public.fingerprint}" if signer else "this machine has no harness key"
        raise UserError(f"--resume {safe_name(resume)}: the run is signed by {recorded.fingerprint} and {mine}; "
                        f"resume it where it started, or point {KEY_ENV} at that key")
    return signer


# ------------------------------------------------------------------------------------ the run's seal

def _read_json(run_path: Path, rel: str) -> Any:
    try:
        return json.loads(read_stored(run_path, rel, 64 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return None


def run_public_key(run_path: Path) -> PublicKey | None:
    """The public key a run records (its seal's, else its manifest's ``signing``); None when unsigned."""
    seal = parse_signed(_read_bytes(run_path, RUN_SIG))
    key = PublicKey.from_b64((seal.statement or {}).get("public_key"))
    if key is None:
        manifest = _read_json(run_path, "manifest.json")
        signing = manifest.get("signing") if isinstance(manifest, dict) else None
        key = PublicKey.from_b64(signing.get("public_key")) if isinstance(signing, dict) else None
    return key


def _read_bytes(root: Path, rel: str) -> bytes | None:
    try:
        return read_stored(root, rel, 64 * 1024 * 1024)
    except OSError:
        return None


def _case_sigs(cases_fd: int, case_id: str) -> tuple[bytes | None, bytes | None]:
    try:
        fd = open_beneath(cases_fd, [case_id], file=False)
    except OSError:
        return None, None
    try:
        return _read_at(fd, EVIDENCE_SIG), _read_at(fd, CASE_SIG)
    finally:
        os.close(fd)


def _read_at(dir_fd: int, name: str) -> bytes | None:
    from ..store.files import read_regular

    try:
        return read_regular(name, 16 * 1024 * 1024, dir_fd=dir_fd)
    except OSError:
        return None


def _successor(ev: bytes, cs: bytes, old: dict, key: PublicKey) -> bool:
    """Whether the case's signatures on disk are the harness's next state of the sealed ``old`` entry (the
    same evidence statement, a case statement whose ``previous`` is the sealed one)."""
    case = parse_signed(cs)
    return (sha256_bytes(ev) == old.get("evidence") and case.valid_under(key)
            and (case.statement or {}).get("previous") == old.get("case"))


def _valid_case(run_id: str, case_id: str, ev: bytes, cs: bytes, key: PublicKey) -> bool:
    e, c = parse_signed(ev), parse_signed(cs)
    return (e.valid_under(key) and c.valid_under(key)
            and all((s.statement or {}).get("run_id") == run_id and (s.statement or {}).get("case_id") == case_id
                    for s in (e, c))
            and (c.statement or {}).get("evidence_statement") == sha256_bytes(ev))


def reseal_run(run_path: Path, signer: Signer | None, *, wrote: Iterable[Path | str] = (),
               cases: Iterable[str] = ()) -> str | None:
    """Re-sign the run's seal after the harness wrote ``wrote`` (files of the run outside ``cases/``) and,
    in this process, the cases ``cases``. Returns a warning when the seal is left as it was (it does not
    verify: re-signing it would hide that). Nothing happens without a signer (an unsigned run stays so)."""
    if signer is None:
        return None
    run_path = Path(run_path)
    key = signer.public
    old_bytes = _read_bytes(run_path, RUN_SIG)
    old = parse_signed(old_bytes)
    if old_bytes is not None and not (old.valid_under(key) and (old.statement or {}).get("key") == key.fingerprint):
        return f"{RUN_SIG} does not verify under this machine's key: the run's seal is left as it was"
    before = old.statement or {}
    files = dict(before.get("files") or {})
    top = run_path.resolve()
    for p in wrote:
        path = Path(p).resolve() if Path(p).is_absolute() else top / p
        if top not in path.parents or path.parts[len(top.parts)] == "cases":
            continue  # not a file of the run's own (cases sign themselves)
        rel = path.relative_to(top).as_posix()
        digest = _stored_sha(run_path, rel)
        if digest is None:
            files.pop(rel, None)
        else:
            files[rel] = digest
    sealed: dict[str, dict] = dict(before.get("cases") or {})
    declared = set(cases)
    run_id = run_path.name
    try:
        run_fd = open_folder(run_path)
    except OSError:
        return None
    try:
        try:
            cases_fd = open_beneath(run_fd, ["cases"], file=False)
        except OSError:
            cases_fd = -1
        if cases_fd >= 0:
            try:
                for case_id in sorted(os.listdir(cases_fd)):
                    ev, cs = _case_sigs(cases_fd, case_id)
                    if ev is None or cs is None:
                        continue  # unfinished, or unsigned: verify judges it
                    entry = {"evidence": sha256_bytes(ev), "case": sha256_bytes(cs)}
                    known = sealed.get(case_id)
                    if case_id in declared or (known is None and _valid_case(run_id, case_id, ev, cs, key)) \
                            or (known is not None and _successor(ev, cs, known, key)):
                        sealed[case_id] = entry
            finally:
                os.close(cases_fd)
    finally:
        os.close(run_fd)
    from .. import __version__

    statement = {"kind": "gripprobe.run", "format": FORMAT, "run_id": run_id, "algorithm": ALGORITHM,
                 "key": key.fingerprint, "public_key": key.b64, "signed_at": utc_now_iso(),
                 "gripprobe_version": __version__, "files": dict(sorted(files.items())),
                 "cases": dict(sorted(sealed.items()))}
    canonical(statement)
    atomic_write_bytes(run_path / RUN_SIG, signed_file(signer, statement))
    return None

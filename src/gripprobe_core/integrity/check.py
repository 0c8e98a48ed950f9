"""Checking a stored run against its signatures (the read side of :mod:`.seal`): what ``gripprobe verify``,
recompute's tamper gate, the aggregate and compare use.

Everything is read by directory descriptor without following a link (:func:`.signed.walk`). A case is
checked against its two signed statements: every evidence file and folder against the evidence
statement, every workspace file against the (signed) workspace listing, every derived file against the
case statement, nothing more and nothing less; the run's files and the list of its cases against the
run's seal. Each difference is a :class:`Problem` saying how the case changed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from ..store.trees import open_beneath
from ..textsafe import safe_name, safe_text
from .keys import PublicKey
from .signed import (
    CASE_SIG, EVIDENCE_SIG, NOT_REGULAR, RUN_SIG, Signed, Tree, entry_key, is_derived, open_folder, parse_signed,
    sha256_bytes, walk,
)

__all__ = ["CaseCheck", "HOW", "Problem", "RunCheck", "check_case", "run_format", "tamper_problems", "verify_run"]

LISTING = "artifacts/workspace.listing.json"
HOW = ("changed", "missing", "added", "digest_dropped", "signature_invalid", "other_key", "replaced", "not_signed")
"""How a case (or a run's own file) changed, as :class:`Problem` names it."""


@dataclass(frozen=True)
class Problem:
    how: str
    path: str = ""
    detail: str = ""

    def text(self) -> str:
        """One line: ``measured.stdout changed``, ``workspace/x appeared after the run``, ``case.json: digest
        dropped (…)``."""
        where = safe_name(self.path)
        if self.how in ("changed", "missing", "added"):
            what = {"changed": "changed", "missing": "is gone", "added": "appeared after the run"}[self.how]
            line = f"{where or 'the case'} {what}"
        else:
            what = {"digest_dropped": "digest dropped", "signature_invalid": "signature invalid",
                    "other_key": "signed by another key", "replaced": "signatures replaced",
                    "not_signed": "not signed"}[self.how]
            line = f"{where}: {what}" if where else what
        return line + (f" ({safe_text(self.detail)})" if self.detail else "")

    def as_json(self) -> dict[str, str]:
        return {"how": self.how, "path": safe_name(self.path), "detail": safe_text(self.detail)}


@dataclass
class CaseCheck:
    case_id: str
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sandbox: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {"case_id": safe_name(self.case_id), "verified": self.ok,
                "problems": [p.as_json() for p in self.problems], "notes": [safe_text(n) for n in self.notes],
                "sandbox": self.sandbox}


# ------------------------------------------------------------------------------------ one case

def _statement(signed: Signed, name: str, key: PublicKey, run_id: str, case_id: str,
               problems: list[Problem]) -> dict[str, Any]:
    """The statement of a case's signed file, with what is wrong with it added to ``problems``."""
    st = signed.statement
    if st is None:
        problems.append(Problem("missing" if signed.problem == "missing" else "signature_invalid", name,
                                "" if signed.problem == "missing" else str(signed.problem)))
        return {}
    if st.get("key") != key.fingerprint:
        problems.append(Problem("other_key", name, f"{safe_text(st.get('key'))}, not {key.fingerprint}"))
    elif not signed.valid_under(key):
        problems.append(Problem("signature_invalid", name, signed.problem or ""))
    if st.get("run_id") != run_id or st.get("case_id") != case_id:
        problems.append(Problem("changed", name, f"it signs case {safe_text(st.get('case_id'))} of run "
                                                 f"{safe_text(st.get('run_id'))}"))
    return st


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _workspace_listing(tree: Tree, ev: dict[str, Any]) -> dict[str, str] | None:
    """The signed listing's ``key → sha256`` of copied workspace files (None when it cannot be trusted)."""
    data = tree.kept.get(LISTING)
    if data is None or tree.files.get(LISTING) != _dict(ev.get("evidence")).get(LISTING):
        return None
    try:
        obj = json.loads(data)
        return {str(e["key"]): str(e["sha256"]) for e in obj.get("entries", []) if e.get("copied")}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _case_json_digests(tree: Tree, ev: dict[str, Any], problems: list[Problem]) -> None:
    """When case.json no longer holds the evidence digests the case signed: name each dropped one."""
    signed = ev.get("evidence")
    try:
        data = json.loads(tree.kept["case.json"])
        have = data.get("evidence") if isinstance(data, dict) else None
    except (KeyError, ValueError, RecursionError):
        return
    if isinstance(signed, dict) and signed and not isinstance(have, dict):
        problems.append(Problem("digest_dropped", "case.json", "its `evidence` digests are gone"))
    elif isinstance(signed, dict) and isinstance(have, dict):
        for rel in sorted(set(signed) - set(have)):
            problems.append(Problem("digest_dropped", rel, "dropped from case.json `evidence`"))
        for rel in sorted(r for r in set(signed) & set(have) if signed[r] != have[r]):
            problems.append(Problem("digest_dropped", rel, "its digest in case.json `evidence` was replaced"))


def check_case(case_fd: int, case_id: str, run_id: str, key: PublicKey, sealed: dict | None = None,
               *, skip_derived: bool = False) -> CaseCheck:
    """Check one case folder (open at ``case_fd``) against its signatures made with ``key`` and, when the
    run's seal lists it, against that entry. ``skip_derived``: only the evidence and case.json (the check
    before a rewrite, whose other derived files are being written anew)."""
    out = CaseCheck(case_id)
    tree = walk(case_fd, keep=frozenset({EVIDENCE_SIG, CASE_SIG, "case.json", LISTING}))
    problems = out.problems
    problems += [Problem("added", p.split(":")[0], "not read") for p in tree.problems]
    ev_bytes, cs_bytes = tree.kept.get(EVIDENCE_SIG), tree.kept.get(CASE_SIG)
    if ev_bytes is None and cs_bytes is None:
        if sealed:
            problems.append(Problem("missing", f"{EVIDENCE_SIG}, {CASE_SIG}", "the run's seal lists them"))
        elif "case.json" in tree.files:
            problems.append(Problem("not_signed", "", f"{EVIDENCE_SIG} and {CASE_SIG} are missing"))
            try:
                data = json.loads(tree.kept.get("case.json") or b"")
                if isinstance(data, dict) and data.get("phases") and not data.get("evidence"):
                    problems.append(Problem("digest_dropped", "case.json", "a case that ran records no digests"))
            except (ValueError, RecursionError):
                pass
        else:
            out.notes.append("unfinished: no case.json (the run stopped while it ran; resume it)")
        return out
    ev = _statement(parse_signed(ev_bytes), EVIDENCE_SIG, key, run_id, case_id, problems)
    cs = _statement(parse_signed(cs_bytes), CASE_SIG, key, run_id, case_id, problems)
    out.sandbox = ev.get("sandbox") if isinstance(ev.get("sandbox"), str) else None
    if ev_bytes is not None and cs and cs.get("evidence_statement") != sha256_bytes(ev_bytes):
        problems.append(Problem("replaced", EVIDENCE_SIG, "it is not the evidence statement the case signed"))
    if sealed and ev_bytes is not None and cs_bytes is not None:
        now = {"evidence": sha256_bytes(ev_bytes), "case": sha256_bytes(cs_bytes)}
        successor = now["evidence"] == sealed.get("evidence") and cs.get("previous") == sealed.get("case")
        if now != {k: sealed.get(k) for k in now} and not successor:
            problems.append(Problem("replaced", "", "its signatures are not the ones the run's seal lists "
                                                    "(an earlier or another signed state of the case)"))
    observed, derived = _compare_files(tree, ev, cs, skip_derived)
    if "case.json" in tree.kept:
        _case_json_digests(tree, ev, derived)
    out.problems = observed + problems + derived  # what the agent's case observed first, then the harness's own
    return out


def _compare_files(tree: Tree, ev: dict[str, Any], cs: dict[str, Any],
                   skip_derived: bool) -> tuple[list[Problem], list[Problem]]:
    """(problems of the evidence, the workspace and unknown files; problems of the derived files)."""
    problems: list[Problem] = []
    later: list[Problem] = []
    evidence = {str(k): str(v) for k, v in _dict(ev.get("evidence")).items()}
    derived = {str(k): str(v) for k, v in _dict(cs.get("files")).items()}
    if skip_derived:
        derived = {k: v for k, v in derived.items() if k == "case.json"}
    listing = _workspace_listing(tree, ev)
    dirs = {str(d) for d in ev.get("dirs") or [] if isinstance(d, str)} if ev else None
    for rel, digest in tree.files.items():
        if rel in (EVIDENCE_SIG, CASE_SIG):
            continue
        if rel in evidence or rel in derived:
            want = evidence.get(rel, derived.get(rel))
            if digest != want:
                (problems if rel in evidence else later).append(
                    Problem("changed", rel, "not a regular file now" if digest == NOT_REGULAR else ""))
        elif rel.startswith("workspace/") and listing is not None and entry_key(rel[10:]) in listing:
            if digest != listing[entry_key(rel[10:])]:
                problems.append(Problem("changed", rel))
        elif skip_derived and is_derived(rel):
            continue  # being written anew
        else:
            (later if is_derived(rel) else problems).append(
                Problem("added", rel, "not a regular file" if digest == NOT_REGULAR else ""))
    for rel in sorted(set(evidence) | set(derived)):
        if rel not in tree.files and not (skip_derived and rel != "case.json" and is_derived(rel)):
            (problems if rel in evidence else later).append(Problem("missing", rel))
    if listing is not None:
        have = {entry_key(r[10:]) for r in tree.files if r.startswith("workspace/")}
        for k in sorted(set(listing) - have):
            problems.append(Problem("missing", f"workspace/{k}"))
    if dirs is not None:
        now = {entry_key(d) for d in tree.dirs}
        problems += [Problem("added", d, "a folder") for d in sorted(now - dirs)]
        problems += [Problem("missing", d, "a folder") for d in sorted(dirs - now)]
    return problems, later


def check_case_before_rewrite(run_path: Path, case_id: str, key: PublicKey) -> list[Problem]:
    """What is wrong with a case's evidence and its case.json, before the harness rewrites the case."""
    try:
        top = open_folder(run_path)
    except OSError as exc:
        return [Problem("missing", "", f"the run folder cannot be opened ({exc.strerror})")]
    try:
        fd = open_beneath(top, ["cases", case_id], file=False)
    except OSError:
        return [Problem("missing", "", "the case folder cannot be opened without following a link")]
    finally:
        os.close(top)
    try:
        return check_case(fd, case_id, run_path.name, key, skip_derived=True).problems
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------ a run

@dataclass
class RunCheck:
    """What :func:`verify_run` found."""

    path: Path
    run_id: str
    status: str = "verified"
    """verified | changed | unsigned | other_key (signed consistently, but not by a key asked for)."""
    key: str | None = None
    """The fingerprint of the key the run records."""
    public_key: str | None = None
    checked_against: str = ""
    problems: list[Problem] = field(default_factory=list)
    """Problems of the run's own files (its seal, manifest, reports)."""
    cases: dict[str, CaseCheck] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cases_entry_exists: bool = True

    @property
    def changed_cases(self) -> list[str]:
        return sorted(c for c, cc in self.cases.items() if cc.problems)

    @property
    def ok(self) -> bool:
        return self.status == "verified"

    def as_json(self) -> dict[str, Any]:
        return {"run": safe_name(self.path), "run_id": safe_name(self.run_id), "status": self.status,
                "key": self.key, "public_key": self.public_key, "checked_against": self.checked_against,
                "problems": [p.as_json() for p in self.problems],
                "changed_cases": [safe_name(c) for c in self.changed_cases],
                "cases": [cc.as_json() for _, cc in sorted(self.cases.items())],
                "notes": [safe_text(n) for n in self.notes]}


def _manifest(tree: Tree) -> dict[str, Any]:
    try:
        obj = json.loads(tree.kept.get("manifest.json") or b"")
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _list_cases(top: int) -> tuple[int, list[str]] | None:
    try:
        fd = open_beneath(top, ["cases"], file=False)
    except OSError:
        return None
    try:
        return fd, sorted(os.listdir(fd))
    except OSError:
        os.close(fd)
        return None


def _has_case_sigs(cases_fd: int, names: Iterable[str]) -> bool:
    for name in names:
        for sig in (EVIDENCE_SIG, CASE_SIG):
            try:
                os.stat(f"{name}/{sig}", dir_fd=cases_fd, follow_symlinks=False)
                return True
            except OSError:
                continue
    return False


def verify_run(path: Path, anchors: Iterable[str] | None = None, *, anchor_label: str = "") -> RunCheck:
    """Check a stored run (a folder with manifest.json and cases/) against its signatures.

    ``anchors``: the fingerprints the run must be signed with (None: the key it records, shown in the
    result). Never raises for what is in the run; every difference is in the result."""
    path = Path(path)
    rc = RunCheck(path, path.name, checked_against=anchor_label or "the key the run records")
    try:
        top = open_folder(path)
    except OSError as exc:
        rc.status = "changed"
        rc.problems.append(Problem("missing", "", f"the run folder cannot be opened ({exc.strerror})"))
        return rc
    try:
        listed = _list_cases(top)
        cases_fd, names = listed if listed is not None else (-1, [])
        try:
            os.stat("cases", dir_fd=top, follow_symlinks=False)
            rc.cases_entry_exists = True
        except OSError:
            rc.cases_entry_exists = False
        try:
            _verify(rc, top, cases_fd, names, anchors)
        finally:
            if cases_fd >= 0:
                os.close(cases_fd)
    finally:
        os.close(top)
    return rc


def _verify(rc: RunCheck, top: int, cases_fd: int, names: list[str], anchors: Iterable[str] | None) -> None:
    from ..store.files import read_regular

    def first(name: str) -> bytes | None:
        try:
            return read_regular(name, 64 * 1024 * 1024, dir_fd=top)
        except OSError:
            return None

    manifest = _manifest(Tree(kept={"manifest.json": first("manifest.json") or b""}))
    if first(RUN_SIG) is None and not manifest.get("signing") \
            and not (cases_fd >= 0 and _has_case_sigs(cases_fd, names)):
        rc.status = "unsigned"
        rc.notes.append("written before gripprobe signed its runs, or its signatures were removed: "
                        "nothing in it can be proven")
        return
    tree = walk(top, keep=frozenset({RUN_SIG, "manifest.json"}), skip=frozenset({"cases"}))
    manifest = _manifest(tree)
    signing = _dict(manifest.get("signing"))
    seal = parse_signed(tree.kept.get(RUN_SIG))
    st = seal.statement or {}
    key = PublicKey.from_b64(st.get("public_key")) or PublicKey.from_b64(signing.get("public_key"))
    if key is None:
        rc.status = "changed"
        rc.problems.append(Problem("missing", RUN_SIG, "no public key is recorded: nothing can be checked"))
        return
    rc.key, rc.public_key = key.fingerprint, key.b64
    wanted = set(anchors) if anchors is not None else None
    if wanted is not None and key.fingerprint not in wanted:
        rc.notes.append(f"signed by another key: {key.fingerprint}, not {', '.join(sorted(wanted))}")
    trusted = True
    if seal.statement is None:
        rc.problems.append(Problem("missing" if seal.problem == "missing" else "signature_invalid", RUN_SIG))
        trusted = False
    elif st.get("key") != key.fingerprint or not seal.valid_under(key):
        rc.problems.append(Problem("signature_invalid", RUN_SIG, seal.problem or ""))
        trusted = False
    if signing and signing.get("public_key") != key.b64:
        rc.problems.append(Problem("changed", "manifest.json", "its `signing` names another public key"))
    if st and st.get("run_id") != rc.run_id:
        rc.problems.append(Problem("changed", "", f"the seal is of run {safe_text(st.get('run_id'))}: the folder "
                                                  f"was renamed or copied in"))
    files = {str(k): str(v) for k, v in _dict(st.get("files")).items()}
    for rel, digest in sorted(tree.files.items()):
        if rel == RUN_SIG:
            continue
        if rel not in files:
            rc.problems.append(Problem("added", rel))
        elif files[rel] != digest:
            rc.problems.append(Problem("changed", rel))
    rc.problems += [Problem("missing", rel) for rel in sorted(set(files) - set(tree.files))]
    # A seal whose signature fails names nothing: its list of cases may be the forger's (a case it names that
    # is not there is no case's fault); each case is then checked on its own signatures alone.
    sealed = {str(k): _dict(v) for k, v in _dict(st.get("cases")).items()} if trusted else {}
    if cases_fd < 0 and rc.cases_entry_exists:
        rc.problems.append(Problem("changed", "cases", "not a folder reached without following a link"))
    for name in names:
        try:
            fd = open_beneath(cases_fd, [name], file=False)
        except OSError:
            rc.cases[name] = CaseCheck(name, [Problem("added", "", "not a folder (a link, or a file)")])
            continue
        try:
            cc = check_case(fd, name, rc.run_id, key, sealed.get(name))
        finally:
            os.close(fd)
        if name not in sealed and cc.ok and not cc.notes:
            cc.notes.append("not in the run's seal yet (the session that wrote it did not finish); its own "
                            "signatures hold")
        rc.cases[name] = cc
    for name in sorted(set(sealed) - set(names)):
        rc.cases[name] = CaseCheck(name, [Problem("missing", "", "the whole case folder")])
    unconfined = sorted(c for c, cc in rc.cases.items() if cc.sandbox == "none")
    if unconfined:
        rc.notes.append(f"{len(unconfined)} case(s) ran unsandboxed (--sandbox none): their agents could read "
                        f"this machine's signing key (docs/sandbox.md)")
    if rc.problems or rc.changed_cases:
        rc.status = "changed"
    elif wanted is not None and key.fingerprint not in wanted:
        rc.status = "other_key"


# ------------------------------------------------------------------------------------ recompute's gate

@lru_cache(maxsize=64)
def _format_cached(path: str, stamp: tuple) -> str:
    run = Path(path)
    if os.path.lexists(run / RUN_SIG):
        return "signed"
    try:
        manifest = json.loads((run / "manifest.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        manifest = None
    if isinstance(manifest, dict) and manifest.get("signing"):
        return "signed"
    try:
        names = sorted(os.listdir(run / "cases"))
    except OSError:
        names = []
    if any(os.path.lexists(run / "cases" / n / s) for n in names for s in (EVIDENCE_SIG, CASE_SIG)):
        return "signed"
    for n in names:
        try:
            data = json.loads((run / "cases" / n / "case.json").read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and isinstance(data.get("evidence"), dict):
            return "digests"
    return "legacy"


def run_format(run_path: Path) -> str:
    """How a stored run can be checked: ``signed`` (any signature or the manifest's ``signing``: every
    case must verify), ``digests`` (unsigned, but a case records evidence digests: every case that ran
    must), ``legacy`` (written before digests existed)."""
    stamp: list[tuple[int, int, int] | None] = []
    for p in (run_path / "manifest.json", run_path / "cases", run_path / RUN_SIG):
        try:
            st = os.lstat(p)
            stamp.append((st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append(None)
    return _format_cached(str(run_path.resolve()), tuple(stamp))


def tamper_problems(run_path: Path, case_dir: Path, orig: Any) -> list[str]:
    """What changed in a stored case since the harness wrote it, one line each (empty: it holds). The
    tamper gate of ``rebuild-reports --recompute``: a non-empty answer makes the case HARNESS_ERROR
    ``artifact_tampered``. In a signed run every case must verify under the run's key (a case with no
    signature or no digests is tampered, never a case from before digests); in an unsigned run with
    digests every case that ran must have them; runs from before digests have nothing to check."""
    fmt = run_format(run_path)
    if fmt == "signed":
        from .seal import run_public_key

        key = run_public_key(run_path)
        if key is None:
            return ["the run is signed but records no public key"]
        seal = parse_signed(_read_stored(run_path, RUN_SIG))
        sealed = _dict(_dict((seal.statement or {}).get("cases")).get(case_dir.name)) \
            if seal.valid_under(key) else None
        try:
            top = open_folder(run_path)
        except OSError as exc:
            return [f"the run folder cannot be opened ({exc.strerror})"]
        try:
            fd = open_beneath(top, ["cases", case_dir.name], file=False)
        except OSError:
            return ["the case folder is not reached without following a link"]
        finally:
            os.close(top)
        try:
            return [p.text() for p in check_case(fd, case_dir.name, run_path.name, key, sealed).problems]
        finally:
            os.close(fd)
    if fmt == "digests" and orig.phases and orig.evidence is None:
        return ["case.json: digest dropped (its `evidence` digests are gone; every case of this run that ran "
                "records them)"]
    if orig.evidence is not None:
        from .digests import verify_evidence

        return verify_evidence(case_dir, orig.evidence)
    return []


def _read_stored(root: Path, rel: str) -> bytes | None:
    from ..store import read_stored

    try:
        return read_stored(root, rel, 64 * 1024 * 1024)
    except OSError:
        return None

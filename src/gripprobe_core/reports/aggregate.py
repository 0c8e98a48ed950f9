"""Cross-run publication report (SPEC §7 ``aggregate-reports``): many runs in, one sanitized table out.

Reading is lean: each ``case.json`` is checked as a whole like every report checks it (a case the run's
summary calls unreadable is unreadable here too) and only the handful of fields the table needs are kept
(key, versions, hash, hardware profile, tags, status, overall score, usage); nothing else of a case ever
reaches the output, so prompts, command lines, proxy bodies and workspaces stay out by
construction. Counts accumulate per (row, test) cell while the files stream past, so memory grows with
the number of distinct cells, not with the number of cases.

Tool-call fidelity (docs/telemetry.md "Fidelity") is the one thing read beyond ``case.json``: the measured
phase's stored events (``events.measured.jsonl``), the oracle's ground truth when the case ran against it
(``oracle.measured.jsonl``) and, only when a model response carried calls written as text, the proxy's records;
nothing is parsed again, and only counts reach the output.

Scores (docs/scores.md) come from :class:`~.scores.Scoreboard`, the same as every other report: n leaves
out TOOL_UNSUPPORTED and SKIPPED (shown as coverage), a cell gets pass@k, pass^k, a Wilson interval and a
flaky mark, a row its mean over tests with a bootstrap interval, and its usage (tokens, cost, time).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from ..errors import UserError
from ..models.statuses import STATUSES
from ..store import RunFolder, Stored, atomic_write_text, check_readable_root
from ..store.files import OpenFolder, json_kind, read_regular
from ..store.layout import STORED_JSON_LIMIT, atomic_write_bytes
from ..store.lean import LeanCase, lean_case
from ..store.runs import iter_run_dirs
from ..telemetry.fidelity import EVENT_WORDS, PAIRS, Tally, phase_tallies, wire_text_count
from ..timeutil import utc_now_iso
from ..textsafe import safe_cell, safe_name
from .sanitize import Sanitizer, current_sanitizer
from .scores import (
    SCORES_NOTE, SHORT, Scoreboard, cell_text, coverage_text, ks_text, overall_of, score_text, usage_text)

if TYPE_CHECKING:
    from ..models.results import CaseResult

__all__ = ["FIDELITY_COLUMNS", "KIND", "OUTPUT_FILES", "Filters", "SORT_KEYS", "aggregate_runs", "case_fidelity",
           "find_run_dirs", "fidelity_text", "render_aggregate_md", "write_aggregate"]

KIND = "gripprobe-aggregate"
"""Marks an ``aggregate.json`` as written by this module (so a later run may overwrite the folder)."""
OUTPUT_FILES = ("aggregate.json", "aggregate.md", "index.html")
SORT_KEYS = ("strict", "overall", "n", "name")
DEFAULT_TITLE = "GripProbe aggregate report"
ROW_FIELDS = ("agent", "agent_version", "model", "model_hash", "format", "hardware")

# ------------------------------------------------------------------ discovery

def find_run_dirs(roots: Iterable[Path]) -> list[Path]:
    """Run directories under each root: a results root (holding ``runs/``), a ``runs/`` folder, or one
    run directory. Resolved, deduplicated, sorted by run id. Raises :class:`UserError` when a root is
    missing or holds no run."""
    found: dict[Path, None] = {}
    for root in roots:
        check_readable_root(root, "--runs-root")
        candidates = [r.path for r in iter_run_dirs(root)]
        if not candidates:
            raise UserError(f"--runs-root {root}: no run found; pass a results root (holding runs/), a runs/ "
                            f"folder or one run directory (a folder with manifest.json and cases/)")
        for c in candidates:
            found.setdefault(c.resolve(), None)
    return sorted(found, key=lambda p: (p.name, str(p)))


# ------------------------------------------------------------------ reading (lean)

@dataclass(frozen=True)
class Filters:
    """Glob patterns (``fnmatch``, case-sensitive); empty means everything. Patterns within one field
    are alternatives; fields combine with AND. A test pattern ``tag:<tag>`` matches the case's tags."""

    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.__dict__.items() if v}

    def run_ok(self, run_id: str) -> bool:
        return _match(self.runs, run_id)

    def case_ok(self, f: CaseFacts) -> bool:
        if not (_match(self.agents, f.agent) and _match(self.models, f.model) and _match(self.formats, f.format)):
            return False
        if self.hardware and not _match(self.hardware, f.hardware or "none"):
            return False
        if self.tests:
            return any(fnmatchcase(f.test, p) if not p.startswith("tag:")
                       else any(fnmatchcase(t, p[4:]) for t in f.tags) for p in self.tests)
        return True


def _match(patterns: tuple[str, ...], value: str) -> bool:
    return not patterns or any(fnmatchcase(value, p) for p in patterns)


@dataclass(frozen=True, slots=True)
class CaseFacts:
    agent: str
    agent_version: str | None
    model: str
    model_hash: str | None
    format: str
    test: str
    hardware: str | None
    tags: tuple[str, ...]
    status: str
    overall: float
    usage: dict | None
    agent_s: float | None
    case_s: float | None
    backend: str = ""
    trial: int = 1
    case_id: str = ""
    manual: bool = False
    """Answered by an operator (interaction policy manual): left out of the aggregate."""


def read_facts(path: Stored | Path, hardware_default: str | None = None) -> CaseFacts | None:
    """The fields the aggregate needs from one ``case.json``; None when it is not a valid result (a link on its
    way included). The whole file is checked as every report checks it (:func:`~gripprobe_core.store.lean.lean_case`:
    the status one of the nine, every number finite and in its range, ids plain, no unknown field), so a case the
    run's own summary lists as unreadable is never published here as a number."""
    try:
        limit = STORED_JSON_LIMIT + 1
        data = path.read(limit) if isinstance(path, Stored) else read_regular(path, limit)
    except OSError:
        return None
    case = _lean(data)
    if case is None:
        return None
    return facts_of(case, hardware_default, Path(path.path if isinstance(path, Stored) else path).parent.name)


def _lean(data: bytes) -> LeanCase | None:
    return None if len(data) > STORED_JSON_LIMIT else lean_case(data)


def facts_of(res: LeanCase | CaseResult, hardware_default: str | None, folder_name: str) -> CaseFacts:
    """The aggregate's fields of a checked case (``folder_name``: the case folder, when the result has no id)."""
    key, verdict, usage = res.key, res.verdict, res.usage
    if usage is None:
        used = None
    elif isinstance(usage, Struct):
        used = {f: getattr(usage, f) for f in usage.__struct_fields__}
    else:
        used = usage.model_dump()
    return CaseFacts(key.agent, res.agent_version or None, key.model, res.model_hash or None, key.format, key.test,
                     res.hardware_profile or hardware_default, tuple(res.tags), verdict.status,
                     overall_of(verdict.status, verdict.overall_score), used, _agent_seconds(res),
                     res.duration_s, key.backend, key.trial, res.case_id or folder_name,
                     res.interaction is not None and res.interaction.excluded_from_scores)


def read_case_in(folder: OpenFolder) -> LeanCase | None:
    """The checked case.json of an open case folder (:func:`read_facts`' check)."""
    try:
        data = folder.read("case.json", STORED_JSON_LIMIT + 1)
    except OSError:
        return None
    return _lean(data)


def _agent_seconds(res: LeanCase | CaseResult) -> float | None:
    """The measured phase's process duration (what the agent took on the job)."""
    for p in res.phases:
        if p.phase == "measured":
            return p.process.duration_s
    return None


def run_cases(run_dir: Path) -> Iterator[tuple[str, OpenFolder | None]]:
    """Each case folder of a run (sorted) with the folder held open while the caller looks at it (None when it
    cannot be opened): ``cases/`` walked once without following a link, each case folder opened below it."""
    try:
        cases = (RunFolder(run_dir).stored / "cases").opened()
    except OSError:
        return
    with cases:
        for name in cases.folders():
            try:
                folder = cases.child(name)
            except OSError:
                yield name, None
                continue
            with folder:
                yield name, folder


def read_facts_in(folder: OpenFolder | None, hardware_default: str | None, name: str) -> CaseFacts | None:
    """:func:`read_facts` of an open case folder (``name``: its folder name)."""
    res = None if folder is None else read_case_in(folder)
    return None if res is None else facts_of(res, hardware_default, name)


def case_files(run_dir: Path) -> Iterator[Stored]:
    """Every case folder's case.json, read without following a link below the run folder."""
    run = RunFolder(run_dir)
    for name in run.case_names():
        yield run.stored_case(name) / "case.json"


#: The most of one stored file the fidelity reads (events, ground truth, proxy records); past it a file counts
#: for what its first part holds.
FIDELITY_READ_LIMIT = 64 * 1024 * 1024


def _stored_lines(folder: OpenFolder, rel: str, only: tuple[bytes, ...] = ()) -> list[dict] | None:
    """The JSON object lines of a stored file (those holding one of ``only``, when given: the rest are never
    parsed), None when it is not there or cannot be read."""
    from ..jsonl import json_lines

    try:
        data = folder.read(rel, FIDELITY_READ_LIMIT)
    except OSError:
        return None
    return [obj for _, obj in json_lines(data, only)]


def case_fidelity(case_dir: Stored | OpenFolder, phase: str = "measured") -> dict[str, Tally] | None:
    """Tool-call fidelity of one stored case's phase (:func:`~gripprobe_core.telemetry.fidelity.phase_tallies`
    on its events, its oracle ground truth when there is one, its proxy records when calls were written as
    text), as tallies; None when the phase left no events (a case not run). Of the events only the lines that
    can count are parsed (:data:`~gripprobe_core.telemetry.fidelity.EVENT_WORDS`)."""
    try:
        art = (case_dir / "artifacts").opened() if isinstance(case_dir, Stored) else case_dir.child("artifacts")
    except OSError:
        return None
    with art:
        events = _stored_lines(art, f"events.{phase}.jsonl", EVENT_WORDS)
        if events is None:
            return None
        truth = _stored_lines(art, f"oracle.{phase}.jsonl")
        text = (_stored_lines(art, f"proxy.{phase}.http.jsonl") or []) if wire_text_count(events) else []
    return phase_tallies(events, truth, text)


def _fidelity_dict(tallies: dict[str, Tally] | None) -> dict[str, dict[str, Any]]:
    tallies = tallies or {}
    return {key: (tallies.get(key) or Tally()).as_dict() for key, _, _ in PAIRS}


# ------------------------------------------------------------------ aggregation

def _name_key(row: dict) -> tuple:
    return tuple((row[k] or "") for k in ("agent", "agent_version", "model", "model_hash", "format", "hardware"))


def _sort_rows(rows: list[dict], sort: str) -> list[dict]:
    if sort == "name":
        return sorted(rows, key=_name_key)
    if sort == "n":
        return sorted(rows, key=lambda r: (-r["n"], _name_key(r)))
    first, second = ("overall_score", "strict_pass_score") if sort == "overall" else ("strict_pass_score",
                                                                                       "overall_score")
    return sorted(rows, key=lambda r: (-_score_or(r[first]), -_score_or(r[second]), -r["n"], _name_key(r)))


def _score_or(v: float | None) -> float:
    return -1.0 if v is None else v


def run_integrity(run_dir: Path, keys: Iterable[str] | None = None, label: str = "") -> tuple[dict[str, Any], set[str]]:
    """How a run's signatures hold (docs/aggregate.md "Signatures"), and the case folders to leave out
    because they changed after the run. Only values the checker made reach the output: a status from a
    fixed list, a fingerprint and a public key it parsed itself, counts."""
    from ..integrity.check import verify_run

    check = verify_run(run_dir, keys, anchor_label=label)
    changed = set(check.changed_cases)
    return {"status": check.status, "key": check.key, "public_key": check.public_key,
            "changed_cases": len(changed), "run_files_changed": len(check.problems)}, changed


def _signatures(runs: list[dict[str, Any]], label: str, left_out: int) -> dict[str, Any]:
    keys: dict[str, dict[str, Any]] = {}
    for r in runs:
        i = r["integrity"]
        if i["key"] and i["status"] != "unsigned":
            keys.setdefault(i["key"], {"key": i["key"], "public_key": i["public_key"], "runs": 0})["runs"] += 1
    count = {s: sum(r["integrity"]["status"] == s for r in runs) for s in ("verified", "changed", "other_key",
                                                                             "unsigned")}
    return {"checked_against": label or "the key each run records", "keys": sorted(keys.values(), key=lambda k: k["key"]),
            "runs": count, "cases_left_out": left_out}


@dataclass
class _RunPart:
    """What one run adds to the aggregate (read in this process or in a worker, and merged in run order)."""

    run: dict[str, Any]
    board: Scoreboard
    fidelity: dict[tuple, dict[str, Tally]]
    unreadable: int = 0
    left_out: int = 0
    manual: int = 0


@dataclass(frozen=True)
class _Reading:
    """How every run is read (the same in every worker)."""

    filters: Filters
    sanitizer: Sanitizer
    anchors: frozenset[str] | None
    key_label: str
    verified_only: bool


def _read_run(how: _Reading, run_dir: Path) -> _RunPart:
    """One run: its signatures checked, then each case folder once (case.json, then the fidelity's files below
    the open folder); only counts and sums are kept, never a result."""
    name = how.sanitizer.name
    filters = how.filters
    integrity, changed = run_integrity(run_dir, how.anchors, how.key_label)
    excluded = how.verified_only and (integrity["status"] in ("unsigned", "other_key")
                                      or integrity["run_files_changed"] > 0)
    manifest = RunFolder(run_dir).read_manifest()
    hw_default = manifest.get("hardware_profile") if isinstance(manifest.get("hardware_profile"), str) else None
    part = _RunPart({}, Scoreboard(ROW_FIELDS), {})
    fidelity = part.fidelity
    idents: dict[tuple, tuple] = {}
    used = 0
    for case_name, folder in run_cases(run_dir):
        if excluded or case_name in changed:
            part.left_out += 1
            continue
        facts = read_facts_in(folder, hw_default, case_name)  # only the facts are kept, never the result
        if folder is None or facts is None:
            part.unreadable += 1
            continue
        if not filters.case_ok(facts):
            continue
        if facts.manual:
            part.manual += 1
            continue
        used += 1
        raw = (facts.agent, facts.agent_version, facts.model, facts.model_hash, facts.format, facts.hardware)
        ident = idents.get(raw)
        if ident is None:  # the same few rows recur case after case: each sanitized once
            ident = idents[raw] = (name(facts.agent), _opt(name, facts.agent_version), name(facts.model),
                                   _opt(name, facts.model_hash), name(facts.format), _opt(name, facts.hardware))
        part.board.add(ident, name(facts.test), facts.status, facts.overall, usage=facts.usage,
                       agent_s=facts.agent_s, case_s=facts.case_s)
        got = case_fidelity(folder)
        if got is not None:
            row_fid = fidelity.get(ident)
            if row_fid is None:
                row_fid = fidelity[ident] = {}
            for key, tally in got.items():
                have = row_fid.get(key)
                if have is None:
                    row_fid[key] = tally
                else:
                    have.add(tally)
    part.run = {"run_id": name(safe_name(run_dir.name)), "suite": _opt(name, _str_or_none(manifest.get("suite"))),
                "started_at": _opt(name, _str_or_none(manifest.get("started_at"))), "cases": used,
                "integrity": integrity}
    return part


def default_jobs(cpus: int | None = None, load: float | None = None) -> int:
    """Worker processes for reading runs: one per CPU this process may use that is not busy now (``load``: how
    many CPUs others keep busy; None: :func:`busy_cpus`), at most 8; 1 (read in this process) when at most one
    CPU is free. Measured on the 2-core machine at load 2.7 (others busy): two workers 4.0-5.6 s, one process
    3.9 s for 10k cases; forked workers only pay where a core is idle."""
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    if load is None:
        load = busy_cpus()
    free = cpus - int(load + 0.5)
    return max(1, min(free, 8)) if free >= 2 else 1


def busy_cpus(samples: int = 5, gap_s: float = 0.001) -> float:
    """How many CPUs other tasks keep busy now: the median of ``samples`` readings, ``gap_s`` apart, of the
    runnable tasks the kernel counts (``/proc/loadavg``'s fourth field), this process left out. Not the 1-minute
    load average: it lags a minute behind, so after a busy minute an idle machine still looked busy and the
    aggregate read 10k cases in one process on two idle cores. Where ``/proc`` cannot be read, that average."""
    import time

    seen: list[int] = []
    for i in range(samples):
        if i:
            time.sleep(gap_s)
        try:
            with open("/proc/loadavg", "rb") as fh:
                running = int(fh.read().split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            try:
                return os.getloadavg()[0]
            except OSError:
                return 0.0
        seen.append(max(0, running - 1))
    return float(sorted(seen)[len(seen) // 2])


#: Fewer cases than this (all runs together) are read in this process: forking workers costs more than it saves.
POOL_MIN_CASES = 1000


def _case_count(run_dirs: list[Path]) -> int:
    total = 0
    for run_dir in run_dirs:
        try:
            with os.scandir(run_dir / "cases") as it:
                total += sum(1 for _ in it)
        except OSError:
            continue
    return total


def _pool(jobs: int):
    """A process pool of ``jobs`` workers forked from this process (its imports and state shared), or None where
    fork is not available."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:
        return None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)


def aggregate_runs(run_dirs: Iterable[Path], *, filters: Filters | None = None, sort: str = "strict",
                   title: str = DEFAULT_TITLE, sanitizer: Sanitizer | None = None, keys: Iterable[str] | None = None,
                   key_label: str = "", verified_only: bool = False, jobs: int | None = None) -> dict[str, Any]:
    """The aggregate data (the shape ``render_aggregate_html`` takes; docs/aggregate.md), sanitized.

    Every run is checked against its signatures first (``keys``: the fingerprints it must be signed with;
    None: the key it records): a case that changed after its run is left out and counted; a run that is
    not signed, or signed by a key not asked for, is counted and marked (``verified_only``: left out).

    ``jobs``: worker processes reading runs side by side (and computing the rows' bootstrap intervals); None:
    :func:`default_jobs` (one per idle CPU) when there are two runs or more and at least :data:`POOL_MIN_CASES`
    cases, else none. Each run
    is read whole by one process and the parts are merged in run order, so the data is the same whatever
    ``jobs`` is."""
    if sort not in SORT_KEYS:
        raise UserError(f"unknown sort {sort!r}; choose one of {', '.join(SORT_KEYS)}")
    filters = filters or Filters()
    san = sanitizer or current_sanitizer()
    how = _Reading(filters, san, frozenset(keys) if keys is not None else None, key_label, verified_only)
    selected = [r for r in run_dirs if filters.run_ok(r.name)]
    if jobs is None:
        jobs = default_jobs() if len(selected) > 1 and _case_count(selected) >= POOL_MIN_CASES else 1
    jobs = min(jobs, len(selected))
    pool = _pool(jobs) if jobs > 1 else None
    board = Scoreboard(ROW_FIELDS)
    fidelity: dict[tuple, dict[str, Tally]] = {}
    runs: list[dict[str, Any]] = []
    unreadable = left_out = manual = 0
    try:
        parts = pool.map(partial(_read_run, how), selected) if pool is not None else (
            _read_run(how, r) for r in selected)
        if pool is not None:  # every run is handed out: while the workers read, load what writing the page needs
            from .warm import warm_aggregate_page

            warm_aggregate_page()
        for part in parts:  # in run order, whoever read them
            runs.append(part.run)
            board.merge(part.board)
            for ident, tallies in part.fidelity.items():
                row_fid = fidelity.setdefault(ident, {})
                for key, tally in tallies.items():
                    row_fid.setdefault(key, Tally()).add(tally)
            unreadable += part.unreadable
            left_out += part.left_out
            manual += part.manual
        rows = board.rows(pool.map if pool is not None else None)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    for row in rows:
        row["fidelity"] = _fidelity_dict(fidelity.get(tuple(row[k] for k in ROW_FIELDS)))
    rows = _sort_rows(rows, sort)
    from .. import __version__
    return {
        "kind": KIND,
        "title": san.text(title),
        "generated_at": utc_now_iso(),
        "gripprobe_version": __version__,
        "runs": runs,
        "tests": board.tests(),
        "statuses": list(STATUSES),
        "rows": rows,
        "unreadable": unreadable,
        "manual_left_out": manual,
        "signatures": _signatures(runs, key_label, left_out),
        "filters": san.value(filters.as_dict()),
        "sort": sort,
    }


def _opt(fn, value: str | None) -> str | None:
    return fn(value) if value else None


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


# ------------------------------------------------------------------ markdown

def _md(v: Any) -> str:
    """One Markdown cell: control characters escaped (``safe_cell``), markup and ``|`` made literal."""
    return safe_cell(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _short_hash(h: str | None) -> str:
    return "" if not h else (h if len(h) <= 19 else h[:18] + "…")


def render_aggregate_md(data: dict[str, Any]) -> str:
    """``aggregate.md``: one row per group, its coverage, scores and usage, then one column per test."""
    tests = data["tests"]
    head = ["agent", "version", "model", "hash", "format", "hardware", "coverage", "n", "strict [95% CI]",
            "overall [95% CI]", "pass@k", "pass^k", "flaky", "usage", *tests]
    lines = [
        f"# {_md(data['title'])}", "",
        f"- generated {data['generated_at']} by gripprobe {data['gripprobe_version']} from {len(data['runs'])} "
        f"run(s), {sum(r['cases'] for r in data['runs'])} case(s); unreadable case files skipped: "
        f"{data.get('unreadable', 0)}"
        + (f"; left out, answered by an operator (interaction policy manual): {data['manual_left_out']}"
           if data.get("manual_left_out") else ""),
        "- " + signatures_text(data.get("signatures")),
        "- " + SCORES_NOTE,
        "- " + ", ".join(f"{SHORT[s]} = {s}" for s in STATUSES if SHORT[s] != s), "",
        "| " + " | ".join(_md(h) for h in head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in data["rows"]:
        vals = [row["agent"], row["agent_version"] or "", row["model"], _short_hash(row["model_hash"]), row["format"],
                row["hardware"] or "", coverage_text(row), row["n"],
                score_text(row["strict_pass_score"], row["strict_ci95"]),
                score_text(row["overall_score"], row["overall_ci95"]), ks_text(row["pass_at_k"]),
                ks_text(row["pass_hat_k"], "^"), len(row["flaky"]) or "", usage_text(row["usage"]),
                *(cell_text(row["cells"].get(t)) for t in tests)]
        lines.append("| " + " | ".join(_md(v) for v in vals) + " |")
    if not data["rows"]:
        lines += ["", "No case matched."]
    lines += render_fidelity_md(data["rows"])
    lines += ["", "Runs: " + (", ".join(f"{_md(r['run_id'])} ({r['cases']}, {run_signature_text(r)})"
                                       for r in data["runs"]) or "none")]
    keys = (data.get("signatures") or {}).get("keys") or []
    if keys:
        lines += ["", "Public keys (check a run with `gripprobe verify RUN --key KEY`):", ""]
        lines += [f"- `{_md(k['key'])}`: `{_md(k['public_key'])}` ({k['runs']} run(s))" for k in keys]
    return "\n".join(lines) + "\n"


#: The fidelity columns of the aggregate's Markdown and HTML: (key in a row's ``fidelity``, label).
FIDELITY_COLUMNS = (("B_vs_A", "B vs A"), ("C_vs_A", "C vs A"), ("A_vs_truth", "A vs truth"),
                    ("B_vs_truth", "B vs truth"))


def fidelity_text(f: dict[str, Any] | None) -> tuple[str, str]:
    """(recall, precision) of one comparison as ``0.83 (6)``: the rate and its n; ``—`` with n 0."""
    if not isinstance(f, dict):
        return "—", "—"

    def one(rate: Any, n: Any) -> str:
        return f"{rate:.2f} ({n})" if isinstance(rate, (int, float)) else f"— ({n if isinstance(n, int) else 0})"
    return one(f.get("recall"), f.get("n_reference")), one(f.get("precision"), f.get("n_tested"))


def render_fidelity_md(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown fidelity table: a row per group, recall and precision of each comparison."""
    if not rows:
        return []
    head = ["agent", "version", "model", "format", "hardware",
            *(f"{label} {m}" for _, label in FIDELITY_COLUMNS for m in ("recall", "precision"))]
    lines = ["", "Tool-call fidelity of each group's cases (measured phase; recall and precision, n in brackets; "
             "docs/telemetry.md \"Fidelity\"):", "",
             "| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        fid = row.get("fidelity") or {}
        vals = [row["agent"], row["agent_version"] or "", row["model"], row["format"], row["hardware"] or "",
                *(t for key, _ in FIDELITY_COLUMNS for t in fidelity_text(fid.get(key)))]
        lines.append("| " + " | ".join(_md(v) for v in vals) + " |")
    return lines


_SIGNATURE_WORDS = {"verified": "verified", "changed": "CHANGED after the run", "other_key": "signed by another key",
                    "unsigned": "not signed"}


def run_signature_text(run: dict[str, Any]) -> str:
    i = run.get("integrity") or {}
    word = _SIGNATURE_WORDS.get(i.get("status"), "unknown")
    return word + (f" {i['key'][:15]}…" if i.get("key") and i.get("status") != "unsigned" else "")


def signatures_text(sig: dict[str, Any] | None) -> str:
    """One line: how the runs' signatures held (markdown and HTML say the same)."""
    if not sig:
        return "signatures: not checked"
    runs = sig.get("runs") or {}
    parts = [f"{runs.get(s, 0)} run(s) {_SIGNATURE_WORDS[s]}" for s in ("verified", "changed", "other_key", "unsigned")
             if runs.get(s)]
    left = sig.get("cases_left_out") or 0
    return (f"signatures (checked against {sig.get('checked_against')}): " + (", ".join(parts) or "no runs")
            + (f"; {left} case(s) left out (changed after their run, or not verified)" if left else ""))


# ------------------------------------------------------------------ writing (confined)

def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def check_output(output: Path, runs_roots: Iterable[Path], run_dirs: Iterable[Path]) -> Path:
    """The resolved output folder, or :class:`UserError` when writing there could touch the runs or
    clobber files this command did not write."""
    out = output.resolve()
    if out.exists() and not out.is_dir():
        raise UserError(f"--output {output} is a file; pass a folder (it is created if missing)")
    for root in runs_roots:
        r = root.resolve()
        if out == r or out == r / "runs" or _inside(out, r / "runs"):
            raise UserError(f"--output {output} is inside the runs being aggregated; pass a folder outside "
                            f"{root} (e.g. {r.parent / 'aggregate'})")
    for run_dir in run_dirs:
        if _inside(out, run_dir) or _inside(out, run_dir.parent) and run_dir.parent.name == "runs":
            raise UserError(f"--output {output} is inside the run folder {run_dir.parent}; pass a folder "
                            f"outside it")
    present = [n for n in OUTPUT_FILES if (out / n).exists() or (out / n).is_symlink()]
    if present:
        if any((out / n).is_dir() for n in present):
            raise UserError(f"--output {output}: {', '.join(present)} is a folder; pass another output folder")
        if json_kind(out / "aggregate.json") != KIND:
            raise UserError(f"--output {output} already holds {', '.join(present)} not written by "
                            f"aggregate-reports; pass an empty or new folder")
    return out


#: Fewer rows than this are written in this process: forking writers costs more than it saves.
MARKUP_POOL_MIN_ROWS = 64

#: The page being written, for the worker processes forked to write its rows' markup (they inherit it: nothing
#: is sent to them but slice bounds). Set only while :func:`write_aggregate` runs.
_PAGE: dict[str, Any] = {}


def _page_slice(bounds: tuple[int, int]) -> list[tuple[str, str]]:
    from .html import aggregate_row_markup

    return aggregate_row_markup(_PAGE["frame"], *bounds)


def write_aggregate(data: dict[str, Any], out: Path, jobs: int | None = None) -> list[Path]:
    """Write ``aggregate.json`` (first: it marks the folder as ours), ``aggregate.md`` and ``index.html``
    atomically into ``out`` (already checked by :func:`check_output`); nothing else is touched.

    ``jobs``: processes writing the page's rows, this one included: ``jobs - 1`` forked workers write the later
    rows while this process writes the JSON, the Markdown and then the first rows (slices joined in order: the
    page is the same whatever ``jobs`` is); None: :func:`default_jobs` when there are at least
    :data:`MARKUP_POOL_MIN_ROWS` rows, else 1 (all in this process)."""
    from ..jsonl import dumps_pretty
    from ..store.layout import atomic_write_chunks
    from .html import aggregate_frame, aggregate_html_chunks, aggregate_row_markup

    rows = len(data.get("rows") or [])
    if jobs is None:
        jobs = default_jobs() if rows >= MARKUP_POOL_MIN_ROWS else 1
    jobs = min(jobs, rows // (MARKUP_POOL_MIN_ROWS // 2) or 1)
    pool = None
    if jobs > 1:
        _PAGE["frame"] = aggregate_frame(data)
        pool = _pool(jobs - 1)  # forked now: the workers hold the frame already
    try:
        pending = None
        if pool is not None:
            # this process writes two files first: it takes a smaller share of the rows
            own = rows * 2 // (2 * jobs + 1)
            cuts = [own + (rows - own) * i // (2 * (jobs - 1)) for i in range(2 * (jobs - 1) + 1)]
            pending = [pool.submit(_page_slice, (lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / name for name in OUTPUT_FILES]
        atomic_write_bytes(paths[0], dumps_pretty(data))  # msgspec: 0.18 s and +22 MB with json.dumps on 10k cases
        atomic_write_text(paths[1], render_aggregate_md(data))
        rendered = None
        if pending is not None:
            rendered = aggregate_row_markup(_PAGE["frame"], 0, own)
            rendered += [pair for f in pending for pair in f.result()]
        atomic_write_chunks(paths[2], aggregate_html_chunks(data, rendered, _PAGE.get("frame")))  # mode: 0666 minus umask
        return paths
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _PAGE.clear()

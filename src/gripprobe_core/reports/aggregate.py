"""Cross-run publication report (SPEC §7 ``aggregate-reports``): many runs in, one sanitized table out.

Reading is lean: each ``case.json`` is parsed with :mod:`json` and only the handful of fields the table
needs are kept (key, versions, hash, hardware profile, tags, status, overall score); nothing else of a
case ever reaches the output, so prompts, command lines, proxy bodies and workspaces stay out by
construction. Counts accumulate per (row, test) cell while the files stream past, so memory grows with
the number of distinct cells, not with the number of cases.

Statistics (docs/aggregate.md): SKIPPED cases are counted but excluded from ``n`` and every score;
HARNESS_ERROR counts in ``n``. ``strict_pass_score`` is PASS / n with a Wilson 95% interval;
``overall_score`` is the mean of the cases' overall scores with a Wilson interval on that mean (sound
for any score bounded in [0, 1]); intervals are None when n <= 1. pass@k per cell uses the unbiased
estimator 1 - C(n-c, k) / C(n, k) with c = PASS count; a row's pass@k is the mean over its cells with
n >= k.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..models.results import STATUSES
from ..store import RunFolder, atomic_write_json, atomic_write_text, check_readable_root, read_regular
from ..store.layout import STORED_JSON_LIMIT
from ..store.runs import iter_run_dirs
from ..timeutil import utc_now_iso
from ..textsafe import safe_name
from .sanitize import Sanitizer, current_sanitizer

__all__ = ["KIND", "OUTPUT_FILES", "PASS_AT_K", "Filters", "SORT_KEYS", "aggregate_runs", "find_run_dirs",
           "pass_at_k", "render_aggregate_md", "wilson_interval", "write_aggregate"]

KIND = "gripprobe-aggregate"
"""Marks an ``aggregate.json`` as written by this module (so a later run may overwrite the folder)."""
OUTPUT_FILES = ("aggregate.json", "aggregate.md", "index.html")
PASS_AT_K = (1, 3, 5, 10)
SORT_KEYS = ("strict", "overall", "n", "name")
Z95 = 1.959963984540054
DEFAULT_TITLE = "GripProbe aggregate report"
OVERALL_BY_STATUS = {"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}
_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_SKIPPED = _STATUS_INDEX["SKIPPED"]
_PASS = _STATUS_INDEX["PASS"]
SHORT = {"PASS": "PASS", "PASS_WITH_POLICY_VIOLATION": "PWPV", "FAIL": "FAIL", "NO_TOOL_CALL": "NO_TOOL",
         "TIMEOUT": "TIMEOUT", "TOOL_UNSUPPORTED": "UNSUPPORTED", "SHELL_ERROR": "SHELL_ERR",
         "HARNESS_ERROR": "HARNESS_ERR", "SKIPPED": "SKIPPED"}


# ------------------------------------------------------------------ statistics (pure)

def wilson_interval(p_hat: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``p_hat`` observed over ``n`` trials (n >= 1)."""
    z2 = z * z
    denom = 1 + z2 / n
    center = (p_hat + z2 / (2 * n)) / denom
    half = z * math.sqrt(max(p_hat * (1 - p_hat), 0.0) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that k of the n attempts drawn without replacement hold a PASS."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _r(x: float) -> float:
    return round(x, 6)


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

    def case_ok(self, f: _Facts) -> bool:
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
class _Facts:
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


def _opt_str(obj: dict, key: str) -> str | None:
    v = obj.get(key)
    if v is None or isinstance(v, str):
        return v or None
    raise ValueError(key)


def read_facts(path: Path, hardware_default: str | None = None) -> _Facts | None:
    """The fields the aggregate needs from one ``case.json``; None when unreadable or not a case."""
    try:
        obj = json.loads(read_regular(path, STORED_JSON_LIMIT))
        key, verdict = obj["key"], obj["verdict"]
        names = [key[k] for k in ("agent", "model", "format", "test")]
        if not all(isinstance(n, str) and n for n in names):
            return None
        status = verdict["status"]
        if status not in _STATUS_INDEX:
            return None
        overall = verdict.get("overall_score")
        if isinstance(overall, bool) or not isinstance(overall, (int, float)) or not 0.0 <= overall <= 1.0:
            overall = OVERALL_BY_STATUS.get(status, 0.0)
        tags = obj.get("tags") or ()
        tags = tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()
        return _Facts(names[0], _opt_str(obj, "agent_version"), names[1], _opt_str(obj, "model_hash"), names[2],
                      names[3], _opt_str(obj, "hardware_profile") or hardware_default, tags, status, float(overall))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _case_files(run_dir: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(run_dir / "cases"))
    except OSError:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            yield Path(e.path) / "case.json"


# ------------------------------------------------------------------ aggregation

@dataclass
class _Cell:
    counts: list[int] = field(default_factory=lambda: [0] * len(STATUSES))
    overall_sum: float = 0.0

    def add(self, status: str, overall: float) -> None:
        i = _STATUS_INDEX[status]
        self.counts[i] += 1
        if i != _SKIPPED:
            self.overall_sum += overall

    @property
    def n(self) -> int:
        return sum(self.counts) - self.counts[_SKIPPED]


def _counts(counts: list[int]) -> dict[str, int]:
    return dict(zip(STATUSES, counts))


def _pass_at(n: int, c: int) -> dict[str, float]:
    return {str(k): _r(pass_at_k(n, c, k)) for k in PASS_AT_K if k <= n}


def _row(ident: tuple, cells: dict[str, _Cell]) -> dict[str, Any]:
    agent, agent_version, model, model_hash, fmt, hardware = ident
    total = [0] * len(STATUSES)
    overall_sum = 0.0
    out_cells: dict[str, Any] = {}
    per_k: dict[str, list[float]] = {}
    for test in sorted(cells):
        cell = cells[test]
        n, c = cell.n, cell.counts[_PASS]
        total = [a + b for a, b in zip(total, cell.counts)]
        overall_sum += cell.overall_sum
        pak = _pass_at(n, c)
        for k, v in pak.items():
            per_k.setdefault(k, []).append(v)
        out_cells[test] = {"n": n, "counts": _counts(cell.counts), "strict": _r(c / n) if n else 0.0,
                           "overall": _r(cell.overall_sum / n) if n else 0.0, "pass_at_k": pak}
    n = sum(total) - total[_SKIPPED]
    strict = total[_PASS] / n if n else 0.0
    overall = overall_sum / n if n else 0.0
    return {
        "agent": agent, "agent_version": agent_version, "model": model, "model_hash": model_hash, "format": fmt,
        "hardware": hardware, "n": n, "counts": _counts(total),
        "strict_pass_score": _r(strict), "strict_ci95": [_r(x) for x in wilson_interval(strict, n)] if n > 1 else None,
        "overall_score": _r(overall),
        "overall_ci95": [_r(x) for x in wilson_interval(overall, n)] if n > 1 else None,
        "pass_at_k": {k: _r(sum(v) / len(v)) for k, v in sorted(per_k.items(), key=lambda kv: int(kv[0]))},
        "cells": out_cells,
    }


def _name_key(row: dict) -> tuple:
    return tuple((row[k] or "") for k in ("agent", "agent_version", "model", "model_hash", "format", "hardware"))


def _sort_rows(rows: list[dict], sort: str) -> list[dict]:
    if sort == "name":
        return sorted(rows, key=_name_key)
    if sort == "n":
        return sorted(rows, key=lambda r: (-r["n"], _name_key(r)))
    first, second = ("overall_score", "strict_pass_score") if sort == "overall" else ("strict_pass_score",
                                                                                       "overall_score")
    return sorted(rows, key=lambda r: (-r[first], -r[second], -r["n"], _name_key(r)))


def aggregate_runs(run_dirs: Iterable[Path], *, filters: Filters | None = None, sort: str = "strict",
                   title: str = DEFAULT_TITLE, sanitizer: Sanitizer | None = None) -> dict[str, Any]:
    """The aggregate data (the shape ``render_aggregate_html`` takes; docs/aggregate.md), sanitized."""
    if sort not in SORT_KEYS:
        raise UserError(f"unknown sort {sort!r}; choose one of {', '.join(SORT_KEYS)}")
    filters = filters or Filters()
    san = sanitizer or current_sanitizer()
    name = san.name
    groups: dict[tuple, dict[str, _Cell]] = {}
    runs: list[dict[str, Any]] = []
    unreadable = 0
    for run_dir in run_dirs:
        if not filters.run_ok(run_dir.name):
            continue
        manifest = RunFolder(run_dir).read_manifest()
        hw_default = manifest.get("hardware_profile") if isinstance(manifest.get("hardware_profile"), str) else None
        used = 0
        for path in _case_files(run_dir):
            facts = read_facts(path, hw_default)
            if facts is None:
                unreadable += 1
                continue
            if not filters.case_ok(facts):
                continue
            used += 1
            ident = (name(facts.agent), _opt(name, facts.agent_version), name(facts.model),
                     _opt(name, facts.model_hash), name(facts.format), _opt(name, facts.hardware))
            cells = groups.setdefault(ident, {})
            test = name(facts.test)
            cell = cells.get(test)
            if cell is None:
                cell = cells[test] = _Cell()
            cell.add(facts.status, facts.overall)
        runs.append({"run_id": name(safe_name(run_dir.name)), "suite": _opt(name, _str_or_none(manifest.get("suite"))),
                     "started_at": _opt(name, _str_or_none(manifest.get("started_at"))), "cases": used})
    rows = _sort_rows([_row(ident, cells) for ident, cells in groups.items()], sort)
    from .. import __version__
    return {
        "kind": KIND,
        "title": san.text(title),
        "generated_at": utc_now_iso(),
        "gripprobe_version": __version__,
        "runs": runs,
        "tests": sorted({t for cells in groups.values() for t in cells}),
        "statuses": list(STATUSES),
        "rows": rows,
        "unreadable": unreadable,
        "filters": san.value(filters.as_dict()),
        "sort": sort,
    }


def _opt(fn, value: str | None) -> str | None:
    return fn(value) if value else None


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


# ------------------------------------------------------------------ markdown

def _md(v: Any) -> str:
    s = "" if v is None else str(v)
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
            .replace("\r", " ").replace("\n", " "))


def cell_text(cell: dict | None) -> str:
    """``3/4 PASS, 1 PWPV`` (— when the row never ran the test)."""
    if not cell:
        return "—"
    counts = cell["counts"]
    parts = [f"{counts.get('PASS', 0)}/{cell['n']} PASS"]
    parts += [f"{v} {SHORT.get(s, s)}" for s, v in counts.items() if s != "PASS" and v]
    return ", ".join(parts)


def _score(value: float, ci: list[float] | None) -> str:
    return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _short_hash(h: str | None) -> str:
    return "" if not h else (h if len(h) <= 19 else h[:18] + "…")


def render_aggregate_md(data: dict[str, Any]) -> str:
    """``aggregate.md``: one row per group, one column per test, then the scores."""
    tests = data["tests"]
    head = ["agent", "version", "model", "hash", "format", "hardware", "n", "strict [95% CI]",
            "overall [95% CI]", "pass@k", *tests]
    lines = [
        f"# {_md(data['title'])}", "",
        f"- generated {data['generated_at']} by gripprobe {data['gripprobe_version']} from {len(data['runs'])} "
        f"run(s), {sum(r['cases'] for r in data['runs'])} case(s); unreadable case files skipped: "
        f"{data.get('unreadable', 0)}",
        "- n excludes SKIPPED cases; intervals are Wilson 95% (none when n <= 1); "
        "pass@k is the mean over tests with n >= k",
        "- " + ", ".join(f"{SHORT[s]} = {s}" for s in STATUSES if SHORT[s] != s), "",
        "| " + " | ".join(_md(h) for h in head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in data["rows"]:
        pak = ", ".join(f"@{k} {v:.2f}" for k, v in row["pass_at_k"].items()) or "—"
        vals = [row["agent"], row["agent_version"] or "", row["model"], _short_hash(row["model_hash"]), row["format"],
                row["hardware"] or "", row["n"], _score(row["strict_pass_score"], row["strict_ci95"]),
                _score(row["overall_score"], row["overall_ci95"]), pak,
                *(cell_text(row["cells"].get(t)) for t in tests)]
        lines.append("| " + " | ".join(_md(v) for v in vals) + " |")
    if not data["rows"]:
        lines += ["", "No case matched."]
    lines += ["", "Runs: " + (", ".join(f"{_md(r['run_id'])} ({r['cases']})" for r in data["runs"]) or "none")]
    return "\n".join(lines) + "\n"


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
        if not _written_by_us(out / "aggregate.json"):
            raise UserError(f"--output {output} already holds {', '.join(present)} not written by "
                            f"aggregate-reports; pass an empty or new folder")
    return out


def _written_by_us(path: Path) -> bool:
    try:
        if path.is_symlink():
            return False
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("kind") == KIND


def write_aggregate(data: dict[str, Any], out: Path) -> list[Path]:
    """Write ``aggregate.json`` (first: it marks the folder as ours), ``aggregate.md`` and ``index.html``
    atomically into ``out`` (already checked by :func:`check_output`); nothing else is touched."""
    from .html import render_aggregate_html

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in OUTPUT_FILES]
    atomic_write_json(paths[0], data)
    atomic_write_text(paths[1], render_aggregate_md(data))
    atomic_write_text(paths[2], render_aggregate_html(data))  # mode: 0666 minus the user's umask
    return paths

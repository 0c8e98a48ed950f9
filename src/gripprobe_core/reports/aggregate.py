"""Cross-run publication report (SPEC §7 ``aggregate-reports``): many runs in, one sanitized table out.

Reading is lean: each ``case.json`` is parsed with :mod:`json` and only the handful of fields the table
needs are kept (key, versions, hash, hardware profile, tags, status, overall score); nothing else of a
case ever reaches the output, so prompts, command lines, proxy bodies and workspaces stay out by
construction. Counts accumulate per (row, test) cell while the files stream past, so memory grows with
the number of distinct cells, not with the number of cases.

Scores (docs/scores.md) come from :class:`~.scores.Scoreboard`, the same as every other report: n leaves
out TOOL_UNSUPPORTED and SKIPPED (shown as coverage), a cell gets pass@k, pass^k, a Wilson interval and a
flaky mark, a row its mean over tests with a bootstrap interval, and its usage (tokens, cost, time).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..models.results import STATUSES
from ..store import RunFolder, Stored, atomic_write_json, atomic_write_text, check_readable_root, read_regular
from ..store.files import json_kind
from ..store.layout import STORED_JSON_LIMIT
from ..store.runs import iter_run_dirs
from ..timeutil import utc_now_iso
from ..textsafe import safe_name
from .sanitize import Sanitizer, current_sanitizer
from .scores import (
    SCORES_NOTE, SHORT, Scoreboard, cell_text, coverage_text, ks_text, overall_of, score_text, usage_text)

__all__ = ["KIND", "OUTPUT_FILES", "Filters", "SORT_KEYS", "aggregate_runs", "find_run_dirs", "render_aggregate_md",
           "write_aggregate"]

KIND = "gripprobe-aggregate"
"""Marks an ``aggregate.json`` as written by this module (so a later run may overwrite the folder)."""
OUTPUT_FILES = ("aggregate.json", "aggregate.md", "index.html")
SORT_KEYS = ("strict", "overall", "n", "name")
DEFAULT_TITLE = "GripProbe aggregate report"
ROW_FIELDS = ("agent", "agent_version", "model", "model_hash", "format", "hardware")
_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}

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


def _opt_str(obj: dict, key: str) -> str | None:
    v = obj.get(key)
    if v is None or isinstance(v, str):
        return v or None
    raise ValueError(key)


def read_facts(path: Stored | Path, hardware_default: str | None = None) -> CaseFacts | None:
    """The fields the aggregate needs from one ``case.json``; None when unreadable (a link on its way
    included) or not a case."""
    try:
        obj = json.loads(path.read(STORED_JSON_LIMIT) if isinstance(path, Stored) else read_regular(path, STORED_JSON_LIMIT))
        key, verdict = obj["key"], obj["verdict"]
        names = [key[k] for k in ("agent", "model", "format", "test")]
        if not all(isinstance(n, str) and n for n in names):
            return None
        status = verdict["status"]
        if status not in _STATUS_INDEX:
            return None
        tags = obj.get("tags") or ()
        tags = tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        return CaseFacts(names[0], _opt_str(obj, "agent_version"), names[1], _opt_str(obj, "model_hash"), names[2],
                      names[3], _opt_str(obj, "hardware_profile") or hardware_default, tags, status,
                      overall_of(status, verdict.get("overall_score")), usage, _agent_seconds(obj.get("phases")),
                      _seconds(obj.get("duration_s")), _str(key.get("backend")), _trial(key.get("trial")),
                      _str(obj.get("case_id")) or Path(path.path if isinstance(path, Stored) else path).parent.name)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _trial(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1


def _seconds(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9 else None


def _agent_seconds(phases: Any) -> float | None:
    """The measured phase's process duration (what the agent took on the job)."""
    for p in phases if isinstance(phases, list) else ():
        if isinstance(p, dict) and p.get("phase") == "measured" and isinstance(p.get("process"), dict):
            return _seconds(p["process"].get("duration_s"))
    return None


def case_files(run_dir: Path) -> Iterator[Stored]:
    """Every case folder's case.json, read without following a link below the run folder."""
    run = RunFolder(run_dir)
    for name in run.case_names():
        yield run.stored_case(name) / "case.json"


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


def aggregate_runs(run_dirs: Iterable[Path], *, filters: Filters | None = None, sort: str = "strict",
                   title: str = DEFAULT_TITLE, sanitizer: Sanitizer | None = None) -> dict[str, Any]:
    """The aggregate data (the shape ``render_aggregate_html`` takes; docs/aggregate.md), sanitized."""
    if sort not in SORT_KEYS:
        raise UserError(f"unknown sort {sort!r}; choose one of {', '.join(SORT_KEYS)}")
    filters = filters or Filters()
    san = sanitizer or current_sanitizer()
    name = san.name
    board = Scoreboard(ROW_FIELDS)
    runs: list[dict[str, Any]] = []
    unreadable = 0
    for run_dir in run_dirs:
        if not filters.run_ok(run_dir.name):
            continue
        manifest = RunFolder(run_dir).read_manifest()
        hw_default = manifest.get("hardware_profile") if isinstance(manifest.get("hardware_profile"), str) else None
        used = 0
        for path in case_files(run_dir):
            facts = read_facts(path, hw_default)
            if facts is None:
                unreadable += 1
                continue
            if not filters.case_ok(facts):
                continue
            used += 1
            ident = (name(facts.agent), _opt(name, facts.agent_version), name(facts.model),
                     _opt(name, facts.model_hash), name(facts.format), _opt(name, facts.hardware))
            board.add(ident, name(facts.test), facts.status, facts.overall, usage=facts.usage,
                      agent_s=facts.agent_s, case_s=facts.case_s)
        runs.append({"run_id": name(safe_name(run_dir.name)), "suite": _opt(name, _str_or_none(manifest.get("suite"))),
                     "started_at": _opt(name, _str_or_none(manifest.get("started_at"))), "cases": used})
    rows = _sort_rows(board.rows(), sort)
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
        f"{data.get('unreadable', 0)}",
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
        if json_kind(out / "aggregate.json") != KIND:
            raise UserError(f"--output {output} already holds {', '.join(present)} not written by "
                            f"aggregate-reports; pass an empty or new folder")
    return out


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

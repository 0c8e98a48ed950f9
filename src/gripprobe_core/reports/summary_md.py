"""``reports/summary.md``: one row per case, the same columns and rows as ``reports/summary.html``.

``summary_row`` is the single definition of a case row and ``score_row_cells`` of a score row (agent ×
model × backend × format, from :mod:`.scores`); the HTML summary renders the same tuples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..models.statuses import STATUSES
from .scores import OUT_OF_N, SCORES_NOTE, Scoreboard, Spend, cell_text, coverage_text, ks_text, score_text, usage_text
from ..store import RunFolder, atomic_write_text
from ..store.runs import manifest_status
from ..textsafe import safe_cell, safe_name

if TYPE_CHECKING:  # annotations only: the models (pydantic) load where a result is parsed
    from ..models.results import CaseResult
    from .html import KeptPages

COLUMNS = ("agent", "model", "format", "test", "trial", "status", "reason", "trajectory", "invoked", "strict", "overall",
           "tier", "tokens", "cost", "agent s", "case s")
ROW_FIELDS = ("agent", "model", "backend", "format")
"""What a score row of one run is: the cell without its test."""


def _cell(v: object) -> str:
    """One Markdown cell: on one line, its control characters escaped (``safe_cell``), ``|`` kept literal."""
    return safe_cell(v).replace("|", "\\|")


def _planned(manifest: dict) -> int:
    planned = manifest.get("planned")
    return len(planned) if isinstance(planned, list) else 0


def _agent_seconds(r: CaseResult) -> float | None:
    measured = [p for p in r.phases if p.phase == "measured"]
    return measured[0].process.duration_s if measured else None


def _tokens(r: CaseResult) -> str:
    u = r.usage
    if u is None or (u.prompt_tokens is None and u.completion_tokens is None):
        return "-"
    return str(u.total_tokens if u.total_tokens is not None else (u.prompt_tokens or 0) + (u.completion_tokens or 0))


def summary_row(r: CaseResult) -> tuple[str, ...]:
    """The cells of one case's row, in ``COLUMNS`` order, as displayed."""
    v = r.verdict
    agent_s = _agent_seconds(r)
    cost = r.usage.cost if r.usage is not None else None
    return (r.key.agent, r.key.model, r.key.format, r.key.test, str(r.key.trial), v.status, v.evaluator_reason_code,
            v.trajectory, v.invoked, f"{v.strict_pass_score:.1f}", f"{v.overall_score:.1f}",
            r.telemetry.telemetry_source_tier, _tokens(r), "-" if cost is None else f"{cost:.4f}",
            "-" if agent_s is None else f"{agent_s:.2f}", f"{r.duration_s:.2f}")


def attempted(r: CaseResult) -> bool:
    """Does the case count in n (not TOOL_UNSUPPORTED, not SKIPPED, not answered by an operator)?"""
    return r.verdict.status not in OUT_OF_N and not excluded(r)


def excluded(r: CaseResult) -> bool:
    """A ``manual`` interaction case: the operator's answers are not reproducible, so it is left out of every
    score and aggregate (listed among the cases, marked)."""
    return r.interaction is not None and r.interaction.excluded_from_scores


def run_totals(results: Sequence[CaseResult]) -> dict:
    """Case count, attempted count (``n``), counts per status (``STATUSES`` order, non-zero only), mean strict
    and overall score over the attempted cases, and the run's usage summed."""
    counts = Counter(r.verdict.status for r in results)
    tried = [r for r in results if attempted(r)]
    n = len(tried)
    spend = Spend()
    for r in results:
        spend.add(r.usage.model_dump() if r.usage is not None else None, agent_s=_agent_seconds(r),
                  case_s=r.duration_s)
    return {
        "cases": len(results), "n": n,
        "counts": {s: counts[s] for s in (*STATUSES, *sorted(set(counts) - set(STATUSES))) if counts[s]},
        "strict": sum(r.verdict.strict_pass_score for r in tried) / n if n else None,
        "overall": sum(r.verdict.overall_score for r in tried) / n if n else None,
        "usage": spend.as_dict(),
    }


def run_scores(results: Iterable[CaseResult]) -> dict:
    """The run's score rows (agent × model × backend × format, tests as cells; docs/scores.md) and tests."""
    board = Scoreboard(ROW_FIELDS)
    manual = 0
    for r in results:
        if excluded(r):
            manual += 1
            continue
        k = r.key
        board.add((k.agent, k.model, k.backend, k.format), k.test, r.verdict.status, r.verdict.overall_score,
                  usage=r.usage.model_dump() if r.usage is not None else None, agent_s=_agent_seconds(r),
                  case_s=r.duration_s)
    rows = sorted(board.rows(), key=lambda row: tuple(row[f] for f in ROW_FIELDS))
    return {"rows": rows, "tests": board.tests(), "trials": max((row["trials"] for row in rows), default=0),
            "excluded": {"manual": manual}}


def score_row_cells(row: dict) -> tuple[str, ...]:
    """A score row as displayed, in ``SCORE_COLUMNS`` order."""
    return (row["agent"], row["model"], row["backend"], row["format"], coverage_text(row), str(row["n"]),
            score_text(row["strict_pass_score"], row["strict_ci95"]),
            score_text(row["overall_score"], row["overall_ci95"]), ks_text(row["pass_at_k"]),
            ks_text(row["pass_hat_k"], "^"), ", ".join(row["flaky"]), usage_text(row["usage"]))


SCORE_COLUMNS = ("agent", "model", "backend", "format", "coverage", "n", "strict [95% CI]", "overall [95% CI]",
                 "pass@k", "pass^k", "flaky", "usage")


def render_summary_md(run_id: str, manifest: dict, results: list[CaseResult], unfinished: Iterable[str] = ()) -> str:
    """The Markdown summary. ``unfinished``: case directories without a readable case.json."""
    totals = run_totals(results)
    scores = run_scores(results)
    trials = scores["trials"]
    lines = [
        f"# GripProbe run {_cell(safe_name(run_id))}", "",
        f"- status: {manifest_status(manifest)}; cases: {totals['cases']} of {_planned(manifest) or totals['cases']}"
        + (f" ({trials} trials per cell)" if trials > 1 else ""),
        f"- strict_pass_score: {score_text(totals['strict'])}; overall_score: {score_text(totals['overall'])} "
        f"(over n = {totals['n']} attempted cases)",
        "- " + ", ".join(f"{k}: {v}" for k, v in sorted(totals["counts"].items())),
        f"- usage: {usage_text(totals['usage'])}",
        *([f"- left out of scores: {scores['excluded']['manual']} case(s) answered by an operator (interaction "
            f"policy manual; docs/interaction.md)"] if scores["excluded"]["manual"] else []),
        "", "## Scores", "",
        SCORES_NOTE + ".", "",
        "| " + " | ".join(SCORE_COLUMNS) + " |",
        "|" + "---|" * len(SCORE_COLUMNS),
    ]
    lines += ["| " + " | ".join(_cell(c) for c in score_row_cells(row)) + " |" for row in scores["rows"]]
    if trials > 1:
        tests = scores["tests"]
        lines += ["", "## Cells", "", "| agent | model | format | " + " | ".join(_cell(t) for t in tests) + " |",
                  "|" + "---|" * (3 + len(tests))]
        for row in scores["rows"]:
            lines.append("| " + " | ".join(_cell(c) for c in (row["agent"], row["model"], row["format"],
                                                               *(cell_text(row["cells"].get(t)) for t in tests)))
                         + " |")
    lines += ["", "## Cases", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    status_col = COLUMNS.index("status")
    for r in results:
        cells = list(summary_row(r))
        if r.sandbox == "none":  # the agent could reach the harness's files: say so beside its status
            cells[status_col] += " (unsandboxed)"
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    unsandboxed = sum(1 for r in results if r.sandbox == "none")
    if unsandboxed:
        lines += ["", f"{unsandboxed} case(s) ran unsandboxed (no bubblewrap): see docs/sandbox.md."]
    unfinished = list(unfinished)
    if unfinished:
        lines += ["", "Cases without a readable case.json (unfinished or corrupt):", ""]
        lines += [f"- {_cell(safe_name(c))}" for c in unfinished]
    return "\n".join(lines) + "\n"


def write_run_reports(run_dir: RunFolder, pages: "KeptPages | None" = None) -> list[Path]:
    """Write ``reports/summary.md``, ``reports/summary.html`` and ``reports/cases/<case_id>.html``.

    The single entry point, called at the end of every run. Returns the paths written, summary.md first
    (the run's seal covers exactly these); the Markdown is written first, so a failure while rendering
    HTML never costs the Markdown summary. ``pages``: case pages the run rendered as its cases ended
    (:class:`~gripprobe_core.runner.case_pages.CasePages`).
    """
    from .html import render_run_html

    _real_folders(run_dir)
    manifest, entries = run_dir.read_manifest(), run_dir.case_entries()
    out = run_dir.reports / "summary.md"
    atomic_write_text(out, render_summary_md(run_dir.run_id, manifest, [r for _, r in entries if r is not None],
                                             [name for name, r in entries if r is None]), sync=False)
    return [out, *render_run_html(run_dir, manifest=manifest, entries=entries, pages=pages)]


def _real_folders(run_dir: RunFolder) -> None:
    """``reports/`` and ``reports/cases/`` as real folders of the run (made when missing): reports are never
    written through a link planted there. Anything else in their place is one line, exit 2."""
    import os
    import stat

    from ..store import ResultsPathError
    from ..store.files import kind_of

    for folder in (run_dir.reports, run_dir.reports / "cases"):
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            folder.mkdir(parents=True, exist_ok=True)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise ResultsPathError(f"{safe_name(run_dir.path)}: {safe_name(folder)} is a {kind_of(st.st_mode)}, not a "
                                   f"folder; reports are never written through it: move it away")

"""``reports/summary.md``: one row per case, the same columns and rows as ``reports/summary.html``.

``summary_row`` is the single definition of a table row; the HTML summary renders the same tuples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..models.results import STATUSES, CaseResult
from ..store import RunFolder, atomic_write_text
from ..store.runs import manifest_status
from ..textsafe import safe_name

COLUMNS = ("agent", "model", "format", "test", "status", "reason", "trajectory", "invoked", "strict", "overall",
           "tier", "agent s", "case s")


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _planned(manifest: dict) -> int:
    planned = manifest.get("planned")
    return len(planned) if isinstance(planned, list) else 0


def _agent_seconds(r: CaseResult) -> str:
    measured = [p for p in r.phases if p.phase == "measured"]
    return f"{measured[0].process.duration_s:.2f}" if measured else "-"


def summary_row(r: CaseResult) -> tuple[str, ...]:
    """The cells of one case's row, in ``COLUMNS`` order, as displayed."""
    v = r.verdict
    return (r.key.agent, r.key.model, r.key.format, r.key.test, v.status, v.evaluator_reason_code,
            v.trajectory, v.invoked, f"{v.strict_pass_score:.1f}", f"{v.overall_score:.1f}",
            r.telemetry.telemetry_source_tier, _agent_seconds(r), f"{r.duration_s:.2f}")


def run_totals(results: Sequence[CaseResult]) -> dict:
    """Case count, counts per status (``STATUSES`` order, non-zero only), mean strict and overall score."""
    counts = Counter(r.verdict.status for r in results)
    n = len(results)
    return {
        "n": n,
        "counts": {s: counts[s] for s in (*STATUSES, *sorted(set(counts) - set(STATUSES))) if counts[s]},
        "strict": sum(r.verdict.strict_pass_score for r in results) / n if n else 0.0,
        "overall": sum(r.verdict.overall_score for r in results) / n if n else 0.0,
    }


def render_summary_md(run_id: str, manifest: dict, results: list[CaseResult], unfinished: Iterable[str] = ()) -> str:
    """The Markdown summary. ``unfinished``: case directories without a readable case.json."""
    totals = run_totals(results)
    n = totals["n"]
    lines = [
        f"# GripProbe run {_cell(safe_name(run_id))}", "",
        f"- status: {manifest_status(manifest)}; cases: {n} of {_planned(manifest) or n}",
        f"- strict_pass_score: {totals['strict']:.3f}; overall_score: {totals['overall']:.3f}",
        "- " + ", ".join(f"{k}: {v}" for k, v in sorted(totals["counts"].items())), "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
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


def write_run_reports(run_dir: RunFolder) -> Path:
    """Write ``reports/summary.md``, ``reports/summary.html`` and ``reports/cases/<case_id>.html``.

    The single entry point, called at the end of every run. Returns the path of summary.md; the
    Markdown is written first, so a failure while rendering HTML never costs the Markdown summary.
    """
    from .html import render_run_html

    manifest, entries = run_dir.read_manifest(), run_dir.case_entries()
    out = run_dir.reports / "summary.md"
    atomic_write_text(out, render_summary_md(run_dir.run_id, manifest, [r for _, r in entries if r is not None],
                                             [name for name, r in entries if r is None]), sync=False)
    render_run_html(run_dir, manifest=manifest, entries=entries)
    return out

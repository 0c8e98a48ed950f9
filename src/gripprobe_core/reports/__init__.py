"""Per-run reports (SPEC §7): ``reports/summary.md``, ``reports/summary.html`` and a page per case, plus the
cross-run aggregate page and the comparison of two runs. ``write_run_reports`` is the single entry point a
run calls; scores come from :mod:`.scores`; see docs/reports.md and docs/scores.md."""

from .html import render_aggregate_html, render_case_html, render_compare_html, render_run_html, render_summary_html
from .summary_md import COLUMNS, SCORE_COLUMNS, render_summary_md, summary_row, write_run_reports

__all__ = ["COLUMNS", "SCORE_COLUMNS", "render_aggregate_html", "render_case_html", "render_compare_html",
           "render_run_html", "render_summary_html", "render_summary_md", "summary_row", "write_run_reports"]

"""Per-run reports (SPEC §7): ``reports/summary.md`` (HTML pages come with the reports issue)."""

from .summary_md import render_summary_md, write_run_reports

__all__ = ["render_summary_md", "write_run_reports"]

"""``reports/summary.md``: one row per case, the same columns the HTML summary will carry."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..models.results import CaseResult
from ..store import RunDir, atomic_write_text

COLUMNS = ("agent", "model", "format", "test", "status", "reason", "trajectory", "invoked", "strict", "overall",
           "tier", "agent s", "case s")


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _agent_seconds(r: CaseResult) -> str:
    measured = [p for p in r.phases if p.phase == "measured"]
    return f"{measured[0].process.duration_s:.2f}" if measured else "-"


def render_summary_md(run_id: str, manifest: dict, results: list[CaseResult]) -> str:
    counts = Counter(r.verdict.status for r in results)
    n = len(results)
    strict = sum(r.verdict.strict_pass_score for r in results) / n if n else 0.0
    overall = sum(r.verdict.overall_score for r in results) / n if n else 0.0
    lines = [
        f"# GripProbe run {run_id}", "",
        f"- status: {manifest.get('status', 'unknown')}; cases: {n} of {len(manifest.get('planned', [])) or n}",
        f"- strict_pass_score: {strict:.3f}; overall_score: {overall:.3f}",
        "- " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in results:
        v = r.verdict
        row = (r.key.agent, r.key.model, r.key.format, r.key.test, v.status, v.evaluator_reason_code,
               v.trajectory, v.invoked, f"{v.strict_pass_score:.1f}", f"{v.overall_score:.1f}",
               r.telemetry.telemetry_source_tier, _agent_seconds(r), f"{r.duration_s:.2f}")
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def write_run_reports(run_dir: RunDir) -> Path:
    try:
        manifest = json.loads(run_dir.manifest.read_text())
    except (OSError, ValueError):
        manifest = {}
    out = run_dir.reports / "summary.md"
    atomic_write_text(out, render_summary_md(run_dir.run_id, manifest, run_dir.case_results()))
    return out

"""Progress while a run goes: a rich progress bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import Any

from ..models.results import CaseResult


class PlainReporter:
    def __init__(self, total: int, stream: Any = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr

    def __enter__(self) -> "PlainReporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def case_done(self, r: CaseResult) -> None:
        self.done += 1
        k = r.key
        print(f"[{self.done}/{self.total}] {k.agent} {k.model} {k.format} {k.test}: {r.verdict.status} "
              f"({r.verdict.evaluator_reason_code}, {r.duration_s:.1f}s)", file=self.stream, flush=True)

    def final(self, outcome: Any) -> None:
        counts = ", ".join(f"{k} {v}" for k, v in outcome.counts.items())
        state = "interrupted" if outcome.interrupted else "done"
        print(f"{state}: {len(outcome.results)} case(s) in {outcome.duration_s:.1f}s: {counts}",
              file=self.stream, flush=True)
        print(f"report: {outcome.run_dir.reports / 'summary.html'} (and summary.md)", file=self.stream, flush=True)


class RichReporter(PlainReporter):
    def __init__(self, total: int) -> None:
        super().__init__(total)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]gripprobe"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.description}"), console=self.console,
                                 transient=False)
        self.task = self.progress.add_task("", total=total)

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def case_done(self, r: CaseResult) -> None:
        self.done += 1
        colour = {"PASS": "green", "PASS_WITH_POLICY_VIOLATION": "yellow"}.get(r.verdict.status, "red")
        self.progress.console.print(f"{r.key.agent} {r.key.model} {r.key.format} {r.key.test}: "
                                    f"[{colour}]{r.verdict.status}[/{colour}] ({r.verdict.evaluator_reason_code})")
        self.progress.update(self.task, advance=1, description=r.key.test)

    def final(self, outcome: Any) -> None:
        from rich.table import Table
        table = Table(title=f"run {outcome.run_dir.run_id}")
        for col in ("status", "cases"):
            table.add_column(col)
        for k, v in outcome.counts.items():
            table.add_row(k, str(v))
        self.console.print(table)
        super().final(outcome)


def make_reporter(total: int) -> PlainReporter:
    return RichReporter(total) if sys.stderr.isatty() else PlainReporter(total)

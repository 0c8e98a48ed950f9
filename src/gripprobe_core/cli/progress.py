"""Progress while a run goes: a rich progress bar on a terminal, plain lines otherwise.

Every value shown passes through ``safe_text`` (and rich markup escaping), so a name or reason holding
terminal escape sequences cannot reach the terminal."""

from __future__ import annotations

import sys
from typing import Any

from ..models.results import CaseResult
from ..textsafe import safe_name, safe_text


def case_line(r: CaseResult) -> tuple[str, str, str]:
    """(key, status, reason) of a finished case as safe display text."""
    k = r.key
    trial = f" (trial {k.trial})" if k.trial > 1 else ""
    return (safe_text(f"{k.agent} {k.model} {k.format} {k.test}{trial}"), safe_text(r.verdict.status),
            safe_text(r.verdict.evaluator_reason_code))


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
        key, status, reason = case_line(r)
        print(f"[{self.done}/{self.total}] {key}: {status} ({reason}, {r.duration_s:.1f}s)", file=self.stream,
              flush=True)

    def final(self, outcome: Any) -> None:
        counts = safe_text(", ".join(f"{k} {v}" for k, v in outcome.counts.items()))
        state = f"interrupted ({outcome.signal_name})" if outcome.interrupted else "done"
        print(f"{state}: {len(outcome.results)} case(s) in {outcome.duration_s:.1f}s: {counts}",
              file=self.stream, flush=True)
        print(f"report: {safe_name(outcome.run_dir.reports / 'summary.html')} (and summary.md)", file=self.stream,
              flush=True)


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
        from rich.markup import escape

        self.done += 1
        key, status, reason = (escape(x) for x in case_line(r))
        colour = {"PASS": "green", "PASS_WITH_POLICY_VIOLATION": "yellow"}.get(r.verdict.status, "red")
        self.progress.console.print(f"{key}: [{colour}]{status}[/{colour}] ({reason})")
        self.progress.update(self.task, advance=1, description=escape(safe_text(r.key.test)))

    def final(self, outcome: Any) -> None:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=Text(f"run {safe_name(outcome.run_dir.run_id)}"))
        for col in ("status", "cases"):
            table.add_column(col)
        for k, v in outcome.counts.items():
            table.add_row(Text(safe_text(k)), str(v))
        self.console.print(table)
        super().final(outcome)


def make_reporter(total: int) -> PlainReporter:
    return RichReporter(total) if sys.stderr.isatty() else PlainReporter(total)

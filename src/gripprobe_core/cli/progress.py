"""Progress while a run goes: a rich progress bar on a terminal, plain lines otherwise.

Every value shown passes through ``safe_text`` (and rich markup escaping), so a name or reason holding
terminal escape sequences cannot reach the terminal."""

from __future__ import annotations

import sys
from typing import Any

from ..models.results import CaseResult
from ..textsafe import safe_name, safe_text


def case_reason(r: CaseResult) -> str | None:
    """Why a finished case got its status, as a progress line shows it: the verdict's ``failure_reason``
    (``protocol_malformed``, ``tool_retry_loop`` …), a skipped case's reason, else None (a PASS: nothing
    to say). The tool-event reason code (``none`` on most cases) is the case page's, not the line's."""
    v = r.verdict
    if v.failure_reason and v.failure_reason != "none":
        return v.failure_reason
    if v.status == "SKIPPED" and r.skip_reason:
        return r.skip_reason
    return None


def case_line(r: CaseResult) -> tuple[str, str, str | None]:
    """(key, status, reason or None) of a finished case as safe display text."""
    k = r.key
    trial = f" (trial {k.trial})" if k.trial > 1 else ""
    reason = case_reason(r)
    return (safe_text(f"{k.agent} {k.model} {k.format} {k.test}{trial}"), safe_text(r.verdict.status),
            safe_text(reason) if reason is not None else None)


def _detail(reason: str | None, duration_s: float) -> str:
    """``(reason, 1.2s)``, or ``(1.2s)`` when there is no reason."""
    return f"({reason}, {duration_s:.1f}s)" if reason else f"({duration_s:.1f}s)"


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
        print(f"[{self.done}/{self.total}] {key}: {status} {_detail(reason, r.duration_s)}", file=self.stream,
              flush=True)

    def final(self, outcome: Any) -> None:
        counts = safe_text(", ".join(f"{k} {v}" for k, v in outcome.counts.items()))
        state = f"interrupted ({outcome.signal_name})" if outcome.interrupted else "done"
        print(f"{state}: {len(outcome.results)} case(s) in {outcome.duration_s:.1f}s: {counts}",
              file=self.stream, flush=True)
        print(f"report: {safe_name(outcome.run_dir.reports / 'summary.html')} (and summary.md)", file=self.stream,
              flush=True)


class RichReporter(PlainReporter):
    def __init__(self, total: int, console: Any = None) -> None:
        super().__init__(total)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.console = console or Console(stderr=True)
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
        key, status, reason = case_line(r)
        colour = {"PASS": "green", "PASS_WITH_POLICY_VIOLATION": "yellow"}.get(r.verdict.status, "red")
        detail = escape(_detail(reason, r.duration_s))
        self.progress.console.print(f"{escape(key)}: [{colour}]{escape(status)}[/{colour}] {detail}")
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


# ------------------------------------------------------------------------------------- agent installs

def _shown(line: str, width: int = 100) -> str:
    """An output line of pip or npm as one safe line of at most ``width`` characters."""
    text = safe_name(line.strip())  # every control character escaped, newline and tab too
    return text if len(text) <= width else text[:width - 1] + "…"


class PlainInstallProgress:
    """Installs reported in plain lines (not a terminal: CI, a pipe, a log file): what is installed, then
    every ``interval`` seconds the time so far and the last line pip or npm printed, then the total time.
    Nothing but whole lines of printable text (no spinner, no carriage return, no colour)."""

    def __init__(self, stream: Any = None, interval: float = 10.0) -> None:
        self.stream, self.interval = stream, interval
        self.agent, self.t0, self.next_at, self.last, self.what = "", 0.0, 0.0, "", ""

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stderr, flush=True)

    def start(self, agent: str, recipe: Any, directory: Any) -> None:
        import time

        self.agent, self.t0 = safe_text(agent), time.monotonic()
        self.next_at = self.t0 + self.interval
        self._print(f"installing {self.agent}: {safe_text(recipe.kind)} {safe_text(recipe.package)} "
                    f"{safe_text(recipe.version)} into {safe_name(directory)}")

    def step(self, text: str) -> None:
        self.what, self.last = _shown(text), ""
        self._print(f"installing {self.agent}: {self.what} ({self.elapsed():.0f}s)")

    def output(self, line: str) -> None:
        self.last = _shown(line)

    def elapsed(self) -> float:
        import time

        return time.monotonic() - self.t0

    def tick(self) -> None:
        import time

        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.interval
        self._print(f"installing {self.agent}: {self.elapsed():.0f}s, {self.what}"
                    + (f": {self.last}" if self.last else ""))

    def finish(self, installed: Any, error: BaseException | None = None) -> None:
        if installed is not None:
            self._print(f"installed {self.agent} {safe_text(installed.version)} in {self.elapsed():.1f}s")
        elif not isinstance(error, KeyboardInterrupt):
            self._print(f"installing {self.agent} failed after {self.elapsed():.1f}s")


class RichInstallProgress(PlainInstallProgress):
    """Installs reported on a terminal: a spinner with the step, the time so far and pip's or npm's last
    line, redrawn in place (transient), then one line with the total time."""

    def __init__(self, console: Any = None) -> None:
        super().__init__()
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.progress: Any = None
        self.task: Any = None

    def _print(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text))  # Text: a "[" from pip is not rich markup

    def start(self, agent: str, recipe: Any, directory: Any) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        super().start(agent, recipe, directory)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.fields[what]}", markup=False),
                                 TimeElapsedColumn(), TextColumn("{task.fields[last]}", markup=False, style="dim"),
                                 console=self.console, transient=True)
        self.task = self.progress.add_task("install", total=None, what=f"installing {self.agent}", last="")
        self.progress.start()

    def step(self, text: str) -> None:
        self.what, self.last = _shown(text), ""
        self.progress.update(self.task, what=f"installing {self.agent}: {self.what}", last="")

    def output(self, line: str) -> None:
        super().output(line)
        self.progress.update(self.task, last=self.last)

    def tick(self) -> None:
        return None  # rich redraws the spinner and the time on its own

    def finish(self, installed: Any, error: BaseException | None = None) -> None:
        if self.progress is not None:
            self.progress.stop()
        super().finish(installed, error)


def make_install_progress() -> PlainInstallProgress:
    """A spinner on a terminal, plain periodic lines otherwise (both on stderr)."""
    return RichInstallProgress() if sys.stderr.isatty() else PlainInstallProgress()

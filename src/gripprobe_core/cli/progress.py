"""Progress while a run goes: a rich progress bar on a terminal, plain lines otherwise.

Every value shown passes through ``safe_text`` (and rich markup escaping), so a name or reason holding
terminal escape sequences cannot reach the terminal."""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from ..models.results import CaseResult
from ..runner.live import CaseEvent, OpenCalls, RecordTally
from ..textsafe import safe_name, safe_text

log = logging.getLogger(__name__)


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
    reason = case_reason(r)
    return key_text(r.key), safe_text(r.verdict.status), safe_text(reason) if reason is not None else None


def _detail(reason: str | None, duration_s: float) -> str:
    """``(reason, 1.2s)``, or ``(1.2s)`` when there is no reason."""
    return f"({reason}, {duration_s:.1f}s)" if reason else f"({duration_s:.1f}s)"


# ------------------------------------------------------------------------------- running cases

INTERVAL_VAR = "GRIPPROBE_PROGRESS_INTERVAL"
"""Seconds between two plain "still running" lines of one case (not on a terminal); default 30."""
DEFAULT_INTERVAL_S, INTERVAL_RANGE = 30.0, (1.0, 3600.0)


def progress_interval(env: Mapping[str, str] | None = None) -> float:
    """:data:`INTERVAL_VAR` in seconds (default 30); a value that is not a number from 1 to 3600 is a
    one-line :class:`~gripprobe_core.errors.UserError`."""
    from ..errors import UserError

    raw = (os.environ if env is None else env).get(INTERVAL_VAR, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    low, high = INTERVAL_RANGE
    if not low <= value <= high:  # NaN too
        raise UserError(f"{INTERVAL_VAR}={safe_name(raw[:40])}: not a number of seconds from {low:.0f} to "
                        f"{high:.0f} (the time between two 'still running' lines of a case)")
    return value


def elapsed_text(seconds: float) -> str:
    """A duration as a running case's line shows it: ``45s``, ``2m30s``, ``1h02m05s`` (whole seconds, cut
    down)."""
    s = max(0, int(seconds)) if math.isfinite(seconds) else 0
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def live_detail(phase: str, elapsed_s: float, calls: int | None = None, tool_calls: int = 0,
                since_reply_s: float | None = None, open_calls: int = 0, open_s: float | None = None,
                output_s: float | None = None) -> str:
    """What a running case's line says after its key: the time since it started, its phase, and (when a
    proxy records the phase: ``calls`` not None) the phase's model calls and tool calls so far and the time
    since the model's last reply ended, e.g. ``2m30s, measured, 3 model calls, 1 tool call, last reply 12s
    ago``; ``no model call yet`` before the first call's record. A call the proxy has open (``open_calls``,
    the oldest open ``open_s``, its last output ``output_s`` ago) takes the place of the last reply:
    ``model call open 2m10s (no output yet)``, ``model call open 2m40s, last output 1s ago``. Safe display
    text."""
    parts = [elapsed_text(elapsed_s), safe_text(phase)]
    if calls is not None and calls > 0:
        parts += [_count(calls, "model call"), _count(tool_calls, "tool call")]
    if open_calls > 0:
        age = "" if open_s is None else f" {elapsed_text(open_s)}"
        parts.append(f"model call open{age}" if open_calls == 1 else
                     f"{open_calls} model calls open" + (f", oldest{age}" if age else ""))
        if output_s is None:
            parts[-1] += " (no output yet)"
        else:
            parts.append(f"last output {elapsed_text(output_s)} ago")
    elif calls == 0:
        parts.append("no model call yet")
    elif calls is not None and since_reply_s is not None:
        parts.append(f"last reply {elapsed_text(since_reply_s)} ago")
    return ", ".join(parts)


def key_text(key: Any) -> str:
    """A case key as every progress line shows it: ``agent model format test`` and `` (trial N)`` past
    the first trial. Safe display text."""
    trial = f" (trial {key.trial})" if key.trial > 1 else ""
    return safe_text(f"{key.agent} {key.model} {key.format} {key.test}{trial}")


@dataclass
class RunningCase:
    """A case whose first agent has started and whose finished line is not printed yet."""

    case_id: str
    key: str
    """Safe display text (:func:`key_text`)."""
    started: float
    phase: str
    tally: RecordTally
    calls: OpenCalls
    """The calls its phase's proxy has open (nothing when it cannot tell, and while judging)."""
    next_note: float = 0.0
    """When its next plain "still running" line is due (``time.monotonic()``)."""

    def look(self, now: float | None = None) -> None:
        """Read what the running phase did since the last look (the display's thread, off the event loop):
        the open calls first, so a call ending in between is not missed by both (its record comes a moment
        after it ends)."""
        self.calls.look(now)
        self.tally.look(now)

    def detail(self, now: float | None = None, wall: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        t = self.tally
        since = None if t.last_reply_at is None else max(0.0, wall - t.last_reply_at)
        open_s, output_s = self.calls.ages(now)
        return live_detail(self.phase, now - self.started, t.model_calls if t.recorded else None, t.tool_calls,
                           since, self.calls.open, open_s, output_s)


class PlainReporter:
    """Progress in plain lines (not a terminal: CI, a pipe, a log file): ``started <key>: <phase>`` when a
    case's first agent starts, ``still running <key>: ...`` every ``interval`` seconds while it runs, and
    ``[done/total] <key>: STATUS (reason, time)`` when it ends. Whole lines of printable text only."""

    def __init__(self, total: int, stream: Any = None, interval: float = DEFAULT_INTERVAL_S) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.interval = interval
        self.running: dict[str, RunningCase] = {}
        self._lock = threading.Lock()
        """Held to change :attr:`running` and to print: no line of a case after its finished line."""
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> "PlainReporter":
        self._ticker = threading.Thread(target=self._tick_loop, name="gripprobe-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(5.0)
        with self._lock:
            self.running.clear()

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def case_event(self, ev: CaseEvent) -> None:
        """A running case entered a phase (the runner's event, on its event loop: nothing here waits)."""
        with self._lock:
            case = self.running.get(ev.case_id)
            if case is None:
                if ev.phase == "judging":
                    return  # no agent ran (the phase could not start): only its finished line
                case = self.running[ev.case_id] = RunningCase(ev.case_id, key_text(ev.key), ev.at, ev.phase,
                                                              RecordTally(ev.record), OpenCalls(ev.activity),
                                                              ev.at + self.interval)
                self.started(case)
                return
            case.phase = ev.phase
            case.calls = OpenCalls(ev.activity)  # judging: none (no proxy)
            if ev.phase != "judging":  # judging: the measured phase's counts stay on its line
                case.tally = RecordTally(ev.record)

    def started(self, case: RunningCase) -> None:
        self._print(f"started {case.key}: {safe_text(case.phase)}")

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._tick_s()):
            try:
                self.tick()
            except Exception:  # the display never stops the run
                log.exception("progress display")

    def _tick_s(self) -> float:
        return min(1.0, self.interval / 4)  # a line is at most a quarter interval late

    def tick(self, now: float | None = None) -> None:
        """Print the "still running" line of every case due for one (its tallies read off the event loop)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [c for c in self.running.values() if c.next_note <= now]
        for c in due:
            c.look(now)
        with self._lock:
            for c in due:
                if self.running.get(c.case_id) is c:
                    c.next_note = now + self.interval
                    self._print(f"still running {c.key}: {c.detail(now)}")

    def case_done(self, r: CaseResult) -> None:
        with self._lock:
            self.running.pop(r.case_id, None)
            self.done += 1
            key, status, reason = case_line(r)
            self._print(f"[{self.done}/{self.total}] {key}: {status} {_detail(reason, r.duration_s)}")

    def final(self, outcome: Any) -> None:
        counts = safe_text(", ".join(f"{k} {v}" for k, v in outcome.counts.items()))
        state = f"interrupted ({outcome.signal_name})" if outcome.interrupted else "done"
        print(f"{state}: {len(outcome.results)} case(s) in {outcome.duration_s:.1f}s: {counts}",
              file=self.stream, flush=True)
        print(f"report: {safe_name(outcome.run_dir.reports / 'summary.html')} (and summary.md)", file=self.stream,
              flush=True)


class RichReporter(PlainReporter):
    """Progress on a terminal: the bar, and below it a line per running case redrawn in place (its key,
    time, phase, model and tool calls, time since the last reply or the open call's age), gone when its
    finished line is printed."""

    def __init__(self, total: int, console: Any = None) -> None:
        super().__init__(total)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        reporter = self

        class LiveProgress(Progress):
            def get_renderables(self) -> Any:
                yield from super().get_renderables()
                yield from reporter.live_lines()

        self.console = console or Console(stderr=True)
        self.progress = LiveProgress(TextColumn("[bold]gripprobe"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("{task.description}"), console=self.console,
                                     transient=False)
        self.task = self.progress.add_task("", total=total)

    def __enter__(self) -> "RichReporter":
        super().__enter__()
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)  # no running case's line stays on the screen
        self.progress.stop()

    def _print(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text))

    def started(self, case: RunningCase) -> None:
        return None  # its line below the bar says so

    def _tick_s(self) -> float:
        return 1.0

    def tick(self, now: float | None = None) -> None:
        """Read the running phases' records (off the event loop); rich redraws the lines on its own."""
        with self._lock:
            cases = list(self.running.values())
        for c in cases:
            c.look(now)

    def live_lines(self) -> list[Any]:
        """A line per running case (rendered by rich's refresh, or as a finished line is printed: only
        what is in memory, nothing read here)."""
        from rich.text import Text

        with self._lock:
            cases = sorted(self.running.values(), key=lambda c: (c.started, c.case_id))
        now, wall = time.monotonic(), time.time()
        return [Text(f"  {c.key}: {c.detail(now, wall)}", style="dim", no_wrap=True, overflow="ellipsis")
                for c in cases]

    def case_done(self, r: CaseResult) -> None:
        from rich.markup import escape

        with self._lock:
            self.running.pop(r.case_id, None)
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
    """The bar and live lines on a terminal, plain lines otherwise (both on stderr); a bad
    :data:`INTERVAL_VAR` is a one-line UserError."""
    interval = progress_interval()
    return RichReporter(total) if sys.stderr.isatty() else PlainReporter(total, interval=interval)


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

"""The event loop a run uses: uvloop when it is installed (a core dependency on Linux and macOS), else
asyncio's own. ``GRIPPROBE_EVENT_LOOP=asyncio`` forces asyncio's.

Why: the recording proxy relays on the runner's loop, and its added latency per request is mostly the
event loop's and aiohttp's own work; uvloop cut the relay's p50 added latency by about 10 % in
benchmarks/proxy_latency.py (docs/proxy.md). Nothing else depends on which loop runs.

:class:`StopSignals` makes SIGTERM stop a run the way Ctrl-C does: the running coroutine is cancelled
(its agents' process groups are killed on the way out) and :class:`Terminated` is raised, so the caller
writes its "incomplete" manifest exactly as after a KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default) when it is missing or switched off."""
    if os.environ.get("GRIPPROBE_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Awaitable[T]) -> T:
    """Like :func:`asyncio.run` (same Ctrl-C handling), on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)  # type: ignore[arg-type]


def loop_name() -> str:
    factory = loop_factory()
    return "uvloop" if factory is not None else "asyncio"


SWITCH_INTERVAL_S = 0.001
"""The interpreter's GIL switch interval while a run's loop runs (Python's default is 5 ms). The runner
hands disk work, parsing and process spawns to worker threads so that nothing blocks the loop; those
threads then share the GIL with it, and a thread holding the GIL keeps it up to one switch interval: 1 ms
bounds how long the loop that relays every proxied model call waits behind them."""

LAG_FILE_VAR = "GRIPPROBE_LOOP_LAG_FILE"
"""Diagnostics: when set to a path, a run samples its event loop's lag every :data:`LAG_PERIOD_S` (how
late a timer that should fire then does fire) and writes what it saw there as JSON when it ends
(benchmarks/loop_lag.py). Off by default: it costs a wake-up every 5 ms."""
LAG_PERIOD_S = 0.005


class LagProbe:
    """Samples the running loop's lag until cancelled (see :data:`LAG_FILE_VAR`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lags_ms: list[float] = []

    async def sample(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_PERIOD_S)
            self.lags_ms.append(max(0.0, (time.perf_counter() - t0 - LAG_PERIOD_S) * 1000))

    def write(self) -> None:
        lags = sorted(self.lags_ms)

        def pct(q: float) -> float:
            return round(lags[min(len(lags) - 1, int(q * len(lags)))], 3) if lags else 0.0

        self.path.write_text(json.dumps({"period_ms": LAG_PERIOD_S * 1000, "samples": len(lags), "p50_ms": pct(0.5),
                                         "p99_ms": pct(0.99), "max_ms": round(lags[-1], 3) if lags else 0.0,
                                         "lags_ms": [round(x, 3) for x in self.lags_ms]}))


def _probed(main: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """``main``, with a :class:`LagProbe` beside it when :data:`LAG_FILE_VAR` is set."""
    where = os.environ.get(LAG_FILE_VAR)
    if not where:
        return main

    async def with_probe() -> T:
        probe = LagProbe(Path(where))
        task = asyncio.ensure_future(probe.sample())
        try:
            return await main
        finally:
            task.cancel()
            probe.write()

    return with_probe()


class Terminated(Exception):
    """The run was stopped by SIGTERM (raised by :meth:`StopSignals.run` after the cancellation)."""


class StopSignals:
    """While entered (main thread only): SIGTERM is caught instead of killing the process.

    A SIGTERM that arrives during :meth:`run` cancels the coroutine, like asyncio's Ctrl-C handling, and
    :meth:`run` then raises :class:`Terminated`; one that arrives outside it (before the run starts, while
    the harness writes its results) is remembered in :attr:`received` and never interrupts a write.
    A second SIGTERM while the cancellation is under way changes nothing (the cleanup is bounded by the
    process kill grace period). The previous handler is restored on exit."""

    def __init__(self) -> None:
        self.received = False
        self._cancel: Callable[[], None] | None = None
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        first = not self.received
        self.received = True
        if first and self._cancel is not None:
            self._cancel()

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """:func:`run` ``main``; raises :class:`Terminated` when a SIGTERM cancelled it (or came first)."""
        if self.received:
            main.close()
            raise Terminated()
        previous_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            return self._run(main)
        finally:
            sys.setswitchinterval(previous_interval)

    def _run(self, main: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            loop = runner.get_loop()

            async def guarded() -> T:
                task = asyncio.current_task()
                assert task is not None

                def cancel() -> None:  # from the signal handler, between two bytecodes of the loop thread
                    task.cancel()
                    loop.call_soon_threadsafe(lambda: None)  # wake a loop blocked in select()

                self._cancel = cancel
                try:
                    if self.received:  # arrived between the check above and now
                        main.close()
                        raise asyncio.CancelledError()
                    return await _probed(main)
                finally:
                    self._cancel = None

            try:
                return runner.run(guarded())
            except asyncio.CancelledError:
                if self.received:
                    raise Terminated() from None
                raise


__all__ = ["StopSignals", "Terminated", "loop_factory", "loop_name", "run"]

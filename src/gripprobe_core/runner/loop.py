"""The event loop a run uses: uvloop when it is installed (a core dependency on Linux and macOS), else
asyncio's own. ``GRIPPROBE_EVENT_LOOP=asyncio`` forces asyncio's.

Why: the recording proxy relays on the runner's loop, and its added latency per request is mostly the
event loop's and aiohttp's own work; uvloop cut the relay's p50 added latency by about 10 % in
benchmarks/proxy_latency.py (docs/proxy.md). Nothing else depends on which loop runs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Awaitable, Callable, TypeVar

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


__all__ = ["loop_factory", "loop_name", "run"]

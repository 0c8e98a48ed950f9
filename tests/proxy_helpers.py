"""Helpers shared by the proxy tests: a real aiohttp upstream on 127.0.0.1 and a started RecordingProxy."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from aiohttp import web

from gripprobe_core.proxy import RecordingProxy


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@asynccontextmanager
async def serving(app: web.Application, **runner_kw: Any) -> AsyncIterator[str]:
    """A real aiohttp server for ``app`` on 127.0.0.1 (port 0); yields its root URL. ``runner_kw``:
    more ``web.AppRunner`` options (e.g. ``keepalive_timeout``)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, **runner_kw)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def proxied(upstream: str, record: Path, **kw: Any) -> AsyncIterator[RecordingProxy]:
    """A started RecordingProxy in front of ``upstream``, stopped on exit."""
    proxy = RecordingProxy(upstream, record, **kw)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def app_with(**routes: Any) -> web.Application:
    """An upstream app: ``GET /ok`` answers ``{"ok": true}``; each ``name=handler`` serves ``/name``
    (any method)."""
    app = web.Application()
    app.router.add_get("/ok", ok)
    for name, handler in routes.items():
        app.router.add_route("*", f"/{name}", handler)
    return app

"""The lifecycle every built-in challenge server shares (:class:`ChallengeHTTPServer`): an aiohttp app on
127.0.0.1, a free port, a log of every request it answered. Imported when a phase starts a challenge
server, never to register one (see the package's docstring)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

from aiohttp import web

__all__ = ["ChallengeHTTPServer"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ChallengeHTTPServer:
    """Shared lifecycle of a challenge server (implements :class:`ChallengeServer`).

    Subclasses add routes in :meth:`routes` and fill ``facts`` in :meth:`on_started`.
    """

    kind = "challenge"

    def __init__(self, options: dict[str, Any] | None = None, phase: str = "measured") -> None:
        self.options = dict(options or {})
        self.phase = phase
        self.url = ""
        self.facts: dict[str, Any] = {}
        self.requests: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None

    # -------------------------------------------------------------------------------- subclass API

    def routes(self, app: web.Application) -> None:  # pragma: no cover - abstract
        """Add the challenge's routes to ``app``."""
        raise NotImplementedError

    def on_started(self) -> None:
        """Called once ``self.url`` (``http://127.0.0.1:<port>``) is known; fill URL facts here."""

    # ---------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind 127.0.0.1 on a free port and start serving."""
        if self._runner is not None:
            return
        app = web.Application(middlewares=[self._log_middleware])
        self.routes(app)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self.on_started()

    async def stop(self) -> None:
        """Stop serving; the facts and the request log stay readable."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> "ChallengeHTTPServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------------------------ logging

    @web.middleware
    async def _log_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        entry: dict[str, Any] = {
            "ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "method": request.method,
            "path": request.path,
            "query": request.query_string,
            "status": 500,
        }
        self.requests.append(entry)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            entry["status"] = exc.status
            raise
        entry["status"] = response.status
        return response

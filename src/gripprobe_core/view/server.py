"""Serving the view: bind, say where, serve until Ctrl-C or SIGTERM (docs/view.md)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import signal
import threading
from typing import Callable

from aiohttp import web

from ..errors import UserError
from .routes import ViewConfig, make_app

__all__ = ["ViewServer", "is_loopback", "serve", "serve_in_thread"]


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class ViewServer:
    """The app on ``host:port`` (port 0: any free port) in the running event loop: ``await start()``, then
    ``url``; ``await stop()``. With ``check_host`` the server answers only requests naming its own address
    (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``)."""

    def __init__(self, cfg: ViewConfig, host: str = "127.0.0.1", port: int = 0, *, check_host: bool = True) -> None:
        self.cfg, self.host, self.port, self.check_host = cfg, host, port, check_host
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        self._runner = web.AppRunner(make_app(self.cfg), access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise UserError(f"--host {self.host} --port {self.port}: cannot listen there ({exc.strerror or exc}); "
                            f"pick another --port (0: any free one)") from None
        server = site._server  # the bound sockets: the port chosen for port 0
        sockets = list(getattr(server, "sockets", None) or [])
        self.port = sockets[0].getsockname()[1] if sockets else self.port
        if self.check_host:
            names = {self.host, "127.0.0.1", "localhost", "[::1]", _url_host(self.host)}
            self.cfg.allowed_hosts = {f"{n}:{self.port}" for n in names}
        return self.url

    @property
    def url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}/"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def serve(cfg: ViewConfig, host: str, port: int, *, on_ready: Callable[[str], None],
          check_host: bool = True) -> str:
    """Serve until SIGINT or SIGTERM; ``on_ready(url)`` once listening. Returns the name of the signal."""
    async def main() -> str:
        server = ViewServer(cfg, host, port, check_host=check_host)
        url = await server.start()
        stop = asyncio.Event()
        got: list[str] = []
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, lambda s=sig: (got.append(signal.Signals(s).name), stop.set()))
        try:
            on_ready(url)
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await server.stop()
        return got[0] if got else ""

    return asyncio.run(main())



class serve_in_thread:
    """The view served from its own thread and event loop, for as long as the ``with`` block lasts (a test, a
    notebook): ``with serve_in_thread(ViewConfig(root)) as url: ...``."""

    def __init__(self, cfg: ViewConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = ViewServer(cfg, host, port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> str:
        ready: concurrent.futures.Future[str] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                ready.set_result(self._loop.run_until_complete(self.server.start()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                ready.set_exception(exc)
                return
            self._loop.run_forever()
            self._loop.run_until_complete(self.server.stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="gripprobe-view", daemon=True)
        self._thread.start()
        return ready.result(timeout=30)

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

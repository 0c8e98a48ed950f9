"""The harness's side of a sandboxed phase's network (SPEC §9, docs/sandbox.md).

A sandboxed phase has a network namespace of its own: a loopback and nothing else. The endpoints it
may reach (the case's recording proxy, the test's challenge servers) listen on the host's
``127.0.0.1:PORT``; :class:`NetBridge` serves one Unix socket per such port, in a folder bound into
the sandbox, and relays every connection to it to ``127.0.0.1:PORT``. Inside, the sandbox's init
(:mod:`.sandbox_init`) listens on the same ``127.0.0.1:PORT`` and relays to that socket, so the agent's
URLs keep their form and lead where they led before — and nowhere else.

Relaying runs on the event loop as two linked protocols per connection, with flow control both ways
(a side whose peer cannot take more stops being read); nothing is buffered beyond the transports'
own buffers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit

#: A Unix socket path holds at most 107 bytes (sun_path).
_SUN_PATH_MAX = 107
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def loopback_port(url: str | None) -> int | None:
    """The port of an ``http(s)://`` URL on this machine's loopback (``127.0.0.1``, ``localhost``, ``[::1]``),
    else None."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or (parts.hostname or "") not in LOOPBACK_HOSTS:
        return None
    return port or (443 if parts.scheme == "https" else 80)


class _Side(asyncio.Protocol):
    """One end of a relayed connection; ``peer`` is the other end."""

    def __init__(self, sides: set["_Side"]) -> None:
        self.sides = sides
        sides.add(self)
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.pending: list[bytes] = []
        self.eof = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:  # the other end is still connecting
            self.pending.append(data)
            if self.transport is not None:
                self.transport.pause_reading()
            return
        peer.transport.write(data)

    def eof_received(self) -> bool:
        peer = self.peer
        self.eof = True
        if peer is not None and peer.transport is not None and not peer.transport.is_closing():
            if peer.transport.can_write_eof():
                peer.transport.write_eof()
        return True  # keep the other direction open (half-close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.sides.discard(self)
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.close()

    # flow control: our transport's write buffer is full → stop reading the peer
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None and not self.peer.transport.is_closing():
            self.peer.transport.resume_reading()

    def linked(self, peer: "_Side") -> None:
        """``peer`` is connected: hand over what arrived meanwhile, and read again."""
        self.peer = peer
        assert peer.transport is not None
        for data in self.pending:
            peer.transport.write(data)
        self.pending.clear()
        if self.eof and peer.transport.can_write_eof():
            peer.transport.write_eof()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class NetBridge:
    """A Unix socket per port in a private folder, each relayed to ``127.0.0.1:PORT`` (see the module doc).

    ``await start()``, then :attr:`forwards` (port → socket path, for :meth:`Sandbox.wrap`), then
    ``await close()`` (idempotent), which also removes the folder."""

    def __init__(self, ports: Iterable[int]) -> None:
        self.ports = sorted({int(p) for p in ports})
        self.folder: Path | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._sides: set[_Side] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def forwards(self) -> dict[int, Path]:
        assert self.folder is not None, "NetBridge not started"
        return {port: self.folder / f"{port}.sock" for port in self.ports}

    async def start(self) -> None:
        self.folder = _socket_folder()
        loop = asyncio.get_running_loop()
        try:
            for port, path in self.forwards.items():
                server = await loop.create_unix_server(lambda p=port: self._accepted(p), str(path))  # type: ignore[misc]
                self._servers.append(server)
        except BaseException:
            await self.close()
            raise

    def _accepted(self, port: int) -> _Side:
        inner = _Side(self._sides)
        task = asyncio.get_running_loop().create_task(self._connect(inner, port))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return inner

    async def _connect(self, inner: _Side, port: int) -> None:
        loop = asyncio.get_running_loop()
        outer = _Side(self._sides)
        try:
            await loop.create_connection(lambda: outer, "127.0.0.1", port)
        except OSError:
            self._sides.discard(outer)
            if inner.transport is not None:
                inner.transport.close()
            return
        if inner.closed:
            if outer.transport is not None:
                outer.transport.close()
            return
        sock = outer.transport.get_extra_info("socket") if outer.transport is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        outer.peer = inner
        inner.linked(outer)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        for task in list(self._tasks):
            task.cancel()
        for side in list(self._sides):
            if side.transport is not None:
                side.transport.abort()
        self._sides.clear()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    async def __aenter__(self) -> "NetBridge":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _socket_folder() -> Path:
    """A new private folder whose socket paths fit ``sun_path`` (the temporary folder, else /tmp)."""
    for parent in (tempfile.gettempdir(), "/tmp"):
        if len(os.fsencode(parent)) + len("/gp-net-XXXXXXXX/65535.sock") <= _SUN_PATH_MAX:
            return Path(tempfile.mkdtemp(prefix="gp-net-", dir=parent))
    raise OSError("no temporary folder short enough for a Unix socket path")

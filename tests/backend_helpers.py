"""Real model backends for the backend tests: the oracle server running in a thread of the test process,
so a spec can name it as an ``openai-compatible`` or ``ollama`` backend, and the test can stop it."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

from conftest import SPECS
from gripprobe_core.oracle.server import OracleServer


class OracleThread:
    """An :class:`OracleServer` serving from its own event loop in a daemon thread."""

    def __init__(self, test_id: str = "shell_pwd") -> None:
        from gripprobe_core.specs import load_specs

        self.server = OracleServer(list(load_specs(SPECS).tests[test_id].reference))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.stopped = threading.Event()

    def __enter__(self) -> "OracleThread":
        self.thread.start()
        self._call(self.server.start())
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def _call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if not self.stopped.is_set():
            self._call(self.server.stop())
            self.stopped.set()

    def stop_at_stall(self, n: int) -> None:
        """Stop serving (the port then refuses connections) while the ``n``-th stalled request is held."""
        async def watch() -> None:
            while not (self.server.pending_stalls and
                       sum(r.get("reply") == "stall" for r in self.server.request_log) >= n):
                await asyncio.sleep(0.02)
            await self.server.stop()
            self.stopped.set()

        asyncio.run_coroutine_threadsafe(watch(), self.loop)

    def stalls(self) -> int:
        return sum(r.get("reply") == "stall" for r in self.server.request_log)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec_root_with_model(tmp_path: Path, *, kind: str, base_url: str, profile: str = "perfect",
                         api_key_env: str | None = None, model_id: str = "remote", backend_id: str = "local") -> Path:
    """A copy of the repository's specs plus ``models/<model_id>.yaml`` with one backend of ``kind``."""
    root = tmp_path / "specs"
    if not root.exists():
        shutil.copytree(SPECS, root)
    key = f"\n    api_key_env: {api_key_env}" if api_key_env else ""
    (root / "models" / f"{model_id}.yaml").write_text(
        f"id: {model_id}\nbackends:\n  - id: {backend_id}\n    kind: {kind}\n    model_id: {profile}\n"
        f"    base_url: {base_url}{key}\npolicy:\n  timeout_s: 60\n")
    return root

"""Built-in plugin: the recording proxy (tier A telemetry) behind the ``start_proxy`` hook.

The runner (``runner/proxy_session.py``) awaits :func:`start_proxy` once per phase, hands
:attr:`ProxyHandle.base_url` to the agent, and after the phase calls ``stop()``, then reads
``status``, ``events()`` and ``summary_kwargs()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gripprobe_core import hookimpl
from ..phase import PhaseContext
from ..models.events import Event


class ProxyHandle:
    """A running :class:`~gripprobe_core.proxy.server.RecordingProxy` as the runner sees it."""

    def __init__(self, proxy: Any, *, phase: str) -> None:
        self._proxy = proxy
        self.phase = phase
        self.record_path: Path = proxy.record_path

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the server root (without ``/v1``) the agent talks to."""
        return self._proxy.base_url

    async def stop(self) -> None:
        """Stop relaying; in-flight exchanges are closed and recorded; returns once every record is in
        the file (the recorder process has written them). Never hangs."""
        await self._proxy.stop()

    @property
    def status(self) -> dict[str, Any]:
        """``{"error": str | None, "reason": str | None, "exchanges": int, "recorder_error": str | None}``:
        ``error`` is set when an exchange failed because of the upstream (connect, reset, malformed,
        timeout); ``recorder_error`` when the recorder process failed and some exchanges were recorded
        as metadata only (valid after :meth:`stop`)."""
        return self._proxy.status()

    def records(self) -> list[dict]:
        from ..proxy.server import read_records

        return read_records(self.record_path)

    def events(self) -> list[Event]:
        """Tier A events parsed from the record file."""
        from ..proxy.events import records_to_events

        return records_to_events(self.records(), phase=self.phase, artifact_name=self.record_path.name)

    def summary_kwargs(self) -> dict[str, Any]:
        """``proxy_structured_count``, ``proxy_nonstructured_count``, ``backend_tool_unsupported`` for
        :func:`gripprobe_core.telemetry.summary.summarize_phase`."""
        from ..proxy.events import proxy_counts

        return proxy_counts(self.records())


@hookimpl
async def start_proxy(ctx: PhaseContext, upstream_url: str, record_path: Path,
                      max_request_body: int | None) -> ProxyHandle | None:
    """Start a :class:`RecordingProxy` in front of ``upstream_url``; ``None`` for a non-HTTP upstream
    (the runner reports ``unsupported_backend``). ``OSError`` when it cannot bind. (No default for
    ``max_request_body``: pluggy never passes an argument that has one.)"""
    if not upstream_url.lower().startswith(("http://", "https://")):
        return None
    from ..proxy.server import RecordingProxy

    kw = {"max_request_body": max_request_body} if max_request_body is not None else {}
    proxy = RecordingProxy(upstream_url, record_path, **kw)
    await proxy.start()
    return ProxyHandle(proxy, phase=ctx.phase)

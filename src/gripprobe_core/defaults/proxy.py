"""Default plugin ``recording_proxy``: the core's recording proxy (tier A) behind ``start_proxy``, and the
default answer of ``route_base_url`` (the agent driver's own).

The runner (``runner/proxy_session.py``) asks ``start_proxy`` once per phase, awaits ``start()``, hands
:attr:`RecordingProxyHandle.base_url` to the agent, and after the phase awaits ``stop()`` and reads
``status()`` and the record file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import hookimpl
from ..drivers import AgentDriver, ProxyActivity, ProxyStatus
from ..models.specs import BackendSpec, CliAgentSpec
from ..phase import PhaseContext, RouteDecision


class RecordingProxyHandle:
    """A :class:`~gripprobe_core.proxy.server.RecordingProxy` as the runner sees it (a ``ProxyHandle``)."""

    def __init__(self, upstream_url: str, record_path: Path, max_request_body: int | None,
                 token_budget: int | None = None, models: tuple[str, ...] | None = None) -> None:
        from ..proxy.server import RecordingProxy

        kw: dict[str, Any] = {"token_budget": token_budget, "models": models}
        if max_request_body is not None:
            kw["max_request_body"] = max_request_body
        self._proxy: Any = RecordingProxy(upstream_url, record_path, **kw)
        self.record_path = record_path

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the server root (without ``/v1``) the agent talks to."""
        return str(self._proxy.base_url)

    async def start(self) -> None:
        await self._proxy.start()

    async def stop(self) -> None:
        """Stop relaying; in-flight exchanges are closed and recorded; returns once every record is in
        the file (the recorder process has written them). Never hangs."""
        await self._proxy.stop()

    def activity(self) -> ProxyActivity | None:
        """What the proxy has open right now (``ProxyHandle.activity``; any thread, never blocks)."""
        return self._proxy.activity()

    def status(self) -> ProxyStatus:
        return dict(self._proxy.status())

    def token_budget_exceeded(self) -> bool:
        return bool(self._proxy.token_budget_exceeded)


@hookimpl(trylast=True)
def start_proxy(ctx: PhaseContext, upstream_url: str, record_path: Path, max_request_body: int | None,
                token_budget: int | None, models: tuple[str, ...]) -> RecordingProxyHandle | None:
    """A :class:`RecordingProxyHandle` in front of ``upstream_url``, serving only ``models`` (the case's
    model); ``None`` for a non-HTTP upstream (the runner reports ``unsupported_backend``). (No defaults for
    ``max_request_body``, ``token_budget`` and ``models``: pluggy never passes an argument that has one.)"""
    if not upstream_url.lower().startswith(("http://", "https://")):
        return None
    return RecordingProxyHandle(upstream_url, record_path, max_request_body, token_budget, models or None)


@hookimpl(trylast=True)
def route_base_url(driver: AgentDriver, agent: CliAgentSpec, backend: BackendSpec) -> RouteDecision:
    """The driver's own answer: the default when no plugin overrides it."""
    return driver.route(agent, backend)

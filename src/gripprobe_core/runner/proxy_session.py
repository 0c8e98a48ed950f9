"""Per-phase telemetry proxy lifecycle and its modes (SPEC §5): off | auto | force.

The proxy itself is whatever plugin answers the ``start_proxy`` hook. This module decides whether to
start it, turns failures into evidence (auto) or a harness error (force), and stops it once per phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..phase import PhaseContext
from ..models.events import Event

PROXY_REQUIRED = "proxy_required_but_not_available"


@dataclass
class ProxySession:
    mode: str
    status: str = "skipped"  # collected | skipped | error
    skip_reason: str | None = None
    error: str | None = None
    handle: Any = None
    record_path: Path | None = None
    harness_error: str | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def base_url(self) -> str | None:
        return getattr(self.handle, "base_url", None)

    async def stop(self) -> None:
        if self.handle is not None and not self._stopped:
            self._stopped = True
            try:
                await self.handle.stop()
            except Exception as exc:  # a proxy that fails to stop is evidence, not a crash
                self.status, self.skip_reason, self.error = "error", "proxy_connect_error", str(exc)
            if self.status != "error":
                self.status = "collected" if _has_traffic(self.record_path) else "skipped"
                if self.status == "skipped":
                    self.skip_reason = "capture_missing"
            stats = getattr(self.handle, "status", None)
            if isinstance(stats, dict) and stats.get("error"):
                self.status, self.skip_reason = "error", stats.get("reason", "proxy_connect_error")
                self.error = stats.get("error")
            elif isinstance(stats, dict) and stats.get("recorder_error"):
                # the relay went on but some exchanges were recorded without their contents
                self.status, self.skip_reason = "error", "capture_missing"
                self.error = f"recorder: {stats['recorder_error']}"

    def events(self) -> list[Event]:
        get = getattr(self.handle, "events", None)
        try:
            return list(get()) if get else []
        except Exception:
            return []

    def summary_kwargs(self) -> dict[str, Any]:
        extra = getattr(self.handle, "summary_kwargs", None)
        kw: dict[str, Any] = dict(proxy_status=self.status, proxy_skip_reason=self.skip_reason)
        if extra:
            kw.update(extra())
        return kw

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "status": self.status, "skip_reason": self.skip_reason, "error": self.error,
                "record": self.record_path.name if self.record_path and self.status == "collected" else None,
                "started": self.handle is not None}


def _has_traffic(path: Path | None) -> bool:
    try:
        return path is not None and path.stat().st_size > 0
    except OSError:
        return False


async def open_proxy_session(gpm, ctx: PhaseContext, *, mode: str, upstream: str, record_path: Path,
                           max_request_body: int | None = None) -> ProxySession:
    """The phase's proxy as ``mode`` wants it; ``max_request_body``: the request body cap in bytes
    (``None``: the proxy's default)."""
    px = ProxySession(mode=mode, record_path=record_path)
    if mode == "off":
        px.skip_reason = "disabled"
        return px
    route = gpm.hook.route_base_url(agent=ctx.agent, backend=ctx.backend)
    if route is not None and not route.routable:
        return _unavailable(px, route.reason or "unsupported_shell")
    try:
        handle = gpm.hook.start_proxy(ctx=ctx, upstream_url=upstream, record_path=record_path,
                                      max_request_body=max_request_body)
        if hasattr(handle, "__await__"):
            handle = await handle
    except OSError as exc:
        px.error = str(exc)
        return _unavailable(px, "proxy_bind_error", status="error")
    if handle is None:
        return _unavailable(px, "unsupported_backend")
    px.handle = handle
    px.status = "collected"
    return px


def _unavailable(px: ProxySession, reason: str, status: str = "skipped") -> ProxySession:
    px.status, px.skip_reason = status, reason
    if px.mode == "force":
        px.status = "error"
        px.harness_error = f"{PROXY_REQUIRED}: {reason}"
    return px

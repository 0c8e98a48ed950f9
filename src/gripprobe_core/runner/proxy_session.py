"""One phase's recording proxy, in its mode (SPEC §5): off | auto | force.

The proxy itself is whatever plugin answers ``start_proxy`` (the core's ``recording_proxy`` by default).
:func:`open_proxy_session` decides whether to start one, turns failures into evidence (auto) or a
harness error (force); :meth:`ProxySession.stop` stops it once and says what it collected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..drivers import AgentDriver, ProxyHandle
from ..hooks import Hooks
from ..phase import PhaseContext

PROXY_REQUIRED = "proxy_required_but_not_available"


@dataclass
class ProxySession:
    """The recording proxy of one phase: its mode, what became of it, and where its records are."""

    mode: str
    record_path: Path
    token_budget: int | None = None
    status: str = "skipped"  # collected | skipped | error
    skip_reason: str | None = None
    error: str | None = None
    handle: ProxyHandle | None = None
    harness_error: str | None = None
    """Set when ``force`` could not have its proxy: the phase must not run (HARNESS_ERROR)."""
    token_budget_was_exceeded: bool = False
    tokens_spent: int | None = None
    models: tuple[str, ...] = ()
    """The names of the case's model the proxy serves (model calls naming another are refused)."""
    model_not_under_test: int = 0
    """Model calls the proxy refused for naming another model."""
    records: dict[str, int] | None = None
    """What became of the phase's records under their caps (written, slimmed, dropped …)."""
    _stopped: bool = field(default=False, repr=False)

    @property
    def base_url(self) -> str | None:
        return self.handle.base_url if self.handle is not None else None

    async def stop(self) -> None:
        """Stop the proxy (once); a proxy that fails to stop, or reports an upstream or recorder failure,
        is evidence (status ``error``), never a crash."""
        if self.handle is None or self._stopped:
            return
        self._stopped = True
        try:
            await self.handle.stop()
        except Exception as exc:
            self.status, self.skip_reason, self.error = "error", "proxy_connect_error", str(exc)
            return
        self.status = "collected" if _has_traffic(self.record_path) else "skipped"
        if self.status == "skipped":
            self.skip_reason = "capture_missing"
        try:
            stats = dict(self.handle.status())
        except Exception as exc:
            stats = {"error": f"status unavailable: {exc}", "reason": "proxy_connect_error"}
        self.token_budget_was_exceeded = bool(stats.get("token_budget_exceeded")) or self.token_budget_exceeded()
        spent = stats.get("tokens_spent")
        self.tokens_spent = spent if type(spent) is int else None
        refused = stats.get("model_not_under_test")
        self.model_not_under_test = refused if type(refused) is int and refused > 0 else 0
        records = stats.get("records")
        if isinstance(records, dict):
            self.records = {str(k): v for k, v in records.items() if type(v) is int}
        if stats.get("error"):
            self.status, self.skip_reason = "error", stats.get("reason") or "proxy_connect_error"
            self.error = stats.get("error")
        elif stats.get("recorder_error"):
            # the relay went on but some exchanges were recorded without their contents
            self.status, self.skip_reason = "error", "capture_missing"
            self.error = f"recorder: {stats['recorder_error']}"

    @property
    def started(self) -> bool:
        return self.handle is not None

    def token_budget_exceeded(self) -> bool:
        """Did the proxy refuse a model call for the phase's token budget (asked while the agent runs)?"""
        if self.token_budget_was_exceeded:
            return True
        try:
            return self.handle is not None and bool(self.handle.token_budget_exceeded())
        except Exception:
            return False

    def describe(self) -> dict[str, Any]:
        """What case.json records of it (``phases[].proxy``)."""
        out: dict[str, Any] = {"mode": self.mode, "status": self.status, "skip_reason": self.skip_reason, "error": self.error,
               "record": self.record_path.name if self.status == "collected" else None, "started": self.started}
        if self.token_budget is not None:
            out.update(token_budget=self.token_budget, tokens_spent=self.tokens_spent,
                       token_budget_exceeded=self.token_budget_exceeded())
        if self.started and self.models:
            out.update(models=list(self.models), model_not_under_test=self.model_not_under_test)
        if self.records is not None:
            out["records"] = dict(self.records)
        return out


def _has_traffic(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


async def open_proxy_session(hooks: Hooks, driver: AgentDriver, ctx: PhaseContext, *, mode: str, upstream: str,
                             record_path: Path, max_request_body: int | None = None,
                             token_budget: int | None = None) -> ProxySession:
    """The phase's proxy as ``mode`` wants it, started (``ctx`` is the phase before routing);
    ``max_request_body``: the request body cap in bytes (``None``: the proxy's default); ``token_budget``:
    the tokens the phase may spend (``None``: no budget). The proxy serves only the case's model
    (:func:`model_names`)."""
    session = ProxySession(mode=mode, record_path=record_path, token_budget=token_budget,
                           models=model_names(driver, ctx))
    if mode == "off":
        session.skip_reason = "disabled"
        return session
    route = hooks.route_base_url(driver, ctx.agent, ctx.backend)
    if not route.routable:
        return _unavailable(session, route.reason or "unsupported_shell")
    try:
        handle = hooks.start_proxy(ctx, upstream, record_path, max_request_body, token_budget, session.models)
        if handle is None:
            return _unavailable(session, "unsupported_backend")
        await handle.start()
    except OSError as exc:
        session.error = str(exc)
        return _unavailable(session, "proxy_bind_error", status="error")
    session.handle, session.status = handle, "collected"
    return session


def model_names(driver: AgentDriver, ctx: PhaseContext) -> tuple[str, ...]:
    """The names the case's model goes by on the wire: the name the agent was given (``ctx.model_name``),
    the backend's ``model_id``, and the aliases the driver declares (``model_aliases``, optional). A
    driver whose ``model_aliases`` fails or answers junk declares none."""
    names = [ctx.model_name, ctx.backend.model_id]
    aliases = getattr(driver, "model_aliases", None)
    if callable(aliases):
        try:
            extra = aliases(ctx)
            names += [a for a in (extra or ()) if isinstance(a, str) and a]
        except Exception:
            pass
    return tuple(dict.fromkeys(n for n in names if n))


def _unavailable(session: ProxySession, reason: str, status: str = "skipped") -> ProxySession:
    session.status, session.skip_reason = status, reason
    if session.mode == "force":
        session.status = "error"
        session.harness_error = f"{PROXY_REQUIRED}: {reason}"
    return session

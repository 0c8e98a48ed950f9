"""The typed facade over ``pm.hook``: the only way the core calls a hook.

Every hook call site in the core goes through :class:`Hooks`, so each one type-checks (mypy runs over
this module and its callers in CI) and pluggy's machinery (argument matching, ordering, hook wrappers,
tracing) sees every call. Each method says what the hook's answers become: merged (``build_env``),
collected (``parse_wrapper_events``) or the first answer (``route_base_url``, ``start_proxy``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from .challenges import ChallengeFactory
    from .drivers import AgentDriver, Backend, ProxyHandle
    from .evaluator import Evaluator
    from .models.events import Event
    from .models.specs import BackendSpec, CliAgentSpec
    from .phase import PhaseCapture, PhaseContext, RouteDecision, Transcript
    from .validators.context import Validator


class Hooks:
    """``pm.hook``, typed. Built by :func:`gripprobe_core.pluginmanager.make_plugin_manager`."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm
        self._hook: Any = pm.hook

    # ---------------------------------------------------------------------------------- registration

    def register_agents(self, register: "Callable[[AgentDriver], None]") -> None:
        self._hook.register_agents(register=register)

    def register_backends(self, register: "Callable[[Backend], None]") -> None:
        self._hook.register_backends(register=register)

    def register_validators(self, register: "Callable[[str, Validator], None]") -> None:
        self._hook.register_validators(register=register)

    def register_challenge_servers(self, register: "Callable[[str, ChallengeFactory], None]") -> None:
        self._hook.register_challenge_servers(register=register)

    def register_evaluators(self, register: "Callable[[str, Evaluator], None]") -> None:
        self._hook.register_evaluators(register=register)

    # ------------------------------------------------------------------------------- contributions

    def build_env(self, agent: "CliAgentSpec", ctx: "PhaseContext") -> dict[str, str]:
        """Every plugin's extra environment, merged: the first implementation pluggy calls (the
        highest priority) wins a clash."""
        merged: dict[str, str] = {}
        for answer in reversed(self._hook.build_env(agent=agent, ctx=ctx)):
            if answer:
                merged.update({str(k): str(v) for k, v in dict(answer).items()})
        return merged

    def parse_wrapper_events(self, driver: "AgentDriver", ctx: "PhaseContext", capture: "PhaseCapture",
                             transcript: "Transcript") -> "list[list[Event]]":
        """Every contributing parser's events, one list per implementation that answered. Raises what an
        implementation raised (the caller turns it into wrapper_parse_error)."""
        answers = self._hook.parse_wrapper_events(driver=driver, ctx=ctx, capture=capture, transcript=transcript)
        return [list(a) for a in answers if a is not None]

    # ----------------------------------------------------------------------------- first result

    def route_base_url(self, driver: "AgentDriver", agent: "CliAgentSpec", backend: "BackendSpec") -> "RouteDecision":
        """Whether the agent can be pointed at the proxy (the core's default asks the driver)."""
        from .phase import RouteDecision

        answer = self._hook.route_base_url(driver=driver, agent=agent, backend=backend)
        return answer if isinstance(answer, RouteDecision) else RouteDecision(True)

    def start_proxy(self, ctx: "PhaseContext", upstream_url: str, record_path: Path,
                    max_request_body: int | None, token_budget: int | None = None,
                    models: tuple[str, ...] = ()) -> "ProxyHandle | None":
        """An unstarted proxy handle, or None when no plugin can relay ``upstream_url``. ``models``: the
        names of the case's model (the proxy refuses model calls naming any other; empty: no pin)."""
        return cast("ProxyHandle | None", self._hook.start_proxy(
            ctx=ctx, upstream_url=upstream_url, record_path=record_path, max_request_body=max_request_body,
            token_budget=token_budget, models=tuple(models)))

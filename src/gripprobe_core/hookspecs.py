"""GripProbe's hook specifications.

There are two kinds of hook, and no third:

* **Registration** (``register_*``): each plugin hands the core the objects it provides — agent
  drivers, backends, validator kinds, challenge server kinds, evaluators. The runner then looks an agent's
  driver up by name and calls it, and a case is judged by the evaluator its suite names (``judge:``, the
  core's ``event_evaluator`` by default); no agent hook is broadcast to every plugin.
* **Contribution and decision** (the design card's hooks): ``build_env`` and ``parse_wrapper_events``
  — every plugin may contribute, for any agent; ``route_base_url`` and ``start_proxy`` — *first result*:
  who handles this (the core's defaults answer last).

Plugins implement these with ``from gripprobe_core.plugin import hookimpl``. An implementation may
accept any subset of a hook's arguments, so new arguments never break old plugins. Every hook is
synchronous: a coroutine function implementing one is refused when the plugin loads. The core calls
hooks only through ``pm.hook``, behind the typed facade :class:`gripprobe_core.hooks.Hooks`. Every hook
here is listed in ``docs/hooks.md``; a test keeps the two in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from .challenges import ChallengeFactory
    from .drivers import AgentDriver, Backend, ProxyHandle
    from .evaluator import Evaluator
    from .models.events import Event
    from .models.specs import BackendSpec, CliAgentSpec
    from .phase import PhaseCapture, PhaseContext, RouteDecision, Transcript
    from .validators.context import Validator

hookspec = pluggy.HookspecMarker("gripprobe")


# -------------------------------------------------------------------------------------- registration

@hookspec
def register_agents(register: "Callable[[AgentDriver], None]") -> None:
    """Register the agent drivers this plugin provides: ``register(MyDriver())`` once per agent.

    ``driver.name`` is what a cli_agents spec puts in ``plugin:``. Two plugins registering the same
    name is an error that names both distributions. See :class:`gripprobe_core.drivers.AgentDriver`.
    """


@hookspec
def register_backends(register: "Callable[[Backend], None]") -> None:
    """Register backend kinds: ``register(MyBackend())``; ``backend.kind`` is what a model spec's backend
    puts in ``kind:``. See :class:`gripprobe_core.drivers.Backend`.
    """


@hookspec
def register_validators(register: "Callable[[str, Validator], None]") -> None:
    """Register validator kinds: ``register(kind, fn)``.

    ``fn(ctx: ValidatorContext, options: dict) -> ValidatorResult`` judges the measured workspace.
    ``options`` are the validator's keys from the test spec (without ``kind``). A validator must not
    raise for bad agent output: it returns ``passed=False`` with what it observed. It sets
    ``source`` when one event produced the value it judged. A validator that runs anything (a command,
    the agent's code) is marked ``@runs_code`` and runs it through ``ctx.sandbox.wrap(argv, ...)``: on a
    stored run (``rebuild-reports --recompute``) it then runs only in the sandbox, and where there is none
    it is not run (the case is HARNESS_ERROR ``sandbox_unavailable``), never unconfined.
    """


@hookspec
def register_challenge_servers(register: "Callable[[str, ChallengeFactory], None]") -> None:
    """Register challenge server kinds: ``register(kind, factory)``.

    ``factory(options, phase)`` returns an unstarted :class:`~gripprobe_core.challenges.ChallengeServer`
    bound to 127.0.0.1 on port 0 when started. Its ``facts`` (nonce, token, expected answers ...) must
    differ between phases; ``requests`` is its request log, written into the case directory.
    """


@hookspec
def register_evaluators(register: "Callable[[str, Evaluator], None]") -> None:
    """Register evaluators (judges): ``register(name, fn)``.

    ``fn(inputs: EvaluationInputs) -> Verdict`` writes every verdict field of a case from what the core
    derived of its evidence (validator results, process result, events, telemetry summary, harness facts);
    it must be a pure function of ``inputs`` and keep the result contract. A suite names the judge of its
    cases with ``judge: <name>``; without one, the core's ``event_evaluator`` (SPEC §6) judges. The core
    writes ``verdict_source`` from the name registered here, whatever ``fn`` put there, and a name
    registered twice (``event_evaluator`` included) is an error naming both distributions. A judge that
    raises or returns anything but a ``Verdict`` makes the case HARNESS_ERROR (``judge_error``).
    """


# ----------------------------------------------------------------------------------- contributions

@hookspec
def build_env(agent: "CliAgentSpec", ctx: "PhaseContext") -> "dict[str, str] | None":
    """Environment variables any plugin adds to an agent's phase, on top of the driver's own
    (:meth:`AgentDriver.environment`) — a site-wide proxy setting, a tracing variable.

    Every implementation is called; their answers are merged over the driver's, the highest-priority
    implementation winning a clash. Return ``None`` to add nothing. The runner's own environment is
    never passed on except the allowlist (PATH, LANG, LC_*, TZ, TERM).
    """


@hookspec
def parse_wrapper_events(driver: "AgentDriver", ctx: "PhaseContext", capture: "PhaseCapture",
                         transcript: "Transcript") -> "list[Event] | None":
    """Events any plugin reads from an agent's outputs, beside the driver's own (``transcript``).

    Every implementation is called; return ``None`` when there is nothing for you, or a list (possibly
    empty) of events. The core's default plugin ``telemetry`` answers twice: tier C (``driver.markers``
    applied to stdout/stderr) and tier D (claims in ``transcript.final_text``). Set ``source_tier`` (B, C
    or D: tier A is the recording proxy's alone, and a list holding a tier-A event makes the case
    HARNESS_ERROR / wrapper_parse_error), ``source`` and ``raw_artifact_ref``; the runner fills run_id,
    case_id, phase, sequence and event ids.
    Raise :class:`gripprobe_core.errors.WrapperParseError` when an artifact you need is unreadable (the
    case becomes HARNESS_ERROR / wrapper_parse_error). Never raise anything else on bad bytes.
    """


# --------------------------------------------------------------------------------------- decisions

@hookspec(firstresult=True)
def route_base_url(driver: "AgentDriver", agent: "CliAgentSpec", backend: "BackendSpec") -> "RouteDecision | None":
    """*First result.* Can this agent be pointed at an arbitrary base URL (the recording proxy's)?

    The core's default answers last with the driver's own :meth:`AgentDriver.route`; a plugin answers
    first to override it for some agent × backend. ``RouteDecision(routable=False, reason=...)``: the
    proxy is skipped in ``auto`` mode and the case is HARNESS_ERROR in ``force`` mode.
    """


@hookspec(firstresult=True)
def start_proxy(ctx: "PhaseContext", upstream_url: str, record_path: "Path",
                max_request_body: "int | None", token_budget: "int | None",
                models: "tuple[str, ...]") -> "ProxyHandle | None":
    """*First result.* A phase-scoped recording proxy in front of ``upstream_url`` (tier A), not started.

    Return a :class:`~gripprobe_core.drivers.ProxyHandle`; the runner awaits ``start()`` (``OSError``:
    proxy_bind_error), hands ``base_url`` to the agent and awaits ``stop()`` when the phase ends. The
    proxy writes one JSON line per exchange to ``record_path`` (SPEC §5 keys). Return ``None`` for an
    upstream you cannot relay (the case's proxy is then ``unsupported_backend``). ``ctx`` is the phase
    before routing (its ``base_url`` is the upstream). ``max_request_body`` is the request body cap in
    bytes (``--proxy-max-body``; ``None``: the proxy's default, 64 MiB). ``token_budget`` is the tokens
    the phase may spend (``--max-tokens-per-phase``; ``None``: no budget): past it the proxy refuses model
    calls and says so through ``ProxyHandle.token_budget_exceeded()``, and the runner stops the agent.
    ``models`` are the names the case's model goes by (``ctx.model_name``, the backend's ``model_id``, the
    driver's ``model_aliases``): the proxy forwards only model calls naming one of them and answers any
    other ``403`` ``model_not_under_test`` (recorded, never forwarded; its ``status()`` counts them as
    ``model_not_under_test``).
    """

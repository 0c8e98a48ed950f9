"""GripProbe's hook specifications, grouped by lifecycle: specs → env → proxy → run → parse → evaluate.

Plugins implement these with ``from gripprobe_core import hookimpl``. An implementation may accept any
subset of a hook's arguments, so new arguments never break old plugins. Hooks marked *first result*
stop at the first implementation that returns something other than ``None`` ("who handles this?").
Every hook here is listed in ``docs/hooks.md``; a test keeps the two in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from .phase import (
        AgentCommand, AgentInfo, ChallengeFactory, EvaluationInputs, InstallRecipe, MarkerPattern, PhaseContext, PhaseCapture,
        RouteDecision, Validator,
    )
    from .models.events import Event
    from .models.results import Verdict
    from .models.specs import BackendSpec, CliAgentSpec

hookspec = pluggy.HookspecMarker("gripprobe")


# --------------------------------------------------------------------------------------------- specs

@hookspec
def register_agents(register: "Callable[[AgentInfo], None]") -> None:
    """Register the CLI agents this plugin drives.

    Call ``register(AgentInfo(name=..., observability=...))`` once per agent. ``name`` is what a
    cli_agents spec puts in ``plugin:``. Two plugins registering the same name is an error that names
    both distributions.
    """


@hookspec
def register_validators(register: "Callable[[str, Validator], None]") -> None:
    """Register validator kinds: ``register(kind, fn)``.

    ``fn(ctx: ValidatorContext, options: dict) -> ValidatorResult`` judges the measured workspace.
    ``options`` are the validator's keys from the test spec (without ``kind``). A validator must not
    raise for bad agent output: it returns ``passed=False`` with what it observed. It sets
    ``source`` when one event produced the value it judged.
    """


@hookspec
def register_challenge_servers(register: "Callable[[str, ChallengeFactory], None]") -> None:
    """Register challenge server kinds: ``register(kind, factory)``.

    ``factory(options, phase)`` returns an unstarted :class:`~gripprobe_core.phase.ChallengeServer`
    bound to 127.0.0.1 on port 0 when started. Its ``facts`` (nonce, token, expected answers ...) must
    differ between phases; ``requests`` is its request log, written into the case directory.
    """


@hookspec
def register_oracle_dialects(register: "Callable[[str, Any], None]") -> None:
    """Teach the oracle backend how an agent expects actions to be said: ``register(name, dialect)``.

    ``dialect`` is an :class:`gripprobe_core.oracle.dialects.Dialect`. The built-in ``tools`` dialect
    maps reference actions onto whatever function tools the request offers; agents whose edits are
    parsed from reply text (aider's whole/diff/udiff, gptme's markdown/xml) register text dialects.
    """


@hookspec(firstresult=True)
def agent_install_recipe(agent: "CliAgentSpec") -> "InstallRecipe | None":
    """*First result.* How to install this agent at its pinned version (``gripprobe agents install``).

    Return ``None`` unless ``agent.plugin`` is yours, or when the agent needs no install (the reference
    agent). PyPI agents go into their own venv, npm agents into ``npm install --prefix``, both under the
    agent cache (``~/.cache/gripprobe/agents/<agent>-<version>`` unless ``GRIPPROBE_AGENT_CACHE`` is set).
    The runner hands the installed executable to ``build_command`` as ``ctx.agent_executable``.
    """


# ----------------------------------------------------------------------------------------------- env

@hookspec(firstresult=True)
def build_env(agent: "CliAgentSpec", ctx: "PhaseContext") -> "dict[str, str] | None":
    """*First result.* Environment variables the agent needs for this phase, beyond the allowlist.

    Return ``None`` unless ``agent.plugin`` is yours. Write any config files the agent reads into
    ``ctx.home`` (or its XDG dirs) here. HOME, XDG_* and TMPDIR are already fresh and set by the
    runner; the runner's own environment is never passed on except the allowlist (PATH, LANG, LC_*,
    TZ, TERM). Put the API key (``ctx.api_key``) here if the agent needs one.
    """


@hookspec(firstresult=True)
def build_command(agent: "CliAgentSpec", ctx: "PhaseContext") -> "AgentCommand | None":
    """*First result.* The command that runs the agent for this phase.

    Return ``None`` unless ``agent.plugin`` is yours. ``argv[0]`` may be a bare name: the runner looks
    for it next to the running Python first, then on PATH. ``stdin`` is fed then closed; without it
    the agent's stdin is /dev/null.
    """


@hookspec(firstresult=True)
def route_base_url(agent: "CliAgentSpec", backend: "BackendSpec") -> "RouteDecision | None":
    """*First result.* Can this agent be pointed at an arbitrary base URL (the recording proxy's)?

    Return ``RouteDecision(routable=False, reason="unsupported_shell")`` when it cannot; the proxy is
    then skipped in ``auto`` mode and the case is HARNESS_ERROR in ``force`` mode.
    """


# --------------------------------------------------------------------------------------------- proxy

@hookspec(firstresult=True)
def start_proxy(ctx: "PhaseContext", upstream_url: str, record_path: "Path", max_request_body: "int | None") -> Any:
    """*First result.* Start a phase-scoped recording proxy in front of ``upstream_url`` (tier A).

    Return an object with ``base_url`` (str) and ``async stop()``; the runner hands ``base_url`` to
    the agent and stops the proxy when the phase ends. The proxy writes one JSON line per exchange
    to ``record_path``. Raise ``OSError`` when the port cannot be bound (proxy_bind_error).
    ``max_request_body`` is the request body cap in bytes (``--proxy-max-body``; ``None``: the
    proxy's default, 64 MiB): a larger request gets ``413`` and is never forwarded.
    """


# ----------------------------------------------------------------------------------------------- run

@hookspec
def phase_artifacts(agent: "CliAgentSpec", ctx: "PhaseContext") -> "dict[str, Path] | None":
    """Files the agent left outside stdout/stderr that parsers need (session files, logs), by name.

    Called after the agent exits. The runner copies each existing file into the case's artifacts as
    ``<phase>.<name>`` and passes the copies to :func:`parse_wrapper_events` in ``outputs.extra``.
    """


# --------------------------------------------------------------------------------------------- parse

@hookspec
def parse_wrapper_events(agent: "CliAgentSpec", ctx: "PhaseContext", outputs: "PhaseCapture") -> "list[Event] | None":
    """Turn an agent's outputs and logs into normalized events (tiers B, C, D).

    Every implementation is called; return ``None`` when the outputs are not yours to parse, or a
    list (possibly empty) of events. Set ``source_tier``, ``source`` and ``raw_artifact_ref``;
    the runner fills run_id, case_id, phase, sequence and event ids it can. Raise
    :class:`gripprobe_core.errors.WrapperParseError` when a required artifact is unreadable
    (the case becomes HARNESS_ERROR / wrapper_parse_error). Never raise anything else on bad bytes.
    """


@hookspec
def tier_c_patterns(agent: "CliAgentSpec") -> "list[MarkerPattern] | None":
    """Text markers in this agent's stdout/stderr that show a tool ran (tier C).

    The generic tier C parser (an in-core default plugin) applies every pattern returned for the agent
    to its outputs, line by line. Return ``None`` unless ``agent.plugin`` is yours. Prefer markers the
    agent prints only when the tool really ran (``Applied edit to <file>``), never echoes of the prompt.
    """


@hookspec(firstresult=True)
def final_output_text(agent: "CliAgentSpec", ctx: "PhaseContext", outputs: "PhaseCapture") -> "str | None":
    """*First result.* The agent's final answer text for this phase, for the tier D self-report parser.

    Return ``None`` unless ``agent.plugin`` is yours. Claims found in it ("I created hello.txt") become
    tier D events, which can explain a verdict but never confirm tool use.
    """


# ------------------------------------------------------------------------------------------ evaluate

@hookspec(firstresult=True)
def evaluate(inputs: "EvaluationInputs") -> "Verdict | None":
    """*First result.* The canonical verdict of a case.

    The built-in ``event_evaluator`` (SPEC §6) answers last; a plugin overriding it must keep the
    result contract. Must be a pure function of ``inputs``.
    """

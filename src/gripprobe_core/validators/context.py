"""What a validator may look at (:class:`ValidatorContext`) and what a validator is (:data:`Validator`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from ..models.events import Event
from ..models.results import ValidatorResult
from ..models.specs import TestSpec


@dataclass(frozen=True)
class ValidatorContext:
    """What a validator may look at. Validators read; they never change the workspace."""

    workspace: Path
    test: TestSpec
    run_values: Mapping[str, Any]
    """Values fixed at run time: ``today`` (YYYY-MM-DD), ``next_week_heading`` ... (recorded in case.json)."""
    challenge: Mapping[str, Any]
    """The measured phase's challenge facts (nonce, payload, token, ...), empty without a challenge."""
    challenge_requests: list[dict[str, Any]]
    """The measured phase's challenge request log."""
    events: list[Event]
    """The measured phase's normalized events, in sequence order."""
    agent_workspace: str | None = None
    """The measured workspace path as the agent saw it, when ``workspace`` is elsewhere (the harness's
    copy). None means ``workspace`` itself; ``workspace_path`` checks use this."""
    sandbox: Any = None
    """Where a validator that runs anything (``command_output``: the agent's work) runs it
    (``runner.sandbox.Sandbox``): every such command goes through ``sandbox.wrap(argv, ...)``, which confines it
    like the agent, leaves it as is only where the run chose ``--sandbox none``, and raises where there is no
    sandbox for code that must not run unconfined (a recompute without bubblewrap). None: unconfined (a
    validator called outside the harness, e.g. in a plugin's own tests)."""
    final_text: str | None = None
    """The agent's final answer in the measured phase, as its driver read it (None: none was read)."""


Validator = Callable[[ValidatorContext, dict[str, Any]], ValidatorResult]
"""``fn(ctx, options) -> ValidatorResult`` (see :func:`gripprobe_core.hookspecs.register_validators`)."""

V = TypeVar("V", bound=Callable[..., Any])


def runs_code(fn: V) -> V:
    """Mark a validator that runs anything (a command, the agent's code): during ``rebuild-reports
    --recompute`` it runs only where the sandbox works, and where it does not, it is not run and the case says
    why (HARNESS_ERROR ``sandbox_unavailable``). Run its commands through ``ctx.sandbox.wrap``."""
    fn.runs_code = True  # type: ignore[attr-defined]
    return fn


def validator_runs_code(fn: Any) -> bool:
    """Whether ``fn`` is marked :func:`runs_code`."""
    return getattr(fn, "runs_code", False) is True

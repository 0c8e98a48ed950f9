"""What a validator may look at (:class:`ValidatorContext`) and what a validator is (:data:`Validator`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

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
    """The run's sandbox (``runner.sandbox.Sandbox``): a validator that runs a command on the agent's
    work (``command_output``) runs it confined like the agent. None: unconfined."""


Validator = Callable[[ValidatorContext, dict[str, Any]], ValidatorResult]
"""``fn(ctx, options) -> ValidatorResult`` (see :func:`gripprobe_core.hookspecs.register_validators`)."""

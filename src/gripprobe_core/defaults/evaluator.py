"""Default plugin ``event_evaluator``: the core's canonical verdict answers the ``evaluate`` hook, last."""

from __future__ import annotations

from .. import hookimpl
from ..evaluator import EvaluationInputs, event_evaluator
from ..models.results import Verdict


@hookimpl(trylast=True)
def evaluate(inputs: EvaluationInputs) -> Verdict:
    """The canonical verdict (SPEC §6); a plugin registered with a plain hookimpl answers first."""
    return event_evaluator(inputs)

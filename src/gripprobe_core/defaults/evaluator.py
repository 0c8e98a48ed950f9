"""Default plugin ``event_evaluator``: registers the core's canonical verdict (SPEC §6) as the judge named
``event_evaluator``, the one every case gets unless its suite names another (``judge:``)."""

from __future__ import annotations

from typing import Callable

from .. import hookimpl
from ..evaluator import EVALUATOR_NAME, Evaluator, event_evaluator


@hookimpl
def register_evaluators(register: Callable[[str, Evaluator], None]) -> None:
    register(EVALUATOR_NAME, event_evaluator)

"""The ranges numbers must fall in, wherever they enter: specs, the command line, stored runs, the wire.

A number outside its range is never clamped into it silently where a person wrote it (a spec, an option:
one line with the fix) and never believed where something else wrote it (a stored case.json that breaks
a range is not a valid result; a usage figure from the wire past belief is unknown). ``nan`` and
``inf`` are outside every range. The limits are far beyond any real run, so only a mistake or a forgery
reaches them:

=====================  ====================================  ==========================================
what                   range                                 where
=====================  ====================================  ==========================================
scores, matches        0 … 1                                 verdict, telemetry confidence
trials                 1 … ``TRIALS_MAX`` (100)              ``--trials``, suite ``trials``, case keys
counts                 0 … ``COUNT_MAX`` (10^15)             tokens, calls, bytes, events of a case
one call's tokens      0 … ``CALL_TOKENS_MAX`` (10^9)        usage read from the wire (more: unknown)
timeouts               > 0 … ``TIMEOUT_MAX_S`` (1 day)       specs' ``timeout_s``, ``--timeout``
durations              0 … ``SECONDS_MAX`` (10^7 s)          stored durations, latencies (ms: × 1000)
rates                  0 … ``COUNT_MAX`` tokens/s            output tokens per second
prices                 0 … ``PRICE_MAX`` per million tokens  a model's ``pricing``
costs                  0 … ``COST_MAX`` (10^18)              usage ``cost``
=====================  ====================================  ==========================================
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

__all__ = [
    "CALL_TOKENS_MAX", "COST_MAX", "COUNT_MAX", "Count", "Cost", "Millis", "PRICE_MAX", "Rate", "SECONDS_MAX",
    "Score", "Seconds", "TIMEOUT_MAX_S", "TRIALS_MAX", "FiniteTree", "finite_tree", "is_finite_number", "saturate",
]

TRIALS_MAX = 100
COUNT_MAX = 10**15
CALL_TOKENS_MAX = 10**9
TIMEOUT_MAX_S = 86_400.0
SECONDS_MAX = 10_000_000.0
PRICE_MAX = 1_000_000.0
COST_MAX = 1e18
JSON_DEPTH_MAX = 64

Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""A score or match in [0, 1]."""
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
"""A count of tokens, calls, bytes or events."""
Seconds = Annotated[float, Field(ge=0.0, le=SECONDS_MAX, allow_inf_nan=False)]
"""A duration in seconds."""
Millis = Annotated[float, Field(ge=0.0, le=SECONDS_MAX * 1000, allow_inf_nan=False)]
"""A duration in milliseconds."""
Rate = Annotated[float, Field(ge=0.0, le=float(COUNT_MAX), allow_inf_nan=False)]
"""Tokens per second."""
Cost = Annotated[float, Field(ge=0.0, le=COST_MAX, allow_inf_nan=False)]
"""What tokens cost, in the pricing's currency."""


def is_finite_number(value: Any) -> bool:
    """An int or a finite float (never a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def saturate(value: int, limit: int = COUNT_MAX) -> int:
    """``value`` kept at or below ``limit`` (sums of believable figures stay believable)."""
    return value if value <= limit else limit


def _finite_tree(value: Any, where: str, depth: int = 0) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            shown = ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
            raise ValueError(f"{where or 'the value'} is {shown}, not a finite number; write a finite number")
    elif isinstance(value, (dict, list)):
        if depth >= JSON_DEPTH_MAX:
            raise ValueError(f"{where or 'the value'} is nested more than {JSON_DEPTH_MAX} levels deep")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            _finite_tree(v, f"{where}[{k}]" if isinstance(k, int) else (f"{where}.{k}" if where else str(k)),
                         depth + 1)


def finite_tree(value: Any) -> Any:
    """``value`` (JSON-like data) unchanged; ``ValueError`` naming the place when a float anywhere in it is
    nan or infinite, or it nests deeper than ``JSON_DEPTH_MAX``. For free-form data (options, mappings of a
    stored result)."""
    _finite_tree(value, "")
    return value


FiniteTree = AfterValidator(finite_tree)
"""Use as ``Annotated[dict[str, Any], FiniteTree]``."""

"""Numbering a driver's events: the one tier-B event builder every agent parser uses.

A parser reads its agent's output in file order and calls :meth:`EventBuilder.add` for each event it
finds; the builder numbers them ``<phase>-<tier>-<n>`` (sequence ``n``), stamps phase, tier, source and
``raw_artifact_ref`` (``<file>:<line>``), and drops — never raises for — an event the :class:`Event`
model refuses (agent output is untrusted: a field of the wrong type costs that event only).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from ..models.events import Event

__all__ = ["EventBuilder", "mapping", "number", "text"]


class EventBuilder:
    """Collects one phase's events from one artifact (see the module docstring).

    ``first`` is the sequence number of the first event (to continue another builder's numbering)."""

    def __init__(self, phase: str, file_name: str, *, tier: str = "B", source: str = "agent_output",
                 first: int = 1) -> None:
        self.phase, self.file_name, self.tier, self.source, self.first = phase, file_name, tier, source, first
        self.events: list[Event] = []

    def add(self, line: int | None, **fields: Any) -> Event | None:
        """Add an event (``event_type``, ``payload`` ... as keywords) read at ``line`` of the artifact
        (None: no line; the reference is the file alone). Returns it, or None when it was not valid."""
        n = self.first + len(self.events)
        ref = fields.pop("raw_artifact_ref", None) or (f"{self.file_name}:{line}" if line is not None else self.file_name)
        try:
            event = Event(event_id=f"{self.phase}-{self.tier}-{n}", sequence=n, phase=self.phase,
                          source_tier=self.tier, source=self.source, raw_artifact_ref=ref, **fields)
        except (ValidationError, ValueError, TypeError):
            return None
        self.events.append(event)
        return event

    @property
    def last(self) -> Event | None:
        return self.events[-1] if self.events else None


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None (for fields read from untrusted JSON)."""
    return value if isinstance(value, str) else None


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object (dict), else an empty one (for nested fields of untrusted JSON)."""
    return value if isinstance(value, dict) else {}


def number(value: Any, *, minimum: float | None = None) -> float | None:
    """``value`` as a finite float (and ≥ ``minimum`` when given), else None; booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    if not math.isfinite(f) or (minimum is not None and f < minimum):
        return None
    return f

"""Incremental NDJSON decoder (Ollama's native streams): bytes cut anywhere → one value per line.

Each non-blank line is parsed as JSON. A line that is not JSON is kept as :class:`Garbage` (its text)
rather than raising, so a caller can record it and carry on. Lines end with ``\\n`` or ``\\r\\n``
(a lone ``\\r`` too, see :class:`~.lines.LineSplitter`); a last line without a terminator is
returned by :meth:`NDJSONDecoder.close`. Memory: one partial line, at most ``max_line`` bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .lines import DEFAULT_MAX_LINE, LineSplitter

__all__ = ["BLANK", "Garbage", "NDJSONDecoder", "decode_ndjson", "loads_or_none", "parse_line"]


@dataclass(frozen=True)
class Garbage:
    """A line that did not parse as JSON."""

    text: str


BLANK = object()
"""What :func:`parse_line` returns for a blank line."""


def loads_or_none(text: str | bytes, default: Any = None) -> Any:
    """``json.loads(text)``, or ``default`` when it is not JSON (never raises)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError, TypeError):
        return default


class NDJSONDecoder:
    """Feed bytes, get the parsed values (or :class:`Garbage`) of the lines they complete."""

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._lines = LineSplitter(max_line=max_line)

    @property
    def overflow(self) -> int:
        return self._lines.overflow

    def feed(self, chunk: bytes) -> list[Any]:
        return [v for line in self._lines.feed(chunk) if (v := parse_line(line)) is not BLANK]

    def close(self) -> list[Any]:
        return [v for line in self._lines.close() if (v := parse_line(line)) is not BLANK]


def parse_line(line: bytes) -> Any:
    """A line's JSON value, :class:`Garbage`, or :data:`BLANK`."""
    if not line.strip():
        return BLANK
    value = loads_or_none(line, Garbage)
    if value is Garbage:
        return Garbage(line.decode("utf-8", "replace"))
    return value


def decode_ndjson(data: bytes) -> list[Any]:
    """Every value of a complete NDJSON body."""
    dec = NDJSONDecoder()
    return dec.feed(data) + dec.close()

"""Option types that check a value where it enters: numbers finite and in range, paths short enough.

Every number option refuses ``nan`` and ``inf`` (click's own float ranges take them: ``nan`` compares
false with every bound), and every path option refuses a name the file system cannot hold, with click's
usual ``Error: Invalid value for '--opt': …`` line and exit 2, before any work.
"""

from __future__ import annotations

import math
from typing import Any

import click


__all__ = ["FiniteFloat", "PathArg"]


class FiniteFloat(click.FloatRange):
    """A float in ``[min, max]`` (open ends as with :class:`click.FloatRange`); ``nan``, ``inf`` and a number
    too large to be a float are refused with the range."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) and math.isfinite(value):
            return super().convert(value, param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is not None and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number; give a number {self._describe_range()}", param, ctx)
        return super().convert(value, param, ctx)


class PathArg(click.Path):
    """:class:`click.Path`, refusing a path with a component over 255 bytes or longer than 4,095 bytes in
    all (``ENAMETOOLONG`` later, anywhere) with one line."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..store.names import path_problem  # the store package imports the models: only when a path is given

        problem = path_problem(value) if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__") else None
        if problem is not None:
            self.fail(f"this path cannot be used: {problem}", param, ctx)
        return super().convert(value, param, ctx)

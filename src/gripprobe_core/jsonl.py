"""JSON lines as agents and the harness write them: one object per line, anything else skipped."""

from __future__ import annotations

import json
from typing import Any, Iterator


def json_lines(data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of ``data`` that is a JSON object. Lines that are not
    JSON, or JSON but not an object, are skipped (their numbers still count). Never raises."""
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield lineno, obj

"""Tier C: tool events from text markers in an agent's stdout/stderr.

:func:`parse_markers` applies :class:`~gripprobe_core.phase.MarkerPattern` regular expressions
(the agent driver's ``markers``) to an agent's outputs, line by line, and
turns each match into a ``tool_call_start`` or ``tool_call_result`` event (source ``wrapper``, tier C).
Named groups: ``tool`` (raw tool name), ``args`` (argument text, parsed if JSON), ``id`` (tool call
id), ``path`` (a file the call touched), ``code`` (an exit code: 0 → success, else error). ANSI colour
codes are removed before matching; a line is matched on its first 64 KiB. A pattern that does not
compile is skipped; a missing output file has nothing to parse (capture_missing is the runner's
call); a file that exists but cannot be read raises :class:`~gripprobe_core.errors.WrapperParseError`.
Each line yields at most one event per pattern; events follow file order (stdout first, then stderr).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from ..phase import MarkerPattern
from ..errors import WrapperParseError
from ..models.events import Event
from .toolnames import GENERIC, ToolNames

__all__ = ["LINE_LIMIT", "compile_patterns", "parse_markers", "strip_ansi"]

LINE_LIMIT = 64 * 1024
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_STATUSES = frozenset({"started", "success", "error", "timeout", "unknown"})


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, cursor moves, OSC titles)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def compile_patterns(patterns: Iterable[Any]) -> list[tuple[MarkerPattern, re.Pattern[str]]]:
    """The usable patterns with their compiled regexes; bad ones are dropped."""
    out = []
    for pattern in patterns or []:
        if not isinstance(pattern, MarkerPattern) or not isinstance(pattern.regex, str):
            continue
        try:
            out.append((pattern, re.compile(pattern.regex)))
        except (re.error, RecursionError, OverflowError, ValueError):
            continue
    return out


def _group(match: re.Match[str], name: str) -> str | None:
    try:
        value = match.group(name)
    except IndexError:  # no such group in this pattern
        return None
    return value if isinstance(value, str) else None


def _arguments(args: str | None, path: str | None) -> Any:
    if args is not None:
        try:
            return json.loads(args)
        except (ValueError, RecursionError):
            return args
    if path is not None:
        return {"path": path}
    return None


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            yield lineno, strip_ansi(raw[:LINE_LIMIT].decode("utf-8", "replace").rstrip("\r\n"))


def parse_markers(patterns: Iterable[MarkerPattern], stdout_path: Path | None, stderr_path: Path | None,
                  phase: str, tool_names: ToolNames = GENERIC) -> list[Event]:
    """Tier C events from ``patterns`` matched against the two output files (see the module docstring);
    tool names normalized with ``tool_names`` (the agent driver's table)."""
    compiled = compile_patterns(patterns)
    events: list[Event] = []
    if not compiled:
        return events
    for stream, path in (("stdout", stdout_path), ("stderr", stderr_path)):
        if path is None:
            continue
        path = Path(path)
        if not path.exists():
            continue
        usable = [(p, rx) for p, rx in compiled if p.stream in (stream, "both")]
        if not usable:
            continue
        try:
            for lineno, line in _lines(path):
                for pattern, rx in usable:
                    try:
                        match = rx.search(line)
                    except (RecursionError, re.error):
                        match = None
                    if match is not None:
                        event = _event(pattern, match, phase, f"{path.name}:{lineno}", len(events) + 1, tool_names)
                        if event is not None:
                            events.append(event)
        except OSError as exc:
            raise WrapperParseError(f"cannot read {path}: {exc}") from exc
    return events


def _event(pattern: MarkerPattern, match: re.Match[str], phase: str, ref: str, n: int,
           tool_names: ToolNames) -> Event | None:
    raw_name = _group(match, "tool") or pattern.tool or pattern.name
    name, kind = tool_names.normalize(raw_name)
    if pattern.kind is not None:
        kind = pattern.kind
    code_text = _group(match, "code")
    exit_code = None
    status = pattern.status if pattern.status in _STATUSES else "unknown"
    if code_text is not None:
        try:
            exit_code = int(code_text.strip())
        except ValueError:
            exit_code = None
        if exit_code is not None and pattern.event_type == "tool_call_result":
            status = "success" if exit_code == 0 else "error"
    path = _group(match, "path")
    payload: dict[str, Any] = {"raw_name": raw_name, "name": name or None, "kind": kind,
                               "arguments": _arguments(_group(match, "args"), path),
                               "marker": pattern.name}
    if path is not None:
        payload["path"] = path
    try:
        return Event(event_type=pattern.event_type, event_id=f"{phase}-C-{n}", sequence=n,
                     phase=phase,  # type: ignore[arg-type]
                     tool_call_id=_group(match, "id"), source_tier="C", source="wrapper",
                     status=status,  # type: ignore[arg-type]
                     exit_code=exit_code, raw_artifact_ref=ref, payload=payload)
    except (ValidationError, ValueError, TypeError):
        return None

"""One problem found in a spec file, and how it is printed (``file:line: key.path: message``)."""

from __future__ import annotations

import difflib
import json
import os
import re

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

KeyPath = tuple[Any, ...]


def display_path(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it, else absolute."""
    try:
        absolute = Path(os.path.abspath(path))
        return str(absolute.relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def format_key_path(key_path: KeyPath, data: Any = None) -> str:
    """Render a key path the way a YAML author reads it: ``backends[0].model_id``.

    ``data`` (the plain document) tells list indexes from integer mapping keys; without it every
    ``int`` is rendered as an index.
    """
    out = ""
    cur = data
    for el in key_path:
        is_index = isinstance(cur, list) if data is not None else isinstance(el, int) and not isinstance(el, bool)
        if is_index:
            out += f"[{el}]"
        else:
            out += f"{'.' if out else ''}{_key_text(el)}"
        cur = _child(cur, el)
    return out


def _key_text(key: Any) -> str:
    """A key as written, or quoted (JSON style) when it is not a plain word."""
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)[:60]


_PLAIN_KEY = re.compile(r"[\w@/+:-]+(?:[ .][\w@/+:-]+)*")


def _child(cur: Any, el: Any) -> Any:
    if isinstance(cur, list) and isinstance(el, int) and not isinstance(el, bool) and -len(cur) <= el < len(cur):
        return cur[el]
    if isinstance(cur, dict):
        try:
            return cur.get(el)
        except TypeError:  # unhashable key in a loc: cannot happen with plain data, but stay total
            return None
    return None


@dataclass(frozen=True, order=True)
class SpecIssue:
    """A problem at ``file:line``; ``key`` is the rendered key path ('' for the whole document)."""

    file: str
    line: int
    key: str
    message: str

    def format(self) -> str:
        """One line, always: control characters from the file are escaped."""
        where = f"{_one_line(self.file)}:{self.line}: "
        text = f"{self.key}: {self.message}" if self.key else self.message
        return where + _one_line(text)


def _one_line(text: str) -> str:
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def make_issue(path: Path, line: int, key: str, message: str) -> SpecIssue:
    return SpecIssue(display_path(path), max(1, int(line)), key, message)


def suggest(word: Any, choices: Iterable[str]) -> str | None:
    """The closest of ``choices`` to ``word`` (difflib), or ``None`` when nothing is close."""
    if not isinstance(word, str):
        return None
    matches = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def short_list(names: Iterable[str], limit: int = 12) -> str:
    """``a, b, c`` (sorted), cut after ``limit`` names; ``none`` when empty."""
    items = sorted(set(names))
    if not items:
        return "none"
    head = ", ".join(items[:limit])
    return head if len(items) <= limit else f"{head}, … ({len(items) - limit} more)"

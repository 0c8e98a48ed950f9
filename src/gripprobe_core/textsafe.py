"""Untrusted text made safe to show: on a terminal, in a report, as a file name.

Text that came from disk (a case.json, a manifest, a directory name) or from an agent can hold terminal
control sequences (ESC ``[`` … CSI, ESC ``]`` … OSC, the 8-bit CSI ``\\x9b``, BEL, VT), bidi controls
that reorder what is shown (U+202E RIGHT-TO-LEFT OVERRIDE …) and, in file names, bytes that are not UTF-8
(kept by Python as lone surrogates, which crash any UTF-8 encoder). The one set of conversions every
report uses (HTML pages, Markdown, terminal lines, JUnit, OTLP attributes):

- :func:`safe_text` for any text shown to a user (terminal lines, report values, error messages quoting
  file content): every C0 control except newline and tab, DEL, every C1 control, every bidi control,
  U+2028/U+2029 and every lone surrogate is replaced by a visible escape (``\\x1b``, ``\\x9b``, ``\\u202e``,
  ``\\xff`` for an undecodable byte ``0xff``, ``\\ud800``).
- :func:`safe_name` for a file name or path: the same, newline and tab escaped too (a name is one line), and
  zero-width characters (an invisible difference between two names) as well.
- :func:`safe_cell` for one cell of a table (Markdown, a terminal row): :func:`safe_text` on one line.
- :func:`inert` for data handed on as data (the JSON a page's script draws from): every string through
  :func:`safe_text`, every non-finite number ``None``.

The result is always valid UTF-8 text without a control character, so printing it can neither steer
the terminal nor raise.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

__all__ = ["BIDI_CONTROLS", "ZERO_WIDTH", "inert", "safe_cell", "safe_name", "safe_text"]

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Arabic letter mark, LRM, RLM, the embeddings and overrides (LRE … RLO) and the isolates (LRI … PDI)."""
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
# C0 except \t (0x09) and \n (0x0a), DEL, C1, bidi controls, the line and paragraph separators, and the
# surrogate block (lone surrogates only exist in a str when they came from surrogateescape decoding or from
# a JSON "\ud800" escape).
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}\u2028\u2029\ud800-\udfff]")
_UNSAFE_NAME = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}{ZERO_WIDTH}\u2028\u2029\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:  # an undecodable byte kept by surrogateescape: show the byte
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def safe_text(value: Any) -> str:
    """``value`` as text with control characters and lone surrogates escaped (newline and tab kept)."""
    s = value if isinstance(value, str) else str(value)
    if s.isascii() and s.isprintable():  # nothing to escape (the common case): no regex pass
        return s
    return _UNSAFE.sub(_escape, s)


def safe_name(name: str | bytes | os.PathLike) -> str:
    """A file name or path (``str``, ``bytes`` or path object) as one line of displayable text.

    Bytes are decoded as the file system does (undecodable bytes kept, then shown as ``\\xNN``); every
    control character, newline and tab included, is escaped. Never raises."""
    s = os.fsdecode(name) if isinstance(name, (bytes, os.PathLike)) else str(name)
    return _UNSAFE_NAME.sub(_escape, s)


def safe_cell(value: Any) -> str:
    """One table cell (Markdown, a terminal row) as safe text on one line: ``None`` is empty, newlines and
    tabs become spaces, every other control character is escaped (:func:`safe_text`)."""
    if value is None:
        return ""
    return safe_text(value).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def inert(value: Any, depth: int = 0) -> Any:
    """A copy of JSON-like ``value`` whose strings (mapping keys too) went through :func:`safe_text` and whose
    non-finite floats are ``None``: data a page's script turns into text can no longer carry an escape."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > 64:
        return None
    if isinstance(value, dict):
        return {safe_text(k) if isinstance(k, str) else k: inert(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [inert(v, depth + 1) for v in value]
    return value

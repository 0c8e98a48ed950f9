"""Untrusted text made safe to show: on a terminal, in a report, as a file name.

Text that came from disk (a case.json, a manifest, a directory name) or from an agent can hold terminal
control sequences (ESC ``[`` … CSI, ESC ``]`` … OSC, the 8-bit CSI ``\\x9b``) and, in file names, bytes
that are not UTF-8 (kept by Python as lone surrogates, which crash any UTF-8 encoder). Two functions:

- :func:`safe_text` for any text shown to a user (terminal lines, error messages quoting file content):
  every C0 control except newline and tab, DEL, every C1 control and every lone surrogate is replaced
  by a visible escape (``\\x1b``, ``\\x9b``, ``\\xff`` for an undecodable byte ``0xff``, ``\\ud800``).
- :func:`safe_name` for a file name or path: the same, newline and tab escaped too (a name is one line).

The result is always valid UTF-8 text without a control character, so printing it can neither steer
the terminal nor raise.
"""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["safe_name", "safe_text"]

# C0 except \t (0x09) and \n (0x0a), DEL, C1, and the surrogate block (lone surrogates only exist in a
# str when they came from surrogateescape decoding or from a JSON "\ud800" escape).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_NAME = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:  # an undecodable byte kept by surrogateescape: show the byte
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def safe_text(value: Any) -> str:
    """``value`` as text with control characters and lone surrogates escaped (newline and tab kept)."""
    s = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, s)


def safe_name(name: str | bytes | os.PathLike) -> str:
    """A file name or path (``str``, ``bytes`` or path object) as one line of displayable text.

    Bytes are decoded as the file system does (undecodable bytes kept, then shown as ``\\xNN``); every
    control character, newline and tab included, is escaped. Never raises."""
    s = os.fsdecode(name) if isinstance(name, (bytes, os.PathLike)) else str(name)
    return _UNSAFE_NAME.sub(_escape, s)

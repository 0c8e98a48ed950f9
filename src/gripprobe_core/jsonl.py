"""JSON lines as agents and the harness write them: one object per line, anything else skipped; :func:`loads`,
the fast strict parse of stored JSON; and :func:`dumps`, the one way the harness writes JSON (strict, inert)."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable, Iterator

import msgspec

# msgspec, not orjson (both measured on a real case's files, docs/aggregate.md "Scale"): as fast (case.json
# 22 vs 18 us, events 6.8 vs 6.7 us a file, json 48 and 22), and where either accepts a text its value is the
# one json.loads gives, while orjson turns an integer past 64 bits into a float.
_DECODE = msgspec.json.Decoder().decode


def loads(data: bytes | str) -> Any:
    """``json.loads(data)`` for strict JSON, about 2-3x faster; stricter: ``NaN``, ``Infinity``, a number past
    float range, a lone surrogate escape, a byte order mark and invalid UTF-8 raise :class:`ValueError` (where
    json.loads gives ``nan``, ``inf`` or the surrogate), as does nesting too deep. Where it returns, the value is
    the one json.loads returns (the last of duplicate keys wins, integers of any size stay exact)."""
    try:
        return _DECODE(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def json_lines(data: bytes, only: Iterable[bytes] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of ``data`` that is a JSON object. Lines that are not
    JSON, or JSON but not an object, are skipped (their numbers still count). Never raises.

    ``only`` (byte strings, e.g. ``(b"tool_call_",)``): a caller that needs only objects whose text holds one
    of them says so, and the other lines are skipped unparsed (a line with a backslash is always parsed: an
    escape could spell the word). Each line is parsed by :func:`loads`; one it refuses is parsed again the
    lenient way this always did (``json.loads`` of the text, invalid UTF-8 replaced), so what is yielded is
    exactly what json.loads yields, only faster."""
    needles = tuple(only)
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if needles and b"\\" not in raw and not any(n in raw for n in needles):
            continue
        try:
            obj = _DECODE(raw)
        except (ValueError, RecursionError):
            try:
                obj = json.loads(raw.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
        if isinstance(obj, dict):
            yield lineno, obj


# JSON never holds a raw C0 control (json escapes those); DEL, the C1 controls, the line and paragraph
# separators and the bidi controls it leaves raw with ensure_ascii=False. They only ever sit inside strings,
# where the escape is the same character again.
_RAW_CONTROLS = re.compile("[\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _finite_copy(value: Any, depth: int = 0) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > 200:
        return None
    if isinstance(value, dict):
        return {k: _finite_copy(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_copy(v, depth + 1) for v in value]
    return value


# The same characters, UTF-8 encoded (a match can only start at a character's first byte in valid UTF-8).
_RAW_CONTROLS_UTF8 = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8\xa9\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def _escape_utf8(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8"))


_ENCODE = msgspec.json.Encoder(enc_hook=str).encode  # default=str, as json_bytes writes an odd value


def dumps_pretty(obj: Any) -> bytes:
    """:func:`dumps` of plain JSON data (dicts with string keys, lists, tuples, strings, numbers, booleans, None)
    with ``indent=2, ensure_ascii=False``, as UTF-8 bytes ending in a newline, made by msgspec: about 10x faster
    and a fraction of the memory for a large report. The same value (``json.loads`` of both is equal); a float
    may be spelled differently (``1e16`` for ``1e+16``). Non-finite floats are written ``null``; DEL, C1
    controls, U+2028, U+2029 and bidi controls as ``\\u`` escapes, as :func:`dumps` writes them. Not for a file
    a signature covers (``store.layout.json_bytes`` is that spelling)."""
    text = msgspec.json.format(_ENCODE(obj), indent=2)
    return _RAW_CONTROLS_UTF8.sub(_escape_utf8, text) + b"\n"


def dumps(obj: Any, **kwargs: Any) -> str:
    """JSON text as RFC 8259 has it, and inert on a terminal: never ``NaN`` or ``Infinity`` (a non-finite
    float that reached this far is written ``null``), and DEL, C1 controls, U+2028, U+2029 and bidi controls
    written as ``\\u`` escapes. Takes :func:`json.dumps`'s keyword arguments (``allow_nan`` is always False).

    Every JSON file the harness writes goes through here; the values are normally checked long before
    (docs/result-contract.md "Values"), so the fallback copy is a last line, not the check."""
    kwargs["allow_nan"] = False
    try:
        text = json.dumps(obj, **kwargs)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        text = json.dumps(_finite_copy(obj), **kwargs)
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

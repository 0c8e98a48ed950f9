"""What an id may look like: plain lowercase ASCII, so that it reads as what it is and names a folder safely.

Ids name models, backends, agents, tests, suites, formats and hardware profiles. They are shown in every
report, typed on the command line, and joined into a case's folder name (``agent__model__backend__format__test``,
``__t<n>`` for trials after the first). The rule, in the style of tags (docs/specs.md):

- lowercase ASCII letters and digits, words joined by one ``-``, ``_`` or ``.``: ``oracle-perfect``,
  ``save_file``, ``qwen2.5-7b``; not ``Save_File``, ``a__b``, ``-x``, ``x.``;
- at most ``ID_MAX[kind]`` characters (64 for models, tests, suites and hardware profiles, 32 for agents
  and backends, 16 for formats), so that a case folder name is at most 222 bytes whatever the ids, and
  its report page (``.<case>.html.<12 hex>.tmp`` while written) fits the file system's 255.

So a bidi control (U+202E), a zero-width character (U+200B) or a letter from another script that looks like
a Latin one (Cyrillic ``е``) can never make two different ids read the same, and since no id holds ``__``
or starts or ends with ``_``, the parts of a case folder name are found again by splitting it at ``__``:
two different cases never share a folder (property-tested).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

__all__ = ["ID_MAX", "ID_PATTERN", "AgentId", "BackendId", "FormatId", "HardwareId", "ModelId", "SuiteId", "TestId",
           "check_id", "id_problem"]

ID_PATTERN = r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$"
_ID_RE = re.compile(ID_PATTERN)
ID_MAX: dict[str, int] = {"model": 64, "test": 64, "suite": 64, "hardware profile": 64, "agent": 32,
                          "backend": 32, "format": 16}

# Letters of other scripts that look like a Latin letter (Unicode's confusables, the common ones).
_LOOKALIKE = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k", "ӏ": "l",
    "м": "m", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "ц": "u", "ѵ": "v", "ԝ": "w",
    "х": "x", "у": "y", "ѡ": "w", "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "γ": "y",
})


_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e\u00ad")
_BIDI_CONTROLS = frozenset({"RLO", "LRO", "RLE", "LRE", "PDF", "RLI", "LRI", "FSI", "PDI"})
_BIDI_MARKS = frozenset("\u200e\u200f\u061c")


def _lookalike(c: str) -> str | None:
    """The ASCII letter or digit ``c`` looks like (Cyrillic ``е`` → ``e``, fullwidth ``ｅ`` → ``e``), or None."""
    t = c.translate(_LOOKALIKE)
    if t != c:
        return t
    compat = unicodedata.normalize("NFKC", c)
    return compat.lower() if len(compat) == 1 and compat.isascii() and compat.isalnum() else None


def _nearest_ascii(c: str) -> str | None:
    """A lookalike's letter, else the letter under an accent (``é`` → ``e``), else None."""
    base = unicodedata.normalize("NFKD", c)[:1]
    return _lookalike(c) or (base.lower() if base.isascii() and base.isalnum() else None)


def _describe(c: str) -> str:
    name = unicodedata.name(c, "unnamed")
    if c in _ZERO_WIDTH:
        kind = "an invisible zero-width character"
    elif unicodedata.bidirectional(c) in _BIDI_CONTROLS or c in _BIDI_MARKS:
        kind = "a bidi control, which reorders what is shown"
    elif unicodedata.category(c).startswith("C"):
        kind = "a control character"
    elif c.isspace():
        kind = "white space"
    elif (look := _lookalike(c)) is not None:
        kind = f"which looks like the ASCII {look!r}"
    else:
        kind = "not ASCII"
    return f"U+{ord(c):04X} {name} ({kind})"


def _plain_guess(value: str) -> str | None:
    """The id the author most likely meant: lookalikes made ASCII, invisible and bidi characters dropped."""
    out = []
    for c in value:
        if c.isascii():
            out.append(c.lower())
        elif c in _ZERO_WIDTH or c in _BIDI_MARKS or unicodedata.category(c).startswith("C"):
            continue
        else:
            out.append(_nearest_ascii(c) or "-")
    guess = re.sub(r"[^a-z0-9._-]+", "-", "".join(out))
    guess = re.sub(r"([._-])[._-]+", r"\1", guess).strip("._-")
    return guess if guess and _ID_RE.match(guess) and guess != value else None


def id_problem(value: str, kind: str = "model") -> str | None:
    """Why ``value`` is not a plain ``kind`` id (with the fix), or None."""
    limit = ID_MAX.get(kind, 64)
    if not isinstance(value, str) or not value:
        return "an id must be a non-empty string"
    strange = next((c for c in value if not c.isascii() or not (c.isprintable() and not c.isspace())), None)
    shown = value if len(value) <= 40 else value[:37] + "..."
    guess = _plain_guess(value)
    hint = f" (did you mean {guess!r}?)" if guess else ""
    rule = (f"{kind} ids are lowercase ASCII letters and digits, words joined by one '-', '_' or '.', at most "
            f"{limit} characters")
    if strange is not None:
        return f"{ascii(shown)} holds {_describe(strange)}{hint}; {rule}"
    if len(value) > limit:
        return (f"{shown!r} is {len(value)} characters, over the {limit} an id may have here (a case folder is "
                f"named after agent, model, backend, format and test and must fit the file system){hint}; {rule}")
    if not _ID_RE.match(value):
        return f"{shown!r} is not a plain id{hint}; {rule} (e.g. my-{kind.split()[0]}_2)"
    return None


def check_id(value: str, kind: str = "model") -> str:
    """``value`` unchanged when it is a plain ``kind`` id, else :class:`ValueError` with the fix."""
    problem = id_problem(value, kind)
    if problem is not None:
        raise ValueError(problem)
    return value


def _id_type(kind: str) -> Any:
    return Annotated[str, AfterValidator(lambda v: check_id(v, kind)), WithJsonSchema({
        "type": "string", "pattern": ID_PATTERN, "maxLength": ID_MAX[kind],
        "description": f"A {kind} id: lowercase ASCII letters and digits, words joined by '-', '_' or '.'."})]


ModelId = _id_type("model")
TestId = _id_type("test")
SuiteId = _id_type("suite")
HardwareId = _id_type("hardware profile")
AgentId = _id_type("agent")
BackendId = _id_type("backend")
FormatId = _id_type("format")

"""The oracle's model hash: what a case records as ``model_hash`` and what ``/api/tags`` lists as ``digest``.

A real model's hash names its weights; the oracle's "weights" are its code. The digest of a profile is
the sha256 of its name and of the *code* of every module of this package (the profiles, the dialects,
the wire protocols, the server): comments, docstrings and other string-only statements, blank lines and
indentation width are left out, so editing prose changes no hash, while any change to what the oracle
says or how it says it gives every profile a new one. The same gripprobe-core gives the same digest on
every machine, run after run (nothing in it depends on the Python version, the path or the time).
"""

from __future__ import annotations

import hashlib
import io
import tokenize
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

PACKAGE = "gripprobe_core.oracle"

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+ splits f-strings into pieces
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def code_text(source: str) -> str:
    """``source`` reduced to its code: one line per logical line (tokens joined by one space, indented by
    depth), with comments, blank lines and statements made of a string literal alone (docstrings) left out.
    f-strings count as one token whatever the Python version's tokenizer makes of them."""
    lines: list[str] = []
    depth, line, fstring, fstring_start = 0, [], 0, (0, 0)
    text_lines = source.splitlines(keepends=True)

    def piece(start: tuple[int, int], end: tuple[int, int]) -> str:
        (r0, c0), (r1, c1) = start, end
        if r0 == r1:
            return text_lines[r0 - 1][c0:c1]
        return text_lines[r0 - 1][c0:] + "".join(text_lines[r0:r1 - 1]) + text_lines[r1 - 1][:c1]

    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if fstring:  # inside a 3.12+ f-string: take its source text whole once it ends
            if tok.type == _FSTRING_START:
                fstring += 1
            elif tok.type == _FSTRING_END:
                fstring -= 1
                if not fstring:
                    line.append(("STRING", piece(fstring_start, tok.end)))
            continue
        if tok.type == _FSTRING_START:
            fstring, fstring_start = 1, tok.start
            continue
        if tok.type in _SKIP:
            continue
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type == tokenize.NEWLINE:
            if line and not all(kind == "STRING" for kind, _ in line):  # a string alone is prose
                lines.append("  " * depth + " ".join(text for _, text in line))
            line = []
        else:
            line.append((tokenize.tok_name[tok.type], tok.string))
    if line and not all(kind == "STRING" for kind, _ in line):
        lines.append("  " * depth + " ".join(text for _, text in line))
    return "\n".join(lines) + "\n"


def code_digest(folder: Traversable | None = None) -> str:
    """sha256 of the code (:func:`code_text`) of every module (``*.py``) of ``folder``, in name order;
    by default of this package (computed once per process)."""
    return _package_digest() if folder is None else _digest(folder)


@lru_cache(maxsize=1)
def _package_digest() -> str:
    return _digest(resources.files(PACKAGE))


def _digest(folder: Traversable) -> str:
    h = hashlib.sha256()
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and entry.is_file():
            h.update(f"{entry.name}\n".encode())
            h.update(code_text(entry.read_text(encoding="utf-8")).encode())
    return h.hexdigest()


def profile_digest(model: str) -> str:
    """The digest of the profile ``model`` names (``perfect`` or ``perfect:latest``): sha256 of the
    profile name and :func:`code_digest`, 64 hex digits (a case records it as ``sha256:<digest>``)."""
    name = model.split(":", 1)[0]
    return hashlib.sha256(f"gripprobe-oracle/{code_digest()}/{name}".encode()).hexdigest()

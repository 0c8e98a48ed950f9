"""The oracle's model hash: what a case records as ``model_hash`` and what ``/api/tags`` lists as ``digest``.

A real model's hash names its weights; the oracle's "weights" are its code. The digest of a profile is
the sha256 of its name and of the *code* of every module of this package (the profiles, the dialects,
the wire protocols, the server): comments, docstrings and other string-only statements, blank lines and
indentation width are left out, so editing prose changes no hash, while any change to what the oracle
says or how it says it gives every profile a new one. The same gripprobe-core gives the same digest on
every machine, run after run (nothing in it depends on the Python version, the path or the time).

Reducing the sources to their code (tokenizing them) costs tens of milliseconds, paid by every run on
the oracle; so the package's digest is kept in a small cache file keyed by the sha256 of the sources'
raw bytes (and the Python version, whose tokenizer reads them): ``$XDG_CACHE_HOME/gripprobe/oracle/<key>``
(default ``~/.cache/gripprobe/oracle``). Any edit to any module is another key, so the digest read back is
always the one computing it would give. An entry is read as untrusted input (a regular file, not through
a link, exactly 64 hex digits, else recomputed and rewritten); an unwritable cache only means computing.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tokenize
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

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
    return cached_digest(resources.files(PACKAGE))


def _modules(folder: Traversable) -> list[tuple[str, bytes]]:
    """``(name, raw bytes)`` of every module (``*.py``) of ``folder``, in name order."""
    return [(entry.name, entry.read_bytes()) for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".py") and entry.is_file()]


def _digest(folder: Traversable) -> str:
    return _digest_of(_modules(folder))


def _digest_of(modules: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, raw in modules:
        h.update(f"{name}\n".encode())
        # read as ``read_text`` reads a file (universal newlines): the digest of a module's text, not its bytes
        h.update(code_text(io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ the cache

CACHE_FORMAT = 1


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/gripprobe/oracle``, else ``~/.cache/gripprobe/oracle``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gripprobe", "oracle")


def source_key(modules: list[tuple[str, bytes]]) -> str:
    """The cache key of ``modules``: sha256 of the cache format, the Python version (its tokenizer) and every
    module's name and raw bytes (lengths included, so no two trees share a key)."""
    h = hashlib.sha256(f"gripprobe-oracle-digest {CACHE_FORMAT} python {sys.version_info[0]}.{sys.version_info[1]}\n"
                       .encode())
    for name, raw in modules:
        h.update(f"{len(name)}:{name}:{len(raw)}:".encode())
        h.update(raw)
    return h.hexdigest()


def cached_digest(folder: Traversable, cache: str | None = None) -> str:
    """:func:`code_digest` of ``folder`` through the cache in ``cache`` (default :func:`cache_dir`): the same
    digest, computed only when no valid entry holds it for these exact bytes."""
    modules = _modules(folder)
    path = os.path.join(cache if cache is not None else cache_dir(), source_key(modules))
    digest = _read_entry(path)
    if digest is None:
        digest = _digest_of(modules)
        _write_entry(path, digest)
    return digest


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _read_entry(path: str) -> str | None:
    """The digest stored at ``path``: a regular file (not a link) holding 64 hex digits; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 66)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return text if _is_digest(text) else None


def _write_entry(path: str, digest: str) -> None:
    """Store ``digest`` at ``path`` atomically; OS errors (a read-only home, a full disk) are ignored."""
    from ..store import atomic_write_text

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(Path(path), digest + "\n", sync=False)
    except OSError:
        return


def profile_digest(model: str) -> str:
    """The digest of the profile ``model`` names (``perfect`` or ``perfect:latest``): sha256 of the
    profile name and :func:`code_digest`, 64 hex digits (a case records it as ``sha256:<digest>``)."""
    name = model.split(":", 1)[0]
    return hashlib.sha256(f"gripprobe-oracle/{code_digest()}/{name}".encode()).hexdigest()

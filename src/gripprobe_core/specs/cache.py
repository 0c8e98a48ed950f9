"""What reading a spec file produced, cached by the file's content, so a command parses each spec once.

Parsing (ruamel.yaml's round-trip loader, which records every key's line) is nearly all of what loading
specs costs; validating the parsed data with the models takes a few milliseconds for the whole tree. So
the cache holds each file's *parsed* form — its plain data and its line map — keyed by the sha256 of the
file's bytes, and the loader validates and cross-checks that data exactly as it would freshly parsed
data: a change in the models, in a plugin or in which plugins are installed can never be hidden by the
cache, and the answer (a :class:`~gripprobe_core.specs.loader.SpecSet` or the same ``SpecError``) is the
same with or without it.

Each entry is one small JSON file, ``$XDG_CACHE_HOME/gripprobe/specs/<parser>/<sha256>.json`` (default
``~/.cache/gripprobe/specs``), where ``<parser>`` fingerprints the gripprobe version, this format and the
source of the parser (so an edited parser in an editable install never reads old entries). An entry is
treated as hostile input: it is read with ``json`` only (never pickle), bounded in size, not followed
through a link, and checked against the shape it must have; one that is missing, unreadable, corrupt,
too big or of another version is ignored and rewritten. Only files that parsed without a problem and
hold plain JSON values are cached; a file with problems is parsed every time (its messages come from
the parser). ``GRIPPROBE_SPEC_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bump when the stored layout changes.
FORMAT = 1
#: Most entries kept before the oldest half is removed (a spec tree is tens of files; tests make many trees).
MAX_ENTRIES = 4096
#: An entry bigger than this is not read (a spec file is at most 512 KiB; its JSON form is about as big).
MAX_CACHE_BYTES = 4 << 20
#: An entry's data deeper than this is refused (the parser refuses deeper documents anyway).
MAX_DEPTH = 80
ENV_SWITCH = "GRIPPROBE_SPEC_CACHE"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gripprobe/specs``, else ``~/.cache/gripprobe/specs``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gripprobe" / "specs"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class Parsed:
    """One cached file: its plain data and ``lines`` (key path → 1-based line), as the parser made them."""

    data: dict[str, Any]
    lines: dict[tuple[Any, ...], int]


def _parser_fingerprint() -> str:
    """The gripprobe version, the cache format and the bytes of the modules whose code decides what a parse
    produces: another version or an edited parser (an editable install) never reads this cache's entries."""
    from .. import __version__

    h = hashlib.sha256(f"gripprobe {__version__} format {FORMAT}\n".encode())
    here = Path(__file__).resolve().parent
    for name in ("yaml_source.py", "issues.py", "cache.py"):
        try:
            h.update(name.encode() + b"\0" + (here / name).read_bytes())
        except OSError:
            h.update(name.encode() + b"\0?")
    try:  # ruamel.yaml's version (its __init__ holds it), without importing it
        from importlib.util import find_spec

        spec = find_spec("ruamel.yaml")
        origin = spec.origin if spec is not None else None
        h.update(b"ruamel\0" + (Path(origin).read_bytes() if origin else b"?"))
    except (ImportError, OSError, ValueError):
        h.update(b"ruamel\0?")
    return h.hexdigest()


def content_key(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


class ParseCache:
    """Entries under ``root/<parser fingerprint>/<sha256 of the file>.json``, one small JSON file each.

    One file per spec keeps every write atomic and independent (parallel commands and test workers never
    lose or tear each other's entries) and lets a command read only the entries of the files it loads.
    A folder of another fingerprint (another version, an edited parser) is removed when this one is first
    written; past :data:`MAX_ENTRIES` entries the oldest half is removed."""

    def __init__(self, root: Path | None = None, *, fingerprint: str | None = None):
        self.root = root if root is not None else cache_dir()
        self._fingerprint = fingerprint
        self.hits = 0
        self.misses = 0
        self.written = 0

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = _parser_fingerprint()
        return self._fingerprint

    @property
    def folder(self) -> Path:
        return self.root / self.fingerprint[:32]

    def get(self, key: str) -> Parsed | None:
        """The parsed form of the file whose bytes hash to ``key``, or None (a miss, or an entry that is
        unreadable or malformed: it is then rewritten by the next :meth:`put`)."""
        parsed = _decode(_read_json(self.folder / f"{key}.json"), self.fingerprint) if _is_key(key) else None
        if parsed is None:
            self.misses += 1
        else:
            self.hits += 1
        return parsed

    def put(self, key: str, data: Any, lines: dict[tuple[Any, ...], int]) -> None:
        """Remember a clean parse; data that is not plain JSON (dates, binary) is not cached. OS errors
        (a read-only home, a full disk) are ignored: the cache is only ever a shortcut."""
        if not _is_key(key) or not isinstance(data, dict) or not _plain(data, 0):
            return
        encoded_lines = []
        for key_path, line in lines.items():
            if not (isinstance(key_path, tuple) and all(_key_part(p) for p in key_path) and type(line) is int):
                return
            encoded_lines.append([list(key_path), line])
        try:
            text = json.dumps({"format": FORMAT, "parser": self.fingerprint, "data": data,
                               "lines": encoded_lines}, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return
        folder = self.folder
        try:
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                self._drop_other_versions()
            fd, tmp = tempfile.mkstemp(prefix=".entry-", suffix=".tmp", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, folder / f"{key}.json")
            except BaseException:
                _unlink(tmp)
                raise
        except OSError:
            return
        self.written += 1

    def prune(self) -> None:
        """Past :data:`MAX_ENTRIES` entries (test runs make many spec trees), remove the oldest half."""
        try:
            entries = [e for e in os.scandir(self.folder) if e.name.endswith(".json")]
            if len(entries) <= MAX_ENTRIES:
                return
            entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime)
            for e in entries[: len(entries) // 2]:
                _unlink(e.path)
        except OSError:
            return

    def _drop_other_versions(self) -> None:
        import shutil

        mine = self.folder.name
        try:
            others = [e for e in os.scandir(self.root) if e.name != mine and len(e.name) == 32
                      and e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for e in others:
            shutil.rmtree(e.path, ignore_errors=True)


def _is_key(key: str) -> bool:
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _read_json(path: Path) -> Any:
    """The JSON document at ``path``, or None when it is absent, not a regular file, too big or not JSON."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES:
            return False
        with os.fdopen(fd, "rb") as f:
            fd = -1
            raw = f.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > MAX_CACHE_BYTES:
        return False
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return False


def _key_part(value: Any) -> bool:
    return type(value) is str or type(value) is int


def _plain(value: Any, depth: int) -> bool:
    """Only what JSON gives back exactly: dicts with str keys, lists, str, int, float, bool, None."""
    if depth > MAX_DEPTH:
        return False
    t = type(value)
    if t is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    if t is list:
        return all(_plain(v, depth + 1) for v in value)
    return t in (str, int, float, bool) or value is None


def _decode(raw: Any, fingerprint: str | None = None) -> Parsed | None:
    """An entry as read, checked: the format, the data a mapping of plain values, lines a list of
    [key path, line]; None for anything else."""
    try:
        if not isinstance(raw, dict) or set(raw) != {"format", "parser", "data", "lines"}:
            return None
        if raw["format"] != FORMAT or (fingerprint is not None and raw["parser"] != fingerprint):
            return None
        data, lines = raw["data"], raw["lines"]
        if not isinstance(data, dict) or not _plain(data, 0) or not isinstance(lines, list):
            return None
        out: dict[tuple[Any, ...], int] = {}
        for item in lines:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                    and type(item[1]) is int and item[1] >= 1 and all(_key_part(p) for p in item[0])):
                return None
            out[tuple(item[0])] = item[1]
        return Parsed(data, out)
    except RecursionError:
        return None

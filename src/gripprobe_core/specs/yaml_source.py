"""Read one YAML spec file into plain Python data plus the line of every key and list item.

The file is parsed with ruamel.yaml's round-trip loader (it never constructs Python objects from tags,
and it records where each key sits), then copied into plain ``dict`` / ``list`` / scalars so that
validation sees ordinary data. Nothing in here raises on file content: every problem becomes a
:class:`~gripprobe_core.specs.issues.SpecIssue`.

Hostile or runaway files are stopped early, each with ``file:line: message``:

* over :data:`MAX_FILE_BYTES` — before any parsing (the size is checked on the open file, and no more
  than the limit is ever read);
* over :data:`MAX_NODES` keys and values or :data:`MAX_DEPTH` levels — *while* parsing: the composer
  counts each node (and each alias) as the parser produces it and stops at the first one past a
  limit, so a huge list costs the time to parse :data:`MAX_NODES` items, not the whole file;
* aliases that expand exponentially ("billion laughs") — when the parsed tree is copied into plain
  data, where every value an alias repeats counts again against :data:`MAX_NODES`.

ruamel.yaml is imported when a file is parsed (:func:`_ruamel`), not with this module: with the parse cache
warm (specs/cache.py) a command reads no YAML and never pays for the library (~15 ms).
"""

from __future__ import annotations

import datetime as _dt
import os
import stat
import warnings

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from functools import lru_cache
from types import SimpleNamespace

from ..errors import SpecError
from .issues import KeyPath, SpecIssue, format_key_path, make_issue

#: Largest spec file read. The biggest shipped spec is 3 KiB; 512 KiB leaves a hundred times that for long
#: prompts and fixture texts while bounding the parse: the pure-Python parser needs up to 2 s per MiB for
#: its slowest shapes (lines of comments, which make no node to count), and twice that on a busy machine,
#: so any file under the limit is answered within a few seconds.
MAX_FILE_BYTES = 512 * 1024
#: Most nodes (keys and values: mappings, lists, scalars; an alias counted again for all it repeats) in one
#: file. The biggest shipped spec holds 49 and a suite of 800 explicit cases about 9,000; parsing
#: 10,000 tiny items takes half a second (twice that on a busy machine), so a file of millions of items
#: is refused within seconds.
MAX_NODES = 10_000
#: Deepest nesting of mappings and lists; real specs use fewer than ten levels.
MAX_DEPTH = 64
_STD_TAG = "tag:yaml.org,2002:"
#: Standard tags that only restate a plain type; any other tag (``!!python/...``, ``!custom``) is refused.
_PLAIN_TAGS = frozenset(_STD_TAG + t for t in (
    "str", "int", "float", "bool", "null", "map", "seq", "omap", "set", "pairs", "binary", "timestamp"))


@dataclass
class SourceMap:
    """Where each key of one file is: ``lines[key_path]`` is the 1-based line of that key or item."""

    path: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, key_path: KeyPath = ()) -> int:
        """Line of ``key_path``, or of the nearest enclosing key that exists (a missing key reports
        the line of the mapping that should hold it)."""
        kp = tuple(key_path)
        while kp:
            try:
                if kp in self.lines:
                    return self.lines[kp]
            except TypeError:  # unhashable element in a key path
                pass
            kp = kp[:-1]
        return self.lines.get((), 1)


@dataclass
class ParsedFile:
    """Outcome of reading one file. ``data`` is ``None`` when there is nothing to validate."""

    path: Path
    data: dict[Any, Any] | None
    source: SourceMap
    issues: list[SpecIssue]


class _Abort(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


def read_yaml(path: Path) -> ParsedFile:
    """Read ``path`` as a single YAML document that must be a mapping; never raises on content."""
    source = SourceMap(path)
    raw = _read_bounded(path)
    if isinstance(raw, str):
        return ParsedFile(path, None, source, [make_issue(path, 1, "", raw)])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return ParsedFile(path, None, source, [make_issue(
            path, line, "", f"not valid UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8")])
    try:
        docs = _parse_documents(text)
    except _Abort as exc:
        return ParsedFile(path, None, source, [make_issue(path, exc.line, "", exc.message)])
    CommentedBase = _ruamel().CommentedBase

    issues: list[SpecIssue] = []
    if len(docs) > 1:
        second = docs[1]
        line = second.lc.line + 1 if isinstance(second, CommentedBase) and second.lc.line is not None else 1
        issues.append(make_issue(path, line, "", "more than one YAML document; put one spec per file"))
    root = docs[0] if docs else None
    if root is None or (isinstance(root, str) and not root.strip()):
        issues.append(make_issue(path, 1, "", "file is empty; expected a mapping of keys"))
        return ParsedFile(path, None, source, issues)
    if not isinstance(root, Mapping):
        line = root.lc.line + 1 if isinstance(root, CommentedBase) and root.lc.line is not None else 1
        issues.append(make_issue(path, line, "", f"expected a mapping of keys at the top level, got {yaml_type(root)}"))
        return ParsedFile(path, None, source, issues)

    root_line = root.lc.line + 1 if isinstance(root, CommentedBase) and root.lc.line is not None else 1
    source.lines[()] = root_line
    converter = _Converter(path, source)
    try:
        data = converter.convert(root, (), root_line, 0)
    except _Abort as exc:
        issues.append(make_issue(path, exc.line, "", exc.message))
        return ParsedFile(path, None, source, issues)
    issues.extend(converter.issues)
    return ParsedFile(path, data, source, issues)


def load_yaml_file(path: Path) -> tuple[dict[Any, Any], SourceMap]:
    """Public helper: the plain mapping in ``path`` and its :class:`SourceMap`.

    Raises :class:`~gripprobe_core.errors.SpecError` (``file:line: message`` lines) if the file cannot
    be read, is not a regular file, breaks a limit (:data:`MAX_FILE_BYTES`, :data:`MAX_NODES`,
    :data:`MAX_DEPTH`), is not YAML, or is not a single mapping.
    """
    parsed = read_yaml(Path(path))
    if parsed.issues or parsed.data is None:
        raise SpecError([i.format() for i in sorted(set(parsed.issues))])
    return parsed.data, parsed.source


def _read_bounded(path: Path) -> bytes | str:
    """The bytes of ``path``, or why not. Opened non-blocking (a FIFO named like a spec never hangs),
    regular files only, refused when over :data:`MAX_FILE_BYTES` before anything is read, and never
    more than the limit read (a file growing meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file; a spec must be a plain YAML file"
        if st.st_size > MAX_FILE_BYTES:
            return _too_big(st.st_size)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            return _too_big(size)
        return b"".join(chunks)
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    finally:
        os.close(fd)


def _too_big(size: int) -> str:
    return (f"file is {size:,} bytes, over the {MAX_FILE_BYTES // 1024} KiB limit for a spec file; a spec "
            f"holds keys, prompts and short fixtures: move bulk data out of it or split it")


@lru_cache(maxsize=1)
def _ruamel() -> SimpleNamespace:
    """ruamel.yaml's names this module uses, imported on the first parse, and :class:`_BoundedComposer`."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedBase, TaggedScalar
    from ruamel.yaml.composer import Composer
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.events import AliasEvent
    from ruamel.yaml.scalarbool import ScalarBoolean

    class _BoundedComposer(Composer):
        """ruamel's composer, stopping at the first node past :data:`MAX_NODES` or :data:`MAX_DEPTH`.

        ``compose_node`` is called once per node (alias included) as the parser produces its events, before
        the rest of the file is read, so the limits bound the parsing work and not only its result.
        """

        nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.parser.peek_event()
            self.nodes += 1
            line = event.start_mark.line + 1 if event.start_mark is not None else 1
            if self.nodes > MAX_NODES:
                raise _Abort(line, _too_many())
            if not isinstance(event, AliasEvent) and self.depth >= MAX_DEPTH:
                raise _Abort(line, _too_deep())
            return super().compose_node(parent, index)

    return SimpleNamespace(YAML=YAML, CommentedBase=CommentedBase, TaggedScalar=TaggedScalar,
                           MarkedYAMLError=MarkedYAMLError, YAMLError=YAMLError, ScalarBoolean=ScalarBoolean,
                           BoundedComposer=_BoundedComposer)


def _too_many() -> str:
    return (f"document too large: over {MAX_NODES:,} keys and values (an alias counts again each time it "
            f"is used); a spec this big is almost certainly a mistake")


def _too_deep() -> str:
    return f"nested more than {MAX_DEPTH} levels deep; flatten the document"


def _parse_documents(text: str) -> list[Any]:
    r = _ruamel()
    yaml = r.YAML(typ="rt", pure=True)
    yaml.Composer = r.BoundedComposer
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(yaml.load_all(text))
    except _Abort:
        raise
    except r.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if exc.context_mark is not None and mark is not None and mark.index >= len(text.rstrip()):
            mark = exc.context_mark  # "... but got <stream end>": where the unclosed thing started helps more
        line = mark.line + 1 if mark is not None else 1
        line = max(1, min(line, text.rstrip().count("\n") + 1))  # "at end of file" → the last line with text
        what = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            what = f"{exc.problem} ({exc.context})"
        raise _Abort(line, f"YAML syntax error: {_one_line(what)}") from None
    except r.YAMLError as exc:  # ReaderError (control characters ...) and friends
        position = getattr(exc, "position", None)
        line = text[:position].count("\n") + 1 if isinstance(position, int) else 1
        raise _Abort(line, f"YAML syntax error: {_one_line(str(exc))}") from None
    except RecursionError:
        raise _Abort(1, "YAML syntax error: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - a parser bug on odd input must still be a spec error
        raise _Abort(1, f"YAML syntax error: could not parse ({type(exc).__name__}: {_one_line(str(exc))})") from None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def yaml_type(value: Any) -> str:
    """How a YAML author would name the type of ``value``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple, Set)):
        return "a list"
    if isinstance(value, (_dt.date, _dt.datetime)):
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    return type(value).__name__


class _Converter:
    """Copy ruamel nodes into plain data, recording the line of every key and list item."""

    def __init__(self, path: Path, source: SourceMap):
        self.path = path
        self.source = source
        self.r = _ruamel()
        self.issues: list[SpecIssue] = []
        self.count = 0
        self.active: set[int] = set()

    def convert(self, node: Any, key_path: KeyPath, line: int, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _Abort(line, _too_many())
        if depth >= MAX_DEPTH:
            raise _Abort(line, _too_deep())
        self._check_tag(node, key_path, line)
        if isinstance(node, Mapping):
            return self._mapping(node, key_path, line, depth)
        if isinstance(node, (list, tuple, Set)) and not isinstance(node, (str, bytes)):
            return self._sequence(node, key_path, line, depth)
        return self._scalar(node, key_path, line)

    def _check_tag(self, node: Any, key_path: KeyPath, line: int) -> None:
        if isinstance(node, self.r.CommentedBase) and not isinstance(node, self.r.TaggedScalar):
            tag = getattr(getattr(node, "tag", None), "value", None)
            if tag is not None and str(tag) not in _PLAIN_TAGS:
                self._issue(key_path, line, f"unsupported YAML tag {_show_tag(tag)}; remove it")

    def _mapping(self, node: Mapping, key_path: KeyPath, line: int, depth: int) -> dict[Any, Any]:
        if id(node) in self.active:
            raise _Abort(line, "recursive alias: a mapping contains itself")
        self.active.add(id(node))
        out: dict[Any, Any] = {}
        try:
            for raw_key, value in node.items():
                key_line = _lc_line(node, "key", raw_key, line)
                key = self._key(raw_key, key_path, key_line)
                if key is _SKIP:
                    continue
                child = key_path + (key,)
                self.source.lines[child] = key_line
                out[key] = self.convert(value, child, key_line, depth + 1)
        finally:
            self.active.discard(id(node))
        return out

    def _sequence(self, node: Any, key_path: KeyPath, line: int, depth: int) -> list[Any]:
        if id(node) in self.active:
            raise _Abort(line, "recursive alias: a list contains itself")
        self.active.add(id(node))
        out: list[Any] = []
        try:
            ordered = isinstance(node, (list, tuple))
            for i, value in enumerate(node):
                item_line = _lc_line(node, "item", i, line) if ordered else line
                child = key_path + (i,)
                self.source.lines[child] = item_line
                out.append(self.convert(value, child, item_line, depth + 1))
        finally:
            self.active.discard(id(node))
        return out

    def _key(self, raw: Any, key_path: KeyPath, line: int) -> Any:
        """Spec keys are strings; anything else is reported here (once) and left out of the data."""
        if isinstance(raw, str):
            return str(raw)
        if raw is None:
            self._issue(key_path, line, "empty key; write a name before the colon")
        elif isinstance(raw, (bool, int, float, self.r.ScalarBoolean)):
            shown = str(raw).lower() if isinstance(raw, (bool, self.r.ScalarBoolean)) else str(raw)
            self._issue(key_path + (shown,), line, "keys must be strings; quote the key")
        else:
            self._issue(key_path, line, "mapping keys must be plain words, not lists or mappings")
        return _SKIP

    def _scalar(self, node: Any, key_path: KeyPath, line: int) -> Any:
        if node is None:
            return None
        if isinstance(node, (bool, self.r.ScalarBoolean)):
            return bool(node)
        if isinstance(node, str):
            return str(node)
        if isinstance(node, int):
            return int(node)
        if isinstance(node, float):
            return float(node)
        if isinstance(node, (_dt.date, _dt.datetime, bytes)):
            return node
        if isinstance(node, self.r.TaggedScalar):
            tag = str(getattr(node.tag, "value", node.tag))
            if tag == _STD_TAG + "str":
                return str(node.value)  # e.g. `!!str 3`
            self._issue(key_path, line, f"unsupported YAML tag {_show_tag(tag)}; remove it")
            return None
        self._issue(key_path, line, f"unsupported YAML value ({type(node).__name__})")
        return None

    def _issue(self, key_path: KeyPath, line: int, message: str) -> None:
        self.issues.append(make_issue(self.path, line, format_key_path(key_path), message))


_SKIP = object()


def _show_tag(tag: Any) -> str:
    text = str(tag)
    return "!!" + text[len(_STD_TAG):] if text.startswith(_STD_TAG) else text


def _lc_line(node: Any, what: str, index: Any, fallback: int) -> int:
    """1-based line ruamel recorded for a key or item; ``fallback`` when it has none (merge keys...)."""
    try:
        pos = node.lc.key(index) if what == "key" else node.lc.item(index)
        return int(pos[0]) + 1
    except Exception:  # noqa: BLE001 - ruamel has no position for merged or flow items in some cases
        return fallback

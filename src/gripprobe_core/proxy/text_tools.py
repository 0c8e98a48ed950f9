"""Nonstructured tool calls: tool calls a model wrote as TEXT in its reply instead of the protocol's
structured ``tool_calls``. The server did not recognize them, so the agent never ran them.

Recognized syntaxes (model-native tool-call formats; rules and examples in ``docs/telemetry.md``):

1. ``<tool_call>{"name": …, "arguments": …}</tool_call>`` (Hermes/Qwen; also ``<tool_calls>``,
   ``<|tool_call|>``, ``[TOOL_CALLS][…]``); the closing tag may be missing at the end of the text;
2. ``<function=NAME>{json}</function>`` and ``<function=NAME><parameter=K>V</parameter>…</function>``
   (Llama / Qwen3-coder), also inside ``<tool_call>``;
3. ``<invoke name="NAME"><parameter name="K">V</parameter></invoke>`` and ``<tool_use>…</tool_use>``
   (Anthropic-style XML);
4. a fenced code block (```` ```json ````, ```` ```tool_call ````, or no language) whose whole body is a
   JSON call object or a list of them;
5. a bare JSON call object (or list) standing on its own lines, outside any code fence;
6. gptme's call line ``@NAME: {json arguments}`` (also ``@NAME(ID): {…}``, as gptme logs a call), at the
   start of a line outside any code fence: the syntax of gptme's own tool examples, which a model copies
   into its reply text instead of calling the tool.

A *call object* is a JSON object with a string ``name`` (identifier-like) and ``arguments`` or
``parameters``, or ``{"function": {"name", "arguments"}}``. A tool *definition* (``parameters`` is
a JSON Schema with ``properties``) is not a call. Agent-defined text edit formats (aider's
``whole``/``diff``, gptme's ```` ```save path ```` and ``<tool-use>``) are not counted: they are the
agent's protocol, seen by its own parsers. Each call is counted once, even when several rules see it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_CALLS", "SCAN_LIMIT", "TextToolCall", "find_text_tool_calls", "scan_text_tool_calls"]

SCAN_LIMIT = 1024 * 1024
"""Characters of reply text scanned."""
_MAX_BARE_ATTEMPTS = 200
MAX_CALLS = 100
"""At most this many calls are reported per text (a reply that writes more is cut, not scanned on)."""
_NAME = re.compile(r"^[A-Za-z_][\w.\-:/]{0,127}$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)$", re.M)
_FUNCTION_TAG = re.compile(r"<function=([A-Za-z_][\w.\-:/]{0,127})>")
_PARAM_EQ = re.compile(r"<parameter=([^>\s]{1,128})>")
_INVOKE = re.compile(r"<invoke\s+name\s*=\s*[\"']([^\"'<>]{1,128})[\"']\s*>")
_PARAM_NAMED = re.compile(r"<parameter\s+name\s*=\s*[\"']([^\"'<>]{1,128})[\"'][^>]{0,200}>")
_MAX_PARAMS = 200
_BARE_START = re.compile(r'^[ \t]*(\[\s*)?\{\s*"(?:name|function|tool_calls|type|id)"\s*:', re.M)
_FENCE_LANGS = frozenset({"", "json", "jsonc", "json5", "tool_call", "tool_calls", "tool", "function_call"})
_OPENERS: tuple[tuple[str, str | None], ...] = (
    ("<tool_call>", "</tool_call>"), ("<tool_calls>", "</tool_calls>"), ("<|tool_call|>", None),
    ("[TOOL_CALLS]", None),
)
_DECODER = json.JSONDecoder()
_AT_CALL = re.compile(r"^[ \t]*@([A-Za-z_][\w.\-]{0,127})(?:\(([^()\s]{1,128})\))?:[ \t]*(?=\{)", re.M)
"""gptme's ``@save: {…}`` / ``@save(call_1): {…}``: the name, the id, then a JSON object on the same line."""


@dataclass(frozen=True)
class TextToolCall:
    """One tool call found in text: its name, its arguments as text, an id when the text gave one."""

    name: str
    arguments: str
    id: str | None
    syntax: str
    start: int


def find_text_tool_calls(text: str) -> list[tuple[str, str]]:
    """``[(name, arguments_text)]`` of the tool calls written in ``text``, in order. Never raises."""
    return [(c.name, c.arguments) for c in scan_text_tool_calls(text)]


def scan_text_tool_calls(text: str, *, limit: int = SCAN_LIMIT) -> list[TextToolCall]:
    """The tool calls written in ``text`` (its first ``limit`` characters), in order of position."""
    if not isinstance(text, str) or not text:
        return []
    try:
        return _Scanner(text[:limit]).run()
    except (RecursionError, MemoryError):
        return []


def _args_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _params(body: str, opener: re.Pattern[str], *, open_ended: bool) -> dict[str, str]:
    """``{name: value}`` of the parameter tags in ``body``. A value ends at ``</parameter>``; with
    ``open_ended`` (the ``<parameter=K>`` form) also at the next parameter, ``</function>`` or the end.
    Linear: each closer is searched once."""
    out: dict[str, str] = {}
    matches = list(opener.finditer(body))
    close: int | None = None
    func_end = body.find("</function>") if open_ended else -1
    for i, m in enumerate(matches[:_MAX_PARAMS]):
        if close is None or (close != -1 and close < m.end()):
            close = body.find("</parameter>", m.end())
        stops = [close] if close >= 0 else []
        if open_ended:
            stops += [matches[i + 1].start()] if i + 1 < len(matches) else []
            stops += [func_end] if func_end >= m.end() else []
            stops.append(len(body))
        if not stops:
            break
        out[m.group(1)] = body[m.end():min(stops)].strip("\n")
    return out


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("properties"), dict) and value.get("type") == "object"


def call_from_object(obj: Any) -> tuple[str, str, str | None] | None:
    """``(name, arguments_text, id)`` when ``obj`` is a tool-call object, else None."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict) and "arguments" in fn and isinstance(fn.get("name"), str):
        got = call_from_object(fn)
        if got is None:
            return None
        name, args, _ = got
        return name, args, obj.get("id") if isinstance(obj.get("id"), str) else None
    name = obj.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return None
    if "arguments" in obj:
        args = obj["arguments"]
    elif "parameters" in obj:
        args = obj["parameters"]
        if _is_schema(args):
            return None  # a tool definition, not a call
    else:
        return None
    if _is_schema(args) and "description" in obj:
        return None
    return name, _args_text(args), obj.get("id") if isinstance(obj.get("id"), str) else None


def _calls_in_value(value: Any) -> list[tuple[str, str, str | None]]:
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    out = [c for item in items if (c := call_from_object(item)) is not None]
    if isinstance(value, list) and len(out) != len(items):
        return []  # a list that is not purely calls is data, not a call batch
    return out


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int]] = []
        self.calls: list[TextToolCall] = []
        self.fences = self._fences()

    def run(self) -> list[TextToolCall]:
        self._openers()
        self._function_tags(0, len(self.text))
        self._invokes()
        self._tool_use()
        self._fenced_json()
        self._bare_json()
        self._at_calls()
        return sorted(self.calls, key=lambda c: c.start)[:MAX_CALLS]

    @property
    def full(self) -> bool:
        return len(self.calls) >= MAX_CALLS

    def _next_close(self, closer: str, after: int, cached: int | None, end: int | None = None) -> int:
        """Position of the next ``closer`` at or after ``after`` (-1 if none), reusing the last answer
        while it is still ahead, so scanning many unclosed tags stays linear."""
        if cached is not None and (cached == -1 or cached >= after):
            return cached
        return self.text.find(closer, after, len(self.text) if end is None else end)

    # ------------------------------------------------------------------------------ helpers

    def _taken(self, start: int, end: int) -> bool:
        return any(s < end and start < e for s, e in self.spans)

    def _add(self, start: int, end: int, name: str, args: str, call_id: str | None, syntax: str) -> None:
        self.calls.append(TextToolCall(name, args, call_id, syntax, start))
        self.spans.append((start, end))

    def _in_fence(self, pos: int) -> bool:
        return any(s <= pos < e for s, e, _, _, _ in self.fences)

    def _fences(self) -> list[tuple[int, int, str, int, int]]:
        """(start, end, language, body_start, body_end) of each closed fenced block."""
        out = []
        open_: tuple[int, str, str, int] | None = None
        for m in _FENCE.finditer(self.text):
            marker, info = m.group(1), m.group(2).strip()
            if open_ is None:
                open_ = (m.start(), marker, info.split()[0].lower() if info.split() else "", m.end() + 1)
            elif marker[0] == open_[1][0] and len(marker) >= len(open_[1]) and not info:
                out.append((open_[0], m.end(), open_[2], open_[3], m.start()))
                open_ = None
        return out

    # ------------------------------------------------------------------------------- rules

    def _openers(self) -> None:
        text = self.text
        for opener, closer in _OPENERS:
            pos = text.find(opener)
            while pos >= 0 and not self.full:
                body_start = pos + len(opener)
                nxt = text.find(opener, body_start)
                limit = nxt if nxt >= 0 else len(text)
                end = text.find(closer, body_start, limit) if closer else -1
                body_end = end if end >= 0 else limit
                span_end = end + len(closer) if end >= 0 else body_end
                if not self._taken(pos, span_end) and self._body_calls(body_start, body_end, "tool_call_tag"):
                    self.spans.append((pos, span_end))
                pos = nxt

    def _body_calls(self, start: int, end: int, syntax: str) -> bool:
        """Calls in a tag body: JSON object(s) first, else ``<function=…>`` tags."""
        body = self.text[start:end]
        stripped = body.lstrip()
        offset = start + (len(body) - len(stripped))
        if stripped[:1] in ("{", "["):
            try:
                value, _ = _DECODER.raw_decode(stripped)
            except (ValueError, RecursionError):
                value = None
            calls = _calls_in_value(value)
            for name, args, call_id in calls:
                self.calls.append(TextToolCall(name, args, call_id, syntax, offset))
            if calls:
                return True
        before = len(self.calls)
        self._function_tags(start, end, record_spans=False)
        return len(self.calls) > before

    def _function_tags(self, start: int, end: int, *, record_spans: bool = True) -> None:
        text = self.text
        matches = list(_FUNCTION_TAG.finditer(text, start, end))
        close: int | None = None
        for i, m in enumerate(matches):
            if self.full:
                return
            stop = close = self._next_close("</function>", m.end(), close, end)
            nxt = matches[i + 1].start() if i + 1 < len(matches) else end
            body_end = stop if 0 <= stop < nxt else nxt
            span_end = stop + len("</function>") if 0 <= stop < nxt else body_end
            if record_spans and self._taken(m.start(), span_end):
                continue
            body = text[m.end():body_end].strip()
            args = self._function_args(body)
            if args is None:
                continue
            call = TextToolCall(m.group(1), args, None, "function_tag", m.start())
            self.calls.append(call)
            if record_spans:
                self.spans.append((m.start(), span_end))

    @staticmethod
    def _function_args(body: str) -> str | None:
        if not body:
            return "{}"
        if body[:1] == "{":
            try:
                value, _ = _DECODER.raw_decode(body)
            except (ValueError, RecursionError):
                return None
            return _args_text(value)
        params = _params(body, _PARAM_EQ, open_ended=True)
        return _args_text(params) if params else None

    def _invokes(self) -> None:
        text = self.text
        close: int | None = None
        for m in _INVOKE.finditer(text):
            if self.full:
                return
            stop = close = self._next_close("</invoke>", m.end(), close)
            end = stop + len("</invoke>") if stop >= 0 else len(text)
            if self._taken(m.start(), end):
                continue
            body = text[m.end():stop if stop >= 0 else len(text)]
            params = _params(body, _PARAM_NAMED, open_ended=False)
            self._add(m.start(), end, m.group(1), _args_text(params), None, "invoke")

    def _tool_use(self) -> None:
        text = self.text
        pos = text.find("<tool_use>")
        while pos >= 0 and not self.full:
            stop = text.find("</tool_use>", pos)
            end = stop + len("</tool_use>") if stop >= 0 else len(text)
            if not self._taken(pos, end):
                body = text[pos + len("<tool_use>"):stop if stop >= 0 else len(text)].strip()
                got = self._tool_use_body(body)
                if got is not None:
                    self._add(pos, end, got[0], got[1], got[2], "tool_use")
            pos = text.find("<tool_use>", end)

    @staticmethod
    def _tool_use_body(body: str) -> tuple[str, str, str | None] | None:
        if body[:1] == "{":
            try:
                value, _ = _DECODER.raw_decode(body)
            except (ValueError, RecursionError):
                return None
            if isinstance(value, dict) and "input" in value and "arguments" not in value:
                value = {**value, "arguments": value["input"]}
            return call_from_object(value)
        name = re.search(r"<(?:tool_)?name>\s*([^<]{1,128}?)\s*</(?:tool_)?name>", body)
        if name is None or not _NAME.match(name.group(1)):
            return None
        for tag in ("arguments", "parameters", "input"):
            start = body.find(f"<{tag}>")
            stop = body.find(f"</{tag}>", start) if start >= 0 else -1
            if stop >= 0:
                return name.group(1), body[start + len(tag) + 2:stop].strip(), None
        return name.group(1), "{}", None

    def _fenced_json(self) -> None:
        for start, end, lang, body_start, body_end in self.fences:
            if self.full:
                return
            if lang not in _FENCE_LANGS or self._taken(start, end):
                continue
            body = self.text[body_start:body_end].strip() if body_end > body_start else ""
            if body[:1] not in ("{", "["):
                continue
            try:
                value, stop = _DECODER.raw_decode(body)
            except (ValueError, RecursionError):
                continue
            if body[stop:].strip():
                continue  # more than one JSON value: example data, not a call
            calls = _calls_in_value(value)
            for name, args, call_id in calls:
                self.calls.append(TextToolCall(name, args, call_id, "json_fence", start))
            if calls:
                self.spans.append((start, end))

    def _bare_json(self) -> None:
        text = self.text
        attempts = 0
        pos = 0
        while attempts < _MAX_BARE_ATTEMPTS and not self.full:
            m = _BARE_START.search(text, pos)
            if m is None:
                return
            attempts += 1
            begin = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
            pos = m.end()
            if self._in_fence(begin) or self._taken(begin, begin + 1):
                continue
            try:
                value, stop = _DECODER.raw_decode(text, begin)
            except (ValueError, RecursionError):
                continue
            line_end = text.find("\n", stop)
            if text[stop:line_end if line_end >= 0 else len(text)].strip():
                continue  # followed by more text on its line: part of prose or code
            calls = _calls_in_value(value)
            for name, args, call_id in calls:
                self.calls.append(TextToolCall(name, args, call_id, "json", begin))
            if calls:
                self.spans.append((begin, stop))
                pos = stop

    def _at_calls(self) -> None:
        text = self.text
        attempts = 0
        for m in _AT_CALL.finditer(text):
            if self.full or attempts >= _MAX_BARE_ATTEMPTS:
                return
            attempts += 1
            begin = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
            if self._in_fence(begin) or self._taken(begin, m.end() + 1):
                continue
            try:
                value, stop = _DECODER.raw_decode(text, m.end())
            except (ValueError, RecursionError):
                continue
            line_end = text.find("\n", stop)
            if not isinstance(value, dict) or text[stop:line_end if line_end >= 0 else len(text)].strip():
                continue  # arguments are one JSON object, then the line ends
            self._add(begin, stop, m.group(1), _args_text(value), m.group(2), "gptme_at")

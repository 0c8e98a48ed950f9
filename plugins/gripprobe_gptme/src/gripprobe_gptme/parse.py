"""gptme's conversation log → normalized tier B events.

Source: ``$GPTME_LOGS_HOME/<name>/conversation.jsonl`` (kept by the runner as the phase artifact
``gptme.conversation.jsonl``: the bare ``conversation.jsonl`` is the harness's own session record), one JSON
message per line: ``{role, content, timestamp, call_id?,
metadata?}``. ``--output-format json`` prints the same messages on stdout (``{"type": "message",
…}``); that is the fallback when the log is missing (a crash before gptme created it).

What a message means (gptme 0.35.1, measured in the samples of ``tests/fixtures``):

- ``assistant``: one model response (``metadata.usage``, ``metadata.timings.ttft_ms/gen_ms``,
  ``timings.tool_ms_by_name``). Its tool uses are written in ``content``, in the phase's format:
  ``tool`` → ``@<name>(<call_id>): {json arguments}`` lines (the structured calls, id as sent by the
  model; gptme also runs fenced tool blocks in this format); ``markdown`` → fenced blocks whose
  language is a tool (```` ```save hello.txt ````), read with gptme's nesting rules; ``xml`` →
  ``<tool-use><save args="…">…</save></tool-use>``, only when the whole reply is well-formed XML
  (gptme's pinned install has no lxml and then runs nothing). Each becomes a ``tool_call_start``
  (``parent_id`` = the response's event). Text tool uses carry no call id (gptme gives them none);
  their arguments use the tool's parameter names (``save`` → ``{path, content}``, ``shell`` →
  ``{command}``), the body as written (``save`` adds the final newline itself).
- ``system`` after an assistant message: a tool result. In the ``tool`` format it carries
  ``call_id`` (and ``metadata.tool``); in the text formats it carries nothing, and results are
  matched to the message's tool uses in order (gptme runs them in order). System messages that are
  notices (text starting with ``<``: budget, warnings) are not results. ``metadata.error`` marks a
  failed model request instead (``Error code: 500 - …``), reported as an errored ``model_response``.
- ``user``: the prompt, or gptme's own ``<system>No tool call detected…</system>`` nudge.

A call whose arguments are not JSON (``@shell(id): {"command": "pwd"`` cut short) is a start with
``error_type="malformed_arguments"`` and no result: gptme does not run it (with the proxy on, the
proxy's tier-A start of the same call id is the one kept). The text formats' equivalent is a tool use
gptme cannot read: in ``markdown`` a tool block whose closing fence never comes (gptme drops an
unterminated block), in ``xml`` a ``<tool-use><name …`` in a reply that is not well-formed XML or has
no ``</tool-use>`` (gptme then runs nothing of the reply). gptme runs nothing and nudges; since a
tier-B start means "the agent ran it" and nothing marks the text as a request (no proxy evidence
either), such a use is no tool event: its ``model_response`` gets ``error_type="protocol_malformed"``
and lists it under ``payload.unreadable_tool_uses`` (name, raw text after the opening).
:func:`tool_uses` returns it with ``malformed=True``. A result's status comes
from its text: ``Return code: N`` (shell; none means 0), ``Command timed out``, ``Error …``,
``Cannot …``, ``… aborted``; anything else is success.

Tool names go through :data:`TOOL_NAMES` (the common vocabulary plus gptme's own: ``save``/``append``
write, ``patch_many`` edits, ``ipython``/``tmux`` execute), events through the shared
:class:`~gripprobe_core.plugin.EventBuilder` (``<phase>-B-<n>``, ``raw_artifact_ref`` ``<file>:<line>``).

Timestamps: gptme writes naive local times (``datetime.now()``); they are read in the local time
zone of the parsing process (the runner passes its ``TZ`` to the agent), or ``tz`` when given, and
written as UTC. Nothing here raises on bad bytes; :func:`parse_phase` raises
:class:`~gripprobe_core.plugin.WrapperParseError` only when gptme exited 0 yet left no conversation.
"""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from gripprobe_core.plugin import (
    EventBuilder, PermissionDecision, PermissionRequest, PhaseCapture, Transcript, WrapperParseError, iso,
    mapping, number, permission_events,
)

from .names import BLOCK_TOOLS, TOOL_NAMES

__all__ = [
    "CONVERSATION_ARTIFACT", "TOOL_NAMES", "ToolUse", "parse_conversation", "parse_messages", "parse_phase",
    "read_messages", "tool_uses",
]

#: The name gptme's ``conversation.jsonl`` is kept under (``<phase>.gptme.conversation.jsonl``). Not the bare
#: ``conversation.jsonl``: since gripprobe-core's interaction sessions that name is the harness's own record
#: of a session (``SESSION_TRANSCRIPT``), and the runner drops a kept file of that name.
CONVERSATION_ARTIFACT = "gptme.conversation.jsonl"
#: What runs stored before the rename kept it as (read when the new name is absent).
LEGACY_CONVERSATION_ARTIFACT = "conversation.jsonl"
OUTPUT_LIMIT = 2000
TEXT_LIMIT = 2000

#: Block languages whose body is code without fences of its own: a bare fence always closes them.
EXEC_LANGS = frozenset({"shell", "sh", "bash", "zsh", "fish", "ksh", "nu", "ps1", "powershell", "ipython"})
#: How a text-format tool use's body and arguments map onto the tool's own parameter names.
BODY_PARAM = {"save": "content", "append": "content", "patch": "patch", "shell": "command", "ipython": "code",
              "py": "code", "tmux": "command", "mcp": "command", "read": "path"}
PATH_TOOLS = frozenset({"save", "append", "patch"})

_TOOLCALL = re.compile(r"^@([^\r\n(]+?)\(([\w\-:.]+)\):[ \t]*", re.M)
_FENCE = re.compile(r"^(`{3,})(.*)$")
_TOOL_USE = re.compile(r"<tool-use>(.*?)</tool-use>", re.S | re.I)
_TOOL_USE_OPEN = re.compile(r"<tool-use>\s*<([A-Za-z_][\w-]*)(?=[\s/>])")
_TOOL_USE_EDGE = re.compile(r"</?tool-use>")
_RETURN_CODE = re.compile(r"^Return code: (-?\d+)\s*$", re.M)
_ERROR_RESULT = re.compile(
    r"^(?:Error\b|Cannot \w+|\w+ aborted\b|Tool '[^']*' is not available|Patch failed|Invalid patch)", re.I)
_HTTP_CODE = re.compile(r"Error code: (\d{3})")
#: Reasoning gptme's system prompt asks for ("think step by step … in `<thinking>` tags").
_THINKING = re.compile(r"<(thinking|think)>(.*?)</\1>", re.S)
#: gptme's answer to a structured call of a tool it did not load (the allowlist left it out).
_NOT_AVAILABLE = re.compile(r"^Tool '([^']*)' is not available for execution")
_UNSUPPORTED = re.compile(r"does not support tools", re.I)
_DECODER = json.JSONDecoder()


# ------------------------------------------------------------------------------ tool uses in text

@dataclass(frozen=True)
class ToolUse:
    """One tool use written in an assistant message: raw tool name, arguments (a dict, or the raw
    text when they are not JSON), the call id gptme logged (tool format only), where it starts."""

    name: str
    arguments: Any
    call_id: str | None
    start: int
    malformed: bool = False


def tool_uses(content: str, tool_format: str) -> list[ToolUse]:
    """The tool uses gptme reads from an assistant message in ``tool_format``, in order. Never raises."""
    if not isinstance(content, str) or not content:
        return []
    try:
        if tool_format == "xml":
            found = _xml_uses(content)
        else:
            scanned = list(_scan_blocks(content))
            blocks = [b[:4] for b in scanned if b[4]]
            found = [u for b in blocks if (u := _block_use(*b)) is not None]
            if tool_format == "tool":
                spans = [(b[2], b[3]) for b in blocks]
                found += _toolcall_uses(content, spans)
            elif tool_format == "markdown":
                found += [u for b in scanned if not b[4] and (u := _unclosed_use(b[0], b[1], b[2])) is not None]
    except (RecursionError, MemoryError):
        return []
    return sorted(found, key=lambda u: u.start)


def _toolcall_uses(content: str, fenced: list[tuple[int, int]]) -> list[ToolUse]:
    """``@name(call_id): {json}`` lines (outside fenced blocks), as gptme logs structured calls."""
    out: list[ToolUse] = []
    pos = 0
    while (m := _TOOLCALL.search(content, pos)) is not None:
        pos = m.end()
        if any(s <= m.start() < e for s, e in fenced):
            continue
        rest = content[m.end():]
        try:
            value, used = _DECODER.raw_decode(rest)
            if not isinstance(value, dict):
                raise ValueError("arguments are not an object")
            out.append(ToolUse(m.group(1).strip(), value, m.group(2), m.start()))
            pos = m.end() + used
        except (ValueError, RecursionError):
            nxt = _TOOLCALL.search(content, m.end())
            raw = rest[:nxt.start() - m.end()] if nxt else rest
            out.append(ToolUse(m.group(1).strip(), raw.strip(), m.group(2), m.start(), malformed=True))
    return out


def _fenced_blocks(content: str) -> Iterator[tuple[str, str, int, int]]:
    """``(language line, body, start offset, end offset)`` of each closed fenced block, read with
    gptme's rules (non-streaming): a language-tagged fence inside a block opens a nested one; a bare
    fence closes the innermost nested block, or the outer block unless (outside shell-like
    languages) the next line has content and a nested block plainly follows. Unclosed blocks are
    dropped, as gptme drops them."""
    for lang, body, start, end, closed in _scan_blocks(content):
        if closed:
            yield lang, body, start, end


def _scan_blocks(content: str) -> Iterator[tuple[str, str, int, int, bool]]:
    """:func:`_fenced_blocks` plus the unclosed block that may end the text (``closed`` False; it
    runs to the end, so it is always the last)."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    offsets, total = [], 0
    for line in lines:
        offsets.append(total)
        total += len(line) + 1
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence_len, lang, start = len(m.group(1)), m.group(2).strip(), i
        exec_lang = lang.split(" ")[0] in EXEC_LANGS
        depth, body, i = 1, [], i + 1
        closed = False
        while i < len(lines):
            line = lines[i]
            fm = re.match(r"^(`{3,})", line)
            if fm:
                n = len(fm.group(1))
                bare = line.strip() == "`" * n
                if bare and (depth > 1 or n == fence_len):
                    if depth > 1:
                        depth -= 1
                        body.append(line)
                    elif not exec_lang and _opens_nested(lines, i):
                        depth += 1
                        body.append(line)
                    else:
                        closed = True
                        break
                elif not bare and (tag := line[n:].strip()) and (tag[0].isalnum() or tag[0] in "_/.~"):
                    depth += 1
                    body.append(line)
                else:
                    body.append(line)
            else:
                body.append(line)
            i += 1
        if closed:
            yield lang, "\n".join(body), offsets[start], offsets[i] + len(lines[i]), True
        else:
            yield lang, "\n".join(body), offsets[start], len(content), False
        i += 1


def _opens_nested(lines: list[str], i: int) -> bool:
    """At depth 1, is the bare fence on line ``i`` the opener of a nested block (next line has
    content, and a bare fence within 20 lines is followed by more content within 5 lines)?"""
    if i + 1 >= len(lines) or not lines[i + 1].strip() or re.match(r"^`{3,}", lines[i + 1]):
        return False
    for j in range(i + 1, min(i + 20, len(lines))):
        if re.fullmatch(r"`{3,}", lines[j].strip()):
            return any(lines[k].strip() for k in range(j + 1, min(j + 5, len(lines))))
        if re.match(r"^`{3,}", lines[j]) and len(lines[j].strip()) > 3:
            return False
    return False


def _block_use(lang: str, body: str, start: int, end: int) -> ToolUse | None:
    words = lang.split()
    if not words or words[0] not in BLOCK_TOOLS:
        return None
    return ToolUse(words[0], _text_arguments(words[0], words[1:], body), None, start)


def _unclosed_use(lang: str, body: str, start: int) -> ToolUse | None:
    """A tool block whose closing fence never came: gptme runs nothing; a malformed use (raw body)."""
    words = lang.split()
    if not words or words[0] not in BLOCK_TOOLS:
        return None
    return ToolUse(words[0], "\n".join([lang, body]).strip(), None, start, malformed=True)


def _text_arguments(tool: str, args: list[str], body: str) -> dict[str, Any]:
    """A text-format tool use's arguments under the tool's own parameter names (``save`` →
    ``{path, content}``, ``shell`` → ``{command}`` …); other tools → ``{args?, content?}``."""
    out: dict[str, Any] = {}
    if tool in PATH_TOOLS:
        out["path"] = " ".join(args)
    elif args:
        out["args"] = args
    param = BODY_PARAM.get(tool, "content")
    if body or tool in BODY_PARAM:
        out[param] = body
    return out


def _xml_uses(content: str) -> list[ToolUse]:
    """``<tool-use><name args…>body</name></tool-use>`` (and the ``<function_calls><invoke name=…>``
    variant), read as gptme 0.35.1 reads them when lxml is absent (its pinned install): the whole
    reply, wrapped in one root element, must be well-formed XML, else gptme runs nothing; a tool's
    arguments are its attribute values, its body the element's text, stripped."""
    if not (("<tool-use>" in content and "</tool-use>" in content)
            or ("<function_calls>" in content and "</function_calls>" in content)):
        return _unreadable_xml_uses(content)
    try:
        root = ElementTree.fromstring(f"<root>{content}</root>")
    except (ElementTree.ParseError, ValueError):
        return _unreadable_xml_uses(content)
    out: list[ToolUse] = []
    elements = [(child, str(child.tag), list(child.attrib.values())) for use in root.iter("tool-use") for child in use]
    elements += [(inv, inv.get("name") or "", [v for k, v in inv.attrib.items() if k != "name"])
                 for calls in root.iter("function_calls") for inv in calls.iter("invoke")]
    for element, tool, args in elements:
        if not tool:
            continue
        body = "".join(element.itertext()).strip()
        start = content.find(f"<{tool}")
        out.append(ToolUse(tool, _text_arguments(tool, args, body), None, start if start >= 0 else len(content)))
    return out


def _unreadable_xml_uses(content: str) -> list[ToolUse]:
    """The ``<tool-use><name …`` openings (``name`` a gptme tool) of a reply gptme cannot read as XML:
    malformed uses, arguments the raw text up to the next ``</tool-use>``/``<tool-use>``."""
    out: list[ToolUse] = []
    for m in _TOOL_USE_OPEN.finditer(content):
        if m.group(1) not in BLOCK_TOOLS:
            continue
        rest = content[m.start(1) - 1:]
        cut = _TOOL_USE_EDGE.search(rest, 1)
        out.append(ToolUse(m.group(1), (rest[:cut.start()] if cut else rest).strip(), None, m.start(1) - 1,
                           malformed=True))
    return out


def thinking(content: str) -> list[str]:
    """The reasoning of an assistant message: the text of each ``<thinking>``/``<think>`` element outside fenced
    blocks (gptme's system prompt asks the model to think in ``<thinking>`` tags, and gptme itself writes a
    reply's ``reasoning_content`` into its message as a leading ``<think>`` block). Never raises."""
    if not isinstance(content, str) or "<think" not in content:
        return []
    try:
        spans = [(s, e) for _, _, s, e, _ in _scan_blocks(content)]
    except (RecursionError, MemoryError):
        spans = []
    return [said for m in _THINKING.finditer(content)
            if not any(s <= m.start() < e for s, e in spans) and (said := m.group(2).strip())]


def strip_tool_uses(content: str, tool_format: str) -> str:
    """``content`` without its tool uses (fenced tool blocks, ``@tool(id): {…}`` lines, ``<tool-use>``)."""
    if not isinstance(content, str):
        return ""
    text = _TOOL_USE.sub("", content) if tool_format == "xml" else content
    if tool_format != "xml":
        cuts = [(s, e) for lang, _, s, e in _fenced_blocks(text) if lang.split(" ")[0] in BLOCK_TOOLS]
        for s, e in reversed(cuts):
            text = text[:s] + text[e:]
        if tool_format == "tool":
            text = "\n".join(line for line in text.split("\n") if not _TOOLCALL.match(line))
    return text.strip()


# ------------------------------------------------------------------------------ messages → events

def read_messages(data: bytes, *, stdout: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, message)`` for each JSON object line (stdout: only ``type == "message"``)."""
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("role"), str):
            continue
        if stdout and obj.get("type") != "message":
            continue
        yield lineno, obj


def parse_conversation(data: bytes, phase: str, tool_format: str, *, file_name: str = CONVERSATION_ARTIFACT,
                       stdout: bool = False, tz: tzinfo | None = None,
                       denied: Mapping[str, str] | None = None) -> Transcript:
    """Events and final answer from the bytes of a ``conversation.jsonl`` (or of ``--output-format json``
    stdout)."""
    return parse_messages(read_messages(data, stdout=stdout), phase, tool_format, file_name=file_name, tz=tz,
                          denied=denied)


def parse_messages(messages: Iterable[tuple[int, dict[str, Any]]], phase: str, tool_format: str, *,
                   file_name: str = CONVERSATION_ARTIFACT, tz: tzinfo | None = None,
                   denied: Mapping[str, str] | None = None) -> Transcript:
    """The events of gptme's messages, and its final answer: the text of its last assistant message that
    has any once its tool-use syntax is taken out (None when none has).

    ``denied``: tools the driver's allowlist left out because of the case's interaction policy (name → the
    rule naming that setting). gptme never runs them: a text block of one (markdown, xml) is ignored, a
    structured call of one is answered "Tool 'x' is not available for execution". Either is a native
    denial: a ``permission_request`` + ``permission_response`` (deny, ``decided_by: native``); a text block
    then gets no ``tool_call_start`` (gptme did not run it), a structured call keeps its start and error."""
    reader = _Reader(phase, tool_format, file_name, tz, denied)
    for lineno, message in messages:
        try:
            reader.feed(lineno, message)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            continue  # one odd message never hides the others
    return Transcript(reader.out.events, reader.final)


def parse_phase(capture: PhaseCapture, phase: str, tool_format: str, *, tz: tzinfo | None = None,
                denied: Mapping[str, str] | None = None) -> Transcript:
    """The phase's events and final answer: from the ``conversation.jsonl`` kept file, else from gptme's
    JSON stdout.

    Raises :class:`WrapperParseError` when the log is unreadable, or when gptme exited 0 but left
    neither (it always writes the log on a normal run: the harness lost it). A crash or timeout
    without any log gives no events.
    """
    conversation = capture.files.get(CONVERSATION_ARTIFACT) or capture.files.get(LEGACY_CONVERSATION_ARTIFACT)
    if conversation is not None:
        try:
            data = Path(conversation).read_bytes()
        except OSError as exc:
            raise WrapperParseError(f"cannot read gptme conversation log {conversation}: {exc}") from exc
        return parse_conversation(data, phase, tool_format, file_name=Path(conversation).name, tz=tz, denied=denied)
    try:
        data = capture.stdout_path.read_bytes()
    except OSError:
        data = b""
    parsed = parse_conversation(data, phase, tool_format, file_name=capture.stdout_path.name, stdout=True, tz=tz,
                                denied=denied)
    if not parsed.events and capture.process.status == "ok" and capture.process.exit_code == 0:
        raise WrapperParseError("gptme exited 0 but left no conversation.jsonl under $GPTME_LOGS_HOME "
                                "and no JSON messages on stdout")
    return parsed


class _Reader:
    """Reads one phase's messages in order into :attr:`out` (the shared tier-B event builder)."""

    def __init__(self, phase: str, tool_format: str, file_name: str, tz: tzinfo | None,
                 denied: Mapping[str, str] | None = None) -> None:
        self.format, self.tz = tool_format, tz
        self.denied: dict[str, str] = dict(denied or {})
        self.out = EventBuilder(phase, file_name)
        self.final: str | None = None
        self.seen_assistant = False
        self.by_id: dict[str, tuple[ToolUse, str | None]] = {}
        self.waiting: list[tuple[ToolUse, str | None]] = []
        self.latency: dict[str, float] = {}

    def feed(self, lineno: int, msg: dict[str, Any]) -> None:
        role = msg.get("role")
        content = raw if isinstance(raw := msg.get("content"), str) else ""
        meta = mapping(msg.get("metadata"))
        ts = _timestamp(msg.get("timestamp"), self.tz)
        if role == "assistant":
            self._assistant(lineno, content, meta, ts)
        elif role == "system" and meta.get("error") is True:
            self._request_error(lineno, content, meta, ts)
        elif role == "system" and self.seen_assistant:
            self._result(lineno, content, msg.get("call_id"), meta, ts)
        elif role == "user":
            self.waiting = []

    def _assistant(self, lineno: int, content: str, meta: dict[str, Any], ts: str | None) -> None:
        found = tool_uses(content, self.format)
        # a text tool use gptme cannot read never ran: no start (a tier-B start says "it ran"); the
        # response itself carries the evidence
        unreadable = [u for u in found if u.malformed and u.call_id is None]
        # a text block of a tool the allowlist left out: gptme ignores it (a native denial, not a start)
        refused = [u for u in found if u.call_id is None and not u.malformed and u.name in self.denied]
        uses = [u for u in found if not (u.malformed and u.call_id is None) and u not in refused]
        timings = mapping(meta.get("timings"))
        payload: dict[str, Any] = {"text": content[:TEXT_LIMIT], "tool_call_count": len(uses)}
        if unreadable:
            payload["unreadable_tool_uses"] = [
                {"raw_name": u.name, "name": TOOL_NAMES.normalize(u.name)[0] or None,
                 "kind": TOOL_NAMES.normalize(u.name)[1],
                 "arguments": u.arguments[:OUTPUT_LIMIT] if isinstance(u.arguments, str) else u.arguments}
                for u in unreadable]
        for key in ("model", "usage"):
            if key in meta:
                payload[key] = meta[key]
        latency = sum(v for k in ("ttft_ms", "gen_ms") if (v := number(timings.get(k))) is not None)
        event = self.out.add(lineno, event_type="model_response", timestamp=ts, status="success",
                             error_type="protocol_malformed" if unreadable else None,
                             latency_ms=round(latency, 3) or None, payload=payload)
        parent = event.event_id if event is not None else None
        for said in thinking(content):
            self.out.add(lineno, event_type="thought", timestamp=ts, status="success", parent_id=parent,
                         payload={"text": said[:TEXT_LIMIT]})
        for use in refused:
            self._denial(lineno, use, None, ts)
        self.seen_assistant = True
        by_name = mapping(timings.get("tool_ms_by_name"))
        names = [u.name for u in uses]
        self.latency = {k: v for k, raw in by_name.items()
                        if (v := number(raw)) is not None and names.count(k) == 1}
        self.waiting = []
        for use in uses:
            name, kind = TOOL_NAMES.normalize(use.name)
            self.out.add(lineno, event_type="tool_call_start", tool_call_id=use.call_id, timestamp=ts,
                         status="started", parent_id=parent,
                         error_type="malformed_arguments" if use.malformed else None,
                         payload={"raw_name": use.name, "name": name or None, "kind": kind,
                                  "arguments": use.arguments})
            if use.malformed:
                continue  # gptme does not run a call it cannot decode: no result will come
            if use.call_id:
                self.by_id[use.call_id] = (use, parent)
            else:
                self.waiting.append((use, parent))
        stripped = _THINKING.sub("", strip_tool_uses(content, self.format)).strip() if thinking(content) \
            else strip_tool_uses(content, self.format)
        if stripped:
            self.final = stripped  # the answer, without its reasoning (a thought event of its own)

    def _result(self, lineno: int, content: str, call_id: Any, meta: dict[str, Any], ts: str | None) -> None:
        if isinstance(call_id, str) and call_id in self.by_id:
            use, parent = self.by_id.pop(call_id)
        elif call_id is None and self.waiting and not content.lstrip().startswith("<"):
            use, parent = self.waiting.pop(0)
        else:
            return
        name, kind = TOOL_NAMES.normalize(use.name)
        status, exit_code = result_status(use.name, content)
        if use.name in self.denied and (m := _NOT_AVAILABLE.match(content.lstrip())) and m.group(1) == use.name:
            self._denial(lineno, use, use.call_id, ts)
        self.out.add(lineno, event_type="tool_call_result", tool_call_id=use.call_id, timestamp=ts, status=status,
                     parent_id=parent, exit_code=exit_code, latency_ms=self.latency.get(use.name),
                     error_type="tool_error" if status == "error" else None,
                     payload={"raw_name": use.name, "name": name or None, "kind": kind, "arguments": use.arguments,
                              "output": content[:OUTPUT_LIMIT]})

    def _denial(self, lineno: int, use: ToolUse, call_id: str | None, ts: str | None) -> None:
        name, kind = TOOL_NAMES.normalize(use.name)
        request = PermissionRequest(request_id=f"native-{call_id or len(self.out.events) + 1}", tool_call_id=call_id,
                                    raw_name=use.name, name=name or None, kind=kind, input=use.arguments)
        permission_events(self.out, lineno, request, PermissionDecision("deny", self.denied[use.name]),
                          decided_by="native", timestamp=ts)

    def _request_error(self, lineno: int, content: str, meta: dict[str, Any], ts: str | None) -> None:
        code = _HTTP_CODE.search(content)
        error_type = ("backend_tool_unsupported" if _UNSUPPORTED.search(content)
                      else f"http_{code.group(1)}" if code else "agent_error")
        payload: dict[str, Any] = {"error": content[:TEXT_LIMIT]}
        for key in ("error_class", "exit_code"):
            if key in meta:
                payload[key] = meta[key]
        self.out.add(lineno, event_type="model_response", timestamp=ts, status="error", error_type=error_type,
                     payload=payload)


def result_status(tool: str, content: str) -> tuple[str, int | None]:
    """``(status, exit_code)`` of a tool result from its text (see the module docstring)."""
    head = content.lstrip()
    if head.startswith("Command timed out") or "\nCommand timed out" in content[:400]:
        return "timeout", None
    if _ERROR_RESULT.match(head):
        return "error", None
    if tool == "shell" and (head.startswith("Ran ") or _RETURN_CODE.search(content)):
        code = _RETURN_CODE.search(content)
        exit_code = int(code.group(1)) if code else 0
        if "Process interrupted" in content:
            return "error", exit_code if code else None
        return ("success" if exit_code == 0 else "error"), exit_code
    return "success", None




def _timestamp(value: Any, tz: tzinfo | None) -> str | None:
    """gptme's ISO timestamp as UTC (naive → ``tz``, or the local zone), None when unreadable."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=tz) if tz is not None else moment.astimezone()
        return iso(moment.astimezone(timezone.utc))
    except (ValueError, OverflowError, OSError):
        return None

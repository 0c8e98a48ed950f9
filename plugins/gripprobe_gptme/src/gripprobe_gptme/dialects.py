"""Oracle dialects for gptme: how the oracle backend says a reference action in gptme's own terms.

gptme has three tool formats (``--tool-format``), and each needs the oracle to talk differently:

- ``tool`` (:class:`GptmeToolDialect`, named ``gptme-tool``): OpenAI function tools (save,
  append, patch, shell, complete ...). It is the generic ``tools`` dialect with ``save`` among its
  write tools, plus what gptme needs on top: the final turn calls ``complete`` (without it gptme
  nudges "No tool call detected" and, since the nudge is a new user message, the generic dialect
  would start the plan again, forever), edits go through gptme's ``patch`` tool (conflict markers),
  writes whose content ``save`` cannot reproduce (no final newline: gptme adds one) go through the
  shell, and gptme's nudges never reset the step count.
- ``markdown`` (:class:`GptmeMarkdownDialect`, ``gptme-markdown``): no tools are offered; a tool use
  is a fenced block in the reply text (```` ```save <path> ````, ```` ```shell ````,
  ```` ```patch <path> ````, ```` ```complete ````).
- ``xml`` (:class:`GptmeXmlDialect`, ``gptme-xml``): ``<tool-use><save args="path">…</save></tool-use>``.

A request is gptme's when one of its system messages starts with gptme's identity line ("You are
gptme v…", wrapped in ``<role>`` in the xml format). The background title request (system "Generate
concise conversation titles.") is not a task request: it gets the oracle's side answer and never
advances the plan.

Ground truth: the recording proxy counts tool calls written as text only in the syntaxes its
scanner knows (:func:`~gripprobe_core.plugin.scan_text_tool_calls`: Hermes ``<tool_call>``, JSON
call objects, ...), which deliberately excludes gptme's fenced blocks and ``<tool-use>``. So a
text-format turn records exactly the calls that scanner finds in the reply text (normally none):
ground truth and the proxy's ``tool_call_nonstructured_count`` agree by construction. gptme's own
log shows the text tool uses (tier B, :mod:`gripprobe_gptme.parse`).

The prose around a tool use is made inert first: a tool output quoted in the final answer must never
become a tool use gptme would run. In the tool and markdown formats :func:`defuse` indents fence
lines and ``@tool(id): {…}`` lines; in the xml format the prose is XML-escaped, because gptme
(installed without lxml) parses the whole reply as one XML document and runs nothing at all when it
is not well-formed.

What a text format cannot carry exactly goes through gptme's shell instead: ``save`` adds a missing
final newline, a markdown block cannot safely hold fence lines, xml strips the text around a body.
The fallback is the generic dialect's exact shell command, else the content decoded from base64
(``printf … | base64 -d > path``, or ``eval "$(… | base64 -d)"`` for a command): gptme's shell
denies piping into ``bash`` or ``python``.

The text formats have no structured call (:meth:`_GptmeTextDialect.failing_call` is None); they
implement the profiles' optional text hooks instead:

- ``failing_turn(request)`` (``error-then-recover``, ``retry-loop``): a reply with one ``shell`` tool
  use, ``cat gripprobe-missing-file.txt`` (the generic dialect's failing call, same command), which
  gptme really runs and which really fails (``Return code: 1``). It is the same text for every
  request, so three of them are three identical failing attempts (a retry loop), and it counts as a
  step (:meth:`_GptmeTextDialect.steps_taken` counts replies holding a tool use), so
  ``error-then-recover`` plays the plan after it and ``retry-loop`` stops after three.
- ``malformed_turn(actions, index, request)`` (``malformed-args``): the turn performing
  ``actions[index]`` with its tool use cut short, the text analogue of JSON arguments whose closing
  brace is cut off: markdown drops the closing fence, xml drops the tool element's closing tag
  (``</save>``), so the reply is not well-formed. gptme reads no tool use from either (measured: an
  unterminated fence is dropped; the stdlib XML parser fails with "mismatched tag" and gptme runs
  nothing), runs nothing, sends no result and nudges "No tool call detected", exactly as it treats a
  cut-short structured call in the ``tool`` format. The opening line still counts as a step, so the
  profile then gives up in text. :mod:`gripprobe_gptme.parse` reports no tool event for it (nothing
  ran) but marks the reply's ``model_response`` ``error_type: protocol_malformed``: the case ends
  NO_TOOL_CALL (protocol_malformed), like a tool call written as text.

  Rejected alternatives: a markdown ``save`` block without a path is not an error in gptme 0.35.1
  (it takes the language word as the path and writes a file named ``save``); an xml ``<save>``
  without ``args`` does fail ("Cannot save to .: not a regular file"), but a ``shell`` tool use has
  no attribute to leave out, and the cut-short form works for every action in both formats.

See the plugin README for the statuses each profile gets.
"""

from __future__ import annotations

import base64
import re
import shlex
from typing import Any, Sequence

from gripprobe_core.plugin import (
    COMMAND_PARAMS, MISSING_FILE, ChatRequest, Dialect, ReferenceAction, ReferenceEdit, ReferenceRead, ReferenceShell,
    ReferenceWrite, TextCall, ToolCall, ToolInfo, ToolsDialect, Turn, accepts_type, describe_action, fill_required,
    find_param, message_text, scan_text_tool_calls, shell_command_for,
)

from .names import BLOCK_TOOLS

__all__ = [
    "FAILING_COMMAND", "GptmeMarkdownDialect", "GptmeToolDialect", "GptmeXmlDialect", "TOOL_NAMES", "b64_write_command",
    "conflict_patch", "defuse", "gptme_dialects", "is_gptme_request", "is_nudge", "real_user_index",
]

#: gptme 0.35.1's tool block languages (fenced blocks with other languages are not tool uses).
TOOL_NAMES = BLOCK_TOOLS

_IDENTITY = re.compile(r"^\s*(?:<role>\s*)?You are gptme v\d", re.I)
_MD_TOOL_FENCE = re.compile(r"^`{3,}[ \t]*([A-Za-z_][\w-]*)", re.M)
_XML_TOOL_USE = re.compile(r"<tool-use>\s*<([A-Za-z_][\w-]*)[\s>]", re.I)
_TOOLCALL_LINE = re.compile(r"^@[^\r\n(]+\([\w\-:.]+\):", re.M)
_FENCE_LINE = re.compile(r"^(?=`{3,}|~{3,})", re.M)
_XML_TAGS = re.compile(r"<(?=/?(?:tool-use|function_calls)\b)", re.I)
_SAFE_PATH = re.compile(r"[A-Za-z0-9_.@+,%=/:-]+")
_PLACEHOLDER = re.compile(r"^[ \t]*(#|//|\") \.\.\. ?.*$", re.M)

#: The shell command of the text formats' deliberately failing tool use (as the generic dialect's
#: ``failing_call``): ``cat`` of a file no test creates, which exits 1.
FAILING_COMMAND = f"cat {MISSING_FILE}"

ORIGINAL, DIVIDER, UPDATED = "<<<<<<< ORIGINAL\n", "\n=======\n", "\n>>>>>>> UPDATED"


# ------------------------------------------------------------------------------ recognising gptme

def is_gptme_request(request: ChatRequest) -> bool:
    """Does a system message of ``request`` carry gptme's identity line ("You are gptme v0.35.1 …")?"""
    return any(m.get("role") == "system" and _IDENTITY.match(message_text(m)) for m in request.messages)


def is_nudge(message: dict[str, Any]) -> bool:
    """A user message gptme wrote itself: a ``<system>…</system>`` wrapper (the "No tool call detected"
    nudge, a folded system notice), not something the user asked."""
    return message.get("role") == "user" and message_text(message).lstrip().startswith("<system>")


def real_user_index(request: ChatRequest) -> int:
    """Index of the last user message that is not one of gptme's own nudges (-1 when none)."""
    last = -1
    for i, msg in enumerate(request.messages):
        if msg.get("role") == "user" and not is_nudge(msg):
            last = i
    return last


def _since_real_user(request: ChatRequest) -> list[dict[str, Any]]:
    return request.messages[real_user_index(request) + 1:]


def defuse(text: str) -> str:
    """``text`` with everything gptme would execute made inert: a fence at the start of a line gets
    four spaces before it, an ``@tool(id): {…}`` line one, ``<tool-use>``/``<function_calls>`` tags
    become ``&lt;…``; line breaks are normalized to ``\n`` first, as gptme's block reader does.
    Plain prose is unchanged."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _FENCE_LINE.sub("    ", text)
    text = _TOOLCALL_LINE.sub(lambda m: " " + m.group(0), text)
    return _XML_TAGS.sub("&lt;", text)


def text_calls_in(text: str) -> tuple[TextCall, ...]:
    """The calls the recording proxy's nonstructured scanner finds in ``text``, as ground truth
    (``structured: false``, no action index): what makes ground truth and tier A agree."""
    return tuple(TextCall(ToolCall(c.name, c.arguments)) for c in scan_text_tool_calls(text))


def _turn(text: str, *, tool_call: ToolCall | None = None, action_index: int | None = None) -> Turn:
    return Turn(text=text, tool_call=tool_call, action_index=action_index, text_calls=text_calls_in(text))


# ------------------------------------------------------------------------------ gptme's patch tool

def conflict_patch(old: str, new: str) -> str | None:
    """gptme's patch text replacing ``old`` with ``new``; None when gptme would not read it back
    exactly (empty or identical texts, conflict markers inside them, lines gptme takes for
    ``# ...`` placeholders)."""
    if not old or old == new or "\r" in old + new:
        return None
    if _PLACEHOLDER.search(old) or _PLACEHOLDER.search(new):
        return None
    patch = f"{ORIGINAL}{old}{DIVIDER}{new}{UPDATED}"
    return patch if _read_conflict_patch(patch) == (old, new) else None


def _read_conflict_patch(patch: str) -> tuple[str, str] | None:
    """How gptme 0.35.1 splits one conflict-marker patch (exact split rules), for the round trip check."""
    block = patch.strip()
    if block.count(ORIGINAL) != 1 or not block.startswith(ORIGINAL):
        return None
    after = block[len(ORIGINAL):]
    if DIVIDER not in after:
        return None
    original, rest = after.split(DIVIDER, 1)
    if rest.startswith(UPDATED[1:]):
        return original, ""
    if UPDATED not in rest:
        return None
    updated, tail = rest.split(UPDATED, 1)
    if tail.strip() or re.search(r"\n=======(?!=)", updated):
        return None
    return original, updated


# ------------------------------------------------------------------------------ the tool format

class GptmeToolDialect(ToolsDialect):
    """gptme with ``--tool-format tool``: the generic function-tools dialect, plus ``complete`` to end,
    ``patch`` for edits, the shell for writes ``save`` cannot reproduce, and nudges that do not
    restart the plan."""

    name = "gptme-tool"
    format = "tool"
    #: gptme's ``save`` is a write tool (the core's generic names leave it out: it names no agent).
    write_names = ToolsDialect.write_names | {"save"}

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return format == self.format and request.has_tools and is_gptme_request(request)

    def steps_taken(self, request: ChatRequest) -> int:
        return sum(1 for m in _since_real_user(request)
                   if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list) and m["tool_calls"])

    def finish(self, request: ChatRequest, text: str) -> Turn:
        complete = request.tool("complete")
        call = ToolCall.of(complete.name, fill_required(complete, {})) if complete is not None else None
        return _turn(defuse(text), tool_call=call)

    def say_with_functions(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        shell = self.shell_tool(request)
        if isinstance(action, ReferenceWrite) and not action.write.content.endswith("\n") and shell is not None:
            return Turn(tool_call=self._command_call(shell, shell_command_for(action)), action_index=index)
        if isinstance(action, ReferenceEdit):
            patch_tool = request.tool("patch")
            patch = conflict_patch(action.edit.old, action.edit.new)
            if patch_tool is not None and patch is not None and {"path", "patch"} <= set(patch_tool.properties):
                return Turn(tool_call=ToolCall.of(patch_tool.name, fill_required(
                    patch_tool, {"path": action.edit.path, "patch": patch})), action_index=index)
        return super().say_with_functions(action, index, request)

    @staticmethod
    def _command_call(tool: ToolInfo, command: str) -> ToolCall:
        param = find_param(tool, COMMAND_PARAMS) or "command"
        value: Any = command
        if accepts_type(tool.properties.get(param), "array") and not accepts_type(tool.properties.get(param), "string"):
            value = ["bash", "-lc", command]
        return ToolCall.of(tool.name, fill_required(tool, {param: value}))


# ------------------------------------------------------------------------------ the text formats

class _GptmeTextDialect:
    """Shared logic of the markdown and xml dialects: gptme's tool uses are written in the reply text;
    no tools are offered, so a task request is one carrying gptme's system prompt."""

    name = ""
    format = ""

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return format == self.format and not request.has_tools and is_gptme_request(request)

    def is_task_request(self, request: ChatRequest) -> bool:
        return is_gptme_request(request)

    def steps_taken(self, request: ChatRequest) -> int:
        """Assistant turns since the last real user message whose text holds a gptme tool use."""
        return sum(1 for m in _since_real_user(request)
                   if m.get("role") == "assistant" and self.tool_uses(message_text(m)))

    def tool_uses(self, text: str) -> list[str]:
        """Names of the gptme tool uses written in ``text`` (in this format's syntax)."""
        raise NotImplementedError

    # -------------------------------------------------------------------- speaking

    def say(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        return _turn(f"{self.prose(f'I will {describe_action(action)}.')}\n\n{self.block_for(action)}\n",
                     action_index=index)

    def say_in_plan(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        return self.say(actions[index], index, request)

    def failing_call(self, request: ChatRequest) -> ToolCall | None:
        """None: a text format has no structured call; :meth:`failing_turn` says the failure instead."""
        return None

    def failing_turn(self, request: ChatRequest) -> Turn:
        """A reply whose one tool use gptme runs and that fails: ``cat`` of the missing file in a
        ``shell`` tool use (exit 1). The same text whatever the request (a retry repeats it exactly);
        it holds a tool use, so :meth:`steps_taken` counts it."""
        return _turn(f"{self.prose('Let me look at the existing file first.')}\n\n"
                     f"{self.block('shell', None, FAILING_COMMAND)}\n")

    def malformed_turn(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn | None:
        """The turn performing ``actions[index]`` with its tool use cut short (see :meth:`cut_short`):
        gptme reads no tool use from it and runs nothing. None when no action is left."""
        if not 0 <= index < len(actions):
            return None
        action = actions[index]
        broken = self.cut_short(self.block_for(action))
        return _turn(f"{self.prose(f'I will {describe_action(action)}.')}\n\n{broken}\n", action_index=index)

    def cut_short(self, block: str) -> str:
        """``block`` (one tool use) without its closing syntax, so gptme cannot read it."""
        raise NotImplementedError

    def finish(self, request: ChatRequest, text: str) -> Turn:
        return _turn(f"{self.prose(text)}\n\n{self.block('complete', None, '')}\n")

    def prose(self, text: str) -> str:
        """``text`` made safe to stand next to this format's tool uses (see :func:`defuse`)."""
        return defuse(text)

    def block_for(self, action: ReferenceAction) -> str:
        """The tool use performing ``action``: ``save`` / ``patch`` when the format carries the text
        exactly, else the shell (see :meth:`shell_block`)."""
        if isinstance(action, ReferenceWrite):
            path, content = action.write.path, action.write.content
            if self.path_ok(path) and self.save_ok(content):
                return self.block("save", path, content[:-1])
            command = shell_command_for(action)
            return self.shell_block(command if self.body_ok(command) else b64_write_command(path, content))
        if isinstance(action, ReferenceEdit):
            patch = conflict_patch(action.edit.old, action.edit.new)
            if patch is not None and self.path_ok(action.edit.path) and self.body_ok(patch):
                return self.block("patch", action.edit.path, patch)
            return self.shell_block(shell_command_for(action))
        if isinstance(action, ReferenceRead):
            return self.shell_block(f"cat -- {shlex.quote(action.read.path)}")
        if isinstance(action, ReferenceShell):
            return self.shell_block(action.shell)
        raise TypeError(f"not a reference action: {action!r}")

    def shell_block(self, command: str) -> str:
        """A ``shell`` tool use running ``command``; a command the block cannot carry unchanged (a
        fence-like line, surrounding whitespace in xml, control characters) is sent base64-encoded
        and ``eval``-ed in gptme's shell (exact; gptme refuses ``… | bash`` outright)."""
        command = command.rstrip("\n")
        if self.body_ok(command) and command.strip():
            return self.block("shell", None, command)
        return self.block("shell", None, f'eval "$(printf \'%s\' {_b64(command)} | base64 -d)"')

    @staticmethod
    def path_ok(path: str) -> bool:
        return bool(_SAFE_PATH.fullmatch(path))

    def save_ok(self, content: str) -> bool:
        """Can ``save`` write exactly ``content``? gptme adds a final newline when missing, so the
        content must end with exactly one; the block body is the content without it."""
        return content.endswith("\n") and not content.endswith("\n\n") and self.body_ok(content[:-1])

    def body_ok(self, body: str) -> bool:
        """Does gptme read ``body`` back unchanged from this format's block?"""
        raise NotImplementedError

    def block(self, tool: str, arg: str | None, body: str) -> str:
        raise NotImplementedError


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def b64_write_command(path: str, content: str) -> str:
    """A shell command writing exactly ``content`` to ``path`` from base64 (no interpreter involved:
    gptme's shell denies piping into ``bash``/``python``)."""
    qpath = shlex.quote(path)
    mkdir = f"mkdir -p -- \"$(dirname -- {qpath})\" && " if "/" in path.strip("/") else ""
    return f"{mkdir}printf '%s' {_b64(content)} | base64 -d > {qpath}"


class GptmeMarkdownDialect(_GptmeTextDialect):
    """gptme with ``--tool-format markdown``: ```` ```save <path> ```` / ```` ```shell ```` fenced blocks."""

    name = "gptme-markdown"
    format = "markdown"

    def tool_uses(self, text: str) -> list[str]:
        return [m.group(1) for m in _MD_TOOL_FENCE.finditer(text) if m.group(1) in TOOL_NAMES]

    def body_ok(self, body: str) -> bool:
        """No fence-like line (gptme tracks nested fences, but not every case), no control characters."""
        return not _CONTROL.search(body) and not re.search(r"^[ \t]*(`{3,}|~{3,})", body, re.M)

    def block(self, tool: str, arg: str | None, body: str) -> str:
        head = f"{tool} {arg}" if arg else tool
        return f"```{head}\n```" if tool == "complete" else f"```{head}\n{body}\n```"

    def cut_short(self, block: str) -> str:
        """The block without its closing fence: gptme drops an unterminated block (no tool use)."""
        head, _, _ = block.rpartition("\n")
        return head


class GptmeXmlDialect(_GptmeTextDialect):
    """gptme with ``--tool-format xml``: ``<tool-use><save args="path">…</save></tool-use>``."""

    name = "gptme-xml"
    format = "xml"

    def tool_uses(self, text: str) -> list[str]:
        return [m.group(1).lower() for m in _XML_TOOL_USE.finditer(text) if m.group(1).lower() in TOOL_NAMES]

    def body_ok(self, body: str) -> bool:
        """gptme strips the element's text: no leading or trailing whitespace, no control characters."""
        return body == body.strip() and not _CONTROL.search(body)

    def prose(self, text: str) -> str:
        """XML-escaped: gptme (without lxml, as installed) parses the *whole* reply as XML and runs
        nothing when it is not well-formed, so a stray ``<`` or ``&`` in the prose would cancel the
        tool use next to it."""
        from xml.sax.saxutils import escape  # here: xml.sax imports urllib.request (~30 ms of every start)

        return escape(_CONTROL.sub("?", text))

    def block(self, tool: str, arg: str | None, body: str) -> str:
        from xml.sax.saxutils import escape, quoteattr

        attrs = f" args={quoteattr(arg)}" if arg else ""
        inner = f"\n{escape(body)}\n" if body else "\n"
        return f"<tool-use>\n<{tool}{attrs}>{inner}</{tool}>\n</tool-use>"

    def cut_short(self, block: str) -> str:
        """The tool use without the tool element's closing tag (``</save>``): the reply is no longer
        well-formed, so gptme (stdlib XML parser: "mismatched tag") runs nothing."""
        m = re.search(r"\n</([A-Za-z_][\w-]*)>\n</tool-use>$", block)
        return block[:m.start()] + "\n</tool-use>" if m else block.replace("</tool-use>", "")


def gptme_dialects() -> dict[str, Dialect]:
    """The three gptme dialects by name (what the driver's ``oracle_dialects`` gives the oracle)."""
    return {d.name: d for d in (GptmeToolDialect(), GptmeMarkdownDialect(), GptmeXmlDialect())}

"""Reading an aider request: which edit format its system prompt teaches, which fence it uses,
which files are in the chat (with their current content), and which replies this session has had.

aider 0.86.2 sends, in order: its system prompt; a worked example (user/assistant pairs) ending with
"I switched to a new code base…" / "Ok."; the session's earlier exchanges ("done" messages: an
exchange moves there once its edits touched a file, followed by "I updated the files." / "Ok.");
the chat files message — either "I have *added these files to the chat*…" followed by a *file
listing* of every chat file (``\\n<path>\\n<fence>\\n<content><fence>\\n``), or "I am not sharing
any files that you can edit yet." — answered by a canned reply; then the current exchange (the
user's message, or aider's reflection of a failed edit, and the replies since). Nothing here
raises on an unexpected request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from gripprobe_core.plugin import message_text

#: aider's system prompt opening for its editing coders (the architect's differs).
CODER_MARK = "Act as an expert software developer."
#: Per edit format, a phrase only that format's system prompt contains.
FORMAT_MARKS: dict[str, tuple[str, ...]] = {
    "whole": ("*file listing* format",),
    "diff": ("*SEARCH/REPLACE block* Rules", "1. The *FULL* file path alone on a line"),
    "udiff": ("`diff -U0`", "--- /dev/null"),
}

#: The fences aider may choose (``aider.coders.base_coder.all_fences``), opening → closing.
FENCES: dict[str, str] = {
    "```": "```", "````": "````", "<source>": "</source>", "<code>": "</code>", "<pre>": "</pre>",
    "<codeblock>": "</codeblock>", "<sourcecode>": "</sourcecode>",
}
DEFAULT_FENCE = ("```", "```")

FILES_PREFIX = "I have *added these files to the chat*"
#: The user message closing aider's worked example: everything after it is this session's.
EXAMPLES_END = "I switched to a new code base."
NO_FILES_PREFIXES = ("I am not sharing any files that you can edit yet.",
                     "Don't try and edit any existing code without asking me to add the files to the chat!")

_WHOLE_FENCE = re.compile(r"^path/to/filename\.js\n(\S+)\n", re.M)
_DIFF_FENCE = re.compile(r"^2\. The opening fence and code language, eg: (\S+?)python\s*$", re.M)


def system_text(messages: Sequence[Any]) -> str:
    """All system messages' text, joined."""
    return "\n".join(message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "system")


def edit_format_of(messages: Sequence[Any]) -> str | None:
    """The edit format aider's system prompt teaches (``whole``/``diff``/``udiff``), else None."""
    system = system_text(messages)
    if CODER_MARK not in system:
        return None
    for fmt, marks in FORMAT_MARKS.items():
        if all(mark in system for mark in marks):
            return fmt
    return None


def fence_of(messages: Sequence[Any]) -> tuple[str, str]:
    """The fence aider chose for this chat (it avoids fences that occur in the chat files), read
    from the example in the system prompt; ``` when it cannot be read."""
    system = system_text(messages)
    for pattern in (_WHOLE_FENCE, _DIFF_FENCE):
        m = pattern.search(system)
        if m and m.group(1) in FENCES:
            return m.group(1), FENCES[m.group(1)]
    return DEFAULT_FENCE


def parse_file_listings(text: str) -> dict[str, str]:
    """``{path: content}`` from aider's chat files message (after its prefix paragraph).

    A listing is a path line, a line that is exactly an opening fence (aider uses the fence it chose
    for the chat, one of :data:`FENCES`; the udiff prompt never shows it, so it is read here), the
    content, and the closing fence at the start of a line (or, for content without a final newline,
    at the end of its last line). aider chose the fence so that no content line starts with it."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i + 1 < len(lines):
        path, opener = lines[i].strip(), lines[i + 1]
        closer = FENCES.get(opener)
        if not path or closer is None:
            i += 1
            continue
        body: list[str] = []
        j = i + 2
        closed = False
        while j < len(lines):
            line = lines[j]
            if line.startswith(closer):
                out[path] = "".join(b + "\n" for b in body)
                closed = True
                break
            if line.endswith(closer) and (j + 1 == len(lines) or not lines[j + 1].strip()):
                out[path] = "".join(b + "\n" for b in body) + line[: -len(closer)]
                closed = True
                break
            body.append(line)
            j += 1
        i = j + 1 if closed else i + 1
    return out


@dataclass(frozen=True)
class AiderChat:
    """What one aider request says: format, fence, chat files and the current task's turns."""

    edit_format: str
    fence: tuple[str, str]
    files: dict[str, str] = field(default_factory=dict)
    """Chat files and their content as aider sent them (the truth about the workspace right now)."""
    task_replies: tuple[str, ...] = ()
    """The assistant replies of this session (after aider's worked example): earlier oracle turns.
    aider moves an exchange whose edits touched a file into its "done" history (placed before the
    chat files message), so the session's replies are not all after the last user message."""


def read_chat(messages: Sequence[Any]) -> AiderChat | None:
    """An :class:`AiderChat` when ``messages`` are an aider coder request, else None. Never raises."""
    try:
        return _read_chat(list(messages))
    except (TypeError, ValueError, AttributeError, IndexError, RecursionError):
        return None


def _read_chat(messages: list[Any]) -> AiderChat | None:
    fmt = edit_format_of(messages)
    if fmt is None:
        return None
    fence = fence_of(messages)
    files: dict[str, str] = {}
    examples_end = -1
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            continue
        text = message_text(msg)
        if msg.get("role") != "user":
            continue
        if text.startswith(FILES_PREFIX):
            files = parse_file_listings(text[len(FILES_PREFIX):])
        elif text.startswith(NO_FILES_PREFIXES):
            files = {}
        elif text.startswith(EXAMPLES_END):
            examples_end = i
    replies = [message_text(m) for m in messages[examples_end + 1:]
               if isinstance(m, dict) and m.get("role") == "assistant"]
    return AiderChat(edit_format=fmt, fence=fence, files=files, task_replies=tuple(replies))

"""The oracle's aider dialects (``aider-whole``, ``aider-diff``, ``aider-udiff``): reference actions
said as aider edit blocks in the reply TEXT.

aider sends no tools; it parses edits out of the model's reply and applies all of them at once, then
(with ``--message``) stops — it asks the model again only when an edit failed (a "reflection", at
most three). So a dialect says every remaining action in ONE reply:

- ``write`` and ``edit`` become edit blocks in the dialect's format (:mod:`.edits`), computed
  against the files aider put in the chat (their content is in the request, so an edit is said
  against what the file really holds; see :mod:`.conversation`);
- ``read`` needs nothing: a file aider can read is in the chat already;
- ``shell`` cannot be done (aider has no shell): the reply says so.

Each reply starts with a sentence naming the plan steps it performs ("I will perform steps 1-2 of
the plan: …"); :meth:`AiderDialect.steps_taken` adds those up over the replies of the current task,
so the dialect stays stateless like every profile. The optional hooks ``failing_turn`` (an edit aider
must reject: a SEARCH/hunk on ``gripprobe-missing-file.txt`` that cannot match, or in ``whole`` a
listing without a file name) and ``malformed_turn`` (the first edit block broken) serve the
``error-then-recover``, ``retry-loop`` and ``malformed-args`` profiles.

Ground truth: edit blocks are aider's own protocol, not tool calls, and the proxy's nonstructured
detector (:func:`gripprobe_core.plugin.scan_text_tool_calls`) does not count them. A reply is
recorded as nonstructured calls only when that detector would count something in it (say, a file
whose content is a JSON tool-call object), so tier A's structured + nonstructured counts always
equal the oracle's.
"""

from __future__ import annotations

import re
from typing import Sequence

from gripprobe_core.plugin import (
    MISSING_FILE, ChatRequest, ReferenceAction, ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite, TextCall,
    ToolCall, Turn, describe_action, scan_text_tool_calls,
)

from .conversation import AiderChat, read_chat
from .edits import FileEdit, ensure_newline, line_block, render, search_replace_block, udiff_hunk, whole_listing

#: The dialect name for each aider edit format (the driver's ``oracle_dialects``).
DIALECT_NAMES: dict[str, str] = {"whole": "aider-whole", "diff": "aider-diff", "udiff": "aider-udiff"}

#: A line aider's SEARCH/hunk can never find: the deliberately failing edit's "old" text.
MISSING_LINE = "GripProbe oracle: this line is in no file\n"

_PLAN_STEPS = re.compile(r"^I will perform steps? (\d+)(?:-(\d+))? of the plan\b", re.M)
_FAILING_STEP = re.compile(r"^Let me try one edit first\b", re.M)


def steps_in_reply(text: str) -> int:
    """How many plan steps one oracle reply performed (0 for anything else). Never raises."""
    if not isinstance(text, str):
        return 0
    m = _PLAN_STEPS.search(text)
    if m:
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        return max(1, last - first + 1)
    return 1 if _FAILING_STEP.search(text) else 0


def steps_header(first: int, last: int, actions: Sequence[ReferenceAction]) -> str:
    """The opening sentence of a plan reply (1-based, inclusive step numbers)."""
    span = f"step {first}" if first == last else f"steps {first}-{last}"
    return f"I will perform {span} of the plan: {'; '.join(describe_action(a) for a in actions)}."


def text_turn(text: str, action_index: int | None = None) -> Turn:
    """A reply turn; any tool calls the proxy's nonstructured detector would see in ``text`` are
    attached as ``text_calls`` so the ground truth records them (``structured: false``)."""
    calls = tuple(TextCall(ToolCall(c.name, c.arguments), action_index) for c in scan_text_tool_calls(text))
    return Turn(text=text, action_index=action_index, text_calls=calls)


class AiderDialect:
    """Speaks to aider in one edit format (see the module docstring)."""

    def __init__(self, edit_format: str) -> None:
        if edit_format not in DIALECT_NAMES:
            raise ValueError(f"unknown aider edit format {edit_format!r}")
        self.edit_format = edit_format
        self.name = DIALECT_NAMES[edit_format]

    def __repr__(self) -> str:
        return f"AiderDialect({self.edit_format!r})"

    # ------------------------------------------------------------------------- recognising

    def chat(self, request: ChatRequest) -> AiderChat | None:
        """The request read as an aider chat in this dialect's format, else None."""
        chat = read_chat(request.messages)
        return chat if chat is not None and chat.edit_format == self.edit_format else None

    def accepts(self, request: ChatRequest, format: str) -> bool:
        """Only aider's own requests (its coder system prompt for this format) in a case of this format."""
        return format == self.edit_format and self.chat(request) is not None

    def is_task_request(self, request: ChatRequest) -> bool:
        return self.chat(request) is not None

    def steps_taken(self, request: ChatRequest) -> int:
        chat = self.chat(request)
        return sum(steps_in_reply(t) for t in chat.task_replies) if chat else 0

    # --------------------------------------------------------------------------- speaking

    def say(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        return self._plan_turn([action], index, request)

    def say_in_plan(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        """Every action from ``index`` on, in one reply (aider applies one reply's edits together)."""
        return self._plan_turn(list(actions[index:]), index, request)

    def finish(self, request: ChatRequest, text: str) -> Turn:
        return text_turn(text)

    def failing_turn(self, request: ChatRequest) -> Turn | None:
        """An edit aider must reject (it reflects the error back): in ``diff``/``udiff`` a SEARCH/hunk
        on ``gripprobe-missing-file.txt`` that matches nothing (aider creates that file empty first);
        in ``whole`` a listing without a file name — None when exactly one file is in the chat,
        because aider then applies a nameless listing to that file."""
        chat = self.chat(request)
        if chat is None:
            return None
        lead = f"Let me try one edit first: {MISSING_FILE}.\n\n"
        if self.edit_format == "diff":
            return text_turn(lead + search_replace_block(MISSING_FILE, MISSING_LINE, "present\n", chat.fence))
        if self.edit_format == "udiff":
            edit = FileEdit(MISSING_FILE, MISSING_LINE, "present\n", None)
            return text_turn(lead + "```diff\n" + udiff_hunk(edit) + "```\n")
        if len(chat.files) == 1:
            return None
        return text_turn("Let me try one edit first.\n\n" + f"{chat.fence[0]}\npresent\n{chat.fence[1]}\n")

    def malformed_turn(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn | None:
        """The first write/edit from ``index`` on, its block broken the way aider cannot parse:
        ``whole`` drops the file name line (aider still applies the listing when exactly one file is in
        the chat), ``diff`` drops ``>>>>>>> REPLACE``, ``udiff`` drops the ``---``/``+++`` file header.
        None when no write/edit is left."""
        chat = self.chat(request)
        if chat is None:
            return None
        rest = list(actions[index:])
        pos = next((i for i, a in enumerate(rest) if isinstance(a, (ReferenceWrite, ReferenceEdit))), None)
        if pos is None:
            return None
        edits, _ = plan_edits(rest[:pos + 1], chat)
        if not edits:
            return None
        edit = edits[-1]
        header = steps_header(index + 1, index + pos + 1, rest[:pos + 1])
        if self.edit_format == "diff":
            block = search_replace_block(edit.path, edit.old, edit.new, chat.fence, closed=False)
        elif self.edit_format == "udiff":
            block = "```diff\n" + udiff_hunk(edit).split("\n", 2)[2] + "```\n"
        else:
            block = whole_listing(edit.path, edit.full if edit.full is not None else edit.new, chat.fence)
            block = block.split("\n", 1)[1]
        return text_turn(f"{header}\n\n{block}", index + pos)

    def _plan_turn(self, actions: list[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        chat = self.chat(request)
        if chat is None or not actions:
            return Turn(text="I have nothing to change.")
        edits, notes = plan_edits(actions, chat)
        header = steps_header(index + 1, index + len(actions), actions)
        blocks = render(self.edit_format, edits, chat.fence)
        text = header + ("\n" + "\n".join(notes) if notes else "") + ("\n\n" + blocks if blocks else "")
        return text_turn(text, index)


def plan_edits(actions: Sequence[ReferenceAction], chat: AiderChat) -> tuple[list[FileEdit], list[str]]:
    """The file edits performing ``actions`` against the chat's files (in order), and sentences for
    what cannot be said exactly or at all. Files not in the chat are taken as absent (the plugin adds
    every file the workspace holds to the chat). An edit of a file whose content is unknown is given
    as whole lines (``diff``/``udiff``: aider finds them if they are whole lines of the file); ``whole``
    cannot say it at all (it needs the entire new content)."""
    whole = chat.edit_format == "whole"
    state: dict[str, str] = dict(chat.files)
    edits: list[FileEdit] = []
    notes: list[str] = []
    for action in actions:
        if isinstance(action, ReferenceWrite):
            path, content = action.write.path, action.write.content
            if content and not content.endswith("\n"):
                notes.append(f"({path} will end with a newline: aider writes whole lines.)")
            old = state.get(path, "")
            edits.append(FileEdit(path, old, ensure_newline(content), ensure_newline(content), creates=path not in state))
            state[path] = ensure_newline(content)
        elif isinstance(action, ReferenceEdit):
            path, old, new = action.edit.path, action.edit.old, action.edit.new
            current = state.get(path)
            block = line_block(current, old, new) if current is not None else None
            if current is not None and block is not None:
                old_lines, new_lines, context = block
                full = ensure_newline(current).replace(old_lines, new_lines, 1)
                edits.append(FileEdit(path, old_lines, new_lines, full, context))
                state[path] = full
            else:
                why = "is not in the chat" if current is None else "does not hold the old text exactly once"
                if whole:
                    notes.append(f"I cannot list {path} in full: it {why}.")
                else:
                    notes.append(f"({path} {why}: the change is given as whole lines.)")
                    edits.append(FileEdit(path, ensure_newline(old), ensure_newline(new), None))
                state.pop(path, None)
        elif isinstance(action, ReferenceShell):
            notes.append(f"I cannot run `{action.shell}`: I have no shell here.")
        elif isinstance(action, ReferenceRead):
            if action.read.path not in state:
                notes.append(f"I cannot read {action.read.path}: it is not in the chat.")
    return edits, notes

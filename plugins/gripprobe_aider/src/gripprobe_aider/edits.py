"""aider's three text edit formats, written the way aider 0.86.2 parses them.

- ``whole``: the file's path alone on a line, the opening fence, the ENTIRE new content, the closing
  fence. aider writes the lines between the fences verbatim.
- ``diff``: the path alone on a line, the opening fence, ``<<<<<<< SEARCH``, whole lines to find,
  ``=======``, their replacement, ``>>>>>>> REPLACE``, the closing fence. An empty SEARCH creates a
  new file (or appends to an existing one). SEARCH must match whole lines of the file.
- ``udiff``: a ```` ```diff ```` fence holding ``--- <path>`` / ``+++ <path>`` (``--- /dev/null`` for a
  new file) and ``@@ ... @@`` hunks of `` ``/``-``/``+`` lines. aider ignores line numbers.

Every format is line based: content without a final newline cannot be said exactly (aider ends
every line it writes). :func:`line_block` widens a substring replacement to the whole lines around it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileEdit:
    """One change to one file, as whole lines.

    ``old`` is the exact block of whole lines to replace ("" = create the file / append to it),
    ``new`` its replacement; ``full`` is the file's entire content afterwards when known (whole needs
    it); ``context`` are up to three unchanged lines right before ``old`` (udiff hunks use them)."""

    path: str
    old: str
    new: str
    full: str | None
    context: tuple[str, ...] = ()
    creates: bool = False


def ensure_newline(text: str) -> str:
    """``text`` ending with a newline (empty stays empty): the best a line format can say."""
    return text if not text or text.endswith("\n") else text + "\n"


def line_block(content: str, old: str, new: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(old_lines, new_lines, context)`` replacing the single occurrence of ``old`` in ``content``,
    widened to whole lines; None unless ``old`` occurs exactly once."""
    if not old or content.count(old) != 1:
        return None
    content = ensure_newline(content)
    pos = content.index(old)
    end = pos + len(old)
    start = content.rfind("\n", 0, pos) + 1
    stop = end if end > 0 and content[end - 1] == "\n" else content.index("\n", end) + 1
    new_block = content[start:pos] + new + content[end:stop]
    while new_block and not new_block.endswith("\n") and stop < len(content):
        # the replacement joins this line with the next one: take that line in too
        stop = content.index("\n", stop) + 1
        new_block = content[start:pos] + new + content[end:stop]
    old_block = content[start:stop]
    new_block = ensure_newline(new_block)
    before = content[:start].split("\n")[:-1][-3:]
    return old_block, new_block, tuple(before)


def _lines(text: str) -> list[str]:
    return text[:-1].split("\n") if text else []


def whole_listing(path: str, content: str, fence: tuple[str, str]) -> str:
    """A *file listing*: path, fence, the entire content, fence."""
    return f"{path}\n{fence[0]}\n{ensure_newline(content)}{fence[1]}\n"


def search_replace_block(path: str, old: str, new: str, fence: tuple[str, str], *, closed: bool = True) -> str:
    """A SEARCH/REPLACE block; ``closed=False`` leaves out ``>>>>>>> REPLACE`` (a malformed block)."""
    end = ">>>>>>> REPLACE\n" if closed else ""
    return (f"{path}\n{fence[0]}\n<<<<<<< SEARCH\n{ensure_newline(old)}=======\n{ensure_newline(new)}{end}"
            f"{fence[1]}\n")


def udiff_hunk(edit: FileEdit) -> str:
    """``--- a`` / ``+++ b`` header and one ``@@ ... @@`` hunk for ``edit``."""
    source = "/dev/null" if edit.creates else edit.path
    body = ("".join(f" {line}\n" for line in edit.context)
            + "".join(f"-{line}\n" for line in _lines(ensure_newline(edit.old)))
            + "".join(f"+{line}\n" for line in _lines(ensure_newline(edit.new))))
    return f"--- {source}\n+++ {edit.path}\n@@ ... @@\n{body}"


def udiff_block(edits: list[FileEdit]) -> str:
    """One ```` ```diff ```` fence holding a hunk per edit."""
    return "```diff\n" + "".join(udiff_hunk(e) for e in edits) + "```\n"


def render(edit_format: str, edits: list[FileEdit], fence: tuple[str, str]) -> str:
    """The edit blocks for ``edits`` in ``edit_format``. For ``whole``, one listing per file with its
    final content (edits of one file are folded; an edit whose final content is unknown is skipped)."""
    if not edits:
        return ""
    if edit_format == "udiff":
        return udiff_block(edits)
    if edit_format == "diff":
        return "\n".join(search_replace_block(e.path, e.old, e.new, fence) for e in edits)
    final: dict[str, str | None] = {}
    for e in edits:
        final[e.path] = e.full
    return "\n".join(whole_listing(p, c, fence) for p, c in final.items() if c is not None)

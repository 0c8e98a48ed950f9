"""Case pages rendered as their cases end, kept for the run's reports (written at its end).

A run writes its reports after its last case; rendering every case's page then was ~2 ms a case the user waits
for (~100 ms at 48 cases). Each case's page is rendered instead right after its case.json is written, beside the
next case's agents, and written with the reports at the end: the files appear when they did, sealed as before.
This module imports nothing of the reports until a page is rendered (the first case's end, after the run's
loading thread has loaded them)."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..models.results import CaseResult
    from ..store import Stored


class CasePages:
    """Case pages rendered as their cases end, kept until the run's reports are written at its end.

    A page is made from the same stored case folder and result as at the end
    (:func:`~gripprobe_core.reports.html.render_case_html`), and it is
    used only if the case's case.json is still the file it was made from (same inode, size and modification
    time): a case written again since is rendered again. Pages are kept in memory up to
    :data:`MAX_BYTES`; past it the rest are rendered at the end, as before. Thread-safe enough for its use:
    cases add from worker threads, the run takes at its end."""

    MAX_BYTES = 32 << 20

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.size = 0
        self._pages: dict[str, tuple[tuple[int, int, int], str, int]] = {}

    def add(self, name: str, stored: Stored, result: CaseResult) -> bool:
        """Render the page of case ``name`` (its folder ``stored``, just written with ``result``) and keep it;
        False when it is not kept (over the budget, or case.json not a regular file)."""
        mark = _case_json_mark(stored)
        if mark is None or self.size >= self.MAX_BYTES:
            return False
        from ..reports.html import render_case_html

        text = render_case_html(stored, result, run_id=self.run_id)
        size = len(text.encode("utf-8", "replace"))  # what it will take, written as UTF-8
        self._pages[name] = (mark, text, size)
        self.size += size
        return True

    def take(self, name: str, stored: Stored) -> str | None:
        """The kept page of case ``name`` if its case.json is unchanged since, else None (render it now)."""
        kept = self._pages.pop(name, None)
        if kept is None:
            return None
        self.size -= kept[2]
        return kept[1] if _case_json_mark(stored) == kept[0] else None


def _case_json_mark(stored: Stored) -> tuple[int, int, int] | None:
    """case.json's inode, size and modification time (ns), or None when it is not a regular file."""
    try:
        st = (stored / "case.json").lstat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None

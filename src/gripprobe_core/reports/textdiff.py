"""Where a validator's expected and observed values differ, for the case page (no third-party code).

:func:`mark_differences` splits both texts into segments, each marked changed or not: lines first (so a long
text costs a line diff), then, inside a block of changed lines that is small enough, words, runs of
white space and single punctuation characters (so ``Hello, GripProbe!`` against ``Hello, Gripprobe!``
marks one word, not scattered letters). Joined, the segments of each side are that side's text, unchanged:
the page shows the same characters, with the changed ones wrapped in ``<del>`` (expected) and ``<ins>``
(observed). A changed segment holding a newline or only white space is flagged so the page can make it
visible. :func:`diff_lines` gives the unified diff's lines with their kind (``del``, ``ins``, ``hunk``,
``head``, ``same``). Both are linear in the text beyond the line diff and never fail on odd input.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

#: A block of changed lines is diffed word by word when neither side has more tokens than this; beyond,
#: its lines are marked whole (difflib's matcher is quadratic in the worst case).
TOKEN_LIMIT = 4000
_TOKEN = re.compile(r"\w+|[^\S\n]+|\n|.", re.S)


@dataclass(frozen=True)
class Segment:
    text: str
    changed: bool = False

    @property
    def newline(self) -> bool:
        """A changed newline: invisible unless the page marks it."""
        return self.changed and "\n" in self.text

    @property
    def blank(self) -> bool:
        """Changed white space other than a newline (a trailing space, a tab)."""
        return self.changed and not self.newline and not self.text.strip()


def mark_differences(expected: str, observed: str) -> tuple[list[Segment], list[Segment]]:
    """``(expected segments, observed segments)``; ``"".join`` of each side's texts is that side's text."""
    a, b = expected.splitlines(keepends=True), observed.splitlines(keepends=True)
    left: list[Segment] = []
    right: list[Segment] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag == "equal":
            _add(left, old, False)
            _add(right, new, False)
            continue
        ta, tb = _TOKEN.findall(old), _TOKEN.findall(new)
        if tag != "replace" or len(ta) > TOKEN_LIMIT or len(tb) > TOKEN_LIMIT:
            _add(left, old, True)
            _add(right, new, True)
            continue
        for t, k1, k2, m1, m2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
            _add(left, "".join(ta[k1:k2]), t != "equal")
            _add(right, "".join(tb[m1:m2]), t != "equal")
    return _split_newlines(left), _split_newlines(right)


def _add(out: list[Segment], text: str, changed: bool) -> None:
    if not text:
        return
    if out and out[-1].changed == changed:
        out[-1] = Segment(out[-1].text + text, changed)
    else:
        out.append(Segment(text, changed))


def _split_newlines(segments: list[Segment]) -> list[Segment]:
    """Changed newlines as segments of their own, so the page can show each one (``↵``)."""
    out: list[Segment] = []
    for s in segments:
        if not s.changed or "\n" not in s.text:
            out.append(s)
            continue
        for part in re.split(r"(\n)", s.text):
            if part:
                out.append(Segment(part, True))
    return out


def first_difference(expected: str, observed: str) -> tuple[int, int] | None:
    """``(line, column)``, both from 1, of the first character where the texts differ; None when equal."""
    if expected == observed:
        return None
    n = next((i for i, (x, y) in enumerate(zip(expected, observed)) if x != y), min(len(expected), len(observed)))
    head = expected[:n]
    return head.count("\n") + 1, n - (head.rfind("\n") + 1) + 1


def diff_lines(expected: str, observed: str) -> list[tuple[str, str]]:
    """The unified diff expected → observed as ``(kind, line)``: ``head`` (the ---/+++ lines), ``hunk``
    (@@), ``del`` (only in expected), ``ins`` (only in observed), ``same`` (context)."""
    out = []
    for i, line in enumerate(difflib.unified_diff(expected.splitlines(), observed.splitlines(), "expected",
                                                  "observed", lineterm="")):
        if i < 2:  # always "--- expected", "+++ observed" first
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("+"):
            kind = "ins"
        else:
            kind = "same"
        out.append((kind, line))
    return out

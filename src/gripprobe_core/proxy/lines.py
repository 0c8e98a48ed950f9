"""Incremental line splitting shared by the SSE and NDJSON decoders.

:class:`LineSplitter` turns bytes, cut anywhere, into complete lines. It recognizes ``\\n``, ``\\r\\n``
and a lone ``\\r`` as line ends (the SSE rule; NDJSON only ever uses the first two), even when a
``\\r\\n`` pair is split between two chunks. It keeps only the current partial line; a line longer
than ``max_line`` bytes is dropped whole (``overflow`` counts such lines), so memory stays flat
whatever the input. Work is linear in the input (``bytes.find``).
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_LINE", "LineSplitter"]

DEFAULT_MAX_LINE = 8 * 1024 * 1024


class LineSplitter:
    """Bytes in (any split) → complete lines out, without their terminators."""

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max(1, int(max_line))
        self.overflow = 0
        """Number of lines cut to ``max_line`` bytes."""
        self._buf = bytearray()
        self._skip_lf = False
        self._dropping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by ``chunk`` (possibly none)."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        lines: list[bytes] = []
        buf = self._buf
        start = len(buf)
        buf += chunk
        pos = 0
        n = len(buf)
        # Only the new bytes can hold a terminator: the kept partial line has none.
        while True:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._skip_lf = True  # a "\n" opening the next chunk belongs to this "\r"
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            self._emit(lines, bytes(buf[pos:end]))
            pos = start = nxt
        if pos:
            del buf[:pos]
        if len(buf) > self.max_line:
            if not self._dropping:
                self.overflow += 1
            self._dropping = True
            del buf[:]  # the head already kept is dropped too: the line is unusable anyway
        return lines

    def discard_partial(self) -> None:
        """Forget the current partial line (the caller skips input up to a line end itself)."""
        self._buf = bytearray()
        self._skip_lf = False
        self._dropping = False

    def close(self) -> list[bytes]:
        """The last line when the input did not end with a terminator (``[]`` otherwise)."""
        rest = bytes(self._buf)
        self._buf = bytearray()
        self._skip_lf = False
        if self._dropping:
            self._dropping = False
            return []
        return [rest] if rest else []

    def _emit(self, lines: list[bytes], line: bytes) -> None:
        if self._dropping:
            self._dropping = False  # the tail of an overlong line: drop it
            return
        if len(line) > self.max_line:  # arrived whole in one chunk: same rule, whatever the split
            self.overflow += 1
            return
        lines.append(line)

"""Incremental Server-Sent Events decoder: bytes cut anywhere → ``{event, data}`` events.

Follows the WHATWG event-stream rules where they matter for model servers, and is tolerant where a
broken server is not: lines end with ``\\n``, ``\\r\\n`` or ``\\r``; a blank line dispatches the
event; ``:`` starts a comment; ``field: value`` loses one space after the colon; ``data`` lines
accumulate, joined by ``\\n``; ``event`` names the event; unknown fields, ``id`` and ``retry`` are
ignored; a leading UTF-8 BOM is dropped; bytes that are not UTF-8 are replaced, never an error.
**Choice:** an event still pending when the stream ends (no closing blank line: a truncated stream)
is dispatched by :meth:`SSEDecoder.close`, so a cut-off stream loses nothing it received.

The result never depends on how the input was split. Memory is bounded: one partial line (see
:class:`~.lines.LineSplitter`) plus the pending event's data, which is cut at ``max_event`` bytes
(``truncated`` counts such events).
"""

from __future__ import annotations

from dataclasses import dataclass

from .lines import DEFAULT_MAX_LINE, LineSplitter

__all__ = ["SSEDecoder", "SSEEvent", "decode_sse"]


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event. ``event`` is None when the stream did not name it (type "message")."""

    data: str
    event: str | None = None


class SSEDecoder:
    """Feed bytes, get the events they complete."""

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE, max_event: int = DEFAULT_MAX_LINE) -> None:
        self._lines = LineSplitter(max_line=max_line)
        self.max_event = max(1, int(max_event))
        self.truncated = 0
        self._data: list[str] = []
        self._size = 0
        self._cut = False
        self._event: str | None = None
        self._started = False

    @property
    def overflow(self) -> int:
        """Lines dropped for being longer than ``max_line``."""
        return self._lines.overflow

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        for line in self._lines.feed(chunk):
            self._line(line, out)
        return out

    def close(self) -> list[SSEEvent]:
        """Events still pending at the end of the stream (a last line, an undispatched event)."""
        out: list[SSEEvent] = []
        for line in self._lines.close():
            self._line(line, out)
        self._dispatch(out)
        return out

    def flush(self) -> list[SSEEvent]:
        """Dispatch the pending event now, as a blank line would (``[]`` when none is pending)."""
        out: list[SSEEvent] = []
        self._dispatch(out)
        return out

    def discard_partial(self) -> None:
        """Forget the current partial line (see :meth:`.LineSplitter.discard_partial`)."""
        self._lines.discard_partial()

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        if not self._started:
            self._started = True
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            self._dispatch(out)
            return
        if raw[:1] == b":":
            return
        colon = raw.find(b":")
        if colon < 0:
            field, value = raw, b""
        else:
            field, value = raw[:colon], raw[colon + 1:]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")

    def _append(self, value: bytes) -> None:
        if self._cut:
            return
        sep = 1 if self._data else 0
        room = self.max_event - self._size - sep
        if len(value) > room:
            self._cut = True
            self.truncated += 1
            value = value[:max(0, room)]
        self._data.append(value.decode("utf-8", "replace"))
        self._size += sep + len(value)

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._data:
            out.append(SSEEvent(data="\n".join(self._data), event=self._event or None))
        self._data = []
        self._size = 0
        self._cut = False
        self._event = None


def decode_sse(data: bytes) -> list[SSEEvent]:
    """Every event of a complete stream (convenience for tests and offline reading)."""
    dec = SSEDecoder()
    return dec.feed(data) + dec.close()

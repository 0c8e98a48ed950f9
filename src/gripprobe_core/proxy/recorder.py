"""The recorder process: observes the recording proxy's exchanges off the relay's process.

``python -m gripprobe_core.proxy.recorder`` reads length-prefixed binary frames on stdin, runs one
:class:`~.observe.ExchangeObserver` per exchange and appends each exchange's record (one JSON line,
flushed) to that exchange's record file. The relay (``exchange.py``) only queues frames through
:mod:`.recorder_client`, so the parsing, redaction, tool-call assembly and record writing never
run on its event loop. One recorder serves every proxy of a process (every phase, every case).

Frames (all integers big-endian): a 17-byte header ``kind: u8, id: u64, length: u64``, then
``length`` payload bytes.

========= ============ ===================================================================
kind      id           payload
========= ============ ===================================================================
``BEGIN`` exchange id  ``u32`` meta length, meta JSON, then the request body (bytes). Meta:
                       ``method``, ``path``, ``query``, ``upstream_url``, ``headers`` (the
                       request's credential headers as ``[name, value]`` pairs, used for
                       redaction only, never written), ``record_path``, ``body_budget``,
                       ``started`` (request arrival, Unix time: the record's timestamp),
                       ``caps`` (``[max_records, max_bytes, proxy id]`` of its record file, see
                       :class:`RecordBook`), ``count`` (true: reply ``TOK``, below)
``CHUNK`` exchange id  ``f64`` when the bytes arrived (ms since the request), then the response
                       bytes, exactly as relayed, in order
``END``   exchange id  JSON: ``status``, ``response_headers`` (pairs), ``duration_ms``,
                       ``ttfb_ms``, ``proxy_error``
``FLUSH`` token        the record path (``os.fsencode``)
========= ============ ===================================================================

Frames are handled strictly in order by one thread, so records are written in END order. On
``FLUSH`` the recorder closes that record file and writes ``ACK <token> <stats JSON>`` on stdout (the
file's :meth:`RecordBook.stats`, ``null`` for a path it never wrote): by then every exchange of that path
that ENDed before the FLUSH is on disk. After the END of an exchange whose meta asked to ``count`` it
writes ``TOK <exchange id> <tokens>``: what the call cost for the phase's token budget (:mod:`.tokens`),
whether its record was written, slimmed or dropped. With ``--watermark-fd N`` (an 8-byte
file the relay shares) it also stores, after each END frame is handled, the number of END frames
handled so far (``!Q`` at offset 0): a memory store, no system call. If the recorder dies, the relay
reads it to tell which exchanges still need a record. At EOF on stdin it records the exchanges
still open (``proxy_stopped``), closes its files and exits 0. SIGINT is ignored (Ctrl-C reaches
the whole process group; the runner decides, then closes stdin). It runs at a lower CPU priority
(:data:`NICENESS`).

This module is imported by the relay's process too (frame codec, :func:`minimal_record`,
:class:`RecordFile`): keep its imports light (standard library; the parsers load in ``main``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import struct
import sys
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from ..jsonl import dumps

__all__ = ["ARRIVED", "BEGIN", "CHUNK", "DEFAULT_MAX_RECORDS", "DEFAULT_MAX_RECORD_BYTES", "END", "FLUSH", "HEADER", "WATERMARK",
           "RecordBook", "RecordFile", "Recorder", "encode_record", "main", "minimal_record", "record_timestamp",
           "slim_record"]

log = logging.getLogger(__name__)

BEGIN, CHUNK, END, FLUSH = 1, 2, 3, 4
HEADER = struct.Struct("!BQQ")
ARRIVED = struct.Struct("!d")
"""A CHUNK's arrival time (ms since its request), before its bytes."""
"""Frame header: kind, id (exchange id or flush token), payload length."""
META_LEN = struct.Struct("!I")
WATERMARK = struct.Struct("!Q")
"""END frames handled so far, at offset 0 of the shared watermark file."""
READ_SIZE = 1 << 20
NICENESS = 10
"""The recorder's CPU priority is lowered by this much: its work is background work, and on a busy
machine it must not take a core from the relay, the agent or the model server (measured: with
back-to-back requests on 2 cores, p50 latency added by the proxy +0.71 ms at nice 10 against +0.99 ms
at nice 0; the relay alone +0.59 ms). It still gets a fair share (about a tenth of a core against
one busy process), so its backlog drains even under load."""
PREFIX = "x_gripprobe_"
DEFAULT_MAX_RECORDS = 1000
"""Records one phase's record file holds at most; the exchanges past it are counted, not recorded."""
DEFAULT_MAX_RECORD_BYTES = 32 << 20
"""Bytes one phase's record file holds at most (full records up to :data:`FULL_SHARE` of it, then slim ones)."""
FULL_SHARE = 0.75
SLIM_LIST = 64
"""Tool calls and tool results a slim record keeps (each already capped in size by the observer)."""
SLIM_TEXT = 256


# ------------------------------------------------------------------------- shared with the relay

def record_timestamp(started: float) -> str:
    """The record's ``x_gripprobe_timestamp``: the request's arrival (Unix time), ISO-8601 UTC ms."""
    dt = datetime.fromtimestamp(started, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def encode_record(record: dict) -> bytes | None:
    """One record as a JSON line (UTF-8, unencodable characters replaced); ``None`` if not serializable."""
    try:
        line = dumps(record, ensure_ascii=False, default=str)  # strict JSON even when a body held NaN
    except (TypeError, ValueError, RecursionError) as exc:
        log.warning("recording proxy: record not serializable: %s", exc)
        return None
    return (line + "\n").encode("utf-8", "replace")


def minimal_record(meta: dict, end: dict, *, error: str | None = None) -> dict:
    """A metadata-only record (no headers, no bodies) for an exchange whose observer failed or was
    lost. ``meta``/``end`` are the BEGIN/END payloads; the query string is redacted."""
    query = meta.get("query") or ""
    if query:
        try:
            from .redact import Redactor, secrets_from_headers
            query = Redactor(secrets_from_headers(meta.get("headers") or [])).query(str(query))
        except Exception:
            query = ""
    duration = end.get("duration_ms")
    record = {
        PREFIX + "method": meta.get("method"), PREFIX + "path": meta.get("path"), PREFIX + "query": query,
        PREFIX + "upstream_url": meta.get("upstream_url"), PREFIX + "status": end.get("status"),
        PREFIX + "duration_ms": round(duration, 3) if isinstance(duration, (int, float)) else None,
        PREFIX + "ttfb_ms": end.get("ttfb_ms"), PREFIX + "proxy_error": end.get("proxy_error"),
        PREFIX + "observer_error": True,
    }
    if error:
        record[PREFIX + "error"] = error
    started = meta.get("started")
    if isinstance(started, (int, float)):
        record[PREFIX + "timestamp"] = record_timestamp(started)
    return record


def slim_record(record: dict) -> dict:
    """``record`` without its bodies (``request``, ``response`` null), its lists of tool calls and results cut
    to :data:`SLIM_LIST` entries and its text to :data:`SLIM_TEXT` characters, marked ``slimmed``: the facts
    tier A and the budget read (status, protocol, tool calls, usage, tokens, errors) at a bounded size."""
    out = dict(record)
    out[PREFIX + "request"] = None
    out[PREFIX + "response"] = None
    for key in ("tool_calls", "tool_results", "tool_names", "tool_call_ids", "tool_names_nonstructured",
                "tool_call_ids_nonstructured"):
        value = out.get(PREFIX + key)
        if isinstance(value, list) and len(value) > SLIM_LIST:
            out[PREFIX + key] = value[:SLIM_LIST]
    for key in ("text", "reasoning"):
        text = out.get(PREFIX + key)
        if isinstance(text, str) and len(text) > SLIM_TEXT:
            out[PREFIX + key] = text[:SLIM_TEXT] + "…"
    out[PREFIX + "slimmed"] = True
    return out


class RecordBook:
    """One phase's record file under its caps: at most ``max_records`` records and ``max_bytes`` bytes.

    Records are written whole while the file holds less than :data:`FULL_SHARE` of ``max_bytes``; then
    slim (:func:`slim_record`) while they fit; past either cap they are dropped. Every record is counted:
    :meth:`stats` says how many were written, how many of those slim, how many dropped (and their bytes as
    encoded), so the case can say what its record lacks. Memory: one line at a time."""

    def __init__(self, path: str | os.PathLike[str], max_records: int = DEFAULT_MAX_RECORDS,
                 max_bytes: int = DEFAULT_MAX_RECORD_BYTES, owner: str | None = None) -> None:
        self.file = RecordFile(path)
        self.max_records, self.max_bytes, self.owner = max(0, max_records), max(0, max_bytes), owner
        self.written = self.bytes = self.slimmed = self.dropped = self.dropped_bytes = 0

    @property
    def slimming(self) -> bool:
        """Full records no longer fit: the next ones are slim (or dropped), so their bodies are not needed."""
        return self.written >= self.max_records or self.bytes >= self.max_bytes * FULL_SHARE

    def add(self, record: dict) -> None:
        """Write ``record`` (whole, slim, or not at all). Never raises."""
        line = encode_record(record)
        if line is None:
            return
        if self.written >= self.max_records:
            self._drop(line)
            return
        if self.bytes + len(line) > self.max_bytes * FULL_SHARE:
            slim = encode_record(slim_record(record))
            if slim is None or self.bytes + len(slim) > self.max_bytes:
                self._drop(line)
                return
            line = slim
            self.slimmed += 1
        if self.file.append(line):
            self.written += 1
            self.bytes += len(line)

    def _drop(self, line: bytes) -> None:
        self.dropped += 1
        self.dropped_bytes += len(line)

    def stats(self) -> dict[str, int]:
        """``{"written", "slimmed", "dropped", "dropped_bytes", "bytes", "max_records", "max_bytes"}``."""
        return {"written": self.written, "slimmed": self.slimmed, "dropped": self.dropped,
                "dropped_bytes": self.dropped_bytes, "bytes": self.bytes, "max_records": self.max_records,
                "max_bytes": self.max_bytes}

    def close(self) -> None:
        """Close the file (it reopens, appending, on the next record); the counts stay."""
        self.file.close()


class RecordFile:
    """Appends whole lines to one record file: ``O_APPEND``, one ``write`` per line, no user-space
    buffer, so writers in different processes or threads never interleave inside a line. The file
    (and its directory) is created with the first line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd: int | None = None

    def append(self, line: bytes) -> bool:
        """Write ``line``; ``False`` (logged) when the file cannot be written."""
        try:
            if self._fd is None:
                parent = os.path.dirname(self.path)
                if parent:
                    os.makedirs(parent, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
            return True
        except OSError as exc:
            log.warning("recording proxy: cannot write %s: %s", self.path, exc)
            return False

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def iter_frames(fd: int) -> Iterator[tuple[int, int, bytes]]:
    """``(kind, id, payload)`` for each complete frame read from ``fd``, until EOF."""
    buf = bytearray()
    pos = 0
    while True:
        while len(buf) - pos >= HEADER.size:
            kind, ident, length = HEADER.unpack_from(buf, pos)
            stop = pos + HEADER.size + length
            if len(buf) < stop:
                break
            with memoryview(buf) as view:
                payload = bytes(view[pos + HEADER.size:stop])
            pos = stop
            yield kind, ident, payload
        if pos:
            del buf[:pos]
            pos = 0
        try:
            data = os.read(fd, READ_SIZE)
        except InterruptedError:  # pragma: no cover - retried by Python itself since 3.5
            continue
        if not data:
            return
        buf += data


# ------------------------------------------------------------------------------ the recorder

class _Open:
    """One exchange between its BEGIN and END."""

    __slots__ = ("meta", "observer")

    def __init__(self, meta: dict, observer: Any) -> None:
        self.meta = meta
        self.observer = observer


class Recorder:
    """Handles frames in order: observers per exchange, records appended per path, ACK lines to
    ``reply`` (a callable taking bytes), the count of END frames handled to ``watermark``.
    ``observer_factory`` takes ExchangeObserver's arguments."""

    def __init__(self, observer_factory: Callable[..., Any], reply: Callable[[bytes], None],
                 watermark: Callable[[int], None] | None = None) -> None:
        self.observer_factory = observer_factory
        self.reply = reply
        self.watermark = watermark
        self.ends = 0
        self.open: dict[int, _Open] = {}
        self.books: dict[str, RecordBook] = {}

    def handle(self, kind: int, ident: int, payload: bytes) -> None:
        """One frame. Never raises: a bad frame costs that frame (or that exchange) only."""
        try:
            if kind == CHUNK:
                ex = self.open.get(ident)
                if ex is not None and ex.observer is not None:
                    arrived = getattr(ex.observer, "arrived", None)
                    if arrived is not None:
                        arrived(ARRIVED.unpack_from(payload, 0)[0])
                    ex.observer.feed(memoryview(payload)[ARRIVED.size:])
            elif kind == BEGIN:
                self._begin(ident, payload)
            elif kind == END:
                try:
                    self._end(ident, payload)
                finally:  # handled, written or not: the relay counts END frames, not records
                    self.ends += 1
                    if self.watermark is not None:
                        self.watermark(self.ends)
            elif kind == FLUSH:
                path = os.fsdecode(payload)
                book = self.books.get(path)
                if book is not None:
                    book.close()
                stats = json.dumps(book.stats() if book is not None else None).encode()
                self.reply(b"ACK %d %s\n" % (ident, stats))
            else:
                log.warning("recorder: unknown frame kind %d", kind)
        except Exception:
            log.exception("recorder: frame %d for %d failed", kind, ident)

    def _begin(self, ident: int, payload: bytes) -> None:
        (n,) = META_LEN.unpack_from(payload, 0)
        meta = json.loads(payload[META_LEN.size:META_LEN.size + n])
        body = payload[META_LEN.size + n:]
        size = len(body)
        if self._book(meta).slimming:  # its record will be slim or dropped: the body is not read at all
            body = b""
        try:
            observer = self.observer_factory(
                method=meta["method"], path=meta["path"], query=meta["query"], upstream_url=meta["upstream_url"],
                # (name, value) pairs: secrets_from_headers takes pairs as well as mappings
                request_headers=[tuple(p) for p in meta.get("headers") or []], request_body=body,
                body_budget=meta["body_budget"], request_size=size)
        except Exception:
            log.exception("recorder: observer construction failed")
            observer = None
        self.open[ident] = _Open(meta, observer)

    def _end(self, ident: int, payload: bytes) -> None:
        ex = self.open.pop(ident, None)
        if ex is None:
            log.warning("recorder: END for unknown exchange %d", ident)
            return
        record = self._write(ex, json.loads(payload))
        if ex.meta.get("count"):
            tokens = record.get(PREFIX + "tokens")
            counted = tokens.get("counted") if isinstance(tokens, dict) else None
            self.reply(b"TOK %d %d\n" % (ident, counted if isinstance(counted, int) and counted > 0 else 0))

    def _book(self, meta: dict) -> RecordBook:
        """The record file of ``meta``'s exchange, with its caps (a new proxy on the same path starts anew)."""
        path = str(meta.get("record_path"))
        caps = meta.get("caps")
        if not (isinstance(caps, list) and len(caps) == 3):
            caps = [DEFAULT_MAX_RECORDS, DEFAULT_MAX_RECORD_BYTES, None]
        book = self.books.get(path)
        if book is None or book.owner != caps[2]:
            if book is not None:
                book.close()
            book = self.books[path] = RecordBook(path, int(caps[0]), int(caps[1]), caps[2])
        return book

    def _write(self, ex: _Open, end: dict) -> dict:
        record: dict | None = None
        if ex.observer is not None:
            try:
                record = dict(ex.observer.finish(
                    status=end.get("status"), response_headers=_headers(end.get("response_headers")),
                    duration_ms=end.get("duration_ms"), ttfb_ms=end.get("ttfb_ms"),
                    proxy_error=end.get("proxy_error")))
            except Exception:
                log.exception("recorder: observer.finish failed; writing a minimal record")
        if record is None:
            record = minimal_record(ex.meta, end)
        started = ex.meta.get("started")
        if isinstance(started, (int, float)):
            record[PREFIX + "timestamp"] = record_timestamp(started)
        self._book(ex.meta).add(record)
        return record

    def close(self) -> None:
        """End of input: exchanges still open are recorded as ``proxy_stopped``; files closed."""
        for ident in list(self.open):
            ex = self.open.pop(ident)
            self._write(ex, {"status": None, "response_headers": [], "duration_ms": None, "ttfb_ms": None,
                                    "proxy_error": "proxy_stopped"})
        for book in self.books.values():
            book.close()
        self.books.clear()


def _headers(pairs: Any) -> dict[str, str]:
    """Response header pairs as a dict; the first of repeated names wins (as a multidict lookup)."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out.setdefault(str(pair[0]), str(pair[1]))
    return out


def _reply_stdout(data: bytes) -> None:
    try:
        os.write(1, data)
    except OSError:  # the relay is gone; EOF on stdin follows
        pass


def _watermark(argv: list[str]) -> Callable[[int], None] | None:
    """The store into the file descriptor given as ``--watermark-fd N`` (``None`` without one)."""
    if "--watermark-fd" not in argv:
        return None
    import mmap

    fd = int(argv[argv.index("--watermark-fd") + 1])
    shared = mmap.mmap(fd, WATERMARK.size)
    pack_into = WATERMARK.pack_into

    def store(n: int) -> None:
        pack_into(shared, 0, n)

    return store


def main(argv: list[str] | None = None) -> int:
    """Run the recorder on stdin/stdout until EOF on stdin."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(NICENESS)
    except (AttributeError, OSError):
        pass
    from .observe import ExchangeObserver

    recorder = Recorder(ExchangeObserver, _reply_stdout, _watermark(sys.argv[1:] if argv is None else argv))
    for kind, ident, payload in iter_frames(sys.stdin.fileno()):
        recorder.handle(kind, ident, payload)
    recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tier C events from aider's outputs: its stdout (``--no-pretty``) and its LLM history file.

aider 0.86.2 prints plain text. What it prints *itself* (as opposed to echoing the model's reply):

- ``Applied edit to <path>`` — one line per file it wrote after a reply (success);
- ``The LLM did not conform to the edit format.`` — the reply's edits were rejected; the lines after
  it (until the next reply) say why: ``# N SEARCH/REPLACE block failed to match!`` with
  ``…failed to exactly match lines in <path>`` (diff), ``UnifiedDiffNoMatch: hunk failed to apply!``
  / ``<path> does not contain lines…`` (udiff), ``No filename provided before ``` in file listing``
  (whole), ``Expected `>>>>>>> REPLACE` or `=======``` (a broken block) …;
- ``Exception while updating files:`` — applying the edits crashed (the next line says how);
- ``Unable to create <path>, skipping edits.`` / ``Skipping edits to <path>`` — aider refused a file (a
  confirmation answered from stdin leaves its question first on the same line);
- ``Did not apply edit to <path> (--dry-run)`` — with ``--dry-run`` (a case's policy denying edits), the edit
  aider parsed and did not apply;
- ``litellm.<Name>Error: <message>`` — a model request failed (HTTP 4xx/5xx, connection refused…);
  aider retries on its own and still exits 0.

The model's reply is echoed verbatim on the same stdout, so a reply could *contain* those words.
The LLM history file (``--llm-history-file``) holds every request (``TO LLM <time>``) and every reply
(``LLM RESPONSE <time>``, one ``ASSISTANT <line>`` per line, logged even when the request failed, then
empty) with aider's own timestamps (local time, seconds; the plugin runs aider with ``TZ=UTC``). The
replies found there are masked out of stdout before markers are matched, and their times date the
events. Without the history file every stdout line is read as aider's (best effort).

Events (tier C, source ``wrapper``, ids ``<phase>-C-<n>`` from the shared ``EventBuilder``):

- ``model_response`` per reply (status success, ``payload.text`` without its reasoning, which becomes a
  ``thought`` event per ``<thinking-content-<hex>>`` block) and per failed request (status
  error, ``error_type`` ``backend_tool_unsupported`` / ``http_<status>`` / ``backend_unreachable`` /
  ``backend_timeout`` / ``agent_error``);
- a ``tool_call_start`` + ``tool_call_result`` pair per applied file (``raw_name`` ``edit`` →
  edit/write by :data:`TOOL_NAMES`, ``arguments`` ``{"path": …}``) and per rejected reply (status
  error; ``error_type`` ``edit_no_match`` when the block was well formed but matched nothing,
  ``protocol_malformed`` when aider could not parse it, ``edit_failed`` when applying crashed or a
  file was refused). aider has no tool call ids: ``tool_call_id`` is None and results pair with
  their start by order.

Nothing here raises on bad bytes; only an unreadable stdout raises ``OSError`` for the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gripprobe_core.plugin import Event, EventBuilder, PermissionDecision, PermissionRequest, permission_events

from .names import EDIT_TOOL, TOOL_NAMES

#: Characters of reply text / error detail kept in a payload.
TEXT_LIMIT = 2000
#: Characters of a file read (stdout or history); more is ignored.
READ_LIMIT = 32 * 1024 * 1024

APPLIED = re.compile(r"^Applied edit to (?P<path>\S.*?)\s*$")
NOT_CONFORM = "The LLM did not conform to the edit format."
UPDATE_CRASH = "Exception while updating files:"
#: (A confirmation answered from stdin leaves its question on the same line: ``Create new file? (Y)es/(N)o
#: [Yes]: Skipping edits to greeting.txt``.)
REFUSED = re.compile(r"^(?:[^\n]*\? \(Y\)es/\(N\)o[^\n]*?\]: )?"
                     r"(?:Unable to create (?P<a>\S.*?), skipping edits\.|Skipping edits to (?P<b>\S.*?))\s*$")
#: ``--dry-run``: the edit aider would have applied (``Applied edit to``) and did not.
DRY_RUN = re.compile(r"^Did not apply edit to (?P<path>\S.*?) \(--dry-run\)\s*$")
LITELLM_ERROR = re.compile(r"^litellm\.(?P<name>[A-Za-z]+):\s*(?P<message>.*)$")
EDIT_FORMAT_LINE = re.compile(r"^Model: \S+ with (?P<fmt>[\w-]+) edit format")
USAGE_LINE = re.compile(r"^Tokens: ")
#: One count of aider's ``Tokens: 1.8k sent, 1.2k cache hit, 28 received.`` line (aider rounds: ``1.8k``, ``12k``).
TOKEN_COUNT = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>[kM]?) (?P<what>sent|received|cache hit|cache write)\b")
_UNITS = {"": 1, "k": 1_000, "M": 1_000_000}
#: How aider keeps a reply's reasoning (``reasoning_content``) in the reply it logs: between two tags named with a
#: random hex id (stdout shows it under ``► **THINKING**``).
THINKING = re.compile(r"<(thinking-content-[0-9a-f]+)>(.*?)</\1>", re.S)

#: Paths named in aider's error detail, per format.
FAILED_PATHS = (
    re.compile(r"SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (?P<path>\S.*?)\s*$"),
    re.compile(r"^(?P<path>\S.*?) does not contain lines that match the diff you provided!"),
    re.compile(r"^(?P<path>\S.*?) contains multiple sets of lines that match the diff you provided!"),
)
NO_MATCH_MARKERS = ("failed to match!", "UnifiedDiffNoMatch", "UnifiedDiffNotUnique")

#: litellm exception → HTTP status (the proxy's tier A says ``http_<status>`` for the same failure).
LITELLM_STATUS: dict[str, int] = {
    "BadRequestError": 400, "AuthenticationError": 401, "PermissionDeniedError": 403, "NotFoundError": 404,
    "UnprocessableEntityError": 422, "RateLimitError": 429, "InternalServerError": 500,
    "ServiceUnavailableError": 503, "ContextWindowExceededError": 400, "ContentPolicyViolationError": 400,
}
TOOLS_UNSUPPORTED = "does not support tools"

_HISTORY_HEAD = re.compile(r"^(?P<kind>TO LLM|LLM RESPONSE) (?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\s*$")


def history_time(stamp: str) -> str | None:
    """aider's LLM history time (naive; UTC because the plugin sets ``TZ=UTC``) as ISO-8601 UTC ms."""
    try:
        dt = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def error_type_for(name: str, message: str) -> str:
    """``error_type`` of a failed model request from litellm's exception name and message."""
    if TOOLS_UNSUPPORTED in message:
        return "backend_tool_unsupported"
    if "Connection error" in message or name == "APIConnectionError":
        return "backend_unreachable"
    if name in ("Timeout", "APITimeoutError"):
        return "backend_timeout"
    status = LITELLM_STATUS.get(name)
    return f"http_{status}" if status else "agent_error"


# ------------------------------------------------------------------------------------ LLM history

@dataclass
class Exchange:
    """One model request aider logged: when it was sent, the reply (empty when it failed), where."""

    sent: str | None
    sent_line: int
    received: str | None = None
    received_line: int | None = None
    reply: str = ""


def read_text(path: Path | None) -> str | None:
    """A file's text (invalid UTF-8 replaced), None when it does not exist. OSError when unreadable."""
    if path is None:
        return None
    path = Path(path)
    if not path.exists():
        return None
    with path.open("rb") as fh:
        return fh.read(READ_LIMIT).decode("utf-8", "replace")


def parse_llm_history(text: str | None) -> list[Exchange]:
    """The exchanges in aider's LLM history, in order. Never raises."""
    out: list[Exchange] = []
    if not text:
        return out
    current: Exchange | None = None
    reply_lines: list[str] | None = None
    for lineno, line in enumerate(text.split("\n"), start=1):
        head = _HISTORY_HEAD.match(line)
        if head:
            if reply_lines is not None and current is not None:
                current.reply = "\n".join(reply_lines).strip("\n")
            reply_lines = None
            if head.group("kind") == "TO LLM":
                current = Exchange(sent=history_time(head.group("ts")), sent_line=lineno)
                out.append(current)
            else:
                if current is None or current.received_line is not None:
                    current = Exchange(sent=None, sent_line=lineno)
                    out.append(current)
                current.received, current.received_line = history_time(head.group("ts")), lineno
                reply_lines = []
            continue
        if reply_lines is not None:
            if line.startswith("ASSISTANT "):
                reply_lines.append(line[len("ASSISTANT "):])
            elif line == "ASSISTANT":
                reply_lines.append("")
    if reply_lines is not None and current is not None:
        current.reply = "\n".join(reply_lines).strip("\n")
    return out


# ------------------------------------------------------------------------------------------ stdout

@dataclass
class Finding:
    """Something aider printed about one exchange: an edit applied/rejected, or a request error."""

    kind: str  # applied | rejected | dry_run | request_error
    line: int
    path: str | None = None
    detail: list[str] = field(default_factory=list)
    error_type: str | None = None
    exchange: int | None = None
    refused: bool = False  # "Skipping edits to <path>": a confirmation was answered no


@dataclass(frozen=True)
class AiderDenials:
    """The settings the driver gave aider for the case's interaction policy, naming the rule of a refusal:
    ``dry_run`` (``--dry-run``: no edit applied), ``confirm`` (every confirmation answered no)."""

    dry_run: str | None = None
    confirm: str | None = None


@dataclass
class AiderOutput:
    """What one phase's outputs said."""

    events: list[Event]
    final_text: str | None
    edit_format: str | None
    exchanges: list[Exchange]


def _mask_replies(lines: list[str], exchanges: list[Exchange]) -> dict[int, int]:
    """0-based stdout line → index of the exchange whose reply echo covers it. Replies are searched
    in order, each after the previous one, as whole runs of lines."""
    owner: dict[int, int] = {}
    start = 0
    for k, ex in enumerate(exchanges):
        reply = [r.rstrip() for r in ex.reply.split("\n")] if ex.reply.strip() else []
        while reply and not reply[-1]:
            reply.pop()
        while reply and not reply[0]:
            reply.pop(0)
        if not reply:
            continue
        n = len(reply)
        for i in range(start, len(lines) - n + 1):
            if lines[i].rstrip() == reply[0] and [x.rstrip() for x in lines[i:i + n]] == reply:
                for j in range(i, i + n):
                    owner[j] = k
                start = i + n
                break
    return owner


def scan_stdout(text: str, exchanges: list[Exchange]) -> tuple[list[Finding], str | None]:
    """aider's own findings in its stdout (replies masked out), with the exchange each belongs to;
    and the edit format it announced."""
    lines = text.split("\n")
    owner = _mask_replies(lines, exchanges)
    findings: list[Finding] = []
    edit_format = None
    last_reply: int | None = None  # exchange of the latest reply echo seen
    next_attempt = 0  # next exchange a request error can belong to
    open_detail: Finding | None = None
    for i, raw in enumerate(lines):
        if i in owner:
            last_reply = owner[i]
            next_attempt = max(next_attempt, owner[i] + 1)
            open_detail = None
            continue
        line = raw.rstrip("\r")
        if edit_format is None and (m := EDIT_FORMAT_LINE.match(line)):
            edit_format = m.group("fmt")
        if m := APPLIED.match(line):
            findings.append(Finding("applied", i + 1, path=m.group("path"), exchange=last_reply))
            open_detail = None
        elif line.strip() == NOT_CONFORM or line.strip() == UPDATE_CRASH:
            open_detail = Finding("rejected", i + 1, exchange=last_reply,
                                  error_type="edit_failed" if line.strip() == UPDATE_CRASH else None)
            findings.append(open_detail)
        elif m := REFUSED.match(line):
            findings.append(Finding("rejected", i + 1, path=m.group("a") or m.group("b"), exchange=last_reply,
                                    error_type="edit_failed", refused=m.group("b") is not None))
            open_detail = None
        elif m := DRY_RUN.match(line):
            findings.append(Finding("dry_run", i + 1, path=m.group("path"), exchange=last_reply,
                                    error_type="edit_not_applied", detail=[line.strip()]))
            open_detail = None
        elif m := LITELLM_ERROR.match(line):
            exchange = next_attempt if next_attempt < len(exchanges) else None
            next_attempt += 1
            findings.append(Finding("request_error", i + 1, detail=[line], exchange=exchange,
                                    error_type=error_type_for(m.group("name"), m.group("message"))))
            open_detail = None
        elif open_detail is not None:
            if USAGE_LINE.match(line):
                open_detail = None
            else:
                open_detail.detail.append(line)
    for f in findings:
        if f.kind == "rejected" and f.error_type is None:
            f.error_type = _rejection_type(f.detail)
        if f.kind == "rejected" and f.path is None:
            f.path = _failed_path(f.detail)
    return findings, edit_format


def token_lines(text: str, exchanges: list[Exchange]) -> list[dict]:
    """The usage of each LLM call aider printed (``Tokens: 633 sent, 12 received.``), in order, outside the
    replies' echoes: ``prompt_tokens`` (sent; aider counts cache hits among them), ``completion_tokens``,
    ``cached_tokens``, and ``approximate`` when aider rounded a count (``1.8k``)."""
    lines = text.split("\n")
    owner = _mask_replies(lines, exchanges)
    out: list[dict] = []
    for i, raw in enumerate(lines):
        if i in owner or not USAGE_LINE.match(raw):
            continue
        counts = {m.group("what"): (int(float(m.group("n")) * _UNITS[m.group("unit")]), m.group("unit") != "")
                  for m in TOKEN_COUNT.finditer(raw)}
        if "sent" not in counts or "received" not in counts:
            continue
        usage: dict = {"prompt_tokens": counts["sent"][0], "completion_tokens": counts["received"][0]}
        if "cache hit" in counts:
            usage["cached_tokens"] = counts["cache hit"][0]
        if any(rounded for _, rounded in counts.values()):
            usage["approximate"] = True
        out.append(usage)
    return out


def _rejection_type(detail: list[str]) -> str:
    text = "\n".join(detail)
    return "edit_no_match" if any(m in text for m in NO_MATCH_MARKERS) else "protocol_malformed"


def _failed_path(detail: list[str]) -> str | None:
    for line in detail:
        for pattern in FAILED_PATHS:
            if m := pattern.search(line):
                return m.group("path")
    return None


# ------------------------------------------------------------------------------------------ events

def parse_outputs(stdout_path: Path, llm_history_path: Path | None, phase: str, *,
                  stdout_name: str | None = None, history_name: str | None = None,
                  denials: AiderDenials | None = None) -> AiderOutput:
    """Tier C events from one phase (see the module docstring). ``*_name`` name the files in
    ``raw_artifact_ref`` (default: the files' names). Raises OSError only when stdout cannot be read.

    ``denials``: the settings the driver gave aider for the case's interaction policy. An edit ``--dry-run``
    kept out (``Did not apply edit to <path> (--dry-run)``: a start and an error result, ``edit_not_applied``)
    and a file a refused confirmation skipped (``Skipping edits to <path>``) then also get a native
    ``permission_request`` + ``permission_response`` (deny) before their result (aider has no call ids)."""
    denials = denials or AiderDenials()
    stdout = read_text(stdout_path) or ""
    try:
        history = read_text(llm_history_path)
    except OSError:
        history = None
    exchanges = parse_llm_history(history)
    findings, edit_format = scan_stdout(stdout, exchanges)
    b = EventBuilder(phase, stdout_name or Path(stdout_path).name, tier="C", source="wrapper")
    history_ref = history_name or (Path(llm_history_path).name if llm_history_path else "llm_history")
    by_exchange: dict[int | None, list[Finding]] = {}
    for f in findings:
        key = f.exchange if f.exchange is not None and f.exchange < len(exchanges) else None
        by_exchange.setdefault(key, []).append(f)
    printed = iter(token_lines(stdout, exchanges))  # one per answered call, in order
    for k, ex in enumerate(exchanges):
        here = by_exchange.get(k, [])
        errors = [f for f in here if f.kind == "request_error"]
        for f in errors:
            _request_error(b, f, ex, edit_format)
        parent = None
        if not errors and ex.received_line is not None:
            answer, thoughts = split_thinking(ex.reply)
            payload: dict[str, Any] = {"text": answer[:TEXT_LIMIT], "edit_format": edit_format}
            if (usage := next(printed, None)) is not None:
                payload["usage"] = usage
            parent = b.add(None, event_type="model_response", status="success", timestamp=ex.received,
                           raw_artifact_ref=f"{history_ref}:{ex.received_line}", payload=payload)
            for said in thoughts:
                b.add(None, event_type="thought", status="success", timestamp=ex.received,
                      parent_id=parent.event_id if parent is not None else None,
                      raw_artifact_ref=f"{history_ref}:{ex.received_line}", payload={"text": said[:TEXT_LIMIT]})
        for f in here:
            if f.kind != "request_error":
                _edit(b, f, ex, parent, edit_format, denials)
    for f in by_exchange.get(None, []):
        if f.kind == "request_error":
            _request_error(b, f, None, edit_format)
        else:
            _edit(b, f, None, None, edit_format, denials)
    final = next((answer for ex in reversed(exchanges) if (answer := split_thinking(ex.reply)[0]).strip()), None)
    return AiderOutput(events=b.events, final_text=final, edit_format=edit_format, exchanges=exchanges)


def split_thinking(reply: str) -> tuple[str, list[str]]:
    """``(the reply without its reasoning blocks, the reasoning texts)``: aider logs a reply's
    ``reasoning_content`` inside it between ``<thinking-content-<hex>>`` tags."""
    thoughts = [said for m in THINKING.finditer(reply) if (said := m.group(2).strip())]
    return (THINKING.sub("", reply).strip() if thoughts or THINKING.search(reply) else reply), thoughts


def _request_error(b: EventBuilder, f: Finding, ex: Exchange | None, edit_format: str | None) -> None:
    message = f.detail[0] if f.detail else ""
    b.add(f.line, event_type="model_response", status="error", error_type=f.error_type,
          timestamp=ex.sent if ex else None, payload={"error": message[:TEXT_LIMIT], "edit_format": edit_format})


def _edit(b: EventBuilder, f: Finding, ex: Exchange | None, parent: Event | None, edit_format: str | None,
          denials: AiderDenials | None = None) -> None:
    """A start + result pair (at the finding's stdout line) for one applied file or one rejected reply (and
    the native permission pair of an edit the case's policy refused)."""
    ts = ex.received if ex else None
    parent_id = parent.event_id if parent is not None else None
    name, kind = TOOL_NAMES.normalize(EDIT_TOOL)
    common = {"raw_name": EDIT_TOOL, "name": name, "kind": kind,
              "arguments": {"path": f.path} if f.path else {}, "edit_format": edit_format}
    b.add(f.line, event_type="tool_call_start", status="started", timestamp=ts, parent_id=parent_id,
          payload=dict(common))
    if f.kind == "applied":
        b.add(f.line, event_type="tool_call_result", status="success", timestamp=ts, parent_id=parent_id,
              payload=dict(common))
        return
    denials = denials or AiderDenials()
    rule = denials.dry_run if f.kind == "dry_run" else denials.confirm if f.refused else None
    if rule is not None:
        request = PermissionRequest(request_id=f"native-{len(b.events) + 1}", raw_name=EDIT_TOOL, name=name or None,
                                    kind=kind, input=common["arguments"])
        permission_events(b, f.line, request, PermissionDecision("deny", rule), decided_by="native", timestamp=ts)
    detail = "\n".join(x for x in f.detail if x.strip())
    b.add(f.line, event_type="tool_call_result", status="error", error_type=f.error_type, timestamp=ts,
          parent_id=parent_id, payload={**common, "output": detail[:TEXT_LIMIT]})

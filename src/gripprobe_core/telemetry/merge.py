"""Merge one phase's tool evidence from several sources (tiers A–D) into one timeline.

Each source (the recording proxy, a structured-output parser, a marker parser, a self-report parser)
hands in one *group* of events. The same tool call is often seen by several sources; the merged
timeline keeps it once, from the best (lowest letter) tier that saw it. See ``docs/evaluator.md``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Hashable

from ..models.events import TIER_ORDER, Event

__all__ = ["canonical_arguments", "call_name", "call_signature", "merge_events", "parse_timestamp"]


def call_name(event: Event) -> str:
    """The tool name of a tool event: payload ``name`` (normalized), else ``raw_name``, else ``""``."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    name = payload.get("name") or payload.get("raw_name") or ""
    return name if isinstance(name, str) else str(name)


def canonical_arguments(arguments: Any) -> str:
    """Arguments as canonical JSON text, so ``'{"a": 1}'`` and ``{"a": 1}`` compare equal.

    A string that parses as JSON is compared by its parsed value (the proxy sees arguments as the
    JSON text the model wrote, an agent's event stream often as an object). Never raises.
    """
    value = arguments
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return json.dumps(arguments, ensure_ascii=False)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def call_signature(event: Event) -> tuple[str, str]:
    """``(name, canonical arguments)``: what makes two tool calls "the same call"."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    return call_name(event), canonical_arguments(payload.get("arguments"))


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch for an ISO-8601 timestamp (naive means UTC); None when absent or bad."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError, OSError):
        return None
    return seconds if math.isfinite(seconds) else None


@dataclass
class _Entry:
    group: int
    index: int
    event: Event
    id_key: Hashable | None
    content_key: Hashable | None
    timestamp: float | None = None


@dataclass
class _Slot:
    entry: _Entry
    groups: set[int] = field(default_factory=set)

    def fill_from(self, other: Event) -> None:
        """Take a definite status (and what goes with it) from a duplicate when the kept event lacks one."""
        kept = self.entry.event
        if kept.status in _VAGUE and other.status not in _VAGUE:
            update = {"status": other.status}
            for name in ("exit_code", "latency_ms", "error_type"):
                if getattr(kept, name) is None and getattr(other, name) is not None:
                    update[name] = getattr(other, name)
            self.entry.event = kept.model_copy(update=update)


_VAGUE = ("unknown", "started")


def _id_key(event: Event) -> Hashable | None:
    if event.is_tool_event() and event.tool_call_id:
        return ("call", event.event_type, event.tool_call_id)
    if event.event_type == "model_response" and event.response_id:
        return ("response", event.response_id)
    return None


def _entries(groups: list[list[Event]]) -> list[_Entry]:
    entries: list[_Entry] = []
    for g, group in enumerate(groups):
        occurrences: dict[tuple[str, str, str], int] = defaultdict(int)
        group_entries: list[_Entry] = []
        for i, event in enumerate(group):
            content_key = None
            if event.is_tool_event():
                signature = (event.event_type, *call_signature(event))
                content_key = (signature, occurrences[signature])
                occurrences[signature] += 1
            group_entries.append(_Entry(g, i, event, _id_key(event), content_key, parse_timestamp(event.timestamp)))
        _inherit_timestamps(group_entries)
        entries.extend(group_entries)
    return entries


def _inherit_timestamps(group_entries: list[_Entry]) -> None:
    """An event without a timestamp sorts right after the nearest earlier timestamped event of its
    own group (or right before the nearest later one when none precedes it)."""
    last: float | None = None
    for entry in group_entries:
        if entry.timestamp is None:
            entry.timestamp = last
        else:
            last = entry.timestamp
    following: float | None = None
    for entry in reversed(group_entries):
        if entry.timestamp is None:
            entry.timestamp = following
        else:
            following = entry.timestamp


def merge_events(groups: list[list[Event]]) -> list[Event]:
    """Merge per-source event lists of one phase into one deduplicated, ordered timeline.

    Deduplication only ever pairs events of *different* groups (repeats inside one source are real
    repeats, e.g. a retry loop). Two events are the same when they have the same ``event_type`` and
    ``tool_call_id`` (model responses: the same ``response_id``); failing that, when they are tool
    events with the same ``event_type``, tool name and canonical arguments, at the same occurrence
    index *k* of that (type, name, arguments) signature in their groups. Of a set of duplicates the
    event of the best tier is kept (ties: the earlier group), unchanged but for ``sequence`` and for
    what it did not know: when the kept event's status is ``unknown``/``started`` and a duplicate says
    ``success``/``error``/``timeout`` (a tool result's content on the wire rarely says; the agent's own
    log does), that status, with its exit code, latency and error type, is taken from the duplicate.

    Order: by timestamp (an event without one inherits its group neighbour's, see
    :func:`_inherit_timestamps`); events of groups with no timestamps at all go last; ties keep
    input order (group, then position). ``sequence`` is renumbered 1..n. Never raises on odd events.
    """
    entries = _entries(groups)
    slots: list[_Slot] = []
    by_id: dict[Hashable, list[_Slot]] = defaultdict(list)
    by_content: dict[Hashable, list[_Slot]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: (TIER_ORDER.get(e.event.source_tier, 99), e.group, e.index)):
        slot = _find_duplicate(entry, by_id, by_content)
        if slot is not None:
            slot.groups.add(entry.group)
            slot.fill_from(entry.event)
            continue
        slot = _Slot(entry, {entry.group})
        slots.append(slot)
        if entry.id_key is not None:
            by_id[entry.id_key].append(slot)
        if entry.content_key is not None:
            by_content[entry.content_key].append(slot)
    kept = sorted((s.entry for s in slots), key=_order_key)
    return [e.event.model_copy(update={"sequence": n}) for n, e in enumerate(kept, start=1)]


def _find_duplicate(entry: _Entry, by_id: dict[Hashable, list[_Slot]],
                    by_content: dict[Hashable, list[_Slot]]) -> _Slot | None:
    for index, key in ((by_id, entry.id_key), (by_content, entry.content_key)):
        if key is None:
            continue
        for slot in index.get(key, ()):
            if entry.group not in slot.groups:
                return slot
    return None


def _order_key(entry: _Entry) -> tuple[int, float, int, int]:
    if entry.timestamp is None:
        return (1, 0.0, entry.group, entry.index)
    return (0, entry.timestamp, entry.group, entry.index)

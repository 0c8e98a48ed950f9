"""Merge one phase's tool evidence from several sources (tiers A–D) into one timeline.

Each source (the recording proxy, a structured-output parser, a marker parser, a self-report parser)
hands in one *group* of events. The same tool call or model response is often seen by several sources;
the merged timeline keeps it once, from the best (lowest letter) tier that saw it, and records in
``seen_by`` every tier that saw it. See ``docs/evaluator.md``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Hashable

from ..models.events import TIER_ORDER, Event
from .toolnames import canonical_arguments

#: Pairing a model response that has no response id with the proxy's (see :func:`_pair_responses`): the
#: other source's timestamp lies in ``[proxy start - RESPONSE_SKEW_S, proxy end + RESPONSE_SLACK_S]``.
RESPONSE_SKEW_S = 0.005
RESPONSE_SLACK_S = 2.0

__all__ = ["canonical_arguments", "call_name", "call_signature", "merge_events", "parse_timestamp"]


def call_name(event: Event) -> str:
    """The tool name of a tool event: payload ``name`` (normalized), else ``raw_name``, else ``""``."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    name = payload.get("name") or payload.get("raw_name") or ""
    return name if isinstance(name, str) else str(name)


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
    tiers: set[str] = field(default_factory=set)
    dropped: list[tuple[int, str]] = field(default_factory=list)
    """(group, event_id) of the duplicates this slot stands for."""

    def absorb(self, other: _Entry) -> None:
        """``other`` is a duplicate of the kept event: remember who saw it, take what the kept one lacks."""
        self.groups.add(other.group)
        self.tiers.add(other.event.source_tier)
        self.dropped.append((other.group, other.event.event_id))
        self.fill_from(other.event)

    def fill_from(self, other: Event) -> None:
        """Take a definite status (and what goes with it) from a duplicate when the kept event lacks one; a
        kept model response also takes the duplicate's ``error_type`` when it has none (the agent's log may
        know the reply was malformed where the wire only saw text) and the payload keys it lacks (gptme's
        ``unreadable_tool_uses``, the agent's ``model``)."""
        kept = self.entry.event
        if kept.status in _VAGUE and other.status not in _VAGUE:
            update = {"status": other.status}
            for name in ("exit_code", "latency_ms", "error_type"):
                if getattr(kept, name) is None and getattr(other, name) is not None:
                    update[name] = getattr(other, name)
            self.entry.event = kept = kept.model_copy(update=update)
        if kept.event_type == "model_response":
            update = {}
            if kept.error_type is None and other.error_type is not None:
                update["error_type"] = other.error_type
            if isinstance(kept.payload, dict) and isinstance(other.payload, dict):
                extra = {k: v for k, v in other.payload.items() if k not in kept.payload}
                if extra:
                    update["payload"] = {**kept.payload, **extra}
            if update:
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
            elif event.event_type == "thought" and isinstance(event.payload.get("text"), str):
                # the same reasoning seen on the wire and in the agent's log: the k-th occurrence of a text
                signature = ("thought", " ".join(event.payload["text"].split()), "")
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


def merge_events(groups: list[list[Event]], *, pair_responses: bool = True) -> list[Event]:
    """Merge per-source event lists of one phase into one deduplicated, ordered timeline.

    Deduplication only ever pairs events of *different* groups (repeats inside one source are real
    repeats, e.g. a retry loop). Two events are the same when they have the same ``event_type`` and
    ``tool_call_id`` (model responses: the same ``response_id``); failing that, when they are tool
    events with the same ``event_type``, tool name and canonical arguments, at the same occurrence
    index *k* of that (type, name, arguments) signature in their groups; and a model response without
    a ``response_id`` is paired with one the proxy (tier A) saw only under :func:`_pair_responses`'s
    rule (``pair_responses=False`` turns that off). Of a set of duplicates the event of the best tier is
    kept (ties: the earlier group), unchanged but for ``sequence``, ``seen_by`` (every tier that saw it,
    best first) and what it did not know: when the kept event's status is ``unknown``/``started`` and a
    duplicate says ``success``/``error``/``timeout`` (a tool result's content on the wire rarely says;
    the agent's own log does), that status, with its exit code, latency and error type, is taken from
    the duplicate; a kept model response takes a duplicate's ``error_type`` when it has none. A kept
    event whose ``parent_id`` named a model response that was merged away (same group) names the kept
    response instead.

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
            slot.absorb(entry)
            continue
        slot = _Slot(entry, {entry.group}, {entry.event.source_tier})
        slots.append(slot)
        if entry.id_key is not None:
            by_id[entry.id_key].append(slot)
        if entry.content_key is not None:
            by_content[entry.content_key].append(slot)
    if pair_responses:
        slots = _pair_responses(slots)
    # a tool event whose model response was merged away hangs under the one kept in its place
    renamed = {(g, eid): s.entry.event.event_id for s in slots if s.entry.event.event_type == "model_response"
               for g, eid in s.dropped}
    out = []
    for n, slot in enumerate(sorted(slots, key=lambda s: _order_key(s.entry)), start=1):
        event = slot.entry.event
        update: dict[str, Any] = {"sequence": n}
        if len(slot.groups) > 1:
            update["seen_by"] = sorted(slot.tiers, key=lambda t: TIER_ORDER.get(t, 99))
        parent = renamed.get((slot.entry.group, event.parent_id)) if event.parent_id else None
        if parent is not None:
            update["parent_id"] = parent
        out.append(event.model_copy(update=update))
    return out


# ------------------------------------------------------------------------------------- model responses

@dataclass
class _Reply:
    """What identifies one model response across sources (see :func:`_pair_responses`)."""

    slot: _Slot
    start: float
    end: float
    usage: tuple[int, int] | None
    text: str | None

    @classmethod
    def of(cls, slot: _Slot) -> "_Reply | None":
        event = slot.entry.event
        if event.event_type != "model_response" or event.status != "success":
            return None
        start = parse_timestamp(event.timestamp)  # its own time, never one inherited from a neighbour
        if start is None:
            return None
        payload = event.payload if isinstance(event.payload, dict) else {}
        latency = event.latency_ms if event.source_tier == "A" else None
        span = latency / 1000 if isinstance(latency, (int, float)) and 0 <= latency < 1e9 else 0.0
        text = payload.get("text")
        text = text.strip() if isinstance(text, str) and text.strip() else None
        return cls(slot, start, start + span, _usage(payload.get("usage")), text)

    def agrees_with(self, other: "_Reply") -> bool:
        """No contradiction (usage both known and different; texts both present and neither a prefix of the
        other; response ids both present) and at least one positive match (equal usage, or equal text)."""
        a, b = self.slot.entry.event, other.slot.entry.event
        if a.response_id and b.response_id:
            return False  # both have ids: only the id rule may pair them
        evidence = False
        if self.usage is not None and other.usage is not None:
            if self.usage != other.usage:
                return False
            evidence = True
        if self.text is not None and other.text is not None:
            short, long_ = sorted((self.text, other.text), key=len)
            if not long_.startswith(short):
                return False
            # an agent's log may add to the reply's text what the wire carried apart (gptme writes the
            # structured tool calls into it): a prefix does not contradict, only equal text is evidence
            evidence = evidence or short == long_ or len(short) >= _TEXT_PREFIX_MIN
        return evidence


def _usage(value: Any) -> tuple[int, int] | None:
    """(prompt tokens with cached ones, output tokens) whatever the protocol or agent calls them
    (telemetry/usage.py); None when not both known."""
    from .usage import call_tokens

    tokens_in, tokens_out = call_tokens(value)
    return (tokens_in, tokens_out) if tokens_in is not None and tokens_out is not None else None


#: A text that is a prefix of the other side's this long counts as evidence (a source that cut the text).
_TEXT_PREFIX_MIN = 512


def _pair_responses(slots: list[_Slot]) -> list[_Slot]:
    """Merge model responses that have no ``response_id`` with the proxy's record of the same reply.

    The proxy (tier A) sees every reply on the wire; an agent's log (tier B or C) often records the same
    reply without the protocol's response id (gptme). Such a response *X* (its own timestamp, status
    success) is the same as a tier-A response *R* of another group when all of these hold:

    * they agree: token usage equal when both know it (``prompt_tokens``/``input_tokens``/``input`` …);
      when both have text, one is a prefix of the other (gptme's log adds the structured tool calls to the
      text); and there is evidence: equal usage, or equal text (or a prefix of at least 512 characters,
      a source that cut it); never when both carry a (different) response id;
    * timing: X's timestamp lies between R's start (when the request reached the proxy, less 5 ms of
      rounding) and R's end (start + its duration) plus 2 s;
    * uniqueness both ways: walking X's group in time order, R is the *only* tier-A response not yet
      paired with that group that agrees with X and fits the window, and X is the only response of its
      group not yet paired that agrees with R and fits R's window; and the pair keeps the order of the
      pairs already made between the two groups.

    Anything else stays two events (as before this rule): a response the proxy did not see, a second reply
    with the same text in the same window, a response without a time. Tool events are never touched.
    """
    replies = [r for s in slots if (r := _Reply.of(s)) is not None]
    wire = sorted((r for r in replies if r.slot.entry.event.source_tier == "A"), key=lambda r: r.start)
    others = sorted((r for r in replies if r.slot.entry.event.source_tier in ("B", "C")),
                    key=lambda r: (r.slot.entry.group, r.start, r.slot.entry.index))
    if not wire or not others:
        return slots
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (g_wire, g_other) -> indexes
    gone: set[int] = set()
    for x in others:
        g = x.slot.entry.group
        if len(x.slot.groups) > 1:
            continue  # already stands for duplicates of its own (same response id): leave it
        fits = [r for r in wire if g not in r.slot.groups and _fits(r, x)]
        if len(fits) != 1:
            continue
        r = fits[0]
        if any(y is not x and y.slot.entry.group == g and id(y.slot) not in gone and len(y.slot.groups) == 1
               and _fits(r, y) for y in others):
            continue  # another response of X's group could be R's just as well
        key, at = (r.slot.entry.group, g), (r.slot.entry.index, x.slot.entry.index)
        if any((i < at[0]) != (j < at[1]) for i, j in pairs[key]):
            continue  # would cross a pair already made
        pairs[key].append(at)
        r.slot.absorb(x.slot.entry)
        gone.add(id(x.slot))
    return [s for s in slots if id(s) not in gone]


def _fits(wire: _Reply, other: _Reply) -> bool:
    return (wire.start - RESPONSE_SKEW_S <= other.start <= wire.end + RESPONSE_SLACK_S
            and wire.agrees_with(other))


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

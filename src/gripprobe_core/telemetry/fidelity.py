"""Telemetry fidelity: how many of the tool calls one source saw another source saw too (docs/telemetry.md
"Fidelity").

GripProbe records a phase at three tiers (tier A: the wire, the recording proxy's view; tier B: the agent's
own structured output; tier C: its plain text output) and, against the oracle backend, the calls the oracle
asked for (its *ground truth*, ``oracle.<phase>.jsonl``). This module compares them call by call: the
*tested* source against a *reference*, counting

* **matched**: a tested call paired with a reference call (by the rule below, each call at most once);
* **missed**: a reference call nothing of the tested source was paired with;
* **invented**: a tested call paired with no reference call;

and from them ``recall = matched / (matched + missed)`` (of ``n`` reference calls) and ``precision =
matched / (matched + invented)`` (of ``n`` tested calls), ``None`` when its ``n`` is 0.

**A tier's calls** (:func:`tier_calls`) are read from a phase's merged events (``events.<phase>.jsonl``): an
event belongs to tier T when T is in its ``seen_by`` (the merge's list of every tier that saw it), or, when
the merge did not set that, when it is its ``source_tier``. Each ``tool_call_start`` of the tier is a call; a
``tool_call_result`` of the tier belongs to the oldest earlier start of the tier it answers (the same
``tool_call_id``; a result without an id: the same name) that has no result yet; a result with the id of a
call the tier already has is a repeated result of that call; any other result is a call of its own (its
arguments unknown), so a source that logs only results still shows its calls.
Tier A's calls written as text (:func:`wire_text_calls`, from the proxy records) are never events; they are
added to tier A only where it is compared with the ground truth. The ground truth's calls are
:func:`truth_calls`.

**The matching rule** (:func:`match_calls`), calls taken in their order in each list, a call paired at most
once:

1. *Ids.* A tested call and a reference call that both have a ``tool_call_id`` are the same call exactly
   when the ids are equal: each tested call with an id takes the first unpaired reference call with that id.
   Two calls whose ids differ are never paired, whatever they hold.
2. *Content*, for the calls left where at least one of the two has no id: the same normalized tool name and
   the same canonical arguments (:func:`~gripprobe_core.telemetry.merge.canonical_arguments`: ``'{"a": 1}'``
   equals ``{"a": 1}``). First a tested call with an id against a reference call without one, then a tested
   call without an id against a reference call with one, then two calls without ids (the constrained pairs
   first, so a call that could pair either way is not used up where only it fitted); each time the first
   unpaired candidate in order.
3. *Name only*, for the calls left where at least one of the two has no id and one of them has unknown
   arguments (a call seen only by its result, a call written as text): the same normalized name; first the
   pairs where only one side's arguments are unknown (tested known, then reference known), then the pairs
   where both are, each in the same three rounds as 2.

Names are compared normalized: ``payload.name`` (the shared tool name normalization) else the raw name's
:func:`~gripprobe_core.telemetry.toolnames.canonical_key`; against the ground truth, which holds the name
the oracle put on the wire and nothing normalized, both sides use the canonical key of the raw name
(``names="raw"``). Kind (read, write, execute ...) follows from the normalized name. The matching is
symmetric: ``match_calls(x, y)`` pairs as many calls as ``match_calls(y, x)`` (property-tested).

Pure functions only (the callers read the files): ``scripts/conformance.py`` and the aggregate
(``reports/aggregate.py``) call :func:`phase_fidelity` on what a case stored.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .toolnames import canonical_arguments, canonical_key

__all__ = ["EVENT_WORDS", "PAIRS", "Call", "Comparison", "Tally", "match_calls", "phase_fidelity", "phase_tallies",
           "tier_calls", "truth_calls", "wire_text_calls", "wire_text_count"]

#: The comparisons :func:`phase_fidelity` makes: ``(key, tested, reference)``; ``truth`` is the oracle's record.
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("B_vs_A", "B", "A"), ("C_vs_A", "C", "A"), ("A_vs_truth", "A", "truth"), ("B_vs_truth", "B", "truth"),
    ("C_vs_truth", "C", "truth"),
)

Names = Literal["normalized", "raw"]


@dataclass(frozen=True)
class Call:
    """One tool call as one source saw it."""

    tool_call_id: str | None
    name: str
    """Normalized name (``payload.name``, else the canonical key of the raw name)."""
    raw_name: str = ""
    arguments: str | None = None
    """Canonical JSON text of the arguments; None when this source did not see them."""
    ref: str = ""
    """Where it was seen: the event id, ``proxy:<line>`` or ``oracle:<seq>``."""
    structured: bool = True
    """False for a call the model wrote as text (tier A's text calls, the ground truth's ``structured: false``)."""
    answered: bool | None = None
    """Did the source see a result for it (None: the source has no results, the ground truth)."""
    error_type: str | None = None
    """The start event's ``error_type`` (``malformed_arguments`` …)."""

    def key_name(self, names: Names) -> str:
        return canonical_key(self.raw_name) if names == "raw" and self.raw_name else self.name


@dataclass(frozen=True)
class Comparison:
    """The tested source's calls against the reference's: which were paired, missed, invented."""

    matched: tuple[tuple[Call, Call], ...]
    """(tested, reference) pairs, in the tested calls' order."""
    missed: tuple[Call, ...]
    invented: tuple[Call, ...]

    @property
    def n_reference(self) -> int:
        return len(self.matched) + len(self.missed)

    @property
    def n_tested(self) -> int:
        return len(self.matched) + len(self.invented)

    def tally(self) -> "Tally":
        return Tally(len(self.matched), len(self.missed), len(self.invented), 1)

    @property
    def recall(self) -> float | None:
        return self.tally().recall

    @property
    def precision(self) -> float | None:
        return self.tally().precision


@dataclass
class Tally:
    """Counts that add up over cases (micro-averaged: recall and precision of the sums)."""

    matched: int = 0
    missed: int = 0
    invented: int = 0
    cases: int = field(default=0)
    """How many comparisons were added (cases, for a sum)."""

    def add(self, other: "Tally") -> "Tally":
        self.matched += other.matched
        self.missed += other.missed
        self.invented += other.invented
        self.cases += other.cases
        return self

    @property
    def recall(self) -> float | None:
        n = self.matched + self.missed
        return self.matched / n if n else None

    @property
    def precision(self) -> float | None:
        n = self.matched + self.invented
        return self.matched / n if n else None

    def as_dict(self) -> dict[str, Any]:
        """``{matched, missed, invented, n_reference, n_tested, recall, precision, cases}`` (recall and
        precision rounded to 4 places, None when their n is 0)."""
        return {"matched": self.matched, "missed": self.missed, "invented": self.invented,
                "n_reference": self.matched + self.missed, "n_tested": self.matched + self.invented,
                "recall": _round(self.recall), "precision": _round(self.precision), "cases": self.cases}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


# ------------------------------------------------------------------------------------------ reading calls

#: Every event this module looks at has one of these ``event_type`` values (:func:`tier_calls`,
#: :func:`wire_text_count`); a reader of a stored events file parses only the lines that hold one of them
#: (``json_lines(data, EVENT_WORDS)``): the other events cannot change a count, and skipping them unparsed makes
#: the aggregate's read of a real case's events several times cheaper.
EVENT_WORDS = (b"tool_call_start", b"tool_call_result", b"model_response")


_CALL_KINDS = ("tool_call_start", "tool_call_result")  # a tuple: an odd stored event_type may be unhashable


def _get(event: Any, name: str) -> Any:
    if type(event) is dict:  # events as stored: no ABC check (a third of the aggregate's fidelity time)
        return event.get(name)
    if isinstance(event, Mapping):
        return event.get(name)
    return getattr(event, name, None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tiers(event: Any, get: Callable[[str], Any] | None = None) -> list[str]:
    """The tiers that saw ``event``: its ``seen_by``, else its ``source_tier``. ``get`` reads one of its fields
    (default :func:`_get`; a caller reading many fields of a stored event passes its bound ``dict.get``)."""
    if get is None:
        def get(name: str) -> Any:
            return _get(event, name)
    seen = get("seen_by")
    if isinstance(seen, list) and seen:
        return [str(t) for t in seen]
    tier = get("source_tier")
    return [tier] if isinstance(tier, str) else []


def _names(payload: Mapping[str, Any]) -> tuple[str, str]:
    raw = _text(payload.get("raw_name")) or _text(payload.get("name"))
    return _text(payload.get("name")) or canonical_key(raw), raw


def tier_calls(events: Iterable[Any], tier: str, canon: dict[int, str] | None = None) -> list[Call]:
    """The tool calls tier ``tier`` saw in a phase's merged events (dicts as stored, or ``Event`` objects), in
    order (the module docstring has the rule). Linear in the events; never raises on odd events. ``canon``
    keeps each event's canonical arguments by ``id(event)`` for the next tier's pass over the same events."""
    return _tier_calls(_call_views(events), tier, {} if canon is None else canon)


#: What a tier's pass reads of a call event (:func:`_call_views`): the event, its kind, the tiers that saw it, its
#: payload, tool_call_id, normalized and raw name, event id and (for a start) error type.
_View = tuple[Any, str, list, Mapping, "str | None", str, str, str, Any]


def _call_views(events: Iterable[Any]) -> list[_View]:
    """Each call event's fields as every tier's pass reads them, read once (a phase's tiers share them)."""
    out: list[_View] = []
    for event in events:
        if type(event) is dict:  # events as stored
            get = event.get
        else:
            def get(name: str, event: Any = event) -> Any:
                return _get(event, name)
        kind = get("event_type")
        if kind not in _CALL_KINDS:
            continue
        tiers = _tiers(event, get)
        payload = get("payload")
        payload = payload if isinstance(payload, Mapping) else {}
        call_id = get("tool_call_id")
        name, raw = _names(payload)
        out.append((event, kind, tiers, payload, call_id if isinstance(call_id, str) and call_id else None, name, raw,
                    _text(get("event_id")), get("error_type") if kind == "tool_call_start" else None))
    return out


def _tier_calls(views: list[_View], tier: str, canon: dict[int, str]) -> list[Call]:
    calls: list[dict[str, Any]] = []
    open_by_id: dict[str, deque[int]] = defaultdict(deque)    # starts without a result yet, oldest first
    open_by_name: dict[str, deque[int]] = defaultdict(deque)
    ids: set[str] = set()

    def oldest_open(queue: deque[int] | None) -> dict[str, Any] | None:
        while queue:
            call = calls[queue.popleft()]
            if call["answered"] is False:
                return call
        return None

    for event, kind, tiers, payload, call_id, name, raw, ref, error in views:
        if tier not in tiers:
            continue
        if kind == "tool_call_start":
            arguments = canon.get(id(event))
            if arguments is None:
                arguments = canon[id(event)] = canonical_arguments(payload.get("arguments"))
            calls.append({"tool_call_id": call_id, "name": name, "raw_name": raw, "arguments": arguments, "ref": ref,
                          "answered": False, "error_type": error if isinstance(error, str) else None})
            if call_id:
                open_by_id[call_id].append(len(calls) - 1)
                ids.add(call_id)
            open_by_name[name].append(len(calls) - 1)
            continue
        opened = oldest_open(open_by_id.get(call_id) if call_id else open_by_name.get(name))
        if opened is not None:
            opened["answered"] = True
        elif call_id is None or call_id not in ids:  # else a repeated result of a call the tier has
            calls.append({"tool_call_id": call_id, "name": name, "raw_name": raw, "arguments": None, "ref": ref,
                          "answered": True, "error_type": None})
            if call_id:
                ids.add(call_id)
    return [Call(**c) for c in calls]


def wire_text_calls(records: Iterable[Mapping[str, Any]]) -> list[Call]:
    """Tier A's calls written as text: each proxy record's ``x_gripprobe_tool_names_nonstructured`` with its
    ``x_gripprobe_tool_call_ids_nonstructured`` (arguments unknown: the record keeps only names and ids)."""
    out: list[Call] = []
    for line, record in enumerate(records, start=1):
        names = record.get("x_gripprobe_tool_names_nonstructured")
        if not isinstance(names, list):
            continue
        ids = record.get("x_gripprobe_tool_call_ids_nonstructured")
        ids = ids if isinstance(ids, list) else []
        for i, raw in enumerate(names):
            raw = _text(raw)
            call_id = ids[i] if i < len(ids) and isinstance(ids[i], str) and ids[i] else None
            out.append(Call(call_id, canonical_key(raw), raw, None, f"proxy:{line}", structured=False))
    return out


def wire_text_count(events: Iterable[Any]) -> int:
    """How many calls the phase's model responses carried as text (``payload.tool_call_nonstructured_count``):
    the proxy records need reading (:func:`wire_text_calls`) only when this is above 0."""
    total = 0
    for event in events:
        if _get(event, "event_type") != "model_response" or "A" not in _tiers(event):
            continue
        payload = _get(event, "payload")
        n = payload.get("tool_call_nonstructured_count") if isinstance(payload, Mapping) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            total += n
    return total


def truth_calls(entries: Iterable[Mapping[str, Any]]) -> list[Call]:
    """The oracle's ground truth (the lines of ``oracle.<phase>.jsonl``) as calls, in order."""
    out: list[Call] = []
    for entry in entries:
        raw = _text(entry.get("name"))
        call_id = entry.get("tool_call_id")
        out.append(Call(call_id if isinstance(call_id, str) and call_id else None, canonical_key(raw), raw,
                        canonical_arguments(entry.get("arguments")), f"oracle:{entry.get('seq', len(out) + 1)}",
                        structured=entry.get("structured", True) is not False))
    return out


# ------------------------------------------------------------------------------------------ matching

def match_calls(tested: Iterable[Call], reference: Iterable[Call], *, names: Names = "normalized") -> Comparison:
    """Pair ``tested`` with ``reference`` by the rule in the module docstring; the unpaired ones are the
    reference's missed calls and the tested source's invented ones. Linear in the number of calls (each round
    indexes the reference's candidates by what must be equal)."""
    xs, rs = list(tested), list(reference)
    pair_of = _pairs(xs, rs, names)
    if not pair_of:
        return Comparison((), tuple(rs), tuple(xs))
    taken = set(pair_of.values())
    matched = tuple((xs[i], rs[j]) for i, j in sorted(pair_of.items()))
    return Comparison(matched, tuple(r for j, r in enumerate(rs) if j not in taken),
                      tuple(x for i, x in enumerate(xs) if i not in pair_of))


def _pairs(xs: list[Call], rs: list[Call], names: Names) -> dict[int, int]:
    """Tested index -> reference index of every pair (:func:`match_calls`' rule)."""
    if not xs or not rs:  # nothing can pair (most comparisons of a case: a tier that saw no call)
        return {}
    pair_of = _paired_by_unique_ids(xs, rs)
    return _pair_in_rounds(xs, rs, names) if pair_of is None else pair_of


def _paired_by_unique_ids(xs: list[Call], rs: list[Call]) -> dict[int, int] | None:
    """The pairs of the rounds below when they end with the first (most cases): every call on both sides has a
    tool_call_id, no id repeats on a side, and the pairs by id leave one side with nothing unpaired. None
    otherwise (then the rounds run)."""
    by_id: dict[str, int] = {}
    for j, r in enumerate(rs):
        cid = r.tool_call_id
        if cid is None or cid in by_id:
            return None
        by_id[cid] = j
    seen: set[str] = set()
    pair_of: dict[int, int] = {}
    for i, x in enumerate(xs):
        cid = x.tool_call_id
        if cid is None or cid in seen:
            return None
        seen.add(cid)
        j = by_id.get(cid)
        if j is not None:
            pair_of[i] = j
    return pair_of if len(pair_of) in (len(xs), len(rs)) else None


def _pair_in_rounds(xs: list[Call], rs: list[Call], names: Names) -> dict[int, int]:
    """Tested index -> reference index, by the rule in the module docstring (:func:`match_calls`)."""
    pair_of: dict[int, int] = {}   # tested index -> reference index
    taken: set[int] = set()

    def run(x_ok: Callable[[Call], bool], r_ok: Callable[[Call], bool], key: Callable[[Call], Hashable]) -> None:
        """One round: each unpaired tested call passing ``x_ok`` takes the first unpaired reference call passing
        ``r_ok`` with an equal ``key``."""
        waiting: dict[Hashable, deque[int]] = defaultdict(deque)
        for j, r in enumerate(rs):
            if j not in taken and r_ok(r):
                waiting[key(r)].append(j)
        if not waiting:
            return
        for i, x in enumerate(xs):
            if i not in pair_of and x_ok(x) and (queue := waiting.get(key(x))):
                pair_of[i] = j = queue.popleft()
                taken.add(j)

    has_id = lambda c: c.tool_call_id is not None  # noqa: E731
    run(has_id, has_id, lambda c: c.tool_call_id)
    # content, then name only: each in rounds from the most constrained pairs to the least (module docstring)
    for x_args, r_args in ((True, True), (True, False), (False, True), (False, False)):
        for x_id, r_id in ((True, False), (False, True), (False, False)):
            if len(pair_of) == len(xs) or len(taken) == len(rs):
                break  # one side has nothing left to pair: no later round can pair anything (most cases: all by id)
            both = x_args and r_args
            run(lambda c, a=x_args, i=x_id: (c.arguments is not None) == a and has_id(c) == i,
                lambda c, a=r_args, i=r_id: (c.arguments is not None) == a and has_id(c) == i,
                lambda c, b=both: (c.key_name(names), c.arguments if b else None))
    return pair_of


def phase_fidelity(events: Iterable[Any], truth: Iterable[Mapping[str, Any]] | None = None,
                   wire_text: Iterable[Mapping[str, Any]] | Iterable[Call] = ()) -> dict[str, Comparison]:
    """Every comparison of :data:`PAIRS` for one phase: ``events`` its merged events, ``truth`` the oracle's
    record (None when the backend is no oracle: no ``*_vs_truth`` then), ``wire_text`` tier A's calls written
    as text (proxy records, or calls from :func:`wire_text_calls`).

    Tier B and C are compared with the *structured* calls of tier A and of the ground truth (a call written as
    text is a call no agent was asked for on the wire); tier A with the whole ground truth, text calls
    included (both sides are the wire)."""
    return {key: match_calls(tested, reference, names=names)
            for key, (tested, reference, names) in _phase_sides(events, truth, wire_text).items()}


def phase_tallies(events: Iterable[Any], truth: Iterable[Mapping[str, Any]] | None = None,
                  wire_text: Iterable[Mapping[str, Any]] | Iterable[Call] = ()) -> dict[str, Tally]:
    """:func:`phase_fidelity` as counts only (each comparison's :meth:`Comparison.tally`), for a reader of
    many cases: the same pairing, without building the comparisons."""
    out = {}
    for key, (tested, reference, names) in _phase_sides(events, truth, wire_text).items():
        n = len(_pairs(tested, reference, names))
        out[key] = Tally(n, len(reference) - n, len(tested) - n, 1)
    return out


def _phase_sides(events: Iterable[Any], truth: Iterable[Mapping[str, Any]] | None,
                 wire_text: Iterable[Mapping[str, Any]] | Iterable[Call]) -> dict[str, tuple[list[Call], list[Call], Names]]:
    """Each comparison of :func:`phase_fidelity`: its tested calls, its reference calls and how names compare."""
    events = list(events)
    text = list(wire_text)
    text_calls = [c for c in text if isinstance(c, Call)] + wire_text_calls(
        [r for r in text if isinstance(r, Mapping)])
    canon: dict[int, str] = {}  # an event seen by several tiers is made canonical once
    # the call events read once; a tier none of them names has no call (no pass over them for it)
    views = _call_views(events)
    named = {t for v in views for t in v[2]}
    tiers = {t: _tier_calls(views, t, canon) if t in named else [] for t in ("A", "B", "C")}
    out: dict[str, tuple[list[Call], list[Call], Names]] = {
        "B_vs_A": (tiers["B"], tiers["A"], "normalized"), "C_vs_A": (tiers["C"], tiers["A"], "normalized")}
    if truth is not None:
        ground = truth_calls(truth)
        structured = [c for c in ground if c.structured]
        out["A_vs_truth"] = (tiers["A"] + text_calls, ground, "raw")
        out["B_vs_truth"] = (tiers["B"], structured, "raw")
        out["C_vs_truth"] = (tiers["C"], structured, "raw")
    return out

"""Telemetry fidelity (gripprobe_core.telemetry.fidelity): matching calls between tiers and against the oracle's
ground truth, on hand-built event lists, by property, and on real runs of the reference agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_reference
from gripprobe_core.models.events import Event
from gripprobe_core.telemetry.fidelity import (
    Call, Tally, match_calls, phase_fidelity, tier_calls, truth_calls, wire_text_calls, wire_text_count)
from gripprobe_core.telemetry.merge import merge_events


def ev(kind: str, tier: str, n: int, *, call_id: str | None = None, name: str = "write", args=None,
       seen_by: list[str] | None = None, **extra) -> dict:
    """One stored event (the JSON form of events.<phase>.jsonl)."""
    payload = {"raw_name": name, "name": name, **({"arguments": args} if kind == "tool_call_start" else {})}
    return {"event_type": kind, "event_id": f"measured-{tier}-{n}", "tool_call_id": call_id, "source_tier": tier,
            "source": {"A": "proxy", "B": "agent_output"}.get(tier, "wrapper"), "payload": payload,
            "seen_by": seen_by, **extra}


WRITE = {"path": "greeting.txt", "content": "hi\n"}
SHELL = {"command": "ls"}


# ------------------------------------------------------------------ reading a tier's calls

def test_a_tier_is_read_from_seen_by_and_a_result_belongs_to_its_start():
    events = [
        ev("model_response", "A", 1, seen_by=["A", "B"]),
        ev("tool_call_start", "A", 2, call_id="c1", args=WRITE, seen_by=["A", "B"]),
        ev("tool_call_result", "A", 3, call_id="c1", seen_by=["A", "B"]),
        ev("tool_call_start", "A", 4, call_id="c2", name="shell", args=SHELL),  # the wire only
        ev("tool_call_result", "B", 5, call_id="c2", name="shell"),              # its result: the log only
        ev("tool_call_result", "B", 6, call_id="c2", name="shell"),              # logged twice: still one call
        ev("tool_call_start", "C", 7, name="edit", args={"path": "x"}),         # text markers, no ids
        ev("tool_call_result", "C", 8, name="edit"),
    ]
    a, b, c = (tier_calls(events, t) for t in "ABC")
    assert [(x.tool_call_id, x.name, x.answered) for x in a] == [("c1", "write", True), ("c2", "shell", False)]
    # tier B saw c1 (merged) and only the result of c2: a call of its own, arguments unknown
    assert [(x.tool_call_id, x.arguments is None, x.answered) for x in b] == [("c1", False, True), ("c2", True, True)]
    assert [(x.tool_call_id, x.name, x.answered) for x in c] == [(None, "edit", True)]
    comp = match_calls(b, a)
    assert (len(comp.matched), comp.missed, comp.invented) == (2, (), ())  # c2 by its id


def test_event_objects_work_as_well_as_stored_dicts():
    events = [Event(**{k: v for k, v in ev("tool_call_start", "A", 1, call_id="c1", args=WRITE).items()})]
    assert tier_calls(events, "A") == tier_calls([e.model_dump() for e in events], "A")


def test_merged_groups_give_the_same_numbers_as_the_groups_apart():
    """What the merge kept once with seen_by, split back by tier, compares as the groups did before the merge."""
    wire = [Event(**ev("tool_call_start", "A", 1, call_id="c1", args=WRITE)),
            Event(**ev("tool_call_start", "A", 2, call_id="c2", name="shell", args=SHELL)),
            Event(**ev("tool_call_start", "A", 3, call_id="c3", name="read", args={"path": "a"}))]
    log = [Event(**ev("tool_call_start", "B", 1, call_id="c1", args=WRITE)),                 # by id
           Event(**ev("tool_call_start", "B", 2, name="shell", args=SHELL)),                  # by content, no id
           Event(**ev("tool_call_start", "B", 3, call_id="own-9", name="fetch", args={"u": 1}))]  # not on the wire
    apart = match_calls(tier_calls(log, "B"), tier_calls(wire, "A"))
    merged = phase_fidelity([e.model_dump() for e in merge_events([wire, log])])["B_vs_A"]
    assert apart.tally() == merged.tally() == Tally(matched=2, missed=1, invented=1, cases=1)
    assert [c.name for c in merged.missed] == ["read"] and [c.name for c in merged.invented] == ["fetch"]


# ------------------------------------------------------------------ the matching rule

def test_ids_decide_where_both_have_one():
    x = [Call("c1", "write", "write", '{"a":1}'), Call("c2", "write", "write", '{"a":1}')]
    r = [Call("c2", "write", "write", '{"a":2}'), Call("c9", "write", "write", '{"a":1}')]
    comp = match_calls(x, r)
    # c2 pairs by id although its arguments differ; c1 and c9 hold the same call but their ids differ: never
    assert [(t.tool_call_id, f.tool_call_id) for t, f in comp.matched] == [("c2", "c2")]
    assert [c.tool_call_id for c in comp.missed] == ["c9"] and [c.tool_call_id for c in comp.invented] == ["c1"]


def test_content_in_order_where_an_id_is_missing():
    x = [Call(None, "shell", "bash", '{"command":"a"}'), Call(None, "shell", "bash", '{"command":"a"}'),
         Call(None, "shell", "bash", '{"command":"b"}')]
    r = [Call("c1", "shell", "exec", '{"command":"a"}'), Call("c2", "shell", "exec", '{"command":"b"}')]
    comp = match_calls(x, r)
    assert [(t.arguments, f.tool_call_id) for t, f in comp.matched] == [('{"command":"a"}', "c1"),
                                                                          ('{"command":"b"}', "c2")]
    assert len(comp.invented) == 1 and comp.missed == ()
    assert (comp.recall, comp.precision) == (1.0, pytest.approx(2 / 3))


def test_against_the_ground_truth_raw_names_are_compared():
    """The oracle records the wire's name only; the tiers' raw names are compared by their canonical key."""
    truth = truth_calls([{"seq": 1, "tool_call_id": "call_oracle_0001", "name": "exec_command",
                          "arguments": {"cmd": "ls"}, "structured": True}])
    log = [Call(None, "shell", "exec_command", '{"cmd":"ls"}')]  # no id in the agent's log
    assert len(match_calls(log, truth, names="raw").matched) == 1
    assert len(match_calls([Call(None, "shell", "bash", '{"cmd":"ls"}')], truth, names="raw").matched) == 0


def test_text_calls_count_for_tier_a_against_the_truth_only():
    records = [{"x_gripprobe_tool_names_nonstructured": ["write"], "x_gripprobe_tool_call_ids_nonstructured": ["text-1"]}]
    events = [{**ev("model_response", "A", 1), "payload": {"tool_call_nonstructured_count": 1}}]
    truth = [{"seq": 1, "tool_call_id": "text-1", "name": "write", "arguments": WRITE, "structured": False}]
    assert wire_text_count(events) == 1 and [c.tool_call_id for c in wire_text_calls(records)] == ["text-1"]
    got = phase_fidelity(events, truth, records)
    assert got["A_vs_truth"].tally() == Tally(1, 0, 0, 1)
    assert got["B_vs_truth"].tally() == Tally(0, 0, 0, 1) and got["B_vs_A"].tally() == Tally(0, 0, 0, 1)
    assert phase_fidelity(events, truth)["A_vs_truth"].tally() == Tally(0, 1, 0, 1)  # records not read: missed
    assert "A_vs_truth" not in phase_fidelity(events)  # no oracle, no truth


def test_nothing_on_either_side_has_no_rate():
    comp = match_calls([], [])
    assert (comp.recall, comp.precision, comp.n_reference, comp.n_tested) == (None, None, 0, 0)
    assert Tally().as_dict() == {"matched": 0, "missed": 0, "invented": 0, "n_reference": 0, "n_tested": 0,
                                 "recall": None, "precision": None, "cases": 0}


def test_odd_events_never_raise():
    odd = [{}, {"event_type": "tool_call_start"}, {"event_type": "tool_call_result", "source_tier": "B",
                                                   "payload": "x", "tool_call_id": 5, "seen_by": "AB"}, 7, None]
    for tier in "ABC":
        tier_calls(odd, tier)
    assert wire_text_calls([{"x_gripprobe_tool_names_nonstructured": [None, 3]}, {}])[0].tool_call_id is None
    phase_fidelity(odd, [{"name": None, "arguments": float("nan")}], [{"x_gripprobe_tool_names_nonstructured": "x"}])
    # an event_type or a tier list that cannot be hashed (a stored events file says anything)
    phase_fidelity([{"event_type": ["tool_call_start"]}, {"event_type": {"a": 1}, "seen_by": [["A"]]},
                    {"event_type": "tool_call_start", "seen_by": [{"x": 1}, None], "payload": {"name": []}}], [])


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                     max_leaves=12)
_event = st.fixed_dictionaries({}, optional={
    "event_type": st.one_of(st.sampled_from(["tool_call_start", "tool_call_result", "model_response"]), _json),
    "seen_by": st.one_of(st.lists(st.sampled_from("ABCD"), max_size=3), _json),
    "source_tier": st.one_of(st.sampled_from("ABCD"), _json), "tool_call_id": _json, "event_id": _json,
    "payload": st.one_of(st.fixed_dictionaries({}, optional={"name": _json, "raw_name": _json, "arguments": _json,
                                                             "tool_call_nonstructured_count": _json}), _json)})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_event, _json), max_size=6), st.one_of(st.none(), st.lists(st.dictionaries(
    st.sampled_from(["name", "arguments", "tool_call_id", "structured", "seq"]), _json), max_size=3)))
def test_any_stored_events_never_raise(events, truth):
    out = phase_fidelity(events, truth, [])
    assert set(out) >= {"B_vs_A", "C_vs_A"}


_call_event = st.builds(
    lambda kind, tier, n, cid, name, args, seen, error: ev(kind, tier, n, call_id=cid, name=name, args=args,
                                                          seen_by=seen, error_type=error),
    st.sampled_from(["tool_call_start", "tool_call_result"]), st.sampled_from("ABC"), st.integers(1, 9),
    st.sampled_from([None, "c1", "c2", "c3"]), st.sampled_from(["write", "shell", "Write"]),
    st.sampled_from([None, WRITE, SHELL, '{"command": "ls"}']),
    st.one_of(st.none(), st.lists(st.sampled_from("ABC"), min_size=1, max_size=3, unique=True)),
    st.sampled_from([None, "malformed_arguments", 3]))
_truth_line = st.fixed_dictionaries({"name": st.sampled_from(["write", "shell", "Write"]),
                                     "tool_call_id": st.sampled_from([None, "c1", "c2", "c3"]),
                                     "arguments": st.sampled_from([WRITE, SHELL, '{"command": "ls"}']),
                                     "structured": st.booleans()})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_call_event, _event, _json), max_size=8),
       st.one_of(st.none(), st.lists(st.one_of(_truth_line, st.dictionaries(
           st.sampled_from(["name", "arguments", "tool_call_id", "structured", "seq"]), _json)), max_size=4)))
def test_the_counts_a_reader_takes_are_the_comparisons_counts(events, truth):
    """phase_tallies (what aggregate-reports reads, without building the comparisons) is phase_fidelity's
    counts, whatever the events."""
    from gripprobe_core.telemetry.fidelity import phase_tallies

    assert phase_tallies(events, truth, []) == {k: c.tally() for k, c in phase_fidelity(events, truth, []).items()}


# ------------------------------------------------------------------ properties

calls = st.lists(st.builds(
    Call, st.sampled_from([None, "c1", "c2", "c3", "c4"]), st.sampled_from(["shell", "write", "read"]),
    st.sampled_from(["bash", "write_file", "cat"]), st.sampled_from([None, '{"a":1}', '{"a":2}', '"x"'])),
    max_size=8)


@settings(max_examples=200, deadline=None)
@given(calls, calls)
def test_rates_are_in_range_and_counts_add_up(tested, reference):
    comp = match_calls(tested, reference)
    assert comp.n_reference == len(reference) and comp.n_tested == len(tested)
    for rate, n in ((comp.recall, len(reference)), (comp.precision, len(tested))):
        assert (rate is None) == (n == 0) and (rate is None or 0.0 <= rate <= 1.0)
    paired_t = [id(t) for t, _ in comp.matched]
    assert len(set(paired_t)) == len(paired_t)  # each call at most once


@settings(max_examples=200, deadline=None)
@given(calls)
def test_a_tier_against_itself_is_one_and_one(xs):
    comp = match_calls(xs, xs)
    if xs:
        assert (comp.recall, comp.precision) == (1.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(calls, calls, st.sampled_from([None, "fresh-id"]), st.integers(0, 8))
def test_an_invented_call_lowers_precision_only(tested, reference, call_id, at):
    before = match_calls(tested, reference)
    extra = Call(call_id, "invented_tool", "invented_tool", '{"b":1}')
    after = match_calls([*tested[:at], extra, *tested[at:]], reference)
    assert after.recall == before.recall and len(after.missed) == len(before.missed)
    assert len(after.invented) == len(before.invented) + 1 and extra in after.invented
    if before.precision:
        assert after.precision < before.precision
    else:
        assert after.precision == 0.0


@settings(max_examples=200, deadline=None)
@given(calls, calls)
def test_a_dropped_reference_call_that_was_missed_raises_recall_only(tested, reference):
    comp = match_calls(tested, reference)
    if not comp.missed:
        return
    gone = comp.missed[0]
    after = match_calls(tested, [r for r in reference if r is not gone])
    assert len(after.matched) == len(comp.matched) and after.precision == comp.precision
    assert after.recall is None or comp.recall is None or after.recall >= comp.recall


@settings(max_examples=200, deadline=None)
@given(calls, calls)
def test_the_matching_is_symmetric(xs, ys):
    there, back = match_calls(xs, ys), match_calls(ys, xs)
    assert len(there.matched) == len(back.matched)
    assert there.recall == back.precision and there.precision == back.recall


@settings(max_examples=400, deadline=None)
@given(calls, calls, st.sampled_from(["normalized", "raw"]), st.booleans())
def test_pairing_by_unique_ids_is_what_the_rounds_give(xs, ys, names, unique):
    """match_calls' short cut (every call with an id, none repeated on a side, one side all paired by id) pairs
    exactly as the rounds do; where it does not apply it says so and the rounds run."""
    from gripprobe_core.telemetry.fidelity import _pair_in_rounds, _paired_by_unique_ids

    if unique:  # the short cut's own ground: each side's ids made unique (ys shares some of xs's)
        xs = [Call(f"c{i}", x.name, x.raw_name, x.arguments) for i, x in enumerate(xs)]
        ys = [Call(f"c{i * 2}", y.name, y.raw_name, y.arguments) for i, y in enumerate(ys)]
    if not xs or not ys:
        return
    fast = _paired_by_unique_ids(xs, ys)
    if fast is not None:
        assert fast == _pair_in_rounds(xs, ys, names)
    if unique and len(xs) == 1:  # c0 is on both sides: the short cut applies
        assert fast == {0: 0}


def test_the_short_cut_leaves_repeated_or_missing_ids_to_the_rounds():
    from gripprobe_core.telemetry.fidelity import _paired_by_unique_ids

    a, b = Call("c1", "write", "write", '{"a":1}'), Call("c2", "write", "write", '{"a":1}')
    assert _paired_by_unique_ids([a, b], [b, a]) == {0: 1, 1: 0}
    assert _paired_by_unique_ids([a, a], [a]) is None and _paired_by_unique_ids([a], [a, a]) is None
    assert _paired_by_unique_ids([Call(None, "write")], [a]) is None
    assert _paired_by_unique_ids([a, b], [a, Call("c3", "write")]) is None  # one left on each side: rounds go on


# ------------------------------------------------------------------ real runs

@pytest.fixture(scope="module")
def real_cases(tmp_path_factory) -> dict[str, Path]:
    """The reference agent × perfect, text-tools and retry-loop × save_file (a second or two each)."""
    run = run_reference(tmp_path_factory.mktemp("fid"), models=("oracle-perfect", "oracle-text-tools",
                                                                "oracle-retry-loop"), tests=("save_file",))
    cases = sorted(run.run_dir.cases.iterdir())
    return {c.name.split("__")[1].removeprefix("oracle-"): c for c in cases}


def stored(case: Path) -> dict:
    art = case / "artifacts"
    lines = lambda p: [json.loads(x) for x in p.read_text().splitlines() if x.strip()]  # noqa: E731
    events = lines(art / "events.measured.jsonl")
    return phase_fidelity(events, lines(art / "oracle.measured.jsonl"),
                          lines(art / "proxy.measured.http.jsonl") if wire_text_count(events) else [])


def test_real_runs_of_the_reference_agent(real_cases):
    assert set(real_cases) == {"perfect", "text-tools", "retry-loop"}
    perfect, text, loop = (stored(real_cases[p]) for p in ("perfect", "text-tools", "retry-loop"))
    for key in ("B_vs_A", "A_vs_truth", "B_vs_truth"):
        assert perfect[key].tally() == Tally(1, 0, 0, 1), key
        assert loop[key].tally() == Tally(3, 0, 0, 1), key  # the same failing call three times, three ids
    assert [t.tool_call_id for t, _ in loop["A_vs_truth"].matched] == [f"call_oracle_000{i}" for i in (1, 2, 3)]
    assert perfect["C_vs_A"].tally() == Tally(0, 1, 0, 1)  # the reference agent prints no markers
    # the call written as text: on the wire and in the truth, never the agent's
    assert text["A_vs_truth"].tally() == Tally(1, 0, 0, 1)
    assert [t.structured for t, _ in text["A_vs_truth"].matched] == [False]
    assert text["B_vs_A"].tally() == text["B_vs_truth"].tally() == Tally(0, 0, 0, 1)


_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_value, _value.map(json.dumps), st.text(max_size=8), st.builds(object), st.just({1: "a", "1": "b"})))
def test_canonical_arguments_are_the_sorted_compact_json_they_always_were(value):
    """canonical_arguments' encoder is made once: its text is json.dumps' with those options, for any value
    (a JSON string by its parsed value; one it cannot encode by its repr)."""
    from gripprobe_core.telemetry.toolnames import canonical_arguments

    v = value
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            assert canonical_arguments(value) == json.dumps(value, ensure_ascii=False)
            return
    try:
        want = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        want = repr(v)
    assert canonical_arguments(value) == want


# ------------------------------------------------------------------ tier_calls against its earlier form

from collections import defaultdict, deque  # noqa: E402
from collections.abc import Mapping  # noqa: E402

from gripprobe_core.telemetry.fidelity import _CALL_KINDS, _get, _names, _text, _tiers, canonical_arguments  # noqa: E402,F401


def _tier_calls_v1(events: Iterable[Any], tier: str, canon: dict[int, str] | None = None) -> list[Call]:
    """tier_calls as it was before the call events were read once for every tier (the reference the property test
    below holds the current one to)."""
    canon = {} if canon is None else canon
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

    for event in events:
        kind = _get(event, "event_type")
        if kind not in ("tool_call_start", "tool_call_result") or tier not in _tiers(event):
            continue
        payload = _get(event, "payload")
        payload = payload if isinstance(payload, Mapping) else {}
        call_id = _get(event, "tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name, raw = _names(payload)
        ref = _text(_get(event, "event_id"))
        if kind == "tool_call_start":
            error = _get(event, "error_type")
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



@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_call_event, _event, _json), max_size=8), st.booleans())
def test_tier_calls_read_once_for_every_tier_are_the_calls_each_pass_read(events, as_objects):
    """The call events are read once for all tiers (telemetry.fidelity._call_views): each tier's calls are what
    a pass of its own over the events gave, for any events (stored dicts, or Event objects)."""
    if as_objects:
        events = [Event.model_validate(e) for e in events if isinstance(e, dict) and _valid_event(e)]
    for tier in ("A", "B", "C", "D"):
        assert tier_calls(events, tier) == _tier_calls_v1(events, tier)
    canon: dict = {}
    assert [tier_calls(events, t, canon) for t in "ABC"] == [_tier_calls_v1(events, t, {}) for t in "ABC"]


def _valid_event(e: dict) -> bool:
    try:
        Event.model_validate(e)
        return True
    except Exception:  # noqa: BLE001 - a stored line the model refuses is no Event object
        return False

"""Scores of cells and rows (reports/scores.py): n, coverage, flaky, pass@k / pass^k, intervals, usage sums.

Hand-countable examples first, then properties over arbitrary rows of statuses (hypothesis)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core.models.results import STATUSES
from gripprobe_core.reports import scores
from gripprobe_core.reports.scores import (
    OUT_OF_N, Scoreboard, Spend, cell_text, coverage_text, ks_text, overall_of, usage_text)
from gripprobe_core.stats import _resampled_mean_table, nested_bootstrap, pass_at_k, pass_hat_k, wilson

FIELDS = ("agent", "model")


def board_of(cases: list[tuple[str, str, str]]) -> Scoreboard:
    """(row, test, status) triples; the row is an agent name, the model is always m."""
    b = Scoreboard(FIELDS)
    for agent, test, status in cases:
        b.add((agent, "m"), test, status, overall_of(status))
    return b


def test_tool_unsupported_and_skipped_leave_n_and_show_as_coverage():
    # the new user's complaint: aider's shell tests are TOOL_UNSUPPORTED and used to count in n
    rows = {r["agent"]: r for r in board_of([
        ("codex", "save_file", "PASS"), ("codex", "shell_pwd", "PASS"), ("codex", "shell_date", "PASS"),
        ("aider", "save_file", "PASS"), ("aider", "shell_pwd", "TOOL_UNSUPPORTED"),
        ("aider", "shell_date", "SKIPPED")]).rows()}
    aider = rows["aider"]
    assert aider["n"] == 1 and aider["cases"] == 3
    assert aider["strict_pass_score"] == rows["codex"]["strict_pass_score"] == 1.0
    assert (aider["tests_attempted"], aider["tests_selected"], coverage_text(aider)) == (1, 3, "1/3 tests")
    assert aider["cells"]["shell_pwd"]["strict"] is None and cell_text(aider["cells"]["shell_pwd"]) == \
        "0/0 PASS, 1 UNSUPPORTED"
    assert coverage_text(rows["codex"]) == "3/3 tests"


def test_a_row_that_attempted_nothing_has_no_score():
    (row,) = board_of([("aider", "shell_pwd", "TOOL_UNSUPPORTED")]).rows()
    assert row["strict_pass_score"] is None and row["strict_ci95"] is None and row["pass_at_k"] == {}
    assert row["coverage"] == 0.0 and row["n"] == 0


def test_three_trials_two_passes_is_a_flaky_cell_with_its_estimators():
    (row,) = board_of([("a", "t", "PASS"), ("a", "t", "NO_TOOL_CALL"), ("a", "t", "PASS")]).rows()
    cell = row["cells"]["t"]
    assert cell["flaky"] and row["flaky"] == ["t"] and cell_text(cell) == "2/3 PASS, 1 NO_TOOL (flaky)"
    assert cell["pass_at_k"] == pytest.approx({"1": 2 / 3, "2": 1.0, "3": 1.0})
    assert cell["pass_hat_k"] == pytest.approx({"1": 2 / 3, "2": 1 / 3, "3": 0.0})
    assert cell["strict_ci95"] == pytest.approx(list(wilson(2, 3)), abs=1e-6)
    assert row["strict_ci95"] == cell["strict_ci95"]  # one test: the cell's Wilson interval
    assert ks_text(row["pass_hat_k"], "^") == "^1 0.67 · ^2 0.33 · ^3 0.00"


def test_a_row_score_weighs_tests_equally_whatever_their_trials():
    (row,) = board_of([("a", "t1", "PASS")] * 9 + [("a", "t1", "FAIL")] + [("a", "t2", "FAIL")]).rows()
    assert row["strict_pass_score"] == pytest.approx((0.9 + 0.0) / 2)
    assert row["pass_at_k"] == pytest.approx({"1": 0.45})  # k up to the smallest n (t2 has one trial)


def test_an_all_pass_row_gets_wilson_not_a_point():
    (row,) = board_of([("a", t, "PASS") for t in ("t1", "t2", "t3") for _ in range(3)]).rows()
    assert row["strict_ci95"] == pytest.approx(list(wilson(9, 9)), abs=1e-6)
    assert row["strict_ci95"][0] < 1.0


def test_trial_noise_widens_a_row_interval_beyond_the_spread_between_tests():
    # two tests, each 2 of 3: the tests agree, their trials do not, so the interval is not a point
    (row,) = board_of([("a", t, s) for t in ("t1", "t2") for s in ("PASS", "FAIL", "PASS")]).rows()
    low, high = row["strict_ci95"]
    assert low < 2 / 3 < high and high - low > 0.3


def test_policy_violations_count_in_overall_only():
    (row,) = board_of([("a", "t", "PASS_WITH_POLICY_VIOLATION"), ("a", "t", "PASS")]).rows()
    assert row["strict_pass_score"] == 0.5 and row["overall_score"] == pytest.approx(0.9)


def test_usage_sums_tokens_cost_and_latency_per_row():
    b = Scoreboard(FIELDS)
    u1 = {"source": "A", "model_calls": 2, "prompt_tokens": 1000, "completion_tokens": 100, "cached_tokens": 400,
          "total_tokens": 1100, "cost": 0.01, "currency": "USD", "ttft_ms": 100.0, "generation_s": 2.0}
    u2 = {"source": "A", "model_calls": 4, "prompt_tokens": 3000, "completion_tokens": 300, "cached_tokens": None,
          "total_tokens": 3300, "cost": 0.03, "currency": "USD", "ttft_ms": 400.0, "generation_s": 4.0}
    b.add(("a", "m"), "t", "PASS", 1.0, usage=u1, agent_s=3.0, case_s=4.0)
    b.add(("a", "m"), "t", "FAIL", 0.0, usage=u2, agent_s=5.0, case_s=6.0)
    b.add(("a", "m"), "t2", "TOOL_UNSUPPORTED", 0.0, usage=None, case_s=0.1)
    (row,) = b.rows()
    u = row["usage"]
    assert (u["cases"], u["cases_with_usage"], u["model_calls"]) == (3, 2, 6)
    assert (u["prompt_tokens"], u["completion_tokens"], u["cached_tokens"], u["total_tokens"]) == (4000, 400, 400, 4400)
    assert u["cost"] == pytest.approx(0.04) and u["currency"] == "USD"
    assert u["ttft_ms"] == pytest.approx((100 * 2 + 400 * 4) / 6, abs=0.1)  # weighted by calls
    assert u["output_tokens_per_s"] == pytest.approx(400 / 6.0, abs=0.1)
    assert u["agent_s_mean"] == pytest.approx(4.0) and u["case_s"] == pytest.approx(10.1)
    assert usage_text(u) == ("calls 6 · tokens 4000 in / 400 out (400 cached) · cost 0.0400 USD · ttft 300 ms · "
                             "out 67 tok/s · agent 4.0 s/case")


def test_costs_in_two_currencies_are_not_added():
    s = Spend()
    s.add({"model_calls": 1, "cost": 1.0, "currency": "USD"})
    s.add({"model_calls": 1, "cost": 1.0, "currency": "EUR"})
    assert s.as_dict()["cost"] is None and s.as_dict()["currency"] == "mixed"


def test_hostile_usage_values_are_ignored_not_summed():
    s = Spend()
    s.add({"model_calls": True, "prompt_tokens": -5, "completion_tokens": "9", "cost": float("nan"),
           "ttft_ms": float("inf"), "generation_s": -1})
    s.add("not a mapping")  # type: ignore[arg-type]
    d = s.as_dict()
    assert d["model_calls"] == 0 and d["prompt_tokens"] is None and d["cost"] is None and d["ttft_ms"] is None


# ----------------------------------------------------------------------------------------------- properties

statuses = st.sampled_from(STATUSES)
rows = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["t1", "t2", "t3"]), statuses),
                min_size=1, max_size=40)


@given(rows)
@settings(max_examples=150, deadline=None)
def test_row_scores_follow_their_definitions(cases):
    out = {r["agent"]: r for r in board_of(cases).rows()}
    for agent, row in out.items():
        mine = [(t, s) for a, t, s in cases if a == agent]
        tests = sorted({t for t, _ in mine})
        tried = {t: [s for tt, s in mine if tt == t and s not in OUT_OF_N] for t in tests}
        attempted = [t for t in tests if tried[t]]
        assert row["n"] == sum(len(v) for v in tried.values()) and row["cases"] == len(mine)
        assert (row["tests_attempted"], row["tests_selected"]) == (len(attempted), len(tests))
        for t in tests:
            cell, c, n = row["cells"][t], tried[t].count("PASS"), len(tried[t])
            assert cell["flaky"] == (n >= 2 and 0 < c < n)
            for k in range(1, min(n, 10) + 1):
                assert cell["pass_at_k"][str(k)] == pytest.approx(pass_at_k(n, c, k), abs=1e-6)
                assert cell["pass_hat_k"][str(k)] <= cell["pass_at_k"][str(k)] + 1e-9
        if not attempted:
            assert row["strict_pass_score"] is None
            continue
        strict = sum(tried[t].count("PASS") / len(tried[t]) for t in attempted) / len(attempted)
        assert row["strict_pass_score"] == pytest.approx(strict, abs=1e-6)
        assert row["pass_at_k"]["1"] == pytest.approx(strict, abs=1e-5)
        for key, ci in (("strict_pass_score", "strict_ci95"), ("overall_score", "overall_ci95")):
            low, high = row[ci]
            assert 0.0 <= low <= row[key] + 1e-6 and row[key] - 1e-6 <= high <= 1.0


@given(rows, st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_the_order_cases_arrive_in_never_changes_a_score(cases, rnd):
    shuffled = list(cases)
    rnd.shuffle(shuffled)
    key = lambda r: r["agent"]  # noqa: E731
    assert sorted(board_of(cases).rows(), key=key) == sorted(board_of(shuffled).rows(), key=key)


@given(st.lists(st.sampled_from([(1.0, 1.0), (0.0, 0.8), (0.0, 0.0)]), min_size=1, max_size=5))
@settings(max_examples=80, deadline=None)
def test_the_exact_resampled_mean_table_matches_enumerating_every_draw(members):
    """Every one of the n^n ordered draws with replacement, counted: the table's distribution is the same."""
    n = len(members)
    brute: dict[tuple, float] = {}
    for draw in itertools.product(members, repeat=n):
        mean = tuple(round(sum(c) / n, 9) for c in zip(*draw))
        brute[mean] = brute.get(mean, 0.0) + 1 / n ** n
    cdf, means = _resampled_mean_table(members)
    table: dict[tuple, float] = {}
    prev = 0.0
    for c, m in zip(cdf, means):
        key = tuple(round(x, 9) for x in m)
        table[key] = table.get(key, 0.0) + (c - prev)
        prev = c
    assert set(table) == set(brute)
    for k in brute:
        assert table[k] == pytest.approx(brute[k], abs=1e-9)
    assert math.isclose(cdf[-1], 1.0, abs_tol=1e-9)


@given(st.lists(st.lists(st.sampled_from([(1.0,), (0.0,)]), min_size=1, max_size=4), min_size=1, max_size=6),
       st.integers(0, 50))
@settings(max_examples=60, deadline=None)
def test_nested_bootstrap_stays_within_the_data_and_is_reproducible(groups, seed):
    ((low, high),) = nested_bootstrap(groups, samples=200, seed=seed)
    assert 0.0 <= low <= high <= 1.0
    assert nested_bootstrap(groups, samples=200, seed=seed) == [(low, high)]
    if all(len(set(g)) == 1 for g in groups) and len({g[0] for g in groups}) == 1:
        assert low == high == groups[0][0][0]  # nothing varies: no width


# ----------------------------------------------------------------------------------------------- usage of a phase

def test_tier_b_usage_reads_every_agents_shape_and_prices_it():
    from gripprobe_core.models.events import Event
    from gripprobe_core.models.specs import Pricing
    from gripprobe_core.telemetry.usage import calls_from_events, combine, summarize

    def response(usage, latency=None):
        return Event(event_type="model_response", event_id="e", source_tier="B", source="wrapper",
                     payload={"usage": usage}, latency_ms=latency)

    events = [
        response({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}, 500.0),  # continue
        response({"input_tokens": 200, "cached_input_tokens": 150, "output_tokens": 10}),       # codex
        response({"total": 60, "input": 50, "output": 10, "cache": {"read": 40, "write": 0}}),  # opencode
        response("garbage"),
    ]
    calls = calls_from_events(events)
    assert [(c.prompt, c.completion, c.cached, c.total) for c in calls] == [
        (100, 20, None, 120), (200, 10, 150, None), (50, 10, 40, 60), (None, None, None, None)]
    u = summarize(calls, "B", Pricing(input_per_million=1.0, output_per_million=2.0, cached_input_per_million=0.5))
    assert (u.source, u.model_calls, u.prompt_tokens, u.completion_tokens, u.cached_tokens) == ("B", 4, 350, 40, 190)
    assert u.total_tokens == 120 + 210 + 60  # a call without a total counts its prompt + completion
    assert u.cost == pytest.approx(((350 - 190) * 1.0 + 190 * 0.5 + 40 * 2.0) / 1e6)
    assert u.ttft_ms is None and u.model_time_s == pytest.approx(0.5)  # tier B has no time to first byte
    both = combine([u, u, None])
    assert both.model_calls == 8 and both.prompt_tokens == 700 and both.cost == pytest.approx(2 * u.cost)
    assert combine([None]) is None


@given(rows, st.lists(st.integers(0, 2), min_size=40, max_size=40))
@settings(max_examples=60, deadline=None)
def test_boards_filled_apart_and_merged_score_as_one_board(cases, parts):
    """How the aggregate's worker processes add up: each fills its own board, merged in order; the rows, their
    order, cells, counts, usage and intervals are those of one board filled with every case."""
    whole = Scoreboard(FIELDS)
    pieces = [Scoreboard(FIELDS) for _ in range(3)]
    usage = {"source": "A", "model_calls": 2, "prompt_tokens": 10, "cost": 0.5, "currency": "USD", "ttft_ms": 3.0}
    for (agent, test, status), part in zip(cases, parts):
        for b in (whole, pieces[part]):
            b.add((agent, "m"), test, status, overall_of(status), usage=usage, agent_s=1.5, case_s=2.0)
    merged = Scoreboard(FIELDS)
    for b in pieces:
        merged.merge(b)
    order = list(dict.fromkeys((a, "m") for i in range(3) for (a, _, _), q in zip(cases, parts) if q == i))
    assert [(r["agent"], r["model"]) for r in merged.rows()] == order  # parts in order, each in its own order
    by = lambda rs: {r["agent"]: r for r in rs}  # noqa: E731
    assert by(merged.rows()) == by(whole.rows())

def test_rows_with_a_map_function_are_the_rows_without_one():
    from concurrent.futures import ThreadPoolExecutor

    cases = [(a, t, s) for a in "abc" for t in ("t1", "t2", "t3") for s in ("PASS", "FAIL", "PASS_WITH_POLICY_VIOLATION")
             if (a, t) != ("c", "t2")]
    plain = board_of(cases).rows()
    scores._row_intervals.cache_clear()
    with ThreadPoolExecutor(2) as pool:
        assert board_of(cases).rows(pool.map) == plain


@pytest.mark.parametrize("groups", [((1, 0, 0), (2, 1, 0), (3, 1, 1), (4, 2, 1), (2, 2, 0)),
                                    ((3, 1, 1), (5, 2, 2), (10, 4, 3), (2, 0, 1)),
                                    ((100, 50, 10), (7, 3, 0), (1, 1, 0)),  # 100 trials: a Monte Carlo table
                                    ((4, 1, 0), (4, 3, 0), (3, 2, 0))])
def test_status_bootstrap_is_the_nested_bootstrap_of_the_same_trials(groups):
    """The row's interval drawn the fast way (exact per-test tables, packed lattice sums, pairs of tests) is the
    two-level bootstrap's: with many samples both land on the same bounds (the lattice's points)."""
    from gripprobe_core.stats import status_bootstrap

    members = [[(1.0, 1.0)] * c + [(0.0, 0.8)] * w + [(0.0, 0.0)] * (n - c - w) for n, c, w in groups]
    slow = nested_bootstrap(members, samples=20_000, seed=3)
    fast = status_bootstrap(groups, samples=20_000, seed=3)
    for (lo1, hi1), (lo2, hi2) in zip(slow, fast):
        assert lo2 == pytest.approx(lo1, abs=0.02) and hi2 == pytest.approx(hi1, abs=0.02)
    assert status_bootstrap(groups) == status_bootstrap(groups)  # reproducible
    assert status_bootstrap(groups, seed=1) != status_bootstrap(groups, seed=2) or len(groups) < 3


@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=20),
       st.integers(0, 20))
@settings(max_examples=80, deadline=None)
def test_status_bootstrap_stays_within_the_data(raw, seed):
    from gripprobe_core.stats import status_bootstrap

    groups = [(n, min(c, n), min(w, n - min(c, n))) for n, c, w in raw]
    (slo, shi), (olo, ohi) = status_bootstrap(groups, samples=200, seed=seed)
    rates = [c / n for n, c, _ in groups]
    overall = [(c + 0.8 * w) / n for n, c, w in groups]
    assert 0.0 <= slo <= shi <= 1.0 and 0.0 <= olo <= ohi <= 1.0
    assert slo >= min(rates) - 1e-9 and shi <= max(rates) + 1e-9 or any(0 < c < n for n, c, _ in groups)
    if all(c in (0, n) and w in (0, n) for n, c, w in groups) and len(set(rates)) == 1 and len(set(overall)) == 1:
        assert slo == shi == rates[0] and olo == pytest.approx(overall[0]) and ohi == pytest.approx(overall[0])


def test_status_bootstrap_refuses_impossible_counts():
    from gripprobe_core.stats import status_bootstrap

    for bad in ([], [(0, 0, 0)], [(2, 3, 0)], [(2, 1, 2)], [(2, -1, 0)]):
        with pytest.raises(ValueError):
            status_bootstrap(bad)

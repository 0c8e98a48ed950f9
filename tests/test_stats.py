"""The estimators (gripprobe_core.stats) against brute-force enumeration on small n (hypothesis)."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gripprobe_core.stats import (
    bootstrap_interval, mcnemar_exact, paired_bootstrap_difference, pass_at_k, pass_hat_k, wilson,
)


@st.composite
def trials(draw, max_n: int = 9):
    n = draw(st.integers(1, max_n))
    c = draw(st.integers(0, n))
    k = draw(st.integers(1, n))
    return n, c, k


def _enumerate(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """(P[at least one of k drawn passes], P[all k drawn pass]) by listing every k-subset of the n trials."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    any_pass = sum(1 for s in subsets if any(outcomes[i] for i in s))
    all_pass = sum(1 for s in subsets if all(outcomes[i] for i in s))
    return Fraction(any_pass, len(subsets)), Fraction(all_pass, len(subsets))


@settings(max_examples=300, deadline=None)
@given(trials())
def test_pass_at_k_and_pass_hat_k_equal_enumeration(t):
    n, c, k = t
    any_pass, all_pass = _enumerate(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(float(any_pass), abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(float(all_pass), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(trials())
def test_estimators_are_ordered_and_monotone_in_k(t):
    n, c, k = t
    assert 0.0 <= pass_hat_k(n, c, k) <= c / n <= pass_at_k(n, c, k) <= 1.0
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k) and pass_hat_k(n, c, k + 1) <= pass_hat_k(n, c, k)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n) == pytest.approx(pass_hat_k(n, c, 1))


def test_estimators_refuse_impossible_counts():
    for n, c, k in ((3, 4, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_wilson_contains_the_rate_and_stays_in_unit_interval(nc):
    n, c = nc
    low, high = wilson(c, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low <= c / n <= high
        assert (low == 0.0) == (c == 0) and (high == 1.0) == (c == n)


def test_wilson_known_value():
    low, high = wilson(3, 10)  # a textbook example: 0.108 .. 0.603
    assert (round(low, 3), round(high, 3)) == (0.108, 0.603)


def _mcnemar_brute(b: int, c: int) -> Fraction:
    """Two-sided exact p: the probability, under p = 1/2, of a split at least as uneven as b : c."""
    n = b + c
    if n == 0:
        return Fraction(1)
    observed = abs(b - c)
    p = sum(Fraction(math.comb(n, i), 2 ** n) for i in range(n + 1) if abs(i - (n - i)) >= observed)
    return min(Fraction(1), p)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 25), st.integers(0, 25))
def test_mcnemar_exact_equals_the_binomial_enumeration(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(float(_mcnemar_brute(b, c)), abs=1e-12)
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)


def test_mcnemar_known_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # six flips, all one way
    assert mcnemar_exact(1, 1) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12), st.integers(0, 5))
def test_bootstrap_interval_brackets_the_mean_within_the_data_range(values, seed):
    low, high = bootstrap_interval(values, samples=400, seed=seed)
    mean = sum(values) / len(values)
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12
    assert low - 1e-9 <= mean <= high + 1e-9 or len(set(values)) > 1  # the mean is inside for all but odd draws
    assert bootstrap_interval(values, samples=400, seed=seed) == (low, high)  # reproducible


def test_bootstrap_of_identical_values_has_no_width_and_the_percentile_is_the_enumerated_one():
    assert bootstrap_interval([0.7] * 5) == (0.7, 0.7)
    # two values: the resampled means are 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4; the 2.5 % and
    # 97.5 % percentiles of a large sample are 0 and 1
    assert bootstrap_interval([0.0, 1.0], samples=4000) == (0.0, 1.0)


def test_paired_difference_of_a_planted_shift():
    rng = random.Random(1)
    pairs = [(a, a - 0.3) for a in (rng.random() for _ in range(40))]
    mean, low, high = paired_bootstrap_difference(pairs)
    assert mean == pytest.approx(-0.3) and low == pytest.approx(-0.3) and high == pytest.approx(-0.3)
    same = paired_bootstrap_difference([(x, x) for x in (0.1, 0.5, 1.0)])
    assert same == (0.0, 0.0, 0.0)

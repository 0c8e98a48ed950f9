"""The aggregate page's rows are written in Python (reports/html.py ``_agg_row_html``, ``_agg_cell_html``,
``_fidelity_row_html``: the template's loop over 5,760 cells was a fifth of ``aggregate-reports``). The page must be
the one the template wrote, byte for byte, whatever the data: the template as it was is kept in
tests/fixtures/aggregate_page_v1/ and rendered by the page's own environment (the same escaping, ``finalize`` and
filters) on the same context, and both pages are compared whole, for hostile text (markup, quotes, control and
bidi characters, lone surrogates), odd types and missing parts."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import ChoiceLoader, FileSystemLoader

from gripprobe_core import __version__
from gripprobe_core.models.statuses import STATUSES
from gripprobe_core.reports.html import _env, aggregate_context, render_aggregate_html

OLD = Path(__file__).parent / "fixtures" / "aggregate_page_v1"


def old_page(data: dict) -> str:
    env = _env().overlay(loader=ChoiceLoader([FileSystemLoader(str(OLD)), _env().loader]))
    return env.get_template("aggregate.html").render(version=__version__, **aggregate_context(data))


TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "a<b>&\"'", "\x1b[31mred", "\u202eevil", "\udc80x", "PASS", "—", "x" * 40, "a\nb\tc"]),
)
NUMBER = st.one_of(st.none(), st.integers(-3, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=32),
                   st.booleans())
SCORE = st.one_of(st.none(), st.floats(0, 1, allow_nan=False))
STATUS = st.one_of(st.sampled_from(STATUSES), TEXT)
KS = st.one_of(st.none(), st.dictionaries(st.sampled_from(["1", "2", "5", "x"]), SCORE, max_size=3))
CI = st.one_of(st.none(), st.tuples(SCORE.filter(lambda v: v is not None), SCORE.filter(lambda v: v is not None)),
               st.just("odd"))


def cell():
    return st.fixed_dictionaries({"n": NUMBER, "counts": st.dictionaries(STATUS, st.integers(0, 9), max_size=3)},
                                 optional={"strict": SCORE, "overall": SCORE, "strict_ci95": CI, "flaky": st.booleans(),
                                           "pass_at_k": KS, "pass_hat_k": KS})


USAGE = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "model_calls": st.integers(0, 50), "prompt_tokens": st.one_of(st.none(), st.integers(0, 3_000_000)),
    "completion_tokens": st.one_of(st.none(), st.integers(0, 50_000)), "cached_tokens": st.integers(0, 10_000)}))


def row(tests: list[str]):
    return st.fixed_dictionaries(
        {"agent": TEXT, "model": TEXT, "format": TEXT, "n": NUMBER,
         "cells": st.dictionaries(st.sampled_from(tests) if tests else st.nothing(), cell(), max_size=len(tests))},
        optional={"agent_version": st.one_of(st.none(), TEXT), "model_hash": st.one_of(st.none(), TEXT),
                  "hardware": st.one_of(st.none(), TEXT), "counts": st.dictionaries(STATUS, st.integers(0, 99), max_size=4),
                  "strict_pass_score": SCORE, "overall_score": SCORE, "strict_ci95": CI, "overall_ci95": CI,
                  "pass_at_k": KS, "pass_hat_k": KS, "flaky": st.lists(TEXT, max_size=3), "usage": USAGE,
                  "tests_attempted": st.integers(0, 20), "tests_selected": st.integers(0, 20), "coverage": SCORE,
                  "fidelity": st.one_of(st.none(), st.just("odd"), st.dictionaries(
                      st.sampled_from(["B_vs_A", "C_vs_A", "A_vs_truth", "B_vs_truth", "junk"]),
                      st.one_of(st.none(), st.fixed_dictionaries({}, optional={
                          "matched": NUMBER, "missed": NUMBER, "invented": NUMBER, "cases": NUMBER,
                          "recall": st.one_of(SCORE, st.booleans(), TEXT), "precision": SCORE,
                          "n_reference": NUMBER, "n_tested": NUMBER})), max_size=5))})


@st.composite
def aggregate_data(draw):
    tests = draw(st.lists(TEXT, max_size=4, unique=True))
    return {"title": draw(TEXT), "tests": tests, "statuses": list(STATUSES),
            "rows": draw(st.lists(row(tests), max_size=4)), "runs": [], "generated_at": "2026-11-27T00:00:00Z"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=aggregate_data())
def test_rows_written_in_python_are_the_templates(data):
    assert render_aggregate_html(data) == old_page(data)


def test_a_real_shaped_page_is_the_templates():
    """Every part present: versions, hashes (short and long), usage, intervals, pass@k, flaky cells and rows."""
    cellv = {"n": 3, "counts": {"PASS": 2, "FAIL": 1}, "strict": 0.6667, "overall": 0.6667, "strict_ci95": [0.2, 0.9],
             "flaky": True, "pass_at_k": {"1": 0.67, "3": 1.0}, "pass_hat_k": {"1": 0.67, "3": 0.0}}
    rows = [{"agent": "pi", "agent_version": "0.9.1", "model": "qwen", "model_hash": "sha256:" + "ab" * 32,
             "format": "tool", "hardware": "cpu-2", "n": 6, "counts": {"PASS": 4, "FAIL": 2},
             "strict_pass_score": 0.6667, "overall_score": 0.7, "strict_ci95": [0.3, 0.9], "overall_ci95": [0.3, 0.95],
             "pass_at_k": {"1": 0.67, "3": 1.0}, "pass_hat_k": {"1": 0.67, "3": 0.0}, "flaky": ["t1", "t2"],
             "usage": {"model_calls": 9, "prompt_tokens": 18000, "completion_tokens": 2352, "cached_tokens": 9984},
             "tests_attempted": 2, "tests_selected": 3, "coverage": 0.67,
             "fidelity": {"B_vs_A": {"matched": 3, "missed": 0, "invented": 1, "cases": 6, "recall": 1.0,
                                     "precision": 0.75, "n_reference": 3, "n_tested": 4}},
             "cells": {"t1": cellv, "t2": {**cellv, "flaky": False, "strict": None}}},
            {"agent": "aider", "model": "m", "model_hash": "short", "format": "whole", "n": 0, "cells": {}}]
    data = {"title": "t", "tests": ["t1", "t2", "t3"], "statuses": list(STATUSES), "rows": rows, "runs": []}
    page = render_aggregate_html(data)
    assert page == old_page(data)
    assert page.count("<tr data-fidelity-row>") == 2 and 'class="cell muted"' in page and "2 flaky" in page

"""Scores of cells and rows (docs/scores.md): the one place every report (summary, aggregate, compare) gets
its numbers from.

A *cell* is one test for one row (a row is an agent × model × format …, whatever the report groups by);
its trials are the cases of that cell. A :class:`Scoreboard` takes cases one at a time (``add``) and keeps
only counts per cell and sums per row, so memory grows with the number of cells, never with the number of
cases; :meth:`Scoreboard.rows` then computes:

* **n** — attempted trials: TOOL_UNSUPPORTED (the agent or backend cannot do what the test needs) and
  SKIPPED (not run, by choice) leave ``n``; every other status, HARNESS_ERROR included, counts;
* **coverage** — tests the row could attempt (a cell with ``n ≥ 1``) / tests selected for it;
* **strict** — a cell's PASS rate ``c / n``; a row's is the mean over its attempted tests (each test
  weighs the same whatever its number of trials); **overall** likewise with PASS 1.0 and
  PASS_WITH_POLICY_VIOLATION 0.8 (the case's ``overall_score``);
* **95 % intervals** — Wilson for a cell; for a row, a two-level bootstrap over its attempted tests
  (tests drawn with replacement, then each drawn test's trials), so the interval carries both how the
  tests differ and how a test's trials disagree; Wilson when the row attempted one test only;
* **pass@k and pass^k** — for each ``k`` from 1 to ``min(n, 10)``: a cell's unbiased estimators
  (:mod:`gripprobe_core.stats`), a row's the mean over its attempted tests (``k`` up to the smallest
  ``n`` among them, so every test counts in every ``k``);
* **flaky** — a cell whose attempted trials disagree (some PASS, some not);
* **usage** — model calls, tokens, cost, time to first token, output tokens per second and time,
  summed (or averaged) over the row's cases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..models.statuses import STATUSES
from ..stats import pass_at_k, pass_hat_k, status_bootstrap, wilson, wilson_rate

__all__ = ["MAX_K", "OUT_OF_N", "OVERALL_BY_STATUS", "SCORES_NOTE", "SHORT", "Scoreboard", "cell_text", "Spend", "cell_score", "coverage_text",
           "ks_text", "overall_of", "score_text", "usage_parts", "usage_text"]

MAX_K = 10
"""pass@k and pass^k are reported for k = 1 … min(n, MAX_K)."""
OUT_OF_N = frozenset({"TOOL_UNSUPPORTED", "SKIPPED"})
"""Statuses that are not attempts: they leave ``n`` and show as coverage."""
OVERALL_BY_STATUS = {"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}
SCORES_NOTE = ("n leaves out TOOL_UNSUPPORTED and SKIPPED (coverage: tests attempted / selected); a row's score is "
               "the mean over its attempted tests, 95% interval bootstrapped over tests and their trials (Wilson "
               "for one test, and for a cell); pass@k / pass^k: at least one / all of k trials pass; flaky: trials disagree "
               "(docs/scores.md)")
SHORT = {"PASS": "PASS", "PASS_WITH_POLICY_VIOLATION": "PWPV", "FAIL": "FAIL", "NO_TOOL_CALL": "NO_TOOL",
         "TIMEOUT": "TIMEOUT", "TOOL_UNSUPPORTED": "UNSUPPORTED", "SHELL_ERROR": "SHELL_ERR",
         "HARNESS_ERROR": "HARNESS_ERR", "SKIPPED": "SKIPPED"}
"""Short status names for crowded tables."""
_INDEX = {s: i for i, s in enumerate(STATUSES)}
_PASS = _INDEX["PASS"]
_OUT = frozenset(_INDEX[s] for s in OUT_OF_N)


def overall_of(status: str, stored: Any = None) -> float:
    """A case's overall score: the stored one when it is a number in [0, 1], else the status's."""
    if isinstance(stored, (int, float)) and not isinstance(stored, bool) and 0.0 <= stored <= 1.0:
        return float(stored)
    return OVERALL_BY_STATUS.get(status, 0.0)


def _r(x: float) -> float:
    return round(x, 6)


def _interval(pair: tuple[float, float]) -> list[float]:
    return [_r(pair[0]), _r(pair[1])]


# ------------------------------------------------------------------------------------------- usage

def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and 0 <= v < 1e18 else None


@dataclass(slots=True)
class Spend:
    """Usage of many cases, summed as they stream past (each token count only over the cases that
    reported it; ``None`` when none did)."""

    cases: int = 0
    with_usage: int = 0
    sources: set[str] = field(default_factory=set)
    model_calls: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    currencies: set[str] = field(default_factory=set)
    priced: int = 0
    ttft_weighted: float = 0.0
    ttft_calls: int = 0
    generation_s: float = 0.0
    completion_timed: int = 0
    agent_s: float = 0.0
    agent_timed: int = 0
    case_s: float = 0.0

    TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "total_tokens")

    def add(self, usage: Mapping[str, Any] | None, *, agent_s: float | None = None, case_s: float | None = None
            ) -> None:
        """One case: its ``usage`` (case.json's ``usage`` object, or None), the measured phase's agent
        seconds and the whole case's seconds."""
        self.cases += 1
        if (a := _num(agent_s)) is not None:
            self.agent_s += a
            self.agent_timed += 1
        if (c := _num(case_s)) is not None:
            self.case_s += c
        if not isinstance(usage, Mapping):
            return
        self.with_usage += 1
        source = usage.get("source")
        if source in ("A", "B"):
            self.sources.add(source)
        calls = _int(usage.get("model_calls")) or 0
        self.model_calls += calls
        for key in self.TOKEN_KEYS:
            if (v := _int(usage.get(key))) is not None:
                self.tokens[key] = self.tokens.get(key, 0) + v
        cost = _num(usage.get("cost"))
        if cost is not None:
            self.cost += cost
            self.priced += 1
            cur = usage.get("currency")
            self.currencies.add(cur if isinstance(cur, str) and cur else "?")
        ttft = _num(usage.get("ttft_ms"))
        if ttft is not None and calls:
            self.ttft_weighted += ttft * calls
            self.ttft_calls += calls
        gen, completion = _num(usage.get("generation_s")), _int(usage.get("completion_tokens"))
        if gen and completion is not None:
            self.generation_s += gen
            self.completion_timed += completion

    def merge(self, other: "Spend") -> None:
        """Add another summary's cases (a part of the same row read elsewhere, e.g. by a worker process)."""
        for name in ("cases", "with_usage", "model_calls", "cost", "priced", "ttft_weighted", "ttft_calls",
                     "generation_s", "completion_timed", "agent_s", "agent_timed", "case_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.sources |= other.sources
        self.currencies |= other.currencies
        for key, v in other.tokens.items():
            self.tokens[key] = self.tokens.get(key, 0) + v

    def as_dict(self) -> dict[str, Any]:
        single = len(self.currencies) == 1
        return {
            "cases": self.cases,
            "cases_with_usage": self.with_usage,
            "source": "".join(sorted(self.sources)) or "none",
            "model_calls": self.model_calls,
            **{k: self.tokens.get(k) for k in self.TOKEN_KEYS},
            "cost": _r(self.cost) if self.priced and single else None,
            "currency": next(iter(self.currencies)) if single else ("mixed" if self.currencies else None),
            "priced_cases": self.priced,
            "ttft_ms": round(self.ttft_weighted / self.ttft_calls, 1) if self.ttft_calls else None,
            "output_tokens_per_s": (round(self.completion_timed / self.generation_s, 1)
                                    if self.generation_s > 0 else None),
            "agent_s": round(self.agent_s, 3) if self.agent_timed else None,
            "agent_s_mean": round(self.agent_s / self.agent_timed, 3) if self.agent_timed else None,
            "case_s": round(self.case_s, 3),
        }


# ------------------------------------------------------------------------------------------- cells

def cell_score(counts: Sequence[int], overall_sum: float) -> dict[str, Any]:
    """A cell's scores from its counts per status (``STATUSES`` order) and the sum of its attempted
    trials' overall scores."""
    trials = sum(counts)
    n = trials - sum(counts[i] for i in _OUT)
    c = counts[_PASS]
    out: dict[str, Any] = {
        "trials": trials, "n": n, "passed": c,
        "counts": {s: k for s, k in zip(STATUSES, counts) if k},
        "strict": None, "strict_ci95": None, "overall": None, "pass_at_k": {}, "pass_hat_k": {},
        "flaky": n >= 2 and 0 < c < n,
    }
    if n:
        ks = range(1, min(n, MAX_K) + 1)
        out.update(strict=_r(c / n), strict_ci95=_interval(wilson(c, n)), overall=_r(overall_sum / n),
                   pass_at_k={str(k): _r(pass_at_k(n, c, k)) for k in ks},
                   pass_hat_k={str(k): _r(pass_hat_k(n, c, k)) for k in ks})
    return out


@dataclass(slots=True)
class _Cell:
    counts: list[int] = field(default_factory=lambda: [0] * len(STATUSES))
    overall_sum: float = 0.0

    def add(self, status: str, overall: float) -> None:
        i = _INDEX[status]
        self.counts[i] += 1
        if i not in _OUT:
            self.overall_sum += overall


@dataclass(slots=True)
class _Row:
    cells: dict[str, _Cell] = field(default_factory=dict)
    spend: Spend = field(default_factory=Spend)


class Scoreboard:
    """Rows of cells, filled one case at a time. ``row`` is any hashable identity (a tuple of the
    grouping fields); ``row_fields`` names its parts in :meth:`rows`' output."""

    def __init__(self, row_fields: Sequence[str]) -> None:
        self.row_fields = tuple(row_fields)
        self._rows: dict[tuple, _Row] = {}

    def add(self, row: tuple, test: str, status: str, overall: float = 0.0, *,
            usage: Mapping[str, Any] | None = None, agent_s: float | None = None,
            case_s: float | None = None) -> None:
        """One case. ``status`` must be one of ``STATUSES``; ``overall`` its overall score."""
        r = self._rows.get(row)
        if r is None:
            r = self._rows[row] = _Row()
        cell = r.cells.get(test)
        if cell is None:
            cell = r.cells[test] = _Cell()
        cell.add(status, overall)
        r.spend.add(usage, agent_s=agent_s, case_s=case_s)

    def merge(self, other: "Scoreboard") -> None:
        """Add every case of ``other`` (a board of the same rows filled elsewhere: a run read by a worker
        process). Rows and cells new here come after the ones already seen, in ``other``'s order."""
        for ident, theirs in other._rows.items():
            mine = self._rows.get(ident)
            if mine is None:
                mine = self._rows[ident] = _Row()
            for test, cell in theirs.cells.items():
                have = mine.cells.get(test)
                if have is None:
                    have = mine.cells[test] = _Cell()
                have.counts = [a + b for a, b in zip(have.counts, cell.counts)]
                have.overall_sum += cell.overall_sum
            mine.spend.merge(theirs.spend)

    def __len__(self) -> int:
        return len(self._rows)

    def tests(self) -> list[str]:
        return sorted({t for r in self._rows.values() for t in r.cells})

    def rows(self, map_fn: Callable[..., Iterable[Any]] | None = None) -> list[dict[str, Any]]:
        """Every row's scores (unsorted, in the order rows were first seen). ``map_fn`` (``Executor.map``: a
        process pool's) computes the rows' bootstrap intervals, the costly part, side by side; the results are
        the same as without it."""
        if map_fn is not None:
            wanted = {sig for r in self._rows.values() if (sig := _row_signatures(r)) and len(sig) > 1}
            todo = sorted(wanted)
            for sig, got in zip(todo, map_fn(_row_intervals, todo, chunksize=max(1, len(todo) // 16))):
                _KNOWN[sig] = got
        try:
            return [self._score(ident, r) for ident, r in self._rows.items()]
        finally:
            _KNOWN.clear()

    def _score(self, ident: tuple, row: _Row) -> dict[str, Any]:
        cells = {t: cell_score(c.counts, c.overall_sum) for t, c in sorted(row.cells.items())}
        attempted = [c for c in cells.values() if c["n"]]
        totals = [sum(col) for col in zip(*(c.counts for c in row.cells.values()))] or [0] * len(STATUSES)
        out: dict[str, Any] = dict(zip(self.row_fields, ident))
        out.update(_row_scores(attempted))
        out.update({
            "tests_selected": len(cells), "tests_attempted": len(attempted),
            "coverage": _r(len(attempted) / len(cells)) if cells else 0.0,
            "trials": max((c["trials"] for c in cells.values()), default=0),
            "cases": sum(totals), "n": sum(c["n"] for c in cells.values()),
            "counts": {s: k for s, k in zip(STATUSES, totals) if k},
            "flaky": sorted(t for t, c in cells.items() if c["flaky"]),
            "usage": row.spend.as_dict(),
            "cells": cells,
        })
        return out


def _signature(cell: Mapping[str, Any]) -> tuple[int, int, int]:
    """What a cell's resampling depends on: its attempted trials, PASS and PASS_WITH_POLICY_VIOLATION counts."""
    counts = cell["counts"]
    return cell["n"], counts.get("PASS", 0), counts.get("PASS_WITH_POLICY_VIOLATION", 0)


def _row_signatures(row: _Row) -> tuple[tuple[int, int, int], ...]:
    """The sorted :func:`_signature` of a row's attempted cells, from its counts."""
    pwpv = _INDEX["PASS_WITH_POLICY_VIOLATION"]
    sigs = []
    for cell in row.cells.values():
        n = sum(cell.counts) - sum(cell.counts[i] for i in _OUT)
        if n:
            sigs.append((n, cell.counts[_PASS], cell.counts[pwpv]))
    return tuple(sorted(sigs))


_KNOWN: dict[tuple[tuple[int, int, int], ...], tuple[tuple[float, float], tuple[float, float]]] = {}
"""Intervals computed side by side for one :meth:`Scoreboard.rows` call."""


def _intervals_of(signatures: tuple[tuple[int, int, int], ...]) -> tuple[tuple[float, float], tuple[float, float]]:
    got = _KNOWN.get(signatures)
    return got if got is not None else _row_intervals(signatures)


@lru_cache(maxsize=4096)
def _row_intervals(signatures: tuple[tuple[int, int, int], ...]) -> tuple[tuple[float, float], tuple[float, float]]:
    """The (strict, overall) 95 % intervals of a row's mean over its tests (``signatures`` sorted, so the
    order tests are met in never changes a result; identical rows are computed once).

    Two or more tests: a two-level bootstrap (tests, then trials; :func:`~gripprobe_core.stats.status_bootstrap`). When every trial agrees (all PASS, or
    none) the bootstrap has nothing to resample and would say ``[1, 1]``: Wilson's interval of the pooled
    rate is the honest one then, and it is also the interval of a row that attempted one test."""
    pwpv = OVERALL_BY_STATUS["PASS_WITH_POLICY_VIOLATION"]
    n = sum(s[0] for s in signatures)
    passed = sum(s[1] for s in signatures)
    overall = sum(s[1] + pwpv * s[2] for s in signatures) / n
    pooled = wilson(passed, n), wilson_rate(overall, n)
    if len(signatures) < 2:
        return pooled
    strict_ci, overall_ci = status_bootstrap(signatures, weight=pwpv)  # nested_bootstrap's estimator, ~4x cheaper
    return (strict_ci if strict_ci[0] < strict_ci[1] else pooled[0],
            overall_ci if overall_ci[0] < overall_ci[1] else pooled[1])


def _row_scores(attempted: list[dict[str, Any]]) -> dict[str, Any]:
    if not attempted:
        return {"strict_pass_score": None, "strict_ci95": None, "overall_score": None, "overall_ci95": None,
                "pass_at_k": {}, "pass_hat_k": {}}
    strict = [c["strict"] for c in attempted]
    overall = [c["overall"] for c in attempted]
    strict_ci, overall_ci = _intervals_of(tuple(sorted(_signature(c) for c in attempted)))
    k_max = min(min(c["n"] for c in attempted), MAX_K)
    return {
        "strict_pass_score": _r(sum(strict) / len(strict)), "strict_ci95": _interval(strict_ci),
        "overall_score": _r(sum(overall) / len(overall)), "overall_ci95": _interval(overall_ci),
        "pass_at_k": _mean_by_k(attempted, "pass_at_k", k_max),
        "pass_hat_k": _mean_by_k(attempted, "pass_hat_k", k_max),
    }


def _mean_by_k(cells: Iterable[dict[str, Any]], key: str, k_max: int) -> dict[str, float]:
    cells = list(cells)
    return {str(k): _r(sum(c[key][str(k)] for c in cells) / len(cells)) for k in range(1, k_max + 1)}


# ------------------------------------------------------------------------------------------- text

def score_text(value: float | None, ci: Sequence[float] | None = None) -> str:
    """``0.667 [0.21, 0.94]``; ``—`` when there is no score (nothing attempted)."""
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def ks_text(by_k: Mapping[str, float] | None, sign: str = "@") -> str:
    """``@1 0.67 · @2 0.93 · @3 1.00`` (``^1 …`` for pass^k); ``—`` when empty."""
    if not by_k:
        return "—"
    return " · ".join(f"{sign}{k} {v:.2f}" for k, v in sorted(by_k.items(), key=lambda kv: int(kv[0])))


def cell_text(cell: Mapping[str, Any] | None) -> str:
    """``3/4 PASS, 1 PWPV`` (``(flaky)`` when its trials disagree; ``—`` when the row never ran the test)."""
    if not cell:
        return "—"
    counts = cell["counts"]
    parts = [f"{counts.get('PASS', 0)}/{cell['n']} PASS"]
    parts += [f"{v} {SHORT.get(s, s)}" for s, v in counts.items() if s != "PASS" and v]
    return ", ".join(parts) + (" (flaky)" if cell.get("flaky") else "")


def coverage_text(row: Mapping[str, Any]) -> str:
    """``5/6 tests``: tests the row could attempt / tests selected for it."""
    return f"{row.get('tests_attempted', 0)}/{row.get('tests_selected', 0)} tests"


def _tokens(v: int | None) -> str:
    if v is None:
        return "?"
    return f"{v / 1_000_000:.2f}M" if v >= 1_000_000 else f"{v / 1000:.1f}k" if v >= 10_000 else str(v)


def money_text(cost: float | None, currency: str | None) -> str:
    if cost is None:
        return "—"
    return f"{cost:.4f} {currency}" if currency else f"{cost:.4f}"


def usage_parts(usage: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``(label, value)`` pairs of what a usage summary knows (calls, tokens, cost, latency, time)."""
    if not usage:
        return []
    out: list[tuple[str, str]] = []
    if usage.get("model_calls"):
        out.append(("calls", str(usage["model_calls"])))
    if usage.get("prompt_tokens") is not None or usage.get("completion_tokens") is not None:
        tokens = f"{_tokens(usage.get('prompt_tokens'))} in / {_tokens(usage.get('completion_tokens'))} out"
        if usage.get("cached_tokens"):
            tokens += f" ({_tokens(usage['cached_tokens'])} cached)"
        if usage.get("tokens_from") == "agent":
            tokens += " as the agent reported them"
        out.append(("tokens", tokens))
    if usage.get("cost") is not None:
        out.append(("cost", money_text(usage["cost"], usage.get("currency"))))
    if usage.get("ttft_ms") is not None:
        out.append(("ttft", f"{usage['ttft_ms']:.0f} ms"))
    if usage.get("model_time_s") is not None:
        out.append(("model time", f"{usage['model_time_s']:.2f} s"))
    if usage.get("output_tokens_per_s") is not None:
        out.append(("out", f"{usage['output_tokens_per_s']:.0f} tok/s"))
    if usage.get("agent_s_mean") is not None:
        out.append(("agent", f"{usage['agent_s_mean']:.1f} s/case"))
    if out and isinstance(usage.get("phases"), list) and usage["phases"]:
        out.append(("phases", " + ".join(str(p) for p in usage["phases"])))
    return out


def usage_text(usage: Mapping[str, Any] | None) -> str:
    """``calls 12 · tokens 3.4k in / 512 out · cost 0.0123 USD · ttft 120 ms · out 45 tok/s``; ``—`` when
    nothing is known."""
    return " · ".join(f"{k} {v}" for k, v in usage_parts(usage)) or "—"

"""``gripprobe compare``: is B better or worse than A, case by case (docs/scores.md#compare).

Each side is one or more runs (optionally narrowed to one agent or one model). Cases pair by their key —
agent, model, backend, format, test — and, within a cell, trial by trial: a side's trials of a cell are
its cases of that cell in (run id, trial) order, and the j-th trial of A pairs with the j-th of B. When
the sides pick different agents (``--agent-a codex --agent-b aider``) the agent and format leave the
key; different models, the model and backend: the same tests then pair head to head.

What comes out, first things first:

* **flips** — cells whose pass rate changed, regressions (B below A) before improvements, each with its
  paired trials' statuses and McNemar's exact p-value over those pairs;
* **summary** — McNemar's exact test over every pair both sides attempted (TOOL_UNSUPPORTED and SKIPPED
  are out, as in every score), and paired bootstrap 95 % intervals of B − A in strict and overall score
  over the cells both sides attempted;
* **rows** — per agent × model × backend × format: both sides' pass counts and scores, the paired
  difference, the deltas of tokens, cost and time per case, and whether both sides ran the same model build;
* **links** — every trial's case page, relative to the folder the report is written to (``base``);
* **significance** — with ``--significance P``: how many cells have too few paired trials for P ever to be
  reached (the smallest two-sided McNemar p of k pairs is ``2 / 2**k``) and how many it would take.

Nothing is written into the runs; ``write_compare`` writes three files into a folder of the user's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import UserError
from ..models.statuses import STATUSES
from ..stats import mcnemar_exact, paired_bootstrap_difference
from ..store import RunFolder, atomic_write_json, atomic_write_text
from ..store.files import json_kind
from ..textsafe import safe_cell, safe_name
from ..timeutil import utc_now_iso
from .aggregate import CaseFacts, read_facts_in, run_cases, run_integrity, run_signature_text
from .scores import OUT_OF_N, Spend, overall_of, score_text, usage_text

__all__ = ["KIND", "OUTPUT_FILES", "Side", "compare_sides", "pairs_needed", "regressed_cells", "render_compare_md",
           "significance_note", "write_compare"]

KIND = "gripprobe-compare"
OUTPUT_FILES = ("compare.json", "compare.md", "compare.html")
KEY_FIELDS = ("agent", "model", "backend", "format")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its runs, and optionally only one agent's or one model's cases."""

    label: str
    runs: tuple[Path, ...]
    agent: str | None = None
    model: str | None = None

    def selects(self, f: CaseFacts) -> bool:
        return (self.agent is None or f.agent == self.agent) and (self.model is None or f.model == self.model)


@dataclass
class _Trial:
    run_id: str
    case_id: str
    trial: int
    status: str
    overall: float
    page: Path | None = None
    """The case's page (``<run>/reports/cases/<page_name>``) when the run's reports hold it."""

    @property
    def attempted(self) -> bool:
        return self.status not in OUT_OF_N

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


@dataclass
class _Loaded:
    cells: dict[tuple, list[_Trial]] = field(default_factory=dict)
    spend: dict[tuple, Spend] = field(default_factory=dict)
    versions: dict[tuple, set[str]] = field(default_factory=dict)
    builds: dict[tuple, set[str | None]] = field(default_factory=dict)
    """Each row's model hashes (None: a case that recorded none)."""
    cases: int = 0
    unreadable: int = 0
    run_ids: list[str] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    """``run/case`` of every case left out because it changed after its run."""


def _key_fields(a: Side, b: Side) -> tuple[str, ...]:
    dropped = set()
    if a.agent != b.agent:
        dropped |= {"agent", "format"}
    if a.model != b.model:
        dropped |= {"model", "backend"}
    return tuple(f for f in KEY_FIELDS if f not in dropped)


def _load(side: Side, fields: Sequence[str], keys: set[str] | None, key_label: str) -> _Loaded:
    out = _Loaded()
    for run_dir in side.runs:
        manifest = RunFolder(run_dir).read_manifest()
        hw = manifest.get("hardware_profile") if isinstance(manifest.get("hardware_profile"), str) else None
        out.run_ids.append(safe_name(run_dir.name))
        integrity, changed = run_integrity(run_dir, keys, key_label)
        out.signatures.append({"run_id": safe_name(run_dir.name), **integrity})
        for case_name, folder in run_cases(run_dir):  # each case.json read once, below the case folder held open
            if case_name in changed:  # changed after its run: never paired
                out.left_out.append(f"{safe_name(run_dir.name)}/{safe_name(case_name)}")
                continue
            f = read_facts_in(folder, hw, case_name)
            if f is None:
                out.unreadable += 1
                continue
            if not side.selects(f):
                continue
            if f.manual:  # answered by an operator: not reproducible, never paired (docs/interaction.md)
                out.left_out.append(f"{safe_name(run_dir.name)}/{safe_name(case_name)}")
                continue
            out.cases += 1
            row = tuple(getattr(f, k) for k in fields)
            out.cells.setdefault((*row, f.test), []).append(
                _Trial(run_dir.name, f.case_id, f.trial, f.status, overall_of(f.status, f.overall),
                       _case_page(run_dir, case_name)))
            out.builds.setdefault(row, set()).add(f.model_hash)
            out.spend.setdefault(row, Spend()).add(f.usage, agent_s=f.agent_s, case_s=f.case_s)
            out.versions.setdefault(row, set()).update(
                v for v in (f.agent_version and f"{f.agent} {f.agent_version}", f.model_hash) if v)
    for trials in out.cells.values():
        trials.sort(key=lambda t: (t.run_id, t.trial, t.case_id))
    return out


def _case_page(run_dir: Path, case_dir_name: str) -> Path | None:
    """The case's page in its run's reports, when it is there as a regular file (no link followed)."""
    from .html import page_name

    page = run_dir / "reports" / "cases" / page_name(case_dir_name)
    try:
        return page if stat.S_ISREG(os.lstat(page).st_mode) else None
    except OSError:
        return None


def _link(page: Path | None, base: Path) -> str | None:
    """``page`` as a relative URL from the folder ``base`` (where the report is written)."""
    if page is None:
        return None
    rel = os.path.relpath(os.path.abspath(page), os.path.abspath(base))
    return quote(rel.replace(os.sep, "/"))


def _rate(trials: Iterable[_Trial]) -> tuple[int, int, float]:
    tried = [t for t in trials if t.attempted]
    return len(tried), sum(t.passed for t in tried), sum(t.overall for t in tried)


def _cell(key: tuple, fields: Sequence[str], a: list[_Trial], b: list[_Trial], base: Path) -> dict[str, Any]:
    pairs = list(zip(a, b))
    tried = [(x, y) for x, y in pairs if x.attempted and y.attempted]
    only_a = sum(x.passed and not y.passed for x, y in tried)
    only_b = sum(y.passed and not x.passed for x, y in tried)
    (na, ca, oa), (nb, cb, ob) = _rate(a), _rate(b)
    ra, rb = (ca / na if na else None), (cb / nb if nb else None)
    change = "unscored"
    if ra is not None and rb is not None:
        change = "regressed" if rb < ra else "improved" if rb > ra else "same"
    elif (ra is None) != (rb is None):
        change = "coverage_lost" if rb is None else "coverage_gained"
    return {
        **dict(zip(fields, key[:-1])), "test": key[-1], "change": change,
        "a": {"trials": len(a), "n": na, "passed": ca, "strict": _r(ra), "overall": _r(oa / na if na else None),
              "statuses": [t.status for t in a], "cases": [f"{t.run_id}/{t.case_id}" for t in a],
              "pages": [_link(t.page, base) for t in a]},
        "b": {"trials": len(b), "n": nb, "passed": cb, "strict": _r(rb), "overall": _r(ob / nb if nb else None),
              "statuses": [t.status for t in b], "cases": [f"{t.run_id}/{t.case_id}" for t in b],
              "pages": [_link(t.page, base) for t in b]},
        "pairs": len(pairs), "attempted_pairs": len(tried), "discordant": {"a_only": only_a, "b_only": only_b},
        "p_value": _r(mcnemar_exact(only_a, only_b)) if tried else None,
        "flips": [{"trial": j + 1, "a": x.status, "b": y.status, "a_case": f"{x.run_id}/{x.case_id}",
                   "b_case": f"{y.run_id}/{y.case_id}"}
                  for j, (x, y) in enumerate(pairs) if x.passed != y.passed],
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _difference(cells: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    pairs = [(c["a"][metric], c["b"][metric]) for c in cells
             if c["a"][metric] is not None and c["b"][metric] is not None]
    if not pairs:
        return {"a": None, "b": None, "diff": None, "ci95": None, "cells": 0}
    diff, low, high = paired_bootstrap_difference(pairs)
    return {"a": _r(sum(a for a, _ in pairs) / len(pairs)), "b": _r(sum(b for _, b in pairs) / len(pairs)),
            "diff": _r(diff), "ci95": [_r(low), _r(high)], "cells": len(pairs)}


_DELTA_KEYS = ("model_calls", "total_tokens", "cost", "agent_s", "ttft_ms")


def _per_case(usage: dict[str, Any]) -> dict[str, float | None]:
    cases = usage.get("cases") or 0
    out: dict[str, float | None] = {}
    for k in _DELTA_KEYS:
        v = usage.get(k)
        if k == "ttft_ms":
            out[k] = v
        elif k == "agent_s":
            out[k] = usage.get("agent_s_mean")
        else:
            out[k] = round(v / cases, 6) if isinstance(v, (int, float)) and cases else None
    return out


def _pass_counts(cells: list[dict[str, Any]], side: str) -> dict[str, int]:
    return {"passed": sum(c[side]["passed"] for c in cells), "n": sum(c[side]["n"] for c in cells)}


def _builds(row: tuple, fields: Sequence[str], a: _Loaded, b: _Loaded) -> dict[str, Any]:
    """Both sides' model hashes of a row (None: a case recorded none) and whether they differ. Only when the
    model is part of the pairing: model against model (``--model-a/--model-b``) differs by design."""
    ha, hb = a.builds.get(row, set()), b.builds.get(row, set())
    differ = "model" in fields and ha != hb and bool((ha | hb) - {None})
    return {"a": _hash_list(ha), "b": _hash_list(hb), "differ": differ}


def _hash_list(hashes: set[str | None]) -> list[str | None]:
    return [*sorted(h for h in hashes if h is not None), *([None] if None in hashes else [])]


def _row(row: tuple, fields: Sequence[str], cells: list[dict[str, Any]], a: _Loaded, b: _Loaded) -> dict[str, Any]:
    ua = a.spend.get(row, Spend()).as_dict()
    ub = b.spend.get(row, Spend()).as_dict()
    pa, pb = _per_case(ua), _per_case(ub)
    return {
        **dict(zip(fields, row)),
        "versions": {"a": sorted(a.versions.get(row, ())), "b": sorted(b.versions.get(row, ()))},
        "model_builds": _builds(row, fields, a, b),
        "pass": {"a": _pass_counts(cells, "a"), "b": _pass_counts(cells, "b")},
        "coverage": {side: f"{sum(1 for c in cells if c[side]['n'])}/{sum(1 for c in cells if c[side]['trials'])}"
                     for side in ("a", "b")},
        "strict": _difference(cells, "strict"), "overall": _difference(cells, "overall"),
        "regressed": sum(c["change"] == "regressed" for c in cells),
        "improved": sum(c["change"] == "improved" for c in cells),
        "usage": {"a": ua, "b": ub},
        "per_case": {k: {"a": pa[k], "b": pb[k], "delta": _delta(pa[k], pb[k])} for k in _DELTA_KEYS},
    }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 6)


_ORDER = {"regressed": 0, "improved": 1, "coverage_lost": 2, "coverage_gained": 3, "same": 4, "unscored": 5}


def compare_sides(a: Side, b: Side, *, keys: Iterable[str] | None = None, key_label: str = "",
                  base: Path | None = None, significance: float | None = None) -> dict[str, Any]:
    """The comparison data (what ``compare.json`` holds; docs/scores.md#compare). Every run is checked
    against its signatures first (``keys``: the fingerprints it must be signed with; None: its own): a case
    that changed after its run is left out and named, and each run's signature is reported. ``base``: the
    folder the case pages are linked from (the output folder; default the current one). ``significance``:
    the level ``--significance`` asks for, to say which cells have too few trials ever to reach it."""
    base = Path.cwd() if base is None else base
    fields = _key_fields(a, b)
    anchors = set(keys) if keys is not None else None
    la, lb = _load(a, fields, anchors, key_label), _load(b, fields, anchors, key_label)
    if not la.cases or not lb.cases:
        empty = a if not la.cases else b
        raise UserError(f"side {empty.label} holds no case{_narrowed(empty)}; check the run folders with "
                        f"`gripprobe list-runs`")
    keys = sorted(set(la.cells) & set(lb.cells))
    cells = [_cell(k, fields, la.cells[k], lb.cells[k], base) for k in keys]
    cells.sort(key=lambda c: (_ORDER[c["change"]], c["p_value"] if c["p_value"] is not None else 2.0,
                              tuple(str(c.get(f, "")) for f in (*fields, "test"))))
    tried_pairs = [(x, y) for k in keys for x, y in zip(la.cells[k], lb.cells[k]) if x.attempted and y.attempted]
    only_a = sum(x.passed and not y.passed for x, y in tried_pairs)
    only_b = sum(y.passed and not x.passed for x, y in tried_pairs)
    rows = []
    for row in sorted({k[:-1] for k in keys}):
        rows.append(_row(row, fields, [c for c in cells if tuple(c[f] for f in fields) == row], la, lb))
    unpaired_a = sorted(set(la.cells) - set(lb.cells))
    unpaired_b = sorted(set(lb.cells) - set(la.cells))
    from .. import __version__
    return {
        "kind": KIND, "generated_at": utc_now_iso(), "gripprobe_version": __version__,
        "a": _side(a, la), "b": _side(b, lb), "pairing": [*fields, "test", "trial"],
        "summary": {
            "cells": len(cells), "pairs": len(tried_pairs),
            "both_pass": sum(x.passed and y.passed for x, y in tried_pairs),
            "neither": sum(not x.passed and not y.passed for x, y in tried_pairs),
            "a_only": only_a, "b_only": only_b, "mcnemar_p": _r(mcnemar_exact(only_a, only_b)),
            "pass": {"a": _pass_counts(cells, "a"), "b": _pass_counts(cells, "b")},
            "other_builds": sum(r["model_builds"]["differ"] for r in rows),
            "strict": _difference(cells, "strict"), "overall": _difference(cells, "overall"),
            **{name: sum(c["change"] == name for c in cells) for name in _ORDER},
            "unpaired_cells": {"a": len(unpaired_a), "b": len(unpaired_b)},
        },
        "cells": cells,
        "rows": rows,
        "unpaired": {"a": [_cell_name(k) for k in unpaired_a[:200]],
                     "b": [_cell_name(k) for k in unpaired_b[:200]]},
        "statuses": list(STATUSES),
        "significance": None if significance is None else _reach(cells, significance),
    }


def _narrowed(side: Side) -> str:
    parts = [f"agent {side.agent}"] * bool(side.agent) + [f"model {side.model}"] * bool(side.model)
    return f" for {' and '.join(parts)}" if parts else ""


def _side(side: Side, loaded: _Loaded) -> dict[str, Any]:
    return {"label": side.label, "runs": loaded.run_ids, "agent": side.agent, "model": side.model,
            "cases": loaded.cases, "unreadable": loaded.unreadable, "signatures": loaded.signatures,
            "left_out": loaded.left_out[:200], "left_out_count": len(loaded.left_out)}


def signatures_line(data: dict[str, Any]) -> str:
    """How both sides' signatures held, and the cases left out because they changed after their run."""
    parts = []
    for name in ("a", "b"):
        side = data[name]
        runs = ", ".join(f"{r['run_id']} {run_signature_text({'integrity': r})}" for r in side.get("signatures") or [])
        left = side.get("left_out_count") or 0
        parts.append(f"{name.upper()}: {runs or 'not checked'}"
                     + (f"; {left} case(s) left out, changed after their run: {', '.join(side['left_out'][:5])}"
                        + (" …" if left > 5 else "") if left else ""))
    return "signatures: " + "; ".join(parts)


def _cell_name(key: tuple) -> str:
    return " / ".join(str(v) for v in key)


def smallest_p(pairs: int) -> float:
    """The smallest two-sided McNemar p that ``pairs`` paired trials can give (every pair discordant one way)."""
    return mcnemar_exact(pairs, 0)


def pairs_needed(significance: float) -> int:
    """The fewest paired trials whose smallest McNemar p is below ``significance`` (6 for 0.05)."""
    k = 1
    while smallest_p(k) >= significance and k < 4096:
        k += 1
    return k


def _reach(cells: list[dict[str, Any]], significance: float) -> dict[str, Any]:
    """Which compared cells could ever have a McNemar p below ``significance``: a cell of k attempted pairs
    cannot go below ``2 / 2**k``, whatever happens in it."""
    scored = [c for c in cells if c["attempted_pairs"]]
    short = [c for c in scored if smallest_p(c["attempted_pairs"]) >= significance]
    most = max((c["attempted_pairs"] for c in short), default=0)
    return {"level": significance, "cells": len(scored), "out_of_reach": len(short),
            "most_pairs_out_of_reach": most, "smallest_p": _r(smallest_p(most)) if short else None,
            "pairs_needed": pairs_needed(significance),
            "regressed_out_of_reach": sum(c["change"] == "regressed" for c in short)}


def significance_note(data: dict[str, Any]) -> str | None:
    """One line when ``--significance`` cannot be reached in some cells (None when it can in every cell)."""
    r = data.get("significance")
    if not r or not r["out_of_reach"]:
        return None
    k, level = r["most_pairs_out_of_reach"], r["level"]
    regressed = r["regressed_out_of_reach"]
    return (f"--significance {level:g} is out of reach in {r['out_of_reach']} of {r['cells']} cell(s): with "
            f"{'at most ' if r['out_of_reach'] > 1 else ''}{k} paired trial(s) the smallest McNemar p is "
            f"{p_text(r['smallest_p'])}; a cell needs {r['pairs_needed']} paired trials on each side to go below "
            f"{level:g}" + (f"; {regressed} regressed cell(s) among them can never count for --fail-on-regression"
                            if regressed else ""))


def build_note(row: dict[str, Any]) -> str | None:
    """``B ran a different model build: A sha256:1234… vs B sha256:abcd…`` when a row's sides recorded different
    model hashes (or one side none)."""
    builds = row.get("model_builds") or {}
    if not builds.get("differ"):
        return None

    def text(hashes: list[str | None]) -> str:
        return ", ".join(_short_hash(h) for h in hashes) or "none recorded"
    return f"B ran a different model build: A {text(builds['a'])} vs B {text(builds['b'])}"


def build_cell_text(row: dict[str, Any], markdown: bool = False) -> str:
    """A row's model build column: the difference (bold in Markdown), ``same``, ``not recorded`` or ``—``
    (model against model, or hashes that are not one per side)."""
    note = build_note(row)
    if note:
        return f"**{note}**" if markdown else note
    builds = row.get("model_builds") or {}
    a, b = builds.get("a") or [], builds.get("b") or []
    if a == b == [None]:
        return "not recorded"
    if a == b and len(a) == 1:
        return f"same ({_short_hash(a[0])})"
    return "—"


def _short_hash(h: str | None) -> str:
    if h is None:
        return "none recorded"
    algo, sep, digest = h.partition(":")
    return f"{algo}:{digest[:12]}…" if sep and len(digest) > 12 else (h if len(h) <= 24 else h[:24] + "…")


def pass_text(counts: dict[str, int]) -> str:
    """``6/9`` (PASS / attempted; ``—`` when nothing was attempted)."""
    return f"{counts['passed']}/{counts['n']}" if counts["n"] else "—"


def regressed_cells(data: dict[str, Any], significance: float | None = None) -> list[dict[str, Any]]:
    """Cells whose pass rate dropped (with ``significance``: only those whose McNemar p-value is below it)."""
    return [c for c in data["cells"] if c["change"] == "regressed"
            and (significance is None or (c["p_value"] is not None and c["p_value"] < significance))]


# ---------------------------------------------------------------------------------------------- markdown

def _md(v: Any) -> str:
    """One Markdown cell: control characters escaped (``safe_cell``), markup and ``|`` made literal."""
    return safe_cell(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def cell_label(cell: dict[str, Any], fields: Sequence[str]) -> str:
    return " · ".join(str(cell[f]) for f in (*fields, "test"))


def rate_text(side: dict[str, Any]) -> str:
    """``2/3`` (PASS / attempted; ``—`` when nothing was attempted)."""
    return f"{side['passed']}/{side['n']}" if side["n"] else "—"


def statuses_text(cell: dict[str, Any], links: bool = False) -> str:
    """``PASS → NO_TOOL_CALL, PASS → PASS`` (paired trials) plus any unpaired ones; with ``links``, each status
    a Markdown link to its case page (Markdown-safe: the caller does not escape it again)."""
    def one(side: str, j: int) -> str:
        status = cell[side]["statuses"][j]
        pages = cell[side].get("pages") or []
        page = pages[j] if links and j < len(pages) else None
        return (f"[{_md(status)}]({page})" if page else _md(status)) if links else status
    a, b = len(cell["a"]["statuses"]), len(cell["b"]["statuses"])
    parts = [f"{one('a', j)} → {one('b', j)}" for j in range(min(a, b))]
    parts += [f"{one('a', j)} → (none)" for j in range(b, a)] + [f"(none) → {one('b', j)}" for j in range(a, b)]
    return ", ".join(parts)


def diff_text(d: dict[str, Any]) -> str:
    if d["diff"] is None:
        return "—"
    return f"{d['diff']:+.3f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"


def p_text(p: float | None) -> str:
    return "—" if p is None else f"{p:.3g}"


def delta_text(entry: dict[str, Any], unit: str = "", digits: int = 0) -> str:
    a, b, d = entry["a"], entry["b"], entry["delta"]
    if a is None and b is None:
        return "—"
    fmt = (lambda v: "?" if v is None else f"{v:.{digits}f}{unit}")
    return f"{fmt(a)} → {fmt(b)}" + ("" if d is None else f" ({d:+.{digits}f})")


def render_compare_md(data: dict[str, Any]) -> str:
    fields = data["pairing"][:-2]
    s = data["summary"]
    a, b = data["a"], data["b"]
    lines = [
        f"# GripProbe compare: {_md(a['label'])} vs {_md(b['label'])}", "",
        f"- A: {_md(', '.join(a['runs']))} ({a['cases']} cases{_md(_narrow_md(a))}); "
        f"B: {_md(', '.join(b['runs']))} ({b['cases']} cases{_md(_narrow_md(b))})",
        f"- paired by {', '.join(data['pairing'])}: {s['cells']} cells, {s['pairs']} attempted pairs; "
        f"regressed {s['regressed']}, improved {s['improved']}, same {s['same']}, coverage lost "
        f"{s['coverage_lost']}, gained {s['coverage_gained']}; unpaired cells A {s['unpaired_cells']['a']}, "
        f"B {s['unpaired_cells']['b']}",
        f"- {_md(signatures_line(data))}",
        f"- passed: A {pass_text(s['pass']['a'])}, B {pass_text(s['pass']['b'])} (trials of the cells both sides "
        f"hold, TOOL_UNSUPPORTED and SKIPPED out)",
        f"- McNemar exact: PASS only in A {s['a_only']}, only in B {s['b_only']}, both {s['both_pass']}, "
        f"neither {s['neither']}: p = {p_text(s['mcnemar_p'])}",
        f"- strict B − A: {diff_text(s['strict'])} (A {score_text(s['strict']['a'])}, B "
        f"{score_text(s['strict']['b'])}); overall B − A: {diff_text(s['overall'])} — paired bootstrap 95% "
        f"intervals over {s['strict']['cells']} cells",
    ]
    note = significance_note(data)
    if note:
        lines.append(f"- **Note:** {_md(note)}")
    builds = [(r, build_note(r)) for r in data["rows"] if build_note(r)]
    if builds:
        lines += ["", "## Model builds differ", ""]
        lines += [f"- **{_md(' · '.join(str(r[f]) for f in fields))}: {_md(text)}**" for r, text in builds]
    lines += ["", "## Flips", ""]
    flips = [c for c in data["cells"] if c["change"] in ("regressed", "improved", "coverage_lost", "coverage_gained")]
    if flips:
        lines += ["| change | cell | A | B | p (McNemar) | trials A → B |", "|---|---|---|---|---|---|"]
        for c in flips:
            lines.append("| " + " | ".join([*(_md(v) for v in (
                c["change"], cell_label(c, fields), rate_text(c["a"]), rate_text(c["b"]), p_text(c["p_value"]))),
                statuses_text(c, links=True)]) + " |")
    else:
        lines.append("No cell changed its pass rate.")
    lines += ["", "## Rows", "",
              "| " + " | ".join([*fields, "coverage A → B", "passed A → B", "strict A → B",
                               "strict B − A [95%]", "overall B − A [95%]", "regressed", "improved", "tokens/case",
                               "cost/case", "agent s/case", "model build"]) + " |",
              "|" + "---|" * (len(fields) + 11)]
    for r in data["rows"]:
        lines.append("| " + " | ".join(_md(v) for v in (
            *(r[f] for f in fields), f"{r['coverage']['a']} → {r['coverage']['b']}",
            f"{pass_text(r['pass']['a'])} → {pass_text(r['pass']['b'])}",
            f"{score_text(r['strict']['a'])} → {score_text(r['strict']['b'])}", diff_text(r["strict"]),
            diff_text(r["overall"]), r["regressed"], r["improved"],
            delta_text(r["per_case"]["total_tokens"]), delta_text(r["per_case"]["cost"], digits=4),
            delta_text(r["per_case"]["agent_s"], digits=2),
            build_cell_text(r, markdown=True))) + " |")
    lines += ["", "## Usage", ""]
    for r in data["rows"]:
        name = " · ".join(str(r[f]) for f in fields)
        lines += [f"- {_md(name)}: A {_md(usage_text(r['usage']['a']))}; B {_md(usage_text(r['usage']['b']))}"]
    if data["unpaired"]["a"] or data["unpaired"]["b"]:
        lines += ["", f"Cells in one side only: A {len(data['unpaired']['a'])}, B {len(data['unpaired']['b'])} "
                      "(not compared; see compare.json)"]
    return "\n".join(lines) + "\n"


def _narrow_md(side: dict[str, Any]) -> str:
    parts = [f"agent {side['agent']}"] * bool(side.get("agent")) + [f"model {side['model']}"] * bool(side.get("model"))
    return f", {' and '.join(parts)}" if parts else ""


# ---------------------------------------------------------------------------------------------- writing

def check_output(output: Path, run_dirs: Iterable[Path]) -> Path:
    """The resolved output folder, or :class:`UserError` when it is inside a run or holds files this
    command did not write."""
    out = output.resolve()
    if out.exists() and not out.is_dir():
        raise UserError(f"--output {output} is a file; pass a folder (it is created if missing)")
    for run_dir in run_dirs:
        r = run_dir.resolve()
        if out == r or r in out.parents or (r.parent.name == "runs" and (out == r.parent or r.parent in out.parents)):
            raise UserError(f"--output {output} is inside the runs being compared; pass a folder outside "
                            f"{r.parent}")
    present = [n for n in OUTPUT_FILES if (out / n).exists() or (out / n).is_symlink()]
    if present and json_kind(out / "compare.json") != KIND:
        raise UserError(f"--output {output} already holds {', '.join(present)} not written by compare; pass an "
                        f"empty or new folder")
    return out


def write_compare(data: dict[str, Any], out: Path) -> list[Path]:
    """``compare.json`` (first: it marks the folder as ours), ``compare.md`` and ``compare.html``."""
    from .html import render_compare_html

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in OUTPUT_FILES]
    atomic_write_json(paths[0], data)
    atomic_write_text(paths[1], render_compare_md(data))
    atomic_write_text(paths[2], render_compare_html(data))
    return paths

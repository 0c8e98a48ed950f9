"""The report pages fit a 1400 px window (real Chromium, real runs of the reference agent against the oracle).

* the case page's cards never reach into each other (no card's content outside its box, none over another
  card's label), also with an interaction card and long reason codes;
* the summary's cases table is no wider than the window with long ids (a long agent and model name, a
  PASS_WITH_POLICY_VIOLATION badge);
* a phase's sandbox command is one line until opened;
* the aggregate shows pass@k and pass^k of six trials in at most two lines per cell.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from browser.chromium_fixtures import browser  # noqa: F401  (pytest fixture)
from conftest import gripprobe
from gripprobe_core.models import CaseResult
from gripprobe_core.reports import write_run_reports
from gripprobe_core.store import RunFolder

pytestmark = pytest.mark.e2e
WIDTH = 1400
LONG = {"agent": "mini-swe-agent", "model": "ollama-qwen3-coder-30b-a3b-instruct", "backend": "ollama",
        "test": "web_search_json_ranked"}

# Every element of a card must lie inside the card, and none may cover a label (dt) of another card.
CARD_PROBLEMS = """() => {
  const cards = [...document.querySelectorAll('.cards > .card')];
  const out = [];
  cards.forEach((card, i) => {
    const box = card.getBoundingClientRect();
    for (const el of card.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      if (r.right > box.right + 0.5 || r.left < box.left - 0.5)
        out.push(`card ${i}: ${el.tagName} "${el.textContent.trim().slice(0, 30)}" spans ${Math.round(r.left)}..` +
                 `${Math.round(r.right)}, the card ${Math.round(box.left)}..${Math.round(box.right)}`);
      cards.forEach((other, j) => {
        if (j === i) return;
        for (const dt of other.querySelectorAll('dt')) {
          const d = dt.getBoundingClientRect();
          if (r.left < d.right && d.left < r.right && r.top < d.bottom && d.top < r.bottom)
            out.push(`card ${i}'s ${el.tagName} covers card ${j}'s label "${dt.textContent.trim()}"`);
        }
      });
    }
  });
  return [cards.length, out];
}"""
LINES = """el => {  // how many lines of text an element shows (its text nodes' line boxes, tops 4 px apart)
  const tops = [], walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const r = document.createRange(); r.selectNodeContents(n);
    for (const x of r.getClientRects()) if (x.width > 0 && !tops.some(t => Math.abs(t - x.top) < 4)) tops.push(x.top);
  }
  return tops.length; }"""


def _run(results: Path, *args: str) -> RunFolder:
    res = gripprobe("run", "-a", "reference", "--jobs", "3", "--results", str(results), *args)
    assert res.returncode == 0, res.stderr[-3000:]
    return RunFolder(Path(res.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory) -> RunFolder:
    """Real cases with the widest facts the oracle gives (an interaction card, backend_tool_unsupported,
    no_tool_event_observed), plus one copied with the longest ids a real matrix has."""
    run = _run(tmp_path_factory.mktemp("layout"), "-m", "oracle-perfect", "-m", "oracle-deny-then-recover",
               "-m", "oracle-tools-unsupported", "-t", "save_file_denied", "-t", "web_search_json_ranked")
    src = run.case("reference__oracle-tools-unsupported__oracle__tool__save_file_denied")
    dst = run.case("__".join((LONG["agent"], LONG["model"], LONG["backend"], "tool", LONG["test"])))
    shutil.copytree(src, dst)
    r = CaseResult.model_validate_json((src / "case.json").read_bytes())
    verdict = r.verdict.model_copy(update={"status": "PASS_WITH_POLICY_VIOLATION", "overall_score": 0.8})
    (dst / "case.json").write_text(r.model_copy(update={
        "case_id": dst.name, "key": r.key.model_copy(update=LONG), "verdict": verdict}).model_dump_json())
    write_run_reports(run)
    return run


@pytest.fixture
def wide_page(browser):  # noqa: F811
    ctx = browser.new_context(viewport={"width": WIDTH, "height": 900}, offline=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    ctx.close()
    assert not errors, errors


def test_case_page_cards_never_cover_each_other(wide_page, wide_run):
    pages = sorted((wide_run.reports / "cases").glob("*.html"))
    assert len(pages) == 7
    seen_interaction = False
    for path in pages:
        wide_page.goto(path.resolve().as_uri())
        count, problems = wide_page.evaluate(CARD_PROBLEMS)
        assert count >= 4 and problems == [], (path.name, problems[:5])
        seen_interaction |= wide_page.locator("#interaction").count() == 1
    assert seen_interaction  # five cards in a row: the narrowest they get


def test_summary_cases_table_fits_the_window(wide_page, wide_run):
    wide_page.goto((wide_run.reports / "summary.html").resolve().as_uri())
    table = wide_page.locator("#cases")
    assert table.locator("tbody tr", has_text=LONG["model"]).count() == 1
    sizes = wide_page.evaluate("""() => { const t = document.getElementById('cases'), d = document.documentElement;
        return {table: t.scrollWidth, box: t.parentElement.clientWidth, right: t.getBoundingClientRect().right,
                page: d.scrollWidth, window: d.clientWidth}; }""")
    assert sizes["table"] <= sizes["box"] and sizes["right"] <= sizes["window"], sizes
    assert sizes["page"] <= sizes["window"], sizes
    # the ids wrap at their separators, their text unchanged
    assert LONG["model"] in table.inner_text() and "PASS_WITH_POLICY_VIOLATION" in table.inner_text()


def test_a_phase_command_is_one_line_until_opened(wide_page, wide_run):
    from playwright.sync_api import expect

    wide_page.goto((wide_run.reports / "cases" / "reference__oracle-perfect__oracle__tool__save_file_denied.html")
                   .resolve().as_uri())
    details = wide_page.locator("#phase-measured details.command")
    summary, full = details.locator("summary"), details.locator("pre.command")
    assert re.fullmatch(r"bwrap … gripprobe-refagent \(\d+ args\) show all", summary.inner_text().strip())
    expect(full).to_be_hidden()
    assert wide_page.eval_on_selector("#phase-measured details.command", LINES) == 1
    summary.click()
    expect(full).to_be_visible()
    text = full.inner_text()
    assert text.startswith("/usr/bin/bwrap --unshare-all") and "gripprobe-refagent" in text
    assert wide_page.eval_on_selector("#phase-measured details.command pre", LINES) >= 10


def test_aggregate_pass_at_k_of_six_trials_takes_two_lines(wide_page, tmp_path):
    results = tmp_path / "results"
    _run(results, "-m", "oracle-flaky", "-t", "save_file", "--trials", "6")
    res = gripprobe("aggregate-reports", "--runs-root", str(results), "--output", str(tmp_path / "pub"))
    assert res.returncode == 0, res.stderr
    wide_page.goto((tmp_path / "pub" / "index.html").resolve().as_uri())
    row = wide_page.locator("#groups tbody tr", has_text="oracle-flaky")
    cell = row.locator("td.ks-cell")
    lines = [x.strip() for x in cell.locator(".ks").all_inner_texts()]
    assert re.fullmatch(r"pass@1 \d\.\d\d · pass@6 \d\.\d\d", lines[0]) and re.fullmatch(r"pass\^6 \d\.\d\d", lines[1])
    assert cell.evaluate(LINES) <= 3  # pass@, pass^ and the flaky mark
    assert "pass@3" in cell.locator(".ks").first.get_attribute("title")  # every k on hover
    test_cell = row.locator("td.cell .full-cell")
    if test_cell.is_visible():  # the full layout: the same two lines in the test's cell
        assert len(test_cell.locator(".ks").all()) == 2

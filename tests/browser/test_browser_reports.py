"""The HTML reports in a real Chromium (Playwright, file:// URLs, no network).

Skipped only outside CI when Playwright or Chromium is missing; with CI=true a missing browser fails.
Chromium is Debian's (``./dev setup`` installs it); Playwright's own browser downloads are not used.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from browser.chromium_fixtures import browser, page  # noqa: F401  (pytest fixtures)
from browser.reportdata import (HOSTILE, LAZY, PERFECT, aggregate_data, derive_case, many_events, real_run,
                                wide_aggregate_data)
from gripprobe_core.reports import render_aggregate_html, write_run_reports
from gripprobe_core.reports.summary_md import COLUMNS
from gripprobe_core.store import RunFolder

HIGHLIGHTED = re.compile(r"(^|\s)highlight(\s|$)")
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunFolder:
    """The real default suite, plus derived cases: another agent, a policy violation, hostile output
    and 10,000 events; then the reports are rebuilt from disk."""
    r = real_run(tmp_path_factory.mktemp("results"))
    derive_case(r, PERFECT, "other__pwpv", agent="other", status="PASS_WITH_POLICY_VIOLATION", tags=["extra"])
    derive_case(r, PERFECT, "evil__case", agent="evil", text=HOSTILE)
    derive_case(r, LAZY, "huge__case", agent="other", events=many_events(10_000))
    derive_case(r, PERFECT, "diff__case", agent="diff",
                values=("Hello, GripProbe!\n<b>kept</b>\n", "Hello, Gripprobe!\n<b>kept</b>"))
    write_run_reports(r)
    return r


def _url(path: Path, fragment: str = "") -> str:
    return path.resolve().as_uri() + fragment


def _visible_rows(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#cases tbody tr", "rows => rows.filter(r => !r.hidden).map(r => [...r.cells].map(c => c.textContent.trim()))")


def test_summary_filters_and_sorts(page, run):
    from playwright.sync_api import expect

    page.goto(_url(run.reports / "summary.html"))
    total = len(_visible_rows(page))
    status_col, agent_col, case_s = (COLUMNS.index(c) for c in ("status", "agent", "case s"))
    page.select_option("#filter-status", "NO_TOOL_CALL")
    rows = _visible_rows(page)
    assert rows and len(rows) < total and all(r[status_col] == "NO_TOOL_CALL" for r in rows)
    expect(page.locator("#cases tbody tr", has_text="PASS_WITH_POLICY_VIOLATION")).to_be_hidden()

    page.select_option("#filter-status", "")
    page.select_option("#filter-agent", "other")
    rows = _visible_rows(page)
    assert sorted(r[agent_col] for r in rows) == ["other", "other"]
    page.select_option("#filter-tag", "extra")
    assert [r[status_col] for r in _visible_rows(page)] == ["PASS_WITH_POLICY_VIOLATION"]
    page.select_option("#filter-agent", "")
    page.select_option("#filter-tag", "")
    assert len(_visible_rows(page)) == total

    header = page.locator("#cases th", has_text="case s")
    header.click()
    values = [float(r[case_s]) for r in _visible_rows(page)]
    assert values == sorted(values)
    expect(header).to_have_attribute("aria-sort", "ascending")
    header.click()
    values = [float(r[case_s]) for r in _visible_rows(page)]
    assert values == sorted(values, reverse=True)


def test_policy_violation_badge_is_apart_from_pass(page, run):
    page.goto(_url(run.reports / "summary.html"))
    style = "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).borderStyle, e.textContent]"
    passed = page.eval_on_selector("#cases .badge.st-PASS", style)
    pwpv = page.eval_on_selector("#cases .badge.st-PASS_WITH_POLICY_VIOLATION", style)
    assert passed[0] != pwpv[0] and passed[1] != pwpv[1] and passed[2] != pwpv[2]


def test_view_in_timeline_scrolls_to_and_highlights_the_event(page, run):
    from playwright.sync_api import expect

    page.goto(_url(run.reports / "cases" / f"{PERFECT}.html"))
    link = page.locator("a.tl-link").first
    target = link.get_attribute("href")
    assert target.startswith("#event-measured-")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    link.click()
    event = page.locator(target)
    expect(event).to_have_class(HIGHLIGHTED)
    expect(event).to_be_in_viewport()
    assert page.evaluate("location.hash") == target
    # no link where the validator has no source pointer
    page.goto(_url(run.reports / "cases" / f"{LAZY}.html"))
    expect(page.locator("a.tl-link")).to_have_count(0)
    expect(page.locator("table.validators")).to_contain_text("no single originating event")


def test_agent_output_is_inert_text(page, run):
    from playwright.sync_api import expect

    page.goto(_url(run.reports / "cases" / "evil__case.html"))
    page.locator("#timeline-measured .ev-arguments").first.wait_for()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("b").count() == 0
    body = page.inner_text("body")
    assert body.count(HOSTILE) >= 5  # prompt, stdout and stderr of both phases, validator, tool arguments
    expect(page.locator("#timeline-measured .ev-arguments").first).to_contain_text(HOSTILE)


def test_expected_and_observed_show_where_they_differ(page, run):
    """The changed word is struck out (red) in expected and inserted (green) in observed, the missing final
    newline shows as ↵; everything else is plain text, markup included."""
    page.goto(_url(run.reports / "cases" / "diff__case.html"))
    row = page.locator("#validator-1")
    marks = row.locator("pre.marked del, pre.marked ins")
    got = marks.evaluate_all("""els => els.map(e => [e.tagName, e.textContent, getComputedStyle(e).backgroundColor,
                                                   getComputedStyle(e, '::before').content])""")
    assert [(tag, text) for tag, text, _, _ in got] == [("DEL", "GripProbe"), ("DEL", "\n"), ("INS", "Gripprobe")]
    colours = {tag: bg for tag, _, bg, _ in got}
    assert colours["DEL"] != colours["INS"] and "rgba(0, 0, 0, 0)" not in colours.values()
    assert got[1][3] == '"\u21b5"' or got[1][3] == '"↵"'
    assert row.locator("b").count() == 0 and "<b>kept</b>" in row.inner_text()
    assert "differs from line 1, column 12" in row.inner_text()
    udiff = page.locator("pre.udiff")
    assert udiff.locator("del").first.inner_text().startswith("-Hello, GripProbe!")
    assert udiff.locator("ins").first.inner_text().startswith("+Hello, Gripprobe!")


def test_ten_thousand_events_render_lazily(page, run):
    from playwright.sync_api import expect

    url = _url(run.reports / "cases" / "huge__case.html")
    t0 = time.monotonic()
    page.goto(url)
    loaded = time.monotonic() - t0
    assert loaded < 10, f"page load took {loaded:.1f}s"
    drawn = page.locator("#timeline-measured li.ev").count()
    assert 0 < drawn < 1000, drawn  # lazily: one chunk, not 10,000 elements

    box = page.locator("#timeline-measured .timeline-scroll")
    events = page.locator("#timeline-measured li.ev")
    for _ in range(3):  # each scroll to the bottom of the timeline draws more
        before = events.count()
        box.evaluate("b => { b.scrollTop = b.scrollHeight; }")
        expect(events).not_to_have_count(before)
        assert events.count() > before
    assert events.count() < 10_000


def test_jump_to_the_last_of_ten_thousand_events(page, run):
    from playwright.sync_api import expect

    t0 = time.monotonic()
    page.goto(_url(run.reports / "cases" / "huge__case.html", "#event-measured-9999"))
    event = page.locator("#event-measured-9999")
    expect(event).to_have_class(HIGHLIGHTED)
    expect(event).to_be_in_viewport()
    assert time.monotonic() - t0 < 10
    assert page.locator("li.ev.highlight").count() == 1
    # tool events sit inside the list of the model response that spawned them
    parent = page.locator("#event-measured-9998").evaluate("e => e.parentElement.closest('li.ev').id")
    assert parent == "event-measured-9996"
    # everything is drawn now: the bottom of the timeline is its end
    page.locator("#timeline-measured .timeline-scroll").evaluate("b => { b.scrollTop = b.scrollHeight; }")
    end = page.locator("#timeline-measured .sentinel")
    expect(end).to_have_text("end of measured timeline")
    expect(end).to_be_in_viewport()
    assert page.locator("#timeline-measured li.ev").count() == 10_000


def test_aggregate_page_filters_and_keeps_policy_violations_apart(page, tmp_path):
    from playwright.sync_api import expect

    path = tmp_path / "aggregate.html"
    path.write_text(render_aggregate_html(aggregate_data()), encoding="utf-8")
    page.goto(_url(path))
    rows = page.locator("#groups tbody tr")
    expect(rows).to_have_count(2)
    page.select_option("#filter-agent", "beta")
    expect(rows.nth(0)).to_be_hidden()
    expect(rows.nth(1)).to_be_visible()
    pwpv = rows.nth(1).locator(".badge.st-PASS_WITH_POLICY_VIOLATION").first
    expect(pwpv).to_contain_text("PASS+PV 4")
    page.select_option("#filter-agent", "")
    page.select_option("#filter-hardware", "gpu-a")
    expect(rows.nth(0)).to_be_visible()
    expect(rows.nth(1)).to_be_hidden()
    page.select_option("#filter-hardware", "")
    page.locator("#groups th", has_text="overall").click()
    page.locator("#groups th", has_text="overall").click()  # descending
    expect(rows.nth(0)).to_contain_text("alpha")
    pass_bg = page.eval_on_selector(".legend .st-PASS", "e => getComputedStyle(e).backgroundColor")
    pwpv_bg = page.eval_on_selector(".legend .st-PASS_WITH_POLICY_VIOLATION", "e => getComputedStyle(e).backgroundColor")
    assert pass_bg != pwpv_bg


_SCROLL = """() => { const doc = document.documentElement, wrap = document.querySelector('.agg-wrap');
  return {page: [doc.scrollWidth, doc.clientWidth], table: [wrap.scrollWidth, wrap.clientWidth],
          layout: document.getElementById('agg-box').className}; }"""


@pytest.mark.parametrize("width", [1400, 1920])
def test_the_aggregate_page_fits_the_window_without_scrolling_sideways(browser, tmp_path, width):
    """Every shipped test × 18 groups at 1400 px: neither the page nor the table scrolls sideways. The page
    keeps the full cells when they fit (a small aggregate), else switches to the compact layout: score, a
    status bar (a policy violation apart from PASS), n, the details in the cell's title, vertical test names,
    and a format or hardware that every group shares said once above the table."""
    from playwright.sync_api import expect

    ctx = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    try:
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        wide, small = tmp_path / "wide.html", tmp_path / "small.html"
        wide.write_text(render_aggregate_html(wide_aggregate_data()), encoding="utf-8")
        small.write_text(render_aggregate_html(aggregate_data()), encoding="utf-8")
        page.goto(_url(wide))
        got = page.evaluate(_SCROLL)
        assert got["page"][0] <= got["page"][1] and got["table"][0] <= got["table"][1], got
        assert got["layout"] == "agg-box compact"
        expect(page.locator("#same-for-all")).to_be_visible()
        expect(page.locator("#same-for-all")).to_contain_text("format tool · hardware workstation-rtx4090")
        expect(page.locator("#groups th", has_text="hardware")).to_be_hidden()
        cell = page.locator("#groups tbody tr").first.locator("td.cell").first
        expect(cell.locator(".compact-cell")).to_be_visible()
        expect(cell.locator(".full-cell")).to_be_hidden()
        assert cell.get_attribute("title").startswith("json_rank_from_file: n=3 · ")
        style = "e => getComputedStyle(e).backgroundImage + getComputedStyle(e).backgroundColor"
        assert page.locator("#groups .bar .seg").first.evaluate("e => e.getBoundingClientRect().width") > 0
        pass_bg = page.eval_on_selector("#groups .bar .seg.st-PASS", style)
        pwpv_bg = page.eval_on_selector("#groups .bar .seg.st-PASS_WITH_POLICY_VIOLATION", style)
        assert pass_bg != pwpv_bg
        # sorting still works in the compact layout
        page.locator("#groups th[title^=\"save_file:\"]").click()
        values = page.eval_on_selector_all(
            "#groups tbody tr", "rows => rows.map(r => r.cells[r.cells.length - 1].getAttribute('data-sort'))")
        assert values and all(v is not None for v in values)
        # a small aggregate keeps its full cells, and fits too
        page.goto(_url(small))
        got = page.evaluate(_SCROLL)
        assert got["page"][0] <= got["page"][1] and got["table"][0] <= got["table"][1], got
        assert got["layout"] == "agg-box"
        expect(page.locator("#groups td.cell .full-cell").first).to_be_visible()
        expect(page.locator("#same-for-all")).to_be_hidden()  # only the compact layout says it
        assert not errors, errors
    finally:
        ctx.close()


def test_the_aggregate_layout_follows_the_window(browser, tmp_path):
    """Narrow the window: the full cells give way to the compact ones; widen it again: back."""
    from playwright.sync_api import expect

    ctx = browser.new_context(viewport={"width": 1920, "height": 900}, offline=True)
    try:
        page = ctx.new_page()
        path = tmp_path / "small.html"
        data = aggregate_data()
        data["tests"] = data["tests"] + ["patch_file", "shell_date"]  # four tests: full at 1920, not at 900
        path.write_text(render_aggregate_html(data), encoding="utf-8")
        page.goto(_url(path))
        assert page.evaluate(_SCROLL)["layout"] == "agg-box"
        page.set_viewport_size({"width": 900, "height": 900})
        expect(page.locator("#agg-box")).to_have_class("agg-box compact")
        page.set_viewport_size({"width": 1920, "height": 900})
        expect(page.locator("#agg-box")).to_have_class("agg-box")
    finally:
        ctx.close()

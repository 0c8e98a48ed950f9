"""The compare page and a multi-trial run summary, opened offline in a real Chromium.

Two real runs of the reference agent (oracle-perfect and oracle-flaky × save_file, two trials each); in the
second, oracle-perfect's profile is swapped to lazy, so one cell regresses."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.chromium_fixtures import browser, page  # noqa: F401  (pytest fixtures)
from conftest import SPECS, gripprobe, planted_specs

pytestmark = pytest.mark.e2e


def _run(results: Path, specs: Path) -> Path:
    res = gripprobe("run", "--specs", str(specs), "-a", "reference", "-m", "oracle-perfect", "-m", "oracle-flaky",
                    "-t", "save_file", "--trials", "2", "--results", str(results))
    assert res.returncode == 0, res.stderr[-2000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cmp")
    planted = planted_specs(base / "specs")
    a, b = _run(base / "a", SPECS), _run(base / "b", planted)
    res = gripprobe("compare", str(a), str(b), "--output", str(base / "out"))
    assert res.returncode == 0, res.stderr
    return base / "out" / "compare.html", a


def test_compare_page_opens_offline_with_the_regression_first(page, compared):
    from playwright.sync_api import expect

    html, _ = compared
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.as_uri())
    first = page.locator("#flips tbody tr").first
    expect(first).to_contain_text("regressed")
    expect(first).to_contain_text("oracle-perfect")
    expect(first.locator(".badge.st-NO_TOOL_CALL")).to_have_count(2)
    expect(page.locator("#n-regressed")).to_have_text("1")
    assert requests == [html.as_uri()], requests


def test_a_two_trial_summary_marks_the_flaky_cell(page, compared):
    from playwright.sync_api import expect

    _, run_a = compared
    page.goto((run_a / "reports" / "summary.html").as_uri())
    flaky_row = page.locator("#scores tbody tr", has_text="oracle-flaky")
    expect(flaky_row.locator(".mark-flaky")).to_have_text("save_file")
    expect(flaky_row).to_contain_text("^2 0.00")
    expect(page.locator("#cells td.cell .mark-flaky")).to_have_count(1)


def test_compare_page_shows_both_sides_and_links_every_trial_to_its_case_page(page, compared):
    from playwright.sync_api import expect

    html, run_a = compared
    page.goto(html.as_uri())
    expect(page.locator("#pass-a")).to_have_text("3/4")  # oracle-perfect 2/2, oracle-flaky 1/2 (its trials disagree)
    expect(page.locator("#pass-b")).to_have_text("1/4")  # oracle-perfect swapped to lazy: 0/2
    row = page.locator("#rows tbody tr", has_text="oracle-perfect").first
    expect(row.locator("td.passed")).to_have_text("2/2 → 0/2")
    links = page.locator("#cells a.trial")
    assert links.count() == 8  # 2 cells × 2 trials × 2 sides
    targets = links.evaluate_all("as => as.map(a => a.href)")
    assert all(t.startswith("file://") and Path(t.removeprefix("file://")).is_file() for t in targets), targets
    first = page.locator("#flips tbody tr").first.locator("a.trial").first
    case = first.get_attribute("title").split("/", 1)[1]
    first.click()
    expect(page.locator("h1")).to_have_text(case)
    assert page.url == (run_a / "reports" / "cases" / f"{case}.html").resolve().as_uri()

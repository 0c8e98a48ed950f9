"""The aggregate of two real runs, as published: opened offline in a real Chromium.

Two real runs of the reference agent against the oracle (perfect and lazy × save_file and a test
whose file is already in place, so the lazy profile earns a real PASS_WITH_POLICY_VIOLATION), then
the real `gripprobe aggregate-reports` command, then the page from file:// with the network off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.chromium_fixtures import browser, page  # noqa: F401  (pytest fixtures)
from conftest import gripprobe, read_json
from test_aggregate import two_real_runs

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("publish")
    results = two_real_runs(base)
    out = base / "pub"
    res = gripprobe("aggregate-reports", "--runs-root", str(results), "--output", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_aggregate_of_two_real_runs_opens_offline_with_policy_violations_apart(page, published):
    from playwright.sync_api import expect

    data = read_json(published / "aggregate.json")
    assert len(data["runs"]) == 2
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto((published / "index.html").as_uri())
    rows = page.locator("#groups tbody tr")
    expect(rows).to_have_count(len(data["rows"]))
    lazy = page.locator("#groups tbody tr", has_text="oracle-lazy")
    perfect = page.locator("#groups tbody tr", has_text="oracle-perfect")
    # lazy: the already-done test passes its validators with no tool call -> PASS_WITH_POLICY_VIOLATION
    # in both runs (the row's counts say 2; the already_done cell says so too)
    expect(lazy.locator("div.counts .badge.st-PASS_WITH_POLICY_VIOLATION").first).to_contain_text("2")
    expect(lazy.locator("td.cell .badge.st-PASS_WITH_POLICY_VIOLATION")).to_have_count(1)
    expect(lazy.locator(".badge.st-PASS")).to_have_count(0)
    # perfect: real PASSes (2 tests x 2 runs), shown with the PASS badge and never as a policy violation
    expect(perfect.locator("div.counts .badge.st-PASS").first).to_contain_text("4")
    expect(perfect.locator(".badge.st-PASS_WITH_POLICY_VIOLATION")).to_have_count(0)
    pass_bg = page.eval_on_selector(".badge.st-PASS", "e => getComputedStyle(e).backgroundColor")
    pwpv_bg = page.eval_on_selector(".badge.st-PASS_WITH_POLICY_VIOLATION", "e => getComputedStyle(e).backgroundColor")
    assert pass_bg != pwpv_bg
    # offline and self-contained: the page asked for nothing but itself
    assert requests == [(published / "index.html").as_uri()], requests

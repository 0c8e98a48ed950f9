"""`gripprobe view` in a real Chromium, on a real run while it runs.

The view serves an empty results folder; a real `gripprobe run` of the reference agent starts (oracle-slow-stream
first, whose case takes seconds, then oracle-perfect). The index shows the run appear without a reload; its
summary, opened while no case has landed, shows each case row appear, the progress and counts move and the
state turn `complete`, all without a reload (a mark set on the page's window survives)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser.chromium_fixtures import browser  # noqa: F401  (pytest fixture)
from conftest import ROOT, SPECS
from gripprobe_core.view import ViewConfig, serve_in_thread

pytestmark = pytest.mark.e2e

SLOW = "reference__oracle-slow-stream__oracle__tool__save_file"
PERFECT = "reference__oracle-perfect__oracle__tool__save_file"


@pytest.fixture
def live_page(browser):  # noqa: F811
    """A page that may reach 127.0.0.1 (the view's server) and nothing else: every other request is aborted."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    outside: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def only_local(route):
        if route.request.url.startswith("http://127.0.0.1:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()
    page.route("**/*", only_local)
    yield page
    ctx.close()
    assert not errors, errors
    assert not outside, outside


def test_cases_appear_in_a_running_run_without_a_reload(live_page, tmp_path):
    from playwright.sync_api import expect

    page = live_page
    (tmp_path / "runs").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    env["GRIPPROBE_SPECS"] = str(SPECS)
    with serve_in_thread(ViewConfig(tmp_path, interval_s=0.25)) as url:
        page.goto(url)
        expect(page.locator("#no-runs")).to_be_visible()
        page.evaluate("window.__sameDocument = 1")
        run = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "run", "-a", "reference",
                                "-m", "oracle-slow-stream", "-m", "oracle-perfect", "-t", "save_file", "--jobs", "1",
                                "--results", str(tmp_path)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            # the run appears in the index, running, with nothing done yet
            row = page.locator("#runs tbody tr")
            expect(row).to_have_count(1, timeout=30_000)
            assert page.evaluate("window.__sameDocument") == 1
            expect(row.locator(".run-state")).to_have_text("running")
            row.locator("td a").first.click()

            # its summary, while the slow case is under way: no row yet, 0 of 2
            page.wait_for_url("**/summary.html")
            expect(page.locator("#live-bar .run-state")).to_have_text("running")
            started = page.locator("#cases tbody tr").count()
            assert started < 2, "the run ended before its page opened: nothing was seen live"
            page.evaluate("window.__sameDocument = 2")
            page.select_option("#filter-status", "")  # a filter chosen before the rows arrive stays chosen

            # the slow case's row arrives (alone, or with the second when both land between two polls on a
            # loaded machine: CI saw 0 then 2), in the same document
            expect(page.locator(f'#cases a[href="cases/{SLOW}.html"]')).to_have_count(1, timeout=30_000)
            if page.locator("#cases tbody tr").count() == 1:
                expect(page.locator("#live-done")).to_have_text(re.compile(r"^[12] / 2 done$"))
            expect(page.locator("#cases tbody tr").first.locator(".badge")).to_have_text("PASS")

            expect(page.locator("#cases tbody tr")).to_have_count(2, timeout=30_000)
            expect(page.locator(f'#cases a[href="cases/{PERFECT}.html"]')).to_have_count(1)
            expect(page.locator("#live-bar .run-state")).to_have_text("complete", timeout=30_000)
            expect(page.locator("#live-done")).to_have_text("2 / 2 done")
            expect(page.locator("#live-counts")).to_contain_text("PASS 2")
            assert page.evaluate("window.__sameDocument") == 2  # never reloaded
            assert run.wait(timeout=60) == 0, run.stderr.read()[-2000:]

            # the table's own script still works on the rows that arrived: sort, then filter
            page.locator('#cases th[data-col="model"]').click()
            first = page.locator("#cases tbody tr").first.locator("td").nth(1)
            expect(first).to_have_text("oracle-perfect")
            page.select_option("#filter-model", "oracle-slow-stream")
            expect(page.locator("#cases tbody tr:visible")).to_have_count(1)

            # a case page from the view, and back
            page.locator(f'#cases a[href="cases/{SLOW}.html"]').click()
            expect(page.locator("h1")).to_have_text(SLOW)
            page.locator('a[href="../summary.html"]').click()
            expect(page.locator("#live-bar .run-state")).to_have_text("complete")
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()


def test_the_page_says_when_the_server_is_gone(live_page, tmp_path):
    from playwright.sync_api import expect

    (tmp_path / "runs").mkdir()
    with serve_in_thread(ViewConfig(tmp_path, interval_s=0.2)) as url:
        live_page.goto(url)
        expect(live_page.locator("#live-conn")).to_have_text("live")
    t0 = time.monotonic()
    expect(live_page.locator("#live-conn")).to_contain_text("not connected", timeout=10_000)
    assert time.monotonic() - t0 < 10

"""Fixtures for the browser tests (imported by each test module): Debian's Chromium driven by Playwright, offline.

Skipped only outside CI when Playwright or Chromium is missing; with CI=true a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for cand in (os.environ.get("GRIPPROBE_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and Path(cand).is_file():
            return cand
    return None


@pytest.fixture(scope="module")
def browser():
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed: pip install -e '.[test]'"
    exe = _chromium()
    if missing is None and exe is None:
        missing = "chromium is not installed: run ./dev setup (apt-get install chromium)"
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run in CI: {missing}", pytrace=False)
        pytest.skip(missing)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    p = ctx.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    ctx.close()
    assert not errors, errors



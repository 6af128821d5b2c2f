"""The Chromium fixtures of the report and viewer tests (Debian's /usr/bin/chromium, Playwright):
`browser`, one per module, and `page`, a fresh context per test that records every URL it asked
for (`page.requests`) and every script error (`page.errors`). tests/conftest.py registers them."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LOADED_MS = 120_000  # Playwright's timeouts (launch, each action): bounds, not waits


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (scripts/setup.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Bounds for a loaded 2-core machine, not expectations: Playwright's own 30 s was once too short for
        # Chromium's start beside a 4-worker suite.
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, timeout=LOADED_MS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(LOADED_MS)
    pg = ctx.new_page()
    pg.requests = []  # every URL the page asked for
    pg.errors = []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()

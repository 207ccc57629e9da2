"""Debian's Chromium driven by Playwright, for the admin's browser tests.

``apt-get install chromium`` provides the browser; Playwright downloads nothing. Outside CI a
missing Chromium skips the test; in CI it fails it.
"""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@contextmanager
def chromium() -> Iterator:
    """Yield a headless Playwright ``Browser`` running Debian's Chromium; close it after."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("Chromium is missing; .ci/run installs Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield with_default_timeout(browser, PAGE_TIMEOUT_MS)
        finally:
            browser.close()


#: How long a page waits for an element, a navigation or a response (Playwright's default is
#: 30 s): a busy machine serves the live server slowly, and a passing test never waits it out.
PAGE_TIMEOUT_MS = 60_000


def with_default_timeout(browser, milliseconds: int):
    """Make every context (and page) ``browser`` opens wait ``milliseconds`` by default."""
    new_context, new_page = browser.new_context, browser.new_page

    def context_with_timeout(**options):
        context = new_context(**options)
        context.set_default_timeout(milliseconds)
        return context

    def page_with_timeout(**options):
        page = new_page(**options)
        page.set_default_timeout(milliseconds)
        return page

    browser.new_context = context_with_timeout
    browser.new_page = page_with_timeout
    return browser


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as ``test-artifacts/<name>.png`` and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def signed_in(browser, live_server, username: str, password: str = "pw", **context):
    """Return a page in a new browser context (its own cookies) signed in as ``username``.

    ``context`` goes to Playwright's ``new_context`` (``timezone_id``, ``color_scheme``, a
    ``viewport`` other than 1280 x 900).
    """
    context.setdefault("viewport", {"width": 1280, "height": 900})
    page = browser.new_context(**context).new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page

"""Playwright driving Debian's Chromium. Without a browser these tests skip, unless
REQUIRE_BROWSER=1 (as in CI), where a missing browser is a failure."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # A document a test answers itself (route.fulfill) has no address space; Chromium's local
    # network checks would then refuse its connections back to the test server on 127.0.0.1.
    "--disable-features=LocalNetworkAccessChecks",
]


def _chromium_path() -> str | None:
    configured = os.environ.get("CHROMIUM_PATH")
    if configured:
        return configured
    return next((p for p in CHROMIUM_CANDIDATES if shutil.which(p)), None)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    path = _chromium_path()
    required = os.environ.get("REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        if required:
            pytest.fail("playwright is not installed but REQUIRE_BROWSER=1")
        pytest.skip("playwright is not installed")
    if path is None:
        if required:
            pytest.fail("no Chromium found (apt-get install chromium) but REQUIRE_BROWSER=1")
        pytest.skip("no Chromium found; apt-get install chromium to run browser tests")
    # Playwright's sync API keeps an event loop running in this thread while it is open; the ORM
    # calls that tests make between browser steps are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    # plotly.js is a large script; give assertions room on a loaded 2-core machine.
    expect.set_options(timeout=15_000)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()

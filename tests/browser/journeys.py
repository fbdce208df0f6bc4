"""Steps the browser journeys share: signing in and out, running server work off the
Playwright thread, and screenshots for the README."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import Page, expect

from tests.factories import PASSWORD

T = TypeVar("T")


def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on another thread. Playwright's sync API owns this thread's event loop; ticks
    publish to the channel layer, so they run elsewhere, as they would in the Celery worker."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def log_in(page: Page, base: str, username: str) -> None:
    """Sign in from the login page and land on the dashboard."""
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def log_in_to(page: Page, base: str, username: str, next_path: str) -> None:
    """Open `next_path`, sign in on the login page it leads to, and land back on it."""
    page.goto(f"{base}{next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form[action='/login/'] button[type=submit]")
    expect(page).to_have_url(f"{base}{next_path}")


def log_out(page: Page) -> None:
    page.click("form.logout button[type=submit]")
    expect(page.locator("#id_username")).to_be_visible()


def screenshot(page: Page, name: str) -> None:
    """The whole page as `name`, for the README, when FLEETLINE_SCREENSHOT_DIR names a folder."""
    folder = os.environ.get("FLEETLINE_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=True)

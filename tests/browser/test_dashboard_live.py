"""A person logs in and watches the dashboard's heartbeat move without reloading."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from scheduling.live.feed import fleet_heartbeat_publish
from tests.factories import PASSWORD, NodeFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _publish_heartbeat() -> dict[str, Any]:
    # Playwright's sync API owns this thread's event loop; publish from another thread, as the
    # Celery worker would.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fleet_heartbeat_publish).result()


def test_a_logged_in_user_sees_the_fleet_size_and_the_live_heartbeat_move(asgi_server: str, page: Page) -> None:
    NodeFactory.create_batch(4)
    user = UserFactory()

    page.goto(f"{asgi_server}/")
    expect(page).to_have_url(f"{asgi_server}/login/?next=/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    expect(page.locator("#fleet-gpus")).to_have_text("32")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    first = _publish_heartbeat()
    expect(page.locator("#heartbeat-seq")).to_have_text(str(first["seq"]))

    NodeFactory.create_batch(1)
    second = _publish_heartbeat()
    expect(page.locator("#heartbeat-seq")).to_have_text(str(second["seq"]))
    expect(page.locator("#fleet-gpus")).to_have_text("40")

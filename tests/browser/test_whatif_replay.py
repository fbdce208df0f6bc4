"""A fleet admin uploads a small trace, starts a what-if replay in the browser, and sees its
results beside the current policy when the Celery worker has run it."""

from __future__ import annotations

import subprocess

import pytest
from playwright.sync_api import Page, expect

from tests.factories import PASSWORD
from tests.simulations.conftest import BAD_TRACE, GOOD_TRACE, SMALL_FLEET, People, people_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def people(transactional_db: None) -> People:
    return people_build()


def test_an_admin_starts_a_small_replay_and_sees_it_beside_the_current_policy(
    asgi_server: str, celery_worker_process: subprocess.Popen[bytes], page: Page, people: People
) -> None:
    page.goto(f"{asgi_server}/login/")
    page.fill("#id_username", people.admin.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{asgi_server}/")

    page.get_by_role("link", name="What-if").click()
    page.check("input[name=source][value=trace]")
    page.set_input_files("#id_trace", files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": BAD_TRACE}])
    page.fill("#id_fleet_spec", SMALL_FLEET)
    page.get_by_role("button", name="Start the replay").click()
    expect(page.locator("#id_trace-errors")).to_contain_text("bad.csv:3: column 'duration': 'soon' is not a number")

    page.check("input[name=source][value=trace]")
    page.set_input_files("#id_trace", files=[{"name": "jobs.csv", "mimeType": "text/csv", "buffer": GOOD_TRACE}])
    page.fill("#id_fleet_spec", SMALL_FLEET)
    page.select_option("#id_preset", "easy")
    page.select_option("#id_backfill", "off")
    page.get_by_role("button", name="Start the replay").click()

    expect(page.locator("h1")).to_contain_text("Replay #")
    # The page follows the worker's progress and shows the results once the replay has ended.
    expect(page.locator("#simulation-state")).to_have_text("Succeeded", timeout=60_000)
    expect(page.locator("#simulation-results")).to_contain_text("Current policy")
    expect(page.locator("tr[data-metric=utilisation]")).to_be_visible()
    report = page.frame_locator("#simulation-report")
    expect(report.locator(".plotly").first).to_be_visible(timeout=30_000)

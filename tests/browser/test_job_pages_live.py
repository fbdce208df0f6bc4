"""Job pages never lie: they re-read their state when their socket connects, follow each event,
and show only the controls that fit the state."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Dialog, Page, Route, expect

from scheduling.cycle.leader import LOCK_KEY
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_job_that_starts_before_its_page_connects_shows_running_then_completed_without_cancel(
    asgi_server: str, page: Page
) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user
    job = fleet.submit(gpus=8, duration_s=600.0, name="quick-eval", time_limit_s=1200.0)
    log_in(page, asgi_server, member.username)

    # The job page is rendered while the job is pending, but reaches the browser only after the
    # tick that starts it: the start event is published before the page's socket exists.
    def start_while_in_flight(route: Route) -> None:
        response = route.fetch()
        off_loop(fleet.tick)
        route.fulfill(response=response)

    page.route(f"{asgi_server}/jobs/{job.pk}/", start_while_in_flight)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    page.unroute(f"{asgi_server}/jobs/{job.pk}/")
    expect(page.locator("#job-state")).to_have_text("Running")
    expect(page.locator("#job-when")).to_contain_text("Started")
    expect(page.locator("#job-message")).to_have_text("node level")
    expect(page.locator("#live-announcer")).to_contain_text("quick-eval is now Running")

    jobs = page.context.new_page()
    jobs.goto(f"{asgi_server}/jobs/?show=all")
    row = jobs.locator(f"#job-{job.pk}")
    expect(row.locator("[data-field=state]")).to_have_text("Running")
    expect(row.locator("[data-field=when]")).to_contain_text("started 20")
    expect(jobs.locator("body")).to_have_attribute("data-live", "open")

    for _ in range(3):  # a tick advances the fleet clock by at most 5 minutes
        off_loop(fleet.tick, 5.0)

    expect(page.locator("#job-state")).to_have_text("Completed")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    expect(page.locator("text=Estimated start")).to_have_count(0)
    expect(page.locator("#job-when")).to_contain_text("Ended")
    expect(page.locator("#job-events")).to_contain_text("Completed")
    expect(row.locator("[data-field=state]")).to_have_text("Completed")

    arrival = fleet.submit(gpus=8, name="new-arrival")
    off_loop(fleet.tick)
    expect(jobs.locator(f"#job-{arrival.pk}")).to_contain_text("new-arrival")


def test_cancelling_a_large_job_asks_first(asgi_server: str, page: Page) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user
    job = fleet.submit(gpus=16, name="big-pretrain")
    off_loop(fleet.tick)
    log_in(page, asgi_server, member.username)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    expect(page.locator("#job-state")).to_have_text("Running")

    questions: list[str] = []

    def answer(accept: bool) -> Callable[[Dialog], None]:
        def handle(dialog: Dialog) -> None:
            questions.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    page.once("dialog", answer(False))
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-state")).to_have_text("Running")
    assert "16-GPU gang" in questions[0]

    page.once("dialog", answer(True))
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-state")).to_have_text("Cancelled")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)

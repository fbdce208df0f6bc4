"""An open job page tells the truth as ticks go by: why the job waits (the one thing that holds
it, the job ahead linked by name) and when it should start change on the page without a reload,
and a running job's "running for" counts on from its start on the fleet clock."""

from __future__ import annotations

import re

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Page, expect

from scheduling.cycle.leader import LOCK_KEY
from scheduling.live.waits import WAITS_KEY, WAITS_VERSION_KEY
from scheduling.services.jobs import job_cancel
from tests.browser.journeys import log_in, off_loop, screenshot
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_waiting_jobs_page_follows_its_reason_and_estimate_and_a_running_job_counts_on(
    asgi_server: str, page: Page
) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY, WAITS_KEY, WAITS_VERSION_KEY)
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user
    running = fleet.submit(gpus=32, name="pretrain-70b", duration_s=7200.0, time_limit_s=7200.0)
    off_loop(fleet.tick)
    ahead = fleet.submit(gpus=32, name="eval-sweep", duration_s=3600.0, time_limit_s=3600.0)
    waiting = fleet.submit(gpus=8, name="finetune-7b", duration_s=3600.0, time_limit_s=3600.0)
    log_in(page, asgi_server, member.username)

    # Submitted since the last tick: the page says so, and has no date to promise yet.
    page.goto(f"{asgi_server}/jobs/{waiting.pk}/")
    expect(page.locator("#job-message")).to_have_text("waiting for the next scheduling cycle")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads

    # The next tick explains it: 8 GPUs short, behind eval-sweep, which it links to; it starts
    # when pretrain-70b and then eval-sweep have run (2 h + 1 h).
    off_loop(fleet.tick)
    message = page.locator("#job-message")
    expect(message).to_have_text(f"8 more H100 GPUs must free up (0 free now); eval-sweep (#{ahead.pk}) is ahead of it")
    expect(message.get_by_role("link", name=f"eval-sweep (#{ahead.pk})")).to_have_attribute(
        "href", f"/jobs/{ahead.pk}/"
    )
    when = page.locator("#job-when .value")
    expect(when).to_have_text(re.compile(r"in 2h 5\dm"))
    screenshot(page, "job-waiting.png")

    # The job ahead is cancelled: the next tick moves the estimate an hour closer and the reason
    # names no job ahead any more.
    off_loop(job_cancel, job=ahead, user=member)
    off_loop(fleet.tick)
    expect(message).to_have_text("8 more H100 GPUs must free up (0 free now)")
    expect(when).to_have_text(re.compile(r"in 1h 5\dm"))
    assert page.evaluate("window.loadedOnce") is True

    # A running job's page counts its run on the fleet clock as ticks go by, without a reload.
    running_page = page.context.new_page()
    running_page.goto(f"{asgi_server}/jobs/{running.pk}/")
    counter = running_page.locator("#job-running-for")
    expect(running_page.locator("body")).to_have_attribute("data-live", "open")
    before = counter.inner_text()
    running_page.evaluate("window.loadedOnce = true")
    for _ in range(2):
        off_loop(fleet.tick, 5.0)  # five fleet minutes a tick
    expect(counter).not_to_have_text(before)
    expect(counter).to_have_text(re.compile(r"\d+m"))
    assert running_page.evaluate("window.loadedOnce") is True
    # The waiting job's countdown moves with the same clock.
    expect(when).to_have_text(re.compile(r"in 1h [34]\dm"))

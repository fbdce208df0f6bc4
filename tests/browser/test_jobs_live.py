"""A member watches their job start on its page and the dashboard's share move, without reloading."""

from __future__ import annotations

import re

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Page, expect

from scheduling.cycle.leader import LOCK_KEY
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_member_sees_their_job_start_live_and_the_training_share_grow(asgi_server: str, page: Page) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user

    log_in(page, asgi_server, member.username)
    page.goto(f"{asgi_server}/jobs/new/")
    page.fill("#id_name", "live-finetune")
    page.select_option("#id_accelerator_type", label="H100")
    page.select_option("#id_priority_class", value=str(fleet.training.pk))
    page.fill("#id_gpus", "16")
    page.fill("#id_duration_h", "4")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#job-state")).to_have_text("Pending")
    expect(page.locator("body")).to_have_attribute("data-live", "open")

    off_loop(fleet.tick)

    expect(page.locator("#job-state")).to_have_text("Running")
    expect(page.locator("#job-events")).to_contain_text("Started on 2 nodes")

    page.goto(f"{asgi_server}/")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    fleet.submit(gpus=8, name="second")
    off_loop(fleet.tick)
    expect(page.locator("#fleet-training")).to_have_text("24")
    expect(page.locator("#fleet-utilisation")).to_have_text("75%")
    # The live clock speaks the fleet calendar, as the server's pages do.
    expect(page.locator("#fleet-time")).to_have_text(re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$"))
    points = page.evaluate("document.getElementById('share-chart').data[1].y.length")
    assert points >= 1

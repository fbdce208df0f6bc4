"""A lead's jobs start: the unread badge in the menu counts the cycle's one notice without a
reload, the notices list links to each job, and a kind turned off in the settings stops its
notices."""

from __future__ import annotations

import re

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Page, expect

from scheduling.cycle.leader import LOCK_KEY
from scheduling.models import Job
from tenants.models import Membership, Notification
from tests.browser.journeys import log_in, off_loop, screenshot
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_leads_job_starts_and_the_badge_counts_the_notice_that_links_to_it(asgi_server: str, page: Page) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user

    log_in(page, asgi_server, lead.username)
    page.goto(f"{asgi_server}/jobs/new/")
    page.fill("#id_name", "pretrain-7b")
    page.select_option("#id_priority_class", value=str(fleet.training.pk))
    page.fill("#id_gpus", "8")
    page.fill("#id_duration_h", "4")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#job-state")).to_have_text("Pending")
    job = Job.objects.get(name="pretrain-7b")
    assert job.submitted_by == lead

    other = off_loop(fleet.submit, gpus=4, name="eval-sweep")
    Job.objects.filter(pk=other.pk).update(submitted_by=lead)

    page.goto(f"{asgi_server}/")
    expect(page.locator("#unread-count")).to_be_hidden()
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    off_loop(fleet.tick)

    # Both jobs started in one cycle: one notice that names and links both.
    badge = page.locator("#unread-count")
    expect(badge).to_have_text("1")
    expect(badge).to_be_visible()
    page.get_by_role("link", name=re.compile(r"^Notifications")).click()
    notice = page.locator("#notices > li.unread")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text("2 jobs started: pretrain-7b, eval-sweep.")
    screenshot(page, "notifications.png")
    notice.get_by_role("list", name="Jobs").get_by_role("link", name="pretrain-7b").click()
    expect(page).to_have_url(f"{asgi_server}/jobs/{job.pk}/")
    expect(page.locator("#job-state")).to_have_text("Running")

    # Turned off in the app: the next start adds no notice.
    page.goto(f"{asgi_server}/settings/notifications/")
    page.get_by_label("A job of mine started: in the app").uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Saved")
    expect(page.get_by_label("A job of mine started: in the app")).not_to_be_checked()
    screenshot(page, "notification-settings.png")
    expect(
        page.get_by_label(
            "A job of mine was requeued by a failure or did not finish "
            "(a node failed under it, its command failed, or it hit its time limit): by e-mail"
        )
    ).to_be_checked()
    page.goto(f"{asgi_server}/notifications/")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    second = off_loop(fleet.submit, gpus=4, name="second")
    Job.objects.filter(pk=second.pk).update(submitted_by=lead)
    off_loop(fleet.tick)
    assert Job.objects.get(pk=second.pk).state == Job.State.RUNNING
    assert Notification.objects.filter(user=lead).count() == 1  # the tick wrote none for it
    expect(page.locator("#notices > li")).to_have_count(1)

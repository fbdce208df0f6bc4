"""One timeline per job, told as it happens: a lead watches their running, checkpointing gang's
page while a node under it dies. Without a reload the history gains the eviction, which names its
cause (node failure, as the incident says: the node is dead) and links the incident and the node,
then the restart elsewhere; Restarts reads 1; and the lead is told the job was evicted by node
failure and requeued from its checkpoint, never that it failed."""

from __future__ import annotations

import re

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Page, expect

from scheduling.cycle.failures import node_kill
from scheduling.cycle.leader import LOCK_KEY
from scheduling.models import Allocation, FleetClock, Incident, Job, Node
from tenants.models import Membership, Notification
from tests.browser.journeys import log_in, off_loop, screenshot
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _nodes_of(job: Job) -> set[int]:
    return set(Allocation.objects.filter(job=job).values_list("node_id", flat=True))


def test_a_node_dies_under_a_leads_gang_and_its_open_page_tells_the_eviction_the_restart_and_the_notice(
    asgi_server: str, page: Page
) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    job = off_loop(
        fleet.submit, gpus=16, duration_s=36000.0, checkpoint_interval_s=60.0, checkpoint_gb=50.0, name="pretrain"
    )
    Job.objects.filter(pk=job.pk).update(submitted_by=lead)
    for _ in range(3):
        off_loop(fleet.tick, speed=60.0)  # 3 fleet minutes: checkpoints at 60 and 120 s of work
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING

    log_in(page, asgi_server, lead.username)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    expect(page.locator("#job-state")).to_have_text("Running")
    restarts = page.locator(".stat", has=page.locator(".label", has_text="Restarts")).locator(".value")
    expect(restarts).to_have_text("0")
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads

    # A node of the gang stops heartbeating; the detector finds it at the 6th tick of 5 fleet
    # seconds and the gang restarts elsewhere from its checkpoint by the 9th.
    victim = Node.objects.get(pk=min(_nodes_of(job)))
    incident = off_loop(node_kill, node=victim, sim_now_s=FleetClock.objects.get().sim_now_s)
    for _ in range(9):
        off_loop(fleet.tick, speed=5.0)
    incident.refresh_from_db()
    assert incident.kind == Incident.Kind.DEAD and incident.detected_at is not None
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and victim.pk not in _nodes_of(job)

    # The open page's history, newest first: started again, after the eviction that names its
    # cause as the incident does and links the incident and the node.
    rows = page.locator("#job-events > tr")
    evicted = page.locator("#job-events > tr.event-evicted")
    expect(evicted).to_have_count(1)
    expect(evicted).to_contain_text(
        re.compile(rf"Evicted by node failure on node {victim.name}, requeued from its last checkpoint at step \d+")
    )
    expect(evicted).not_to_contain_text("degraded")
    expect(evicted.locator("a.event-incident")).to_have_attribute("href", f"/incidents/#incident-{incident.pk}")
    expect(evicted.locator("a.event-incident")).to_have_text(f"incident #{incident.pk}")
    expect(evicted.locator("a.event-node")).to_have_attribute("href", f"/fleet/#node-{victim.pk}")
    expect(evicted.locator("a.event-node")).to_have_text(f"node {victim.name}")
    kinds = [row.get_attribute("class") for row in rows.all()]
    first_start = len(kinds) - 1 - kinds[::-1].index("event-started")
    evicted_at = kinds.index("event-evicted")
    assert "event-started" in kinds[:evicted_at], kinds  # the restart, newer than the eviction
    assert evicted_at < first_start, kinds  # the eviction, newer than the first start
    expect(restarts).to_have_text("1")
    expect(page.locator("#job-state")).to_have_text("Running")
    assert page.evaluate("window.loadedOnce") is True
    screenshot(page, "job-timeline-failure.png")

    # The lead's notices: the eviction told as what it was, with the job linked; nothing says failed.
    badge = page.locator("#unread-count")
    expect(badge).to_be_visible()
    page.get_by_role("link", name=re.compile(r"^Notifications")).click()
    notices = page.locator("#notices > li")
    told = notices.filter(has_text="node failure")
    expect(told).to_have_count(1)
    expect(told).to_contain_text(
        re.compile(
            rf"Your job pretrain was evicted by node failure on node {victim.name}, "
            r"requeued from its last checkpoint at step \d+"
        )
    )
    for text in notices.all_inner_texts():
        assert "failed" not in text.replace("node failure", ""), text
    assert not Notification.objects.filter(user=lead, message__icontains="failed").exists()
    told.get_by_role("link", name=re.compile(r"^Your job pretrain was evicted")).click()
    expect(page).to_have_url(f"{asgi_server}/jobs/{job.pk}/")

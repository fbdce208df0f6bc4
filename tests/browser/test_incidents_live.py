"""The incidents page follows the live feed with rows the server renders, as on the first load."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Locator, Page, expect

from scheduling.fleet_calendar import CACHE_TTL_S, fleet_datetime
from scheduling.live.feed import incidents_publish
from scheduling.models import FleetClock, Incident, Node
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory, NodeFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_incident_appears_with_the_servers_wording(asgi_server: str, page: Page) -> None:
    node = NodeFactory()
    user = UserFactory()
    log_in(page, asgi_server, user.username)
    page.goto(f"{asgi_server}/incidents/")
    expect(page.locator("#incidents tbody")).to_contain_text("No incidents yet.")
    expect(page.locator("body")).to_have_attribute("data-live", "open")

    incident = Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=120.0, detected_at=150.0)
    off_loop(incidents_publish, incident_ids=[incident.pk])

    row = page.locator(f"#incident-{incident.pk}")
    expect(row).to_contain_text("Dead (heartbeats stopped)")
    expect(row).to_contain_text(node.name)
    # No tick has fixed the fleet epoch yet: the calendar time's shape, not its value.
    expect(row.locator("td").nth(3)).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    expect(row.locator("td").nth(4)).to_contain_text("(+30 s)")
    expect(row.locator("td").nth(7)).to_have_text("open")


def test_an_incident_names_its_time_on_the_fleet_calendar_and_links_its_node_and_the_readers_jobs(
    asgi_server: str, page: Page
) -> None:
    fleet = off_loop(build_fleet)
    off_loop(fleet.tick)  # the first tick that runs fixes the fleet epoch
    member = MembershipFactory(team=fleet.team).user
    ours = fleet.submit(gpus=8, name="ours")
    theirs = fleet.submit(gpus=4, name="secret-run", team=TeamFactory(name="Vision", slug="vision"))
    node = fleet.nodes[1]
    incident = Incident.objects.create(
        node=node, kind=Incident.Kind.DEAD, failed_at=3600.0, detected_at=3690.0, replaced_at=3700.0
    )
    incident.jobs.set([ours, theirs])
    log_in(page, asgi_server, member.username)

    page.goto(f"{asgi_server}/incidents/")
    row = page.locator(f"#incident-{incident.pk}")
    _until_the_servers_epoch_is_this_fleets(page, row.locator("td").nth(3), off_loop(_on_the_recorded_calendar, 3600.0))
    expect(row.locator("td").nth(4)).to_have_text(re.compile(r"^\d\d:\d\d:\d\d \(\+1m 30s\)$"))
    caught = row.locator("td.caught")
    expect(caught).to_contain_text("1 job of other teams (4 GPUs)")
    expect(caught).not_to_contain_text("secret-run")
    caught.get_by_role("link", name=f"#{ours.pk} ours").click()
    expect(page).to_have_url(f"{asgi_server}/jobs/{ours.pk}/")

    page.go_back()
    page.locator(f"#incident-{incident.pk}").get_by_role("link", name=node.name).click()
    expect(page.locator(f"#node-{node.pk}")).to_be_focused()
    expect(page.locator("#node-card")).to_contain_text(node.name)


def test_the_fleet_map_shows_the_state_an_incident_leaves_its_node_in(asgi_server: str, page: Page) -> None:
    node = NodeFactory()
    log_in(page, asgi_server, UserFactory().username)
    page.goto(f"{asgi_server}/fleet/")
    expect(page.locator(f"#node-{node.pk}")).to_have_attribute("data-state", "up")
    expect(page.locator("body")).to_have_attribute("data-live", "open")

    Node.objects.filter(pk=node.pk).update(state=Node.State.CORDONED)
    incident = Incident.objects.create(node=node, kind=Incident.Kind.SLOW, failed_at=60.0, detected_at=90.0)
    off_loop(incidents_publish, incident_ids=[incident.pk])

    expect(page.locator(f"#node-{node.pk}")).to_have_attribute("data-state", "cordoned")
    expect(page.locator(f"#node-{node.pk}")).to_have_class(re.compile(r"\bcordoned\b"))
    expect(page.locator(f"#node-{node.pk}")).not_to_have_class(re.compile(r"\bup\b"))


def _on_the_recorded_calendar(seconds: float) -> str:
    """`fleet_moment` on the epoch this test's first tick recorded (not the one a process keeps)."""
    epoch = FleetClock.objects.values_list("epoch", flat=True).get(pk=1)
    return f"{fleet_datetime(seconds, epoch=epoch):%Y-%m-%d %H:%M:%S}"


def _until_the_servers_epoch_is_this_fleets(page: Page, cell: Locator, text: str) -> None:
    """The server, kept running from one test to the next, keeps the fleet epoch it last read for
    up to `fleet_calendar.CACHE_TTL_S`: a test just before this one may have left its own fleet's
    there. Reload until the cell shows `text`, for no longer than that."""
    deadline = time.monotonic() + CACHE_TTL_S + 5.0
    while cell.inner_text().strip() != text and time.monotonic() < deadline:
        page.wait_for_timeout(1000)
        page.reload()
    expect(cell).to_have_text(text)

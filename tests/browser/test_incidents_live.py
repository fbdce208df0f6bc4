"""The incidents page follows the live feed with rows the server renders, as on the first load."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from scheduling.live.feed import incidents_publish
from scheduling.models import Incident, Node
from tests.browser.journeys import log_in, off_loop
from tests.factories import NodeFactory, UserFactory

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
    expect(row.locator("td").nth(3)).to_have_text("120 s")
    expect(row.locator("td").nth(7)).to_have_text("open")


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

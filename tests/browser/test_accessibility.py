"""axe-core on every page a lead and a fleet admin open: no serious or critical violations.
The 404 page keeps the site's navigation."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from tenants.models import Membership
from tenants.roles import FLEET_ADMIN
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SERIOUS = {"serious", "critical"}


def _violations(page: Page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in SERIOUS
    ]


def test_every_page_of_a_lead_and_an_admin_passes_axe_core_and_404_keeps_the_navigation(
    asgi_server: str, page: Page
) -> None:
    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    running = fleet.submit(gpus=8, name="running-job")
    waiting = fleet.submit(gpus=32, name="waiting-job")
    off_loop(fleet.tick)

    found: dict[str, list[str]] = {}
    page.goto(f"{asgi_server}/login/")
    found["/login/"] = _violations(page)

    lead_pages = ["/", "/fleet/", "/incidents/", "/jobs/", "/jobs/new/", f"/jobs/{running.pk}/", f"/jobs/{waiting.pk}/"]
    lead_pages += ["/teams/", f"/teams/{fleet.team.slug}/", "/notifications/"]
    log_in(page, asgi_server, lead.username)
    for path in lead_pages:
        page.goto(f"{asgi_server}{path}")
        page.wait_for_load_state("networkidle")
        found[path] = _violations(page)

    page.goto(f"{asgi_server}/jobs/999999/")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("navigation").get_by_role("link", name="Jobs")).to_be_visible()
    found["404"] = _violations(page)

    page.get_by_role("button", name="Log out").click()
    log_in(page, asgi_server, admin.username)
    for path in ["/admin-portal/quota-requests/", "/admin-portal/policy/", "/admin-portal/audit/", "/teams/"]:
        page.goto(f"{asgi_server}{path}")
        found[f"admin {path}"] = _violations(page)

    report = [f"{path}: {problem}" for path, problems in found.items() for problem in problems]
    assert not report, "\n".join(report)

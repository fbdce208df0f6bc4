"""axe-core on every page a lead, a fleet admin and finance open (the usage report, the finance
pages, what-if replays, settings): no serious or critical violations. The 404 page keeps the
site's navigation."""

from __future__ import annotations

from decimal import Decimal

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from finance.models import Budget
from simulations.models import Simulation
from simulations.services import simulation_run, simulation_start
from tenants.models import Membership
from tenants.roles import FLEET_ADMIN
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory, UserFactory
from tests.finance.ledger import books_build
from tests.scheduling.conftest import build_fleet
from tests.simulations.conftest import trace_request

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


def test_the_finance_what_if_and_settings_pages_pass_axe_core(asgi_server: str, page: Page) -> None:
    books = off_loop(books_build)
    Budget.objects.create(team=books.vision, unit=Budget.Unit.MONEY, monthly_amount=Decimal("500"))
    replay = simulation_start(user=books.admin, request=trace_request())
    assert off_loop(simulation_run, simulation_id=replay.pk) == Simulation.State.SUCCEEDED
    queued = simulation_start(user=books.admin, request=trace_request(preset="fleetline"))

    found: dict[str, list[str]] = {}
    finance_pages = ["/reports/usage/?month=2026-01", "/reports/usage/?start=2026-01-01&end=2026-01-31"]
    finance_pages += [
        "/finance/rates/",
        "/finance/budgets/",
        "/finance/months/",
        "/finance/jobs/?start=2026-01-01&end=2026-01-31",
    ]
    finance_pages += ["/notifications/", "/settings/notifications/", "/settings/tokens/"]
    log_in(page, asgi_server, books.finance.username)
    for path in finance_pages:
        page.goto(f"{asgi_server}{path}")
        page.wait_for_load_state("networkidle")
        found[f"finance {path}"] = _violations(page)
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, books.admin.username)
    for path in [
        "/simulations/",
        f"/simulations/{replay.pk}/",
        f"/simulations/{queued.pk}/",
        "/reports/usage/?month=2026-01",
    ]:
        page.goto(f"{asgi_server}{path}")
        page.wait_for_load_state("networkidle")
        found[f"admin {path}"] = _violations(page)
    page.goto(f"{asgi_server}/simulations/{replay.pk}/report/")  # the report alone, as the page frames it
    page.wait_for_load_state("networkidle")
    found["admin replay report"] = _violations(page)
    page.goto(f"{asgi_server}/")
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, books.lead.username)
    for path in ["/reports/usage/?month=2026-01", "/simulations/", f"/teams/{books.vision.slug}/"]:
        page.goto(f"{asgi_server}{path}")
        page.wait_for_load_state("networkidle")
        found[f"lead {path}"] = _violations(page)

    report = [f"{path}: {problem}" for path, problems in found.items() for problem in problems]
    assert not report, "\n".join(report)

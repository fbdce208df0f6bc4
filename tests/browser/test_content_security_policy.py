"""Every page is served with the strict Content-Security-Policy (no inline script or style, no
eval, everything from this site) and none of them breaks it: each main page, opened by the role
that uses it, reports no violation, neither as a ``securitypolicyviolation`` event nor on the
console."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import ConsoleMessage, Page

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

# Every violation the page sees, reported to the test through a binding Playwright installs
# before any of the page's own scripts run.
LISTEN = """
document.addEventListener("securitypolicyviolation", function (e) {
  window.cspViolation(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " +
    (e.sourceFile || location.pathname) + ":" + e.lineNumber);
});
"""


# Redoc's footer shows its maker's logo from their CDN: refused on purpose (no CDN), it is the one
# violation expected.
REFUSED_ON_PURPOSE = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def _watch(page: Page) -> list[str]:
    seen: list[str] = []

    def report(text: str) -> None:
        if REFUSED_ON_PURPOSE not in text:
            seen.append(f"{page.url}: {text}")

    page.expose_function("cspViolation", report)
    page.add_init_script(LISTEN)

    def console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            report(f"console: {message.text}")

    page.on("console", console)
    return seen


def _visit(page: Page, base: str, paths: list[str], *, then: Callable[[Page], None] | None = None) -> list[str]:
    """Open each page and wait for its scripts and charts; the paths served without the policy."""
    unprotected = []
    for path in paths:
        response = page.goto(f"{base}{path}")
        assert response is not None
        if "default-src 'self'" not in response.headers.get("content-security-policy", ""):
            unprotected.append(path)
        page.wait_for_load_state("networkidle")
        if then is not None:
            then(page)
    return unprotected


def _admin() -> User:
    """A fleet admin who is staff too, for the Django admin's pages."""
    admin = UserFactory(is_staff=True, is_superuser=True)
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    return admin


def _hover_a_node(page: Page) -> None:
    if page.url.endswith("/fleet/"):
        page.locator(".node").first.hover()  # the node card is placed by script


def test_the_policy_is_strict_and_no_page_of_a_lead_or_an_admin_breaks_it(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    admin = _admin()
    running = fleet.submit(gpus=8, name="running-job")
    waiting = fleet.submit(gpus=32, name="waiting-job")
    off_loop(fleet.tick)
    violations = _watch(page)

    unprotected = _visit(page, asgi_server, ["/login/"])
    policy = page.request.get(f"{asgi_server}/login/").headers["content-security-policy"]
    log_in(page, asgi_server, lead.username)
    lead_pages = ["/", "/fleet/", "/incidents/", "/jobs/", "/jobs/new/", f"/jobs/{running.pk}/", f"/jobs/{waiting.pk}/"]
    lead_pages += ["/teams/", f"/teams/{fleet.team.slug}/", "/notifications/", "/settings/tokens/", "/jobs/999999/"]
    unprotected += _visit(page, asgi_server, lead_pages, then=_hover_a_node)
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, admin.username)
    admin_pages = ["/admin-portal/quota-requests/", "/admin-portal/policy/", "/admin-portal/audit/", "/fleet/"]
    admin_pages += ["/admin/", "/admin/tenants/team/", "/api/v1/docs/", "/api/v1/redoc/"]
    unprotected += _visit(page, asgi_server, admin_pages, then=_hover_a_node)

    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert unprotected == []
    assert violations == [], "\n".join(violations)


def test_no_finance_report_or_what_if_page_breaks_the_policy(asgi_server: str, page: Page) -> None:
    books = off_loop(books_build)
    replay = simulation_start(user=books.admin, request=trace_request())
    assert off_loop(simulation_run, simulation_id=replay.pk) == Simulation.State.SUCCEEDED
    queued = simulation_start(user=books.admin, request=trace_request(preset="fleetline"))
    violations = _watch(page)

    log_in(page, asgi_server, books.finance.username)
    finance_pages = ["/reports/usage/?month=2026-01", "/finance/rates/", "/finance/budgets/", "/finance/months/"]
    finance_pages += ["/finance/jobs/?start=2026-01-01&end=2026-01-31"]
    unprotected = _visit(page, asgi_server, finance_pages)
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, books.admin.username)
    whatif_pages = ["/simulations/", f"/simulations/{replay.pk}/", f"/simulations/{queued.pk}/"]
    whatif_pages += [f"/simulations/{replay.pk}/report/", f"/teams/{books.vision.slug}/"]
    unprotected += _visit(page, asgi_server, whatif_pages)

    assert unprotected == []
    assert violations == [], "\n".join(violations)

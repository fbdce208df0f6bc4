"""A lead adds a member, who then sees the team's jobs; finance sees no way to submit."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from tenants.models import Membership
from tenants.roles import FINANCE
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_lead_adds_a_member_who_then_sees_the_teams_jobs(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    newcomer = UserFactory(username="newcomer")
    fleet.submit(gpus=8, name="team-pretrain")

    log_in(page, asgi_server, newcomer.username)
    page.goto(f"{asgi_server}/jobs/")
    expect(page.locator("#job-rows")).not_to_contain_text("team-pretrain")
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, lead.username)
    page.goto(f"{asgi_server}/teams/{fleet.team.slug}/")
    page.fill("#id_username", "newcomer")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator(".messages")).to_contain_text("Added newcomer to Language Models")
    expect(page.locator("#member-list")).to_contain_text("newcomer")
    page.get_by_role("button", name="Log out").click()

    log_in(page, asgi_server, newcomer.username)
    page.goto(f"{asgi_server}/jobs/")
    expect(page.locator("#job-rows")).to_contain_text("team-pretrain")


def test_finance_sees_neither_a_submit_button_nor_an_invitation_to_submit(asgi_server: str, page: Page) -> None:
    off_loop(build_fleet)
    finance = UserFactory()
    finance.groups.add(Group.objects.get_or_create(name=FINANCE)[0])
    log_in(page, asgi_server, finance.username)

    page.goto(f"{asgi_server}/jobs/")
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    expect(page.get_by_role("link", name="Submit a job")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("No jobs here yet")


def test_a_leads_open_team_page_shows_the_decision_and_the_unread_badge_live(asgi_server: str, page: Page) -> None:
    from tenants.models import QuotaRequest
    from tenants.services import quota_request_approve, quota_request_submit

    fleet = off_loop(build_fleet)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    admin = UserFactory(is_superuser=True, is_staff=True)
    quota_request_submit(
        user=lead,
        team=fleet.team,
        accelerator_type=fleet.accelerator,
        guaranteed=24,
        borrow_limit=8,
        lend_limit=None,
        justification="Pre-training the next model generation.",
    )
    log_in(page, asgi_server, lead.username)
    page.goto(f"{asgi_server}/teams/{fleet.team.slug}/")
    expect(page.locator("#request-history")).to_contain_text("Pending")
    expect(page.locator("#unread-count")).to_be_hidden()
    expect(page.locator("body")).to_have_attribute("data-live", "open")

    request = QuotaRequest.objects.get()
    off_loop(quota_request_approve, admin=admin, quota_request_id=request.pk, note="Approved for Q3.")

    expect(page.locator("#request-history")).to_contain_text("Approved")
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("24")
    expect(page.locator("#unread-count")).to_have_text("1")
    expect(page.locator("#live-announcer")).to_contain_text("New notice")

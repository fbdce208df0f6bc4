"""A lead asks for more quota in the browser, an admin approves it, the lead sees it applied."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tenants.models import Membership
from tests.browser.journeys import log_in_to, log_out
from tests.factories import MembershipFactory, NodeFactory, TeamFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_lead_requests_quota_an_admin_approves_it_and_the_team_page_shows_it(asgi_server: str, page: Page) -> None:
    NodeFactory.create_batch(4)  # 32 H100 GPUs
    team = TeamFactory(name="Language Models", slug="language-models")
    lead = MembershipFactory(team=team, role=Membership.Role.LEAD).user
    admin = UserFactory(is_superuser=True, is_staff=True)
    team_path = "/teams/language-models/"

    log_in_to(page, asgi_server, lead.username, team_path)
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("0")
    page.select_option("#id_accelerator_type", label="H100")
    page.fill("#id_guaranteed", "24")
    page.fill("#id_borrow_limit", "8")
    page.fill("#id_justification", "Pre-training the next model generation.")
    page.click("#request-quota button[type=submit]")
    expect(page.locator("#request-history")).to_contain_text("Pending")
    log_out(page)

    log_in_to(page, asgi_server, admin.username, "/admin-portal/quota-requests/")
    card = page.locator("section.request", has_text="Language Models · H100")
    expect(card).to_contain_text("Guarantees for H100 would total 24 of 32 GPUs")
    card.locator("input[name=note]").first.fill("Approved for Q3.")
    card.locator("button.approve").click()
    expect(page.locator(".messages")).to_contain_text("Request approved.")
    expect(page.locator("body")).to_contain_text("No pending quota requests.")
    log_out(page)

    log_in_to(page, asgi_server, lead.username, team_path)
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("24")
    expect(page.locator("#request-history")).to_contain_text("Approved")
    expect(page.locator("#unread-count")).to_have_text("1")

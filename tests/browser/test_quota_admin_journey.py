"""A fleet admin sets a team's quota from its page; the lead sees it and the notice."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tenants.models import Membership
from tests.browser.journeys import log_in_to, log_out
from tests.factories import MembershipFactory, NodeFactory, TeamFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_sets_a_quota_on_the_team_page_and_the_lead_is_told(asgi_server: str, page: Page) -> None:
    NodeFactory.create_batch(4)  # 32 H100 GPUs
    team = TeamFactory(name="Language Models", slug="language-models")
    lead = MembershipFactory(team=team, role=Membership.Role.LEAD).user
    admin = UserFactory(is_superuser=True, is_staff=True)
    team_path = "/teams/language-models/"

    log_in_to(page, asgi_server, admin.username, team_path)
    form = page.locator("#quota-admin form[data-accelerator=H100]")
    form.get_by_label("Guaranteed GPUs").fill("40")
    form.get_by_label("Reason").fill("Launch week.")
    form.get_by_role("button", name="Set H100 quota").click()
    expect(page.locator(".messages")).to_contain_text("Guarantees for H100 would total 40 of 32 GPUs")
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("0")

    form = page.locator("#quota-admin form[data-accelerator=H100]")
    form.get_by_label("Guaranteed GPUs").fill("24")
    form.get_by_label("Lend limit").fill("8")
    form.get_by_label("Reason").fill("Launch week.")
    form.get_by_role("button", name="Set H100 quota").click()
    expect(page.locator(".messages")).to_contain_text("Quota for H100 set")
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("24")
    serious = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in {"serious", "critical"}]
    assert serious == []
    log_out(page)

    log_in_to(page, asgi_server, lead.username, team_path)
    expect(page.locator("#quota-admin")).to_have_count(0)
    expect(page.locator("#quota-table tr[data-accelerator=H100] .guaranteed")).to_have_text("24")
    expect(page.locator("#unread-count")).to_have_text("1")

"""A lead submits with the form's defaults, guided by its hints; the classes follow the kind."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from scheduling.models import Job
from tenants.models import Membership
from tests.browser.journeys import log_in, off_loop
from tests.factories import AcceleratorTypeFactory, MembershipFactory, PriorityClassFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_lead_submits_with_the_defaults_and_sees_quota_left_and_when_it_would_start(
    asgi_server: str, page: Page
) -> None:
    fleet = off_loop(build_fleet)
    AcceleratorTypeFactory(name="A100")  # first by name; the team's quota is on H100
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    log_in(page, asgi_server, lead.username)

    page.goto(f"{asgi_server}/jobs/new/")
    expect(page.locator("#id_accelerator_type option:checked")).to_have_text("H100")
    expect(page.locator("#quota-left")).to_contain_text("16 more within its guarantee")
    expect(page.locator("#id_duration_h_helptext")).to_contain_text("full gang")

    page.select_option("#id_kind", "serving")
    expect(page.locator("#id_priority_class option:checked")).to_have_text("serving (900)")
    expect(page.locator("#id_priority_class option[data-kind=training]")).to_be_disabled()
    page.select_option("#id_kind", "training")
    expect(page.locator("#id_priority_class option:checked")).to_have_text("training (300)")

    page.fill("#id_name", "with-defaults")
    page.fill("#id_gpus", "8")
    page.fill("#id_duration_h", "1")
    expect(page.locator("#start-preview")).to_contain_text("Would start at the next scheduling cycle")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#job-state")).to_have_text("Pending")


def test_the_form_preselects_the_normal_class_of_each_kind_not_the_highest(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    PriorityClassFactory(name="training-high", value=500, kind="training")
    PriorityClassFactory(name="serving-critical", value=1000, kind="serving", preemptible=False)
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    log_in(page, asgi_server, lead.username)

    page.goto(f"{asgi_server}/jobs/new/")
    expect(page.locator("#id_priority_class option:checked")).to_have_text("training (300)")
    page.select_option("#id_kind", "serving")
    expect(page.locator("#id_priority_class option:checked")).to_have_text("serving (900)")
    page.select_option("#id_kind", "training")
    expect(page.locator("#id_priority_class option:checked")).to_have_text("training (300)")

    page.fill("#id_name", "normal-class")
    page.fill("#id_gpus", "8")
    page.fill("#id_duration_h", "1")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#job-state")).to_have_text("Pending")
    assert off_loop(lambda: Job.objects.get(name="normal-class").priority_class_id) == fleet.training.pk

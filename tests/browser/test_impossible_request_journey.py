"""A request no healthy fleet of today's shape could ever run is refused before it is queued: a
lead asks for 16 GPUs that must fit within one node on a fleet of 8-GPU nodes; the preview says so
and what would fit, submitting is refused beside the field with the same words, and no job is
written."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from scheduling.models import Job, SchedulerEvent
from tenants.models import Membership
from tests.browser.journeys import log_in, off_loop, screenshot
from tests.factories import MembershipFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHAT_FITS = (
    "On H100 a gang that must fit within one node can have at most 8 GPUs; "
    "within one rack at most 16; within one pod at most 32."
)


def test_a_gang_that_can_never_fit_its_required_domain_is_refused_with_what_would_fit(
    asgi_server: str, page: Page
) -> None:
    fleet = off_loop(build_fleet)  # 2 racks of 2 nodes of 8 H100 GPUs
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    log_in(page, asgi_server, lead.username)

    page.goto(f"{asgi_server}/jobs/new/")
    page.fill("#id_name", "pretrain-one-box")
    page.fill("#id_gpus", "16")
    page.fill("#id_duration_h", "4")
    page.select_option("#id_required_level", "node")

    # Before submitting: the preview says the job could never run here, and what would.
    preview = page.locator("#start-preview")
    expect(preview.locator("p.error")).to_have_text(
        f"As asked it could never run here, so it would be refused: {WHAT_FITS}"
    )
    for line in preview.inner_text().splitlines():  # nothing garbled: no template left over
        assert not any(bit in line for bit in ("{", "}", "None", "  ", " .", " ;")), line

    # Submitting anyway: refused beside the GPUs field, the form kept as it was filled in.
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#error-gpus")).to_have_text(WHAT_FITS)
    expect(page.locator(".field.has-error")).to_have_count(1)
    expect(page.locator(".field.has-error #id_gpus")).to_have_value("16")
    expect(page.locator("#id_required_level")).to_have_value("node")
    expect(page).to_have_url(f"{asgi_server}/jobs/new/")
    expect(preview.locator("p.error")).to_contain_text("As asked it could never run here")
    screenshot(page, "submit-refused.png")

    # Nothing was written: no job, no event.
    assert not Job.objects.filter(name="pretrain-one-box").exists()
    assert not SchedulerEvent.objects.filter(job__name="pretrain-one-box").exists()

    # What the message says fits is accepted: 8 GPUs within one node.
    page.fill("#id_gpus", "8")
    expect(preview).to_contain_text("Would start at the next scheduling cycle")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#job-state")).to_have_text("Pending")
    assert Job.objects.get(name="pretrain-one-box").required_level == "node"

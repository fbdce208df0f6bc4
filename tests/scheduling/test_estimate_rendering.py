"""Estimated starts as people read them: a time within the horizon, else what the job waits for."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduling.live.waits import PendingInfo, pending_info_for
from scheduling.templatetags.fleet import starts_in
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet


@pytest.mark.parametrize(
    ("pending", "shown"),
    [
        (PendingInfo("capacity", 7500.0), "in 2h 04m"),
        (PendingInfo("capacity", 100.0), "now"),
        (PendingInfo("capacity", None, "job:42"), "when job #42 ends, beyond the next 30 days"),
        (PendingInfo("quota", None, "quota-limit:vision"), "never, at this size: more GPUs than team vision may use"),
        (PendingInfo("topology", None, "domain:rack"), "when a rack of the fleet has enough healthy nodes for it"),
        (PendingInfo("capacity", None, "queue"), "after more than 30 days of work queued ahead of it"),
        (PendingInfo("new", None), "waiting for the next scheduling cycle"),
        (PendingInfo("capacity", None), "waiting for free GPUs"),
        (
            PendingInfo("guarantee", None),
            "work nobody may preempt runs only within the team's guarantee, or on GPUs nobody is guaranteed",
        ),
        (None, "unknown"),
        (7500.0, "in 2h 04m"),
    ],
)
def test_an_estimate_reads_as_a_time_or_as_what_the_job_waits_for(
    pending: PendingInfo | float | None, shown: str
) -> None:
    assert starts_in(pending, 60.0).startswith(shown)


def test_a_job_no_rack_can_hold_shows_what_it_waits_for_instead_of_a_date(fleet: Fleet) -> None:
    # Racks of two 8-GPU nodes: a 24-GPU gang bound to one rack can never start.
    job = fleet.submit(gpus=24, name="wide", required_level="rack")
    fleet.tick()

    info = pending_info_for(job_ids=[job.pk])[job.pk]
    assert (info.estimated_start_s, info.waits_for) == (None, "domain:rack")
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)
    html = client.get("/jobs/").content.decode()
    assert "when a rack of the fleet has enough healthy nodes for it" in html
    assert "unknown" not in html
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "when a rack of the fleet has enough healthy nodes for it" in detail

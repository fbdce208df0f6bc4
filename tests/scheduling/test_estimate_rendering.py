"""Estimated starts as people read them: a time within the horizon, else what the job waits for."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduling.listed import listed_from
from scheduling.live.waits import JobWait, job_waits_for
from scheduling.models import Job, Node
from scheduling.selectors import JobRow, job_rows, pending_jobs_for_team
from scheduling.templatetags.fleet import starts_in
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet


@pytest.mark.parametrize(
    ("wait", "shown"),
    [
        (JobWait("capacity", 7500.0), "in 2h 04m"),
        (JobWait("capacity", 100.0), "now"),
        (JobWait("capacity", None, "job:42"), "when job #42 ends, beyond the next 30 days"),
        # A team whose name is not known is "its team", never its internal id.
        (JobWait("quota", None, "quota-limit:vision"), "never, at this size: more GPUs than its team may use"),
        (JobWait("topology", None, "domain:rack"), "when a rack of the fleet has enough healthy nodes for it"),
        (JobWait("capacity", None, "queue"), "after more than 30 days of work queued ahead of it"),
        (JobWait("new", None), "waiting for the next scheduling cycle"),
        (JobWait("capacity", None), "waiting for free GPUs"),
        (
            JobWait("guarantee", None),
            "work nobody may preempt runs only within the team's guarantee, or on GPUs nobody is guaranteed",
        ),
        (None, "unknown"),
        (7500.0, "in 2h 04m"),
    ],
)
def test_an_estimate_reads_as_a_time_or_as_what_the_job_waits_for(wait: JobWait | float | None, shown: str) -> None:
    assert starts_in(wait, 60.0).startswith(shown)


def _one_node_down_in_each_rack() -> None:
    Node.objects.filter(name__endswith="-n2").update(state=Node.State.DOWN, healthy_gpus=0)


def test_a_job_no_rack_can_hold_shows_what_it_waits_for_instead_of_a_date(fleet: Fleet) -> None:
    # Racks of two 8-GPU nodes, one of them down: no rack holds a 16-GPU gang bound to one rack
    # until a node comes back.
    job = fleet.submit(gpus=16, name="wide", required_level="rack")
    _one_node_down_in_each_rack()
    fleet.tick()

    wait = job_waits_for(job_ids=[job.pk])[job.pk]
    assert (wait.estimated_start_s, wait.waits_for) == (None, "domain:rack")
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)
    html = client.get("/jobs/").content.decode()
    assert "when a rack of the fleet has enough healthy nodes for it" in html
    assert "unknown" not in html
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "when a rack of the fleet has enough healthy nodes for it" in detail


def test_the_pages_read_each_job_with_its_wait_and_patch_no_row(fleet: Fleet) -> None:
    fits = fleet.submit(gpus=8, name="fits")
    wide = fleet.submit(gpus=16, name="wide", required_level="rack")
    _one_node_down_in_each_rack()
    fleet.tick()

    rows = job_rows(jobs=Job.objects.filter(pk__in=[fits.pk, wide.pk]).order_by("pk"))
    assert [(row.job.pk, row.job.state) for row in rows] == [(fits.pk, "running"), (wide.pk, "pending")]
    assert rows[0].wait is None
    assert rows[1].wait == job_waits_for(job_ids=[wide.pk])[wide.pk]
    assert not hasattr(rows[1].job, "pending")
    # The team's queue reads its jobs lean, as the lists do.
    assert pending_jobs_for_team(team=fleet.team) == [JobRow(listed_from(rows[1].job), rows[1].wait)]

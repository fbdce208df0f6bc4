"""The live fleet keeps what the engine knows of a gang a node failure requeued: it goes back ahead
of new work tick after tick (`engine.Job.requeued_by_failure`, stored on the job), and a preemption
clears it."""

from __future__ import annotations

import os

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from scheduling.convert import JOB_FIELDS, job_from_row  # noqa: E402
from scheduling.cycle.failures import node_kill  # noqa: E402
from scheduling.models import FleetClock, Job  # noqa: E402
from tests.scheduling.conftest import Fleet, build_fleet  # noqa: E402


@pytest.fixture
def fleet(db: None) -> Fleet:
    return build_fleet()


def _engine_job(job: Job):
    return job_from_row(Job.objects.filter(pk=job.pk).values_list(*JOB_FIELDS, named=True).get())


def test_a_gang_a_dead_node_requeued_stays_marked_while_it_waits_and_new_work_is_not(fleet: Fleet) -> None:
    # The whole fleet (4 nodes of 8): once a node dies it cannot start again until the repair.
    gang = fleet.submit(gpus=32, duration_s=36000.0, checkpoint_interval_s=60.0, name="gang")
    for _ in range(3):
        fleet.tick(speed=60.0)
    gang.refresh_from_db()
    assert gang.state == Job.State.RUNNING and not _engine_job(gang).requeued_by_failure

    node_kill(node=fleet.nodes[0], sim_now_s=FleetClock.objects.get().sim_now_s)
    for _ in range(8):  # 3 missed 10 s heartbeats at 5 fleet seconds a tick, and some more ticks
        fleet.tick(speed=5.0)
    later = fleet.submit(gpus=8, duration_s=600.0, name="later")
    fleet.tick(speed=5.0)

    gang.refresh_from_db()
    assert gang.state == Job.State.PENDING and gang.restarts == 1
    assert gang.requeued_by_failure and _engine_job(gang).requeued_by_failure
    assert not _engine_job(later).requeued_by_failure

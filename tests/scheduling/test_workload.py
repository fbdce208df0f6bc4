"""The demo workload keeps a fresh fleet busy: arrivals follow the fleet clock, bounded queues."""

from __future__ import annotations

import redis
from django.conf import settings

from scheduling.models import FleetClock, Job
from scheduling.services.workload import CURSOR_KEY, MAX_PENDING_PER_TEAM, demo_load_generate
from tests.scheduling.conftest import Fleet


def _advance_clock(to_s: float) -> None:
    FleetClock.objects.filter(pk=1).update(sim_now_s=to_s)


def test_arrivals_follow_the_fleet_clock_and_are_valid_jobs(fleet: Fleet) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(CURSOR_KEY)
    assert demo_load_generate() == 0  # the first call only sets the cursor

    _advance_clock(6 * 3600.0)
    submitted = demo_load_generate(offered_load=4.0)

    assert submitted > 0
    jobs = list(Job.objects.all())
    assert len(jobs) == submitted
    assert all(job.state == Job.State.PENDING and job.team == fleet.team for job in jobs)
    assert all(job.gpus <= 8 or job.gpus % 8 == 0 for job in jobs)
    assert all(job.time_limit_s >= job.duration_s for job in jobs)
    assert demo_load_generate() == 0  # nothing new until the clock moves again


def test_a_team_with_a_full_queue_gets_no_more_arrivals(fleet: Fleet) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(CURSOR_KEY)
    for _ in range(MAX_PENDING_PER_TEAM):
        fleet.submit(gpus=1)
    demo_load_generate()
    _advance_clock(24 * 3600.0)

    assert demo_load_generate(offered_load=4.0) == 0

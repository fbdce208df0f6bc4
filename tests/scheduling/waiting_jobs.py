"""A job waiting behind another in the small test fleet, and no range calibration kept in Redis
between tests (`scheduling.estimates` keeps one for an hour of fleet time)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings

from core.redis_pools import shared_redis
from scheduling.estimates import CALIBRATION_KEY
from scheduling.models import Job
from tests.scheduling.conftest import Fleet

HOUR = 3600.0


@pytest.fixture
def no_cached_calibration() -> Iterator[None]:
    shared_redis(settings.REDIS_URL).delete(CALIBRATION_KEY)
    yield
    shared_redis(settings.REDIS_URL).delete(CALIBRATION_KEY)


def one_waiting(fleet: Fleet) -> Job:
    """A 32-GPU job fills the fleet for an hour; an 8-GPU job waits for it."""
    fleet.submit(gpus=32, name="fills", duration_s=HOUR)
    fleet.tick()
    waits = fleet.submit(gpus=8, name="waits", duration_s=HOUR)
    fleet.tick()
    return Job.objects.get(pk=waits.pk)


def an_hour_later(fleet: Fleet) -> None:
    """Ticks over 70 minutes of fleet time (a tick accounts for at most five wall seconds): the
    32-GPU job has ended and the waiting one started."""
    for _ in range(14):
        fleet.tick(wall_step_s=5.0)

"""Readiness: the database answers, Redis answers, and the scheduling cycle is ticking.

A few lines of our own rather than a health-check framework: the checks are three queries, one
of them (the tick's age) specific to this product, and the answer must stay cheap enough for a
load balancer to ask every few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from redis.exceptions import RedisError

from scheduling.models import FleetClock

REDIS_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


def _database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        return Check("database", False, f"unreachable: {type(error).__name__}")
    return Check("database", True, "answers")


def _redis() -> Check:
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
    )
    try:
        client.ping()
    except (RedisError, OSError) as error:
        return Check("redis", False, f"unreachable: {type(error).__name__}")
    finally:
        client.close()
    return Check("redis", True, "answers")


def _tick(*, database_ok: bool) -> Check:
    """The fleet clock's wall time moves with every tick; a leader that stops ticking (no worker,
    no beat, a cycle that keeps failing) leaves it behind."""
    if not database_ok:
        return Check("tick", False, "unknown: the database is unreachable")
    bound_s = settings.FLEETLINE_READY_TICK_MAX_AGE_S
    try:
        last = FleetClock.objects.filter(pk=1).values_list("wall_updated_at", flat=True).first()
    except DatabaseError as error:
        return Check("tick", False, f"unknown: {type(error).__name__}")
    if last is None:
        return Check("tick", False, "no scheduling cycle has run yet")
    age_s = (timezone.now() - last).total_seconds()
    if age_s > bound_s:
        return Check("tick", False, f"last tick {age_s:.0f} s ago, more than {bound_s:g} s")
    return Check("tick", True, f"last tick {max(0.0, age_s):.1f} s ago")


def readiness_checks() -> list[Check]:
    database = _database()
    return [database, _redis(), _tick(database_ok=database.ok)]

"""Why each pending job waits and when it should start: recomputed by every cycle, so it lives
in Redis (one hash, swapped whole after each committed tick), not in the job rows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django.conf import settings

from scheduling import engine

PENDING_KEY = "fleetline:pending"
NEW_JOB_REASON = "new"


@dataclass(frozen=True, slots=True)
class PendingInfo:
    reason: str
    estimated_start_s: float | None


def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def pending_statuses_store(*, statuses: Iterable[engine.PendingStatus]) -> None:
    mapping = {
        status.job_id: f"{status.reason}|{'' if status.estimated_start_s is None else round(status.estimated_start_s)}"
        for status in statuses
    }
    client = _client()
    if not mapping:
        client.delete(PENDING_KEY)
        return
    staging = f"{PENDING_KEY}:next"
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(staging)
        pipe.hset(staging, mapping=mapping)
        pipe.rename(staging, PENDING_KEY)
        pipe.execute()


def pending_info_for(*, job_ids: list[int]) -> dict[int, PendingInfo]:
    """The latest cycle's reason and estimate for each job; new jobs wait for their first cycle."""
    if not job_ids:
        return {}
    values = _client().hmget(PENDING_KEY, [str(job_id) for job_id in job_ids])
    info = {}
    for job_id, value in zip(job_ids, values, strict=True):
        if value is None:
            info[job_id] = PendingInfo(NEW_JOB_REASON, None)
            continue
        reason, _, estimate = value.decode().partition("|")
        info[job_id] = PendingInfo(reason, float(estimate) if estimate else None)
    return info

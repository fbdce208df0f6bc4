"""Why each pending job waits and when it should start: recomputed by every cycle, so it lives
in Redis (one JSON document, replaced whole after each committed tick), not in the job rows."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django.conf import settings

from portal.redis_pools import shared_redis
from scheduling import engine
from scheduling.engine.vocabulary import REASON_NEW

PENDING_KEY = "fleetline:pending"
NEW_JOB_REASON = REASON_NEW


@dataclass(frozen=True, slots=True)
class PendingInfo:
    reason: str
    estimated_start_s: float | None
    # What the job waits for when there is no estimate to believe (`engine.PendingStatus.waits_for`).
    waits_for: str | None = None


def _client() -> redis.Redis:
    return shared_redis(settings.REDIS_URL)


def pending_statuses_store(*, statuses: Iterable[engine.PendingStatus]) -> None:
    document = {
        status.job_id: [
            status.reason,
            None if status.estimated_start_s is None else round(status.estimated_start_s),
            status.waits_for,
        ]
        for status in statuses
    }
    _client().set(PENDING_KEY, json.dumps(document, separators=(",", ":")))


def pending_info_for(*, job_ids: list[int]) -> dict[int, PendingInfo]:
    """The latest cycle's reason and estimate for each job; new jobs wait for their first cycle."""
    if not job_ids:
        return {}
    raw = _client().get(PENDING_KEY)
    document = json.loads(raw) if raw else {}
    info = {}
    for job_id in job_ids:
        reason, estimate, *rest = document.get(str(job_id), (NEW_JOB_REASON, None))
        waits_for = rest[0] if rest else None  # documents written before it was kept have no third field
        info[job_id] = PendingInfo(reason, None if estimate is None else float(estimate), waits_for)
    return info

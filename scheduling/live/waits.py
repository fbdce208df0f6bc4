"""Why each pending job waits and when it should start: the engine's `PendingStatus` for every
queued job of the latest committed plan, kept for the pages and the API. Recomputed by every cycle,
so it lives in Redis (one JSON document, replaced whole after each committed tick), not in the job
rows.

"Pending" names one thing in Fleetline: the job state (`Job.State.PENDING`, a job that is queued).
The engine's answer for such a job is a `PendingStatus` in `Plan.pending`; the stored copy that
readers get is a `JobWait`; the pages list a job with its wait as a `selectors.JobRow`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django.conf import settings

from portal.redis_pools import shared_redis
from scheduling import engine
from scheduling.engine.vocabulary import REASON_NEW

# The document's key: its name predates `JobWait` and stays, so a running fleet keeps its waits.
WAITS_KEY = "fleetline:pending"
NEW_JOB_REASON = REASON_NEW


@dataclass(frozen=True, slots=True)
class JobWait:
    reason: str
    estimated_start_s: float | None
    # What the job waits for when there is no estimate to believe (`engine.PendingStatus.waits_for`).
    waits_for: str | None = None


def _client() -> redis.Redis:
    return shared_redis(settings.REDIS_URL)


def job_waits_store(*, statuses: Iterable[engine.PendingStatus]) -> None:
    document = {
        status.job_id: [
            status.reason,
            None if status.estimated_start_s is None else round(status.estimated_start_s),
            status.waits_for,
        ]
        for status in statuses
    }
    _client().set(WAITS_KEY, json.dumps(document, separators=(",", ":")))


def job_waits_for(*, job_ids: list[int]) -> dict[int, JobWait]:
    """The latest cycle's reason and estimate for each job; new jobs wait for their first cycle."""
    if not job_ids:
        return {}
    raw = _client().get(WAITS_KEY)
    document = json.loads(raw) if raw else {}
    waits = {}
    for job_id in job_ids:
        reason, estimate, *rest = document.get(str(job_id), (NEW_JOB_REASON, None))
        waits_for = rest[0] if rest else None  # documents written before it was kept have no third field
        waits[job_id] = JobWait(reason, None if estimate is None else float(estimate), waits_for)
    return waits

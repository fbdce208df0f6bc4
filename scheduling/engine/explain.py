"""Step 6 of the cycle: a reason and an estimated start for every job that did not start.

Estimates are cheap and deterministic: a fluid sweep over each accelerator's release profile,
with the GPU-seconds of the jobs ahead in the queue consumed first (see `ReleaseProfile`).
Jobs held back by quota also wait for their own team's running work to end.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from .backfill import ReleaseProfile, expected_end_s
from .capacity import CapacityIndex
from .model import Job, Running
from .plan import REASON_CAPACITY, REASON_QUOTA, PendingStatus
from .quota import QuotaLedger

Curve = tuple[list[float], list[int], list[float]]


def explain_pending(
    queue: list[Job],
    *,
    started: set[str],
    reasons: dict[str, str],
    estimates: dict[str, float | None],
    profiles: dict[str, ReleaseProfile],
    index: CapacityIndex,
    ledger: QuotaLedger,
    running: list[Running],
    now: float,
    elastic: bool,
) -> tuple[PendingStatus, ...]:
    """One `PendingStatus` per job of `queue` that did not start, in queue order."""
    statuses: list[PendingStatus] = []
    demand: dict[str, float] = {}
    held = index.held
    free_now = {
        name: pool.total_free + sum(held[node_id] for node_id in held if node_id in pool.free)
        for name, pool in index.pools.items()
    }
    team_releases: dict[tuple[str, str], list[tuple[float, int]]] | None = None
    curves: dict[str, Curve] = {}
    for job in queue:
        job_id = job.id
        if job_id in started:
            continue
        accelerator = job.accelerator
        reason = reasons.get(job_id, REASON_CAPACITY)
        estimate: float | None = None
        if job_id in estimates:
            estimate = estimates[job_id]
        elif accelerator in profiles:
            curve = curves.get(accelerator)
            if curve is None:
                curve = curves[accelerator] = profiles[accelerator].curve(free_now[accelerator])
            estimate = _estimate(curve, job.gpus, demand.get(accelerator, 0.0))
            if reason == REASON_QUOTA and estimate is not None:
                if team_releases is None:
                    team_releases = _team_releases(running, now)
                estimate = _quota_estimate(job, estimate, ledger, team_releases, elastic)
        limit_s = job.time_limit_s
        work_s = job.duration_s if limit_s is None else limit_s
        demand[accelerator] = demand.get(accelerator, 0.0) + job.gpus * work_s
        statuses.append(PendingStatus(job_id, reason, estimate))
    return tuple(statuses)


def _estimate(curve: Curve, gpus: int, demand_ahead_gpu_s: float) -> float | None:
    """`ReleaseProfile.estimate`, inlined for the one call per pending job."""
    times, levels, areas = curve
    final = levels[-1]
    if gpus > final or final <= 0:
        return None
    index = bisect_right(areas, demand_ahead_gpu_s) - 1
    while levels[index] == 0:
        index += 1
    work_time = times[index] + max(0.0, demand_ahead_gpu_s - areas[index]) / levels[index]
    first = times[bisect_left(levels, gpus)]
    return first if first > work_time else work_time


def _quota_estimate(
    job: Job,
    estimate: float,
    ledger: QuotaLedger,
    team_releases: dict[tuple[str, str], list[tuple[float, int]]],
    elastic: bool,
) -> float | None:
    """Not before the team's own running work has ended enough to admit the job."""
    size = job.min_gpus if elastic and job.is_elastic and job.min_gpus is not None else job.gpus
    limit = ledger.limit(job.team, job.accelerator)
    if size > limit:
        return None
    excess = ledger.used(job.team, job.accelerator) + size - limit
    if excess <= 0:
        return estimate
    freed = 0
    for end_s, gpus in team_releases.get((job.team, job.accelerator), []):
        freed += gpus
        if freed >= excess:
            return max(estimate, end_s)
    return None


def _team_releases(running: list[Running], now: float) -> dict[tuple[str, str], list[tuple[float, int]]]:
    releases: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for run in running:
        key = (run.job.team, run.job.accelerator)
        releases.setdefault(key, []).append((expected_end_s(run, now), run.gpus))
    for entries in releases.values():
        entries.sort()
    return releases

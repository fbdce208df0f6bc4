"""Step 6 of the cycle: a reason and an estimated start for every job that did not start.

Estimates are cheap and deterministic: a fluid sweep over each accelerator's release profile,
with the GPU-seconds of the jobs ahead in the queue consumed first (see `ReleaseProfile`).
Jobs held back by quota also wait for their own team's running work to end.
"""

from __future__ import annotations

from bisect import bisect_left

from .model import Job
from .plan import REASON_CAPACITY, REASON_QUOTA, REASON_TOPOLOGY, PendingStatus, pending_status
from .prepare import Prepared
from .quota import QuotaLedger

Curve = tuple[list[float], list[int], list[float]]
STARTED = "started"  # in a cycle's reasons: the job starts, there is nothing to explain


def explain_pending(
    queue: list[Job],
    prepared: Prepared,
    reasons: list[str | None],
    estimates: dict[str, float | None],
    elastic: bool,
) -> tuple[PendingStatus, ...]:
    """One `PendingStatus` per job of `queue` that did not start, in queue order, from the cycle's
    working state at its end (`prepared`, as the cycle left it) and its reasons by queue position
    (None: capacity)."""
    profiles, index, ledger = prepared.profiles, prepared.index, prepared.ledger
    statuses: list[PendingStatus] = []
    append = statuses.append
    make = pending_status
    demand: dict[str, float] = {}
    held = index.held
    free_now = {
        name: pool.total_free + sum(held[node_id] for node_id in held if node_id in pool.free)
        for name, pool in index.pools.items()
    }
    team_releases: dict[tuple[str, str], list[tuple[float, int]]] | None = None
    # Per accelerator: its curve, and the earliest time `gpus` GPUs are free at all, which depends
    # only on the size (once per size).
    sweeps: dict[str, tuple[list[float], list[int], list[float], dict[int, float | None]]] = {}
    # The accelerator whose sweep and queue demand are loaded in locals (most queues have one).
    # The demand ahead only grows along the queue, so the curve is walked forward, not searched.
    current: str | None = None
    ahead = 0.0
    walk = 0
    walks: dict[str, int] = {}
    times: list[float] | None = None
    levels: list[int] = []
    areas: list[float] = []
    firsts: dict[int, float | None] = {}
    for job, reason in zip(queue, reasons, strict=True):
        if reason is STARTED:
            continue
        job_id = job.id
        accelerator = job.accelerator
        if accelerator != current:
            if current is not None:
                demand[current], walks[current] = ahead, walk
            current, ahead, times = accelerator, demand.get(accelerator, 0.0), None
            walk = walks.get(accelerator, 0)
            if accelerator in profiles:
                sweep = sweeps.get(accelerator)
                if sweep is None:
                    curve = profiles[accelerator].curve(free_now[accelerator])
                    sweep = sweeps[accelerator] = (*curve, {})
                times, levels, areas, firsts = sweep
        gpus = job.gpus
        if reason is None:
            reason = REASON_CAPACITY
        estimate: float | None = None
        if job_id in estimates:
            estimate = estimates[job_id]
        elif times is not None:
            if gpus in firsts:
                first = firsts[gpus]
            else:
                first = firsts[gpus] = _first_time((times, levels, areas), gpus)
            if first is not None:
                # When the queue ahead's GPU-seconds have been served (the fluid part of the estimate).
                last = len(areas) - 1
                while walk < last and areas[walk + 1] <= ahead:
                    walk += 1
                at = walk
                while levels[at] == 0:
                    at += 1
                over = ahead - areas[at]
                estimate = times[at] + (over if over > 0.0 else 0.0) / levels[at]
                if first > estimate:
                    estimate = first
                if reason == REASON_QUOTA:
                    if team_releases is None:
                        team_releases = {key: sorted(ends) for key, ends in prepared.team_releases.items()}
                    estimate = _quota_estimate(job, estimate, ledger, team_releases, elastic)
        limit_s = job.time_limit_s
        ahead += gpus * (job.duration_s if limit_s is None else limit_s)
        append(make(job_id, reason, estimate))
    return tuple(statuses)


def topology_waits(queue: list[Job], reasons: list[str | None]) -> tuple[PendingStatus, ...]:
    """Without explanations: only the jobs waiting on topology, in queue order."""
    topology = REASON_TOPOLOGY
    return tuple(
        pending_status(job.id, topology, None) for job, reason in zip(queue, reasons, strict=True) if reason == topology
    )


def _first_time(curve: Curve, gpus: int) -> float | None:
    """When `gpus` GPUs are first free at all; None when the accelerator can never hold them."""
    times, levels, _ = curve
    final = levels[-1]
    if gpus > final or final <= 0:
        return None
    return times[bisect_left(levels, gpus)]


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

"""Queue order: priority class, then fair share, then the within-team policy, then job id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter

from .model import Job, Policy


def within_team_key(policy: Policy) -> Callable[[Job], float]:
    if policy.within_team_order == "shortest_limit":
        return lambda job: job.estimate_s
    if policy.within_team_order == "las":
        return lambda job: job.attained_gpu_s
    return lambda job: job.submit_s


def order_jobs(jobs: Iterable[Job], policy: Policy, factors: Mapping[str, float]) -> list[Job]:
    """Pending jobs in the order the cycle considers them.

    Higher priority first; then the team with the lower fair-share factor (when fair share is on);
    then the within-team order (submit time, shortest time limit, or least attained service),
    with submit time and finally the job id as explicit tie-breakers. Implemented as stable
    sorts from the last key to the first, which is much faster than building key tuples.
    """
    ordered = sorted(jobs, key=attrgetter("id"))
    ordered.sort(key=attrgetter("submit_s"))
    if policy.within_team_order != "submit":
        ordered.sort(key=within_team_key(policy))
    if policy.fairshare and factors:
        ordered.sort(key=lambda job: factors.get(job.team, 0.0))
    ordered.sort(key=attrgetter("priority"), reverse=True)
    return ordered

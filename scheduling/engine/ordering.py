"""Queue order: priority class, then fair share with age, then the within-team policy, then job id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from operator import attrgetter, le

from .model import Job, Policy


def within_team_key(policy: Policy) -> Callable[[Job], float]:
    if policy.within_team_order == "shortest_limit":
        return lambda job: job.estimate_s
    if policy.within_team_order == "las":
        return lambda job: job.attained_gpu_s
    return lambda job: job.submit_s


def order_jobs(jobs: Iterable[Job], policy: Policy, priorities: Mapping[str, float], now: float) -> list[Job]:
    """Pending jobs in the order the cycle considers them.

    Higher priority class first; then, when fair share is on, the higher score: the team's
    fair-share priority (`fairshare.fairshare_priorities`, 1.0 for a team that used nothing) plus,
    as in Slurm's multifactor priority, `age_weight` x the job's wait over `max_age_s` (capped at
    1), so that a heavy team's jobs are not starved for ever; then the within-team order (submit
    time, shortest time limit, or least attained service), with submit time and finally the job id
    as explicit tie-breakers. With an age weight, the within-team order only ranks jobs of equal
    score (jobs of one team that have all waited `max_age_s`). Implemented as stable sorts from
    the last key to the first, which is much faster than building key tuples.
    """
    ordered = list(jobs)
    submit_s = attrgetter("submit_s")
    if all(map(le, map(submit_s, ordered), map(submit_s, islice(ordered, 1, None)))):
        # Already in submit order (arrival order, usually): one nearly free pass orders the ties.
        ordered.sort(key=attrgetter("submit_s", "id"))
    else:
        ordered.sort(key=attrgetter("id"))
        ordered.sort(key=submit_s)
    if policy.within_team_order != "submit":
        ordered.sort(key=within_team_key(policy))
    if policy.fairshare and priorities:
        # One sort for class and score: scores lie in (0, 1 + weight], so whole priority classes
        # (integers) times `span` stay apart.
        weight, max_age_s = max(0.0, policy.age_weight), policy.max_age_s
        span = 2.0 + weight
        if weight > 0.0 and max_age_s > 0.0:
            oldest, per_s = now - max_age_s, weight / max_age_s
            ordered.sort(
                key=lambda job: (
                    job.priority * span
                    + priorities.get(job.team, 1.0)
                    + (weight if job.submit_s <= oldest else (now - job.submit_s) * per_s)
                ),
                reverse=True,
            )
        else:
            ordered.sort(key=lambda job: job.priority * span + priorities.get(job.team, 1.0), reverse=True)
        return ordered
    ordered.sort(key=attrgetter("priority"), reverse=True)
    return ordered

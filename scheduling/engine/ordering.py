"""Queue order: priority class, then fair share with age, then the within-team policy, then job id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from operator import attrgetter, eq

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
    score (jobs of one team that have all waited `max_age_s`).

    Class and score make one number per job, computed as the jobs come, in the order they lie in
    memory: on a long queue, reading every job in any other order costs a cache miss each, which
    made sorting key by key the slowest part of ordering. Only runs of equal numbers are then
    sorted by the tie-breakers.
    """
    score = _score(policy, priorities, now)
    scores: list[float] = []
    keep = scores.append

    def scored(job: Job) -> float:
        value = score(job)
        keep(value)
        return value

    queue = list(jobs)
    queue.sort(key=scored, reverse=True)  # stable: equal scores keep their order, sorted below
    scores.sort(reverse=True)  # now the score of each queue position
    if any(map(eq, scores, islice(scores, 1, None))):
        tiebreak = _tiebreak(policy)
        start = 0
        for end in range(1, len(queue) + 1):
            if end == len(queue) or scores[end] != scores[start]:
                if end - start > 1:
                    queue[start:end] = sorted(queue[start:end], key=tiebreak)
                start = end
    return queue


def _score(policy: Policy, priorities: Mapping[str, float], now: float) -> Callable[[Job], float]:
    """Higher goes first: whole priority classes (integers) times `span` stay apart, as fair-share
    scores lie in (0, 1 + age weight]."""
    if not (policy.fairshare and priorities):
        return lambda job: job.priority
    weight, max_age_s = max(0.0, policy.age_weight), policy.max_age_s
    span, team_priority = 2.0 + weight, priorities.get
    if weight > 0.0 and max_age_s > 0.0:
        oldest, per_s = now - max_age_s, weight / max_age_s
        return lambda job: (
            job.priority * span
            + team_priority(job.team, 1.0)
            + (weight if job.submit_s <= oldest else (now - job.submit_s) * per_s)
        )
    return lambda job: job.priority * span + team_priority(job.team, 1.0)


def _tiebreak(policy: Policy) -> Callable[[Job], tuple[float | str, ...]]:
    """Within-team order, then submit time, then job id."""
    if policy.within_team_order == "submit":
        return attrgetter("submit_s", "id")
    within = within_team_key(policy)
    return lambda job: (within(job), job.submit_s, job.id)

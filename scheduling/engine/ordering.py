"""Queue order: priority class, then fair share, then the within-team policy, then job id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .model import Job, Policy

OrderKey = tuple[int, float, float, float, str]


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
    with submit time and finally the job id as explicit tie-breakers.
    """
    secondary = within_team_key(policy)
    use_fairshare = policy.fairshare

    def key(job: Job) -> OrderKey:
        share = factors.get(job.team, 0.0) if use_fairshare else 0.0
        return (-job.priority, share, secondary(job), job.submit_s, job.id)

    return sorted(jobs, key=key)

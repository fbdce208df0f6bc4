"""Template filters for how long a job has run and how long its time limit leaves it, both on
the fleet clock."""

from __future__ import annotations

from django import template

from scheduling.listed import ListedJob
from scheduling.models import Job

register = template.Library()


@register.filter
def elapsed_s(job: Job | ListedJob, now_s: float) -> float | None:
    """Fleet seconds since the job's current run started; None when it is not running."""
    if job.state != Job.State.RUNNING or job.started_s is None:
        return None
    return max(0.0, now_s - job.started_s)


@register.filter
def limit_left_s(job: Job | ListedJob, now_s: float) -> float | None:
    """Fleet seconds until the job's time limit ends its run; None without a limit or a run."""
    if job.state != Job.State.RUNNING or job.started_s is None or job.time_limit_s is None:
        return None
    return max(0.0, job.started_s + job.time_limit_s - now_s)


@register.filter
def limit_at_s(job: Job | ListedJob) -> float | None:
    """The fleet second at which the job's time limit ends its current run; None without either."""
    if job.state != Job.State.RUNNING or job.started_s is None or job.time_limit_s is None:
        return None
    return job.started_s + job.time_limit_s

"""Freeing GPUs: the guarded writes that a user's cancel (`services.jobs.job_cancel`), a serving
deployment's scale-down (`cycle.serving`) and the plan's apply (`cycle.apply`) share, kept apart
from both so that the cycle does not import the user actions."""

from __future__ import annotations

from collections import defaultdict

from django.db import transaction
from django.db.models import Case, F, IntegerField, Value, When

from scheduling.models import Allocation, Job, Node, SchedulerEvent


def nodes_shift(deltas: dict[int, int]) -> None:
    """Add ``deltas`` to nodes' allocated GPUs in one statement; the database's check
    constraint refuses a result above a node's GPUs."""
    deltas = {node_id: d for node_id, d in deltas.items() if d}
    if not deltas:
        return
    shift = Case(*(When(pk=node_id, then=Value(d)) for node_id, d in deltas.items()), output_field=IntegerField())
    Node.objects.filter(pk__in=list(deltas)).update(allocated_gpus=F("allocated_gpus") + shift)


def allocations_release(job_id: int) -> None:
    """Free a job's GPUs: its allocations removed and its nodes' counters given back."""
    freed: dict[int, int] = defaultdict(int)
    for node_id, gpus in Allocation.objects.filter(job_id=job_id).values_list("node_id", "gpus"):
        freed[node_id] -= gpus
    Allocation.objects.filter(job_id=job_id).delete()
    nodes_shift(freed)


def jobs_release(*, job_ids: list[int], sim_now_s: float, reason: str) -> list[int]:
    """Cancel pending or running jobs, freeing their GPUs. Returns the ids actually cancelled."""
    cancelled: list[int] = []
    for job_id, team_id, state, version in (
        Job.objects.filter(pk__in=job_ids, state__in=Job.ACTIVE_STATES)
        .order_by("id")
        .values_list("id", "team_id", "state", "version")
    ):
        with transaction.atomic():
            if not Job.objects.filter(pk=job_id, state=state, version=version).update(
                state=Job.State.CANCELLED,
                finished_s=sim_now_s,
                version=F("version") + 1,
                grace_until_s=None,
            ):
                continue
            allocations_release(job_id)
            SchedulerEvent.objects.create(
                job_id=job_id, team_id=team_id, kind=SchedulerEvent.Kind.CANCELLED, sim_time_s=sim_now_s, message=reason
            )
            cancelled.append(job_id)
    return cancelled

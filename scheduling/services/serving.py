"""Serving deployments follow their demand curves: replicas are serving jobs, added when demand
rises and cancelled (newest first, pending before running) when it falls."""

from __future__ import annotations

from collections import defaultdict

from scheduling.engine.demand import DiurnalDemand
from scheduling.limits import MAX_DURATION_S
from scheduling.models import Job, JobKind, SchedulerEvent, ServingDeployment
from scheduling.services.jobs import jobs_release

# Serving replicas run until scaled down; their "duration" is the longest a job may carry (a year
# of fleet time), far beyond a demand period, so scaling down ends them first.
SERVING_DURATION_S = MAX_DURATION_S


def deployments_reconcile(*, sim_now_s: float) -> int:
    """Bring every active deployment to its demand at ``sim_now_s``; returns replicas changed."""
    deployments = list(ServingDeployment.objects.filter(active=True).order_by("id"))
    if not deployments:
        return 0
    replicas: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for job_id, deployment_id, state in Job.objects.filter(
        deployment__in=deployments, state__in=Job.ACTIVE_STATES
    ).values_list("id", "deployment_id", "state"):
        replicas[deployment_id].append((job_id, state))
    changed = 0
    for deployment in deployments:
        demand = DiurnalDemand(
            deployment.min_replicas, deployment.max_replicas, deployment.peak_hour, deployment.period_h
        )
        want, have = demand.replicas_at(sim_now_s), replicas[deployment.id]
        if want > len(have):
            _replicas_add(deployment, want - len(have), sim_now_s)
        elif want < len(have):
            # Pending replicas go first, then the newest running ones.
            surplus = sorted(have, key=lambda r: (r[1] != Job.State.PENDING, -r[0]))[: len(have) - want]
            jobs_release(
                job_ids=[job_id for job_id, _ in surplus], sim_now_s=sim_now_s, reason="Scaled down with demand"
            )
        changed += abs(want - len(have))
    return changed


def _replicas_add(deployment: ServingDeployment, count: int, sim_now_s: float) -> None:
    jobs = Job.objects.bulk_create(
        Job(
            team_id=deployment.team_id,
            deployment=deployment,
            name=f"{deployment.name}-replica",
            kind=JobKind.SERVING,
            priority_class_id=deployment.priority_class_id,
            accelerator_type_id=deployment.accelerator_type_id,
            gpus=deployment.gpus_per_replica,
            duration_s=SERVING_DURATION_S,
            submit_s=sim_now_s,
        )
        for _ in range(count)
    )
    SchedulerEvent.objects.bulk_create(
        SchedulerEvent(
            job=job,
            team_id=deployment.team_id,
            kind=SchedulerEvent.Kind.SUBMITTED,
            sim_time_s=sim_now_s,
            message="Replica added with demand",
        )
        for job in jobs
    )

"""Serving deployments follow their demand curves: replicas are serving jobs, added when demand
rises and cancelled when it falls, in the order the simulator withdraws them
(`engine.serving.withdrawal_order`: pending before running, newest first). Attainment of the
start-latency objective is a read (`scheduling.selectors.serving_attainment_over`)."""

from __future__ import annotations

from collections import defaultdict

from scheduling.engine.demand import DiurnalDemand
from scheduling.engine.serving import withdrawal_order
from scheduling.job_release import jobs_release
from scheduling.limits import MAX_DURATION_S
from scheduling.models import Job, JobKind, SchedulerEvent, ServingDeployment

# Serving replicas run until scaled down; their "duration" is the longest a job may carry (a year
# of fleet time), far beyond a demand period, so scaling down ends them first.
SERVING_DURATION_S = MAX_DURATION_S


def deployment_demand(deployment: ServingDeployment) -> DiurnalDemand:
    return DiurnalDemand(deployment.min_replicas, deployment.max_replicas, deployment.peak_hour, deployment.period_h)


def deployments_reconcile(*, sim_now_s: float) -> int:
    """Bring every active deployment to its demand at ``sim_now_s``; returns replicas changed."""
    deployments = list(ServingDeployment.objects.filter(active=True).order_by("id"))
    if not deployments:
        return 0
    replicas: dict[int, list[tuple[str, bool]]] = defaultdict(list)
    for job_id, deployment_id, state in (
        Job.objects.filter(deployment__in=deployments, state__in=Job.ACTIVE_STATES)
        .order_by("id")
        .values_list("id", "deployment_id", "state")
    ):
        replicas[deployment_id].append((str(job_id), state == Job.State.RUNNING))
    changed = 0
    for deployment in deployments:
        want, have = deployment_demand(deployment).replicas_at(sim_now_s), replicas[deployment.id]
        if want > len(have):
            _replicas_add(deployment, want - len(have), sim_now_s)
        elif want < len(have):
            surplus = withdrawal_order(have)[: len(have) - want]
            jobs_release(
                job_ids=[int(job_id) for job_id in surplus], sim_now_s=sim_now_s, reason="Scaled down with demand"
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

"""Serving deployments follow their demand curves: replicas are serving jobs, added when demand
rises and cancelled when it falls, in the order the simulator withdraws them
(`engine.serving.withdrawal_order`: pending before running, newest first). Attainment of the
start-latency objective is measured by the simulator's own function (`engine.serving.slo_attainment`)
on the replicas' rows."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Q

from scheduling.engine.demand import DiurnalDemand
from scheduling.engine.serving import DEFAULT_SLO_S, Attainment, ReplicaRecord, slo_attainment, withdrawal_order
from scheduling.job_release import jobs_release
from scheduling.limits import MAX_DURATION_S
from scheduling.models import Job, JobKind, SchedulerEvent, ServingDeployment

# Serving replicas run until scaled down; their "duration" is the longest a job may carry (a year
# of fleet time), far beyond a demand period, so scaling down ends them first.
SERVING_DURATION_S = MAX_DURATION_S
# Deployments carry no objective of their own yet: every replica is held to the simulator's default.
SERVING_SLO_S = DEFAULT_SLO_S
FLEET_DAY_S = 86400.0


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


_ENDED = (Job.State.CANCELLED, Job.State.COMPLETED, Job.State.TIMED_OUT)
_REPLICA_FIELDS = ("id", "submit_s", "state", "started_s", "anchor_s", "finished_s", "restarts")


def serving_attainment_over(*, since_s: float, until_s: float) -> Attainment:
    """Attainment of every deployment's replicas over fleet time [since_s, until_s), as the
    simulator measures it (`serving_slo_attainment`, `serving_start_p99_s`). Two queries.

    A replica serves from its start plus its handover or restore (the row's progress anchor);
    for the earlier runs of a replica restarted after a node failure, from the start its event
    records."""
    rows = list(
        Job.objects.filter(deployment__isnull=False, submit_s__lt=until_s)
        .filter(Q(finished_s__isnull=True) | Q(finished_s__gt=since_s))
        .order_by("id")
        .values_list(*_REPLICA_FIELDS, named=True)
    )
    history: dict[int, list[tuple[str, float]]] = defaultdict(list)
    restarted = [row.id for row in rows if row.restarts]
    if restarted:
        for job_id, kind, time_s in (
            SchedulerEvent.objects.filter(
                job_id__in=restarted, kind__in=(SchedulerEvent.Kind.STARTED, SchedulerEvent.Kind.EVICTED)
            )
            .order_by("job_id", "sim_time_s", "id")
            .values_list("job_id", "kind", "sim_time_s")
        ):
            history[job_id].append((kind, time_s))
    records = [_replica_record(row, history.get(row.id, [])) for row in rows]
    return slo_attainment(records, SERVING_SLO_S, (since_s, until_s))


def _replica_record(row: Any, events: list[tuple[str, float]]) -> ReplicaRecord:
    ended_s = row.finished_s if row.state in _ENDED else None
    current = _serving_from(row)
    if not events:
        return ReplicaRecord(row.submit_s, ended_s, ((current, ended_s),) if current is not None else ())
    runs: list[tuple[float, float | None]] = []
    for kind, time_s in events:
        if kind == SchedulerEvent.Kind.STARTED:
            runs.append((time_s, None))
        elif runs and runs[-1][1] is None:
            runs[-1] = (runs[-1][0], time_s)
    if runs and runs[-1][1] is None:
        last_from = current if current is not None and current >= runs[-1][0] else runs[-1][0]
        runs[-1] = (last_from, ended_s)
    return ReplicaRecord(row.submit_s, ended_s, tuple(runs))


def _serving_from(row: Any) -> float | None:
    started_s, anchor_s = row.started_s, row.anchor_s
    if started_s is None:
        return None
    return anchor_s if anchor_s is not None and anchor_s >= started_s else started_s


def serving_attainment_last_day(*, sim_now_s: float) -> Attainment:
    """Attainment over the last fleet day (the dashboard's figure)."""
    return serving_attainment_over(since_s=max(0.0, sim_now_s - FLEET_DAY_S), until_s=sim_now_s)

"""Load what one cycle needs from the database and rebuild the engine's FleetState from it.

Gangs on a failed node progress as the engine's recovery model says (`engine.recovery`, as in the
simulator): stalled on a node that crashed or lost a GPU until the tick that finds it out, slowed
on a slow node until its incident closes (`node_throttles`). Their rows hold their progress as of
the tick's start (`scheduling.cycle.failures.throttled_progress_write` re-anchors them each tick),
so the FleetState applies the slowdown from there (`FleetState.throttle_node`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Q

from scheduling import engine
from scheduling.bulk_rows import by_ids
from scheduling.convert import (
    JOB_FIELDS,
    NODE_FIELDS,
    JobCache,
    node_from_row,
    policy_from_row,
    quota_from_row,
    team_from_row,
)
from scheduling.engine.fairshare import decay_usage
from scheduling.limits import MAX_DURATION_S
from scheduling.models import Allocation, Incident, Job, Node, TeamUsage
from tenants.models import Quota, Team
from tenants.selectors import fleet_policy_for_cycle

# Per process: a worker reuses the engine jobs of its previous tick.
_JOB_CACHE = JobCache()


@dataclass
class Loaded:
    """The database as one cycle saw it, and the FleetState rebuilt from it."""

    sim_now_s: float
    state: engine.FleetState
    teams: tuple[engine.Team, ...]
    quotas: tuple[engine.Quota, ...]
    policy: engine.Policy
    usage: tuple[tuple[str, float], ...]
    jobs: dict[str, Any]  # job id -> row (a named tuple of JOB_FIELDS)
    allocations: dict[str, tuple[tuple[str, int], ...]]
    nodes: tuple[engine.Node, ...]
    team_usage: dict[int, tuple[float, float]] = field(default_factory=dict)
    throttled: dict[str, float] = field(default_factory=dict)  # node id -> slowdown (`node_throttles`)


@dataclass(frozen=True, slots=True)
class FleetTables:
    """The small tables a cycle reads whole every tick: teams, quotas, the policy and the usage."""

    teams: tuple[engine.Team, ...]
    quotas: tuple[engine.Quota, ...]
    policy: engine.Policy
    team_usage: dict[int, tuple[float, float]]
    usage: tuple[tuple[str, float], ...]


def fleet_tables(*, sim_now_s: float) -> FleetTables:
    """Teams, quotas, the policy and each team's usage decayed to ``sim_now_s``: four queries."""
    teams = tuple(
        team_from_row(row) for row in Team.objects.order_by("id").values("id", "department_id", "fairshare_weight")
    )
    quotas = tuple(
        quota_from_row(row)
        for row in Quota.objects.order_by("id").values(
            "team_id", "accelerator_type__name", "guaranteed", "borrow_limit", "lend_limit"
        )
    )
    policy = policy_from_row(fleet_policy_for_cycle())
    team_usage = {
        team_id: (value, as_of)
        for team_id, value, as_of in TeamUsage.objects.values_list("team_id", "decayed_gpu_s", "as_of_s")
    }
    usage = tuple(
        (str(team_id), decay_usage(value, sim_now_s - as_of, policy.fairshare_half_life_s))
        for team_id, (value, as_of) in sorted(team_usage.items())
    )
    return FleetTables(teams, quotas, policy, team_usage, usage)


def job_rows(*, ids: list[int] | None = None) -> dict[str, Any]:
    """The active jobs (or those of ``ids`` that are active), by id, in id order."""
    active = Job.objects.filter(state__in=Job.ACTIVE_STATES)
    if ids is None:
        return {str(row.id): row for row in active.order_by("id").values_list(*JOB_FIELDS, named=True)}
    rows: dict[str, Any] = {}
    for chunk in by_ids(active.order_by("id"), sorted(ids)):
        rows.update((str(row.id), row) for row in chunk.values_list(*JOB_FIELDS, named=True))
    return rows


def running_allocations(*, ids: list[int] | None = None) -> dict[str, tuple[tuple[str, int], ...]]:
    """The allocations of the running jobs (or of those of ``ids`` that run), by job id."""
    allocations: dict[str, list[tuple[str, int]]] = {}
    running = Allocation.objects.filter(job__state=Job.State.RUNNING).order_by("job_id", "node_id")
    for chunk in [running] if ids is None else by_ids(running, ids, field="job_id"):
        for job_id, node_id, gpus in chunk.values_list("job_id", "node_id", "gpus"):
            allocations.setdefault(str(job_id), []).append((str(node_id), gpus))
    return {job_id: tuple(alloc) for job_id, alloc in allocations.items()}


def snapshot_build(*, sim_now_s: float, real_runs: bool = False) -> Loaded:
    """Eight queries, whatever the size of the fleet and the queue. ``real_runs``: the jobs run on a
    real backend, which says when they end; the engine's model of their work never ends them."""
    nodes = tuple(node_from_row(row) for row in Node.objects.order_by("id").values_list(*NODE_FIELDS, named=True))
    jobs = job_rows()
    allocations = running_allocations()
    tables = fleet_tables(sim_now_s=sim_now_s)
    state = _state_restore(nodes, jobs, allocations, tables.policy, sim_now_s, real_runs)
    throttled = node_throttles(sim_from_s=sim_now_s)
    throttles_apply(state, throttled, sim_now_s)
    return Loaded(
        sim_now_s=sim_now_s,
        state=state,
        teams=tables.teams,
        quotas=tables.quotas,
        policy=tables.policy,
        usage=tables.usage,
        jobs=jobs,
        allocations=allocations,
        nodes=nodes,
        team_usage=tables.team_usage,
        throttled=throttled,
    )


def throttles_apply(
    state: engine.FleetState, throttled: dict[str, float], sim_now_s: float, *, lifted: Iterable[str] = ()
) -> None:
    """Slow the gangs on each failed node (``node_throttles``) from ``sim_now_s``, after bringing
    those on the ``lifted`` nodes back to full speed. The worst slowdown last: a gang on two failed
    nodes goes at the slower one's pace."""
    for node_id in sorted(set(lifted) - set(throttled)):
        state.throttle_node(node_id, 1.0, sim_now_s)
    for failed_node, slowdown in sorted(throttled.items(), key=lambda item: (item[1], item[0])):
        state.throttle_node(failed_node, slowdown, sim_now_s)


def node_throttles(*, sim_from_s: float) -> dict[str, float]:
    """How many times slower the gangs on each failed node progress in a tick from `sim_from_s`
    (`engine.recovery.node_slowdown`): a node that crashed or lost a GPU stalls them (`math.inf`)
    through the tick that finds it out; a slow node slows them until its incident closes."""
    stalled = Q(kind__in=(Incident.Kind.DEAD, Incident.Kind.DEGRADED)) & (
        Q(detected_at__isnull=True) | Q(detected_at__gt=sim_from_s)
    )
    slowed = Q(kind=Incident.Kind.SLOW, resumed_at__isnull=True)
    throttles: dict[str, float] = {}
    for node_id, kind, slowdown in Incident.objects.filter(stalled | slowed).values_list("node_id", "kind", "slowdown"):
        pace = math.inf if kind != Incident.Kind.SLOW else slowdown
        throttles[str(node_id)] = max(pace, throttles.get(str(node_id), 1.0))
    return throttles


def _state_restore(
    nodes: tuple[engine.Node, ...],
    jobs: dict[str, Any],
    allocations: dict[str, tuple[tuple[str, int], ...]],
    policy: engine.Policy,
    sim_now_s: float,
    real_runs: bool = False,
) -> engine.FleetState:
    state = engine.FleetState(
        nodes,
        level_penalty=policy.level_penalty,
        usage_half_life_s=policy.fairshare_half_life_s,
        checkpoint_events=False,
        now=sim_now_s,
    )
    for (job_id, row), job in zip(jobs.items(), _JOB_CACHE.jobs_from_rows(list(jobs.values())), strict=True):
        job_add(state, row, job, allocations.get(job_id), real_runs=real_runs)
    return state


def job_add(
    state: engine.FleetState,
    row: Any,
    job: engine.Job,
    allocation: tuple[tuple[str, int], ...] | None,
    *,
    real_runs: bool,
) -> None:
    """Put one job's row into the FleetState: running on its allocation from its anchor, or queued
    with the progress its checkpoint kept."""
    if real_runs:
        # Its time limit still ends it (the backend enforces the same limit).
        job = replace(job, duration_s=MAX_DURATION_S)
    if row.state == Job.State.RUNNING and allocation:
        state.restore(
            job,
            allocation,
            start_s=row.started_s,
            borrowing=row.borrowing,
            anchor_s=row.anchor_s,
            anchor_progress_s=row.anchor_progress_s,
            base_progress_s=row.base_progress_s,
            grace_until_s=row.grace_until_s,
        )
    else:
        state.submit(job, saved_progress_s=row.saved_progress_s)

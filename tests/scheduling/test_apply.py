"""Applying a plan: in bulk (the default) and job by job (the definition) write the same database,
including when jobs changed under the tick or a gang no longer fits; a burst of starts costs a
fixed number of statements."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from django.db.models import F, Sum

from scheduling import engine
from scheduling.cycle.apply import plan_apply
from scheduling.cycle.snapshot import Loaded, snapshot_build
from scheduling.job_release import jobs_release
from scheduling.models import Allocation, FleetClock, Job, Node, SchedulerEvent
from scheduling.tick_outcome import AppliedTick
from tests.factories import QuotaFactory, TeamFactory
from tests.scheduling.conftest import Fleet, build_fleet


@dataclass
class PlannedTick:
    """A tick decided but not yet written: what ``cycle_tick`` hands to ``plan_apply``."""

    loaded: Loaded
    plan: engine.Plan
    events: list[engine.Event]
    sim_now_s: float

    def apply(self, *, bulk: bool) -> AppliedTick:
        return plan_apply(loaded=self.loaded, plan=self.plan, events=self.events, sim_now_s=self.sim_now_s, bulk=bulk)


def _plan_next_tick(step_s: float = 60.0) -> PlannedTick:
    sim_from = FleetClock.objects.get(pk=1).sim_now_s
    sim_to = sim_from + step_s
    loaded = snapshot_build(sim_now_s=sim_from)
    events = loaded.state.advance(sim_to)
    snapshot = loaded.state.snapshot(sim_to, loaded.teams, loaded.quotas, loaded.policy, loaded.usage)
    plan = engine.schedule(snapshot, sim_to, kept=loaded.state.kept())
    events += loaded.state.apply(plan, sim_to)
    return PlannedTick(loaded, plan, events, sim_to)


def _database() -> dict[str, Any]:
    """Everything a tick writes, without the ids the database hands out."""
    return {
        "jobs": list(Job.objects.order_by("id").values()),
        "allocations": sorted(Allocation.objects.values_list("job_id", "node_id", "gpus")),
        "nodes": list(Node.objects.order_by("id").values_list("id", "allocated_gpus")),
        "events": sorted(SchedulerEvent.objects.values_list("job_id", "team_id", "kind", "sim_time_s", "message")),
    }


def _outcome(apply: Callable[[], AppliedTick]) -> tuple[AppliedTick, dict[str, Any]]:
    """What ``apply`` wrote, then rolled back so that the other way starts from the same rows."""
    with transaction.atomic():
        applied = apply()
        written = _database()
        transaction.set_rollback(True)
    return applied, written


def _booked_consistently() -> None:
    for node in Node.objects.all():
        held = Allocation.objects.filter(node=node).aggregate(total=Sum("gpus"))["total"] or 0
        assert node.allocated_gpus == held <= node.gpus


def _random_workload(fleet: Fleet, rng: random.Random, jobs: int) -> None:
    other = Fleet(fleet.accelerator, fleet.nodes, fleet.team, fleet.training, fleet.serving)
    other.team = TeamFactory(name=f"Vision {rng.random()}", slug=f"vision-{rng.randrange(10**9)}")
    QuotaFactory(team=other.team, accelerator_type=fleet.accelerator, guaranteed=32, borrow_limit=96)
    for i in range(jobs):
        submitter = rng.choice((fleet, other))
        extra: dict[str, object] = {}
        if rng.random() < 0.3:
            extra["time_limit_s"] = rng.choice((90.0, 200.0, 7200.0))
        if rng.random() < 0.5:
            extra["checkpoint_interval_s"] = 600.0
        if rng.random() < 0.15:
            extra.update(kind="serving", priority_class_id=fleet.serving.pk)
        submitter.submit(
            gpus=rng.choice((1, 1, 2, 4, 8, 8, 16, 32)),
            duration_s=rng.choice((45.0, 100.0, 600.0, 3600.0)),
            name=f"job-{i}",
            **extra,
        )


def _interfere(planned: PlannedTick, rng: random.Random) -> None:
    """What may happen between a tick's read and its writes: users cancel jobs, and GPUs the plan
    counts on are booked by someone else."""
    active = list(Job.objects.filter(state__in=Job.ACTIVE_STATES).values_list("id", flat=True))
    for job_id in rng.sample(active, k=min(len(active), rng.choice((1, 3)))):
        jobs_release(job_ids=[job_id], sim_now_s=planned.sim_now_s, reason="Cancelled meanwhile")
    taken = sorted(
        {int(node) for run in planned.plan.actions if isinstance(run, engine.Start) for node, _ in run.allocation}
    )
    for node_id in rng.sample(taken, k=min(len(taken), rng.choice((1, 2)))):
        Node.objects.filter(pk=node_id).update(allocated_gpus=F("gpus"))


@pytest.mark.parametrize("seed", range(12))
def test_bulk_and_job_by_job_writes_leave_the_same_database(db: None, seed: int) -> None:
    rng = random.Random(seed)
    fleet = build_fleet(racks=4, nodes_per_rack=4)
    _random_workload(fleet, rng, jobs=rng.randrange(10, 40))
    for _ in range(rng.randrange(0, 4)):
        fleet.tick(wall_step_s=rng.choice((1.0, 2.0)))
        _random_workload(fleet, rng, jobs=rng.randrange(0, 10))
    planned = _plan_next_tick(step_s=rng.choice((60.0, 120.0)))
    if seed % 2:
        _interfere(planned, rng)

    one_by_one, by_definition = _outcome(lambda: planned.apply(bulk=False))
    bulk, in_bulk = _outcome(lambda: planned.apply(bulk=True))

    assert in_bulk == by_definition
    assert bulk == one_by_one


def test_a_job_changed_after_the_tick_read_it_is_skipped_and_the_rest_of_the_burst_lands(fleet: Fleet) -> None:
    jobs = [fleet.submit(gpus=8, name=f"burst-{i}") for i in range(4)]
    planned = _plan_next_tick()
    jobs_release(job_ids=[jobs[1].pk], sim_now_s=planned.sim_now_s, reason="Cancelled by its owner")

    applied = planned.apply(bulk=True)

    assert applied.skipped == [jobs[1].pk]
    states = dict(Job.objects.values_list("id", "state"))
    assert [states[job.pk] for job in jobs] == ["running", "cancelled", "running", "running"]
    assert not Allocation.objects.filter(job=jobs[1]).exists()
    assert not SchedulerEvent.objects.filter(job=jobs[1], kind=SchedulerEvent.Kind.STARTED).exists()
    _booked_consistently()


def test_a_gang_whose_nodes_were_taken_meanwhile_is_left_out_whole_and_the_others_land(fleet: Fleet) -> None:
    gang = fleet.submit(gpus=16, name="gang")
    singles = [fleet.submit(gpus=4, name=f"single-{i}") for i in range(4)]
    planned = _plan_next_tick()
    (start,) = [a for a in planned.plan.actions if isinstance(a, engine.Start) and a.job_id == str(gang.pk)]
    gang_nodes = [int(node) for node, _ in start.allocation]
    # Someone else booked one of the gang's nodes (and holds an allocation there) since the read.
    squatter = fleet.submit(gpus=8, name="squatter")
    Job.objects.filter(pk=squatter.pk).update(state=Job.State.RUNNING, version=F("version") + 1)
    Allocation.objects.create(job=squatter, node_id=gang_nodes[0], gpus=8)
    Node.objects.filter(pk=gang_nodes[0]).update(allocated_gpus=8)

    applied = planned.apply(bulk=True)

    assert applied.skipped == [gang.pk]
    gang.refresh_from_db()
    assert gang.state == Job.State.PENDING
    assert not Allocation.objects.filter(job=gang).exists()
    assert set(Job.objects.filter(pk__in=[s.pk for s in singles]).values_list("state", flat=True)) == {"running"}
    _booked_consistently()


@pytest.mark.parametrize("jobs", [3, 30])
def test_a_burst_of_starts_is_written_in_the_same_number_of_statements_for_3_jobs_or_30(
    db: None, jobs: int, django_assert_num_queries: Any
) -> None:
    fleet = build_fleet(racks=4, nodes_per_rack=4)
    for i in range(jobs):
        fleet.submit(gpus=(1, 2, 4)[i % 3], name=f"burst-{i}")
    planned = _plan_next_tick()

    # A savepoint around the group, the guarded update, the allocations, the node counters, the
    # savepoint's release, the scheduler events.
    with django_assert_num_queries(6):
        applied = planned.apply(bulk=True)

    assert applied.count(SchedulerEvent.Kind.STARTED) == jobs
    assert Job.objects.filter(state=Job.State.RUNNING).count() == jobs
    _booked_consistently()

"""The fleet state a leader keeps between ticks (``scheduling.cycle.kept``) is the state a fresh
build from the database gives, tick after tick, through random submissions, cancels, failures,
policy and priority class changes and changes of leader (run on PostgreSQL too)."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from scheduling import engine
from scheduling.cycle import kept
from scheduling.cycle.kept import fleet_load, kept_fleet_forget, kept_fleet_rebuilds, kept_fleet_ticked
from scheduling.cycle.snapshot import Loaded, snapshot_build
from scheduling.cycle.tick import clock_get
from scheduling.job_release import nodes_shift
from scheduling.models import Allocation, Job
from scheduling.services.jobs import job_cancel
from tenants.models import FleetPolicy, PriorityClass
from tests.scheduling.conftest import Fleet, build_fleet

pytestmark = pytest.mark.django_db

STEPS = 60


def _run(loaded: Loaded, job_id: str) -> tuple[Any, ...]:
    record = loaded.state.running[job_id]
    now = loaded.state.now
    return (
        record.job,
        record.allocation,
        record.start_s,
        record.level,
        record.borrowing,
        record.grace_until_s,
        record.base_progress,
        pytest.approx(record.progress_at(now), abs=1e-6),
        pytest.approx(record.rate, rel=1e-9),
    )


def _digest(loaded: Loaded) -> dict[str, Any]:
    """What the engine sees of a FleetState, and the plan it makes from it."""
    state = loaded.state
    snapshot = state.snapshot(state.now, loaded.teams, loaded.quotas, loaded.policy, loaded.usage)
    plan = engine.schedule(snapshot, state.now, kept=state.kept())
    return {
        "now": state.now,
        "nodes": dict(state.nodes),
        "node_used": {node_id: used for node_id, used in state.node_used.items() if used},
        "running": {job_id: _run(loaded, job_id) for job_id in sorted(state.running)},
        "pending": dict(sorted(state.pending.items())),
        "saved": {job_id: kept_s for job_id, kept_s in sorted(state.saved_progress.items()) if job_id in state.pending},
        "next_event": pytest.approx(state.next_event_time()),
        "rows": {job_id: loaded.jobs[job_id] for job_id in sorted(loaded.jobs)},
        "allocations": {job_id: loaded.allocations[job_id] for job_id in sorted(loaded.allocations)},
        "throttled": loaded.throttled,
        "actions": plan.actions,
    }


def _kept_equals_fresh(fleet: Fleet) -> bool:
    """Reconcile the kept state as the next tick would and compare it with a fresh build; put it
    back as kept. True when it was reconciled (not rebuilt)."""
    clock = clock_get()
    before = sum(kept_fleet_rebuilds().values())
    loaded = fleet_load(
        sim_now_s=clock.sim_now_s, tick=clock.ticks + 1, previous=(clock.ticks, clock.leader_token), real_runs=False
    )
    reconciled = sum(kept_fleet_rebuilds().values()) == before
    fresh = snapshot_build(sim_now_s=clock.sim_now_s)
    assert _digest(loaded) == _digest(fresh)
    kept_fleet_ticked(loaded=loaded, tick=clock.ticks, token=clock.leader_token)
    return reconciled


def _another_leader_ticks(fleet: Fleet) -> None:
    """Another worker leads for one tick; this worker's kept state is then a tick behind."""
    mine = kept._KEEPER.kept
    kept._KEEPER.kept = None
    assert fleet.tick() is not None
    kept._KEEPER.kept = mine


def _step(fleet: Fleet, rng: random.Random, admin: User) -> None:
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        serving = rng.random() < 0.1
        fleet.submit(
            gpus=rng.choice((1, 2, 4, 8, 8, 16, 32)),
            duration_s=rng.uniform(300, 7200),
            kind="serving" if serving else "training",
            priority_class_id=fleet.serving.pk if serving else fleet.training.pk,
            checkpoint_interval_s=rng.choice((None, 600.0)),
        )
    active = list(Job.objects.filter(state__in=Job.ACTIVE_STATES).order_by("id"))
    if active and rng.random() < 0.25:
        job_cancel(job=rng.choice(active), user=admin)
    if rng.random() < 0.08:
        FleetPolicy.objects.update(preemption_grace_s=rng.choice((30.0, 60.0, 120.0)))
    if rng.random() < 0.05:
        PriorityClass.objects.filter(pk=fleet.training.pk).update(value=rng.choice((200, 300, 400)))
    if rng.random() < 0.08:
        _another_leader_ticks(fleet)


@override_settings(FLEET_FAILURES=True)
def test_the_kept_state_equals_a_fresh_build_after_every_tick() -> None:
    fleet = build_fleet(racks=4, nodes_per_rack=4)
    admin = User.objects.create_user("admin-kept", is_staff=True, is_superuser=True)
    rng = random.Random(46)
    reconciled = 0
    for _ in range(STEPS):
        _step(fleet, rng, admin)
        assert fleet.tick(wall_step_s=rng.choice((1.0, 2.0, 5.0))) is not None
        reconciled += _kept_equals_fresh(fleet)
    # Most ticks reconcile; the rest rebuilt for a reason the keeper names.
    assert reconciled > STEPS // 2
    assert set(kept_fleet_rebuilds()) <= {kept.FIRST, kept.LEADER, kept.SHAPE, kept.NODES, kept.EVERY_N}
    assert Job.objects.filter(state=Job.State.RUNNING).exists()


@override_settings(FLEET_CYCLE_REBUILD_EVERY=3)
def test_the_kept_state_is_rebuilt_every_n_ticks_and_after_another_leader(fleet: Fleet) -> None:
    fleet.submit(gpus=8)
    counts = []
    for _ in range(6):
        fleet.tick()
        counts.append(kept_fleet_rebuilds().get(kept.EVERY_N, 0))
    assert counts[-1] >= 1
    leader = kept_fleet_rebuilds().get(kept.LEADER, 0)
    _another_leader_ticks(fleet)
    fleet.tick()
    assert kept_fleet_rebuilds().get(kept.LEADER, 0) == leader + 1


def test_drift_between_the_kept_state_and_the_database_rebuilds(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8)
    fleet.tick()
    fleet.tick()
    node_id = Allocation.objects.get(job=job).node_id
    # A write behind the keeper's back that bumps no version: the booked GPUs tell.
    nodes_shift({node_id: -1})
    drift = kept_fleet_rebuilds().get(kept.DRIFT, 0)
    fleet.tick()
    assert kept_fleet_rebuilds().get(kept.DRIFT, 0) == drift + 1
    nodes_shift({node_id: +1})
    fleet.tick()
    assert kept_fleet_rebuilds().get(kept.DRIFT, 0) == drift + 1
    assert _kept_equals_fresh(fleet)


def test_the_kept_state_is_frozen_between_ticks_and_unfrozen_when_dropped(fleet: Fleet, settings: Any) -> None:
    """Out of the cyclic collector's sight between ticks (its full collections would traverse it
    every tick), and back in it once dropped, so that its cycles are collected."""
    settings.FLEET_CYCLE_FREEZE_FROM = 5  # four nodes and a job
    fleet.submit(gpus=8)
    fleet.tick()
    assert gc.get_freeze_count() > 0
    kept_fleet_forget()
    assert gc.get_freeze_count() == 0
    fleet.tick()  # rebuilds, and freezes what it keeps
    assert gc.get_freeze_count() > 0
    assert fleet.tick() is not None  # reconciles the frozen state


def test_a_state_too_small_to_matter_is_not_frozen(fleet: Fleet, settings: Any) -> None:
    """Freezing costs a collection of the whole process at each rebuild: not for four nodes."""
    settings.FLEET_CYCLE_FREEZE_FROM = 6
    kept_fleet_forget()
    frozen = gc.get_freeze_count()
    fleet.submit(gpus=8)
    fleet.tick()
    assert gc.get_freeze_count() == frozen
    fleet.submit(gpus=8)
    fleet.tick()  # four nodes and two jobs
    assert gc.get_freeze_count() > frozen

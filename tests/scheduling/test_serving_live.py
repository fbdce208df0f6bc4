"""The live cycle's serving step and its attainment, measured as the simulator measures it."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduling.cycle.serving import deployment_demand
from scheduling.cycle.snapshot import snapshot_build
from scheduling.engine.serving import Deployment
from scheduling.models import Job, ServingDeployment
from scheduling.selectors import SERVING_SLO_S, serving_attainment_over
from scheduling.sim.serving import ServingHook
from scheduling.sim.simulator import run_simulation
from tests.factories import MembershipFactory, PriorityClassFactory
from tests.scheduling.conftest import Fleet, build_fleet

pytestmark = pytest.mark.django_db

HOUR_S = 3600.0


@pytest.fixture
def small_fleet(db: None) -> Fleet:
    """Two 8-GPU nodes: too small for three 8-GPU replicas at the peak."""
    return build_fleet(racks=1, nodes_per_rack=2)


def _deployment(fleet: Fleet) -> ServingDeployment:
    # An hour-long curve: no replica at its ends, three at half past.
    return ServingDeployment.objects.create(
        team=fleet.team,
        name="chat",
        priority_class=fleet.serving,
        accelerator_type=fleet.accelerator,
        gpus_per_replica=8,
        min_replicas=0,
        max_replicas=3,
        peak_hour=0.5,
        period_h=1.0,
    )


def test_the_live_attainment_equals_the_simulators_on_the_same_scenario(small_fleet: Fleet) -> None:
    deployment = _deployment(small_fleet)
    small_fleet.submit(gpus=8, duration_s=10 * HOUR_S, checkpoint_on_preempt=True)
    # The simulator replays what the live cycle sees now: nodes, teams, quotas, policy, the queue.
    loaded = snapshot_build(sim_now_s=0.0)
    spec = Deployment(
        deployment.name,
        str(small_fleet.team.pk),
        deployment_demand(deployment),
        gpus_per_replica=8,
        slo_s=SERVING_SLO_S,
        accelerator=small_fleet.accelerator.name,
        priority=small_fleet.serving.value,
    )
    hook = ServingHook(
        [spec],
        capacity_gpus=16,
        start_s=0.0,
        until_s=HOUR_S,
        grace_s=loaded.policy.preemption_grace_s,
        level_penalty=loaded.policy.level_penalty,
    )
    run_simulation(
        list(loaded.state.pending.values()),
        loaded.nodes,
        loaded.policy,
        teams=loaded.teams,
        quotas=loaded.quotas,
        hooks=[hook],
    )
    simulated = hook.attainment()

    for _ in range(60):  # an hour of fleet time, a tick a minute
        small_fleet.tick()
    live = serving_attainment_over(since_s=0.0, until_s=HOUR_S)

    assert simulated.fraction is not None and 0.0 < simulated.fraction < 1.0  # the peak went unserved
    assert live.demanded_s == pytest.approx(simulated.demanded_s)
    assert live.met_s == pytest.approx(simulated.met_s)
    assert sorted(live.start_latencies_s) == pytest.approx(sorted(simulated.start_latencies_s))


def test_falling_demand_cancels_pending_replicas_before_running_ones(small_fleet: Fleet) -> None:
    _deployment(small_fleet)
    for _ in range(30):  # to the peak: three asked, two running
        small_fleet.tick()
    replicas = Job.objects.filter(deployment__isnull=False)
    assert replicas.filter(state=Job.State.RUNNING).count() == 2
    assert replicas.filter(state=Job.State.PENDING).count() == 1
    while replicas.filter(state__in=Job.ACTIVE_STATES).count() == 3:
        small_fleet.tick()
    assert replicas.filter(state=Job.State.RUNNING).count() == 2
    assert replicas.filter(state=Job.State.PENDING).count() == 0


def test_a_training_job_never_evicts_a_live_replica(small_fleet: Fleet) -> None:
    _deployment(small_fleet)
    for _ in range(30):
        small_fleet.tick()
    # Training of a class above serving's, allowed to preempt: still no replica is its victim.
    above = PriorityClassFactory(name="urgent-training", value=1000, may_preempt=True)
    urgent = small_fleet.submit(gpus=16, duration_s=HOUR_S, priority_class_id=above.pk)
    for _ in range(5):
        small_fleet.tick()
    assert Job.objects.filter(deployment__isnull=False, state=Job.State.RUNNING).count() == 2
    urgent.refresh_from_db()
    assert urgent.state == Job.State.PENDING


def test_the_dashboard_shows_serving_attainment_over_the_last_fleet_day(small_fleet: Fleet, client: Client) -> None:
    client.force_login(MembershipFactory(team=small_fleet.team).user)
    assert "Serving SLO attainment" in client.get("/").content.decode()
    _deployment(small_fleet)
    for _ in range(60):
        small_fleet.tick()
    expected = serving_attainment_over(since_s=0.0, until_s=HOUR_S)
    page = client.get("/").content.decode()
    assert expected.percent is not None and expected.percent < 100.0
    assert f"{expected.percent:.2f}%" in page

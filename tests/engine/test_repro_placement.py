"""Regressions: required levels under every policy, and reservations that start when their nodes
are really free (topology slowdown, shrinks and preemptions earlier in the same plan, shrinks later
in it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.engine import (
    FleetState,
    Job,
    Node,
    Policy,
    Quota,
    Reserve,
    Running,
    Shrink,
    Snapshot,
    Team,
    schedule,
    schedule_reference,
)
from scheduling.engine.reference import FAST_PATH_QUIRKS

from .builders import Scenario, job, reason_of, running, started

NOW = 50_000.0
POLICIES = {
    "fifo": Policy.fifo(),
    "easy": Policy.easy(),
    "default without topology awareness": replace(Policy(), topology_aware=False),
    "default": Policy(),
}


def _two_pods_one_rack_name() -> tuple[Node, ...]:
    """n0 and n2 share rack p0/r0; n1 is in another pod (its rack p1/r0 is another rack)."""
    return (Node("n0", "p0", "r0", "a100"), Node("n1", "p1", "r0", "a100"), Node("n2", "p0", "r0", "a100"))


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_a_gang_with_a_required_rack_starts_on_an_empty_fleet_under_every_policy(policy: Policy) -> None:
    gang = job("g", 16, required_level="rack", time_limit_s=7200.0)
    small = job("s", 1, submit_s=10.0, time_limit_s=120.0)
    plan = Scenario(_two_pods_one_rack_name()).policy(policy).pending(gang, small).plan(now=1000.0)

    assert {node for node, _ in started(plan)["g"]} == {"n0", "n2"}
    assert "s" in started(plan)


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_a_gang_with_a_required_pod_takes_nodes_of_one_pod_under_every_policy(policy: Policy) -> None:
    nodes = (Node("a", "p1", "r0", "a100"), Node("b", "p0", "r0", "a100"), Node("c", "p0", "r1", "a100"))
    plan = Scenario(nodes).policy(policy).pending(job("g", 16, required_level="pod")).plan()

    assert {node for node, _ in started(plan)["g"]} == {"b", "c"}


def test_without_topology_awareness_a_rack_bound_gang_is_reserved_the_first_rack_to_free() -> None:
    nodes = (*_two_pods_one_rack_name(), Node("n3", "p1", "r0", "a100"))
    scenario = Scenario(nodes).with_running(
        running(job("a", 8, time_limit_s=100.0), on="n0"),
        running(job("b", 8, time_limit_s=50.0), on="n1"),
        running(job("c", 8, time_limit_s=300.0), on="n2"),
        running(job("d", 8, time_limit_s=60.0), on="n3"),
    )
    plan = scenario.policy(Policy.easy()).pending(job("g", 16, required_level="rack")).plan()

    assert plan.of_type(Reserve) == (Reserve("g", ("n1", "n3"), 60.0),)
    assert reason_of(plan, "g") == "capacity"


def _spread_gang() -> tuple[Running, Job, tuple[Node, ...]]:
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p1", "r0", "a100"))
    spread = Job("r", "t0", "training", 5, True, "a100", 16, 3000.0, 0.0, None)
    return Running(spread, (("n0", 8), ("n1", 8)), NOW - 2800.0, 2000.0, 2000.0, False), spread, nodes


def test_a_reservation_waits_for_the_topology_slowdown_of_a_running_job_without_a_time_limit() -> None:
    run, spread, nodes = _spread_gang()
    head = Job("h", "t0", "training", 5, True, "a100", 16, 3600.0, NOW - 10, 7200.0)
    snapshot = Snapshot(nodes, (run,), (head,), (Team("t0", "d0"),), (), Policy(preemption=False), ())
    plan = schedule(snapshot, NOW)
    state = FleetState(nodes, now=NOW)
    state.restore(
        spread, run.allocation, start_s=run.start_s, borrowing=False, anchor_s=NOW, anchor_progress_s=2000.0,
        base_progress_s=0.0,
    )  # fmt: skip

    (reservation,) = plan.of_type(Reserve)
    assert reservation.start_s == state.next_event_time() == NOW + 1000.0 * 1.4
    status = plan.status_of("h")
    assert status is not None and status.estimated_start_s == reservation.start_s


def test_a_job_after_a_preemption_sees_the_victims_other_nodes_come_free() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100"))
    victim = Job("v", "t0", "training", 0, True, "a100", 16, 20000.0, 0.0, 12000.0)
    run = Running(victim, (("n0", 8), ("n1", 8)), NOW - 2000.0, 2000.0, 1800.0, False)
    urgent = Job("p", "t0", "training", 10, True, "a100", 8, 3600.0, NOW - 10, 7200.0)
    head = Job("h", "t0", "training", 5, True, "a100", 8, 3600.0, NOW - 20, 7200.0)
    plan = schedule(Snapshot(nodes, (run,), (urgent, head), (Team("t0", "d0"),), (), Policy(), ()), NOW)

    # The victim leaves both nodes within its grace period: the urgent job takes one, and the next
    # job the other, by then, not when the victim's time limit would have ended (NOW + 10,000).
    nodes_of = {start.job_id: {node for node, _ in start.allocation} for start in plan.starts()}
    nodes_of |= {reservation.job_id: set(reservation.node_ids) for reservation in plan.of_type(Reserve)}
    assert nodes_of["p"] | nodes_of["h"] == {"n0", "n1"}
    reserved = {reservation.job_id: reservation.start_s for reservation in plan.of_type(Reserve)}
    assert reserved.get("h", NOW) <= NOW + 30.0
    status = plan.status_of("h")
    assert status is None or (status.estimated_start_s is not None and status.estimated_start_s <= NOW + 30.0)


def test_a_job_shrunk_for_a_preemptor_is_expected_to_end_later_on_the_nodes_it_keeps() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100"))
    elastic = Job("e", "t0", "training", 0, True, "a100", 16, 3000.0, 0.0, None, min_gpus=8, max_gpus=16)
    run = Running(elastic, (("n0", 8), ("n1", 8)), NOW - 2000.0, 2000.0, 2000.0, False)
    urgent = Job("p", "t0", "training", 10, True, "a100", 8, 3600.0, NOW - 10, 7200.0)
    head = Job("h", "t0", "training", 5, True, "a100", 8, 3600.0, NOW - 20, 7200.0)
    plan = schedule(Snapshot(nodes, (run,), (urgent, head), (Team("t0", "d0"),), (), Policy(), ()), NOW)

    (shrink,) = plan.of_type(Shrink)
    reservations = {reservation.job_id: reservation for reservation in plan.of_type(Reserve)}
    assert reservations["h"].node_ids == tuple(node for node, _ in shrink.allocation)
    # 1,000 s of work left at full size take 2,000 s at half of it.
    state = FleetState(nodes, now=NOW)
    state.restore(
        elastic, shrink.allocation, start_s=run.start_s, borrowing=False, anchor_s=NOW, anchor_progress_s=2000.0,
        base_progress_s=0.0,
    )  # fmt: skip
    assert reservations["h"].start_s == state.next_event_time() == NOW + 2000.0


def test_without_topology_awareness_a_small_job_takes_a_rack_bound_gangs_rack_when_no_other_node_has_room() -> None:
    nodes = _two_pods_one_rack_name()
    scenario = Scenario(nodes).with_running(running(job("r", 8, time_limit_s=5000.0), on="n1"))
    gang = job("g", 16, required_level="rack", time_limit_s=7200.0)
    small = job("s", 1, submit_s=10.0, time_limit_s=120.0)
    plan = scenario.policy(replace(Policy(), topology_aware=False)).pending(gang, small).plan(now=1000.0)

    # The small job goes first (shortest limit) and only the gang's rack has room: it first-fits there.
    assert started(plan)["s"] == (("n0", 1),)
    assert "g" not in started(plan)


# repro_11 of an outside harness: a shrink later in the plan slowed a job on a node reserved earlier
# in it, so the node freed after the reservation's start.
def _reserved_then_shrinkable(on_reserved: bool) -> Snapshot:
    """g (may not preempt) reserves the node r frees first, n0; p may then shrink elastic r (16 GPUs,
    at least 8, 60 s of work left), which runs on n0 and n1, or (not `on_reserved`) on n1 and n2
    with 8-GPU job x on n0 ending at the same time."""
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100"), Node("n2", "p0", "r0", "a100"))
    elastic = Job("r", "t0", "training", 1, True, "a100", 16, 3600.0, NOW - 5000, None, 8, 16)
    r = Running(
        elastic, (("n0", 8), ("n1", 8)) if on_reserved else (("n1", 8), ("n2", 8)), NOW - 4000, 3540.0, 3000.0, False
    )
    x = Running(
        Job("x", "t0", "training", 50, True, "a100", 8, 600.0, NOW - 600, 660.0),
        (("n0", 8),),
        NOW - 600,
        600.0,
        600.0,
        False,
    )
    blocker = Running(
        Job("z", "t0", "training", 50, True, "a100", 8, 9000.0, NOW - 600, 9600.0),
        (("n2", 8),),
        NOW - 600,
        600.0,
        600.0,
        False,
    )
    running = (r, blocker) if on_reserved else (r, x)
    g = Job("g", "t0", "training", 10, True, "a100", 8, 600.0, NOW - 100, 600.0, may_preempt=False)
    p = Job("p", "t0", "training", 5, True, "a100", 8, 600.0, NOW - 100, 600.0)
    return Snapshot(nodes, running, (g, p), (Team("t0", "d0"),), (Quota("t0", "a100", 40, 0),), Policy())


def test_a_job_on_a_node_reserved_earlier_in_the_plan_is_not_shrunk_past_the_reservations_start() -> None:
    snapshot = _reserved_then_shrinkable(on_reserved=True)
    plan = schedule(snapshot, NOW)

    assert plan.of_type(Reserve) == (Reserve("g", ("n0",), NOW + 60.0),)
    # Shrunk to 8 GPUs, r would hold n0 until NOW + 120 s: p waits rather than delay g.
    assert plan.of_type(Shrink) == ()
    assert "p" not in started(plan)
    assert schedule_reference(snapshot, NOW, quirks=FAST_PATH_QUIRKS) == plan


def test_a_job_off_the_reserved_nodes_is_still_shrunk_for_a_preemptor() -> None:
    snapshot = _reserved_then_shrinkable(on_reserved=False)
    plan = schedule(snapshot, NOW)

    assert plan.of_type(Reserve) == (Reserve("g", ("n0",), NOW + 60.0),)
    assert plan.of_type(Shrink) == (Shrink("r", (("n2", 8),), 8),)
    assert started(plan)["p"] == (("n1", 8),)
    assert schedule_reference(snapshot, NOW, quirks=FAST_PATH_QUIRKS) == plan

"""Regressions: a cordoned node keeps its running jobs and takes no new ones, also when a handover
evicts a victim running there (repro_8, repro_9 and repro_10 of an outside harness): the victim's
GPUs on it never come free, neither for a start in the same plan nor for a later reservation, and
the fast engine plans it without failing, as the reference does."""

from __future__ import annotations

import pytest

from scheduling.engine import (
    FleetState,
    Job,
    Node,
    Plan,
    Policy,
    Preempt,
    Quota,
    Rejected,
    Reserve,
    Running,
    Snapshot,
    Started,
    Team,
    schedule,
    schedule_reference,
)
from scheduling.engine.reference import FAST_PATH_QUIRKS

NOW = 100_000.0


def _cordoned(plan: Plan, snapshot: Snapshot) -> list[tuple[str, tuple[str, ...]]]:
    """Every start and reservation of `plan` that names a cordoned node."""
    cordoned = {node.id for node in snapshot.nodes if node.cordoned}
    on = [(start.job_id, tuple(node for node, _ in start.allocation)) for start in plan.starts()]
    on += [(reservation.job_id, reservation.node_ids) for reservation in plan.of_type(Reserve)]
    return [(job_id, node_ids) for job_id, node_ids in on if cordoned & set(node_ids)]


def _planned_by_both(snapshot: Snapshot) -> Plan:
    plan = schedule(snapshot, NOW)
    assert schedule_reference(snapshot, NOW, quirks=FAST_PATH_QUIRKS) == plan
    return plan


# repro_8: a victim's GPUs on a cordoned node were given back, and another job started there.
def _handover_beside_a_cordoned_node(grace_s: float) -> Snapshot:
    nodes = (Node("a", "p0", "r0", "a100", cordoned=True), Node("b", "p0", "r0", "a100"), Node("c", "p0", "r0", "a100"))

    def job(job_id: str, priority: int, gpus: int) -> Job:
        return Job(job_id, "t0", "training", priority, True, "a100", gpus, 3600.0, NOW - 100, 3600.0)

    running = (
        Running(job("v", 0, 16), (("a", 8), ("b", 8)), NOW - 50, 10.0, 0.0, False),
        Running(job("w", 50, 8), (("c", 8),), NOW - 50, 10.0, 0.0, False),
    )
    pending = (job("p", 10, 8), job("q", 1, 4))
    quotas = (Quota("t0", "a100", 24, 10_000),)
    return Snapshot(nodes, running, pending, (Team("t0", "d0"),), quotas, Policy(preemption_grace_s=grace_s))


@pytest.mark.parametrize("grace_s", [0.0, 30.0])
def test_a_victims_gpus_on_a_cordoned_node_do_not_come_free_for_another_start(grace_s: float) -> None:
    snapshot = _handover_beside_a_cordoned_node(grace_s)
    plan = _planned_by_both(snapshot)

    assert plan.of_type(Preempt) == (Preempt("v", "preempted-by:p", grace_s),)
    assert [(start.job_id, start.allocation) for start in plan.starts()] == [("p", (("b", 8),))]
    assert _cordoned(plan, snapshot) == []
    # q waits for w's node: the cordoned node never frees for it.
    status = plan.status_of("q")
    assert status is not None and status.estimated_start_s == NOW + 3550.0


def test_a_plan_handing_over_beside_a_cordoned_node_applies_without_a_rejection() -> None:
    snapshot = _handover_beside_a_cordoned_node(0.0)
    state = FleetState(snapshot.nodes, now=NOW)
    for run in snapshot.running:
        state.restore(
            run.job, run.allocation, start_s=run.start_s, borrowing=False, anchor_s=NOW, anchor_progress_s=10.0,
            base_progress_s=0.0,
        )  # fmt: skip
    for job in snapshot.pending:
        state.submit(job)

    events = state.apply(schedule(snapshot, NOW), NOW)

    assert [event for event in events if isinstance(event, Rejected)] == []
    assert [event.job_id for event in events if isinstance(event, Started)] == ["p"]


# repro_9: the same handover made the cordoned node look whole to a later reservation.
def test_a_gang_is_not_reserved_on_a_cordoned_node_a_handover_emptied() -> None:
    nodes = (Node("a", "p0", "r0", "a100", cordoned=True), Node("b", "p0", "r0", "a100"))
    r0 = Job("r0", "t0", "training", 1, True, "a100", 11, 80_000.0, 63_000.0, 54_600.0, checkpoint_interval_s=600.0)
    running = (Running(r0, (("a", 8), ("b", 3)), 63_264.0, 30_000.0, 29_900.0, True),)
    serving = Job("j7", "t0", "serving", 100, False, "a100", 8, 3000.0, NOW - 30_000, 5217.0)
    gang = Job("j4", "t0", "training", 10, True, "a100", 16, 50_000.0, NOW - 100_000, 99_828.0, required_level="pod")
    policy = Policy(preemption_grace_s=0.0, topology_aware=False, reservation_depth=2)
    snapshot = Snapshot(nodes, running, (serving, gang), (Team("t0", "d0"),), (), policy)
    plan = _planned_by_both(snapshot)

    assert [(start.job_id, start.replaces) for start in plan.starts()] == [("j7", ("r0",))]
    assert _cordoned(plan, snapshot) == []
    assert plan.of_type(Reserve) == ()  # one healthy node can never hold the gang


# repro_10: giving a victim's GPUs back on a rack of cordoned nodes raised the rack's free GPUs
# beyond the packing index's range (IndexError in `packing.RackPacking.moved`).
def test_a_handover_evicting_a_victim_on_cordoned_nodes_plans_as_the_reference_does() -> None:
    nodes = (
        Node("a", "p0", "r0", "a100", cordoned=True),
        Node("b", "p0", "r0", "a100", cordoned=True),
        Node("c", "p0", "r1", "a100"),
        Node("d", "p0", "r2", "a100"),
    )

    def job(job_id: str, team: str, priority: int, gpus: int) -> Job:
        return Job(job_id, team, "training", priority, True, "a100", gpus, 3600.0, NOW - 200, 3600.0)

    running = (
        Running(job("v", "t0", 1, 17), (("a", 8), ("b", 8), ("c", 1)), NOW - 50, 10.0, 0.0, False),
        Running(job("w", "t1", 50, 7), (("c", 7),), NOW - 50, 10.0, 0.0, False),
        Running(job("w2", "t1", 50, 7), (("d", 7),), NOW - 50, 10.0, 0.0, False),
    )
    # s starts first, on d's last GPU (building the packing index); p then evicts v to start on c.
    pending = (job("s", "t0", 20, 1), job("p", "t0", 10, 1))
    quotas = (Quota("t0", "a100", 40, 0), Quota("t1", "a100", 14, 0))
    snapshot = Snapshot(nodes, running, pending, (Team("t0", "d0"), Team("t1", "d0")), quotas, Policy())
    plan = _planned_by_both(snapshot)

    assert [(start.job_id, start.allocation, start.replaces) for start in plan.starts()] == [
        ("s", (("d", 1),), ()),
        ("p", (("c", 1),), ("v",)),
    ]
    assert _cordoned(plan, snapshot) == []

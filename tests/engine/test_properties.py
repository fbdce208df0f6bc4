from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    Job,
    Node,
    Plan,
    Policy,
    Preempt,
    Quota,
    Requeue,
    Reserve,
    Running,
    Shrink,
    Snapshot,
    Start,
    schedule,
)

from .strategies import snapshots

SETTINGS = settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
NOW = 10.0


def _jobs(snapshot: Snapshot) -> dict[str, Job]:
    return {job.id: job for job in snapshot.pending} | {run.job.id: run.job for run in snapshot.running}


def _node_use_after(snapshot: Snapshot, plan: Plan) -> dict[str, int]:
    requeued = {action.job_id for action in plan.actions if isinstance(action, Requeue)}
    used: dict[str, int] = {}
    for run in snapshot.running:
        if run.job.id in requeued:
            continue
        for node_id, gpus in run.allocation:
            used[node_id] = used.get(node_id, 0) + gpus
    for action in plan.actions:
        if isinstance(action, Start):
            for node_id, gpus in action.allocation:
                used[node_id] = used.get(node_id, 0) + gpus
    return used


@SETTINGS
@given(snapshots())
def test_no_node_is_ever_planned_over_its_healthy_capacity(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    nodes = {node.id: node for node in snapshot.nodes}

    for node_id, used in _node_use_after(snapshot, plan).items():
        node = nodes[node_id]
        started_here = any(node_id == n for a in plan.actions if isinstance(a, Start) for n, _ in a.allocation)
        if started_here:
            assert not node.cordoned
            assert used <= min(node.gpus, node.healthy_gpus)


@SETTINGS
@given(snapshots())
def test_gangs_start_whole_or_not_at_all(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    jobs = _jobs(snapshot)
    gpn = snapshot.policy.gpus_per_node

    for start in plan.starts():
        job = jobs[start.job_id]
        nodes = [node_id for node_id, _ in start.allocation]
        assert len(nodes) == len(set(nodes))
        low = job.min_gpus if (job.min_gpus is not None and snapshot.policy.elastic) else job.gpus
        assert low <= start.gpus <= job.gpus
        if start.gpus <= gpn:
            assert len(nodes) == 1
        else:
            assert len(nodes) == -(-start.gpus // gpn)
        assert start.job_id not in {status.job_id for status in plan.pending}
    assert {status.job_id for status in plan.pending} | {s.job_id for s in plan.starts()} == {
        job.id for job in snapshot.pending
    }
    assert len(plan.pending) == len(snapshot.pending) - len(plan.starts())


@SETTINGS
@given(snapshots())
def test_no_team_starts_beyond_its_guarantee_plus_borrow_limit(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    jobs = _jobs(snapshot)
    limits = {quota.team: quota.guaranteed + quota.borrow_limit for quota in snapshot.quotas}
    used: dict[str, int] = {}
    for run in snapshot.running:
        used[run.job.team] = used.get(run.job.team, 0) + run.gpus
    before = dict(used)
    for start in plan.starts():
        team = jobs[start.job_id].team
        used[team] = used.get(team, 0) + start.gpus
    for team, limit in limits.items():
        if used.get(team, 0) > before.get(team, 0):
            assert used[team] <= limit


@SETTINGS
@given(snapshots())
def test_victims_are_strictly_lower_priority_or_borrowing(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    jobs = _jobs(snapshot)
    runs = {run.job.id: run for run in snapshot.running}

    for action in plan.of_type(Preempt):
        assert isinstance(action, Preempt)
        victim = runs[action.job_id]
        preemptor = jobs[action.reason.removeprefix("preempted-by:")]
        assert victim.job.priority < preemptor.priority and victim.job.preemptible or victim.borrowing
        if victim.job.kind == "serving":
            assert preemptor.kind == "serving"


def _busy_at(snapshot: Snapshot, plan: Plan, time_s: float) -> dict[str, int]:
    """GPUs per node still held at `time_s` if every job runs to its time limit (or grace)."""
    jobs = _jobs(snapshot)
    leaving = {a.job_id for a in plan.actions if isinstance(a, (Preempt, Requeue))}
    resized = {a.job_id: a.allocation for a in plan.actions if isinstance(a, Shrink)}
    busy: dict[str, int] = {}
    for run in snapshot.running:
        if run.job.id in leaving and time_s >= NOW + snapshot.policy.preemption_grace_s:
            continue
        if run.grace_until_s is not None and time_s >= run.grace_until_s:
            continue
        if run.job.time_limit_s is not None and run.start_s + run.job.time_limit_s <= time_s:
            continue
        for node_id, gpus in resized.get(run.job.id, run.allocation):
            busy[node_id] = busy.get(node_id, 0) + gpus
    for start in plan.starts():
        limit = jobs[start.job_id].time_limit_s
        if limit is None or NOW + limit > time_s:
            for node_id, gpus in start.allocation:
                busy[node_id] = busy.get(node_id, 0) + gpus
    return busy


@SETTINGS
@given(snapshots())
def test_backfilled_jobs_never_delay_a_reservation(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    jobs = _jobs(snapshot)
    nodes = {node.id: node for node in snapshot.nodes}

    for reservation in plan.of_type(Reserve):
        assert isinstance(reservation, Reserve)
        job = jobs[reservation.job_id]
        # Reservations from preemption are for an elastic job's minimum size, others for its full size.
        sizes = {job.gpus} | ({job.min_gpus} if job.min_gpus is not None and snapshot.policy.elastic else set())
        busy = _busy_at(snapshot, plan, reservation.start_s)
        free = [nodes[n].usable_gpus - busy.get(n, 0) for n in reservation.node_ids]
        gpn = snapshot.policy.gpus_per_node
        assert any(
            (len(free) == 1 and free[0] >= need)
            if need <= gpn
            else (sum(free) >= need and all(f >= gpn for f in free[:-1]))
            for need in sizes
        )


@SETTINGS
@given(snapshots())
def test_the_same_input_gives_the_same_plan_and_the_snapshot_is_untouched(snapshot: Snapshot) -> None:
    before = copy.deepcopy(snapshot)

    first = schedule(snapshot, NOW)
    second = schedule(snapshot, NOW)

    assert first == second
    assert snapshot == before


@settings(max_examples=40, deadline=None, database=None)
@given(
    nodes=st.integers(1, 4),
    borrower_gpus=st.sampled_from((1, 2, 4, 8)),
    ask=st.sampled_from((1, 2, 4, 8, 16)),
    borrower_priority=st.integers(0, 100),
)
def test_a_team_asking_within_its_guarantee_gets_it_this_cycle_when_borrowers_can_be_reclaimed(
    nodes: int, borrower_gpus: int, ask: int, borrower_priority: int
) -> None:
    fleet = tuple(Node(f"n{i}", "p0", "r0", "a100") for i in range(nodes))
    capacity = 8 * nodes
    if ask > capacity:
        return
    borrowers = tuple(
        Running(
            Job(f"b{i}-{k}", "beta", "training", borrower_priority, False, "a100", borrower_gpus, 1e4, 0.0),
            ((f"n{i}", borrower_gpus),),
            0.0,
            0.0,
            0.0,
            True,
        )
        for i in range(nodes)
        for k in range(8 // borrower_gpus)
    )
    mine = Job("mine", "alpha", "training", 0, True, "a100", ask, 100.0, 1.0)
    quotas = (Quota("alpha", "a100", capacity, 0), Quota("beta", "a100", 0, capacity))
    snapshot = Snapshot(fleet, borrowers, (mine,), (), quotas, Policy(), ())

    plan = schedule(snapshot, NOW)

    got_it = any(s.job_id == "mine" for s in plan.starts()) or any(
        isinstance(a, Preempt) and a.reason == "preempted-by:mine" for a in plan.actions
    )
    assert got_it

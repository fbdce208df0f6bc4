from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

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


def _handed_over(plan: Plan) -> set[str]:
    """Jobs preempted in `plan` whose GPUs a start of the same plan takes over: they leave now."""
    return {victim for start in plan.starts() for victim in start.replaces}


def _allocations_after(snapshot: Snapshot, plan: Plan) -> dict[str, tuple[tuple[str, int], ...]]:
    """Running work as the plan leaves it: requeued and handed-over jobs gone, shrunk ones smaller."""
    gone = {action.job_id for action in plan.actions if isinstance(action, Requeue)} | _handed_over(plan)
    shrunk = {action.job_id: action.allocation for action in plan.actions if isinstance(action, Shrink)}
    return {run.job.id: shrunk.get(run.job.id, run.allocation) for run in snapshot.running if run.job.id not in gone}


def _node_use_after(snapshot: Snapshot, plan: Plan) -> dict[str, int]:
    used: dict[str, int] = {}
    for allocation in _allocations_after(snapshot, plan).values():
        for node_id, gpus in allocation:
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
    used = {}
    for job_id, allocation in _allocations_after(snapshot, plan).items():
        used[jobs[job_id].team] = used.get(jobs[job_id].team, 0) + sum(gpus for _, gpus in allocation)
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
        assert victim.job.preemptible and victim.grace_until_s is None
        assert victim.job.priority < preemptor.priority or victim.borrowing
        if victim.job.kind == "serving":
            assert preemptor.kind == "serving"


@SETTINGS
@given(snapshots(), st.data())
def test_jobs_whose_class_may_not_preempt_never_evict_or_shrink_anyone(snapshot: Snapshot, data: st.DataObject) -> None:
    """Kubernetes' preemptionPolicy `Never`: such a job starts only on room nobody has to give up;
    when every pending job is such a job, the plan evicts and shrinks nothing at all."""
    ids = sorted(job.id for job in snapshot.pending)
    polite = data.draw(st.sets(st.sampled_from(ids)) if ids else st.just(set[str]()))
    pending = tuple(replace(job, may_preempt=job.id not in polite) for job in snapshot.pending)
    plan = schedule(replace(snapshot, pending=pending), NOW)

    assert not [action for action in plan.of_type(Preempt) if action.reason.removeprefix("preempted-by:") in polite]
    assert not [start for start in plan.starts() if start.job_id in polite and start.replaces]
    if polite == set(ids):
        assert plan.of_type(Preempt) == () and plan.of_type(Shrink) == ()


@SETTINGS
@given(snapshots())
def test_every_eviction_is_matched_by_a_start_of_its_preemptor_that_uses_its_gpus(snapshot: Snapshot) -> None:
    plan = schedule(snapshot, NOW)
    runs = {run.job.id: run for run in snapshot.running}
    free_before = {node.id: node.usable_gpus for node in snapshot.nodes}
    for run in snapshot.running:
        for node_id, gpus in run.allocation:
            free_before[node_id] -= gpus

    for action in plan.actions:
        if not isinstance(action, (Preempt, Shrink)):
            continue
        takers = [start for start in plan.starts() if action.job_id in start.replaces]
        if isinstance(action, Preempt):
            assert [start.job_id for start in takers] == [action.reason.removeprefix("preempted-by:")]
            released = runs[action.job_id].allocation
        else:
            kept = dict(action.allocation)
            released = tuple((n, gpus - kept.get(n, 0)) for n, gpus in runs[action.job_id].allocation)
            takers = list(plan.starts())
        # Some start needs the released GPUs: without them it would not fit on one of its nodes
        # beside the plan's other starts there (a gang over several nodes takes whole nodes).
        whole = snapshot.policy.gpus_per_node
        assert any(
            (gpus if len(start.allocation) == 1 else whole)
            > _free_beside_other_starts(plan, start, node_id, free_before)
            and any(node_id == n and freed > 0 for n, freed in released)
            for start in takers
            for node_id, gpus in start.allocation
        )


def _free_beside_other_starts(plan: Plan, start: Start, node_id: str, free_before: dict[str, int]) -> int:
    taken = sum(gpus for other in plan.starts() if other is not start for n, gpus in other.allocation if n == node_id)
    return free_before[node_id] - taken


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
            Job(f"b{i}-{k}", "beta", "training", borrower_priority, True, "a100", borrower_gpus, 1e4, 0.0),
            ((f"n{i}", borrower_gpus),),
            0.0,
            0.0,
            0.0,
            True,
        )
        for i in range(nodes)
        for k in range(8 // borrower_gpus)
    )
    # It has waited five minutes, longer than the handover of any borrowers it needs costs them
    # per GPU it asks for (they have lost no work yet): the reclaim pays (`preemption.credited_wait_s`).
    mine = Job("mine", "alpha", "training", 0, True, "a100", ask, 100.0, NOW - 300.0)
    quotas = (Quota("alpha", "a100", capacity, 0), Quota("beta", "a100", 0, capacity))
    snapshot = Snapshot(fleet, borrowers, (mine,), (), quotas, Policy(), ())

    plan = schedule(snapshot, NOW)

    assert [start.job_id for start in plan.starts()] == ["mine"]


TEAM_NAMES = st.sampled_from(("alpha", "beta", "gamma"))


@st.composite
def _running_on(draw: st.DrawFn, node_id: str) -> list[Running]:
    """Preemptible or not, borrowing or not, elastic or not, checkpointing on preemption or not,
    with or without a limit: work filling one 8-GPU node."""
    runs, free = [], 8
    while free > 0:
        gpus = min(free, draw(st.sampled_from((1, 2, 4, 8))))
        elastic = draw(st.booleans()) and gpus >= 2
        work = Job(
            id=f"r-{node_id}-{free}",
            team=draw(TEAM_NAMES),
            kind="training",
            priority=draw(st.sampled_from((0, 5))),
            preemptible=draw(st.integers(0, 4)) > 0,
            accelerator="a100",
            gpus=gpus,
            duration_s=draw(st.floats(100.0, 1e5)),
            submit_s=0.0,
            time_limit_s=draw(st.none() | st.floats(100.0, 2e5)),
            min_gpus=1 if elastic else None,
            max_gpus=gpus if elastic else None,
            checkpoint_on_preempt=draw(st.booleans()),
        )
        progress = draw(st.floats(0.0, work.duration_s))
        runs.append(Running(work, ((node_id, gpus),), NOW - progress, progress, progress / 2, draw(st.booleans())))
        free -= gpus
    return runs


@st.composite
def reclaim_snapshots(draw: st.DrawFn) -> Snapshot:
    """A full fleet and a queue of owners and higher-priority jobs: preemption every other time."""
    per_rack = draw(st.integers(1, 3))
    nodes = tuple(Node(f"p0-r{r}-n{n}", "p0", f"r{r}", "a100") for r in range(2) for n in range(per_rack))
    running = tuple(run for node in nodes for run in draw(_running_on(node.id)))
    pending = tuple(
        Job(
            id=f"j{index}",
            team=draw(TEAM_NAMES),
            kind="training",
            priority=draw(st.sampled_from((0, 5, 10))),
            preemptible=True,
            accelerator="a100",
            gpus=draw(st.sampled_from((1, 4, 8, 16))),
            duration_s=draw(st.floats(10.0, 1e4)),
            submit_s=NOW - draw(st.floats(0.0, 4e3)),
            min_gpus=draw(st.none() | st.just(1)),
        )
        for index in range(draw(st.integers(1, 5)))
    )
    lend = draw(st.sampled_from((None, 0, 8)))
    quotas = (
        Quota("alpha", "a100", draw(st.integers(0, 16)), draw(st.integers(0, 16)), lend),
        Quota("beta", "a100", draw(st.integers(0, 8)), 48),
    )
    policy = Policy(
        reclaim_after_s=draw(st.sampled_from((None, 0.0, 1800.0))),
        reclaim_guaranteed_share=draw(st.sampled_from((1.0, 0.5, 0.0))),
    )
    return Snapshot(nodes, running, pending, (), quotas, policy, ())


def _body_of(test: Callable[..., None]) -> Callable[[Snapshot], None]:
    """A Hypothesis test's own body, run on a given snapshot (``.hypothesis.inner_test``)."""
    return test.hypothesis.inner_test  # type: ignore[attr-defined]  # given() is typed as a plain callable


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(reclaim_snapshots())
def test_under_reclaim_every_eviction_is_matched_by_a_start_and_no_node_or_team_goes_over(snapshot: Snapshot) -> None:
    _body_of(test_every_eviction_is_matched_by_a_start_of_its_preemptor_that_uses_its_gpus)(snapshot)
    _body_of(test_no_node_is_ever_planned_over_its_healthy_capacity)(snapshot)
    _body_of(test_no_team_starts_beyond_its_guarantee_plus_borrow_limit)(snapshot)
    _body_of(test_victims_are_strictly_lower_priority_or_borrowing)(snapshot)

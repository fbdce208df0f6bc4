"""Regressions: quota, preemption and elastic defects found by an outside harness, each as a plan
that must start the job or a replay that must finish."""

from __future__ import annotations

from scheduling.engine import (
    Evicted,
    FleetState,
    Grow,
    Job,
    Node,
    Policy,
    Preempt,
    Quota,
    Resized,
    Running,
    Shrink,
    Snapshot,
    Start,
    Team,
    schedule,
)

MAX_CYCLES = 200


def _replay(
    state: FleetState, teams: tuple[Team, ...], quotas: tuple[Quota, ...], now: float, until_s: float
) -> tuple[float, list[object]]:
    """The simulator's loop in small: plan, apply, re-plan at once after evictions and resizes,
    else jump to the next event (at least a minute on). Stops when no event is left before
    `until_s`; a replay that needs more than MAX_CYCLES cycles has looped."""
    seen: list[object] = []
    for _ in range(MAX_CYCLES):
        plan = schedule(state.snapshot(now, teams, quotas, Policy()), now)
        seen.extend(plan.actions)
        events = state.apply(plan, now)
        if any(isinstance(event, (Evicted, Resized)) for event in events):
            continue
        following = state.next_event_time()
        if following is None or following >= until_s:
            return now, seen  # nothing left that could change anything
        now = max(now + 60.0, following)
        state.advance(now)
    raise AssertionError(f"no end after {MAX_CYCLES} cycles at t={now}: {seen[-6:]}")


# repro_6: a job quota can never admit was refused as "capacity", so it evicted a lower-priority
# job that restarted the cycle after, forever.
REPRO_6_NODES = tuple(Node(f"n{i}", f"p{i // 2}", "r0", "gpu") for i in range(4))
REPRO_6_TEAMS = (Team("tA", "d0"), Team("tB", "d0"), Team("tC", "d1"))
REPRO_6_QUOTAS = (Quota("tA", "gpu", 8, 32, None), Quota("tB", "gpu", 16, 0, 0))


def _repro_6_jobs(serving: bool) -> tuple[Job, Job]:
    kind = "serving" if serving else "training"
    big = Job("s", "tA", kind, 100, not serving, "gpu", 24, 3600.0, 100.0)
    batch = Job("b", "tC", "batch", 5, True, "gpu", 16, 5000.0, 0.0, checkpoint_interval_s=300.0)
    return big, batch


def test_a_job_quota_can_never_admit_evicts_nobody_and_says_why() -> None:
    for serving, reason in ((True, "guarantee"), (False, "quota")):
        big, batch = _repro_6_jobs(serving)
        run = Running(batch, (("n0", 8), ("n1", 8)), 0.0, 100.0, 0.0, True)
        snapshot = Snapshot(REPRO_6_NODES, (run,), (big,), REPRO_6_TEAMS, REPRO_6_QUOTAS, Policy(), ())

        plan = schedule(snapshot, 100.0)

        assert plan.of_type(Preempt) == ()
        status = plan.status_of("s")
        assert status is not None and status.reason == reason


def test_the_replay_of_a_job_quota_can_never_admit_finishes_without_evictions() -> None:
    big, batch = _repro_6_jobs(serving=True)
    state = FleetState(REPRO_6_NODES, now=0.0)
    state.submit(batch)
    state.apply(schedule(state.snapshot(0.0, REPRO_6_TEAMS, REPRO_6_QUOTAS, Policy()), 0.0), 0.0)
    state.submit(big)

    _, seen = _replay(state, REPRO_6_TEAMS, REPRO_6_QUOTAS, 100.0, until_s=20_000.0)

    assert not any(isinstance(action, Preempt) for action in seen)
    assert state.counters().completed == 1 and set(state.pending) == {"s"}


# repro_7: a job reclaimed GPUs by shrinking an elastic job, was only reserved there, and elastic
# growth handed them straight back to another elastic job; simulated time stopped.
REPRO_7_NODES = tuple(Node(f"n{i}", "p0", "r0", "gpu") for i in range(3))
REPRO_7_TEAMS = (Team("t0", "d0"), Team("tS", "d0"), Team("tX", "d1"), Team("tY", "d1"))
REPRO_7_QUOTAS = (Quota("t0", "gpu", 8, 0, None), Quota("tS", "gpu", 6, 0, None))


def _repro_7_state() -> tuple[FleetState, Job]:
    r = Job("r", "t0", "training", 5, True, "gpu", 2, 50000.0, 0.0, 60000.0)
    srv = Job("srv", "tS", "serving", 100, False, "gpu", 6, 50000.0, 0.0, 60000.0)
    a = Job("a", "tX", "batch", 0, True, "gpu", 8, 50000.0, 0.0, 60000.0, min_gpus=1, max_gpus=16)
    b = Job("b", "tY", "batch", 0, True, "gpu", 8, 50000.0, 0.0, 60000.0, min_gpus=1, max_gpus=16)
    j = Job("j", "t0", "training", 5, True, "gpu", 8, 3000.0, 50.0, 4000.0, min_gpus=1, max_gpus=16)
    state = FleetState(REPRO_7_NODES, now=0.0)
    for job, allocation in ((r, (("n2", 2),)), (srv, (("n2", 6),)), (a, (("n0", 8),)), (b, (("n1", 8),))):
        borrowing = job.team in ("tX", "tY")
        state.restore(
            job, allocation, start_s=0.0, borrowing=borrowing, anchor_s=0.0, anchor_progress_s=0.0, base_progress_s=0.0
        )
    state.advance(100.0)
    state.submit(j)
    return state, j


def test_a_job_that_reclaims_by_shrinking_starts_in_the_same_plan_at_what_its_guarantee_allows() -> None:
    state, _ = _repro_7_state()

    plan = schedule(state.snapshot(100.0, REPRO_7_TEAMS, REPRO_7_QUOTAS, Policy()), 100.0)

    assert plan.of_type(Shrink) == (Shrink("a", (("n0", 2),), 2),)
    assert plan.starts() == (Start("j", (("n0", 6),), False, "node"),)
    assert plan.of_type(Grow) == ()


def test_the_replay_of_a_reclaim_by_shrinking_moves_on_and_finishes_the_job() -> None:
    state, _ = _repro_7_state()

    end_s, seen = _replay(state, REPRO_7_TEAMS, REPRO_7_QUOTAS, 100.0, until_s=10_000.0)

    assert sum(isinstance(action, Shrink) for action in seen) == 1
    assert "j" not in state.pending and "j" not in state.running
    assert end_s > 100.0  # simulated time moved on


# repro_1: an elastic job within its guarantee was tried only at its full size and one other, and
# was told "topology".
def _repro_1(guaranteed: int, used: int = 2, others: tuple[tuple[str, int], ...] = ()) -> Snapshot:
    """Team t0 runs `used` GPUs on n0 and team t1 runs jobs on `others`; t0's elastic j5 (8 GPUs,
    at least 3) waits."""
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100"))
    small = Job("r0", "t0", "training", 5, True, "a100", used, 5000.0, 0.0, 9000.0)
    running = [Running(small, (("n0", used),), 99_900.0, 100.0, 0.0, False)]
    for index, (node_id, gpus) in enumerate(others):
        other = Job(f"o{index}", "t1", "training", 5, True, "a100", gpus, 5000.0, 0.0, 9000.0)
        running.append(Running(other, ((node_id, gpus),), 99_900.0, 100.0, 0.0, False))
    elastic = Job("j5", "t0", "training", 2, True, "a100", 8, 34000.0, 30000.0, 100000.0, min_gpus=3)
    teams, quotas = (Team("t0", "d0"), Team("t1", "d0")), (Quota("t0", "a100", guaranteed, 0, None),)
    return Snapshot(nodes, tuple(running), (elastic,), teams, quotas, Policy(), ())


def test_an_elastic_job_starts_at_the_largest_size_its_guarantee_and_a_node_allow() -> None:
    plan = schedule(_repro_1(guaranteed=8), 100_000.0)

    assert plan.starts() == (Start("j5", (("n0", 6),), False, "node"),)


def test_an_elastic_job_tries_every_size_down_to_its_minimum() -> None:
    # The guarantee leaves room for 5, n0 has 2 free and n1 has 6: 5 fits both.
    plan = schedule(_repro_1(guaranteed=8, used=3, others=(("n0", 3), ("n1", 2))), 100_000.0)

    assert plan.starts() == (Start("j5", (("n1", 5),), False, "node"),)


def test_an_elastic_job_held_back_by_its_guarantee_is_told_quota_not_topology() -> None:
    plan = schedule(_repro_1(guaranteed=4), 100_000.0)

    status = plan.status_of("j5")
    assert plan.starts() == () and status is not None and status.reason == "quota"


# repro_3: non-preemptible work on borrowed GPUs was evicted by the owners reclaiming them.
def test_non_preemptible_work_is_never_a_victim_of_a_reclaim() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    teams, quotas = (Team("tA", "d0"), Team("tB", "d1")), (Quota("tB", "a100", 8, 0, None),)
    for kind, priority_a, priority_b in (("training", 10, 1), ("serving", 100, 100)):
        a = Job("a", "tA", kind, priority_a, False, "a100", 8, 36000.0, 0.0, 72000.0)
        b = Job("b", "tB", kind, priority_b, kind == "training", "a100", 8, 3600.0, 9000.0, 7200.0)
        run = Running(a, (("n0", 8),), 5000.0, 5000.0, 4000.0, True)

        plan = schedule(Snapshot(nodes, (run,), (b,), teams, quotas, Policy(), ()), 10_000.0)

        assert plan.of_type(Preempt) == ()


def test_non_preemptible_work_starts_only_within_its_guarantee_or_on_capacity_nobody_is_guaranteed() -> None:
    nodes = tuple(Node(f"n{i}", "p0", "r0", "a100") for i in range(3))
    teams = (Team("tA", "d0"), Team("tB", "d1"))
    quotas = (Quota("tA", "a100", 8, 16, None), Quota("tB", "a100", 8, 0, None))  # 8 GPUs nobody is guaranteed
    pinned = tuple(Job(f"s{i}", "tA", "serving", 100, False, "a100", 8, 3600.0, float(i)) for i in range(3))

    plan = schedule(Snapshot(nodes, (), pinned, teams, quotas, Policy(), ()), 0.0)

    assert [start.job_id for start in plan.starts()] == ["s0", "s1"]
    status = plan.status_of("s2")
    assert status is not None and status.reason == "guarantee"


# Lend limits were checked only when a loan was admitted: an owner's later start could leave more
# lent than the pool allows.
def test_an_owner_starting_within_its_guarantee_reclaims_loans_the_pool_no_longer_covers() -> None:
    nodes = tuple(Node(f"n{i}", "p0", "r0", "gpu") for i in range(4))
    teams = (Team("tA", "d0"), Team("tB", "d0"), Team("tC", "d1"))
    quotas = (Quota("tA", "gpu", 8, 0, None), Quota("tB", "gpu", 16, 0, 0))  # tB lends nothing
    loans = tuple(
        Running(Job(f"c{i}", "tC", "batch", 0, True, "gpu", 8, 50_000.0, 0.0), ((f"n{i}", 8),), 0.0, 60.0, 0.0, True)
        for i in range(2)
    )
    # tA's job has waited ten minutes, longer than a loan has run: taking one back pays.
    mine = Job("mine", "tA", "training", 0, True, "gpu", 8, 3600.0, -540.0)

    plan = schedule(Snapshot(nodes, loans, (mine,), teams, quotas, Policy(), ()), 60.0)

    # n2 and n3 are free, but they are tB's, which lends nothing: tA takes back one of its loans.
    (start,) = plan.starts()
    assert start.replaces and start.allocation[0][0] in {"n0", "n1"}
    assert [action.job_id for action in plan.of_type(Preempt)] == list(start.replaces)


# A shrink freed its team's quota only at the next cycle.
def test_a_shrink_frees_its_teams_quota_in_the_same_plan() -> None:
    nodes = tuple(Node(f"n{i}", "p0", "r0", "gpu") for i in range(3))
    teams = (Team("tY", "d0"), Team("tW", "d1"), Team("tZ", "d1"))
    quotas = (Quota("tY", "gpu", 0, 16, None),)
    runs = (
        Running(Job("e", "tY", "batch", 0, True, "gpu", 8, 1e6, 0.0, min_gpus=2), (("n0", 8),), 0.0, 10.0, 0.0, True),
        Running(Job("f", "tY", "batch", 0, True, "gpu", 8, 1e6, 0.0), (("n1", 8),), 0.0, 10.0, 0.0, True),
        Running(Job("z", "tZ", "batch", 0, True, "gpu", 6, 1e6, 0.0), (("n2", 6),), 0.0, 10.0, 0.0, True),
    )
    urgent = Job("h", "tW", "training", 10, True, "gpu", 4, 3600.0, 0.0)
    small = Job("y", "tY", "batch", 0, True, "gpu", 2, 3600.0, 1.0)

    plan = schedule(Snapshot(nodes, runs, (urgent, small), teams, quotas, Policy(), ()), 10.0)

    assert plan.of_type(Shrink) == (Shrink("e", (("n0", 4),), 4),)
    assert {start.job_id: start.allocation for start in plan.starts()} == {"h": (("n0", 4),), "y": (("n2", 2),)}

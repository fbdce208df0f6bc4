"""The cycle's inlined fast paths give exactly what the plain definitions give."""

from __future__ import annotations

import pickle
import sys
from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    FleetState,
    Grow,
    Plan,
    Policy,
    Preempt,
    Running,
    Shrink,
    Snapshot,
    Start,
    backfill,
    schedule,
)
from scheduling.engine.backfill import ReleaseProfile, expected_end_s, gang_level_now, worst_runtime_s
from scheduling.engine.capacity import AcceleratorPool, CapacityIndex, fleet_topology, level_of, plain_pools
from scheduling.engine.cycle_state import SearchKey, Walked
from scheduling.engine.elastic import grow_actions
from scheduling.engine.explain import (
    ESTIMATE_HORIZON_S,
    STARTED,
    Blockers,
    ListSchedule,
    ShapeSweep,
    _first_time,
    _quota_estimate,
    _short_of,
    plain_list_start,
    shape_fits_s,
)
from scheduling.engine.fairshare import fairshare_factors, fairshare_priorities
from scheduling.engine.kept import Kept
from scheduling.engine.model import Job, Node, Quota
from scheduling.engine.node_cache import NodeCache
from scheduling.engine.ordering import order_jobs
from scheduling.engine.plan import (
    REASON_CAPACITY,
    REASON_QUOTA,
    REASON_TOPOLOGY,
    BlockedStatus,
    PendingStatus,
    pending_status,
)
from scheduling.engine.preemption import Victims, candidate_of, partial_reclaim_takes
from scheduling.engine.prepare import (
    KeptReleases,
    KeptTotals,
    RunningBook,
    RunPenalty,
    prepare_cycle,
    running_totals,
)
from scheduling.engine.quota import QuotaLedger
from scheduling.engine.reclaim import Reclaimer, keeps_guarantees, spare_gpus
from scheduling.engine.runs import all_running_at, anchored_release_s
from scheduling.engine.schedule import QueueShapes, _Cycle

from . import builders
from .strategies import contested_snapshots, gang_snapshots, jobs, snapshots

SETTINGS = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _runs(draw: st.DrawFn) -> tuple[Running, ...]:
    """Running jobs with what snapshots() leaves out: multi-node gangs, grace periods, elastic floors."""
    runs = []
    for index in range(draw(st.integers(0, 12))):
        job = replace(draw(jobs(f"r{index}", 0.0)), checkpoint_on_preempt=draw(st.booleans()))
        allocation = tuple((f"n{index}-{k}", draw(st.integers(1, 8))) for k in range(draw(st.integers(1, 3))))
        progress, checkpoint = draw(st.floats(0.0, 1e4)), draw(st.floats(0.0, 1e4))
        grace = draw(st.none() | st.floats(0.0, 1e4))
        release = draw(st.none() | st.floats(0.0, 1e4))
        start_s, borrowing = draw(st.floats(0.0, 1e4)), draw(st.booleans())
        runs.append(Running(job, allocation, start_s, progress, checkpoint, borrowing, grace, release))
    return tuple(runs)


def _penalty(snapshot: Snapshot) -> RunPenalty:
    return RunPenalty(fleet_topology(snapshot.nodes, snapshot.policy.gpus_per_node), snapshot.policy)


def _plain_release_events(snapshot: Snapshot, now: float) -> list[tuple[float, str, int]]:
    profile = ReleaseProfile(now)
    penalty = _penalty(snapshot)
    for run in snapshot.running:
        level = "node" if len(run.allocation) == 1 else level_of([n for n, _ in run.allocation], *_maps(snapshot))
        assert penalty.of(run.allocation) == snapshot.policy.penalty(level)
        profile.add(expected_end_s(run, now, snapshot.policy.penalty(level)), run.allocation)
    return sorted(profile.events)


def _maps(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, str]]:
    return {node.id: node.rack_key for node in snapshot.nodes}, {node.id: node.pod for node in snapshot.nodes}


@SETTINGS
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 20).map(float), st.sampled_from("abc"), st.integers(1, 8)), max_size=40),
        max_size=8,
    )
)
def test_a_profile_sorted_as_it_grows_is_sorted_as_a_whole(batches: list[list[tuple[float, str, int]]]) -> None:
    """Events added a few or many at a time between sorts come out as one stable sort by time of
    all of them in the order they were added (ties among equal events told apart by a serial)."""
    profile, added = ReleaseProfile(0.0), []
    for batch in batches:
        for time_s, node_id, gpus in batch:
            event = (time_s, f"{node_id}{len(added)}", gpus)
            added.append(event)
            profile.extend([event])
        assert profile.sorted_events() == sorted(added, key=lambda event: event[0])


@SETTINGS
@given(gang_snapshots(max_running=12))
def test_a_book_counted_in_one_loop_equals_one_counted_run_by_run(snapshot: Snapshot) -> None:
    plain = RunningBook()
    for run in snapshot.running:
        plain.count(run.job, run.gpus, run.borrowing, run.grace_until_s is not None, 1)
    fast = RunningBook.of(snapshot.running)
    for part in ("usage", "runs", "evicting", "leaving", "preemptible", "borrowing", "bounded", "pinned", "elastic"):
        assert getattr(fast, part) == getattr(plain, part), part


@SETTINGS
@given(gang_snapshots(), st.floats(0.0, 5000.0))
def test_running_totals_match_the_plain_per_run_definitions(snapshot: Snapshot, now: float) -> None:
    totals = running_totals(snapshot.running, now, _penalty(snapshot))
    usage: dict[tuple[str, str], int] = {}
    evicting: dict[tuple[str, str], int] = {}
    for run in snapshot.running:
        key = (run.job.team, run.job.accelerator)
        usage[key] = usage.get(key, 0) + run.gpus
        if run.grace_until_s is not None:
            evicting[key] = evicting.get(key, 0) + run.gpus

    used: dict[str, int] = {}
    for run in snapshot.running:
        for node_id, gpus in run.allocation:
            used[node_id] = used.get(node_id, 0) + gpus
    # In running order: the capacity index's bucket order follows the order of `used`.
    assert list(totals.used.items()) == list(used.items())
    assert totals.usage == usage
    assert totals.evicting == evicting
    assert sorted(event for events in totals.releases.values() for event in events) == _plain_release_events(
        snapshot, now
    )
    penalty = _penalty(snapshot)
    releases: dict[str, list[tuple[float, str, int]]] = {}
    team_releases: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for run in snapshot.running:
        end_s = max(now, expected_end_s(run, now, penalty.of(run.allocation)))
        releases.setdefault(run.job.accelerator, []).extend((end_s, node, gpus) for node, gpus in run.allocation)
        team_releases.setdefault((run.job.team, run.job.accelerator), []).append((end_s, run.gpus))
    # In time order, running order among equal times (a stable sort of them in running order).
    assert totals.releases == {
        accelerator: sorted(events, key=lambda event: event[0]) for accelerator, events in releases.items()
    }
    assert totals.team_releases == team_releases


def _shown_fields(run: Running) -> tuple[object, ...]:
    """Every field of a `Running` as read (a `ShownRunning` reads its time-dependent ones at its
    fleet state's latest snapshot), so that kept and fresh ones compare across classes."""
    return tuple(getattr(run, field.name) for field in fields(Running))


@SETTINGS
@given(
    contested_snapshots(),
    st.lists(st.floats(1.0, 3000.0), min_size=1, max_size=6),
    st.booleans(),
    st.none() | st.floats(1.0, 3.0),
    st.none() | st.floats(60.0, 900.0),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from(("preempt", "shrink", "borrow"))), max_size=6),
)
def test_fleet_state_snapshots_show_the_same_running_as_built_field_by_field(
    snapshot: Snapshot,
    steps: list[float],
    unlimited: bool,
    throttle: float | None,
    interval: float | None,
    changes: list[tuple[int, str]],
) -> None:
    """The `ShownRunning` a fleet state keeps between snapshots (`runs.show_running`) show what a
    `Running` built afresh at every snapshot shows: field by field from `progress_at`,
    `checkpoint_at` and `runs.anchored_release_s`, and from `runs.all_running_at`, and the same
    lost work; on a contested fleet (running work adopted as it is, in its grace period, borrowing,
    elastic, checkpointing when told it is preempted, then preempted, shrunk and grown), with
    jobs without a time limit (anchored releases), periodic checkpoints and a throttled node."""

    def varied(job: Job) -> Job:
        if unlimited:
            job = replace(job, time_limit_s=None)
        return replace(job, checkpoint_interval_s=interval) if interval is not None else job

    state = FleetState(snapshot.nodes, checkpoint_events=True)
    for run in snapshot.running:
        state.restore(
            varied(run.job),
            run.allocation,
            start_s=run.start_s,
            borrowing=run.borrowing,
            anchor_s=0.0,
            anchor_progress_s=run.progress_s,
            base_progress_s=run.checkpoint_s,
            grace_until_s=run.grace_until_s,
        )
    for job in snapshot.pending:
        state.submit(varied(job))
    now = 0.0
    for index, step in enumerate(steps):
        if throttle is not None and index == 1:
            state.throttle_node(snapshot.nodes[0].id, throttle, now)
        plan = schedule(state.snapshot(now, snapshot.teams, snapshot.quotas, snapshot.policy), now)
        state.apply(plan, now)
        if index < len(changes) and state.running:
            # A change of a run's shown fields beside the plan: grace, allocation or borrowing.
            pick, kind = changes[index]
            run = list(state.running.values())[pick % len(state.running)]
            (node_id, gpus), *_ = run.allocation
            change: Preempt | Shrink | Grow = Preempt(run.job.id, "test", 600.0)
            if kind == "shrink":
                change = Shrink(run.job.id, ((node_id, max(1, gpus // 2)),), max(1, gpus // 2))
            elif kind == "borrow":
                change = Grow(run.job.id, run.allocation, run.gpus, borrowing=True)
            state.apply(Plan((change,), ()), now)
        now += step
        state.advance(now)
        shown = state.snapshot(now, snapshot.teams, snapshot.quotas, snapshot.policy).running
        plain = tuple(
            Running(
                run.job,
                run.allocation,
                run.start_s,
                run.progress_at(now),
                run.checkpoint_at(now),
                run.borrowing,
                run.grace_until_s,
                anchored_release_s(run, now, state.penalty),
            )
            for run in state.running.values()
        )
        assert [_shown_fields(run) for run in shown] == [_shown_fields(run) for run in plain]
        assert [_shown_fields(run) for run in shown] == [
            _shown_fields(run) for run in all_running_at(state.running.values(), now)
        ]
        assert [run.lost_gpu_s for run in shown] == [run.lost_gpu_s for run in plain]


@SETTINGS
@given(
    snapshots(),
    st.lists(st.floats(1.0, 3000.0), min_size=1, max_size=4),
    st.booleans(),
    st.sampled_from((0.0, 120.0)),
    st.none() | st.floats(1.0, 3.0),
)
def test_the_book_a_fleet_state_keeps_adds_up_as_the_running_jobs_do(
    snapshot: Snapshot, steps: list[float], unlimited: bool, restart_s: float, throttle: float | None
) -> None:
    """The book and the releases kept between cycles (`KeptReleases`) equal the plain rebuild, with
    jobs without a time limit (anchored releases), restarts that restore first and a throttled node."""
    state = FleetState(snapshot.nodes, checkpoint_events=True, restart_overhead_s=restart_s)
    for job in snapshot.pending:
        state.submit(replace(job, time_limit_s=None, attained_gpu_s=1.0) if unlimited else job)
    now = 0.0
    for index, step in enumerate(steps):
        if throttle is not None and index == 1:
            state.throttle_node(snapshot.nodes[0].id, throttle, now)
        shown = state.snapshot(now, snapshot.teams, snapshot.quotas, snapshot.policy)
        book = state.kept().book
        assert book is not None and book.running is shown.running
        penalty = _penalty(shown)
        kept, counted = book.totals(shown.running, now, penalty), running_totals(shown.running, now, penalty)
        for part in ("used", "usage", "releases", "evicting", "team_releases", "pinned", "elastic"):
            assert getattr(kept, part) == getattr(counted, part)
        for part in ("preemptible", "leaving", "borrowing"):
            assert getattr(kept.takeable, part) == getattr(counted.takeable, part)
        plan = schedule(shown, now, kept=state.kept())
        assert plan == schedule(shown, now)
        state.apply(plan, now)
        now += step
        state.advance(now)


def _in_order(totals: KeptTotals | None) -> object:
    """Kept totals with every dict as its items in order (bucket order follows `used`'s order)."""
    if totals is None:
        return None
    used, releases, ends = totals
    return list(used.items()), list(releases.items()), list(ends.items())


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("keep", "forget", "look")),
            st.integers(0, 5),  # job
            st.lists(st.tuples(st.sampled_from(("n0", "n1", "n2")), st.integers(1, 8)), min_size=1, max_size=3),
            st.floats(40.0, 100.0),  # release
            st.integers(0, 9),  # 0: the release depends on the time; 1: an anchor not reached yet
            st.floats(0.0, 60.0),  # the time it is looked at
        ),
        max_size=30,
    )
)
def test_kept_releases_built_once_per_change_equal_them_built_at_every_look(
    steps: list[tuple[str, int, list[tuple[str, int]], float, int, float]],
) -> None:
    """`KeptReleases.at` hands out what it built at the last change; `plain_at` builds it afresh:
    equal at every look, in order, whatever the time and however often nothing changed between."""
    kept = KeptReleases()
    running: dict[str, Job] = {}
    for kind, index, allocation, release_s, case, now in steps:
        job = builders.job(f"j{index}", 8, team=f"t{index % 2}")
        end_s, anchor_s = (None if case == 0 else release_s), (now + 1.0 if case == 1 else None)
        if kind == "keep":
            kept.keep(job, tuple(allocation), sum(gpus for _, gpus in allocation), end_s, anchor_s)
            running[job.id] = job
        elif kind == "forget" and job.id in running:
            kept.forget(running.pop(job.id))
        for at_s in (now, now, now + 1.0):
            assert _in_order(kept.at(at_s)) == _in_order(kept.plain_at(at_s))


@SETTINGS
@given(contested_snapshots(), st.floats(0.0, 1e4))
def test_growth_that_passes_over_accelerators_without_elastic_runs_grows_as_looking_at_every_run(
    snapshot: Snapshot, now: float
) -> None:
    """`grow_actions` given the elastic runs per accelerator plans what it plans looking at every run."""
    fast, plain = prepare_cycle(snapshot, now), prepare_cycle(snapshot, now)
    elastic: dict[str, int] = {}
    for run in fast.running:
        if run.job.max_gpus is not None and run.grace_until_s is None:
            elastic[run.job.accelerator] = elastic.get(run.job.accelerator, 0) + 1
    assert fast.elastic == elastic
    grown = grow_actions(fast.index, fast.running, set(), set(), fast.ledger, fast.elastic)
    assert grown == grow_actions(plain.index, plain.running, set(), set(), plain.ledger)


def test_a_fleet_state_keeps_the_anchored_releases_of_its_running_jobs_between_cycles() -> None:
    state = FleetState(builders.fleet("1x1x2x8"))
    for name, gpus in (("a", 8), ("b", 4), ("c", 2)):
        state.submit(builders.job(name, gpus, duration_s=1_000.0 * gpus, time_limit_s=None))
    state.apply(
        Plan(
            (
                Start("a", (("p0-r0-n0", 8),), False, "node"),
                Start("b", (("p0-r0-n1", 4),), False, "node"),
                Start("c", (("p0-r0-n1", 2),), False, "node"),
            ),
            (),
        ),
        0.0,
    )
    shown = state.snapshot(500.0, (), (), Policy())
    book = state.kept().book
    assert book is not None and book.kept is not None
    kept = book.totals(shown.running, 500.0)
    assert kept.releases == running_totals(shown.running, 500.0).releases
    assert kept.releases == {"a100": [(2_000.0, "p0-r0-n1", 2), (4_000.0, "p0-r0-n1", 4), (8_000.0, "p0-r0-n0", 8)]}
    assert kept.used == {"p0-r0-n0": 8, "p0-r0-n1": 6}


@SETTINGS
@given(st.one_of(snapshots(), gang_snapshots()), st.floats(0.0, 1e5))
def test_a_cycle_on_the_node_tuple_s_kept_index_and_cordons_plans_as_on_them_built_afresh(
    snapshot: Snapshot, now: float
) -> None:
    cache = NodeCache()
    kept = Kept(nodes=cache)
    plain = schedule(snapshot, now)  # no cache: built afresh
    first = schedule(snapshot, now, kept=kept)  # built and kept for this very tuple
    fleet = cache.empty_fleet(snapshot.nodes, snapshot.policy.gpus_per_node)
    again = schedule(snapshot, now, kept=kept)  # read from the cache
    assert cache.empty_fleet(snapshot.nodes, snapshot.policy.gpus_per_node) is fleet
    other = replace(snapshot, nodes=tuple(list(snapshot.nodes)))
    fresh = schedule(other, now, kept=kept)  # another tuple: the cache forgets the first, builds afresh
    assert cache.nodes is other.nodes and cache.empty_fleet(other.nodes, other.policy.gpus_per_node) is not fleet

    assert first == again == fresh == plain


@st.composite
def _crowded_snapshots(draw: st.DrawFn) -> Snapshot:
    """contested_snapshots() with a queue of many jobs of a few shapes and teams, so that shapes come
    back with their verdict current while preemption is still possible (the overloaded queue of
    borrowers the shortcut is for)."""
    base = draw(st.one_of(contested_snapshots(), snapshots()))
    if not base.pending:
        return base
    teams = sorted({job.team for job in base.pending} | {run.job.team for run in base.running})
    more = []
    for index in range(draw(st.integers(0, 30))):
        shape = draw(st.sampled_from(base.pending))
        more.append(replace(shape, id=f"c{index}", team=draw(st.sampled_from(teams)), submit_s=100.0 + index))
    return replace(base, pending=base.pending + tuple(more))


def _search_always(self: Reclaimer, key: SearchKey, cap: float) -> bool:
    """The plain definition of `Reclaimer._fruitless_again`: never answer from the memo, search."""
    return False


def _budgets_after_searches(snapshot: Snapshot, now: float) -> tuple[Plan, list[int]]:
    """The plan, and the scan budget left after each victim search (made or answered by the memo)."""
    left: list[int] = []
    search = Reclaimer._search

    def recorded(self: Reclaimer, *args: object) -> object:
        found = search(self, *args)  # type: ignore[arg-type]
        left.append(self.budgets.scan_budget)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Reclaimer, "_search", recorded)
        return schedule(snapshot, now), left


def _walk_always(self: Reclaimer, key: SearchKey, cap: float) -> Walked | None:
    """The plain definition of `Reclaimer._walked_again`: never answer from the memo, search."""
    return None


def _memo_answers_then_plain(
    snapshot: Snapshot, now: float, memo_name: str = "_fruitless_again"
) -> tuple[list[bool], tuple[Plan, list[int]], tuple[Plan, list[int]]]:
    """Whether each victim search that reached the memo `memo_name` was answered from it, then
    `_budgets_after_searches` with that memo (fast) and without it (plain)."""
    answers: list[bool] = []
    memo = getattr(Reclaimer, memo_name)
    plain_memo = _search_always if memo_name == "_fruitless_again" else _walk_always

    def recorded(self: Reclaimer, key: SearchKey, cap: float) -> object:
        answer = memo(self, key, cap)
        answers.append(answer is not None and answer is not False)
        return answer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Reclaimer, memo_name, recorded)
        fast = _budgets_after_searches(snapshot, now)
        patch.setattr(Reclaimer, memo_name, plain_memo)
        plain = _budgets_after_searches(snapshot, now)
    return answers, fast, plain


@SETTINGS
@given(st.one_of(snapshots(), gang_snapshots(), _crowded_snapshots()), st.floats(0.0, 1e6))
def test_victim_searches_answered_from_the_memo_give_the_plans_searching_gives(snapshot: Snapshot, now: float) -> None:
    fast, fast_left = _budgets_after_searches(snapshot, now)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Reclaimer, "_fruitless_again", _search_always)
        plain, plain_left = _budgets_after_searches(snapshot, now)
    assert fast == plain
    assert fast_left == plain_left  # each answer from the memo is charged what the search visits


@SETTINGS
@given(st.one_of(snapshots(), gang_snapshots(), _crowded_snapshots()), st.floats(0.0, 1e6), st.booleans())
def test_victim_searches_answered_from_the_walks_made_give_the_plans_searching_gives(
    snapshot: Snapshot, now: float, fruitless_memo: bool
) -> None:
    # With the memo of searches that found nothing on and off: off, the walks answer those too.
    with pytest.MonkeyPatch.context() as patch:
        if not fruitless_memo:
            patch.setattr(Reclaimer, "_fruitless_again", _search_always)
        fast, fast_left = _budgets_after_searches(snapshot, now)
        patch.setattr(Reclaimer, "_walked_again", _walk_always)
        plain, plain_left = _budgets_after_searches(snapshot, now)
    assert fast == plain
    assert fast_left == plain_left  # each answer from the memo is charged what the search visits


@SETTINGS
@given(
    st.dictionaries(st.sampled_from(("alpha", "beta", "gamma")), st.tuples(st.integers(0, 16), st.integers(0, 24))),
    st.dictionaries(st.sampled_from(("alpha", "beta", "gamma")), st.integers(0, 8)),
    st.sampled_from(("alpha", "beta", "gamma")),
    st.integers(1, 16),
)
def test_what_a_team_may_lose_and_stay_covered_answers_as_keeping_its_guarantee_does(
    teams: dict[str, tuple[int, int]], leaving: dict[str, int], team: str, gpus: int
) -> None:
    quotas = tuple(Quota(name, "a100", guaranteed, 64) for name, (guaranteed, _) in teams.items())
    usage = {(name, "a100"): used for name, (_, used) in teams.items() if used}
    ledger = QuotaLedger(quotas, (), (), {"a100": 64}, usage=usage, pinned={})
    evicting = {(name, "a100"): gpus for name, gpus in leaving.items()}
    preemptor = builders.job("owner", 8, team="delta")
    plain = keeps_guarantees(preemptor, [(team, "a100", gpus)], ledger, lambda t, a: evicting.get((t, a), 0))
    assert plain == (gpus <= spare_gpus(ledger, evicting, team, "a100"))


def test_a_search_whose_eviction_did_not_pay_answers_those_with_a_cap_it_walks_the_same_for() -> None:
    # Two 4-GPU loans of beta share the one node, each losing 400 GPU-s: together they free it for
    # an 8-GPU reclaim of gamma, but only an eviction costing less than the reclaimer's GPUs times
    # its wait pays (`credited_wait_s` at a credit of 1), 8 x 75 s for the first two owners: the first search finds
    # both loans, its eviction does not pay, and the second owner (the same cap) is answered with
    # what it found. The third (cap 8 x 60 s) is too: every candidate lies below its cap as below
    # the first one's. The fourth (cap 8 x 20 s) stops at the first loan, and searches.
    nodes = builders.fleet("1x1x1x8")
    loans = [builders.job(f"loan-{n}", 4, team="beta", duration_s=1e6) for n in range(2)]
    runs = [builders.running(work, (("p0-r0-n0", 4),), progress_s=100.0, borrowing=True) for work in loans]
    owners = [
        builders.job(f"owner-{n}", 8, team="gamma", submit_s=submit_s) for n, submit_s in enumerate((25, 25, 40, 80))
    ]
    scenario = builders.Scenario(nodes).with_running(*runs).pending(*owners)
    scenario = scenario.quotas(builders.quota("gamma", 16), builders.quota("beta", 0))
    snapshot = scenario.policy(
        reclaim_after_s=None, reclaim_wait_credit=1.0, preemption_grace_s=0.0, reservation_depth=0
    ).build()
    answers, (fast, fast_left), (plain, plain_left) = _memo_answers_then_plain(snapshot, 100.0, "_walked_again")

    assert answers == [False, True, True, False]
    assert fast == plain and fast.of_type(Preempt) == ()
    assert fast_left == plain_left == [8190, 8188, 8186, 8186]


def test_a_search_that_found_nothing_is_not_made_again_and_the_plan_is_the_same() -> None:
    # Every node holds 4 GPUs nobody may preempt: no node can be freed for an 8-GPU job, whoever asks.
    nodes = builders.fleet("1x1x3x8")
    pinned = [builders.job(f"pinned-{n}", 4, team="beta", preemptible=False, duration_s=1e6) for n in range(3)]
    low = [builders.job(f"low-{n}", 4, team="beta", priority=0, duration_s=1e6) for n in range(3)]
    runs = [builders.running(work, ((f"p0-r0-n{n}", 4),), progress_s=60.0) for n, work in enumerate(pinned + low)]
    runs = [replace(run, allocation=((f"p0-r0-n{n % 3}", 4),)) for n, run in enumerate(runs)]
    urgent = [builders.job(f"urgent-{n}", 8, priority=1, submit_s=0.0) for n in range(4)]
    snapshot = builders.Scenario(nodes).with_running(*runs).pending(*urgent).build()
    answers, (fast, _), (plain, _) = _memo_answers_then_plain(snapshot, 100.0)

    # The first search finds nothing and its job gets the reservation, which changes the working
    # state: the second searches again, and the two after it are answered from its memo.
    assert answers == [False, False, True, True]
    assert fast == plain and fast.of_type(Preempt) == ()


@given(st.text(max_size=5), st.sampled_from(("capacity", "quota")), st.none() | st.floats(allow_nan=False))
def test_slot_built_statuses_equal_constructed_ones(job_id: str, reason: str, estimate: float | None) -> None:
    built = pending_status(job_id, reason, estimate)

    assert built == PendingStatus(job_id, reason, estimate)
    assert hash(built) == hash(PendingStatus(job_id, reason, estimate))


def _plain_team_releases(cycle: _Cycle, plan: Plan) -> dict[tuple[str, str], list[tuple[float, int]]]:
    """When each team's GPUs come free: running work at its expected end, evicted victims at the end
    of their grace at the latest, shrunk ones giving up GPUs now and running on smaller, and this
    cycle's starts at their worst-case end."""
    prepared, now = cycle.prepared, cycle.now
    evicted = {action.job_id: action.grace_s for action in plan.actions if isinstance(action, Preempt)}
    shrunk = {action.job_id: action.allocation for action in plan.actions if isinstance(action, Shrink)}
    releases: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for run in prepared.running:
        end_s = expected_end_s(run, now, prepared.penalty.of(run.allocation))
        parts = [(end_s, run.gpus)]
        if run.job.id in evicted:
            parts = [(min(end_s, now + evicted[run.job.id]), run.gpus)]
        elif run.job.id in shrunk:
            smaller = replace(run, allocation=shrunk[run.job.id])
            later_s = expected_end_s(smaller, now, prepared.penalty.of(smaller.allocation))
            parts = [(now, run.gpus - smaller.gpus), (later_s, smaller.gpus)]
        releases.setdefault((run.job.team, run.job.accelerator), []).extend(part for part in parts if part[1] > 0)
    jobs = {job.id: job for job in cycle.snapshot.pending}
    for start in plan.starts():
        job = jobs[start.job_id]
        runtime_s = worst_runtime_s(job, start.gpus, cycle.policy.penalty(start.level))
        releases.setdefault((job.team, job.accelerator), []).append((now + runtime_s, start.gpus))
    return {key: sorted(entries) for key, entries in releases.items()}


def _plain_estimate(
    cycle: _Cycle,
    job: Job,
    reason: str,
    releases: dict[tuple[str, str], list[tuple[float, int]]],
    holding: list[tuple[float, float, int, bool]],
    team_holding: list[tuple[float, float, int, bool]] | None,
) -> tuple[float | None, tuple[float, float] | None]:
    """A job's estimate without a reservation, and where the list schedules of its accelerator and
    of its team's guarantee (`team_holding` None: none that can hold it) start it."""
    prepared, held = cycle.prepared, cycle.prepared.index.held
    pool = prepared.index.pools[job.accelerator]
    free_now = pool.total_free + sum(gpus for node_id, gpus in held.items() if node_id in pool.free)
    profile = prepared.profiles[job.accelerator]
    first = _first_time(profile.curve(free_now), job.gpus)
    if first is None or _short_of(pool.shape, job.gpus, job.required_level) is not None:
        return None, None  # no healthy domain it may take could ever hold it
    fitted = [shape_fits_s(pool, held, profile, job.gpus, level, cycle.now) for level in (None, job.required_level)]
    releases_s = [(end_s, gpus) for end_s, _, gpus in profile.sorted_events()]
    fleet_s = plain_list_start(cycle.now, free_now, releases_s, holding, job.gpus)
    team_s = fleet_s
    if team_holding is not None and fleet_s is not None:
        key = (job.team, job.accelerator)
        free = prepared.ledger.guaranteed(*key) - prepared.ledger.used(*key)
        team_s = plain_list_start(cycle.now, free, releases.get(key, []), team_holding, job.gpus)
    if fleet_s is None or team_s is None:
        return None, None
    estimate = max(fleet_s, team_s, first, *(s for s in fitted if s is not None))
    if reason == REASON_QUOTA:
        return _quota_estimate(job, estimate, prepared.ledger, releases, cycle.policy.elastic), (fleet_s, team_s)
    return estimate, (fleet_s, team_s)


def _plain_explain(cycle: _Cycle, plan: Plan, queue: list[Job]) -> tuple[PendingStatus, ...]:
    """`explain_pending` as defined: `_first_time`, `shape_fits_s`, `plain_list_start` on the
    accelerator and within the team's guarantee (when it can hold the job), and `expected_end_s`
    per job; jobs without an estimate within the horizon hold nothing and say what they wait for
    instead."""
    prepared = cycle.prepared
    releases = _plain_team_releases(cycle, plan)
    blockers = Blockers(prepared, cycle.policy.elastic)
    statuses: list[PendingStatus] = []
    # (start, end, GPUs, started in order) of the jobs ahead, per accelerator and per team's guarantee.
    holding: dict[str, list[tuple[float, float, int, bool]]] = {}
    team_holding: dict[tuple[str, str], list[tuple[float, float, int, bool]]] = {}
    for job, reason in zip(queue, cycle.decided.reasons, strict=True):
        if reason == STARTED:
            continue
        reason = reason or REASON_CAPACITY
        key = (job.team, job.accelerator)
        profiled = job.accelerator in prepared.profiles
        guaranteed = prepared.ledger.guaranteed(*key)
        within = team_holding.setdefault(key, []) if profiled and 0 < job.gpus <= guaranteed else None
        estimate, starts = None, None
        if job.id in cycle.decided.estimates:
            estimate = cycle.decided.estimates[job.id]
        elif profiled:
            estimate, starts = _plain_estimate(cycle, job, reason, releases, holding.get(job.accelerator, []), within)
        if estimate is not None and estimate <= cycle.now + ESTIMATE_HORIZON_S:
            if profiled:
                fleet_s, team_s = starts or (estimate, estimate)
                hold_s = job.estimate_s
                holding.setdefault(job.accelerator, []).append((fleet_s, fleet_s + hold_s, job.gpus, bool(starts)))
                if within is not None:
                    within.append((team_s, team_s + hold_s, job.gpus, bool(starts)))
            statuses.append(PendingStatus(job.id, reason, estimate))
        else:
            statuses.append(BlockedStatus(job.id, reason, None, blockers.of(job, reason, estimate)))
    return tuple(statuses)


_STEPS = st.lists(st.tuples(st.integers(0, 20).map(float), st.integers(1, 8)), max_size=8).map(sorted)
_QUEUE = st.lists(
    st.tuples(
        st.integers(1, 16),
        st.integers(1, 30).map(float),
        st.none() | st.integers(0, 40).map(float),  # a reservation's start, else taken in order
        st.booleans(),  # whether it starts within the horizon (else undone)
    ),
    max_size=12,
)


@SETTINGS
@given(st.integers(-8, 16), _STEPS, _QUEUE, st.integers(1, 16))
def test_the_list_schedule_starts_jobs_when_its_plain_definition_does(
    free: int, steps: list[tuple[float, int]], queue: list[tuple[int, float, float | None, bool]], gpus: int
) -> None:
    """`ListSchedule` walked along a queue (starts taken, undone, reservations held) starts each
    job where `plain_list_start` does, from the jobs held ahead of it; releases at one instant,
    negative free GPUs (a team over its guarantee) and starts that never come included."""
    schedule = ListSchedule(0.0, free, steps, 64)
    held: list[tuple[float, float, int, bool]] = []
    for size, hold_s, reserved_s, kept in queue:
        if reserved_s is not None:
            schedule.hold(reserved_s, size, hold_s)
            held.append((reserved_s, reserved_s + hold_s, size, False))
            continue
        start_s = schedule.start(size)
        assert start_s == plain_list_start(0.0, free, steps, held, size)
        if start_s is not None and kept:
            schedule.take(size, hold_s)
            held.append((start_s, start_s + hold_s, size, True))
        else:
            schedule.undo()
    assert schedule.start(gpus) == plain_list_start(0.0, free, steps, held, gpus)


@SETTINGS
@given(gang_snapshots(), st.floats(0.0, 5000.0))
def test_one_sweep_says_when_each_size_fits_by_shape_as_the_placement_and_reservation_rules_do(
    snapshot: Snapshot, now: float
) -> None:
    cycle = _Cycle(snapshot, now)
    cycle.run()
    prepared = cycle.prepared
    held = prepared.index.held
    for accelerator, profile in prepared.profiles.items():
        pool = prepared.index.pools[accelerator]
        sweep = ShapeSweep(pool, held, profile, now)
        for gpus in range(1, pool.capacity + 2):
            for level in (None, "rack", "pod", "fleet"):
                assert sweep.fits_s(gpus, level) == shape_fits_s(pool, held, profile, gpus, level, now)


@SETTINGS
@given(gang_snapshots(), st.floats(0.0, 5000.0))
def test_explanations_match_the_plain_per_job_definitions(snapshot: Snapshot, now: float) -> None:
    cycle = _Cycle(snapshot, now)
    plan = cycle.run()
    policy = snapshot.policy
    factors = fairshare_factors(snapshot.usage, snapshot.teams, snapshot.quotas) if policy.fairshare else {}
    queue = order_jobs(snapshot.pending, policy, fairshare_priorities(factors), now)

    assert plan.pending == _plain_explain(cycle, plan, queue)


@SETTINGS
@given(_runs(), st.floats(0.0, 5000.0))
def test_team_releases_match_expected_ends(running: tuple[Running, ...], now: float) -> None:
    plain: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for run in running:
        plain.setdefault((run.job.team, run.job.accelerator), []).append((expected_end_s(run, now), run.gpus))

    assert running_totals(running, now).team_releases == plain


_CANDIDATE_FIELDS = ("run", "gpus_on", "cost", "shrinkable", "job_id", "leaving", "gpus", "priority")


@SETTINGS
@given(_runs(), st.booleans())
def test_victims_come_cheapest_first_as_the_plain_definition_says(running: tuple[Running, ...], elastic: bool) -> None:
    for accelerator in ("a100", "h100"):
        victims = Victims(running, accelerator, elastic)
        assert list(victims) == list(victims)  # made once, the same every time
        fast = list(victims)
        plain = [candidate_of(run, elastic) for run in running if run.job.accelerator == accelerator]
        plain.sort(key=lambda c: (c.cost, c.priority, c.job_id))
        assert [[getattr(c, name) for name in _CANDIDATE_FIELDS] for c in fast] == [
            [getattr(c, name) for name in _CANDIDATE_FIELDS] for c in plain
        ]


@SETTINGS
@given(_runs(), st.sampled_from((0, 5, 10, 11, 100)), st.booleans(), st.booleans(), st.none() | st.floats(0.0, 1e4))
def test_what_preemption_could_take_is_the_plain_sum_over_victims(
    running: tuple[Running, ...], priority: int, reclaiming: bool, bounded_only: bool, since_s: float | None
) -> None:
    takeable = running_totals(running, 0.0).takeable
    for accelerator in ("a100", "h100"):
        plain = [candidate_of(run, False) for run in running if run.job.accelerator == accelerator]
        lower = sum(c.gpus for c in plain if c.run.job.preemptible and not c.leaving and c.priority < priority)
        leaving = sum(c.gpus for c in plain if c.leaving)
        loans = [c for c in plain if c.run.borrowing and not c.leaving]
        if bounded_only:  # a partial reclaim takes only loans whose lost work is bounded, or young ones
            loans = [c for c in loans if partial_reclaim_takes(c.run.job, c.run.start_s, since_s)]
        borrowed = sum(c.gpus for c in loans) if reclaiming else 0
        upper = takeable.upper(accelerator, priority, reclaiming, bounded_only, since_s)
        assert upper == lower + leaving + borrowed
        memo = takeable.upper(accelerator, priority, reclaiming, bounded_only, since_s)  # the second ask: the memo
        assert memo == takeable.plain_upper(accelerator, priority, reclaiming, bounded_only, since_s) == upper


@st.composite
def _fleets_in_use(draw: st.DrawFn) -> tuple[tuple[Node, ...], dict[str, int]]:
    """Nodes of one or two accelerators (some degraded or cordoned) and GPUs in use on some of
    them (and on nodes the fleet does not know), in any order, at most all of a node or more."""
    nodes = tuple(
        Node(
            f"p{p}-r{r}-n{n}",
            f"p{p}",
            f"r{r}",
            draw(st.sampled_from(("a100", "a100", "h100"))),
            8,
            draw(st.sampled_from((8, 8, 8, 6, 0))),
            draw(st.booleans()) and n == 1,
        )
        for p in range(draw(st.integers(1, 2)))
        for r in range(draw(st.integers(1, 3)))
        for n in range(draw(st.integers(1, 4)))
    )
    ids = [node.id for node in nodes] + ["elsewhere"]
    order = draw(st.permutations(ids))
    used = {node_id: draw(st.integers(1, 10)) for node_id in order if draw(st.booleans())}
    return nodes, used


def _pool_state(pool: AcceleratorPool) -> tuple[object, ...]:
    """Everything a pool's placements read, orders included (best fit breaks ties by bucket order)."""
    return (
        list(pool.free.items()),
        {key: list(bucket) for key, bucket in pool.buckets.items()},
        {rack: list(whole) for rack, whole in pool.whole_by_rack.items()},
        list(pool.pod_whole.items()),
        pool.total_free,
        pool.whole_count,
        pool.capacity,
        pool.packing,
        list(pool.over.items()),
    )


@settings(max_examples=300, deadline=None, database=None)
@given(_fleets_in_use(), st.sampled_from((8, 4)))
def test_the_capacity_index_builds_the_pools_setting_nodes_one_at_a_time_builds(
    drawn: tuple[tuple[Node, ...], dict[str, int]], gpus_per_node: int
) -> None:
    nodes, used = drawn
    index = CapacityIndex(nodes, used, gpus_per_node)
    plain = plain_pools(nodes, used, gpus_per_node)
    assert list(index.pools) == list(plain)
    for name, pool in index.pools.items():
        assert _pool_state(pool) == _pool_state(plain[name])


def _look_in_full(self: _Cycle, job: Job, pool: AcceleratorPool, size: int) -> bool:
    """The plain definition of `_Cycle._passed_over`: never answer from the verdict, look in full."""
    return False


@SETTINGS
@given(st.one_of(_crowded_snapshots(), gang_snapshots()), st.floats(0.0, 1e6))
def test_jobs_that_cannot_preempt_are_answered_as_trying_would(snapshot: Snapshot, now: float) -> None:
    """Where `cannot_preempt` says so, `try_preempt` returns False and changes nothing (no attempt,
    no scan budget, no victimless mark, nothing decided); and answering such jobs from the verdict
    of their shape (`_passed_over`) plans as looking at each in full."""
    try_preempt = Reclaimer.try_preempt

    def checked(self: Reclaimer, job: Job, pool: AcceleratorPool, size: int, admission: object) -> bool:
        hopeless = self.cannot_preempt(job, pool, size)
        budgets, memo, decided = self.budgets, self.memo, self.decided
        before = (budgets.preemption_attempts, budgets.scan_budget, set(memo.victimless), memo.generation)
        actions = len(decided.actions)
        found = try_preempt(self, job, pool, size, admission)  # type: ignore[arg-type]
        if hopeless:
            after = (budgets.preemption_attempts, budgets.scan_budget, set(memo.victimless), memo.generation)
            assert not found and after == before and len(decided.actions) == actions
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Reclaimer, "try_preempt", checked)
        fast = schedule(snapshot, now)
        lean = schedule(snapshot, now, explain=False)
        patch.setattr(_Cycle, "_passed_over", _look_in_full)
        plain = schedule(snapshot, now)
        plain_lean = schedule(snapshot, now, explain=False)
    assert fast == plain
    assert lean == plain_lean


@SETTINGS
@given(st.one_of(_crowded_snapshots(), gang_snapshots()), st.floats(0.0, 1e6))
def test_a_kept_verdict_that_a_job_cannot_preempt_is_what_asking_again_says(snapshot: Snapshot, now: float) -> None:
    passed_over = _Cycle._passed_over

    def checked(self: _Cycle, job: Job, pool: AcceleratorPool, size: int) -> bool:
        fast = passed_over(self, job, pool, size)
        budgets = self.budgets
        attempts_left = budgets.reservation_attempts.get(job.accelerator, 0) < budgets.reservation_cap
        assert fast == (not attempts_left and self.reclaim.cannot_preempt(job, pool, size))
        return fast

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Cycle, "_passed_over", checked)
        schedule(snapshot, now)
        schedule(snapshot, now, explain=False)


@st.composite
def _queues_of_runs(draw: st.DrawFn) -> Snapshot:
    """A snapshot whose queue ends with jobs of one team in a row, of a few shapes of its pending
    jobs, so that jobs come after others of their shape and after others of a nearly equal one."""
    base = draw(st.one_of(contested_snapshots(), snapshots(), gang_snapshots()))
    if not base.pending:
        return base
    team = draw(st.sampled_from(sorted({job.team for job in base.pending})))
    shapes = draw(st.lists(st.sampled_from(base.pending), min_size=1, max_size=3))
    picks = draw(st.lists(st.sampled_from(shapes), min_size=2, max_size=30))
    limits = draw(st.lists(st.sampled_from([None, 60.0, 3600.0, 1e5]), min_size=len(picks), max_size=len(picks)))
    more = tuple(
        replace(shape, id=f"r{index}", team=team, submit_s=50.0 + index, time_limit_s=limit)
        for index, (shape, limit) in enumerate(zip(picks, limits, strict=True))
    )
    return replace(base, pending=base.pending + more)


def _no_shape(job: Job) -> object:
    """The plain definition of `_Cycle.shape_of`: a shape equal to no other's."""
    return object()


@SETTINGS
@given(st.one_of(_queues_of_runs(), _crowded_snapshots()), st.floats(0.0, 1e6))
def test_jobs_answered_as_the_job_before_them_are_answered_as_on_their_own(snapshot: Snapshot, now: float) -> None:
    """A job with the shape of the job before it, answered from a verdict with nothing changed
    since, gets that answer (`_Cycle.shape_of`, read in `_scan`) as its own look at the verdicts
    would give it: the plans (reasons and estimates included) are those of answering each job on
    its own, with and without explanations."""
    fast, lean = schedule(snapshot, now), schedule(snapshot, now, explain=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Cycle, "shape_of", staticmethod(_no_shape))
        plain, plain_lean = schedule(snapshot, now), schedule(snapshot, now, explain=False)
    assert fast == plain
    assert lean == plain_lean


def test_a_job_after_a_run_of_another_shape_gets_its_own_answer() -> None:
    # 6 of the node's 8 GPUs are busy, with nothing to preempt or reserve: the 4-GPU jobs wait, the
    # first after a look in full, the others as the job before them; the 2-GPU job after them,
    # another shape, still starts, and then the 4-GPU job behind it looks again.
    nodes = builders.fleet("1x1x1x8")
    busy = builders.running(builders.job("busy", 6, duration_s=1e5), on="p0-r0-n0")
    queue = [builders.job(f"four-{n}", 4, submit_s=float(n)) for n in range(3)]
    small, last = builders.job("two", 2, submit_s=5.0), builders.job("four-last", 4, submit_s=6.0)
    scenario = builders.Scenario(nodes).with_running(busy).pending(*queue, small, last)
    snapshot = scenario.policy(preemption=False, reservation_depth=0).build()
    fast = schedule(snapshot, 100.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Cycle, "shape_of", staticmethod(_no_shape))
        plain = schedule(snapshot, 100.0)

    assert fast == plain
    assert [start.job_id for start in fast.starts()] == ["two"]
    assert {status.job_id for status in fast.pending} == {"four-0", "four-1", "four-2", "four-last"}


@SETTINGS
@given(st.one_of(gang_snapshots(), _crowded_snapshots(), contested_snapshots()), st.floats(0.0, 1e6))
def test_gang_levels_from_kept_patiences_and_debts_are_gang_level(snapshot: Snapshot, now: float) -> None:
    """`Reclaimer.gang_level` (the patiences of the cycle, what `owed` says kept per ledger
    version, when a gang could start within one pod kept per working state) gives `gang_level_now`
    with `owed` asked, wherever the cycle asks it."""
    fast_level = Reclaimer.gang_level

    def checked(self: Reclaimer, pool: AcceleratorPool, job: Job) -> str:
        level = fast_level(self, pool, job)
        profile = self.profiles[job.accelerator]
        owed, can_reserve = self.owed(job), self.can_reserve(job.accelerator)
        assert level == gang_level_now(pool, self.index.held, profile, job, self.policy, self.now, owed, can_reserve)
        return level

    # Penalties close together: the sweep for a start within one pod stops soon (`within_pod_horizon_s`).
    close = (("node", 1.0), ("rack", 1.2), ("pod", 1.25), ("fleet", 1.3))
    for policy in (
        snapshot.policy,
        replace(snapshot.policy, guarantee_spread_after_s=3600.0),
        replace(snapshot.policy, guarantee_spread_after_s=0.0, level_penalty=close),
    ):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Reclaimer, "gang_level", checked)
            schedule(replace(snapshot, policy=policy), now)
            schedule(replace(snapshot, policy=policy), now, explain=False)


@SETTINGS
@given(st.one_of(gang_snapshots(), _crowded_snapshots(), contested_snapshots()), st.floats(0.0, 1e6))
def test_earliest_starts_kept_while_the_working_state_stays_the_same_are_found_again(
    snapshot: Snapshot, now: float
) -> None:
    """`Reclaimer.earliest` answers as `earliest_start` on the cycle's working state, and a
    reservation attempt, given the level its cycle keeps and that finder, finds what
    `reservation_start` finds on its own, wherever the cycle asks."""
    fast_earliest, fast_reservation = Reclaimer.earliest, backfill.reservation_start

    def earliest(
        self: Reclaimer,
        pool: AcceleratorPool,
        held: dict[str, int],
        profile: ReleaseProfile,
        gpus: int,
        **options: Any,
    ) -> backfill.EarliestStart | None:
        assert held is self.index.held and profile is self.profiles[pool.accelerator]
        found = fast_earliest(self, pool, held, profile, gpus, **options)
        assert found == backfill.earliest_start(pool, held, profile, gpus, **options)
        return found

    def reservation(*given: Any) -> backfill.ReservationStart | None:
        # As `_try_reserve` asks: every argument, the level it keeps and its finder last.
        *plain, max_level, finder = given
        assert max_level == gang_level_now(*plain)
        found = fast_reservation(*given)
        assert found == fast_reservation(*plain)
        return found

    for policy in (snapshot.policy, replace(snapshot.policy, guarantee_spread_after_s=3600.0)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Reclaimer, "earliest", earliest)
            patch.setattr(sys.modules[_Cycle.__module__], "reservation_start", reservation)
            schedule(replace(snapshot, policy=policy), now)
            schedule(replace(snapshot, policy=policy), now, explain=False)


@SETTINGS
@given(st.one_of(snapshots(), gang_snapshots(), contested_snapshots()), st.floats(0.0, 1e6), st.data())
def test_jobs_named_for_explanation_get_the_statuses_a_full_explanation_gives_them(
    snapshot: Snapshot, now: float, data: st.DataObject
) -> None:
    full = schedule(snapshot, now)
    ids = sorted(job.id for job in snapshot.pending)
    named = frozenset(data.draw(st.lists(st.sampled_from(ids), max_size=3))) if ids else frozenset()
    part = schedule(snapshot, now, explain=named)
    assert part.actions == full.actions
    assert [status for status in full.pending if status.job_id in named] == [
        status for status in part.pending if status.job_id in named
    ]
    waits = [status.job_id for status in full.pending if status.reason == REASON_TOPOLOGY]
    assert waits == [status.job_id for status in part.pending if status.reason == REASON_TOPOLOGY]


def test_a_queue_of_borrowers_is_answered_from_verdicts_while_a_reclaim_is_still_possible() -> None:
    # beta borrows a node that gamma is guaranteed; alpha uses its whole guarantee and queues more
    # 8-GPU jobs, which can take nothing (same priority, no guarantee left). The first gets the
    # reservation, the second looks in full, the rest are answered from its verdict (the third
    # through `_passed_over`, the others as the job before them, or each through `_passed_over`
    # without that shortcut); gamma, last in the queue, still reclaims its loan.
    nodes = builders.fleet("1x1x2x8")
    loan = builders.running(builders.job("loan", 8, team="beta", duration_s=1e5), on="p0-r0-n0", borrowing=True)
    own = builders.running(builders.job("own", 8, duration_s=1e5), on="p0-r0-n1")
    queue = [builders.job(f"more-{n}", 8, submit_s=float(n)) for n in range(6)]
    owner = builders.job("owner", 8, team="gamma", submit_s=10.0)
    scenario = builders.Scenario(nodes).with_running(loan, own).pending(*queue, owner)
    snapshot = scenario.quotas(builders.quota("alpha", 8), builders.quota("gamma", 8)).policy(reclaim_after_s=0.0)
    passed: list[str] = []
    passed_over = _Cycle._passed_over

    def recorded(self: _Cycle, job: Job, pool: AcceleratorPool, size: int) -> bool:
        if passed_over(self, job, pool, size):
            passed.append(job.id)
            return True
        return False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Cycle, "_passed_over", recorded)
        fast = schedule(snapshot.build(), 100.0)
        passed_in_runs = list(passed)
        patch.setattr(_Cycle, "shape_of", staticmethod(_no_shape))
        each = schedule(snapshot.build(), 100.0)
        patch.setattr(_Cycle, "_passed_over", _look_in_full)
        plain = schedule(snapshot.build(), 100.0)

    assert passed_in_runs == ["more-2"]
    assert passed[len(passed_in_runs) :] == ["more-2", "more-3", "more-4", "more-5"]
    assert fast == each == plain
    assert [start.job_id for start in fast.starts()] == ["owner"] and fast.of_type(Preempt)[0].job_id == "loan"


def test_a_search_with_a_lower_cost_cap_is_answered_by_one_that_found_nothing_with_a_higher() -> None:
    # Each node holds 4 GPUs nobody may preempt and a 4-GPU loan of beta: no node can be freed for
    # an 8-GPU reclaim of gamma, whatever it may cost. gamma's jobs come oldest first, so each may
    # evict less than the one before (its cap is its GPUs times its wait, `credited_wait_s` at a
    # credit of 1): the
    # first searches, the rest are answered from its memo, charged only the loans cheaper than their cap.
    nodes = builders.fleet("1x1x3x8")
    pinned = [builders.job(f"pinned-{n}", 4, team="beta", preemptible=False, duration_s=1e6) for n in range(3)]
    loans = [builders.job(f"loan-{n}", 4, team="beta", duration_s=1e6) for n in range(3)]
    runs = [builders.running(work, ((f"p0-r0-n{n}", 4),), progress_s=1.0) for n, work in enumerate(pinned)]
    runs += [
        builders.running(work, ((f"p0-r0-n{n}", 4),), progress_s=progress, borrowing=True)
        for n, (work, progress) in enumerate(zip(loans, (50.0, 125.0, 225.0), strict=True))
    ]
    owners = [builders.job(f"owner-{n}", 8, team="gamma", submit_s=15.0 * n) for n in range(4)]
    scenario = builders.Scenario(nodes).with_running(*runs).pending(*owners)
    scenario = scenario.quotas(builders.quota("gamma", 16), builders.quota("beta", 0))
    snapshot = scenario.policy(
        reclaim_after_s=None, reclaim_wait_credit=1.0, preemption_grace_s=0.0, reservation_depth=0
    ).build()
    answers, (fast, fast_left), (plain, plain_left) = _memo_answers_then_plain(snapshot, 100.0)

    assert answers == [False, True, True, True]
    assert fast == plain and fast.of_type(Preempt) == ()
    # The candidates: the pinned jobs (4 GPU-s each), then loans of 200, 500 and 900 GPU-s. The caps
    # are 800, 680, 560 and 440: the first three searches visit the pinned jobs and two loans, the
    # last one loan only, whether made or answered from the memo.
    assert fast_left == plain_left == [8187, 8182, 8177, 8173]


def test_the_owners_pass_looks_at_every_job_after_an_eviction_gives_a_team_guarantee_back() -> None:
    # alpha is guaranteed 8 GPUs and uses them: its jobs would borrow, so the owners' pass puts them
    # off without a look, and only gamma's job (within gamma's guarantee) is looked at. Once an
    # eviction gives alpha GPUs back, every job after the one that evicted is looked at, and only
    # alpha's job before it stays put off.
    own = builders.running(builders.job("own", 8), on="p0-r0-n0")
    pending = (
        builders.job("a-first", 4, submit_s=1.0),
        builders.job("owner", 8, team="gamma", submit_s=2.0),
        builders.job("a-second", 4, submit_s=3.0),
    )
    scenario = builders.Scenario(builders.fleet("1x1x2x8")).with_running(own).pending(*pending)
    snapshot = scenario.quotas(builders.quota("alpha", 8), builders.quota("gamma", 8)).policy(fairshare=False).build()

    def owners_pass(release_after_first: bool) -> tuple[list[str], list[str]]:
        cycle = _Cycle(snapshot, 10.0)
        cycle._prepare(prepare_cycle(snapshot, 10.0))
        queue = cycle._order()
        deferred: list[int] = []
        looked = []
        for position in cycle._maybe_owners(queue, deferred):
            looked.append(queue[position].id)
            if release_after_first:
                cycle.ledger.release("alpha", "a100", 8)
                release_after_first = False
        return looked, [queue[position].id for position in sorted(deferred)]

    assert owners_pass(False) == (["owner"], ["a-first", "a-second"])
    assert owners_pass(True) == (["owner", "a-second"], ["a-first"])


def test_without_explanations_the_scan_ends_once_nothing_is_free_and_no_job_left_may_preempt() -> None:
    # A full fleet on loan from gamma, which waits for nothing; alpha's jobs would all borrow. A
    # reclaim is still possible on the accelerator (so it never settles), but none of alpha's jobs
    # may reclaim: the first reserves the node, and with its one reservation made nothing is left
    # for the others to do. Without explanations they are not looked at; the actions are the same.
    loan = builders.running(builders.job("loan", 8, duration_s=1e4), on="p0-r0-n0", borrowing=True)
    queue = [builders.job(f"wait-{n}", 1 + n % 8, submit_s=float(n)) for n in range(12)]
    scenario = builders.Scenario(builders.fleet("1x1x1x8")).with_running(loan).pending(*queue)
    snapshot = scenario.quotas(builders.quota("gamma", 8)).build()
    looked: list[str] = []
    consider_sized = _Cycle._consider_sized

    def recorded(self: _Cycle, job: Job, *args: object) -> None:
        looked.append(job.id)
        consider_sized(self, job, *args)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Cycle, "_consider_sized", recorded)
        full = schedule(snapshot, 100.0)
        looked_explaining = list(looked)
        looked.clear()
        lean = schedule(snapshot, 100.0, explain=False)

    assert lean.actions == full.actions and [type(action).__name__ for action in full.actions] == ["Reserve"]
    assert len(looked_explaining) > 1 and looked == looked_explaining[:1]


@SETTINGS
@given(contested_snapshots(), st.floats(0.0, 5000.0))
def test_queue_shapes_told_apart_by_identity_plan_as_shapes_told_apart_by_value(snapshot: Snapshot, now: float) -> None:
    # A pickled copy of a job brings its own shape object: read by identity it is a shape of its
    # own, whose answers are those of the shape it equals, so the plan is the same.
    copies = tuple(pickle.loads(pickle.dumps(job)) for job in snapshot.pending)
    assert all(
        copy.shape == job.shape and copy.shape is not job.shape
        for copy, job in zip(copies, snapshot.pending, strict=True)
    )
    shapes = QueueShapes(list(snapshot.pending + copies))
    assert [shapes.shapes[number] for number in shapes.ids] == [job.shape for job in snapshot.pending + copies]

    assert schedule(replace(snapshot, pending=copies), now) == schedule(snapshot, now)

"""Work a node failure interrupted gets its place back: a gang requeued by a failure goes ahead of
its class's new work (`ordering.failed_first`) and takes the first placement it can get
(`Policy.failure_spread_after_s`), in the fast engine, its plain twins and the reference alike."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import FleetState, Node, Policy, schedule, schedule_reference
from scheduling.engine.events import Evicted
from scheduling.engine.ordering import order_jobs
from scheduling.engine.plan import Plan, Preempt, Requeue, Start
from scheduling.engine.reference import FAST_PATH_QUIRKS

from .builders import Scenario, fleet, job, running, started


def _ids(jobs: list) -> list[str]:
    return [j.id for j in jobs]


def test_a_job_a_node_failure_requeued_goes_first_within_its_class_and_nothing_else_moves() -> None:
    jobs = [
        job("new", submit_s=0.0, time_limit_s=10.0),
        job("failed", submit_s=50.0, time_limit_s=900.0, requeued_by_failure=True),
        job("urgent", priority=5, submit_s=60.0),
        job("other", team="beta", submit_s=1.0),
        job("failed-low", priority=-1, submit_s=2.0, requeued_by_failure=True),
        job("low", priority=-1, submit_s=1.0),
    ]
    priorities = {"alpha": 0.25, "beta": 1.0}  # beta used less: its jobs go first among the others

    assert _ids(order_jobs(jobs, Policy(), priorities, 100.0)) == [
        "urgent",
        "failed",
        "other",
        "new",
        "failed-low",
        "low",
    ]
    shortest = Policy(queue_order="shortest_limit")
    assert _ids(order_jobs(jobs, shortest, {}, 100.0)) == ["urgent", "failed", "new", "other", "failed-low", "low"]
    unflagged = [replace(j, requeued_by_failure=False) for j in jobs]
    assert _ids(order_jobs(unflagged, Policy(), priorities, 100.0)) == [
        "urgent",
        "other",
        "new",
        "failed",
        "low",
        "failed-low",
    ]


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("queue", "queue", "fail", "leave")),
            st.sampled_from(("alpha", "beta")),
            st.integers(0, 2),
            st.integers(0, 100),
            st.sampled_from((10.0, 600.0)),
            st.integers(0, 9),
        ),
        max_size=30,
    ),
    st.dictionaries(st.sampled_from(("alpha", "beta")), st.sampled_from((0.25, 1.0)), max_size=2),
    st.sampled_from(
        (Policy(), Policy(age_weight=1.0), Policy(fairshare=False), Policy(queue_order="shortest_limit"), Policy.easy())
    ),
)
def test_the_kept_queue_and_the_sorted_queue_put_the_failed_first_as_one_sort_on_whole_keys(
    steps: list[tuple[str, str, int, int, float, int]], priorities: dict[str, float], policy: Policy
) -> None:
    """Jobs join, leave and come back requeued by a failure; the order a cycle takes from the queue
    the fleet keeps, the order sorting the pending jobs gives, and the plain statement (class, then
    the failed, then the order without them) agree at every step."""
    state = FleetState([Node("n0", "p0", "r0", "a100")])
    for action, team, priority, submit_s, limit, number in steps:
        job_id = f"j{number}"
        if action == "leave":
            state.cancel(job_id)
            continue
        queued = state.pending.get(job_id) or job(job_id, team=team, priority=priority, submit_s=float(submit_s))
        state.submit(replace(queued, time_limit_s=limit, requeued_by_failure=action == "fail"))
        now = 100.0
        snapshot = state.snapshot(now, (), (), policy)
        kept = order_jobs(snapshot.pending, policy, priorities, now, state.kept().queue)
        alone = order_jobs(snapshot.pending, policy, priorities, now)
        without = order_jobs([replace(j, requeued_by_failure=False) for j in snapshot.pending], policy, priorities, now)
        failed = {j.id for j in snapshot.pending if j.requeued_by_failure}
        rank = {job_id: index for index, job_id in enumerate(_ids(without))}
        by_id = {j.id: j for j in snapshot.pending}
        plain = sorted(rank, key=lambda i: (-by_id[i].priority, i not in failed, rank[i]))
        assert _ids(kept) == _ids(alone) == plain


def test_a_gang_a_node_failure_evicts_is_queued_as_requeued_by_failure_and_a_preempted_one_is_not() -> None:
    state = FleetState(fleet("1x1x2x8"))
    state.submit(job("g", 16, duration_s=1000.0, checkpoint_interval_s=100.0))
    state.apply(Plan((Start("g", (("p0-r0-n0", 8), ("p0-r0-n1", 8)), False, "rack"),), ()), 0.0)

    events = state.fail_node("p0-r0-n1", 250.0)

    assert [e.reason for e in events if isinstance(e, Evicted)] == ["node-failed"]
    assert state.pending["g"].requeued_by_failure
    state.submit(job("h", 8, duration_s=1000.0))
    state.apply(Plan((Start("h", (("p0-r0-n0", 8),), False, "node"),), ()), 300.0)
    state.apply(Plan((Preempt("h", "preempted-by:x", 0.0),), ()), 400.0)
    assert not state.pending["h"].requeued_by_failure
    state.apply(Plan((Start("h", (("p0-r0-n0", 8),), False, "node"),), ()), 500.0)
    state.apply(Plan((Requeue("h", "node-degraded"),), ()), 600.0)
    assert state.pending["h"].requeued_by_failure


def _gang_waiting_for_a_rack(**flags: object) -> Scenario:
    """Two racks of two nodes, each with one node busy for long: a 16-GPU gang fits only across
    the racks, and a rack with two whole nodes frees only in 10,000 s."""
    busy = [
        running(job(f"busy{rack}", 8, duration_s=10_000.0, time_limit_s=10_000.0), on=f"p0-r{rack}-n0")
        for rack in (0, 1)
    ]
    gang = job("gang", 16, duration_s=3600.0, time_limit_s=3600.0, **flags)
    return Scenario(fleet("1x2x2x8")).with_running(*busy).pending(gang)


@pytest.mark.parametrize(
    ("flags", "spread_after_s", "starts"),
    [
        ({}, 0.0, False),  # new work waits for one rack, its patience a week
        ({"requeued_by_failure": True}, 0.0, True),  # interrupted work takes the racks it can get
        ({"requeued_by_failure": True}, 3600.0, False),  # ... after an hour, were that the setting
        ({"requeued_by_failure": True}, None, False),  # or waits as any other gang
    ],
)
def test_a_gang_a_failure_requeued_spreads_at_once_where_a_new_one_waits_for_a_rack(
    flags: dict[str, object], spread_after_s: float | None, starts: bool
) -> None:
    scenario = _gang_waiting_for_a_rack(**flags).policy(failure_spread_after_s=spread_after_s)
    plan = scenario.plan(100.0)

    assert ("gang" in started(plan)) is starts
    if starts:
        assert sorted(node for node, _ in started(plan)["gang"]) == ["p0-r0-n1", "p0-r1-n1"]
    reference = schedule_reference(scenario.build(), 100.0, quirks=FAST_PATH_QUIRKS)
    assert reference.actions == plan.actions
    assert [(s.job_id, s.estimated_start_s) for s in reference.pending] == [
        (s.job_id, s.estimated_start_s) for s in schedule(scenario.build(), 100.0).pending
    ]

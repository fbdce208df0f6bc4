from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine import FleetState, Node, Policy
from scheduling.engine.fairshare import fairshare_priorities
from scheduling.engine.ordering import kept_by_team, order_jobs, sort_by_number

from .builders import Scenario, fleet, job, quota, started


def _ids(jobs: list) -> list[str]:
    return [j.id for j in jobs]


def test_a_higher_priority_job_goes_first_whatever_its_submit_time() -> None:
    plan = (
        Scenario(fleet("1x1x1x8")).pending(job("early", 8, submit_s=0), job("urgent", 8, priority=5, submit_s=9)).plan()
    )

    assert set(started(plan)) == {"urgent"}


def test_within_a_priority_the_team_with_less_usage_per_entitlement_goes_first() -> None:
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 8), quota("beta", 8)).usage(alpha=1000.0, beta=10.0)
    plan = scenario.pending(job("a", 8, team="alpha"), job("b", 8, team="beta", submit_s=5)).plan()

    assert set(started(plan)) == {"b"}


def test_a_larger_entitlement_makes_the_same_usage_weigh_less() -> None:
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 64), quota("beta", 8)).usage(alpha=100.0, beta=100.0)
    plan = scenario.pending(job("a", 8, team="alpha", submit_s=5), job("b", 8, team="beta")).plan()

    assert set(started(plan)) == {"a"}


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("submit", ["old", "short", "fresh"]),
        ("shortest_limit", ["short", "fresh", "old"]),
        ("las", ["fresh", "short", "old"]),
    ],
)
def test_the_within_team_order_follows_policy(order: str, expected: list[str]) -> None:
    jobs = [
        job("old", submit_s=0, time_limit_s=900.0, attained_gpu_s=500.0),
        job("short", submit_s=1, time_limit_s=10.0, attained_gpu_s=100.0),
        job("fresh", submit_s=2, time_limit_s=100.0),
    ]

    assert _ids(order_jobs(jobs, Policy(within_team_order=order), {}, 0.0)) == expected


@pytest.mark.parametrize(
    ("age_weight", "expected"), [(0.0, ["long-old", "short", "long"]), (2.0, ["long-old", "long", "short"])]
)
def test_without_an_age_weight_a_team_runs_its_shortest_limit_first_after_the_jobs_that_waited_the_max_age(
    age_weight: float, expected: list[str]
) -> None:
    policy = Policy(age_weight=age_weight, max_age_s=100.0, within_team_order="shortest_limit")
    jobs = [
        job("long-old", submit_s=0.0, time_limit_s=900.0),  # has waited 1,000 s, more than the max age
        job("long", submit_s=950.0, time_limit_s=800.0),
        job("short", submit_s=990.0, time_limit_s=10.0),
    ]

    assert _ids(order_jobs(jobs, policy, {"alpha": 0.5}, 1000.0)) == expected


def test_ties_are_broken_by_job_id() -> None:
    jobs = [job("b"), job("c"), job("a")]

    assert _ids(order_jobs(jobs, Policy(), {}, 0.0)) == ["a", "b", "c"]


@pytest.mark.parametrize(("age_weight", "first"), [(0.0, "light"), (2.0, "heavy")])
def test_an_age_weight_lifts_a_heavy_teams_long_waiting_job_above_a_light_teams_new_one(
    age_weight: float, first: str
) -> None:
    day = 86400.0
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 8), quota("beta", 8)).usage(alpha=1e7, beta=0.0)
    scenario.policy(age_weight=age_weight, max_age_s=2 * day)
    jobs = (job("heavy", 8, team="alpha", submit_s=0.0), job("light", 8, team="beta", submit_s=3 * day))
    plan = scenario.pending(*jobs).plan(now=3 * day)

    assert set(started(plan)) == {first}


def test_the_age_term_grows_with_the_wait_up_to_max_age() -> None:
    policy = Policy(age_weight=1.0, max_age_s=100.0)
    priorities = {"alpha": 0.5, "beta": 0.7}
    jobs = [
        job("a-new", team="alpha", submit_s=990.0),  # 0.5 + 0.1
        job("b-new", team="beta", submit_s=1000.0),  # 0.7
        job("a-half", team="alpha", submit_s=950.0),  # 0.5 + 0.5
        job("a-old", team="alpha", submit_s=0.0),  # 0.5 + 1.0 (capped)
        job("a-older", team="alpha", submit_s=-500.0),  # capped too: then submit time
    ]

    assert _ids(order_jobs(jobs, policy, priorities, 1000.0)) == ["a-older", "a-old", "a-half", "b-new", "a-new"]


def test_shortest_limit_first_ranks_the_whole_class_by_time_limit_whatever_the_team() -> None:
    priorities = {"heavy": 0.1, "light": 1.0}  # what fair share would rank by: not read
    jobs = [
        job("light-long", team="light", submit_s=0.0, time_limit_s=7200.0),
        job("heavy-short", team="heavy", submit_s=50.0, time_limit_s=600.0),
        job("light-short", team="light", submit_s=60.0, time_limit_s=600.0),
        job("urgent-long", team="light", priority=5, submit_s=90.0, time_limit_s=9000.0),
    ]
    ordered = order_jobs(jobs, Policy(queue_order="shortest_limit"), priorities, 100.0)

    assert _ids(ordered) == ["urgent-long", "heavy-short", "light-short", "light-long"]


def test_with_shortest_limit_first_a_job_that_waited_the_maximum_age_goes_before_shorter_ones() -> None:
    day = 86400.0
    scenario = Scenario(fleet("1x1x1x8")).policy(queue_order="shortest_limit", max_age_s=2 * day)
    jobs = (
        job("long", 8, submit_s=0.0, time_limit_s=5 * day),
        job("short", 8, team="beta", submit_s=1.5 * day, time_limit_s=3600.0),
    )

    assert set(started(scenario.pending(*jobs).plan(now=1.9 * day))) == {"short"}
    assert set(started(scenario.pending(*jobs).plan(now=2.1 * day))) == {"long"}


def test_fair_share_priorities_are_one_unused_one_half_at_the_mean_and_fall_with_usage() -> None:
    priorities = fairshare_priorities({"idle": 0.0, "mean": 2.0, "heavy": 4.0})

    assert priorities["idle"] == 1.0
    assert priorities["mean"] == 0.5
    assert priorities["heavy"] == 0.25
    assert fairshare_priorities({"a": 0.0, "b": 0.0}) == {"a": 1.0, "b": 1.0}
    assert fairshare_priorities({}) == {}


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1000)), max_size=40),
    st.booleans(),
)
def test_sort_by_number_sorts_by_number_then_tiebreak_keeping_the_order_of_full_ties(
    items: list[tuple[int, int, int]], reverse: bool
) -> None:
    """`sort_by_number` (with its fast path for a single number) is a stable sort on (number, then
    tiebreak ascending), the number descending when `reverse`, and it returns the number of each
    position."""
    fast = list(items)
    numbers = sort_by_number(fast, lambda item: float(item[0]), lambda item: item[1], reverse=reverse)
    sign = -1 if reverse else 1
    assert fast == sorted(items, key=lambda item: (sign * item[0], item[1]))
    assert numbers == [float(item[0]) for item in fast]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(("alpha", "beta", "gamma")),
            st.integers(0, 2),
            st.integers(0, 100),
            st.sampled_from((10.0, 60.0, 600.0)),
        ),
        max_size=30,
    ),
    st.dictionaries(st.sampled_from(("alpha", "beta")), st.sampled_from((0.25, 0.5, 1.0)), max_size=2),
    st.sampled_from((10.0, 50.0)),
)
def test_without_an_age_term_the_queue_is_sorted_on_whole_keys(
    rows: list[tuple[str, int, int, float]], priorities: dict[str, float], max_age_s: float
) -> None:
    """The fast path for scores without an age term (sorted key by key) orders as one sort on
    (score, waited less than the maximum age, time limit, submit time, id) does."""
    jobs = [
        job(f"j{index}", team=team, priority=priority, submit_s=float(submit_s), time_limit_s=limit)
        for index, (team, priority, submit_s, limit) in enumerate(rows)
    ]
    now, policy = 100.0, Policy(age_weight=0.0, max_age_s=max_age_s, within_team_order="shortest_limit")

    def score(j) -> float:
        return j.priority * 2.0 + priorities.get(j.team, 1.0) if priorities else j.priority

    expected = sorted(jobs, key=lambda j: (-score(j), j.submit_s > now - max_age_s, j.estimate_s, j.submit_s, j.id))
    assert _ids(order_jobs(jobs, policy, priorities, now)) == _ids(expected)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(("queue", "queue", "leave", "requeue")),
            st.sampled_from(("alpha", "beta", "gamma")),
            st.integers(0, 2),
            st.integers(0, 100),
            st.sampled_from((10.0, 60.0, 600.0)),
            st.integers(0, 11),
        ),
        max_size=40,
    ),
    st.dictionaries(st.sampled_from(("alpha", "beta", "gamma")), st.sampled_from((0.25, 0.5, 1.0)), max_size=3),
    st.sampled_from(("submit", "shortest_limit", "las")),
    st.sampled_from((10.0, 50.0)),
    st.booleans(),
    st.sampled_from((0.0, 0.0, 1.0)),
)
def test_the_queue_kept_in_within_team_order_orders_as_sorting_the_queue_does(
    steps: list[tuple[str, str, int, int, float, int]],
    priorities: dict[str, float],
    within_team_order: str,
    max_age_s: float,
    fairshare: bool,
    age_weight: float,
) -> None:
    """Jobs join and leave a fleet's queue (a job queued again comes back with more attained
    service); at every step, and at times that move which jobs have waited `max_age_s` either way,
    the order a cycle takes from the queue the fleet keeps (by class and team with fair share, by
    class alone without) is the order sorting its pending jobs gives."""
    state = FleetState([Node("n0", "p0", "r0", "a100")])
    policy = Policy(
        age_weight=age_weight,
        max_age_s=max_age_s,
        within_team_order=within_team_order,  # type: ignore[arg-type]
        fairshare=fairshare,
    )
    for action, team, priority, submit_s, limit, number in steps:
        job_id = f"j{number}"
        if action == "leave":
            state.cancel(job_id)
        else:
            attained = float(number * 7) if action == "requeue" else 0.0
            state.submit(
                job(job_id, team=team, priority=priority, submit_s=float(submit_s), time_limit_s=limit)
                if action == "queue"
                else replace(state.pending.get(job_id) or job(job_id, team=team), attained_gpu_s=attained)
            )
        for now in (100.0, 60.0, 100.0, 130.0):
            snapshot = state.snapshot(now, (), (), policy)
            view = state.kept().queue
            assert (view is None) == (kept_by_team(policy) is None)  # (an age term: sorted)
            kept = order_jobs(snapshot.pending, policy, priorities, now, view)
            assert _ids(kept) == _ids(order_jobs(snapshot.pending, policy, priorities, now))


def test_a_snapshot_taken_before_the_queue_changed_is_ordered_by_sorting_its_own_jobs() -> None:
    state = FleetState([Node("n0", "p0", "r0", "a100")])
    policy = Policy(age_weight=0.0)
    state.submit(job("early", submit_s=0.0))
    older = state.snapshot(10.0, (), (), policy)
    view = state.kept().queue
    state.submit(job("later", submit_s=5.0))
    assert view is not None and view.order(older.pending, policy, {}, 10.0) is None
    assert _ids(order_jobs(older.pending, policy, {}, 10.0, view)) == ["early"]


def test_a_snapshot_made_from_another_with_one_more_job_orders_that_job_too() -> None:
    """As the start preview does: the snapshot's pending jobs and one more, with the view of the
    queue the state kept for the first snapshot handed along."""
    state = FleetState([Node("n0", "p0", "r0", "a100")])
    policy = Policy(age_weight=0.0)
    state.submit(job("queued", submit_s=0.0, time_limit_s=600.0))
    snapshot = state.snapshot(10.0, (), (), policy)
    more = replace(snapshot, pending=(*snapshot.pending, job("preview", submit_s=10.0, time_limit_s=60.0)))
    assert _ids(order_jobs(more.pending, policy, {}, 10.0, state.kept().queue)) == ["preview", "queued"]

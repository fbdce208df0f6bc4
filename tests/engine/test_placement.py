from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Node, Policy, Reserve
from scheduling.engine.capacity import CapacityIndex, Shape, domain_gpus
from scheduling.engine.explain import _short_of
from scheduling.engine.model import LEVELS
from scheduling.engine.placement import plain_smallest_rack, smallest_rack
from scheduling.engine.vocabulary import WAITS_DOMAIN, WAITS_HARDWARE

from .builders import Scenario, fleet, job, quota, reason_of, running, started


def test_a_gang_that_does_not_fit_starts_on_no_node() -> None:
    plan = Scenario(fleet("1x1x2x8")).pending(job("big", 24)).plan()

    assert plan.starts() == ()
    assert reason_of(plan, "big") == "capacity"


def test_a_multi_node_gang_takes_whole_nodes_in_the_rack_with_least_left_over() -> None:
    busy = running(job("busy", 16), on=("p0-r0-n0", "p0-r0-n1"))
    plan = Scenario(fleet("1x2x4x8")).with_running(busy).pending(job("gang", 16)).plan()

    (start,) = plan.starts()
    assert start.allocation == (("p0-r0-n2", 8), ("p0-r0-n3", 8))
    assert start.level == "rack"


def test_a_single_node_job_goes_where_it_leaves_the_fewest_free_gpus() -> None:
    scenario = Scenario(fleet("1x1x3x8")).with_running(
        running(job("six", 6), on="p0-r0-n0"),
        running(job("four", 4), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("two", 2)).plan()

    assert started(plan) == {"two": (("p0-r0-n0", 2),)}
    assert plan.starts()[0].level == "node"


def test_a_gang_spans_racks_only_when_no_single_rack_fits() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8), on="p0-r0-n0"), running(job("b", 8), on="p0-r1-n0")
    )
    plan = scenario.policy(gang_spread_after_s=0.0).pending(job("gang", 16)).plan()

    (start,) = plan.starts()
    assert {node for node, _ in start.allocation} == {"p0-r0-n1", "p0-r1-n1"}
    assert start.level == "pod"


@pytest.mark.parametrize(
    ("spread_after_s", "waited_s", "starts"),
    [(None, 86400.0, False), (3600.0, 600.0, False), (3600.0, 3600.0, True), (0.0, 0.0, True)],
)
def test_a_gang_waits_for_a_rack_an_empty_fleet_would_give_it_until_its_patience_runs_out(
    spread_after_s: float | None, waited_s: float, starts: bool
) -> None:
    # Each rack has two nodes, one busy until t=3000: the 16-GPU gang fits a rack on an empty
    # fleet, but now only across the two racks.
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8, time_limit_s=3000.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=3000.0), on="p0-r1-n0"),
    )
    scenario.policy(gang_spread_after_s=spread_after_s).pending(job("gang", 16, submit_s=0.0))
    plan = scenario.plan(now=waited_s)

    assert bool(plan.starts()) is starts
    if not starts:
        assert reason_of(plan, "gang") == "topology"
        (reservation,) = plan.of_type(Reserve)
        assert set(reservation.node_ids) in ({"p0-r0-n0", "p0-r0-n1"}, {"p0-r1-n0", "p0-r1-n1"})


@pytest.mark.parametrize(
    ("alpha_running", "guarantee_spread_after_s", "starts"),
    [(False, 0.0, True), (True, 0.0, False), (False, None, False), (False, 3600.0, False)],
)
def test_a_gang_of_a_team_below_its_guarantee_spreads_across_racks_instead_of_waiting_for_one(
    alpha_running: bool, guarantee_spread_after_s: float | None, starts: bool
) -> None:
    # Two racks of three nodes, one free node in each: the 16-GPU gang fits a rack on an empty
    # fleet, but now only across both. The busy nodes free at t=3000.
    scenario = Scenario(fleet("1x2x3x8")).with_running(
        running(job("b0", 8, team="beta", time_limit_s=3000.0), on="p0-r0-n0", borrowing=True),
        running(job("b1", 8, team="beta", time_limit_s=3000.0), on="p0-r1-n0", borrowing=True),
        running(job("b2", 8, team="beta", time_limit_s=3000.0), on="p0-r1-n2", borrowing=True),
    )
    # The last busy node runs alpha's own work (then alpha uses its whole guarantee) or beta's.
    owner = "alpha" if alpha_running else "beta"
    scenario.with_running(
        running(job("x", 8, team=owner, time_limit_s=3000.0), on="p0-r0-n1", borrowing=not alpha_running)
    )
    scenario.quotas(quota("alpha", 8), quota("beta", 0))
    # (beta's loans do not checkpoint and started 600 s ago: no young loan is taken, so that the gang
    # waits or spreads by its patience alone.)
    policy = scenario.policy(guarantee_spread_after_s=guarantee_spread_after_s, partial_reclaim_young_s=None)
    policy.pending(job("gang", 16, submit_s=0.0))
    plan = scenario.plan(now=600.0)

    if starts:
        (start,) = plan.starts()
        assert (start.job_id, start.level, start.borrowing) == ("gang", "pod", True)
    else:
        assert plan.starts() == ()
        assert reason_of(plan, "gang") == "topology"
        (reservation,) = plan.of_type(Reserve)
        assert reservation.start_s == 3000.0


def test_a_gang_whose_rack_frees_only_after_its_patience_runs_out_is_reserved_across_racks_for_then() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8, time_limit_s=86400.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=86400.0), on="p0-r1-n0"),
    )
    plan = scenario.policy(gang_spread_after_s=3600.0).pending(job("gang", 16, submit_s=0.0)).plan(now=600.0)

    assert plan.starts() == ()
    assert plan.of_type(Reserve) == (Reserve("gang", ("p0-r0-n1", "p0-r1-n1"), 3600.0),)


def test_a_gang_whose_rack_never_frees_in_view_spreads_at_once() -> None:
    replicas = job("replicas", 16, kind="serving", priority=100, preemptible=False, duration_s=10 * 365 * 86400.0)
    scenario = Scenario(fleet("1x2x2x8")).with_running(running(replicas, on=("p0-r0-n0", "p0-r1-n0")))
    plan = scenario.policy(gang_spread_after_s=86400.0).pending(job("gang", 16, submit_s=0.0)).plan(now=600.0)

    (start,) = plan.starts()
    assert (start.job_id, {node for node, _ in start.allocation}, start.level) == (
        "gang",
        {"p0-r0-n1", "p0-r1-n1"},
        "pod",
    )


def test_a_gang_larger_than_any_rack_is_not_held_to_one() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(running(job("a", 8), on="p0-r0-n0"))
    plan = scenario.pending(job("gang", 24)).plan()

    (start,) = plan.starts()
    assert start.level == "pod"


@pytest.mark.parametrize(
    ("required", "expected_reason"),
    [("rack", "topology"), ("node", "topology")],
)
def test_a_gang_with_a_required_level_waits_rather_than_spread_wider(required: str, expected_reason: str) -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8), on="p0-r0-n0"), running(job("b", 8), on="p0-r1-n0")
    )
    plan = scenario.pending(job("gang", 16, required_level=required)).plan()

    assert plan.starts() == ()
    assert reason_of(plan, "gang") == expected_reason


def test_a_gang_whose_gpus_are_not_a_multiple_of_the_node_size_rounds_up_to_whole_nodes() -> None:
    plan = Scenario(fleet("1x1x2x8")).pending(job("odd", 12)).plan()

    (start,) = plan.starts()
    assert start.allocation == (("p0-r0-n0", 8), ("p0-r0-n1", 4))


@pytest.mark.parametrize(
    ("node", "fits"),
    [
        (Node("n", "p", "r", "a100", 8, 8, False), True),
        (Node("n", "p", "r", "a100", 8, 8, True), False),
        (Node("n", "p", "r", "a100", 8, 4, False), False),
        (Node("n", "p", "r", "h100", 8, 8, False), False),
    ],
    ids=["healthy", "cordoned", "half-healthy", "other-accelerator"],
)
def test_only_healthy_uncordoned_gpus_of_the_jobs_accelerator_are_used(node: Node, fits: bool) -> None:
    plan = Scenario((node,)).pending(job("j", 8)).plan()

    assert bool(plan.starts()) is fits


def test_free_gpus_scattered_over_nodes_are_a_topology_problem_not_a_capacity_one() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("a", 4), on="p0-r0-n0"), running(job("b", 4), on="p0-r0-n1")
    )
    plan = scenario.pending(job("eight", 8)).plan()

    assert plan.starts() == ()
    assert reason_of(plan, "eight") == "topology"


def test_first_fit_takes_the_first_node_in_order_instead_of_the_best_one() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(running(job("six", 6), on="p0-r0-n1"))
    best = scenario.pending(job("two", 2)).plan()
    first = scenario.policy(Policy.fifo()).plan()

    assert started(best) == {"two": (("p0-r0-n1", 2),)}
    assert started(first) == {"two": (("p0-r0-n0", 2),)}


def test_several_jobs_in_one_cycle_never_share_a_gpu() -> None:
    plan = Scenario(fleet("1x1x2x8")).pending(*(job(f"j{i}", 4) for i in range(5))).plan()

    assert len(plan.starts()) == 4
    assert reason_of(plan, "j4") == "capacity"


def test_a_serving_gang_takes_the_first_placement_it_can_get() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8), on="p0-r0-n0"), running(job("b", 8), on="p0-r1-n0")
    )
    plan = scenario.pending(job("replicas", 16, kind="serving", priority=100, preemptible=False)).plan()

    (start,) = plan.starts()
    assert start.level == "pod"


@pytest.mark.parametrize(("pod_frees_at_s", "starts_across_pods"), [(1000.0, False), (6000.0, True)])
def test_a_gang_starts_across_pods_only_when_waiting_for_one_pod_would_finish_it_later(
    pod_frees_at_s: float, starts_across_pods: bool
) -> None:
    # Two pods of one rack of two nodes; one node of each pod runs alpha's own work, so the 16-GPU
    # gang (alpha is below its guarantee: it may spread at once) fits now only across the pods,
    # where it runs 1.4 times slower: 10,000 s of work end at 14,000. Pod p0 frees at
    # `pod_frees_at_s`, where the gang would end at that plus 10,000 s.
    scenario = Scenario(fleet("2x1x2x8")).with_running(
        running(job("soon", 8, time_limit_s=pod_frees_at_s), on="p0-r0-n0"),
        running(job("late", 8, time_limit_s=86400.0), on="p1-r0-n0"),
    )
    scenario.quotas(quota("alpha", 32)).pending(job("gang", 16, duration_s=10_000.0, time_limit_s=10_000.0))
    plan = scenario.plan(now=0.0)

    if starts_across_pods:
        (start,) = plan.starts()
        assert (start.job_id, start.level) == ("gang", "fleet")
    else:
        assert plan.starts() == ()
        assert reason_of(plan, "gang") == "topology"
        (reservation,) = plan.of_type(Reserve)
        assert (set(reservation.node_ids), reservation.start_s) == ({"p0-r0-n0", "p0-r0-n1"}, pod_frees_at_s)


def test_a_gang_that_cannot_reserve_the_pod_it_would_wait_for_starts_across_pods() -> None:
    # As above with p0 freeing at 1,000 s, but no reservation is left to make (depth 0): nothing
    # would keep p0's nodes for the gang, so it is not held for them.
    scenario = Scenario(fleet("2x1x2x8")).with_running(
        running(job("soon", 8, time_limit_s=1000.0), on="p0-r0-n0"),
        running(job("late", 8, time_limit_s=86400.0), on="p1-r0-n0"),
    )
    scenario.quotas(quota("alpha", 32)).policy(reservation_depth=0)
    plan = scenario.pending(job("gang", 16, duration_s=10_000.0, time_limit_s=10_000.0)).plan(now=0.0)

    (start,) = plan.starts()
    assert (start.job_id, start.level) == ("gang", "fleet")


def _shape(nodes: tuple[Node, ...]) -> Shape:
    return CapacityIndex(nodes, {}, Policy().gpus_per_node).pools["a100"].shape


@pytest.mark.parametrize(
    ("nodes", "most"),
    [
        # pods x racks x nodes x GPUs: the largest gang one node, rack, pod and the fleet hold.
        (fleet("2x4x8x8"), {"node": 8, "rack": 64, "pod": 256, "fleet": 512}),
        (fleet("1x2x2x8"), {"node": 8, "rack": 16, "pod": 32, "fleet": 32}),
        # Nodes smaller than the node size planning assumes are never whole: one node is the most.
        (fleet("1x2x2x4"), {"node": 4, "rack": 4, "pod": 4, "fleet": 4}),
        # Down and degraded nodes hold nothing, or less, until they are healthy again.
        (
            (Node("n1", "p", "r", "a100", healthy_gpus=0), Node("n2", "p", "r", "a100", healthy_gpus=6)),
            {"node": 6, "rack": 6, "pod": 6, "fleet": 6},
        ),
        (
            (Node("n1", "p", "r1", "a100"), Node("n2", "p", "r2", "a100"), Node("n3", "q", "r3", "a100")),
            {"node": 8, "rack": 8, "pod": 16, "fleet": 24},
        ),
    ],
)
def test_the_largest_gang_each_level_holds_follows_the_fleets_healthy_shape(
    nodes: tuple[Node, ...], most: dict[str, int]
) -> None:
    shape = _shape(nodes)

    assert {level: domain_gpus(shape, level) for level in LEVELS} == most
    for level, gpus in most.items():  # the explanation says the same of one more GPU
        assert _short_of(shape, gpus, level) is None
        assert _short_of(shape, gpus + 1, level) in (WAITS_HARDWARE, f"{WAITS_DOMAIN}{level}")


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(0, 47), st.integers(-8, 8), st.integers(1, 6)), max_size=120))
def test_the_smallest_rack_kept_by_whole_nodes_is_the_one_every_rack_gives(
    steps: list[tuple[int, int, int]],
) -> None:
    """GPUs taken and given back node by node, and asked for a rack between: the racks kept by their
    whole nodes give the rack the plain look at every rack gives."""
    nodes = fleet("2x3x8x8")
    pool = CapacityIndex(nodes, {}, 8).pools["a100"]
    for position, delta, count in steps:
        node_id = nodes[position].id
        if delta < 0:
            pool.take(node_id, min(-delta, pool.free[node_id]))
        else:
            pool.give(node_id, min(delta, 8 - pool.free[node_id]))
        assert smallest_rack(pool, count) == plain_smallest_rack(pool, count)

"""Packing against fragmentation: small jobs keep whole nodes and whole racks free for gangs, and a
gang waiting for a rack is reserved the rack that frees first."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Node, Reserve
from scheduling.engine.capacity import AcceleratorPool
from scheduling.engine.packing import best_node, plain_best_node

from .builders import Scenario, fleet, job, reason_of, running, started


def _rack_of(node_id: str) -> str:
    return node_id.rsplit("-", 1)[0]


def test_single_gpu_jobs_fill_partly_used_racks_before_empty_ones() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(running(job("busy", 2), on="p0-r1-n1"))
    plan = scenario.pending(*(job(f"j{index:02d}", 1, submit_s=index) for index in range(15))).plan()

    racks = [_rack_of(node) for start in plan.starts() for node, _ in start.allocation]
    assert racks == ["p0-r1"] * 14 + ["p0-r0"]


def test_a_single_node_job_breaks_a_whole_node_only_in_the_most_used_rack() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(running(job("busy", 8), on="p0-r1-n0"))
    plan = scenario.pending(job("eight", 8)).plan()

    assert started(plan) == {"eight": (("p0-r1-n1", 8),)}


def test_a_small_job_takes_room_on_a_node_in_use_before_it_breaks_a_whole_node() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("full", 8), on="p0-r0-n0"), running(job("most", 7), on="p0-r1-n0")
    )
    plan = scenario.pending(job("one", 1)).plan()

    assert started(plan) == {"one": (("p0-r1-n0", 1),)}


def test_ties_between_equally_used_racks_and_nodes_go_to_the_lowest_id() -> None:
    plan = Scenario(tuple(reversed(fleet("1x2x2x8")))).pending(job("one", 1)).plan()

    assert started(plan) == {"one": (("p0-r0-n0", 1),)}


def test_a_waiting_gangs_reservation_drains_one_rack() -> None:
    # Rack r0 frees first (at t=100); a small job ahead of the gang in the queue goes to the busier
    # rack r1 rather than onto r0's free nodes, so the gang gets all of r0 at t=100.
    scenario = Scenario(fleet("1x2x3x8")).with_running(
        running(job("soon", 8, time_limit_s=100.0), on="p0-r0-n1"),
        running(job("long1", 8, time_limit_s=9000.0), on="p0-r1-n1"),
        running(job("long2", 8, time_limit_s=9000.0), on="p0-r1-n2"),
    )
    urgent = job("urgent", 1, priority=5, time_limit_s=5000.0)
    plan = scenario.pending(urgent, job("gang", 24)).plan()

    assert started(plan) == {"urgent": (("p0-r1-n0", 1),)}
    assert plan.of_type(Reserve) == (Reserve("gang", ("p0-r0-n0", "p0-r0-n1", "p0-r0-n2"), 100.0),)


def test_a_waiting_gang_is_reserved_the_rack_that_frees_first() -> None:
    # Rack r0 is free at t=300 (its last job ends then), rack r1 at t=200; across racks the gang
    # could start at t=150, but a training gang waits for a rack.
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8, time_limit_s=100.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=300.0), on="p0-r0-n1"),
        running(job("c", 8, time_limit_s=200.0), on="p0-r1-n0"),
        running(job("d", 8, time_limit_s=150.0), on="p0-r1-n1"),
    )
    plan = scenario.pending(job("gang", 16), job("small", 1, submit_s=1.0, time_limit_s=5000.0)).plan()

    (reservation,) = plan.of_type(Reserve)
    assert reservation.job_id == "gang"
    assert set(reservation.node_ids) == {"p0-r1-n0", "p0-r1-n1"}
    assert reservation.start_s == 200.0
    assert reason_of(plan, "small") in ("capacity", "reserved-for:gang")


def test_small_jobs_behind_a_waiting_gang_stay_off_the_rack_it_drains() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 4, time_limit_s=1000.0), on="p0-r0-n0"),
        running(job("c", 8, time_limit_s=200.0), on="p0-r1-n0"),
    )
    long_jobs = (job(f"s{index}", 1, submit_s=1.0 + index, time_limit_s=5000.0) for index in range(4))
    plan = scenario.pending(job("gang", 16), *long_jobs).plan()

    (reservation,) = plan.of_type(Reserve)
    assert set(reservation.node_ids) == {"p0-r1-n0", "p0-r1-n1"}
    assert {node for start in plan.starts() for node, _ in start.allocation} == {"p0-r0-n0"}


@st.composite
def _pools(draw: st.DrawFn) -> tuple[AcceleratorPool, list[tuple[str, int]], int]:
    racks, per_rack = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    nodes = [
        Node(f"p{r % 2}-r{r}-n{n}", f"p{r % 2}", f"r{r}", "a100", 8, draw(st.sampled_from((8, 8, 8, 4, 0))))
        for r in range(racks)
        for n in range(per_rack)
    ]
    pool = AcceleratorPool("a100", nodes, {node.id: draw(st.integers(0, 8)) for node in nodes}, 8)
    changes = draw(st.lists(st.tuples(st.sampled_from(sorted(pool.free)), st.integers(-8, 8)), max_size=12))
    return pool, changes, draw(st.integers(1, 8))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pools())
def test_the_packing_fast_path_picks_the_node_the_plain_definition_picks(
    drawn: tuple[AcceleratorPool, list[tuple[str, int]], int],
) -> None:
    pool, changes, gpus = drawn
    assert best_node(pool, gpus) == plain_best_node(pool, gpus)
    for node_id, gpus_taken in changes:  # the racks' order is kept up to date as GPUs come and go
        if 0 <= pool.free[node_id] - gpus_taken <= pool.usable[node_id]:
            pool.take(node_id, gpus_taken)
        assert best_node(pool, gpus) == plain_best_node(pool, gpus)

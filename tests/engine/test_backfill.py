from __future__ import annotations

import pytest

from scheduling.engine import Policy, Reserve

from .builders import Scenario, fleet, job, reason_of, running, started


def _busy_node() -> Scenario:
    """One 8-GPU node, half of it busy until t=100."""
    return Scenario(fleet("1x1x1x8")).with_running(running(job("r", 4, time_limit_s=100.0), on="p0-r0-n0"))


def test_the_blocked_head_job_gets_a_reservation_where_it_starts_earliest() -> None:
    plan = _busy_node().pending(job("head", 8, time_limit_s=50.0)).plan()

    assert plan.of_type(Reserve) == (Reserve("head", ("p0-r0-n0",), 100.0),)
    status = plan.status_of("head")
    assert status is not None and status.reason == "capacity" and status.estimated_start_s == 100.0


def test_a_job_that_ends_before_the_reservation_backfills() -> None:
    plan = _busy_node().pending(job("head", 8), job("short", 4, submit_s=1, time_limit_s=60.0)).plan()

    assert set(started(plan)) == {"short"}


def test_a_job_that_would_delay_the_reservation_waits_for_the_head() -> None:
    plan = (
        _busy_node().pending(job("head", 8, time_limit_s=300.0), job("long", 4, submit_s=1, time_limit_s=500.0)).plan()
    )

    assert started(plan) == {}
    assert reason_of(plan, "long") == "reserved-for:head"


def test_a_job_on_nodes_outside_the_reservation_backfills_whatever_its_length() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("r", 8, time_limit_s=100.0), on="p0-r0-n0"),
        running(job("s", 4, time_limit_s=900.0), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("head", 8), job("long", 4, submit_s=1, time_limit_s=5000.0)).plan()

    assert plan.of_type(Reserve) == (Reserve("head", ("p0-r0-n0",), 100.0),)
    assert started(plan) == {"long": (("p0-r0-n1", 4),)}


def test_without_backfill_the_blocked_head_holds_back_everyone_behind_it() -> None:
    plan = (
        _busy_node().policy(Policy.fifo()).pending(job("head", 8), job("short", 4, submit_s=1, time_limit_s=1.0)).plan()
    )

    assert started(plan) == {}
    assert reason_of(plan, "short") == "priority"


def test_reservation_depth_two_reserves_for_two_heads() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("r1", 8, time_limit_s=100.0), on="p0-r0-n0"),
        running(job("r2", 8, time_limit_s=200.0), on="p0-r0-n1"),
    )
    plan = scenario.policy(reservation_depth=2).pending(job("h1", 8), job("h2", 8, submit_s=1)).plan()

    assert plan.of_type(Reserve) == (Reserve("h1", ("p0-r0-n0",), 100.0), Reserve("h2", ("p0-r0-n1",), 200.0))


def test_every_pending_job_gets_exactly_one_status_with_an_estimate_when_knowable() -> None:
    jobs = [job(f"j{i}", 4, submit_s=i, time_limit_s=50.0) for i in range(6)] + [job("huge", 64)]
    plan = _busy_node().pending(*jobs).plan()

    statuses = {status.job_id: status for status in plan.pending}
    assert len(statuses) == len(plan.pending)
    assert set(statuses) | set(started(plan)) == {j.id for j in jobs}
    assert not set(statuses) & set(started(plan))
    assert statuses["huge"].estimated_start_s is None
    estimates = [statuses[f"j{i}"].estimated_start_s for i in range(1, 6) if f"j{i}" in statuses]
    assert all(estimate is not None and estimate >= 0 for estimate in estimates)
    assert estimates == sorted(estimates)  # type: ignore[type-var]


def test_a_running_job_without_a_time_limit_is_expected_to_end_when_its_work_is_done() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(
        running(job("r", 8, duration_s=300.0), on="p0-r0-n0", progress_s=100.0)
    )
    plan = scenario.pending(job("next", 8)).plan(now=50.0)

    assert plan.of_type(Reserve) == (Reserve("next", ("p0-r0-n0",), 250.0),)


@pytest.mark.parametrize(("frees_after", "waits"), [(0.39, True), (0.41, False)])
def test_a_gang_waits_for_one_pod_only_while_that_finishes_it_sooner(frees_after: float, waits: bool) -> None:
    """A 16-GPU gang that may spread (its patience is over) fits across two pods now; one pod frees
    a node at `frees_after` × its estimate. Within that pod it runs at the rack's speed (1.0), across
    pods at the fleet's (1.4): waiting pays only while the node frees before 0.4 × the estimate."""
    estimate = 10_000.0
    nodes = fleet("2x1x2x8")
    busy = job("busy", 8, time_limit_s=frees_after * estimate)
    other = job("other", 8, time_limit_s=10 * estimate)
    gang = job("gang", 16, time_limit_s=estimate)
    scenario = Scenario(nodes).pending(gang).with_running(running(busy, on="p0-r0-n0"), running(other, on="p1-r0-n0"))
    plan = scenario.policy(gang_spread_after_s=0.0).plan(now=0.0)

    assert ("gang" not in started(plan)) is waits

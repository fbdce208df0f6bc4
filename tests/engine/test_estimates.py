"""Estimates a team lead can trust: a start within the fleet's horizon, or what the job waits for."""

from __future__ import annotations

from scheduling.engine import Node, PendingStatus, Policy, Reserve
from scheduling.engine.explain import ESTIMATE_HORIZON_S
from scheduling.engine.plan import BlockedStatus

from .builders import Scenario, fleet, job, quota, running

YEAR_S = 365 * 86400.0


def _status(scenario: Scenario, job_id: str, now: float = 0.0) -> PendingStatus:
    status = scenario.plan(now).status_of(job_id)
    assert status is not None
    return status


def _serving_forever(on: tuple[str, ...]) -> Scenario:
    """Serving replicas without a time limit and ten years of work left: they never end in view."""
    replicas = job("replicas", 8 * len(on), kind="serving", priority=100, preemptible=False, duration_s=10 * YEAR_S)
    return Scenario(fleet("1x1x2x8")).with_running(running(replicas, on=on))


def test_beyond_the_horizon_the_reason_names_the_blocker_and_no_absurd_estimate_is_given() -> None:
    scenario = _serving_forever(("p0-r0-n0", "p0-r0-n1")).pending(job("train", 16))

    status = _status(scenario, "train")

    assert status.reason == "capacity"
    assert status.estimated_start_s is None
    assert status.waits_for == "job:replicas"


def test_a_reservation_beyond_the_horizon_is_kept_but_not_shown_as_an_estimate() -> None:
    scenario = _serving_forever(("p0-r0-n0", "p0-r0-n1")).pending(job("train", 16))
    plan = scenario.plan()

    (reservation,) = plan.of_type(Reserve)
    assert reservation.start_s > ESTIMATE_HORIZON_S
    assert plan.status_of("train") == BlockedStatus("train", "capacity", None, "job:replicas")


def test_within_the_horizon_the_estimate_is_given_and_nothing_else_is_said() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 8, time_limit_s=7200.0), on="p0-r0-n0"))

    assert _status(scenario.pending(job("next", 8)), "next") == PendingStatus("next", "capacity", 7200.0)


def test_a_job_whose_free_gpus_lie_on_no_one_node_is_estimated_when_a_node_frees_for_it() -> None:
    """Eight GPUs are free by count (four on each node), but a job of one node needs them on one:
    it starts when the first node frees whole, not now."""
    scenario = (
        Scenario(fleet("1x1x2x8"))
        .with_running(
            running(job("short", 4, time_limit_s=3600.0), on="p0-r0-n0"),
            running(job("long", 4, time_limit_s=7200.0), on="p0-r0-n1"),
        )
        .pending(job("eight", 8, time_limit_s=600.0))
        .policy(reservation_depth=0)
    )

    assert _status(scenario, "eight") == PendingStatus("eight", "topology", 3600.0)


def test_a_job_larger_than_its_teams_quota_allows_waits_for_quota_not_for_a_date() -> None:
    scenario = Scenario(fleet("1x1x2x8")).quotas(quota("alpha", 8, borrow_limit=0)).pending(job("big", 16))

    status = _status(scenario, "big")

    assert (status.reason, status.estimated_start_s, status.waits_for) == ("quota", None, "quota-limit:alpha")


def test_a_job_larger_than_the_healthy_fleet_waits_for_hardware() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100", 8, 0))
    status = _status(Scenario(nodes).pending(job("gang", 16)), "gang")

    assert (status.estimated_start_s, status.waits_for) == (None, "hardware")


def test_a_gang_bound_to_a_rack_that_no_healthy_rack_can_hold_waits_for_the_domain() -> None:
    nodes = tuple(
        Node(f"p0-r{rack}-n{index}", "p0", f"r{rack}", "a100", 8, 0 if index == 1 else 8)
        for rack in range(2)
        for index in range(2)
    )
    status = _status(Scenario(nodes).pending(job("gang", 16, required_level="rack")), "gang")

    assert (status.estimated_start_s, status.waits_for) == (None, "domain:rack")


def test_jobs_that_cannot_start_within_the_horizon_add_no_wait_to_the_jobs_behind_them() -> None:
    busy = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 8, time_limit_s=100.0), on="p0-r0-n0"))
    small = [job(f"s{index}", 8, submit_s=1.0 + index, time_limit_s=50.0) for index in range(2)]
    alone = _status(busy.pending(*small), "s1")
    behind = _status(Scenario(busy.nodes, busy.running_jobs).pending(job("huge", 64), *small), "s1")

    assert behind.estimated_start_s == alone.estimated_start_s == 150.0


def test_a_job_ahead_delays_the_job_behind_it_only_while_it_holds_its_gpus() -> None:
    # Both nodes free at 100 s: "long" takes one for 10,000 s, "next" the other at once, not once
    # long's 80,000 GPU-seconds have been served (5,100 s).
    both = ("p0-r0-n0", "p0-r0-n1")
    busy = Scenario(fleet("1x1x2x8")).with_running(running(job("r", 16, time_limit_s=100.0), on=both))
    busy.policy(within_team_order="submit")
    scenario = busy.pending(job("long", 8, time_limit_s=10_000.0), job("next", 8, submit_s=1.0, time_limit_s=50.0))

    assert _status(scenario, "long").estimated_start_s == 100.0
    assert _status(scenario, "next").estimated_start_s == 100.0


def test_no_job_starts_before_the_jobs_ahead_of_it() -> None:
    # One node, free at 100 s: "first" holds it until 150 s, "second" starts then, "third" at 200 s.
    busy = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 8, time_limit_s=100.0), on="p0-r0-n0"))
    busy.policy(within_team_order="submit", reservation_depth=0)
    names = ("first", "second", "third")
    queue = [job(name, 8, submit_s=float(at), time_limit_s=50.0) for at, name in enumerate(names)]
    plan = busy.pending(*queue).plan(0.0)

    assert [plan.status_of(name).estimated_start_s for name in names] == [100.0, 150.0, 200.0]


def _borrowing_alpha(guaranteed: int) -> Scenario:
    """alpha uses 16 GPUs (8 until 1,000 s, 8 until 5,000 s), beta 16 until 200 s, of 32; alpha's
    "next" (8) waits."""
    runs = (
        running(job("a1", 8, time_limit_s=1000.0), on="p0-r0-n0"),
        running(job("a2", 8, time_limit_s=5000.0), on="p0-r0-n1"),
        running(job("b", 16, team="beta", time_limit_s=200.0), on=("p0-r0-n2", "p0-r0-n3")),
    )
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", guaranteed), quota("beta", 16)).with_running(*runs)
    # No reservation: a reserved job is told its reservation's start.
    return scenario.policy(reservation_depth=0).pending(job("next", 8, submit_s=1.0, time_limit_s=600.0))


def test_a_job_its_guarantee_can_hold_is_estimated_when_its_guarantee_has_room_for_it() -> None:
    # alpha is guaranteed 8 and uses 16: beyond it, next could borrow beta's GPUs at 200 s, but
    # beta (or a team with more fair share left) may take them first; its guarantee has room for
    # it once both of alpha's runs have ended, at 5,000 s.
    assert _status(_borrowing_alpha(8), "next").estimated_start_s == 5000.0
    # Guaranteed 16, alpha has room for it once a1 ends, at 1,000 s.
    assert _status(_borrowing_alpha(16), "next").estimated_start_s == 1000.0
    # Guaranteed 24, the fleet frees first: at 200 s.
    assert _status(_borrowing_alpha(24), "next").estimated_start_s == 200.0
    # Guaranteed 4, its guarantee can never hold it: nothing to wait for but the fleet.
    assert _status(_borrowing_alpha(4), "next").estimated_start_s == 200.0


def test_a_queue_longer_than_the_horizon_is_what_the_last_job_waits_for() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 8, time_limit_s=100.0), on="p0-r0-n0"))
    ahead = [job(f"a{index}", 8, submit_s=index, time_limit_s=20 * 86400.0) for index in range(3)]
    scenario.policy(within_team_order="submit")
    status = _status(scenario.pending(*ahead, job("last", 8, submit_s=10.0, time_limit_s=60.0)), "last")

    assert (status.estimated_start_s, status.waits_for) == (None, "queue")


def test_a_gang_whose_rack_frees_before_its_patience_runs_out_is_estimated_to_start_there() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        running(job("a", 8, time_limit_s=1800.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=2400.0), on="p0-r1-n0"),
    )
    plan = scenario.policy(gang_spread_after_s=3600.0).pending(job("gang", 16, submit_s=0.0)).plan(now=600.0)

    assert plan.of_type(Reserve) == (Reserve("gang", ("p0-r0-n0", "p0-r0-n1"), 1800.0),)
    assert plan.status_of("gang") == PendingStatus("gang", "topology", 1800.0)


def test_a_gang_that_can_spread_only_later_is_estimated_when_it_can() -> None:
    # No rack frees within its hour of patience (every rack keeps a day-long job); across racks
    # it fits once a 2-hour job ends.
    scenario = Scenario(fleet("1x2x3x8")).with_running(
        running(job("a", 8, time_limit_s=86400.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=86400.0), on="p0-r1-n0"),
        running(job("c", 8, time_limit_s=7200.0), on="p0-r0-n1"),
        running(job("d", 8, time_limit_s=7200.0), on="p0-r1-n1"),
        running(job("e", 8, time_limit_s=7200.0), on="p0-r1-n2"),
    )
    plan = scenario.policy(gang_spread_after_s=3600.0).pending(job("gang", 24, submit_s=0.0)).plan(now=600.0)

    (reservation,) = plan.of_type(Reserve)
    assert reservation.start_s == 7200.0
    assert plan.status_of("gang") == PendingStatus("gang", "capacity", 7200.0)


def test_a_training_gang_in_a_fleet_where_no_rack_ever_empties_starts_across_racks() -> None:
    """The live demo: a 64-GPU training gang waited for one rack of eight nodes, every rack held a
    serving replica that never ends, and its estimate read "in 3649d". No rack can free within
    the gang's patience, so it takes the pod now."""
    nodes = fleet("1x3x8x8")
    replicas = [
        running(
            job(f"serve{rack}", 1, kind="serving", priority=100, preemptible=False, duration_s=10 * YEAR_S), on=node
        )
        for rack, node in enumerate(("p0-r0-n0", "p0-r1-n0", "p0-r2-n0"))
    ]
    scenario = Scenario(nodes).with_running(*replicas).pending(job("gang", 64, submit_s=0.0))
    spread_after_s = Policy().gang_spread_after_s

    assert spread_after_s is not None
    (start,) = scenario.plan(600.0).starts()
    assert start.job_id == "gang" and start.level == "pod"

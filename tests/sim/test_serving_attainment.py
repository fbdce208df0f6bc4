"""The attainment rule itself (`engine.serving.slo_attainment`), one request at a time, and the
demand curves it is asked along."""

from __future__ import annotations

import pytest

from scheduling.engine.demand import DiurnalDemand
from scheduling.engine.serving import (
    ReplicaRecord,
    TraceDemand,
    mean_replicas,
    next_change_s,
    slo_attainment,
    withdrawal_order,
)

WINDOW = (0.0, 1000.0)


@pytest.mark.parametrize(
    ("record", "demanded", "met"),
    [
        # Serving at once: every demanded second is met.
        (ReplicaRecord(100.0, 600.0, ((100.0, 600.0),)), 500.0, 500.0),
        # Serving 40 s after the ask, within a 60 s objective: the start-up counts as met.
        (ReplicaRecord(100.0, 600.0, ((140.0, 600.0),)), 500.0, 500.0),
        # Serving 100 s after the ask: the whole wait is missed.
        (ReplicaRecord(100.0, 600.0, ((200.0, 600.0),)), 500.0, 400.0),
        # Never served, withdrawn after the objective had passed: all missed.
        (ReplicaRecord(100.0, 600.0), 500.0, 0.0),
        # Never served, withdrawn 30 s after the ask: the objective was never missed.
        (ReplicaRecord(100.0, 130.0), 30.0, 30.0),
        # Lost to a failure at 300 s, serving again at 400 s: the gap is missed.
        (ReplicaRecord(100.0, 600.0, ((100.0, 300.0), (400.0, 600.0))), 500.0, 400.0),
        # Still asked and serving at the window's end: counted to the end.
        (ReplicaRecord(900.0, None, ((900.0, None),)), 100.0, 100.0),
        # Asked before the window: only its part inside counts.
        (ReplicaRecord(-500.0, 200.0, ((-500.0, 200.0),)), 200.0, 200.0),
    ],
)
def test_one_request_meets_the_seconds_the_rule_says(record: ReplicaRecord, demanded: float, met: float) -> None:
    attained = slo_attainment([record], 60.0, WINDOW)
    assert attained.demanded_s == pytest.approx(demanded)
    assert attained.met_s == pytest.approx(met)


def test_start_latencies_are_those_of_requests_asked_in_the_window_and_served() -> None:
    records = [
        ReplicaRecord(100.0, None, ((130.0, None),)),
        ReplicaRecord(-50.0, None, ((0.0, None),)),  # asked before the window
        ReplicaRecord(200.0, 300.0),  # never served
    ]
    assert slo_attainment(records, 60.0, WINDOW).start_latencies_s == (30.0,)


def test_nothing_demanded_has_no_attainment() -> None:
    assert slo_attainment([], 60.0, WINDOW).fraction is None


def test_falling_demand_withdraws_pending_requests_first_then_the_newest_running() -> None:
    asked = [("a", True), ("b", False), ("c", True), ("d", False)]
    assert withdrawal_order(asked) == ["d", "b", "c", "a"]


def test_a_diurnal_curve_changes_on_the_minute_grid_and_a_trace_at_its_points() -> None:
    daily = DiurnalDemand(1, 5, peak_hour=12.0)
    change = next_change_s(daily, 0.0, 86400.0)
    assert change is not None and change % 60.0 == 0.0
    assert daily.replicas_at(change) != daily.replicas_at(0.0)
    assert daily.replicas_at(change - 60.0) == daily.replicas_at(0.0)
    traced = TraceDemand(((0.0, 1), (100.0, 1), (250.0, 3)))
    assert next_change_s(traced, 0.0, 1000.0) == 250.0
    assert next_change_s(traced, 250.0, 1000.0) is None
    assert mean_replicas(traced, 0.0, 500.0) == pytest.approx((250 * 1 + 250 * 3) / 500)

"""A stored policy value the scheduler cannot use never stops the fleet: each extreme is written
straight into the policy row (past the services, as a hand edit or an older release would leave it),
and the live cycle logs it at ERROR, uses the setting's default and keeps ticking."""

from __future__ import annotations

import logging
import math

import pytest
from django.db import DatabaseError, transaction

from scheduling.cycle.failures import node_kill
from scheduling.models import FleetClock, Job, Node
from tenants.models import FleetPolicy
from tenants.policy_units import POLICY_FIELDS
from tests.scheduling.conftest import Fleet

NUMBERS = {field.name: field for field in POLICY_FIELDS if field.minimum is not None}
# The largest 64-bit integer, the largest float, 1e16 s between heartbeats (the issue's value),
# a negative, both infinities, NaN and zero (below every bound that starts at one).
EXTREMES = [9223372036854775807, 1e308, 1e16, -1.0, math.inf, -math.inf, math.nan, 0]


def _store(name: str, value: float) -> bool:
    """Write ``value`` into the policy row as it is, past every check but the database's; False
    when the column refuses it (a non-negative or NOT NULL check, no integer for it) or keeps something usable in its
    place (SQLite stores NaN as NULL)."""
    try:
        with transaction.atomic():
            FleetPolicy.objects.update(**{name: value})
    except (DatabaseError, OverflowError, ValueError):  # ValueError: an integer column and NaN
        return False
    stored = FleetPolicy.objects.values_list(name, flat=True).get()
    if stored is None or NUMBERS[name].problem(stored) is None:
        FleetPolicy.objects.update(**{name: FleetPolicy._meta.get_field(name).get_default()})
        return False
    return True


def _errors_naming(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.ERROR and f"fleet policy: {name} = " in record.getMessage()
    ]


@pytest.mark.parametrize("value", EXTREMES, ids=repr)
def test_the_fleet_keeps_ticking_with_each_extreme_stored_in_every_policy_number(
    fleet: Fleet, caplog: pytest.LogCaptureFixture, value: float
) -> None:
    stored = [name for name, field in NUMBERS.items() if field.problem(value) is not None and _store(name, value)]
    if not stored:
        assert math.isnan(value)  # every other extreme fits some column
        pytest.skip("no policy column of this database holds NaN (SQLite stores it as NULL)")
    job = fleet.submit(gpus=8, duration_s=60.0)
    before = FleetClock.objects.get()

    with caplog.at_level(logging.ERROR):
        results = [fleet.tick(wall_step_s=1.0, speed=60.0) for _ in range(3)]

    clock = FleetClock.objects.get()
    assert None not in results
    assert (clock.ticks, clock.sim_now_s) == (before.ticks + 3, pytest.approx(before.sim_now_s + 180.0))
    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED  # started and ended: the scheduler ran on defaults
    assert not Node.objects.exclude(state=Node.State.UP).exists()  # no node declared dead for it
    for name in stored:
        logged = _errors_naming(caplog, name)
        assert logged, f"no ERROR names {name}"
        assert repr(FleetPolicy.objects.values_list(name, flat=True).get()) in logged[0]
        assert "uses its default" in logged[0]


def test_the_issues_heartbeat_of_1e16_seconds_no_longer_stops_the_fleet_clock(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    FleetPolicy.objects.update(heartbeat_interval_s=1e16)
    job = fleet.submit(gpus=8, duration_s=60.0)
    before = FleetClock.objects.get().sim_now_s

    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert fleet.tick(wall_step_s=1.0, speed=60.0) is not None

    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED
    assert FleetClock.objects.get().sim_now_s == pytest.approx(before + 180.0)
    message = _errors_naming(caplog, "heartbeat_interval_s")[0]
    assert "heartbeat_interval_s = 1e+16 is above 600" in message and "its default, 10.0" in message
    assert FleetPolicy.objects.get().heartbeat_interval_s == 1e16  # left for an admin to correct


def test_a_node_still_dies_after_the_default_missed_heartbeats_while_the_stored_count_is_unusable(
    fleet: Fleet,
) -> None:
    # The largest count the column holds on PostgreSQL too (SQLite would take 2**63 - 1).
    FleetPolicy.objects.update(dead_after_missed_heartbeats=2147483647)
    victim = fleet.nodes[0]
    node_kill(node=victim, sim_now_s=FleetClock.objects.get().sim_now_s)
    for _ in range(7):  # 3 missed 10 s heartbeats at 5 fleet seconds a tick
        fleet.tick(speed=5.0)

    victim.refresh_from_db()
    assert victim.state == Node.State.DOWN

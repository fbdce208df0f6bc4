"""One time model: fleet seconds map to calendar dates from the fleet epoch, in one place."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from scheduling.fleet_calendar import fleet_epoch, fleet_period, month_bounds
from scheduling.models import FleetClock
from scheduling.templatetags.fleet import fleet_date, fleet_datetime, fleet_time
from tenants.templatetags.wall_clock import wall_time
from tests.scheduling.conftest import T0, Fleet


def test_the_first_recorded_tick_fixes_the_epoch_so_fleet_time_starts_at_wall_time(fleet: Fleet) -> None:
    fleet.tick()  # the first tick that accounts time: fleet second 60 at wall T0 + 2 s

    epoch = FleetClock.objects.get().epoch
    assert epoch is not None
    # At clock speed 1 fleet time would be wall time: epoch = wall time - fleet seconds.
    assert (epoch - T0).total_seconds() == pytest.approx(2.0 - 60.0)
    fleet.tick()
    assert FleetClock.objects.get().epoch == epoch  # fixed once


def test_a_configured_epoch_wins(db: None, settings: object) -> None:
    settings.FLEET_EPOCH = "2026-03-01T00:00:00+00:00"  # type: ignore[attr-defined]

    assert fleet_epoch() == datetime(2026, 3, 1, tzinfo=UTC)
    assert fleet_datetime(86400 + 3600) == "2026-03-02 01:00 fleet time"
    assert fleet_date(86400 + 3600) == "2026-03-02"
    assert fleet_time(86400 + 3600) == "day 2, 01:00"  # unchanged meaning: days since fleet second 0


def test_a_period_of_whole_days_covers_the_ticks_ending_in_it(db: None, settings: object) -> None:
    settings.FLEET_EPOCH = "2026-01-01T00:00:00+00:00"  # type: ignore[attr-defined]

    period = fleet_period(first=date(2026, 1, 2), last=date(2026, 1, 3))

    assert (period.from_s, period.to_s, period.hours) == (86400.0, 3 * 86400.0, 48.0)
    assert month_bounds(2026, 2) == (date(2026, 2, 1), date(2026, 2, 28))
    assert month_bounds(2025, 12) == (date(2025, 12, 1), date(2025, 12, 31))


def test_wall_times_say_they_are_wall_times() -> None:
    assert wall_time(datetime(2026, 11, 30, 14, 5, tzinfo=UTC)) == "2026-11-30 14:05 wall time (UTC)"

"""The one time model: fleet seconds mapped to calendar dates from the fleet epoch.

The fleet clock counts seconds from 0 (``FleetClock.sim_now_s``). The fleet epoch is the
calendar instant of fleet second 0: ``settings.FLEET_EPOCH`` when set, else the wall time of
the clock's first recorded tick, which the usage ledger stores on ``FleetClock.epoch``. On a
real fleet (clock speed 1) fleet time is therefore wall time; in the demo (60x) the fleet
calendar runs ahead of the wall clock, and every page says which clock a time is in.

The ledger, the reports and the pages convert through this module only. A tick belongs to the
calendar day (in ``settings.TIME_ZONE``) on which it ends, so a period of whole days selects
whole ticks and the per-day, per-job and per-team ledgers cut at the same instants.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from scheduling.models import FleetClock

CACHE_TTL_S = 30.0  # how long a process keeps the epoch it read
# A fresh fleet without a recorded tick yet: its calendar starts now, a guess kept this long only,
# so that a page listing many times asks the database once, not twice per time.
_GUESS_TTL_S = 1.0
_cache: tuple[datetime, float] | None = None
_guess: tuple[datetime, float] | None = None


def _configured_epoch() -> datetime | None:
    raw = getattr(settings, "FLEET_EPOCH", "") or ""
    if not raw:
        return None
    parsed = parse_datetime(raw)
    if parsed is None:
        raise ValueError(f"FLEET_EPOCH is not an ISO date and time: {raw!r}")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, timezone.get_default_timezone())


def fleet_epoch_record(*, wall_now: datetime, sim_now_s: float) -> datetime:
    """The epoch, fixing it on the clock row the first time the ledger records a tick: the wall
    time at which fleet second 0 would have been had the fleet run at speed 1 (on a fresh
    fleet, the first tick's wall time). One query once it is fixed. A guess this process made before
    (`fleet_epoch`) is dropped: the calendar is the recorded one from now on."""
    global _guess
    _guess = None
    configured = _configured_epoch()
    if configured is not None:
        return configured
    stored = FleetClock.objects.filter(pk=1).values_list("epoch", flat=True).first()
    if stored is not None:
        return stored
    epoch = wall_now - timedelta(seconds=sim_now_s)
    FleetClock.objects.filter(pk=1, epoch__isnull=True).update(epoch=epoch)
    return FleetClock.objects.filter(pk=1).values_list("epoch", flat=True).first() or epoch


def fleet_epoch() -> datetime:
    """The fleet epoch for reading (pages, reports); cached for a few seconds per process."""
    global _cache, _guess
    configured = _configured_epoch()
    if configured is not None:
        return configured
    now = time.monotonic()
    if _cache is not None and now - _cache[1] < CACHE_TTL_S:
        return _cache[0]
    if _guess is not None and now - _guess[1] < _GUESS_TTL_S:
        return _guess[0]
    stored, clock = FleetClock.objects.filter(pk=1).values_list("epoch", "sim_now_s").first() or (None, 0.0)
    if stored is None:
        # No tick recorded yet: the calendar would start now; the guess is not remembered for long.
        _guess = (timezone.now() - timedelta(seconds=clock), now)
        return _guess[0]
    _cache = (stored, now)
    return stored


def fleet_epoch_forget() -> None:
    """Drop the cached epoch (tests that build a new fleet)."""
    global _cache, _guess
    _cache = _guess = None


def fleet_datetime(sim_s: float, *, epoch: datetime | None = None) -> datetime:
    """A fleet-clock instant as an aware date and time in the site's time zone."""
    return timezone.localtime((epoch or fleet_epoch()) + timedelta(seconds=sim_s))


def fleet_clock_text(sim_s: float) -> str:
    """A fleet-clock instant on the fleet calendar as pages and the live feed show it: ``2026-01-03 14:05``."""
    return f"{fleet_datetime(sim_s):%Y-%m-%d %H:%M}"


def fleet_seconds(moment: datetime, *, epoch: datetime | None = None) -> float:
    return (moment - (epoch or fleet_epoch())).total_seconds()


def fleet_day(sim_s: float, *, epoch: datetime) -> date:
    """The calendar day a tick ending at ``sim_s`` belongs to."""
    return fleet_datetime(sim_s, epoch=epoch).date()


def fleet_today() -> date:
    clock = FleetClock.objects.filter(pk=1).values_list("sim_now_s", flat=True).first() or 0.0
    return fleet_datetime(clock).date()


def day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, datetime.min.time()), timezone.get_default_timezone())


@dataclass(frozen=True, slots=True)
class FleetPeriod:
    """Whole calendar days ``first``..``last`` (inclusive) and the fleet seconds they cover:
    ticks ending in ``[from_s, to_s)``."""

    first: date
    last: date
    from_s: float
    to_s: float

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    @property
    def hours(self) -> float:
        return (self.to_s - self.from_s) / 3600


def fleet_period(*, first: date, last: date, epoch: datetime | None = None) -> FleetPeriod:
    epoch = epoch or fleet_epoch()
    return FleetPeriod(
        first=first,
        last=last,
        from_s=fleet_seconds(day_start(first), epoch=epoch),
        to_s=fleet_seconds(day_start(last + timedelta(days=1)), epoch=epoch),
    )


def month_bounds(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return first, following - timedelta(days=1)

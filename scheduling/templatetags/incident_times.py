"""The incidents page's times: the failure on the fleet calendar to the second, and each later
step as its time of day with how long after the failure it came."""

from __future__ import annotations

from django import template

from scheduling import fleet_calendar as calendar
from scheduling.templatetags.fleet import duration

register = template.Library()


@register.filter
def fleet_moment(seconds: float | None) -> str:
    """``2026-01-03 14:05:09``: a fleet-clock instant on the fleet calendar, to the second."""
    return "—" if seconds is None else f"{calendar.fleet_datetime(seconds):%Y-%m-%d %H:%M:%S}"


@register.filter
def fleet_step(seconds: float | None, since_s: float) -> str:
    """``14:05:39 (+30 s)``: a step of an incident, at its time of day, after the failure at ``since_s``."""
    if seconds is None:
        return "—"
    return f"{calendar.fleet_datetime(seconds):%H:%M:%S} (+{_after(max(0.0, seconds - since_s))})"


def _after(seconds: float) -> str:
    """``45 s``, ``1m 30s``, then hours and days as the other pages say durations."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes}m {rest:02d}s" if rest else f"{minutes}m"
    return duration(seconds)

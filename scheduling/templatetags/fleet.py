"""Template filters for fleet time: seconds on the fleet clock rendered for people."""

from __future__ import annotations

from django import template
from django.conf import settings

from scheduling import fleet_calendar as calendar
from scheduling.engine import vocabulary
from scheduling.engine.explain import ESTIMATE_HORIZON_S
from scheduling.live import explanations
from scheduling.live.explanations import waits_for_text
from scheduling.live.waits import NEW_JOB_REASON, JobWait
from tenants.templatetags.wall_clock import wall_time

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """``5400`` -> ``1h 30m``; days for long spans."""
    if seconds is None:
        return "—"
    total = max(0, round(seconds / 60))
    days, rest = divmod(total, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m"


@register.filter
def fleet_time(seconds: float | None) -> str:
    """A fleet-clock instant as ``day 3, 14:05``."""
    if seconds is None:
        return "—"
    total = int(seconds // 60)
    days, rest = divmod(total, 24 * 60)
    return f"day {days + 1}, {rest // 60:02d}:{rest % 60:02d}"


@register.filter
def fleet_datetime(seconds: float | None) -> str:
    """A fleet-clock instant on the fleet calendar, labelled: ``2026-01-03 14:05 fleet time``
    (``scheduling.fleet_calendar``; on a real fleet at clock speed 1 it is wall time)."""
    if seconds is None:
        return "—"
    return f"{calendar.fleet_clock_text(seconds)} fleet time"


@register.filter
def fleet_clock(seconds: float | None) -> str:
    """A fleet-clock instant on the fleet calendar, unlabelled (``2026-01-03 14:05``), for a place
    that says which clock it shows; the live feed sends the same text (``fleet_time``)."""
    return "—" if seconds is None else calendar.fleet_clock_text(seconds)


@register.filter
def fleet_date(seconds: float | None) -> str:
    """The fleet calendar day of a fleet-clock instant: ``2026-01-03``."""
    if seconds is None:
        return "—"
    return f"{calendar.fleet_datetime(seconds):%Y-%m-%d}"


# Wall-clock instants are tenants' (`tenants.templatetags.wall_clock`); scheduling's pages load them here too.
register.filter("wall_time", wall_time)


@register.simple_tag
def fleet_clock_note() -> str:
    """One line for a page that shows times: which clock is which."""
    return (
        f"Fleet times are on the fleet calendar (fleet second 0 = {calendar.fleet_epoch():%Y-%m-%d %H:%M %Z}, "
        f"clock speed {settings.FLEET_CLOCK_SPEED:g}x); wall times are real time."
    )


@register.filter
def starts_in(wait: JobWait | float | None, now_s: float) -> str:
    """When a pending job should start (``in 2h 05m``); without an estimate to believe, what it
    waits for (or why it is pending) instead of a date."""
    estimated_s = wait.estimated_start_s if isinstance(wait, JobWait) else wait
    if not isinstance(estimated_s, int | float):
        if isinstance(wait, JobWait):
            return waits_for_text(wait) if wait.waits_for else explanations.wait_text(wait)
        return "unknown"
    wait = estimated_s - now_s
    return "now" if wait <= 60 else f"in {duration(wait)}"


@register.filter
def waits_text(waits_for: str | None) -> str:
    """What a job without a believable estimate waits for, in words (`engine.plan.WAITS_*`)."""
    return vocabulary.waits_text(waits_for, horizon_s=ESTIMATE_HORIZON_S)


@register.filter
def reason_text(reason: str) -> str:
    return vocabulary.reason_text(reason)


@register.filter
def wait_reason(wait: JobWait | None) -> str:
    """Why a pending job waits: the one thing that holds it, named, the job ahead linked."""
    return vocabulary.reason_text(NEW_JOB_REASON) if wait is None else explanations.wait_html(wait)

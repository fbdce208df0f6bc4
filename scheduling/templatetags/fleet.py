"""Template filters for fleet time: seconds on the fleet clock rendered for people."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.conf import settings
from django.utils import timezone

from scheduling import fleet_calendar as calendar
from scheduling.engine.explain import ESTIMATE_HORIZON_S
from scheduling.services.pending import PendingInfo

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
    return f"{calendar.fleet_datetime(seconds):%Y-%m-%d %H:%M} fleet time"


@register.filter
def fleet_date(seconds: float | None) -> str:
    """The fleet calendar day of a fleet-clock instant: ``2026-01-03``."""
    if seconds is None:
        return "—"
    return f"{calendar.fleet_datetime(seconds):%Y-%m-%d}"


@register.filter
def wall_time(moment: datetime | None) -> str:
    """A wall-clock instant (audit log, notices), labelled: ``2026-11-30 14:05 wall time (UTC)``."""
    if moment is None:
        return "—"
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M} wall time ({local.tzname()})"


@register.simple_tag
def fleet_clock_note() -> str:
    """One line for a page that shows times: which clock is which."""
    return (
        f"Fleet times are on the fleet calendar (fleet second 0 = {calendar.fleet_epoch():%Y-%m-%d %H:%M %Z}, "
        f"clock speed {settings.FLEET_CLOCK_SPEED:g}x); wall times are real time."
    )


@register.filter
def starts_in(pending: PendingInfo | float | None, now_s: float) -> str:
    """When a pending job should start (``in 2h 05m``); without an estimate to believe, what it
    waits for (or why it is pending) instead of a date."""
    estimated_s = pending.estimated_start_s if isinstance(pending, PendingInfo) else pending
    if not isinstance(estimated_s, int | float):
        if isinstance(pending, PendingInfo):
            return waits_text(pending.waits_for) if pending.waits_for else reason_text(pending.reason)
        return "unknown"
    wait = estimated_s - now_s
    return "now" if wait <= 60 else f"in {duration(wait)}"


REASONS = {
    "quota": "over the team's quota (guarantee plus borrow limit)",
    "capacity": "waiting for free GPUs",
    "topology": "GPUs are free but not in one domain of the required shape",
    "guarantee": "work nobody may preempt runs only within the team's guarantee, or on GPUs nobody is guaranteed",
    "priority": "higher-priority work comes first",
    "new": "waiting for the next scheduling cycle",
}


_HORIZON = f"{ESTIMATE_HORIZON_S / 86400:.0f} days"
WAITS = {
    "quota-limit": "never, at this size: more GPUs than team {} may use (guarantee plus borrow limit)",
    "quota": "when team {}'s running jobs make room, beyond the next " + _HORIZON,
    "hardware": "when more healthy GPUs are in the fleet: it needs more than there are",
    "domain": "when a {} of the fleet has enough healthy nodes for it",
    "job": "when job #{} ends, beyond the next " + _HORIZON,
    "queue": f"after more than {_HORIZON} of work queued ahead of it",
}


@register.filter
def waits_text(waits_for: str | None) -> str:
    """What a job without a believable estimate waits for, in words (`engine.plan.WAITS_*`)."""
    if not waits_for:
        return "unknown"
    kind, _, subject = waits_for.partition(":")
    text = WAITS.get(kind)
    return waits_for if text is None else text.format(subject)


@register.filter
def reason_text(reason: str) -> str:
    if reason.startswith("reserved-for:"):
        return f"nodes are reserved for job #{reason.split(':', 1)[1]}, which starts first"
    return REASONS.get(reason, reason or "—")

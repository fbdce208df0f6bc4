"""Template filters for fleet time: seconds on the fleet clock rendered for people."""

from __future__ import annotations

from django import template

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
def starts_in(estimated_s: float | None, now_s: float) -> str:
    if not isinstance(estimated_s, int | float):
        return "unknown"
    wait = estimated_s - now_s
    return "now" if wait <= 60 else f"in {duration(wait)}"


REASONS = {
    "quota": "over the team's quota (guarantee plus borrow limit)",
    "capacity": "waiting for free GPUs",
    "topology": "GPUs are free but not in one domain of the required shape",
    "priority": "higher-priority work comes first",
    "new": "waiting for the next scheduling cycle",
}


@register.filter
def reason_text(reason: str) -> str:
    if reason.startswith("reserved-for:"):
        return f"nodes are reserved for job #{reason.split(':', 1)[1]}, which starts first"
    return REASONS.get(reason, reason or "—")

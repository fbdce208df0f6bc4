"""How far a pending job's estimated start can be trusted, in words (`scheduling.estimates`)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

from scheduling.engine.estimate_range import FLOOR_S
from scheduling.estimates import EstimateView
from scheduling.templatetags.fleet import duration

register = template.Library()


@register.filter
def likely_text(view: EstimateView | None, now_s: float) -> str:
    """``likely between 2h 00m and 9h 10m from now``; ``likely within 9h 10m`` when the range
    starts now or within a tenth of its high end (a low end of minutes, which the fleet clock
    passes within seconds, says nothing next to hours); "" without a range. Each end counts down
    on the fleet clock in the browser (``data-fleet-until``, `static/scheduling/fleet_clock.js`)."""
    if view is None:
        return ""
    low_s, high_s = view.likely.low_s, view.likely.high_s
    if low_s - now_s <= max(FLOOR_S, (high_s - now_s) / 10.0):
        return format_html("likely within {}", _until(high_s, now_s))
    return format_html("likely between {} and {} from now", _until(low_s, now_s), _until(high_s, now_s))


def _until(at_s: float, now_s: float) -> str:
    return format_html('<span data-fleet-until="{}">{}</span>', f"{at_s:.0f}", duration(max(at_s - now_s, FLOOR_S)))


@register.filter
def likely_basis(view: EstimateView | None) -> str:
    """What the range rests on, for a tooltip."""
    if view is None:
        return ""
    share = f"{view.coverage:.0%}"
    if view.calibrated_on:
        return f"calibrated to hold {share} of starts on this fleet's latest {view.calibrated_on} first estimates"
    return f"calibrated to hold {share} of starts on replays of real traces, until this fleet has its own history"


@register.filter
def first_estimate_text(view: EstimateView | None, now_s: float) -> str:
    """``first estimate 3h 32m ago: in 1h 00m; moved +2h 32m since`` ("" when the job's first
    estimate was not kept, or gave no date); the time since counts on in the browser."""
    if view is None or view.first_estimate_at_s is None or view.first_estimate_s is None:
        return ""
    told_s = view.first_estimate_s - view.first_estimate_at_s
    told = "now" if told_s <= FLOOR_S else f"in {duration(told_s)}"
    since = format_html(
        '<span data-fleet-since="{}">{}</span>',
        f"{view.first_estimate_at_s:.0f}",
        duration(now_s - view.first_estimate_at_s),
    )
    moved_s = view.moved_s or 0.0
    if abs(moved_s) < FLOOR_S:
        return format_html("first estimate {} ago: {}; not moved since", since, told)
    sign = "+" if moved_s > 0 else "\u2212"
    return format_html("first estimate {} ago: {}; moved {}{} since", since, told, sign, duration(abs(moved_s)))

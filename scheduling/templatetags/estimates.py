"""How far a pending job's estimated start can be trusted, in words (`scheduling.estimates`)."""

from __future__ import annotations

from django import template

from scheduling.engine.estimate_range import FLOOR_S
from scheduling.estimates import EstimateView
from scheduling.templatetags.fleet import duration

register = template.Library()


@register.filter
def likely_text(view: EstimateView | None, now_s: float) -> str:
    """``likely between 2h 00m and 9h 10m from now``; ``likely within 9h 10m`` when the range
    starts now; "" without a range."""
    if view is None:
        return ""
    low_s, high_s = view.likely.low_s - now_s, view.likely.high_s - now_s
    if low_s <= FLOOR_S:
        return f"likely within {duration(max(high_s, FLOOR_S))}"
    return f"likely between {duration(low_s)} and {duration(high_s)} from now"


@register.filter
def likely_basis(view: EstimateView | None) -> str:
    """What the range rests on, for a tooltip."""
    if view is None:
        return ""
    share = f"{view.coverage:.0%}"
    if view.calibrated_on:
        return f"{share} of the latest {view.calibrated_on} starts after a first estimate fell within such a range"
    return f"calibrated to hold {share} of starts on replays of real traces, until this fleet has its own history"


@register.filter
def first_estimate_text(view: EstimateView | None, now_s: float) -> str:
    """``first estimate 3h 32m ago: in 1h 00m; moved +2h 32m since`` ("" when the job's first
    estimate was not kept, or gave no date)."""
    if view is None or view.first_estimate_at_s is None or view.first_estimate_s is None:
        return ""
    told_s = view.first_estimate_s - view.first_estimate_at_s
    told = "now" if told_s <= FLOOR_S else f"in {duration(told_s)}"
    text = f"first estimate {duration(now_s - view.first_estimate_at_s)} ago: {told}"
    moved_s = view.moved_s or 0.0
    if abs(moved_s) < FLOOR_S:
        return f"{text}; not moved since"
    return f"{text}; moved {'+' if moved_s > 0 else '−'}{duration(abs(moved_s))} since"

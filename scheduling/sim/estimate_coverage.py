"""How often a start fell within the range shown with its first estimate (`engine.estimate_range`).

Each sampled job's first estimate (the cycle at its submission, as `estimate_error_*`) is given the
range the live pages would have shown beside it: calibrated on the latest `HISTORY_OUTCOMES`
estimates of each size (`size_class`) shown before it, those whose jobs had started by then and
those still waiting (censored at then), recalibrated once per `RECALIBRATE_EVERY_S` of fleet time,
as the live fleet calibrates on its job rows. Nothing after the moment an estimate was shown goes
into its range, so the share is measured out of sample.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.engine.estimate_range import (
    DEFAULT_CALIBRATION,
    FLOOR_S,
    HISTORY_OUTCOMES,
    RECALIBRATE_EVERY_S,
    SIZES,
    Calibration,
    EstimateOutcome,
    StartRange,
    calibrate,
    size_class,
    start_range,
)

from .formulas import percentile


@dataclass(frozen=True, slots=True)
class ShownEstimate:
    """A first estimate: when it was shown, the start it gave, and when the job really started
    (None: never)."""

    gpus: int
    shown_s: float
    estimated_start_s: float
    started_s: float | None


@dataclass(frozen=True, slots=True)
class RangeCoverage:
    within: float | None  # share of the started jobs whose start fell within their first range
    started: int  # started jobs with a first estimate (the share's denominator)
    width_p50: float | None  # median width of the ranges, over the estimated wait (floored at a cycle)
    high_p50: float | None  # median high end of the ranges, over the estimated wait
    by_size: dict[str, tuple[int, int]]  # per `size_class`: (started within their range, started)


def range_coverage(estimates: Iterable[ShownEstimate], *, fallback: Calibration = DEFAULT_CALIBRATION) -> RangeCoverage:
    """The share of started jobs whose start fell within the range of their first estimate, each
    range calibrated on the history known when it was shown (module docstring)."""
    shown = sorted(estimates, key=lambda item: item.shown_s)
    ranges: list[StartRange] = []
    calibration, calibrated_s = fallback, -math.inf
    widths: list[float] = []
    highs: list[float] = []
    by_size: dict[str, tuple[int, int]] = {}
    for position, item in enumerate(shown):
        if item.shown_s - calibrated_s >= RECALIBRATE_EVERY_S:
            history = _history(shown, ranges, position, item.shown_s)
            calibration, calibrated_s = calibrate(history, fallback=fallback, source="replay"), item.shown_s
        found = start_range(calibration, gpus=item.gpus, now_s=item.shown_s, estimated_start_s=item.estimated_start_s)
        ranges.append(found)
        if item.started_s is None:
            continue
        size = size_class(item.gpus)
        within, started = by_size.get(size, (0, 0))
        by_size[size] = (within + found.holds(item.started_s), started + 1)
        wait_s = max(item.estimated_start_s - item.shown_s, FLOOR_S)
        widths.append((found.high_s - found.low_s) / wait_s)
        highs.append((found.high_s - item.shown_s) / wait_s)
    started = len(widths)
    within = sum(held for held, _ in by_size.values())
    return RangeCoverage(
        within / started if started else None, started, percentile(widths, 50), percentile(highs, 50), by_size
    )


def _history(shown: list[ShownEstimate], ranges: list[StartRange], before: int, now_s: float) -> list[EstimateOutcome]:
    """The latest `HISTORY_OUTCOMES` estimates of each size shown before position `before`, as
    known at `now_s`: started (and within its range or not), or still waiting."""
    left = dict.fromkeys(SIZES, HISTORY_OUTCOMES)
    outcomes: list[EstimateOutcome] = []
    for position in range(before - 1, -1, -1):
        item = shown[position]
        size = size_class(item.gpus)
        if not left[size]:
            if not any(left.values()):
                break
            continue
        left[size] -= 1
        estimated_s = item.estimated_start_s - item.shown_s
        if item.started_s is not None and item.started_s <= now_s:
            held = ranges[position].holds(item.started_s)
            outcomes.append(EstimateOutcome(item.gpus, estimated_s, item.started_s - item.shown_s, True, held))
        else:
            outcomes.append(EstimateOutcome(item.gpus, estimated_s, now_s - item.shown_s, False))
    return outcomes

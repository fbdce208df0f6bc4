"""How far a start estimate can be trusted: a range calibrated on how past estimates turned out.

A start estimate (`PendingStatus.estimated_start_s`) is a point: the list schedules of `explain`
cannot know which jobs will end early, arrive later and go ahead of it by fair share, or be
preempted. How far off it turns out depends on how far ahead it looks (the lead: estimated start -
the moment it was shown) and on the job's size. Replays of the ITP and Philly traces (`benchmarks/estimates.py`)
show two kinds of error (measured when the estimate was a fluid sweep that counted the GPU-seconds
of every job ahead as served first): a job of one node told "in four days" mostly starts within
hours (smaller jobs slip past the gangs ahead of them), and a gang wider than a node starts later
than it was told, often by days (jobs that arrive later keep slipping past it). A job told "now"
starts within a tick or two.

So ranges are calibrated per size (`size_class`: one node or a gang) and band of lead times, from
the latest estimates shown: in each band, the ratio of the actual wait to the estimated wait (each
floored at one cycle, `FLOOR_S`, as `sim.formulas.estimate_error` does) at the lower and upper
quantiles that leave the aimed share of the outcomes between them. An estimate's range is its
estimated wait times the two ratios of its band. Two things keep the share of starts within their
range near `COVERAGE` out of sample, when a queue grows or shrinks:

- Jobs that still wait count for what is known of them, that they waited at least so long: the
  quantiles are Kaplan-Meier estimates over waits censored at now. Calibrating on the jobs that
  started alone would see only the quick starts while a queue grows.
- The ranges already shown are checked: when fewer than `COVERAGE` of the latest starts fell within
  theirs, the quantiles are set that much wider (`FEEDBACK_GAIN` times the shortfall), and
  narrower when more did (adaptive conformal inference, stated without state: the adjustment is
  recomputed from the outcomes each time).

A band with fewer than `MIN_BAND_SAMPLES` outcomes, or whose upper quantile is beyond what its
waits have shown so far, takes the ratios of all the outcomes of its size together; a size with
too few, the band of the calibration given as fallback (`DEFAULT_CALIBRATION`, measured on those
replays).

Pure: no clock, no database. The outcomes are handed in by whoever keeps them (the simulator's
`sim.estimate_coverage`, the live job rows through `scheduling.estimates`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# An estimate's wait and an actual wait are floored at one cycle of fleet time: a job told "now"
# that started a minute later was not 60x late.
FLOOR_S = 60.0
# The share of starts a range should hold.
COVERAGE = 0.8
# How much wider the quantiles are set per unit of shortfall of the ranges already shown, and the
# bounds of the share they are set to hold.
FEEDBACK_GAIN = 2.0
AIMED_SHARE_BOUNDS = (0.5, 0.98)
# The upper ends of the bands of lead times (the last band is open): ten minutes, an hour, four
# hours, twelve hours, a day, three days.
LEAD_EDGES_S: tuple[float, ...] = (600.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0)
# Jobs of more GPUs than this are gangs across nodes (8 GPUs a node in most fleets): their estimates
# err the other way from those of smaller jobs.
NODE_GPUS = 8
SIZES = ("node", "gang")
# A band needs this many outcomes before its own ratios are believed.
MIN_BAND_SAMPLES = 20
# Calibrate on this many of the latest estimates shown of each size, so the ranges follow the
# fleet's load as it changes.
HISTORY_OUTCOMES = 400
# A calibration stands for this much fleet time (an hour) before it is made again.
RECALIBRATE_EVERY_S = 3600.0


@dataclass(frozen=True, slots=True)
class EstimateOutcome:
    """One estimate shown and what came of it, counted from the moment it was shown: the job
    started after `waited_s` (`started`), or has waited `waited_s` so far (it still waits, or was
    cancelled then). `held`: whether it started within the range shown with the estimate (None:
    not started, or no range was shown)."""

    gpus: int
    estimated_wait_s: float
    waited_s: float
    started: bool = True
    held: bool | None = None

    @property
    def ratio(self) -> float:
        """Actual (or so far) wait over estimated wait, each floored at a cycle."""
        return max(self.waited_s, FLOOR_S) / max(self.estimated_wait_s, FLOOR_S)


@dataclass(frozen=True, slots=True)
class Band:
    """Estimates of jobs of `size` with a lead up to `up_to_s` (and above the previous band's):
    actual / estimated wait between `low` and `high`, from `samples` outcomes (0: the ratios come
    from a wider pool or the fallback)."""

    size: str
    up_to_s: float
    low: float
    high: float
    samples: int


@dataclass(frozen=True, slots=True)
class Calibration:
    bands: tuple[Band, ...]  # per size of `SIZES`, by `up_to_s`, the last one open (math.inf)
    coverage: float  # the share of starts its ranges aim to hold
    samples: int  # outcomes behind it (0: a fallback that was not measured on this fleet)
    source: str  # where its outcomes came from, for the pages and the benchmark

    def band_for(self, gpus: int, estimated_wait_s: float) -> Band:
        size, index = size_class(gpus), _band_index(estimated_wait_s)
        return [band for band in self.bands if band.size == size][index]


@dataclass(frozen=True, slots=True)
class StartRange:
    """When a job should start at the earliest and at the latest, fleet seconds."""

    low_s: float
    high_s: float

    def holds(self, start_s: float) -> bool:
        return self.low_s <= start_s <= self.high_s


def size_class(gpus: int) -> str:
    return "gang" if gpus > NODE_GPUS else "node"


def _band_index(estimated_wait_s: float) -> int:
    return next((i for i, edge in enumerate(LEAD_EDGES_S) if estimated_wait_s <= edge), len(LEAD_EDGES_S))


def survival_quantile(points: list[tuple[float, bool]], share: float) -> float | None:
    """The `share` quantile of values some of which are only known to be at least so large
    (`(value, False)`: censored), by the Kaplan-Meier estimate: the least observed value at which
    the estimated share of values at or below it reaches `share`. None when the censored values
    leave it unknown (too many of them, above every observed one)."""
    points = sorted(points, key=lambda point: (point[0], not point[1]))
    surviving, count = 1.0, len(points)
    for position, (value, observed) in enumerate(points):
        if observed:
            surviving *= 1.0 - 1.0 / (count - position)
            if 1.0 - surviving >= share - 1e-12:
                return value
    return None


def aimed_share(outcomes: Iterable[EstimateOutcome], coverage: float) -> float:
    """The share the quantiles are set to hold: `coverage`, widened by `FEEDBACK_GAIN` times the
    shortfall of the ranges already shown (narrowed when they held more), within
    `AIMED_SHARE_BOUNDS`. Needs `MIN_BAND_SAMPLES` starts with a range, else `coverage`."""
    checked = [outcome.held for outcome in outcomes if outcome.held is not None]
    if len(checked) < MIN_BAND_SAMPLES:
        return coverage
    held = sum(checked) / len(checked)
    low, high = AIMED_SHARE_BOUNDS
    return min(high, max(low, coverage + FEEDBACK_GAIN * (coverage - held)))


def _ratios(points: list[tuple[float, bool]], share: float) -> tuple[float, float] | None:
    if len(points) < MIN_BAND_SAMPLES:
        return None
    tail = (1.0 - share) / 2.0
    low, high = survival_quantile(points, tail), survival_quantile(points, 1.0 - tail)
    return None if low is None or high is None else (low, high)


def calibrate(
    outcomes: Iterable[EstimateOutcome],
    *,
    fallback: Calibration,
    coverage: float = COVERAGE,
    source: str = "history",
) -> Calibration:
    """The bands of each size and of `LEAD_EDGES_S` from `outcomes` (module docstring); `fallback`
    itself when no size has `MIN_BAND_SAMPLES` outcomes."""
    if not 0.0 < coverage < 1.0:
        raise ValueError(f"coverage {coverage!r}: a share between 0 and 1, both excluded")
    outcomes = list(outcomes)
    cells: dict[tuple[str, int], list[tuple[float, bool]]] = {}
    by_size: dict[str, list[tuple[float, bool]]] = {}
    for outcome in outcomes:
        size, point = size_class(outcome.gpus), (outcome.ratio, outcome.started)
        cells.setdefault((size, _band_index(outcome.estimated_wait_s)), []).append(point)
        by_size.setdefault(size, []).append(point)
    if all(len(points) < MIN_BAND_SAMPLES for points in by_size.values()):
        return fallback
    share = aimed_share(outcomes, coverage)
    bands = []
    for size in SIZES:
        pooled = _ratios(by_size.get(size, []), share)
        for index, edge in enumerate((*LEAD_EDGES_S, math.inf)):
            points = cells.get((size, index), [])
            own = _ratios(points, share)
            if own is not None:
                bands.append(Band(size, edge, *own, len(points)))
            elif pooled is not None:
                bands.append(Band(size, edge, *pooled, 0))
            else:
                band = fallback.band_for(NODE_GPUS + 1 if size == "gang" else 1, edge)
                bands.append(Band(size, edge, band.low, band.high, 0))
    return Calibration(tuple(bands), coverage, len(outcomes), source)


def start_range(calibration: Calibration, *, gpus: int, now_s: float, estimated_start_s: float) -> StartRange:
    """The range an estimate shown at `now_s` is likely to hold (`calibration.coverage` of the
    time): its estimated wait, floored at one cycle, times its band's two ratios; a low end within
    a cycle of now is now, and the high end is at least a cycle away."""
    wait_s = max(estimated_start_s - now_s, 0.0)
    band = calibration.band_for(gpus, wait_s)
    floored = max(wait_s, FLOOR_S)
    low_s = floored * band.low
    high_s = max(floored * band.high, FLOOR_S)
    return StartRange(now_s + (0.0 if low_s <= FLOOR_S else low_s), now_s + high_s)


# Ratios (low, high) per size and band of `LEAD_EDGES_S` and the open last one, measured on replays
# (`benchmarks/estimates.py --defaults`, fleetline on ITP days 20-60 and all of Philly, load 1.07,
# the estimates of the queue served in order, 2026-12-08): what a fleet shows until it has its own
# history.
DEFAULT_RATIOS: dict[str, tuple[tuple[float, float], ...]] = {
    "node": ((1.0, 1.84), (0.046, 1.79), (0.017, 0.93), (0.01, 0.56), (0.002, 0.54), (0.006, 0.34), (0.001, 0.14)),
    # 23 gangs in both replays: too few for bands of their own, so one pair for every lead.
    "gang": ((0.031, 5.56),) * 7,
}
DEFAULT_CALIBRATION = Calibration(
    tuple(
        Band(size, edge, low, high, 0)
        for size in SIZES
        for edge, (low, high) in zip((*LEAD_EDGES_S, math.inf), DEFAULT_RATIOS[size], strict=True)
    ),
    COVERAGE,
    0,
    "replays of the ITP and Philly traces",
)

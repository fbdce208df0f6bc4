"""How often starts fell within the range shown with their first estimate, measured out of sample."""

from __future__ import annotations

import random

import pytest

from scheduling.engine import Policy
from scheduling.engine.estimate_range import DEFAULT_CALIBRATION, RECALIBRATE_EVERY_S, start_range
from scheduling.sim.estimate_coverage import ShownEstimate, range_coverage
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.simulator import run_simulation

from .builders import job

HOUR = 3600.0


def _shown(count: int, *, ratio: float, gpus: int = 1, every_s: float = HOUR) -> list[ShownEstimate]:
    """`count` estimates of a 10-hour wait, one per `every_s`, each started after `ratio` of it."""
    return [
        ShownEstimate(gpus, index * every_s, index * every_s + 10 * HOUR, index * every_s + 10 * HOUR * ratio)
        for index in range(count)
    ]


def test_before_any_start_the_default_calibration_gives_the_range() -> None:
    (only,) = _shown(1, ratio=0.3)
    coverage = range_coverage([only])
    expected = start_range(DEFAULT_CALIBRATION, gpus=1, now_s=0.0, estimated_start_s=10 * HOUR)
    assert coverage.started == 1
    assert coverage.within == float(expected.holds(only.started_s or 0.0))


def test_starts_learned_from_move_the_ranges_of_later_estimates_only() -> None:
    # Every job starts at three times its estimated wait, far beyond the default's range: the first
    # estimates miss, the later ones (calibrated on the starts seen by then) hold.
    shown = _shown(200, ratio=3.0, every_s=2 * HOUR)
    coverage = range_coverage(shown)
    assert coverage.started == 200
    assert 0.5 < (coverage.within or 0.0) < 1.0
    first = range_coverage(shown[:10])
    assert first.within == 0.0  # nothing had started when they were shown
    # The starts of later jobs do not reach back: the first ten score the same within the longer run.
    per_job = [range_coverage(shown[: n + 1]).within or 0.0 for n in range(10)]
    assert per_job == [0.0] * 10


def test_a_job_that_never_started_counts_as_waiting_not_as_a_miss() -> None:
    waits = [ShownEstimate(1, 0.0, 10 * HOUR, None), *_shown(3, ratio=1.0)]
    coverage = range_coverage(waits)
    assert coverage.started == 3


def test_sizes_are_counted_apart() -> None:
    shown = _shown(30, ratio=1.0) + _shown(5, ratio=1.0, gpus=64)
    coverage = range_coverage(shown)
    assert {size: started for size, (_, started) in coverage.by_size.items()} == {"node": 30, "gang": 5}


def test_a_steady_fleet_is_covered_near_the_aim() -> None:
    rng = random.Random(5)
    shown = [
        ShownEstimate(1, index * 600.0, index * 600.0 + 5 * HOUR, index * 600.0 + 5 * HOUR * rng.lognormvariate(-1, 1))
        for index in range(2000)
    ]
    coverage = range_coverage(shown)
    assert coverage.within == pytest.approx(0.8, abs=0.05)
    assert RECALIBRATE_EVERY_S == HOUR


def test_a_replay_reports_the_share_beside_the_estimate_errors() -> None:
    # One 8-GPU node: b and c wait behind a; d (8 GPUs, submitted late) waits behind nothing.
    jobs = [job("a", 0, 8, 100), job("b", 10, 8, 50), job("c", 20, 8, 30), job("d", 400, 1, 1)]
    metrics = run_simulation(jobs, parse_fleet("1x1x1x8").nodes(), Policy(within_team_order="submit")).metrics
    assert metrics["estimate_range_jobs"] == metrics["estimate_jobs"] == 2
    # Exact estimates, and the default ranges hold them.
    assert metrics["estimate_within_range"] == 1.0
    assert metrics["estimate_range_width_p50"] > 0.0

    without = run_simulation(jobs, parse_fleet("1x1x1x8").nodes(), Policy(), record_estimates=False).metrics
    assert without["estimate_within_range"] is None and without["estimate_range_jobs"] is None

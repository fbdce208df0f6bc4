"""Ranges beside start estimates: calibrated per size and lead time on how past estimates turned out,
counting the jobs that still wait, and widened when the ranges already shown held too few starts."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine.estimate_range import (
    COVERAGE,
    DEFAULT_CALIBRATION,
    HISTORY_OUTCOMES,
    LEAD_EDGES_S,
    MIN_BAND_SAMPLES,
    SIZES,
    EstimateOutcome,
    aimed_share,
    calibrate,
    start_range,
    survival_quantile,
)

HOUR = 3600.0
DAY = 86400.0


def _outcomes(gpus: int, estimated_s: float, ratios: list[float]) -> list[EstimateOutcome]:
    return [EstimateOutcome(gpus, estimated_s, estimated_s * ratio) for ratio in ratios]


def test_without_censoring_the_survival_quantile_is_the_plain_one() -> None:
    values = [float(v) for v in range(1, 11)]
    points = [(value, True) for value in values]
    assert survival_quantile(points, 0.1) == 1.0
    assert survival_quantile(points, 0.9) == 9.0
    assert survival_quantile(points, 1.0) == 10.0


def test_jobs_still_waiting_push_the_upper_quantile_up_and_can_leave_it_unknown() -> None:
    started = [(float(v), True) for v in range(1, 11)]
    # Ten more still wait, already longer than every start seen: the 90th percentile is beyond 10.
    waiting = [(20.0, False)] * 10
    assert survival_quantile(started + waiting, 0.9) is None
    # Censored early (just shown) they say little: the quantile stays within the starts seen.
    assert survival_quantile(started + [(0.5, False)] * 10, 0.9) == 9.0


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0.001, 1000.0), st.booleans()), min_size=1, max_size=60), st.floats(0.05, 0.95))
def test_a_survival_quantile_is_an_observed_value_never_below_that_of_the_observed_values_alone(
    points: list[tuple[float, bool]], share: float
) -> None:
    # Kaplan-Meier moves the share of a censored value onto larger values, never smaller ones.
    found = survival_quantile(points, share)
    observed = [(value, True) for value, seen in points if seen]
    if found is not None:
        assert (found, True) in observed
        alone = survival_quantile(observed, share)
        assert alone is not None and found >= alone


def test_each_size_and_lead_band_gets_its_own_ratios() -> None:
    rng = random.Random(1)
    quick = _outcomes(1, 2 * DAY, [rng.uniform(0.01, 0.2) for _ in range(100)])  # one node, told days
    late = _outcomes(64, 2 * DAY, [rng.uniform(1.0, 5.0) for _ in range(100)])  # a gang, told days
    now = _outcomes(1, 120.0, [rng.uniform(1.0, 2.0) for _ in range(100)])  # one node, told "now"
    calibration = calibrate(quick + late + now, fallback=DEFAULT_CALIBRATION)

    node_days, gang_days = calibration.band_for(1, 2 * DAY), calibration.band_for(64, 2 * DAY)
    assert 0.01 <= node_days.low < node_days.high <= 0.2 and node_days.samples == 100
    assert 1.0 <= gang_days.low < gang_days.high <= 5.0 and gang_days.samples == 100
    assert 1.0 <= calibration.band_for(1, 120.0).low
    # A band with no outcomes of its own takes the ratios of all of its size.
    hours = calibration.band_for(1, 2 * HOUR)
    assert hours.samples == 0 and node_days.low < hours.low < 0.2 and 1.0 < hours.high <= 2.0
    assert calibration.samples == 300 and calibration.coverage == COVERAGE


def test_ten_to_ninety_percent_of_the_outcomes_fall_within_the_ratios_in_sample() -> None:
    rng = random.Random(2)
    outcomes = _outcomes(8, DAY, [math.exp(rng.gauss(-2.0, 1.5)) for _ in range(1000)])
    band = calibrate(outcomes, fallback=DEFAULT_CALIBRATION).band_for(8, DAY)
    held = sum(band.low <= outcome.ratio <= band.high for outcome in outcomes) / len(outcomes)
    assert held == pytest.approx(COVERAGE, abs=0.01)


def test_too_few_outcomes_leave_the_fallback_and_a_rare_size_takes_its_band_from_it() -> None:
    few = _outcomes(1, HOUR, [1.0] * (MIN_BAND_SAMPLES - 1))
    assert calibrate(few, fallback=DEFAULT_CALIBRATION) is DEFAULT_CALIBRATION

    enough = calibrate(_outcomes(1, HOUR, [1.0] * MIN_BAND_SAMPLES), fallback=DEFAULT_CALIBRATION)
    fallback = DEFAULT_CALIBRATION.band_for(64, DAY)
    assert (enough.band_for(64, DAY).low, enough.band_for(64, DAY).high) == (fallback.low, fallback.high)
    assert [band.size for band in enough.bands] == [size for size in SIZES for _ in range(len(LEAD_EDGES_S) + 1)]


def test_ranges_that_held_too_few_starts_make_the_next_ones_wider() -> None:
    def checked(held: int, missed: int) -> list[EstimateOutcome]:
        return [EstimateOutcome(1, HOUR, HOUR, True, True)] * held + [
            EstimateOutcome(1, HOUR, HOUR, True, False)
        ] * missed

    assert aimed_share(checked(80, 20), COVERAGE) == pytest.approx(COVERAGE)
    assert aimed_share(checked(75, 25), COVERAGE) == pytest.approx(COVERAGE + 2 * 0.05)
    assert aimed_share(checked(0, 100), COVERAGE) == 0.98  # bounded
    assert aimed_share(checked(95, 5), COVERAGE) < COVERAGE
    assert aimed_share(checked(5, 5), COVERAGE) == COVERAGE  # too few to tell

    rng = random.Random(3)
    ratios = [rng.uniform(0.1, 10.0) for _ in range(200)]
    plain = calibrate(_outcomes(1, DAY, ratios), fallback=DEFAULT_CALIBRATION).band_for(1, DAY)
    missed = [EstimateOutcome(1, DAY, DAY * r, True, index % 2 == 0) for index, r in enumerate(ratios)]
    wider = calibrate(missed, fallback=DEFAULT_CALIBRATION).band_for(1, DAY)
    assert wider.low < plain.low and wider.high > plain.high


def test_a_range_is_the_estimated_wait_times_its_bands_ratios() -> None:
    rng = random.Random(4)
    calibration = calibrate(
        _outcomes(64, 4 * HOUR, [rng.uniform(0.5, 3.0) for _ in range(200)]), fallback=DEFAULT_CALIBRATION
    )
    band = calibration.band_for(64, 3.5 * HOUR)
    shown = start_range(calibration, gpus=64, now_s=1000.0, estimated_start_s=1000.0 + 3.5 * HOUR)
    assert shown.low_s == pytest.approx(1000.0 + 3.5 * HOUR * band.low)
    assert shown.high_s == pytest.approx(1000.0 + 3.5 * HOUR * band.high)
    assert shown.holds(1000.0 + 3.5 * HOUR) and not shown.holds(1000.0 + 3.5 * HOUR * band.high + 1)


def test_a_low_end_within_a_cycle_is_now_and_the_high_end_at_least_a_cycle_away() -> None:
    shown = start_range(DEFAULT_CALIBRATION, gpus=1, now_s=500.0, estimated_start_s=400.0)  # in the past
    assert shown.low_s == 500.0 and shown.high_s >= 560.0
    assert shown.holds(500.0)


def test_calibrate_refuses_a_share_outside_zero_and_one() -> None:
    with pytest.raises(ValueError, match="coverage"):
        calibrate([], fallback=DEFAULT_CALIBRATION, coverage=1.0)


def test_the_history_and_defaults_are_what_the_module_says() -> None:
    assert HISTORY_OUTCOMES >= MIN_BAND_SAMPLES
    for size in SIZES:
        bands = [band for band in DEFAULT_CALIBRATION.bands if band.size == size]
        assert [band.up_to_s for band in bands] == [*LEAD_EDGES_S, math.inf]
        assert all(0.0 < band.low <= band.high for band in bands)

"""Each metric formula on a tiny case computed by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Quota
from scheduling.sim.formulas import (
    bounded_slowdown,
    fitting_demand,
    guarantee_violation_gpu_s,
    jain_index,
    limit_ratio,
    percentile,
    water_fill,
    water_fill_with_bounds,
)

from .builders import job, simulate


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [([50.0, 100.0], 50, 75.0), ([50.0, 100.0], 95, 97.5), ([50.0, 100.0], 99, 99.5), ([7.0], 99, 7.0), ([], 50, None)],
)
def test_percentiles_interpolate_between_closest_ranks(values, p, expected) -> None:
    assert percentile(values, p) == expected


@pytest.mark.parametrize(("jct", "duration", "expected"), [(100, 50, 2.0), (30, 1, 3.0), (10, 10, 1.0)])
def test_bounded_slowdown_divides_by_the_duration_or_ten_seconds(jct, duration, expected) -> None:
    assert bounded_slowdown(jct, duration) == expected


@pytest.mark.parametrize(
    ("shares", "expected"), [([1.0, 1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([2.0, 2 / 3], 0.8), ([], None)]
)
def test_jains_index_is_one_when_shares_are_equal_and_one_over_n_at_worst(shares, expected) -> None:
    assert jain_index(shares) == pytest.approx(expected)


def test_limit_ratio_divides_goodput_by_the_feasible_load() -> None:
    assert limit_ratio(0.45, 0.5) == pytest.approx(0.9)
    assert limit_ratio(0.9, 1.2) == pytest.approx(0.9)
    assert limit_ratio(None, 0.5) is None


@settings(max_examples=200, deadline=None, database=None)
@given(
    capacity=st.integers(0, 64),
    demands=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 80), min_size=1),
    weights=st.dictionaries(st.sampled_from("abcdef"), st.sampled_from((0.0, 1.0, 2.0, 13.0, 72.0))),
    moved=st.integers(0, 200),
)
def test_a_demand_moved_above_its_uncapped_bound_water_fills_the_same_to_the_bit(
    capacity: int, demands: dict[str, int], weights: dict[str, float], moved: int
) -> None:
    entitled, bounds = water_fill_with_bounds(capacity, demands, weights)
    assert entitled == water_fill(capacity, demands, weights)
    for team, bound in bounds.items():
        assert demands[team] > bound and entitled[team] < demands[team]
        if moved > bound:
            assert water_fill(capacity, {**demands, team: moved}, weights) == entitled


def test_water_fill_gives_what_a_small_team_leaves_to_the_others() -> None:
    assert water_fill(12, {"a": 2, "b": 20, "c": 20}, {}) == pytest.approx({"a": 2, "b": 5, "c": 5})
    assert water_fill(12, {"a": 20, "b": 20}, {"a": 3, "b": 1}) == pytest.approx({"a": 9, "b": 3})


@pytest.mark.parametrize(
    ("steps", "end_s", "expected"),
    [
        ([(0, 4), (600, 0)], 1000, 4 * 300),  # counted after the first five minutes
        ([(0, 4), (200, 2), (400, 0)], 1000, 2 * 100),  # one episode, the rate changes
        ([(0, 4), (200, 0), (250, 4), (500, 0)], 1000, 0),  # two short episodes never count
        ([(0, 3)], 360, 3 * 60),  # still open at the end
    ],
)
def test_guarantee_violations_count_only_after_five_minutes_of_unmet_demand(steps, end_s, expected) -> None:
    assert guarantee_violation_gpu_s(steps, end_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("sizes", "unused", "expected"),
    [
        ({1: 3, 4: 1}, 8, 7),  # every job fits
        ({1: 3, 16: 1}, 8, 3),  # the 16-GPU gang would borrow to start: not counted
        ({4: 3}, 8, 8),  # three jobs of 4 fit one by one, at most the unused guarantee counts
        ({2: 1}, 0, 0),  # no unused guarantee
        ({}, 8, 0),
    ],
)
def test_fitting_demand_counts_only_jobs_whose_whole_size_fits_the_unused_guarantee(sizes, unused, expected) -> None:
    assert fitting_demand(sizes, unused) == expected


def test_a_gang_bigger_than_the_unused_guarantee_counts_in_the_violation_but_not_in_its_fitting_part() -> None:
    # 16 GPUs, alpha and beta guaranteed 8 each. Beta borrows the whole fleet from 0 to 3600 s;
    # alpha waits from 10 s with a 16-GPU gang (beyond its 8 unused) and a 4-GPU job; the small job
    # starts at 3600 s, the gang at 3700 s. Unmet demand from 10 s to 3600 s, counted after the
    # first five minutes (3290 s): 8 GPUs by the contract, 4 that fit whole; then, until 3700 s,
    # 4 GPUs of guarantee left and only the gang waiting: 4 by the contract, none that fits.
    quotas = (Quota("alpha", "gpu", 8, 8), Quota("beta", "gpu", 8, 8))
    jobs = [job("b1", 0, 16, 3600, team="beta"), job("a-big", 10, 16, 100), job("a-small", 10, 4, 100)]
    jobs.append(job("late", 5000, 1, 10, team="beta"))
    result = simulate("1x1x2x8", jobs, "fifo", quotas=quotas)
    assert result.jct_by_job["a-small"] == pytest.approx(3700 - 10)
    assert result.jct_by_job["a-big"] == pytest.approx(3800 - 10)
    assert result.metrics["guarantee_violation_gpu_hours"] == pytest.approx((8 * 3290 + 4 * 100) / 3600)
    assert result.metrics["guarantee_violation_fit_gpu_hours"] == pytest.approx(4 * 3290 / 3600)


def test_window_metrics_on_a_tiny_trace() -> None:
    # 8 GPUs; a (4 GPUs) runs 0..100, b (8 GPUs) arrives at 100 and runs 100..150. Window = 0..100.
    metrics = simulate("1x1x1x8", [job("a", 0, 4, 100), job("b", 100, 8, 50)], "fifo").metrics
    assert metrics["window_s"] == 100
    assert metrics["capacity_gpus"] == 8
    assert metrics["utilisation"] == pytest.approx(400 / 800)
    assert metrics["goodput"] == pytest.approx(400 / 800)
    assert metrics["offered_load"] == pytest.approx((4 * 100 + 8 * 0) / 800)
    assert metrics["limit_ratio"] == pytest.approx(1.0)
    assert (metrics["jct_mean_s"], metrics["jct_p50_s"], metrics["jct_p95_s"], metrics["jct_p99_s"]) == (
        75.0,
        75.0,
        97.5,
        99.5,
    )
    assert (metrics["wait_mean_s"], metrics["wait_p99_s"]) == (0.0, 0.0)
    assert metrics["bounded_slowdown_mean"] == 1.0


def test_goodput_excludes_topology_slowdown() -> None:
    # Across two pods the 16-GPU job needs 140 s for 100 s of work; the window closes at 140.
    jobs = [job("x", 0, 8, 1000), job("y", 0, 16, 100), job("z", 140, 1, 1)]
    metrics = simulate("2x1x2x8", jobs, "fifo").metrics
    assert metrics["utilisation"] == pytest.approx((8 * 140 + 16 * 140) / (32 * 140))
    assert metrics["goodput"] == pytest.approx((8 * 140 + 16 * 100) / (32 * 140))


def test_jain_fairness_compares_used_with_max_min_entitlement_while_demanding() -> None:
    # a runs 0..100 while both teams demand 8 (entitled 4 each); b runs 100..200 alone (entitled 8).
    jobs = [job("a1", 0, 8, 100, team="a"), job("b1", 0, 8, 100, team="b"), job("a2", 200, 1, 10, team="a")]
    metrics = simulate("1x1x1x8", jobs, "fifo").metrics
    # a: 800 used / 400 entitled = 2; b: 800 / 1200 = 2/3 -> (8/3)^2 / (2 x (4 + 4/9)) = 0.8
    assert metrics["jain_fairness"] == pytest.approx(0.8)


def test_failure_and_serving_keys_are_present_before_their_models_exist() -> None:
    metrics = simulate("1x1x1x8", [job("a", 0, 1, 10)], "fleetline").metrics
    assert metrics["failures"] == 0 and metrics["failure_lost_gpu_hours"] == 0
    assert metrics["mttd_mean_s"] is None and metrics["mttr_mean_s"] is None
    assert metrics["serving_slo_attainment"] is None

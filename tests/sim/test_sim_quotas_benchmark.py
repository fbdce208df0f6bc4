"""The quota benchmark's workload shaping: checkpoints, noisy limits, the part of the trace replayed."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path
from types import ModuleType

import pytest

from scheduling.sim.trace import TraceJob

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_quotas.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_quotas", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRACE = [TraceJob(f"j{i}", 3600.0 * i, 100.0 + i, 1, "t") for i in range(400)]


def test_noisy_limits_lie_between_one_and_four_times_the_work_with_median_two_and_repeat_by_seed(bench) -> None:
    shaped = bench.shaped(TRACE, None, "noisy2", seed=1)
    factors = [job.time_limit_s / job.duration_s for job in shaped]
    assert all(1.0 <= factor <= 4.0 for factor in factors)
    assert statistics.median(factors) == pytest.approx(2.0, rel=0.15)
    assert bench.shaped(TRACE, None, "noisy2", seed=1) == shaped
    assert bench.shaped(TRACE, None, "noisy2", seed=2) != shaped


def test_the_checkpoint_variant_checkpoints_every_job_every_half_hour_and_exact_limits_stay_unset(bench) -> None:
    shaped = bench.shaped(TRACE, 1800.0, "exact", seed=0)
    assert {job.checkpoint_interval_s for job in shaped} == {1800.0}
    assert {job.time_limit_s for job in shaped} == {None}


def test_a_window_a_sample_and_a_limit_pick_part_of_the_trace(bench) -> None:
    options = bench.parse(["--window", "1:2", "--limit", "10"])
    picked = bench.select(TRACE, options)
    assert [job.job_id for job in picked] == [f"j{i}" for i in range(24, 34)]
    half = bench.select(TRACE, bench.parse(["--sample", "0.5", "--seed", "3"]))
    assert 150 < len(half) < 250 and half == bench.select(TRACE, bench.parse(["--sample", "0.5", "--seed", "3"]))


def test_quick_runs_replay_easy_and_fleetline_on_one_case_of_the_first_3000_jobs(bench) -> None:
    options = bench.parse(["--quick"])
    assert (options.limit, options.load, options.checkpoint, options.estimate) == (3000, [1.07], ["none"], ["exact"])
    assert options.policy == ["easy", "fleetline"]

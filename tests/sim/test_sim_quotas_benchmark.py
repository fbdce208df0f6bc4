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


def test_splitting_teams_splits_the_ones_offering_most_work_in_two_keeping_every_job(bench) -> None:
    trace = [
        TraceJob(f"j{i}", float(i), 100.0, gpus, team) for i, (gpus, team) in enumerate([(8, "big"), (1, "small")] * 50)
    ]
    split = bench.select(trace, bench.parse(["--split-teams", "1"]))
    assert [job.job_id for job in split] == [job.job_id for job in trace]
    assert {job.team for job in split} == {"big-a", "big-b", "small"}
    assert all(job.team.startswith("big") == (job.gpus == 8) for job in split)
    assert split == bench.select(trace, bench.parse(["--split-teams", "1"]))
    assert bench.select(trace, bench.parse([])) == trace


def test_skewed_guarantees_keep_their_total_and_each_team_the_whole_fleet_to_borrow(bench) -> None:
    from scheduling.engine.model import Quota
    from scheduling.sim.fleet import QuotaSpec

    quotas = QuotaSpec(tuple(Quota(f"t{i}", "gpu", 90, 1000 - 90) for i in range(10)), ())
    skewed = bench.skewed(quotas, 3.0, seed=1)
    guaranteed = [quota.guaranteed for quota in skewed.quotas]
    assert 900 - len(guaranteed) < sum(guaranteed) <= 900
    assert 1 < max(guaranteed) / min(guaranteed) <= 9.5  # each drawn within 3x either way
    assert all(quota.guaranteed + quota.borrow_limit == 1000 for quota in skewed.quotas)
    assert bench.skewed(quotas, 3.0, seed=1) == skewed and bench.skewed(quotas, 3.0, seed=2) != skewed
    assert bench.skewed(quotas, 1.0, seed=1) == quotas


def test_a_borrow_limit_caps_each_teams_loans_at_a_share_of_the_fleet_but_never_below_its_largest_job(bench) -> None:
    from scheduling.engine.model import Quota
    from scheduling.sim.fleet import QuotaSpec

    quotas = QuotaSpec((Quota("small", "gpu", 10, 990), Quota("big", "gpu", 400, 600)), ())
    trace = [
        TraceJob("a", 0.0, 10.0, 8, "small"),
        TraceJob("b", 0.0, 10.0, 512, "small"),
        TraceJob("c", 0.0, 10.0, 1, "big"),
    ]
    limited = bench.limited(quotas, 0.25, trace, 1000)
    assert [(quota.team, quota.borrow_limit) for quota in limited.quotas] == [("small", 502), ("big", 250)]
    assert bench.limited(quotas, None, trace, 1000) == quotas


@pytest.mark.parametrize(
    "argv",
    [
        ["--split-teams", "-1"],
        ["--guarantee-skew", "0.5"],
        ["--guarantee-skew", "inf"],
        ["--priority-share", "1.5"],
        ["--borrow-limit", "-0.1"],
        ["--borrow-limit", "2"],
    ],
)
def test_workload_shapes_out_of_range_are_refused(bench, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        bench.parse(argv)
    assert refused.value.code == 2


def test_a_priority_share_puts_a_seeded_share_of_the_jobs_in_the_higher_class(bench) -> None:
    picked = bench.select(TRACE, bench.parse(["--priority-share", "0.25", "--seed", "1"]))
    high = [job.job_id for job in picked if job.priority == bench.HIGH_PRIORITY]
    assert 60 < len(high) < 140 and {job.priority for job in picked} == {0, bench.HIGH_PRIORITY}
    assert high == [
        job.job_id
        for job in bench.select(TRACE, bench.parse(["--priority-share", "0.25", "--seed", "1"]))
        if job.priority
    ]
    assert bench.select(TRACE, bench.parse([])) == TRACE


def test_the_higher_class_jct_is_of_its_finished_jobs_only(bench) -> None:
    jobs = [TraceJob("a", 0.0, 10.0, 1, "t", priority=bench.HIGH_PRIORITY), TraceJob("b", 0.0, 10.0, 1, "t")]
    jobs.append(TraceJob("c", 0.0, 10.0, 1, "t", priority=bench.HIGH_PRIORITY))
    assert bench.high_priority_jct(jobs, {"a": 100.0, "b": 5.0}) == {"jct_mean_s_high": 100.0, "jct_p99_s_high": 100.0}
    assert bench.high_priority_jct(jobs[1:2], {"b": 5.0}) == {}

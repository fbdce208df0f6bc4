"""The first estimate each waiting job was shown, against when it really started."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import replace

import pytest

from scheduling.engine import Kept, Plan, Policy, Snapshot, schedule
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.formulas import estimate_error
from scheduling.sim.simulator import run_simulation

from .builders import job

# One 8-GPU node: a runs 0..100; b (submitted at 10) waits for it, c (at 20) waits for both.
QUEUE = [job("a", 0, 8, 100), job("b", 10, 8, 50), job("c", 20, 8, 30), job("d", 400, 1, 1)]


def _run(jobs, **options):
    # In submit order (shortest limit first within the team would put c before b).
    policy = Policy(within_team_order="submit")
    return run_simulation(jobs, parse_fleet("1x1x1x8").nodes(), policy, **options)


def test_exact_estimates_score_one_for_every_job_that_waited() -> None:
    metrics = _run(QUEUE).metrics
    # b is told 100 and starts at 100; c is told 150 (b's 400 GPU-s after a) and starts at 150.
    assert metrics["estimate_jobs"] == 2
    assert metrics["estimate_error_p50"] == pytest.approx(1.0)
    assert metrics["estimate_error_p90"] == pytest.approx(1.0)
    assert metrics["estimate_absent"] == 0


def test_time_limits_twice_the_work_make_estimates_pessimistic_by_the_same_ratio() -> None:
    jobs = [replace(j, time_limit_s=2 * j.duration_s) if j.id != "d" else j for j in QUEUE]
    metrics = _run(jobs).metrics
    # b is told 200 (a's limit) and waits 90 s of the 190 it was told; c is told 300 and waits 130 of 280.
    low, high = 130 / 280, 90 / 190
    assert metrics["estimate_error_p10"] == pytest.approx(low + (high - low) * 0.1)
    assert metrics["estimate_error_p90"] == pytest.approx(low + (high - low) * 0.9)


def test_a_job_that_starts_in_its_first_cycle_has_no_estimate_error() -> None:
    metrics = _run([job("a", 0, 4, 100), job("b", 10, 4, 100)]).metrics
    assert metrics["estimate_jobs"] == 0
    assert metrics["estimate_error_p50"] is None and metrics["estimate_error_p90"] is None


def test_both_waits_are_floored_at_one_cycle_interval() -> None:
    assert estimate_error(3600.0, 0.0) == 60.0  # told "now", waited an hour
    assert estimate_error(30.0, 0.0) == 1.0  # told "now", started within the cycle interval
    assert estimate_error(30.0, 600.0) == 0.1
    assert estimate_error(1200.0, -5.0) == 20.0  # an estimate in the past counts as "now"


def test_jobs_shown_no_estimate_are_counted_apart_and_left_out_of_the_ratios() -> None:
    def without_estimates(snapshot: Snapshot, now: float, explain: AbstractSet[str], kept: Kept) -> Plan:
        plan = schedule(snapshot, now, explain=explain, kept=kept)
        return Plan(plan.actions, tuple(replace(status, estimated_start_s=None) for status in plan.pending))

    metrics = _run(QUEUE, scheduler=without_estimates).metrics
    assert metrics["estimate_absent"] == 2
    assert metrics["estimate_jobs"] == 0 and metrics["estimate_error_p90"] is None


def test_every_nth_job_in_submit_order_is_sampled_when_asked() -> None:
    metrics = _run(QUEUE, estimate_every=2).metrics
    # a (first) and c (third) are sampled; a never waited, so only c is scored.
    assert metrics["estimate_sampled_every"] == 2
    assert metrics["estimate_jobs"] == 1


def test_without_estimates_the_keys_are_null() -> None:
    metrics = _run(QUEUE, record_estimates=False).metrics
    assert metrics["estimate_error_p50"] is None and metrics["estimate_jobs"] is None

"""Cycles the simulator skips are ones that could have started nothing: skipping changes no result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Job
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.metrics import WALL_KEYS
from scheduling.sim.simulator import run_simulation

from .builders import POLICIES, job

COUNTS = {"cycles", "cycles_skipped", *WALL_KEYS}


@st.composite
def traces(draw: st.DrawFn) -> list[Job]:
    count = draw(st.integers(1, 25))
    jobs, submit_s = [], 0.0
    for index in range(count):
        submit_s += draw(st.sampled_from((0.0, 30.0, 600.0, 3600.0)))
        gpus = draw(st.sampled_from((1, 2, 3, 4, 6, 8, 16, 24)))
        duration_s = draw(st.sampled_from((60.0, 900.0, 3600.0, 7200.0)))
        team = draw(st.sampled_from(("alpha", "beta")))
        jobs.append(job(f"j{index:02d}", submit_s, gpus, duration_s, team=team))
    return jobs


def _metrics(jobs: list[Job], policy: str, skip: bool) -> dict[str, object]:
    nodes = parse_fleet("1x2x2x8").nodes()
    result = run_simulation(jobs, nodes, POLICIES[policy], policy_name=policy, skip_idle_cycles=skip)
    return {key: value for key, value in result.metrics.items() if key not in COUNTS}


@settings(max_examples=80, deadline=None, database=None)
@given(jobs=traces())
def test_strict_fifo_gives_the_same_metrics_with_and_without_skipped_cycles(jobs: list[Job]) -> None:
    assert _metrics(jobs, "fifo", True) == _metrics(jobs, "fifo", False)


@settings(max_examples=80, deadline=None, database=None)
@given(jobs=traces())
def test_easy_backfill_gives_the_same_schedule_with_and_without_skipped_cycles(jobs: list[Job]) -> None:
    # Only the fragmentation sample may differ: a skipped cycle judges it by counts, not by a plan.
    with_skips, without = _metrics(jobs, "easy", True), _metrics(jobs, "easy", False)
    with_skips.pop("fragmentation_idle_fraction")
    without.pop("fragmentation_idle_fraction")
    assert with_skips == without


def test_a_cycle_is_skipped_when_free_gpus_suffice_by_count_but_not_by_shape() -> None:
    # First fit, in id order, puts a and b on one node, c and d on the other; from 3600 s until
    # 7200 s 8 GPUs are free, 4 on each node, and "whole" needs 8 on one.
    jobs = [job("a", 0.0, 4, 7200.0), job("b", 0.0, 4, 3600.0), job("c", 0.0, 4, 7200.0)]
    jobs += [job("d", 0.0, 4, 3600.0), job("whole", 60.0, 8, 600.0), job("late", 7000.0, 1, 60.0)]
    nodes = parse_fleet("1x1x2x8").nodes()
    runs = {
        skip: run_simulation(jobs, nodes, POLICIES["fifo"], policy_name="fifo", skip_idle_cycles=skip)
        for skip in (True, False)
    }

    assert runs[True].jct_by_job == runs[False].jct_by_job
    assert runs[True].metrics["cycles"] < runs[False].metrics["cycles"]
    assert runs[True].metrics["fragmentation_idle_fraction"] == runs[False].metrics["fragmentation_idle_fraction"] > 0

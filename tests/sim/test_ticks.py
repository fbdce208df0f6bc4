"""Replays on the live cycle's ticks: what happens between two ticks is planned together at the next."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest
from hypothesis import given, settings

from scheduling.engine import Job, Kept, Plan, Quota, Snapshot
from scheduling.sim.cli import build_parser, run
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.runner import compare_policies
from scheduling.sim.simulator import engine_scheduler, run_simulation
from scheduling.sim.trace import TraceJob

from .builders import POLICIES, job
from .test_gate import traces

TICK_S = 60.0


def _starts(jobs: list[Job], tick_s: float = TICK_S) -> dict[str, float]:
    """Each job's (first) start in the replay: its end minus what it ran (no job here is preempted)."""
    nodes = parse_fleet("1x1x2x8").nodes()
    result = run_simulation(jobs, nodes, POLICIES["easy"], tick_s=tick_s)
    by_id = {each.id: each for each in jobs}
    return {key: by_id[key].submit_s + jct - by_id[key].duration_s for key, jct in result.jct_by_job.items()}


def test_a_job_submitted_between_two_ticks_starts_at_the_next_tick() -> None:
    starts = _starts([job("a", 0.0, 8, 600.0), job("b", 10.0, 8, 600.0)])
    assert starts == {"a": 0.0, "b": 60.0}


def test_without_ticks_a_job_starts_when_it_is_submitted() -> None:
    starts = _starts([job("a", 0.0, 8, 600.0), job("b", 10.0, 8, 600.0)], tick_s=0.0)
    assert starts == {"a": 0.0, "b": 10.0}


def test_the_gpus_a_job_frees_between_two_ticks_go_to_the_queue_at_the_next_tick() -> None:
    starts = _starts([job("a", 0.0, 16, 90.0), job("b", 5.0, 16, 600.0)])
    assert starts == {"a": 0.0, "b": 120.0}


def test_jobs_submitted_within_one_tick_are_planned_together_in_one_cycle() -> None:
    jobs = [job(f"j{index}", 1.0 + index, 1, 600.0) for index in range(10)]
    nodes = parse_fleet("1x1x2x8").nodes()
    result = run_simulation([job("first", 0.0, 1, 600.0), *jobs], nodes, POLICIES["easy"], tick_s=TICK_S)
    assert result.metrics["cycles"] == 2  # at 0 s and at the tick of 60 s (the ends are skipped)


@pytest.mark.parametrize("policy", ["fifo", "easy", "fleetline"])
@settings(max_examples=25, deadline=None, database=None)
@given(jobs=traces())
def test_a_replay_on_ticks_plans_only_on_ticks_and_ends(policy: str, jobs: list[Job]) -> None:
    planned_at: list[float] = []

    def scheduler(snapshot: Snapshot, now: float, explain: AbstractSet[str], kept: Kept) -> Plan:
        planned_at.append(now)
        # The replay hands the engine what its FleetState keeps for this very snapshot.
        assert kept.book is not None and kept.book.running is snapshot.running
        assert kept.nodes is not None
        return engine_scheduler(snapshot, now, explain, kept)

    quotas = (Quota("alpha", "gpu", 8, 32), Quota("beta", "gpu", 16, 32))
    nodes = parse_fleet("1x2x2x8").nodes()
    result = run_simulation(jobs, nodes, POLICIES[policy], quotas=quotas, tick_s=TICK_S, scheduler=scheduler)
    assert result.metrics["unfinished"] == 0
    assert all((now - jobs[0].submit_s) % TICK_S == 0.0 for now in planned_at)


@pytest.mark.parametrize("tick_s", [-60.0, math.inf, math.nan])
def test_a_tick_that_is_not_a_number_of_seconds_is_refused_before_anything_is_replayed(tick_s: float) -> None:
    fleet = parse_fleet("1x1x2x8")
    trace = [TraceJob("a", 0.0, 600.0, 1, "alpha")]
    with pytest.raises(ValueError, match="tick"):
        compare_policies(trace, fleet, ["easy"], tick_s=tick_s)


def test_the_command_line_replays_on_ticks_and_says_so(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time,duration,gpus,team\na,0,600,8,t\nb,10,600,8,t\n")
    out = io.StringIO()
    options = build_parser().parse_args(["--trace", str(trace), "--fleet", "1x1x2x8", "--tick", "60", "--json", "-"])
    assert run(options, out, io.StringIO()) == 0
    replay = json.loads(out.getvalue())
    assert replay["meta"]["tick_s"] == 60.0
    assert replay["results"][0]["wait_mean_s"] == 25.0  # b waits from 10 s to the tick at 60 s


def test_the_command_line_refuses_a_negative_tick_with_a_clear_error(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time,duration,gpus,team\na,0,600,8,t\n")
    err = io.StringIO()
    options = build_parser().parse_args(["--trace", str(trace), "--fleet", "1x1x2x8", "--tick", "-1"])
    assert run(options, io.StringIO(), err) == 2
    assert "tick" in err.getvalue()

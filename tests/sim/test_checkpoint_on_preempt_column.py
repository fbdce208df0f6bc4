"""The canonical trace's `checkpoint_on_preempt` column reaches the engine's jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.sim.fleet import parse_fleet
from scheduling.sim.trace import TraceError, load_canonical
from scheduling.sim.workload import build_workload


def test_jobs_that_checkpoint_on_preemption_say_so_in_the_trace_and_the_engine_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "job_id,submit_time,duration,gpus,team,checkpoint_on_preempt\na,0,10,8,x,1\nb,1,10,8,x,0\nc,2,10,8,x,\n"
    )

    trace = load_canonical([path])
    jobs = build_workload(trace, parse_fleet("1x1x2x8")).jobs

    assert [(job.job_id, job.checkpoint_on_preempt) for job in trace] == [("a", True), ("b", False), ("c", False)]
    assert [(job.id, job.checkpoint_on_preempt) for job in jobs] == [("a", True), ("b", False), ("c", False)]


def test_a_checkpoint_on_preempt_value_other_than_0_or_1_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus,team,checkpoint_on_preempt\na,0,10,8,x,2\n")

    with pytest.raises(TraceError, match="checkpoint_on_preempt"):
        load_canonical([path])

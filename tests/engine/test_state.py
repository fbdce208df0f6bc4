from __future__ import annotations

import pytest

from scheduling.engine import (
    Checkpointed,
    Completed,
    Evicted,
    FleetState,
    Grow,
    Plan,
    Policy,
    Preempt,
    Rejected,
    Shrink,
    Start,
    Started,
    TimedOut,
)

from .builders import fleet, job


def _state_with(*jobs, nodes=None, **options) -> FleetState:
    state = FleetState(nodes or fleet("2x2x2x8"), **options)
    for the_job in jobs:
        state.submit(the_job)
    return state


def _completed_about(job_id: str, time_s: float) -> Completed:
    """A completion that compares equal to one within pytest's tolerance of ``time_s``."""
    return Completed(job_id, pytest.approx(time_s))  # type: ignore[arg-type]  # approx stands in for the float


def _start(state: FleetState, job_id: str, allocation, now: float = 0.0) -> list:
    return state.apply(Plan((Start(job_id, allocation, False, "node"),), ()), now)


def _progress(state: FleetState, job_id: str, now: float) -> float:
    snapshot = state.snapshot(now, (), (), Policy())
    return next(run.progress_s for run in snapshot.running if run.job.id == job_id)


def test_progress_accrues_at_full_rate_on_one_node_and_the_job_completes() -> None:
    state = _state_with(job("j", 8, duration_s=100.0))
    events = _start(state, "j", (("p0-r0-n0", 8),))

    assert isinstance(events[0], Started)
    assert state.advance(50.0) == []
    assert _progress(state, "j", 50.0) == pytest.approx(50.0)
    assert state.next_event_time() == pytest.approx(100.0)
    assert state.advance(200.0) == [Completed("j", 100.0)]
    assert state.running == {}


def test_checkpoints_happen_every_interval_of_work() -> None:
    state = _state_with(job("j", 8, duration_s=100.0, checkpoint_interval_s=30.0))
    _start(state, "j", (("p0-r0-n0", 8),))

    events = state.advance(95.0)

    assert [(type(e), e.time_s) for e in events] == [(Checkpointed, 30.0), (Checkpointed, 60.0), (Checkpointed, 90.0)]


def test_a_job_is_killed_at_its_time_limit() -> None:
    state = _state_with(job("j", 8, duration_s=100.0, time_limit_s=40.0))
    _start(state, "j", (("p0-r0-n0", 8),))

    events = state.advance(100.0)

    assert events == [TimedOut("j", 40.0, 40.0)]
    assert state.counters().timed_out == 1


def test_preemption_rolls_progress_back_to_the_last_checkpoint_and_requeues() -> None:
    state = _state_with(job("j", 8, duration_s=100.0, checkpoint_interval_s=30.0))
    _start(state, "j", (("p0-r0-n0", 8),))
    state.advance(50.0)

    events = state.apply(Plan((Preempt("j", "test", 0.0),), ()), 50.0)

    assert events == [Evicted("j", 50.0, "test", 20.0 * 8)]
    assert "j" in state.pending and state.counters().lost_gpu_s == pytest.approx(160.0)
    _start(state, "j", (("p0-r0-n1", 8),), now=60.0)
    assert _progress(state, "j", 60.0) == pytest.approx(30.0)
    assert state.advance(1000.0)[-1] == Completed("j", 130.0)


def test_a_preempted_job_keeps_running_through_its_grace_period() -> None:
    state = _state_with(job("j", 8, duration_s=100.0))
    _start(state, "j", (("p0-r0-n0", 8),))

    assert state.apply(Plan((Preempt("j", "test", 10.0),), ()), 20.0) == []
    events = state.advance(40.0)

    assert [type(e) for e in events] == [Evicted]
    assert events[0].time_s == 30.0


@pytest.mark.parametrize(
    ("nodes", "finish_s"),
    [
        ((("p0-r0-n0", 8), ("p0-r0-n1", 8)), 100.0),
        ((("p0-r0-n0", 8), ("p0-r1-n0", 8)), 115.0),
        ((("p0-r0-n0", 8), ("p1-r0-n0", 8)), 140.0),
    ],
    ids=["rack", "pod", "fleet"],
)
def test_spreading_a_gang_wider_slows_it_down_by_the_level_penalty(nodes, finish_s: float) -> None:
    state = _state_with(job("g", 16, duration_s=100.0))
    _start(state, "g", nodes)

    assert state.advance(1000.0) == [_completed_about("g", finish_s)]


def test_an_elastic_job_runs_slower_when_shrunk_and_faster_when_grown() -> None:
    state = _state_with(job("e", 8, duration_s=100.0, min_gpus=4, max_gpus=16))
    _start(state, "e", (("p0-r0-n0", 8),))
    state.apply(Plan((Shrink("e", (("p0-r0-n0", 4),), 4),), ()), 50.0)
    state.apply(Plan((Grow("e", (("p0-r0-n0", 8),), 8),), ()), 70.0)

    assert _progress(state, "e", 70.0) == pytest.approx(60.0)
    assert state.advance(1000.0) == [_completed_about("e", 110.0)]


def test_a_start_on_gpus_already_in_use_is_rejected_whole() -> None:
    state = _state_with(job("a", 8), job("b", 16))
    _start(state, "a", (("p0-r0-n0", 8),))

    events = _start(state, "b", (("p0-r0-n1", 8), ("p0-r0-n0", 8)))

    assert events == [Rejected("b", 0.0, "no-capacity")]
    assert state.free_gpus("p0-r0-n1") == 8 and "b" in state.pending


def test_a_failed_node_evicts_its_jobs_back_to_their_checkpoints() -> None:
    state = _state_with(job("j", 16, duration_s=100.0, checkpoint_interval_s=10.0))
    _start(state, "j", (("p0-r0-n0", 8), ("p0-r0-n1", 8)))

    events = state.fail_node("p0-r0-n1", 25.0)

    assert [type(e) for e in events if not isinstance(e, Checkpointed)] == [Evicted]
    assert state.saved_progress["j"] == pytest.approx(20.0)
    assert state.nodes["p0-r0-n1"].healthy_gpus == 0


def test_a_restart_pays_the_restore_time_of_its_checkpoint() -> None:
    state = _state_with(
        job("j", 8, duration_s=100.0, checkpoint_interval_s=10.0, checkpoint_gb=100.0), storage_gbps=10.0
    )
    _start(state, "j", (("p0-r0-n0", 8),))
    state.apply(Plan((Preempt("j", "t", 0.0),), ()), 15.0)

    events = _start(state, "j", (("p0-r0-n0", 8),), now=20.0)

    assert events[0].restore_s == pytest.approx(10.0)
    assert state.advance(1000.0)[-1] == _completed_about("j", 120.0)


def test_counters_track_allocated_and_useful_gpu_seconds() -> None:
    state = _state_with(job("j", 8, duration_s=100.0))
    _start(state, "j", (("p0-r0-n0", 8),))
    state.advance(150.0)

    counters = state.counters()

    assert counters.allocated_gpu_s == pytest.approx(800.0)
    assert counters.useful_gpu_s == pytest.approx(800.0)
    assert counters.completed == 1


def test_usage_decays_with_the_half_life() -> None:
    state = _state_with(job("j", 8, duration_s=10.0), usage_half_life_s=100.0)
    _start(state, "j", (("p0-r0-n0", 8),))
    state.advance(10.0)
    at_end = dict(state.usage(10.0))["alpha"]

    assert dict(state.usage(110.0))["alpha"] == pytest.approx(at_end / 2)
    assert at_end == pytest.approx(80.0, rel=0.05)


def test_a_snapshot_from_fleet_state_schedules_like_any_other() -> None:
    from scheduling.engine import schedule

    state = _state_with(job("a", 8), job("b", 16, submit_s=1.0))
    plan = schedule(state.snapshot(0.0, (), (), Policy()), 0.0)
    events = state.apply(plan, 0.0)

    assert sorted(e.job_id for e in events if isinstance(e, Started)) == ["a", "b"]

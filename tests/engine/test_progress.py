"""The one model of progress, checkpoints and recovery: hand-computed cases and its invariants.

`tests/engine/test_fast_paths.py` checks that `runs.running_at` (which inlines `progress_at` and
`checkpoint_at`) and the release times `prepare.running_totals` inlines equal these definitions.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Completed, Evicted, FleetState, Plan, Policy, Start
from scheduling.engine.detector import DetectorPolicy, gpu_loss_detected_at
from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, Failure
from scheduling.engine.progress import (
    checkpoint_at,
    kept_on_eviction,
    next_checkpoint_progress,
    progress_at,
    progress_rate,
    release_after_s,
    time_at_progress,
    useful_gpu_s,
    work_gpu_s,
)
from scheduling.engine.recovery import (
    STALLED,
    Gang,
    leaves_at_once,
    lost_by_detection_gpu_s,
    node_slowdown,
    slow_detected_at,
    slow_gang_exit,
    slow_gang_leaves_at,
    slow_stretch_gpu_s,
)
from scheduling.sim.failures import gang_of
from tests.engine.builders import fleet, job

SETTINGS = settings(max_examples=60, deadline=None, database=None)
DETECTOR = DetectorPolicy(slow_threshold=1.3, slow_consecutive_steps=5, severe_slowdown=2.0)


def _gang(**overrides: object) -> Gang:
    fields: dict[str, object] = {
        "job_id": "g",
        "gpus": 8,
        "size_gpus": 16,
        "duration_s": 10_000.0,
        "checkpoint_interval_s": 300.0,
        "anchor_s": 100.0,
        "anchor_progress_s": 50.0,
        "base_progress_s": 50.0,
        "rate": 0.5,
    }
    fields.update(overrides)
    return Gang(**fields)  # type: ignore[arg-type]


def test_a_run_progresses_at_its_share_of_its_size_slowed_by_its_placement() -> None:
    assert progress_rate(8, 16, 1.0) == 0.5
    assert progress_rate(16, 16, 1.15) == pytest.approx(1 / 1.15)
    # Standing still before its anchor (restoring), capped at its duration.
    assert progress_at(100.0, 50.0, 0.5, 1000.0, 90.0) == 50.0
    assert progress_at(100.0, 50.0, 0.5, 1000.0, 300.0) == 150.0
    assert progress_at(100.0, 50.0, 0.5, 1000.0, 1e6) == 1000.0
    assert time_at_progress(100.0, 50.0, 0.5, 150.0) == 300.0


def test_checkpoints_count_whole_intervals_of_work_from_the_progress_a_run_restarted_with() -> None:
    assert checkpoint_at(50.0, 949.0, 300.0) == 650.0
    assert checkpoint_at(50.0, 950.0, 300.0) == 950.0
    assert checkpoint_at(50.0, 950.0 - 1e-10, 300.0) == 950.0  # float noise at a boundary counts
    assert checkpoint_at(50.0, 949.0, None) == 50.0
    assert next_checkpoint_progress(650.0, 300.0, 1000.0) == 950.0
    assert next_checkpoint_progress(950.0, 300.0, 1000.0) is None  # done first
    assert next_checkpoint_progress(650.0, None, 1000.0) is None


def test_what_an_eviction_keeps_and_rolls_back() -> None:
    assert kept_on_eviction(900.0, 650.0, False, 800.0) == 650.0
    assert kept_on_eviction(900.0, 650.0, True, 800.0) == 800.0  # wrote one when told
    assert kept_on_eviction(900.0, 650.0, True, None) == 650.0  # never told
    assert work_gpu_s(900.0, 650.0, 16) == 250.0 * 16
    assert work_gpu_s(600.0, 650.0, 16) == 0.0


def test_release_after_is_the_remaining_work_at_the_progress_rate() -> None:
    # 600 s of work left, on 8 of 16 GPUs (half pace) across racks of a pod (1.15x slower).
    assert release_after_s(1000.0, 400.0, 16, 8, 1.15) == pytest.approx(600.0 / progress_rate(8, 16, 1.15))
    assert release_after_s(1000.0, 1200.0, 16, 8, 1.15) == 0.0
    # What the ledger counts useful: the work done at that rate, on the job's size.
    assert useful_gpu_s(8, 600.0, 1.15) == pytest.approx(600.0 * progress_rate(8, 16, 1.15) * 16)


@given(
    anchor_progress=st.floats(0.0, 5000.0),
    base=st.floats(0.0, 5000.0),
    rate=st.floats(0.01, 2.0),
    interval=st.floats(1.0, 1000.0),
    later=st.floats(0.0, 1e5),
)
@SETTINGS
def test_checkpoints_never_pass_the_work_and_lag_it_by_less_than_an_interval(
    anchor_progress: float, base: float, rate: float, interval: float, later: float
) -> None:
    base = min(base, anchor_progress)
    progress = progress_at(0.0, anchor_progress, rate, 1e9, later)
    kept = checkpoint_at(base, progress, interval)
    assert base <= kept <= progress + 1e-6 * max(1.0, progress)
    assert progress - kept < interval + 1e-6 * max(1.0, progress)


def test_a_dead_node_stalls_its_gangs_and_a_slow_one_slows_them() -> None:
    assert node_slowdown(Failure(0.0, "n", CRASH)) == STALLED == math.inf
    assert node_slowdown(Failure(0.0, "n", GPU_LOSS, gpus_lost=1)) == STALLED
    assert node_slowdown(Failure(0.0, "n", SLOW, slowdown=1.5)) == 1.5
    # Flagged after 5 steps of 10 s at the slow pace; never within the noise.
    assert slow_detected_at(100.0, 1.5, 10.0, DETECTOR, gangs=1) == 175.0
    assert slow_detected_at(100.0, 1.3, 10.0, DETECTOR, gangs=1) is None
    assert slow_detected_at(100.0, 1.5, 10.0, DETECTOR, gangs=0) is None  # a node running nothing


def test_a_gang_on_a_dead_node_loses_the_stall_on_the_gpus_it_holds_and_its_work_since_its_checkpoint() -> None:
    gang = _gang()  # 8 of 16 GPUs: half pace; at 1,500 s it has done 50 + 700 = 750 s of work
    # Checkpoint at 650 s of work: 100 s rolled back on its size (16), 30 s stalled on its 8 GPUs.
    assert lost_by_detection_gpu_s(gang, 1500.0, 1530.0) == pytest.approx(100.0 * 16 + 30.0 * 8)


def test_a_slow_nodes_gang_leaves_at_its_next_checkpoint_or_at_once() -> None:
    gang = _gang()  # at 1,500 s: 750 s of work, next checkpoint at 950 s of work, 400 s later
    assert not leaves_at_once(gang, 1.5, DETECTOR)
    assert slow_gang_leaves_at(gang, 1500.0, 1.5, DETECTOR) == pytest.approx(1900.0)
    assert slow_gang_leaves_at(gang, 1500.0, 2.0, DETECTOR) == 1500.0  # severe
    assert slow_gang_leaves_at(_gang(checkpoint_interval_s=None), 1500.0, 1.5, DETECTOR) == 1500.0
    assert slow_gang_leaves_at(_gang(rate=0.0), 1500.0, 1.5, DETECTOR) == 1500.0
    assert slow_gang_leaves_at(_gang(duration_s=900.0), 1500.0, 1.5, DETECTOR) is None  # done first


@given(
    anchor_progress=st.floats(0.0, 5000.0),
    rate=st.floats(0.05, 2.0),
    interval=st.floats(10.0, 1000.0),
    now=st.floats(0.0, 1e4),
)
@SETTINGS
def test_a_gang_that_waits_for_its_next_checkpoint_loses_no_work(
    anchor_progress: float, rate: float, interval: float, now: float
) -> None:
    gang = _gang(
        duration_s=1e9,
        checkpoint_interval_s=interval,
        anchor_s=0.0,
        anchor_progress_s=anchor_progress,
        base_progress_s=0.0,
        rate=rate,
    )
    leaves = slow_gang_leaves_at(gang, now, 1.5, DETECTOR)
    assert leaves is not None and leaves >= now
    progress = gang.progress_at(leaves)
    assert progress - gang.checkpoint_at(leaves) == pytest.approx(0.0, abs=1e-6 * max(1.0, progress))


def test_the_engine_charges_an_eviction_what_the_model_says() -> None:
    state = FleetState(fleet("1x1x2x8"), now=0.0)
    state.submit(job("g", 16, duration_s=10_000.0, checkpoint_interval_s=300.0))
    state.apply(Plan((Start("g", (("p0-r0-n0", 8), ("p0-r0-n1", 8)), False, "rack"),), ()), 0.0)
    run = state.running["g"]
    (evicted,) = [event for event in state.fail_node("p0-r0-n0", 1000.0) if isinstance(event, Evicted)]
    gang = _gang(
        gpus=16, size_gpus=16, anchor_s=run.anchor_s, anchor_progress_s=0.0, base_progress_s=0.0, rate=run.rate
    )
    assert evicted.lost_gpu_s == pytest.approx(lost_by_detection_gpu_s(gang, 1000.0, 1000.0)) == 100.0 * 16


def test_a_lost_gpu_is_found_at_the_nodes_first_heartbeat_after_the_loss() -> None:
    policy = DetectorPolicy(heartbeat_interval_s=10.0)
    assert gpu_loss_detected_at(103.0, 0.0, policy) == 110.0
    assert gpu_loss_detected_at(110.0, 0.0, policy) == 110.0  # the heartbeat at the loss carries it
    assert gpu_loss_detected_at(103.0, 107.5, policy) == 107.5
    assert gpu_loss_detected_at(103.0, 125.0, policy) == 105.0  # the phase is any of its heartbeats


@given(since=st.floats(0.0, 5000.0), slowdown=st.sampled_from([1.2, 1.5, 2.5, STALLED]))
@SETTINGS
def test_a_slowed_gang_is_the_run_the_engine_throttles(since: float, slowdown: float) -> None:
    state = FleetState(fleet("1x2x1x8"), level_penalty={"rack": 1.1}, now=0.0)
    state.submit(job("g", 16, duration_s=10_000.0, checkpoint_interval_s=300.0))
    state.apply(Plan((Start("g", (("p0-r0-n0", 8), ("p0-r1-n0", 8)), False, "rack"),), ()), 0.0)
    before = gang_of(state.running["g"])
    state.throttle_node("p0-r0-n0", slowdown, since)

    assert before.slowed(since, slowdown) == gang_of(state.running["g"])


def test_a_slow_nodes_gang_loses_its_slow_stretch_until_it_leaves_or_ends() -> None:
    gang = _gang().slowed(1500.0, 1.5)  # 750 s of work at 1,500 s, then 1 / 3 of a second a second
    assert gang.ends_at() == pytest.approx(1500.0 + (10_000.0 - 750.0) * 3)
    # Found at 1,530 s; its next checkpoint (950 s of work) comes at 1,500 + 200 x 3 = 2,100 s.
    mild = slow_gang_exit(gang, 1500.0, 1530.0, 1.5, DETECTOR)
    assert mild.leaves_s == pytest.approx(2100.0)
    assert mild.lost_gpu_s == pytest.approx(600.0 * 8 / 3)  # a third of its GPU time, no work
    # Severe: it leaves at once, losing its slow stretch and its 110 s of work since 650 s (x16).
    severe = slow_gang_exit(_gang().slowed(1500.0, 2.0), 1500.0, 1530.0, 2.0, DETECTOR)
    assert severe.leaves_s == 1530.0
    assert severe.lost_gpu_s == pytest.approx(30.0 * 8 / 2 + (750.0 + 30.0 / 4 - 650.0) * 16)
    # It finishes before its next checkpoint: it stays, and loses a third of its GPU time to its end.
    short = _gang(duration_s=900.0).slowed(1500.0, 1.5)
    stays = slow_gang_exit(short, 1500.0, 1530.0, 1.5, DETECTOR)
    assert stays.leaves_s is None
    assert stays.lost_gpu_s == pytest.approx((short.ends_at() - 1500.0) * 8 / 3) == pytest.approx(150.0 * 3 * 8 / 3)


def test_a_slowdown_nobody_notices_costs_its_gangs_their_stretch_until_the_repair_or_their_end() -> None:
    gang = _gang().slowed(1500.0, 1.2)
    assert slow_stretch_gpu_s(gang, 1500.0, 1500.0 + 3600.0, 1.2) == pytest.approx(3600.0 * 8 * (1 - 1 / 1.2))
    short = _gang(duration_s=900.0).slowed(1500.0, 1.2)  # 150 s of work left at 0.5 / 1.2
    assert slow_stretch_gpu_s(short, 1500.0, 1500.0 + 3600.0, 1.2) == pytest.approx(360.0 * 8 * (1 - 1 / 1.2))
    assert slow_stretch_gpu_s(gang, 1500.0, 1000.0, 1.2) == 0.0


def test_a_run_without_a_limit_shows_the_time_its_work_completes_the_same_every_cycle() -> None:
    state = FleetState(fleet("1x1x2x8"), level_penalty=(("node", 1.0), ("rack", 1.25)))
    state.submit(job("long", 16, duration_s=10_000.0, time_limit_s=None))
    state.apply(Plan((Start("long", (("p0-r0-n0", 8), ("p0-r0-n1", 8)), False, "rack"),), ()), 0.0)
    shown = [
        {run.job.id: run.release_s for run in state.snapshot(now, (), (), Policy()).running}
        for now in (0.0, 3_000.0, 7_777.7)
    ]
    # Two nodes of one rack: 10,000 s of work at rate 1 (its size) slowed by 1.25.
    assert shown == [{"long": 12_500.0}] * 3
    assert state.advance(20_000.0) == [Completed("long", 12_500.0)]


def test_a_throttled_or_restoring_run_shows_no_anchored_release() -> None:
    state = FleetState(fleet("1x1x2x8"), restart_overhead_s=60.0)
    state.submit(job("long", 8, duration_s=10_000.0, time_limit_s=None, attained_gpu_s=1.0))
    state.apply(Plan((Start("long", (("p0-r0-n0", 8),), False, "node"),), ()), 0.0)
    restoring = state.snapshot(30.0, (), (), Policy()).running[0]
    assert restoring.release_s is None  # its anchor (the end of the restart) is still ahead
    assert state.snapshot(60.0, (), (), Policy()).running[0].release_s == 10_060.0
    state.throttle_node("p0-r0-n0", 2.0, 1_060.0)
    assert state.snapshot(2_000.0, (), (), Policy()).running[0].release_s is None

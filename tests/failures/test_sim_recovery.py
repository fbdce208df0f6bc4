"""Recovery in the simulator: detection, restart from the checkpoint, the burst, and the accounting."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduling.engine import Event, Policy
from scheduling.engine.detector import DetectorPolicy
from scheduling.engine.failures import CRASH, SLOW, Failure, FailureRates
from scheduling.sim.failures import FailureHook
from scheduling.sim.hooks import SimContext
from scheduling.sim.simulator import run_simulation
from tests.engine.builders import fleet, job

STATE = {"storage_gbps": 50.0, "nic_gbps": 12.5, "restart_overhead_s": 60.0}
DETECTOR = DetectorPolicy(heartbeat_interval_s=10.0, dead_after_missed=3, slow_consecutive_steps=5)


def _gang() -> Any:
    return job("gang", 16, duration_s=1000.0, checkpoint_interval_s=100.0, checkpoint_gb=100.0)


def _run(jobs: list, script: list[Failure], nodes: Any = None) -> tuple[Any, FailureHook]:
    nodes = nodes or fleet("1x1x3x8")
    hook = FailureHook(nodes, random.Random(0), detector=DETECTOR, script=script)
    result = run_simulation(jobs, nodes, Policy(), hooks=[hook], state_options=STATE)
    return result, hook


def test_a_crashed_nodes_gang_restarts_elsewhere_from_its_checkpoint_and_the_rollback_counts_as_lost() -> None:
    result, hook = _run([_gang()], [Failure(250.0, "p0-r0-n0", CRASH)])
    (incident,) = hook.incidents
    detected = incident.detected_s

    # Dead k = 3 intervals after the last heartbeat, which came at most one interval before the crash.
    assert detected is not None and 250.0 + 20.0 <= detected <= 250.0 + 30.0
    # Back on n1 + n2 from the checkpoint at 200 s: restore = 60 s + max(100 / 50, 100 / (2 x 12.5)) = 64 s,
    # then the remaining 800 s of work (not 1,000: it did not restart from zero).
    assert result.jct_by_job["gang"] == pytest.approx(detected + 64.0 + 800.0)
    # Lost: 50 s rolled back, the stall until detection and the restore, all on 16 GPUs.
    expected_lost_gpu_s = (50.0 + (detected - 250.0) + 64.0) * 16
    assert result.metrics["failure_lost_gpu_hours"] == pytest.approx(expected_lost_gpu_s / 3600.0)
    assert result.metrics["failures"] == 1
    assert result.metrics["mttd_mean_s"] == pytest.approx(detected - 250.0)
    assert result.metrics["mttr_mean_s"] == pytest.approx(detected + 64.0 - 250.0)


def test_a_mildly_slow_nodes_gang_runs_slower_until_its_next_checkpoint_then_migrates() -> None:
    # Slowdown 1.5 from t = 250 s: detected after 5 steps of 15 s; the gang is at 250 + 75 / 1.5 = 300 s of
    # work then, so its next checkpoint (400 s of work) comes 100 x 1.5 = 150 s later, at 475 s.
    result, hook = _run([_gang()], [Failure(250.0, "p0-r0-n0", SLOW, slowdown=1.5)])
    (incident,) = hook.incidents

    assert incident.detected_s == pytest.approx(325.0)
    assert incident.resumed_s["gang"] == pytest.approx(475.0 + 64.0)
    assert result.jct_by_job["gang"] == pytest.approx(475.0 + 64.0 + 600.0)


def test_a_severely_slow_nodes_gang_migrates_at_once() -> None:
    result, hook = _run([_gang()], [Failure(250.0, "p0-r0-n0", SLOW, slowdown=2.5)])
    (incident,) = hook.incidents

    # Detected after 5 steps of 25 s, at 375 s; the gang did 250 + 125 / 2.5 = 300 s of work and
    # goes back to its checkpoint at 300 s: nothing rolled back, but it restarts now.
    assert incident.detected_s == pytest.approx(375.0)
    assert incident.resumed_s["gang"] == pytest.approx(375.0 + 64.0)


class _NoDoubleBooking:
    """Checks, every simulated minute, that no node holds more GPUs than it has and that no gang
    sits on a node the detector has declared dead."""

    def __init__(self, failures: FailureHook) -> None:
        self.failures, self.at, self.checks = failures, 0.0, 0

    def next_time(self) -> float | None:
        return self.at if self.at < 200_000.0 else None

    def on_time(self, sim: SimContext, now: float) -> list[Event]:
        state = sim.state
        for node_id, used in state.node_used.items():
            assert used <= state.nodes[node_id].gpus
        dead = {
            i.failure.node_id
            for i in self.failures.incidents
            if i.failure.kind == CRASH and i.detected_s is not None and i.failure.node_id in self.failures.down
        }
        for run in state.running.values():
            assert not dead & {node_id for node_id, _ in run.allocation}
        self.at, self.checks = now + 60.0, self.checks + 1
        return []

    def metrics(self) -> dict[str, Any]:
        return {}


def test_a_replaced_node_is_never_double_allocated() -> None:
    nodes = fleet("1x2x4x8")
    jobs = [
        job(f"j{i}", (8, 16, 4)[i % 3], duration_s=3000.0 + 97 * i, submit_s=60.0 * i, checkpoint_interval_s=300.0)
        for i in range(60)
    ]
    failures = FailureHook(nodes, random.Random(3), rates=FailureRates().scaled(20_000), until_s=3600.0)
    checker = _NoDoubleBooking(failures)

    result = run_simulation(jobs, nodes, Policy(), hooks=[failures, checker], state_options=STATE)

    assert result.metrics["failures"] >= 5 and checker.checks > 50
    assert result.metrics["unfinished"] == 0

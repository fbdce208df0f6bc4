"""One crash, two paths: the simulator's failure hook and the live failures step (real database)
open the same incident and count the same lost GPU-hours, for a gang spread over two racks (slowed
by the pod-level topology penalty) and an elastic gang shrunk to a quarter of its size."""

from __future__ import annotations

import os
import random

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from scheduling.cycle.failures import detector_policy, node_kill  # noqa: E402
from scheduling.cycle.snapshot import snapshot_build  # noqa: E402
from scheduling.engine.failures import CRASH, Failure  # noqa: E402
from scheduling.engine.progress import checkpoint_at  # noqa: E402
from scheduling.models import Allocation, FleetClock, Incident, Job, Node  # noqa: E402
from scheduling.sim.failures import FailureHook  # noqa: E402
from scheduling.sim.hooks import SimContext  # noqa: E402
from tenants.models import FleetPolicy  # noqa: E402
from tests.scheduling.conftest import Fleet, build_fleet  # noqa: E402

RAN_S = 1000.0
INTERVAL_S = 300.0
POD_PENALTY = 1.15  # FleetPolicy's default for a gang spread over racks of one pod


class _HeartbeatAtTheCrash(random.Random):
    """The live fleet heartbeats on its ticks, and the scenario's crash comes right at one: the
    hook's draw of the heartbeat phase before the crash is 0, as the live node's last heartbeat is."""

    def uniform(self, a: float, b: float) -> float:
        return a


def _running(fleet: Fleet, name: str, gpus: int, on: list[tuple[Node, int]], level: str, **extra: object) -> Job:
    """A job already running on `on` for `RAN_S` fleet seconds, written as the cycle writes one."""
    job = fleet.submit(gpus=gpus, duration_s=36000.0, name=name, checkpoint_interval_s=INTERVAL_S, **extra)
    started_s = FleetClock.objects.get().sim_now_s - RAN_S
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, started_s=started_s, anchor_s=started_s, placement_level=level
    )
    for node, held in on:
        Allocation.objects.create(job=job, node=node, gpus=held)
        Node.objects.filter(pk=node.pk).update(allocated_gpus=node.allocated_gpus + held)
        node.refresh_from_db()
    job.refresh_from_db()
    return job


@pytest.fixture
def fleet(db: None) -> Fleet:
    fleet = build_fleet()  # r1-n1, r1-n2 | r2-n1, r2-n2, 8 GPUs each
    n11, n12, n21, n22 = fleet.nodes
    fleet.spread = _running(fleet, "spread", 8, [(n11, 4), (n21, 4)], "pod")  # type: ignore[attr-defined]
    fleet.shrunk = _running(fleet, "shrunk", 16, [(n11, 4)], "node", min_gpus=4)  # type: ignore[attr-defined]
    # The rest of the fleet is busy, so the shrunk gang cannot grow back while the crash goes unseen.
    _running(fleet, "filler-a", 8, [(n12, 8)], "node")
    _running(fleet, "filler-b", 4, [(n21, 4)], "node")
    _running(fleet, "filler-c", 8, [(n22, 8)], "node")
    return fleet


def test_a_crash_gives_the_same_incident_and_lost_gpu_hours_in_the_simulator_and_the_live_fleet(fleet: Fleet) -> None:
    crashed = fleet.nodes[0]
    crash_s = FleetClock.objects.get().sim_now_s
    detector = detector_policy(FleetPolicy.objects.get())

    # The simulator: its failure hook on the FleetState the live cycle would build now.
    state = snapshot_build(sim_now_s=crash_s).state
    rng = _HeartbeatAtTheCrash()
    hook = FailureHook(
        list(state.nodes.values()), rng, detector=detector, script=[Failure(crash_s, str(crashed.pk), CRASH)]
    )
    sim = SimContext(state, rng, submit=lambda job: None)
    hook.on_time(sim, crash_s)
    detected_s = hook.next_time()
    assert detected_s == pytest.approx(crash_s + detector.dead_after_s)
    hook.on_time(sim, detected_s)
    (simulated,) = hook.incidents

    # The live fleet: the node stops heartbeating; 5 fleet seconds a tick, detected at the 6th.
    node_kill(node=crashed, sim_now_s=crash_s)
    for _ in range(6):
        fleet.tick(speed=5.0)
    live = Incident.objects.get()

    assert (live.node_id, live.kind, live.failed_at) == (crashed.pk, Incident.Kind.DEAD, simulated.failure.time_s)
    assert live.detected_at == pytest.approx(simulated.detected_s)
    assert sorted(str(job.pk) for job in live.jobs.all()) == sorted(simulated.jobs)
    assert live.lost_gpu_s == pytest.approx(simulated.lost_gpu_s)

    # Both count what the engine runs: the spread gang at 1 / 1.15 of its pace, the shrunk one at a
    # quarter of it and idle on its 4 GPUs only (not at full pace on 8 and 16 GPUs, as before).
    stall_s = detected_s - crash_s
    spread_done, shrunk_done = RAN_S / POD_PENALTY, RAN_S / 4
    expected = (
        stall_s * 8  # the whole gang waits on its dead member
        + (spread_done - checkpoint_at(0.0, spread_done, INTERVAL_S)) * 8
        + stall_s * 4
        + (shrunk_done - checkpoint_at(0.0, shrunk_done, INTERVAL_S)) * 16
    )
    assert live.lost_gpu_s == pytest.approx(expected)
    assert expected == pytest.approx(30 * 8 + (869.565 - 600) * 8 + 30 * 4 + 250 * 16, abs=0.01)

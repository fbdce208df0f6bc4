"""One failure, two paths: the simulator's failure hook and the live failures step (real database)
open the same incident and count the same lost GPU-hours.

- A crash, for a gang spread over two racks (slowed by the pod-level topology penalty) and an
  elastic gang shrunk to a quarter of its size.
- A node that turns slow under two gangs: mildly (they leave at their next checkpoints), severely
  (they leave at once), or within the noise (nobody notices; the slowdown ends at the node's
  repair, which closes the incident). The simulator's side runs the engine's cycle at the live
  ticks' times, so the gangs restart at the same moments and their restores count the same.
- A lost GPU, found at the node's first heartbeat after the loss on both sides."""

from __future__ import annotations

import os
import random

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from scheduling import engine  # noqa: E402
from scheduling.convert import policy_from_row  # noqa: E402
from scheduling.cycle.failures import detector_policy, failure_apply, node_kill  # noqa: E402
from scheduling.cycle.snapshot import Loaded, snapshot_build  # noqa: E402
from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, Failure, FailureRates  # noqa: E402
from scheduling.engine.progress import checkpoint_at  # noqa: E402
from scheduling.models import Allocation, FleetClock, Incident, Job, Node  # noqa: E402
from scheduling.sim.failures import FailureHook  # noqa: E402
from scheduling.sim.failures import Incident as SimIncident  # noqa: E402
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


class _HeartbeatAfter(random.Random):
    """The hook's draw of a node's heartbeat phase, pinned `after_s` past the failure (a lost GPU
    is found at the node's next heartbeat; the live node's is the next tick's)."""

    def __init__(self, after_s: float) -> None:
        super().__init__(0)
        self.after_s = after_s

    def uniform(self, a: float, b: float) -> float:
        return self.after_s


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


# Slow nodes, and lost GPUs: the gangs on the failed node, and room to restart them elsewhere.
TICK_S = 15.0  # fleet seconds a live tick


@pytest.fixture
def roomy(db: None) -> Fleet:
    fleet = build_fleet(nodes_per_rack=3)  # r1-n1, r1-n2, r1-n3 | r2-n1, r2-n2, r2-n3, 8 GPUs each
    n11, _, _, n21, n22, n23 = fleet.nodes
    # Their checkpoints take a while to read back (shared storage at 50 GB/s, 12.5 GB/s a NIC).
    fleet.spread = _running(fleet, "spread", 8, [(n11, 4), (n21, 4)], "pod", checkpoint_gb=400.0)  # type: ignore[attr-defined]
    fleet.small = _running(fleet, "small", 4, [(n11, 4)], "node", checkpoint_gb=250.0)  # type: ignore[attr-defined]
    _running(fleet, "filler-a", 4, [(n21, 4)], "node")
    _running(fleet, "filler-b", 8, [(n22, 8)], "node")
    _running(fleet, "filler-c", 8, [(n23, 8)], "node")
    return fleet  # r1-n2 and r1-n3 are free


def _both(
    fleet: Fleet, failure: Failure, rng: random.Random, tick_s: float = TICK_S
) -> tuple[Incident, SimIncident, engine.FleetState]:
    """`failure` (at the fleet clock's now) through live ticks of `tick_s` until its incident closes,
    and through the simulator's failure hook on the same FleetState with the engine's cycle at the
    same times. Returns the live incident, the simulated one and the simulated fleet."""
    row = FleetPolicy.objects.get()
    detector = detector_policy(row)
    loaded = snapshot_build(sim_now_s=failure.time_s)
    hook = FailureHook(list(loaded.state.nodes.values()), rng, detector=detector, script=[failure])

    node = Node.objects.get(pk=int(failure.node_id))
    failure_apply(node=node, failure=failure, rates=FailureRates(), penalties=policy_from_row(row), policy=detector)
    times = []
    for _ in range(200):
        result = fleet.tick(speed=tick_s)
        assert result is not None
        times.append(result.sim_to_s)
        if Incident.objects.get().resumed_at is not None:
            break
    _simulate(loaded, hook, times + [times[-1] + tick_s * (k + 1) for k in range(8)])
    (simulated,) = hook.incidents
    return Incident.objects.get(), simulated, loaded.state


def _same_progress(state: engine.FleetState, job_ids: list[str]) -> None:
    """The live rows progressed as the simulated runs did: slowed or stalled on the failed node,
    then restarted from the same checkpoint."""
    for job_id in job_ids:
        job, run = Job.objects.get(pk=int(job_id)), state.running[job_id]
        assert job.base_progress_s == pytest.approx(run.base_progress)
        assert job.anchor_s == pytest.approx(run.anchor_s)


def _simulate(loaded: Loaded, hook: FailureHook, times: list[float]) -> None:
    """The hook's events at their times, and the engine's cycle at each of `times`, as a live tick."""
    state = loaded.state
    sim = SimContext(state, random.Random(0), submit=lambda job: None)
    for tick_s in times:
        while (when := hook.next_time()) is not None and when <= tick_s:
            state.advance(when)
            hook.on_time(sim, when)
        state.advance(tick_s)
        snapshot = state.snapshot(tick_s, loaded.teams, loaded.quotas, loaded.policy)
        state.apply(engine.schedule(snapshot, tick_s, kept=state.kept()), tick_s)


def _same(live: Incident, simulated: SimIncident) -> None:
    assert (str(live.node_id), live.failed_at) == (simulated.failure.node_id, simulated.failure.time_s)
    assert sorted(str(job.pk) for job in live.jobs.all()) == sorted(simulated.jobs)
    if simulated.detected_s is None:
        assert live.detected_at is None
    else:
        assert live.detected_at == pytest.approx(simulated.detected_s)
    assert live.lost_gpu_s == pytest.approx(simulated.lost_gpu_s)


@pytest.mark.parametrize("slowdown", [1.5, 2.5])
def test_a_slow_node_gives_the_same_incident_and_lost_gpu_hours_in_the_simulator_and_the_live_fleet(
    roomy: Fleet, slowdown: float
) -> None:
    slow_s = FleetClock.objects.get().sim_now_s
    failure = Failure(slow_s, str(roomy.nodes[0].pk), SLOW, slowdown=slowdown)

    live, simulated, state = _both(roomy, failure, random.Random(0))

    _same(live, simulated)
    assert live.kind == Incident.Kind.SLOW and live.detected_at == pytest.approx(slow_s + 5 * 10.0 * slowdown)
    assert live.resumed_at == pytest.approx(max(simulated.resumed_s.values()))
    assert Node.objects.get(pk=roomy.nodes[0].pk).state == Node.State.CORDONED
    for job in (roomy.spread, roomy.small):  # type: ignore[attr-defined]
        job.refresh_from_db()
        assert job.state == Job.State.RUNNING and job.started_s >= live.detected_at
        assert not Allocation.objects.filter(job=job, node=roomy.nodes[0]).exists()
    _same_progress(state, sorted(simulated.jobs))


def test_a_mildly_slow_nodes_gangs_lose_their_slow_stretch_and_their_restore_and_no_work(roomy: Fleet) -> None:
    slow_s = FleetClock.objects.get().sim_now_s
    failure = Failure(slow_s, str(roomy.nodes[0].pk), SLOW, slowdown=1.5)

    live, simulated, state = _both(roomy, failure, random.Random(0))

    # spread: 869.6 s of work at the failure (1,000 s at 1 / 1.15), then 1 / (1.15 x 1.5) of a
    # second a second; checkpoint at 900 s of work, found at +75 s, next one at 1,200 s of work.
    # small: 1,000 s of work, 1 / 1.5 a second; found at +75 s (1,050 s), next checkpoint 1,200 s.
    spread_leaves = slow_s + (1200.0 - RAN_S / POD_PENALTY) * POD_PENALTY * 1.5
    small_leaves = slow_s + (1200.0 - RAN_S) * 1.5
    lost_to_slowness = ((spread_leaves - slow_s) * 8 + (small_leaves - slow_s) * 4) * (1.0 - 1.0 / 1.5)
    restores = sum((simulated.resumed_s[j] - simulated.restarted_s[j]) * g for j, g in simulated.jobs.items())
    assert restores > 0
    assert live.lost_gpu_s == pytest.approx(lost_to_slowness + restores)
    # Both waited for their next checkpoint at the slow pace: they restarted from it, losing no work.
    restarted_from = [Job.objects.get(pk=int(job_id)).base_progress_s for job_id in sorted(simulated.jobs)]
    assert restarted_from == pytest.approx([1200.0, 1200.0])


def test_a_slowdown_within_the_noise_closes_at_the_repair_with_its_duration_and_lost_gpu_hours(roomy: Fleet) -> None:
    slow_s = FleetClock.objects.get().sim_now_s
    failure = Failure(slow_s, str(roomy.nodes[0].pk), SLOW, slowdown=1.2)  # threshold 1.3
    repair_s = FailureRates().slow_repair_s

    live, simulated, state = _both(roomy, failure, random.Random(0), tick_s=600.0)

    _same(live, simulated)
    assert live.detected_at is None and simulated.closed_s == pytest.approx(slow_s + repair_s)
    assert live.resumed_at == pytest.approx(slow_s + repair_s) and not live.open
    assert Node.objects.get(pk=roomy.nodes[0].pk).state == Node.State.UP
    # The small gang (1,000 s of work done, 35,000 left at 1 / 1.2 of a second a second) and the
    # spread one outlast the repair: each lost a sixth of its GPU time on the node until then.
    assert live.lost_gpu_s == pytest.approx(repair_s * (8 + 4) * (1.0 - 1.0 / 1.2))


def test_a_slowdown_of_a_node_running_nothing_goes_unnoticed_on_both_sides(roomy: Fleet) -> None:
    slow_s = FleetClock.objects.get().sim_now_s
    idle = roomy.nodes[1]
    failure = Failure(slow_s, str(idle.pk), SLOW, slowdown=2.5)

    live, simulated, state = _both(roomy, failure, random.Random(0), tick_s=600.0)

    _same(live, simulated)
    assert live.detected_at is None and live.lost_gpu_s == 0.0
    assert Node.objects.get(pk=idle.pk).state == Node.State.UP


def test_a_lost_gpu_is_found_at_the_next_heartbeat_on_both_sides(roomy: Fleet) -> None:
    lost_s = FleetClock.objects.get().sim_now_s
    failure = Failure(lost_s, str(roomy.nodes[0].pk), GPU_LOSS, gpus_lost=1)

    # The live node heartbeats every tick, the simulated one every interval: alike with ticks of 5 s.
    live, simulated, state = _both(roomy, failure, _HeartbeatAfter(5.0), tick_s=5.0)

    _same(live, simulated)
    assert live.detected_at == pytest.approx(lost_s + 5.0)  # the first tick's heartbeat
    assert live.resumed_at == pytest.approx(max(simulated.resumed_s.values()))
    assert Node.objects.get(pk=roomy.nodes[0].pk).healthy_gpus == 7
    _same_progress(state, sorted(simulated.jobs))


@pytest.mark.parametrize(
    ("kind", "slowdown", "pace"),
    [(SLOW, 1.5, 1 / 1.5), (GPU_LOSS, 1.0, 0.0), (CRASH, 1.0, 0.0)],
)
def test_the_live_rows_progress_at_the_failed_nodes_pace_as_the_simulated_runs_do(
    roomy: Fleet, kind: str, slowdown: float, pace: float
) -> None:
    failed_s = FleetClock.objects.get().sim_now_s
    small = roomy.small  # type: ignore[attr-defined]  # 1,000 s of work done, a second a second
    row = FleetPolicy.objects.get()
    failure = Failure(failed_s, str(roomy.nodes[0].pk), kind, gpus_lost=1, slowdown=slowdown)
    failure_apply(
        node=roomy.nodes[0],
        failure=failure,
        rates=FailureRates(),
        penalties=policy_from_row(row),
        policy=detector_policy(row),
    )
    if kind == GPU_LOSS:
        # Found at the heartbeat 250 s later: stalled since the loss, the gang goes back to its
        # checkpoint as of the loss (900 s of work), not to the one it would have passed since.
        roomy.tick(speed=250.0)
        roomy.tick(speed=5.0)
        small.refresh_from_db()
        assert small.state == Job.State.RUNNING and small.base_progress_s == pytest.approx(900.0)
        return
    # Three ticks of 5 s: before the slowdown is flagged and the crash detected.
    for _ in range(3):
        roomy.tick(speed=5.0)

    small.refresh_from_db()
    now_s = FleetClock.objects.get().sim_now_s
    assert small.state == Job.State.RUNNING and small.anchor_s == pytest.approx(now_s)
    assert small.anchor_progress_s == pytest.approx(RAN_S + (now_s - failed_s) * pace)

"""`FailureHook`: the seeded failure model acting on the simulated fleet, with detection and recovery.

Per failure, in simulated time:
- crash / GPU loss at ``t_f``: the node's jobs stall (a gang waits on its dead member). The node is
  declared dead k heartbeat intervals after its last heartbeat (crash), or found at its next
  heartbeat, which carries the GPU error (GPU loss: `detector.gpu_loss_detected_at`). Then
  `fail_node` / `set_node_health` evict the gangs back to their checkpoints, the scheduler cordons
  the node and restarts the gangs on healthy capacity, paying the restore burst.
- slow at ``t_f``: the node's jobs run ``slowdown`` x slower; after m slow steps the detector flags
  it, the node is cordoned and its gangs migrate at their next checkpoint (at once, back to the last
  checkpoint, when the slowdown is severe) or finish first. A slowdown under the threshold, or on a
  node running nothing, goes unnoticed until the node's repair, which closes its incident.
- every failed node comes back after the kind's repair time.

What a failure means for the gangs, what they lose and when they leave are `engine.recovery`'s,
as in the live failures step (`scheduling.cycle.failures`), and counted at the same moments: a
stall and a rollback at the detection, a slowdown when its outcome is decided (at the failure when
nobody will notice it, else at the detection), a restore when the gang computes again.

Metrics (contract keys): ``failures`` (failures injected), ``mttd_mean_s`` (failure to detection),
``mttr_mean_s`` (failure until each affected gang computes again, restore included), and
``failure_lost_gpu_hours``: rolled-back work + GPU time stalled before detection + GPU time lost to
a slowdown + restore time of the restarts.

Simplifications: a slowdown only affects the jobs on the node when it starts; failures are drawn
until ``until_s``.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scheduling.engine import Cordon, Event, Evicted, FleetState, Node, Plan, Requeue
from scheduling.engine.detector import DetectorPolicy, dead_detected_at, gpu_loss_detected_at
from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, Failure, FailureRates, next_failure
from scheduling.engine.progress import DEFAULT_RESTART_OVERHEAD_S
from scheduling.engine.recovery import (
    Gang,
    lost_by_detection_gpu_s,
    node_slowdown,
    restore_gpu_s,
    slow_detected_at,
    slow_gang_exit,
    slow_stretch_gpu_s,
)
from scheduling.engine.runs import RunRecord

from .hooks import SimContext

POLL_S = 30.0
MAX_RESTART_WAIT_S = 7 * 86400.0
_FAIL, _DETECT, _MIGRATE, _REPAIR, _POLL = "fail", "detect", "migrate", "repair", "poll"


@dataclass
class Incident:
    failure: Failure
    detected_s: float | None = None
    jobs: dict[str, int] = field(default_factory=dict)  # job id -> GPUs
    restarted_s: dict[str, float] = field(default_factory=dict)  # the restart's start, restore begins
    resumed_s: dict[str, float] = field(default_factory=dict)  # computing again
    restored_gb: dict[str, float] = field(default_factory=dict)  # checkpoint bytes the restart read
    evicted: set[str] = field(default_factory=set)
    lost_gpu_s: float = 0.0
    closed_s: float | None = None  # an unnoticed slowdown: when the node's repair ended it


class FailureHook:
    """Implements `scheduling.sim.hooks.Hook`."""

    def __init__(
        self,
        nodes: Sequence[Node],
        rng: random.Random,
        *,
        rates: FailureRates | None = None,
        detector: DetectorPolicy | None = None,
        step_s: float = 10.0,
        start_s: float = 0.0,
        until_s: float = math.inf,
        script: Sequence[Failure] | None = None,
    ) -> None:
        """``script`` replaces the random draws with the given failures (tests, replays)."""
        self.rng, self.rates = rng, rates or FailureRates()
        self.detector = detector or DetectorPolicy()
        self.step_s, self.until_s = step_s, until_s
        self.gpus = {node.id: node.gpus for node in nodes}
        self.down: set[str] = set()
        self.incidents: list[Incident] = []
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        self._next_fail: float | None = None
        self._scripted = script is not None
        for failure in script or ():
            self._push(failure.time_s, _FAIL, failure)
        if not self._scripted:
            self._draw(start_s)

    # Hook protocol ---------------------------------------------------------------------------------
    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def on_time(self, sim: SimContext, now: float) -> list[Event]:
        events: list[Event] = []
        while self._heap and self._heap[0][0] <= now:
            when, _, kind, item = heapq.heappop(self._heap)
            if kind == _FAIL:
                if self._scripted or when == self._next_fail:
                    events += self._fail(sim.state, item, now)
            elif kind == _DETECT:
                events += self._detect(sim.state, item, now)
            elif kind == _MIGRATE:
                incident, job_id, start_s = item
                run = sim.state.running.get(job_id)
                if run is not None and run.start_s == start_s:
                    events += self._requeue(sim.state, incident, job_id, now)
            elif kind == _REPAIR:
                events += self._repair(sim.state, item, now)
            elif kind == _POLL:
                self._poll(sim.state, item, now)
        return events

    def metrics(self) -> dict[str, Any]:
        detected = [i.detected_s - i.failure.time_s for i in self.incidents if i.detected_s is not None]
        repaired = [t - i.failure.time_s for i in self.incidents for t in i.resumed_s.values()]
        return {
            "failures": len(self.incidents),
            "mttd_mean_s": sum(detected) / len(detected) if detected else None,
            "mttr_mean_s": sum(repaired) / len(repaired) if repaired else None,
            "failure_lost_gpu_hours": sum(i.lost_gpu_s for i in self.incidents) / 3600.0,
        }

    # Steps -----------------------------------------------------------------------------------------
    def _push(self, time_s: float, kind: str, item: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_s, self._seq, kind, item))

    def _draw(self, after_s: float) -> None:
        """Draw the next failure among the nodes in service (memoryless, so redrawing is exact)."""
        up = [node_id for node_id in sorted(self.gpus) if node_id not in self.down]
        failure = next_failure(self.rng, self.rates, up, after_s)
        self._next_fail = failure.time_s if failure is not None and failure.time_s <= self.until_s else None
        if self._next_fail is not None:
            self._push(self._next_fail, _FAIL, failure)

    def _fail(self, state: FleetState, failure: Failure, now: float) -> list[Event]:
        incident = Incident(failure)
        self.incidents.append(incident)
        self.down.add(failure.node_id)
        runs = [run for run in state.running.values() if any(n == failure.node_id for n, _ in run.allocation)]
        incident.jobs = {run.job.id: run.gpus for run in sorted(runs, key=lambda r: r.job.id)}
        events = state.throttle_node(failure.node_id, node_slowdown(failure), now)
        repaired_s = now + self.rates.repair_s(failure.kind)
        interval = self.detector.heartbeat_interval_s
        if failure.kind == CRASH:
            phase = self.rng.uniform(0.0, interval)
            self._push(dead_detected_at(now, now - phase, self.detector), _DETECT, incident)
        elif failure.kind == GPU_LOSS:
            phase = now + self.rng.uniform(0.0, interval)
            self._push(gpu_loss_detected_at(now, phase, self.detector), _DETECT, incident)
        else:
            detected_s = slow_detected_at(now, failure.slowdown, self.step_s, self.detector, gangs=len(runs))
            if detected_s is not None:
                self._push(detected_s, _DETECT, incident)
            else:  # unnoticed until the repair: the slow stretch of every gang is known now
                gangs = [gang_of(run) for run in runs]
                incident.lost_gpu_s += sum(slow_stretch_gpu_s(g, now, repaired_s, failure.slowdown) for g in gangs)
        self._push(repaired_s, _REPAIR, incident)
        if not self._scripted:
            self._draw(now)
        return events

    def _detect(self, state: FleetState, incident: Incident, now: float) -> list[Event]:
        failure = incident.failure
        incident.detected_s = now
        if failure.kind == SLOW:
            return self._slow_detected(state, incident, now)
        stalled = [job_id for job_id in incident.jobs if _same_run(state, job_id, failure.time_s)]
        for job_id in stalled:
            incident.lost_gpu_s += lost_by_detection_gpu_s(gang_of(state.running[job_id]), failure.time_s, now)
        if failure.kind == CRASH:
            events = state.fail_node(failure.node_id, now)
        elif failure.kind == GPU_LOSS:
            healthy = max(0, state.nodes[failure.node_id].healthy_gpus - failure.gpus_lost)
            # The GPU's jobs died with it: evict them all (which member lost the GPU is not known).
            events = state.set_node_health(failure.node_id, healthy, now)
            for job_id in stalled:
                if job_id in state.running:
                    events.append(state.apply(Plan((Requeue(job_id, "node-degraded"),), ()), now)[0])
        self._account(incident, events)
        self._push(now + POLL_S, _POLL, incident)
        return events

    def _slow_detected(self, state: FleetState, incident: Incident, now: float) -> list[Event]:
        failure = incident.failure
        events = state.apply(Plan((Cordon(failure.node_id, "slow"),), ()), now)
        for job_id in incident.jobs:
            if not _same_run(state, job_id, failure.time_s):
                continue
            run = state.running[job_id]
            leaving = slow_gang_exit(gang_of(run), failure.time_s, now, failure.slowdown, self.detector)
            incident.lost_gpu_s += leaving.lost_gpu_s
            if leaving.leaves_s is None:
                continue  # it finishes first
            if leaving.leaves_s <= now:
                events += self._requeue(state, incident, job_id, now)
            else:
                self._push(leaving.leaves_s, _MIGRATE, (incident, job_id, run.start_s))
        return events

    def _requeue(self, state: FleetState, incident: Incident, job_id: str, now: float) -> list[Event]:
        events = state.apply(Plan((Requeue(job_id, "node-degraded"),), ()), now)
        self._account(incident, events)
        self._push(now + POLL_S, _POLL, incident)
        return events

    def _account(self, incident: Incident, events: list[Event]) -> None:
        """The gangs the failure evicted (what they lose is counted by `engine.recovery`)."""
        for event in events:
            if isinstance(event, Evicted) and event.job_id in incident.jobs:
                incident.evicted.add(event.job_id)

    def _poll(self, state: FleetState, incident: Incident, now: float) -> None:
        """Find when each evicted gang computes again (its restart's start + restore)."""
        waiting = False
        for job_id in sorted(incident.evicted - set(incident.resumed_s)):
            run = state.running.get(job_id)
            if run is not None and run.start_s >= (incident.detected_s or 0.0):
                incident.restarted_s[job_id], incident.resumed_s[job_id] = run.start_s, run.anchor_s
                incident.restored_gb[job_id] = run.job.checkpoint_gb if run.base_progress > 0 else 0.0
                incident.lost_gpu_s += restore_gpu_s(run.start_s, run.anchor_s, run.gpus)
            elif job_id in state.pending:
                waiting = True
        if waiting and now - incident.failure.time_s < MAX_RESTART_WAIT_S:
            self._push(now + POLL_S, _POLL, incident)

    def _repair(self, state: FleetState, incident: Incident, now: float) -> list[Event]:
        node_id = incident.failure.node_id
        if incident.detected_s is None:  # a slowdown nobody noticed ends here
            incident.closed_s = now
        events = state.throttle_node(node_id, 1.0, now)
        # Uncordon through the public node table; set_node_health then refreshes the node cache.
        state.nodes[node_id] = replace(state.nodes[node_id], cordoned=False)
        events += state.set_node_health(node_id, self.gpus[node_id], now)
        self.down.discard(node_id)
        if not self._scripted and (self._next_fail is None or self._next_fail > now):
            self._draw(now)
        return events


def _same_run(state: FleetState, job_id: str, failed_s: float) -> bool:
    """Whether the job still runs the run the failure caught (not a restart since)."""
    run = state.running.get(job_id)
    return run is not None and run.start_s <= failed_s


def gang_of(run: RunRecord) -> Gang:
    """The `recovery.Gang` of a run in the simulated fleet (its rate slowed with its node)."""
    return Gang(
        run.job.id,
        run.gpus,
        run.job.gpus,
        run.job.duration_s,
        run.job.checkpoint_interval_s,
        run.anchor_s,
        run.anchor_progress,
        run.base_progress,
        run.rate,
    )


@dataclass(frozen=True)
class FailureOptions:
    """How a simulation fails: the model's seed and rate scale, the detector, and the storage."""

    seed: int = 0
    rate_scale: float = 1.0
    detector: DetectorPolicy = field(default_factory=DetectorPolicy)
    storage_gbps: float = 50.0
    nic_gbps: float = 12.5
    restart_overhead_s: float = DEFAULT_RESTART_OVERHEAD_S

    @classmethod
    def parse(cls, text: str) -> FailureOptions:
        """``SEED`` or ``SEED:SCALE`` (e.g. ``7:100`` = seed 7, every rate x100)."""
        seed, _, scale = text.partition(":")
        try:
            return cls(seed=int(seed), rate_scale=float(scale) if scale else 1.0)
        except ValueError as error:
            raise ValueError(f"--failures expects SEED or SEED:SCALE, got {text!r}") from error

    def state_options(self) -> dict[str, float]:
        return {
            "storage_gbps": self.storage_gbps,
            "nic_gbps": self.nic_gbps,
            "restart_overhead_s": self.restart_overhead_s,
        }

    def hook(self, nodes: Sequence[Node], *, start_s: float, until_s: float) -> FailureHook:
        """A fresh hook: every policy compared sees the same failure draws."""
        return FailureHook(
            nodes,
            random.Random(self.seed),
            rates=FailureRates().scaled(self.rate_scale),
            detector=self.detector,
            start_s=start_s,
            until_s=until_s,
        )

"""What the simulator observes: allocations, demand and progress over time, integrated in the window.

The recorder mirrors each run's progress (rate = allocated share / topology penalty, starting
after the restore time) so useful work can be clipped to the window exactly, as the engine's
counters cannot. Between two changes everything is constant, so each interval is integrated once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduling.engine import (
    Completed,
    Event,
    Evicted,
    Grow,
    Job,
    Node,
    Plan,
    Preempt,
    Resized,
    Shrink,
    Started,
    TimedOut,
    Withdrawn,
)
from scheduling.engine.model import LEVEL_RANK
from scheduling.engine.progress import progress_at, progress_rate

from .formulas import ViolationMeter, fitting_demand, water_fill_with_bounds
from .gate import CycleGate

Key = tuple[str, str]  # (team, accelerator)
FAILURE_REASONS = frozenset({"node-failed", "node-degraded"})


class _Run:
    __slots__ = ("job", "start_s", "segments", "gpus")

    def __init__(self, job: Job, start_s: float, anchor_s: float, base: float, rate: float, gpus: int) -> None:
        self.job, self.start_s, self.gpus = job, start_s, gpus
        self.segments: list[tuple[float, float, float]] = [(anchor_s, base, rate)]

    def progress_at(self, time_s: float) -> float:
        for anchor_s, progress, rate in reversed(self.segments):
            if time_s >= anchor_s:
                return progress_at(anchor_s, progress, rate, self.job.duration_s, time_s)
        return self.segments[0][1]


@dataclass
class Series:
    """Samples for the report, every `step_s` seconds of simulated time."""

    step_s: float
    times_s: list[float] = field(default_factory=list)
    utilisation: list[float] = field(default_factory=list)
    queue_length: list[int] = field(default_factory=list)


@dataclass
class JobOutcome:
    job: Job
    first_start_s: float | None = None
    end_s: float | None = None
    timed_out: bool = False
    # The first estimate shown while it waited: when it was shown, and the start it gave (None:
    # none given). Left unset for a job that started in the first cycle that saw it.
    estimate_shown_s: float | None = None
    first_estimate_s: float | None = None


class Recorder:
    def __init__(
        self,
        nodes: Iterable[Node],
        *,
        window: tuple[float, float],
        penalty: Mapping[str, float],
        guarantees: Mapping[Key, int],
        weights: Mapping[Key, float],
        sample_every_s: float,
        estimate_every: int = 1,
    ) -> None:
        node_list = list(nodes)
        self.rack_of = {node.id: node.rack_key for node in node_list}
        self.capacity: dict[str, int] = {}
        for node in node_list:
            self.capacity[node.accelerator] = self.capacity.get(node.accelerator, 0) + node.gpus
        self.capacity_gpus = sum(self.capacity.values())
        self.min_level = _minimal_levels(node_list)
        self.w0, self.w1 = window
        self.penalty = dict(penalty)
        self.guarantees, self.weights = dict(guarantees), dict(weights)
        self.now = self.w0
        self.alloc_total = 0
        self.pending_count = 0
        self.alloc: dict[Key, int] = {}
        self.pending_gpus: dict[Key, int] = {}
        self.entitled: dict[Key, float] = {}
        # Demand (allocated plus pending GPUs) per key, kept as it changes, and as it was when
        # `entitled` was last worked out (`_refresh_entitlements`).
        self.demand: dict[Key, int] = {}
        self.demand_seen: dict[Key, int] = {}
        # Per key water-filling never capped, the bound its demand stayed above (`water_fill_with_bounds`).
        self.uncapped_above: dict[Key, float] = {}
        self.demand_dirty = False
        self.runs: dict[str, _Run] = {}
        self.saved: dict[str, float] = {}
        self.outcomes: dict[str, JobOutcome] = {}
        self.fragmented = False
        # Window integrals.
        self.allocated_gpu_s = self.useful_gpu_s = self.useful_total_gpu_s = self.fragment_idle_gpu_s = 0.0
        self.used_while_demanding: dict[Key, float] = {}
        self.entitled_gpu_s: dict[Key, float] = {}
        self.used_gpu_s: dict[Key, float] = {}
        self.meters: dict[Key, ViolationMeter] = {key: ViolationMeter() for key in self.guarantees}
        # The same, counting only pending jobs that fit whole within the unused guarantee.
        self.fit_meters: dict[Key, ViolationMeter] = {key: ViolationMeter() for key in self.guarantees}
        self.pending_sizes: dict[Key, dict[int, int]] = {}
        # What `advance_to` integrates per key, from `alloc`, `entitled`, `pending_gpus` and
        # `pending_sizes`: the rates, None once one of them changed (`_rates`), and the unmet demand,
        # recomputed for the keys whose allocation or queue changed (`_unmet`).
        self.rates: list[tuple[Key, float, int]] | None = None
        self.unmet: list[tuple[ViolationMeter, int, ViolationMeter, int]] | None = None
        self.unmet_index = {key: index for index, key in enumerate(self.meters)}
        self.unmet_changed: set[Key] = set()
        # Counts.
        self.preemptions = self.failures_evicted = self.starts = 0
        self.preemption_lost_gpu_s = self.failure_lost_gpu_s = 0.0
        self.multinode_racks: list[int] = []
        self.topology_checked = self.topology_optimal = 0
        self.series = Series(sample_every_s)
        self.next_sample_s = self.w0
        self.gate: CycleGate | None = None
        # Every `estimate_every`-th job submitted (0: none) waits for its first estimate in `awaiting`
        # until the next explained cycle.
        self.estimate_every = estimate_every
        self.submissions = 0
        self.awaiting: dict[str, None] = {}

    # Time --------------------------------------------------------------------------------------
    def advance_to(self, time_s: float) -> None:
        if time_s <= self.now:
            return
        start, self.now = self.now, time_s
        self._sample(start, time_s)
        lo, hi = max(start, self.w0), min(time_s, self.w1)
        if hi <= lo:
            return
        dt = hi - lo
        self.allocated_gpu_s += self.alloc_total * dt
        if self.fragmented:
            self.fragment_idle_gpu_s += (self.capacity_gpus - self.alloc_total) * dt
        if self.demand_dirty:
            self._refresh_entitlements()
        used_gpu_s, entitled_gpu_s, while_demanding = self.used_gpu_s, self.entitled_gpu_s, self.used_while_demanding
        for key, entitled, used in self._rates():
            if used:
                used_gpu_s[key] = used_gpu_s.get(key, 0.0) + used * dt
            if entitled > 0:
                entitled_gpu_s[key] = entitled_gpu_s.get(key, 0.0) + entitled * dt
                while_demanding[key] = while_demanding.get(key, 0.0) + used * dt
        for meter, unmet, fit_meter, fit in self._unmet():
            meter.add(lo, hi, unmet)
            fit_meter.add(lo, hi, fit)

    def _rates(self) -> list[tuple[Key, float, int]]:
        """`plain_rates`, kept until allocations or entitlements change."""
        if self.rates is None:
            self.rates = self.plain_rates()
        return self.rates

    def plain_rates(self) -> list[tuple[Key, float, int]]:
        """Per key of `entitled`: (key, entitled GPUs, allocated GPUs)."""
        return [(key, entitled, self.alloc.get(key, 0)) for key, entitled in self.entitled.items()]

    def _unmet(self) -> list[tuple[ViolationMeter, int, ViolationMeter, int]]:
        """`plain_unmet`, each key's entry kept until its allocation or queue changes."""
        if self.unmet is None:
            self.unmet = self.plain_unmet()
        else:
            for key in self.unmet_changed:
                index = self.unmet_index.get(key)
                if index is not None:
                    self.unmet[index] = self._unmet_of(key)
        self.unmet_changed.clear()
        return self.unmet

    def plain_unmet(self) -> list[tuple[ViolationMeter, int, ViolationMeter, int]]:
        """Per guaranteed key: its meter and the unmet demand within its unused guarantee (every
        pending GPU), then its fit meter and the demand of the pending jobs that fit whole."""
        return [self._unmet_of(key) for key in self.meters]

    def _unmet_of(self, key: Key) -> tuple[ViolationMeter, int, ViolationMeter, int]:
        unused = max(0, self.guarantees[key] - self.alloc.get(key, 0))
        demand = min(self.pending_gpus.get(key, 0), unused)
        return self.meters[key], demand, self.fit_meters[key], fitting_demand(self.pending_sizes.get(key, {}), unused)

    def _sample(self, start: float, end: float) -> None:
        series = self.series
        while self.next_sample_s < end:
            if self.next_sample_s >= start:
                series.times_s.append(self.next_sample_s)
                series.utilisation.append(self.alloc_total / self.capacity_gpus if self.capacity_gpus else 0.0)
                series.queue_length.append(self.pending_count)
            self.next_sample_s += series.step_s

    def _refresh_entitlements(self) -> None:
        """`plain_entitlements`, water-filled again only when a key whose demand changed was capped
        or would be now: a start or an eviction moves demand between queue and fleet, and at
        overload most changes are of teams that demand more than they are entitled to, whose
        entitlements stay the same to the bit (`water_fill_with_bounds`)."""
        self.demand_dirty = False
        demand, seen, bounds = self.demand, self.demand_seen, self.uncapped_above
        changed = [key for key, gpus in demand.items() if seen.get(key) != gpus]
        if all(key in bounds and demand[key] > bounds[key] for key in changed):
            for key in changed:
                seen[key] = demand[key]
            return
        self.plain_entitlements()

    def plain_entitlements(self) -> None:
        """Entitlements water-filled from the demand per accelerator (the definition
        `_refresh_entitlements` keeps)."""
        self.demand_dirty = False
        self.demand_seen = dict(self.demand)
        self.rates = None  # (a change of allocation has already dropped them)
        by_accelerator: dict[str, dict[str, float]] = {}
        for (team, accelerator), demand in self.demand.items():
            by_accelerator.setdefault(accelerator, {})[team] = demand
        self.entitled, self.uncapped_above = {}, {}
        for accelerator, demands in by_accelerator.items():
            weights = {team: self.weights.get((team, accelerator), 1.0) for team in demands}
            entitled, bounds = water_fill_with_bounds(self.capacity.get(accelerator, 0), demands, weights)
            for team, value in entitled.items():
                self.entitled[(team, accelerator)] = value
            for team, bound in bounds.items():
                self.uncapped_above[(team, accelerator)] = bound

    # Changes -----------------------------------------------------------------------------------
    def submitted(self, job: Job) -> None:
        self.outcomes.setdefault(job.id, JobOutcome(job))
        self._pending(job, +1)
        if self.estimate_every and self.submissions % self.estimate_every == 0:
            self.awaiting[job.id] = None
        self.submissions += 1

    def awaiting_estimate(self) -> bool:
        return bool(self.awaiting)

    def _pending(self, job: Job, sign: int) -> None:
        key = (job.team, job.accelerator)
        self.pending_gpus[key] = self.pending_gpus.get(key, 0) + sign * job.gpus
        self.demand[key] = self.demand.get(key, 0) + sign * job.gpus
        sizes = self.pending_sizes.setdefault(key, {})
        count = sizes.get(job.gpus, 0) + sign
        if count:
            sizes[job.gpus] = count
        else:
            sizes.pop(job.gpus, None)
        self.pending_count += sign
        self.demand_dirty = True
        self.unmet_changed.add(key)
        if self.gate is not None:
            if sign > 0:
                self.gate.queued(job)
            else:
                self.gate.dequeued(job)

    def _allocate(self, job: Job, gpus: int) -> None:
        key = (job.team, job.accelerator)
        self.alloc[key] = self.alloc.get(key, 0) + gpus
        self.alloc_total += gpus
        self.demand[key] = self.demand.get(key, 0) + gpus
        self.demand_dirty = True
        self.rates = None
        self.unmet_changed.add(key)
        if self.gate is not None:
            self.gate.allocated(job.accelerator, gpus)

    def planned(self, plan: Plan, now: float, *, explained: bool = False) -> None:
        self.fragmented = any(status.reason == "topology" for status in plan.pending)
        if explained and self.awaiting:
            awaiting, outcomes = self.awaiting, self.outcomes
            for status in plan.pending:
                if status.job_id in awaiting:
                    outcome = outcomes[status.job_id]
                    outcome.estimate_shown_s, outcome.first_estimate_s = now, status.estimated_start_s
            awaiting.clear()  # the rest start in this plan

    def applied(self, plan: Plan) -> None:
        """After `plan` was applied: the gate reads again the jobs it preempted or resized."""
        if self.gate is not None:
            self.gate.touch(a.job_id for a in plan.actions if isinstance(a, (Preempt, Shrink, Grow)))

    def record(self, events: Iterable[Event]) -> None:
        touched: list[str] = []
        for event in events:
            if isinstance(event, Started):
                self._started(event)
            elif isinstance(event, (Completed, TimedOut)):
                self._ended(event.job_id, event.time_s, None, isinstance(event, TimedOut))
            elif isinstance(event, Evicted):
                self._evicted(event)
            elif isinstance(event, Resized):
                self._resized(event)
            elif isinstance(event, Withdrawn):
                self._withdrawn(event)
            else:
                continue
            touched.append(event.job_id)
        if self.gate is not None and touched:
            self.gate.touch(touched)

    def _started(self, event: Started) -> None:
        outcome = self.outcomes[event.job_id]
        job = outcome.job
        gpus = sum(g for _, g in event.allocation)
        rate = progress_rate(gpus, job.gpus, self.penalty.get(event.level, 1.0))
        base = self.saved.get(job.id, 0.0)
        self.runs[job.id] = _Run(job, event.time_s, event.time_s + event.restore_s, base, rate, gpus)
        if outcome.first_start_s is None:
            outcome.first_start_s = event.time_s
        self._pending(job, -1)
        self._allocate(job, gpus)
        self.starts += 1
        if len(event.allocation) > 1:
            self.multinode_racks.append(len({self.rack_of[node_id] for node_id, _ in event.allocation}))
        if job.gpus > 1:
            self.topology_checked += 1
            best = self.min_level.get((job.accelerator, job.gpus), "fleet")
            self.topology_optimal += LEVEL_RANK[event.level] <= LEVEL_RANK[best]

    def _resized(self, event: Resized) -> None:
        run = self.runs.get(event.job_id)
        if run is None:
            return
        gpus = sum(g for _, g in event.allocation)
        level = _level([node for node, _ in event.allocation], self.rack_of)
        rate = progress_rate(gpus, run.job.gpus, self.penalty.get(level, 1.0))
        anchor_s = max(event.time_s, run.segments[-1][0])
        run.segments.append((anchor_s, run.progress_at(anchor_s), rate))
        self._allocate(run.job, gpus - run.gpus)
        run.gpus = gpus

    def _evicted(self, event: Evicted) -> None:
        run = self.runs.get(event.job_id)
        if run is None:
            return
        kept = run.progress_at(event.time_s) - event.lost_gpu_s / max(1, run.job.gpus)
        self._ended(event.job_id, event.time_s, kept, False)
        self.saved[event.job_id] = kept
        self._pending(run.job, +1)
        if event.reason in FAILURE_REASONS:
            self.failures_evicted += 1
            self.failure_lost_gpu_s += event.lost_gpu_s
        else:
            self.preemptions += 1
            self.preemption_lost_gpu_s += event.lost_gpu_s

    def _withdrawn(self, event: Withdrawn) -> None:
        if event.was_running:
            self._ended(event.job_id, event.time_s, None, False)
            return
        outcome = self.outcomes[event.job_id]
        self._pending(outcome.job, -1)
        outcome.end_s = event.time_s

    def _ended(self, job_id: str, time_s: float, kept: float | None, timed_out: bool) -> None:
        run = self.runs.pop(job_id)
        self._allocate(run.job, -run.gpus)
        cap = run.progress_at(time_s) if kept is None else kept
        base = run.segments[0][1]
        self.useful_total_gpu_s += max(0.0, cap - base) * run.job.gpus
        lo, hi = max(run.start_s, self.w0), min(time_s, self.w1)
        if hi > lo:
            done = min(cap, run.progress_at(hi)) - min(cap, run.progress_at(lo))
            self.useful_gpu_s += max(0.0, done) * run.job.gpus
        if kept is None:
            outcome = self.outcomes[job_id]
            outcome.end_s, outcome.timed_out = time_s, timed_out

    def close(self, time_s: float) -> None:
        """End of the simulation: count the useful work of whatever still runs."""
        self.advance_to(time_s)
        for job_id in sorted(self.runs):
            run = self.runs[job_id]
            cap = run.progress_at(time_s)
            lo, hi = max(run.start_s, self.w0), min(time_s, self.w1)
            if hi > lo:
                self.useful_gpu_s += max(0.0, min(cap, run.progress_at(hi)) - run.progress_at(lo)) * run.job.gpus
            self.useful_total_gpu_s += max(0.0, cap - run.segments[0][1]) * run.job.gpus


def _level(node_ids: list[str], rack_of: Mapping[str, str]) -> str:
    if len(set(node_ids)) <= 1:
        return "node"
    racks = {rack_of[node_id] for node_id in node_ids}
    if len(racks) == 1:
        return "rack"
    return "pod" if len({rack.split("/", 1)[0] for rack in racks}) == 1 else "fleet"


class _MinLevels(dict[tuple[str, int], str]):
    """The narrowest level an empty fleet could give a gang of a given size, computed on demand."""

    def __init__(self, shapes: dict[str, tuple[int, int, int]]) -> None:
        super().__init__()
        self.shapes = shapes

    def __missing__(self, key: tuple[str, int]) -> str:
        accelerator, gpus = key
        per_node, rack_nodes, pod_nodes = self.shapes.get(accelerator, (8, 1, 1))
        nodes = -(-gpus // per_node)
        level = "node" if nodes <= 1 else "rack" if nodes <= rack_nodes else "pod" if nodes <= pod_nodes else "fleet"
        self[key] = level
        return level

    def get(self, key: tuple[str, int], default: str | None = None) -> str:  # type: ignore[override]
        return self[key]


def _minimal_levels(nodes: list[Node]) -> _MinLevels:
    racks: dict[tuple[str, str], int] = {}
    pods: dict[tuple[str, str], int] = {}
    per_node: dict[str, int] = {}
    for node in nodes:
        racks[(node.accelerator, node.rack_key)] = racks.get((node.accelerator, node.rack_key), 0) + 1
        pods[(node.accelerator, node.pod)] = pods.get((node.accelerator, node.pod), 0) + 1
        per_node[node.accelerator] = max(per_node.get(node.accelerator, 0), node.gpus)
    shapes = {
        accelerator: (
            size,
            max(count for (acc, _), count in racks.items() if acc == accelerator),
            max(count for (acc, _), count in pods.items() if acc == accelerator),
        )
        for accelerator, size in per_node.items()
    }
    return _MinLevels(shapes)

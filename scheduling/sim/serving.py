"""Serving on the simulated fleet: deployments whose replicas follow their demand, and the layouts
that share a fleet between serving and training or split it.

`ServingHook` (a `hooks.Hook`) reconciles every deployment with its demand whenever the demand
changes, as the live cycle does every tick (`scheduling.cycle.serving`): a rise submits replica
jobs (kind `serving`, not preemptible, at the deployment's priority, above training), a fall
withdraws the newest requests, pending ones first. The engine places replicas like any job, and a
replica that finds no room takes training's GPUs at once (an eviction for serving always pays,
`engine.reclaim`); training never evicts a replica. At `until_s` every replica is withdrawn.

It fills the serving keys of the metrics contract (`metrics` module docstring) from the events it
watches: attainment and start latency by `engine.serving.slo_attainment`, the same function the
live cycle reports with.

Layouts (`layout_nodes`): `shared` (one fleet, serving first), `static-peak` and `static-mean`
(a static split: serving gets whole nodes enough for its peak, or for its mean demand, as a
partition of its own accelerator label, so the engine can never place training there, nor serving
outside it).

Deployment files (`load_deployments`), next to the training trace: JSON, a list of objects, or
CSV with a header; fields `name`, `team`, `gpus_per_replica` (default 8), `serving_slo_s`
(default 300), `min_replicas`, `max_replicas`, `peak_hour` (default 14), `period_h` (default 24),
`accelerator`, `priority`; or, instead of the diurnal fields, `replicas`: a trace of replica counts
(JSON `[[time_s, replicas], ...]`, CSV `time_s:replicas;time_s:replicas`), in the training trace's
seconds.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scheduling.engine import Completed, Event, Evicted, Job, Node, Policy, Resized, Started, TimedOut, Withdrawn
from scheduling.engine.demand import DiurnalDemand
from scheduling.engine.serving import (
    DEFAULT_SLO_S,
    DEMAND_STEP_S,
    SERVING_PRIORITY,
    Attainment,
    Demand,
    Deployment,
    ReplicaRecord,
    TraceDemand,
    combined_attainment,
    next_change_s,
    slo_attainment,
    withdrawal_order,
)

from .fleet import SpecError
from .formulas import percentile
from .hooks import Hook, SimContext
from .simulator import SimResult, run_simulation

# A replica runs until its demand withdraws it: its work never runs out first.
REPLICA_DURATION_S = 10 * 365 * 86400.0
LAYOUTS: tuple[str, ...] = ("static-peak", "static-mean", "shared")
PARTITION_SUFFIX = "/serving"
PREEMPTED_BY = "preempted-by:"


@dataclass
class _Request:
    job_id: str
    deployment: int
    asked_s: float
    withdrawn_s: float | None = None
    runs: list[tuple[float, float | None]] = field(default_factory=list)  # (serving from, until)

    def record(self) -> ReplicaRecord:
        return ReplicaRecord(self.asked_s, self.withdrawn_s, tuple(self.runs))


class ServingHook:
    """Implements `hooks.Hook` and `hooks.Observer` (module docstring)."""

    def __init__(
        self,
        deployments: Sequence[Deployment],
        *,
        capacity_gpus: int,
        start_s: float,
        until_s: float,
        window: tuple[float, float] | None = None,
        grace_s: float = 30.0,
        level_penalty: Iterable[tuple[str, float]] = (),
    ) -> None:
        self.deployments = tuple(deployments)
        self.capacity_gpus = capacity_gpus
        self.start_s, self.until_s = start_s, until_s
        self.window = window or (start_s, until_s)
        self.grace_s = grace_s
        self.penalty = dict(level_penalty)
        self.requests: dict[str, _Request] = {}
        self.active: list[list[str]] = [[] for _ in self.deployments]  # asked order, per deployment
        self._count = 0
        self._next: float | None = start_s if self.deployments and until_s >= start_s else None
        # Every job's GPUs while it runs, to price an eviction's grace period.
        self._gpus: dict[str, int] = {}
        # Serving's allocated and serving GPU-seconds in the window, integrated per run.
        self._serving_since: dict[str, tuple[float, float, int, float]] = {}  # start, from, gpus, rate
        self.allocated_gpu_s = self.useful_gpu_s = 0.0
        self.preemptions = 0
        self.lost_gpu_s = 0.0

    # Hook --------------------------------------------------------------------------------------
    def next_time(self) -> float | None:
        return self._next

    def on_time(self, sim: SimContext, now: float) -> list[Event]:
        events: list[Event] = []
        for index, deployment in enumerate(self.deployments):
            want = deployment.demand.replicas_at(now) if now < self.until_s else 0
            have = self.active[index]
            if want > len(have):
                for _ in range(want - len(have)):
                    self._ask(sim, index, deployment, now)
            elif want < len(have):
                events.extend(self._withdraw(sim, index, len(have) - want, now))
        self._next = self._next_change(now)
        return events

    def _next_change(self, now: float) -> float | None:
        if now >= self.until_s:
            return None
        times = [next_change_s(d.demand, now, self.until_s) for d in self.deployments]
        candidates = [t for t in times if t is not None]
        return min(candidates, default=self.until_s)

    def _ask(self, sim: SimContext, index: int, deployment: Deployment, now: float) -> None:
        self._count += 1
        job_id = f"{deployment.name}/replica-{self._count}"
        job = Job(
            id=job_id,
            team=deployment.team,
            kind="serving",
            priority=deployment.priority,
            preemptible=False,
            accelerator=deployment.accelerator,
            gpus=deployment.gpus_per_replica,
            duration_s=REPLICA_DURATION_S,
            submit_s=now,
        )
        self.requests[job_id] = _Request(job_id, index, now)
        self.active[index].append(job_id)
        sim.submit(job)

    def _withdraw(self, sim: SimContext, index: int, count: int, now: float) -> list[Event]:
        """The newest requests go first, pending before running (as the live cycle scales down)."""
        active = self.active[index]
        running = sim.state.running
        surplus = withdrawal_order([(job_id, job_id in running) for job_id in active])[:count]
        events: list[Event] = []
        for job_id in surplus:
            events.extend(sim.state.withdraw(job_id, now))
            active.remove(job_id)
            self.requests[job_id].withdrawn_s = now
        return events

    # Observer ----------------------------------------------------------------------------------
    def observe(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, Started):
                self._started(event)
            elif isinstance(event, Resized):
                self._gpus[event.job_id] = sum(g for _, g in event.allocation)
            elif isinstance(event, (Completed, TimedOut, Evicted, Withdrawn)):
                if isinstance(event, Evicted):
                    self._evicted(event)
                self._ended(event.job_id, event.time_s)

    def _started(self, event: Started) -> None:
        gpus = sum(g for _, g in event.allocation)
        self._gpus[event.job_id] = gpus
        request = self.requests.get(event.job_id)
        if request is not None:
            # A replica serves once its handover (training's grace period) and restore are over.
            serving_from = event.time_s + event.restore_s
            request.runs.append((serving_from, None))
            rate = 1.0 / self.penalty.get(event.level, 1.0)
            self._serving_since[event.job_id] = (event.time_s, serving_from, gpus, rate)

    def _evicted(self, event: Evicted) -> None:
        preemptor = event.reason.removeprefix(PREEMPTED_BY)
        if preemptor != event.reason and preemptor in self.requests and event.job_id not in self.requests:
            self.preemptions += 1
            self.lost_gpu_s += event.lost_gpu_s + self.grace_s * self._gpus.get(event.job_id, 0)

    def _ended(self, job_id: str, time_s: float) -> None:
        since = self._serving_since.pop(job_id, None)
        if since is None:
            return
        start, serving_from, gpus, rate = since
        runs = self.requests[job_id].runs
        runs[-1] = (runs[-1][0], time_s)
        lo, hi = self.window
        self.allocated_gpu_s += gpus * max(0.0, min(hi, time_s) - max(lo, start))
        self.useful_gpu_s += gpus * rate * max(0.0, min(hi, time_s) - max(lo, serving_from))

    # Metrics -----------------------------------------------------------------------------------
    def attainment(self) -> Attainment:
        parts = []
        for index, deployment in enumerate(self.deployments):
            records = [r.record() for r in self.requests.values() if r.deployment == index]
            parts.append(slo_attainment(records, deployment.slo_s, self.window))
        return combined_attainment(parts)

    def metrics(self) -> dict[str, Any]:
        """The serving keys of the metrics contract (`metrics` module docstring)."""
        if not self.deployments:
            return {}
        attained = self.attainment()
        area = self.capacity_gpus * (self.window[1] - self.window[0])
        return {
            "serving_slo_attainment": attained.fraction,
            "serving_start_p99_s": percentile(list(attained.start_latencies_s), 99),
            "training_preemptions_by_serving": self.preemptions,
            "training_lost_gpu_hours_by_serving": self.lost_gpu_s / 3600.0,
            "serving_utilisation": self.allocated_gpu_s / area if area > 0 else None,
            "serving_goodput": self.useful_gpu_s / area if area > 0 else None,
        }


# Deployment files ------------------------------------------------------------------------------
_FIELDS = frozenset(
    {
        "name",
        "team",
        "gpus_per_replica",
        "serving_slo_s",
        "min_replicas",
        "max_replicas",
        "peak_hour",
        "period_h",
        "accelerator",
        "priority",
        "replicas",
    }
)


def load_deployments(path: str | Path, *, default_accelerator: str = "gpu") -> tuple[Deployment, ...]:
    """Deployments from a JSON or CSV file (module docstring); `SpecError` names the row and field."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"{file}: cannot read deployments: {error.strerror}") from None
    if file.suffix.lower() == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            raise SpecError(f"{file}: not JSON: {error}") from None
        if not isinstance(rows, list):
            raise SpecError(f"{file}: expected a list of deployments")
    else:
        rows = list(csv.DictReader(text.splitlines()))
    deployments = tuple(
        _deployment(row, f"{file}: deployment {n}", default_accelerator) for n, row in enumerate(rows, 1)
    )
    names = [d.name for d in deployments]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise SpecError(f"{file}: deployment name {duplicate!r} appears twice")
    return deployments


def _deployment(row: Any, where: str, default_accelerator: str) -> Deployment:
    if not isinstance(row, dict):
        raise SpecError(f"{where}: expected an object")
    unknown = sorted(set(row) - _FIELDS)
    if unknown:
        raise SpecError(f"{where}: unknown field {unknown[0]!r}")
    values = {k: v for k, v in row.items() if v not in (None, "")}

    def number(name: str, default: float | None, *, integer: bool = False) -> float:
        raw = values.get(name, default)
        if raw is None:
            raise SpecError(f"{where}: {name} is required")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise SpecError(f"{where}: {name} must be a number, not {raw!r}") from None
        if not math.isfinite(value) or (integer and value != int(value)):
            raise SpecError(f"{where}: {name} must be a finite {'whole ' if integer else ''}number, not {raw!r}")
        return value

    demand: Demand
    if "replicas" in values:
        demand = _trace_demand(values["replicas"], where)
    else:
        minimum = int(number("min_replicas", None, integer=True))
        maximum = int(number("max_replicas", None, integer=True))
        demand = DiurnalDemand(minimum, maximum, number("peak_hour", 14.0), number("period_h", 24.0))
        if not demand.period_h > 0:
            raise SpecError(f"{where}: period_h must be > 0")
    try:
        return Deployment(
            name=str(values.get("name", "")),
            team=str(values.get("team", "serving")),
            demand=demand,
            gpus_per_replica=int(number("gpus_per_replica", 8, integer=True)),
            slo_s=number("serving_slo_s", DEFAULT_SLO_S),
            accelerator=str(values.get("accelerator", default_accelerator)),
            priority=int(number("priority", SERVING_PRIORITY, integer=True)),
        )
    except ValueError as error:
        raise SpecError(f"{where}: {error}") from None


def _trace_demand(raw: Any, where: str) -> TraceDemand:
    try:
        if isinstance(raw, str):
            points = [tuple(part.split(":", 1)) for part in raw.split(";") if part.strip()]
        else:
            points = [tuple(point) for point in raw]
        parsed = tuple((float(t), int(n)) for t, n in points)
        return TraceDemand(parsed)
    except (TypeError, ValueError) as error:
        raise SpecError(f"{where}: replicas must be [time_s, replicas] points ({error})") from None


# Layouts ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DemandProfile:
    peak_gpus: int
    mean_gpus: float


def demand_profile(deployments: Sequence[Deployment], start_s: float, end_s: float) -> DemandProfile:
    """Serving's GPUs demanded together, at their peak and on average over [start_s, end_s), on the
    `DEMAND_STEP_S` grid."""
    peak, total, steps = 0, 0.0, 0
    time_s = start_s
    while time_s < end_s or steps == 0:
        gpus = sum(d.demand.replicas_at(time_s) * d.gpus_per_replica for d in deployments)
        peak, total, steps = max(peak, gpus), total + gpus, steps + 1
        time_s += DEMAND_STEP_S
    return DemandProfile(peak, total / steps)


def layout_nodes(
    nodes: Sequence[Node], deployments: Sequence[Deployment], layout: str, profile: DemandProfile
) -> tuple[tuple[Node, ...], tuple[Deployment, ...]]:
    """The fleet and deployments of a layout (module docstring). A static split gives serving the
    last nodes of the fleet (whole racks where it can), enough for `profile`'s peak or mean, under
    the accelerator label `<accelerator>/serving` that only the deployments ask for."""
    if layout == "shared":
        return tuple(nodes), tuple(deployments)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    accelerators = {d.accelerator for d in deployments}
    if len(accelerators) > 1:
        raise ValueError("a static split needs every deployment on one accelerator")
    accelerator = next(iter(accelerators), "gpu")
    wanted = profile.peak_gpus if layout == "static-peak" else math.ceil(profile.mean_gpus)
    label = accelerator + PARTITION_SUFFIX
    partition: set[str] = set()
    held = 0
    for node in sorted((n for n in nodes if n.accelerator == accelerator), key=lambda n: n.id, reverse=True):
        if held >= wanted:
            break
        partition.add(node.id)
        held += node.gpus
    split = tuple(replace(n, accelerator=label) if n.id in partition else n for n in nodes)
    return split, tuple(replace(d, accelerator=label) for d in deployments)


def serving_hook(
    deployments: Sequence[Deployment], nodes: Sequence[Node], policy: Policy, window: tuple[float, float]
) -> ServingHook:
    """The hook that runs `deployments` on `nodes` over `window` under `policy`'s grace and penalties.
    A replica larger than a node takes whole nodes: its size is rounded up to them."""
    per_node: dict[str, int] = {}
    for node in nodes:
        per_node[node.accelerator] = max(per_node.get(node.accelerator, 0), node.gpus)
    return ServingHook(
        tuple(_whole_nodes(d, per_node.get(d.accelerator)) for d in deployments),
        capacity_gpus=sum(node.gpus for node in nodes),
        start_s=window[0],
        until_s=window[1],
        grace_s=policy.preemption_grace_s,
        level_penalty=policy.level_penalty,
    )


def _whole_nodes(deployment: Deployment, gpus_per_node: int | None) -> Deployment:
    gpus = deployment.gpus_per_replica
    if gpus_per_node is None or gpus <= gpus_per_node or gpus % gpus_per_node == 0:
        return deployment
    return replace(deployment, gpus_per_replica=-(-gpus // gpus_per_node) * gpus_per_node)


def simulate_serving(
    jobs: Sequence[Job],
    nodes: Sequence[Node],
    deployments: Sequence[Deployment],
    *,
    layout: str = "shared",
    policy: Policy | None = None,
    window: tuple[float, float] | None = None,
    hooks: Sequence[Hook] = (),
    **options: Any,
) -> SimResult:
    """Replay `jobs` with `deployments` on `nodes` laid out as `layout`, serving over `window`
    (default: the jobs' submission window), under `policy` (default: fleetline). `options` go to
    `run_simulation`."""
    policy = policy or Policy()
    if window is None:
        submits = [job.submit_s for job in jobs]
        window = (min(submits, default=0.0), max(submits, default=0.0))
    profile = demand_profile(deployments, *window)
    laid_out, placed = layout_nodes(nodes, deployments, layout, profile)
    hook = serving_hook(placed, laid_out, policy, window)
    return run_simulation(jobs, laid_out, policy, hooks=[hook, *hooks], **options)

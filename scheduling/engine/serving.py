"""Serving deployments as the simulator and the live cycle both see them: demand curves, replica
requests, and the start-latency objective they are measured against.

A deployment asks for a number of replicas at every moment (its demand curve: diurnal, as
`DiurnalDemand`, or a trace of replica counts). Each replica it asks for is one request: asked
when demand rose to include it, withdrawn when demand fell below it (the newest requests go
first). A request is met while a replica serves it; the objective (`slo_s`) is that a replica
serves within `slo_s` of the ask.

`slo_attainment` is the contract metric `serving_slo_attainment`: the fraction of the
replica-seconds demanded in a window that were served within the objective. A demanded second
counts as met when a replica is serving it, or when it falls in the start-up of a request whose
replica was serving within `slo_s` of the ask (or that was withdrawn before `slo_s` had passed:
its objective was never missed). Every other demanded second is missed: the whole wait of a late
start, and any gap after a replica was lost (to a failure) until it serves again.

Pure: no clock, no randomness; the same functions run on the simulator's events and on the live
cycle's rows.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .demand import DiurnalDemand

# A replica is a latency-critical service: it should serve within five minutes of the demand asking
# for it. The live cycle reconciles demand every tick (60 fleet-seconds at the default clock speed)
# and a replica that takes training's GPUs waits out their grace period (30 s), so this leaves room
# for a few ticks.
DEFAULT_SLO_S = 300.0
# Serving sits above every training priority (a trace's priorities are small integers).
SERVING_PRIORITY = 100
# Diurnal curves change in steps; their changes are found on this grid (the live tick, 60 fleet-s).
DEMAND_STEP_S = 60.0


@dataclass(frozen=True, slots=True)
class TraceDemand:
    """Replica counts from a trace: `points[i] = (time_s, replicas)` holds from its time until the
    next point's; before the first point, no replicas."""

    points: tuple[tuple[float, int], ...]

    def __post_init__(self) -> None:
        times = [time_s for time_s, _ in self.points]
        if not self.points:
            raise ValueError("a demand trace needs at least one (time_s, replicas) point")
        if any(b <= a for a, b in zip(times, times[1:], strict=False)):
            raise ValueError("demand trace times must increase strictly")
        if any(replicas < 0 for _, replicas in self.points):
            raise ValueError("demand trace replica counts must be >= 0")
        if any(not math.isfinite(t) for t in times):
            raise ValueError("demand trace times must be finite")

    def replicas_at(self, time_s: float) -> int:
        index = bisect.bisect_right([t for t, _ in self.points], time_s) - 1
        return self.points[index][1] if index >= 0 else 0

    @property
    def peak_replicas(self) -> int:
        return max(replicas for _, replicas in self.points)


Demand = DiurnalDemand | TraceDemand


@dataclass(frozen=True, slots=True)
class Deployment:
    """A serving deployment: its demand, the size of one replica (GPUs; multi-node replicas take
    whole nodes), its start-latency objective and the priority its replicas run at."""

    name: str
    team: str
    demand: Demand
    gpus_per_replica: int = 8
    slo_s: float = DEFAULT_SLO_S
    accelerator: str = "gpu"
    priority: int = SERVING_PRIORITY

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a deployment needs a name")
        if self.gpus_per_replica < 1:
            raise ValueError(f"deployment {self.name!r}: gpus_per_replica must be >= 1")
        if not (self.slo_s >= 0 and math.isfinite(self.slo_s)):
            raise ValueError(f"deployment {self.name!r}: serving_slo_s must be a finite number >= 0")
        if isinstance(self.demand, DiurnalDemand) and not 0 <= self.demand.min_replicas <= self.demand.max_replicas:
            raise ValueError(f"deployment {self.name!r}: need 0 <= min_replicas <= max_replicas")


def peak_replicas(demand: Demand) -> int:
    return demand.peak_replicas if isinstance(demand, TraceDemand) else demand.max_replicas


def next_change_s(demand: Demand, after_s: float, until_s: float) -> float | None:
    """The first time in (`after_s`, `until_s`] at which the demand differs from its value at
    `after_s` (a trace point, or for a diurnal curve the next `DEMAND_STEP_S` grid point where it
    changes), or None."""
    if isinstance(demand, TraceDemand):
        times = [t for t, _ in demand.points]
        index = bisect.bisect_right(times, after_s)
        while index < len(times) and times[index] <= until_s:
            if demand.points[index][1] != demand.replicas_at(after_s):
                return times[index]
            index += 1
        return None
    now = demand.replicas_at(after_s)
    step = math.floor(after_s / DEMAND_STEP_S) + 1
    while step * DEMAND_STEP_S <= until_s:
        if demand.replicas_at(step * DEMAND_STEP_S) != now:
            return step * DEMAND_STEP_S
        step += 1
    return None


def mean_replicas(demand: Demand, start_s: float, end_s: float) -> float:
    """The time-averaged replica count over [start_s, end_s), on the `DEMAND_STEP_S` grid."""
    if end_s <= start_s:
        return float(demand.replicas_at(start_s))
    total, time_s = 0.0, start_s
    while time_s < end_s:
        nxt = next_change_s(demand, time_s, end_s)
        stop = end_s if nxt is None else nxt
        total += demand.replicas_at(time_s) * (stop - time_s)
        time_s = stop
    return total / (end_s - start_s)


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    """One replica request: when demand asked for it, when demand withdrew it (None: still asked),
    and the intervals a replica served it (`(from_s, until_s)`, until None: serving still)."""

    asked_s: float
    withdrawn_s: float | None
    runs: tuple[tuple[float, float | None], ...] = ()

    @property
    def first_serving_s(self) -> float | None:
        return self.runs[0][0] if self.runs else None

    def on_time(self, slo_s: float) -> bool:
        """Whether the objective held at the start: a replica served within `slo_s` of the ask, or
        the demand was withdrawn before `slo_s` had passed."""
        first = self.first_serving_s
        deadline = self.asked_s + slo_s
        if first is not None and first <= (self.withdrawn_s if self.withdrawn_s is not None else math.inf):
            return first <= deadline
        return self.withdrawn_s is not None and self.withdrawn_s <= deadline


@dataclass(frozen=True, slots=True)
class Attainment:
    demanded_s: float  # replica-seconds demanded in the window
    met_s: float  # of which served within the objective
    start_latencies_s: tuple[float, ...]  # ask -> first serving, requests that were served

    @property
    def fraction(self) -> float | None:
        return self.met_s / self.demanded_s if self.demanded_s > 0 else None

    @property
    def percent(self) -> float | None:
        fraction = self.fraction
        return None if fraction is None else 100.0 * fraction


def _overlap(lo: float, hi: float, a: float, b: float) -> float:
    return max(0.0, min(hi, b) - max(lo, a))


def slo_attainment(records: Iterable[ReplicaRecord], slo_s: float, window: tuple[float, float]) -> Attainment:
    """Attainment over `window` of requests that share one objective `slo_s` (module docstring)."""
    lo, hi = window
    demanded = met = 0.0
    latencies: list[float] = []
    for record in records:
        end = hi if record.withdrawn_s is None else min(hi, record.withdrawn_s)
        span = _overlap(lo, hi, record.asked_s, end)
        if span <= 0 and not (lo <= record.asked_s < hi):
            continue
        demanded += span
        served = sum(_overlap(lo, end, a, hi if b is None else b) for a, b in record.runs)
        first = record.first_serving_s
        if first is not None and lo <= record.asked_s < hi and first <= end:
            latencies.append(first - record.asked_s)
        if record.on_time(slo_s):
            startup_end = first if first is not None else end
            served += _overlap(lo, end, record.asked_s, startup_end)
        met += min(span, served)
    return Attainment(demanded, met, tuple(latencies))


def combined_attainment(parts: Sequence[Attainment]) -> Attainment:
    return Attainment(
        sum(p.demanded_s for p in parts),
        sum(p.met_s for p in parts),
        tuple(latency for p in parts for latency in p.start_latencies_s),
    )


def withdrawal_order(requests: Sequence[tuple[str, bool]]) -> list[str]:
    """The order in which falling demand withdraws a deployment's requests, given as `(key,
    running)` in the order they were asked: pending before running (a replica that serves already
    stays longest), the newest first within each."""
    asked = {key: index for index, (key, _) in enumerate(requests)}
    return [key for key, _ in sorted(requests, key=lambda r: (r[1], -asked[r[0]]))]

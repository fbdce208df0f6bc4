"""Compare policies on one trace and fleet: the layer the CLI, the management command and benchmarks share."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.engine import Policy

from .failures import FailureOptions
from .fleet import Fleet, QuotaSpec, SpecError, teams_for
from .metrics import WALL_KEYS
from .simulator import SimResult, run_simulation
from .trace import TraceJob
from .workload import build_workload

POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": Policy.fifo,
    "easy": Policy.easy,
    "fleetline": Policy,
}


@dataclass(frozen=True)
class Comparison:
    meta: dict[str, Any]
    results: tuple[SimResult, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"meta": self.meta, "results": [result.metrics for result in self.results]}

    def to_json(self, *, deterministic: bool = False) -> str:
        """The report as JSON; `deterministic` drops the wall-clock keys (for byte comparisons)."""
        data = self.as_dict()
        if deterministic:
            data["results"] = [{k: v for k, v in m.items() if k not in WALL_KEYS} for m in data["results"]]
        return json.dumps(data, indent=2, sort_keys=True)


def check_quotas(fleet: Fleet, quotas: QuotaSpec) -> None:
    """Guarantees beyond the fleet's capacity cannot all be honoured: refuse them up front."""
    for accelerator in sorted({q.accelerator for q in quotas.quotas}):
        guaranteed = sum(q.guaranteed for q in quotas.quotas if q.accelerator == accelerator)
        capacity = fleet.capacity_of(accelerator)
        if guaranteed > capacity:
            raise SpecError(f"quotas guarantee {guaranteed} GPUs of {accelerator!r} but the fleet has {capacity}")


def compare_policies(
    trace: Sequence[TraceJob],
    fleet: Fleet,
    policies: Sequence[str],
    *,
    quotas: QuotaSpec | None = None,
    estimate: float | None = None,
    seed: int = 0,
    limit: int | None = None,
    cycle_interval_s: float = 60.0,
    progress: Callable[[str], Callable[[float], None] | None] | None = None,
    failures: FailureOptions | None = None,
) -> Comparison:
    unknown = [name for name in policies if name not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policy {unknown[0]!r}: expected one of {', '.join(POLICIES)}")
    if quotas is not None:
        check_quotas(fleet, quotas)
    selected = list(trace[:limit]) if limit is not None else list(trace)
    workload = build_workload(selected, fleet, estimate=estimate)
    nodes = fleet.nodes()
    teams = teams_for([job.team for job in workload.jobs], quotas)
    w0, w1 = (
        min((j.submit_s for j in workload.jobs), default=0.0),
        max((j.submit_s for j in workload.jobs), default=0.0),
    )
    results = []
    for name in dict.fromkeys(policies):
        bar = progress(name) if progress else None
        result = run_simulation(
            workload.jobs,
            nodes,
            POLICIES[name](),
            policy_name=name,
            teams=teams,
            quotas=quotas.quotas if quotas else (),
            seed=seed,
            cycle_interval_s=cycle_interval_s,
            progress=bar,
            hooks=[failures.hook(nodes, start_s=w0, until_s=w1)] if failures else (),
            state_options=failures.state_options() if failures else None,
        )
        done = getattr(bar, "done", None)
        if done is not None:
            done()
        results.append(result)
    meta = {
        "fleet": fleet.describe(),
        "capacity_gpus": fleet.capacity_gpus,
        "trace_jobs": len(selected),
        "jobs": len(workload.jobs),
        "dropped_jobs": workload.dropped,
        "dropped_reasons": dict(workload.dropped_reasons),
        "rounded_gangs": workload.rounded,
        "teams": [team.id for team in teams],
        "quotas": "given" if quotas else "none: teams share the fleet without guarantees",
        "estimate": "exact" if estimate is None else estimate,
        "seed": seed,
        "cycle_interval_s": cycle_interval_s,
        "failures": None if failures is None else {"seed": failures.seed, "rate_scale": failures.rate_scale},
    }
    return Comparison(meta, tuple(results))

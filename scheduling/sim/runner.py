"""Compare policies on one trace and fleet: the layer the CLI, the management command and benchmarks share."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

from scheduling.engine import Job, Policy
from scheduling.engine.serving import Deployment

from .failures import FailureOptions
from .fleet import Fleet, QuotaSpec, SpecError, teams_for
from .metrics import WALL_KEYS
from .serving import serving_hook
from .simulator import ENGINES, SimResult, run_simulation
from .trace import TraceJob
from .workload import build_workload


def sjf_oracle() -> Policy:
    """Shortest true duration first over the whole queue: no reservation holds anyone back (a
    greedy scan, `reservation_depth=0`, no quota hold), no fair share, no preemption, no
    elastic resizing, best-fit placement in the narrowest domain free now (gangs never wait for a
    narrower one). Unfair by design (long jobs and big gangs can starve): the bound the fair
    policies are measured against."""
    return replace(
        Policy(),
        backfill=True,
        reservation_depth=0,
        quota_hold_after_s=None,
        preemption=False,
        elastic=False,
        fairshare=False,
        within_team_order="shortest_limit",
        gang_spread_after_s=0.0,
    )


@dataclass(frozen=True, slots=True)
class Preset:
    """A named policy as the simulator runs it. `quotas`: whether the engine sees the quotas (the
    replay measures guarantee violations either way). `oracle`: the engine plans with the true
    durations (jobs lose their time limits, so "shortest limit" is "shortest duration", and
    nothing is killed at a limit)."""

    policy: Callable[[], Policy]
    quotas: bool = True
    oracle: bool = False


PRESETS: dict[str, Preset] = {
    "fifo": Preset(Policy.fifo),
    "easy": Preset(Policy.easy),
    "fleetline": Preset(Policy),
    "sjf-oracle": Preset(sjf_oracle, quotas=False, oracle=True),
}
POLICIES: dict[str, Callable[[], Policy]] = {name: preset.policy for name, preset in PRESETS.items()}


def oracle_jobs(jobs: Sequence[Job]) -> tuple[Job, ...]:
    """The jobs as an oracle sees them: planned with their true durations, no time limits."""
    return tuple(job if job.time_limit_s is None else replace(job, time_limit_s=None) for job in jobs)


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


class CompareOptions(TypedDict, total=False):
    """The settings `compare_policies` takes by keyword; `CompareSettings` says what each means and
    holds its default."""

    quotas: QuotaSpec | None
    estimate: float | None
    seed: int
    limit: int | None
    cycle_interval_s: float
    tick_s: float
    progress: Callable[[str], Callable[[float], None] | None] | None
    failures: FailureOptions | None
    variants: dict[str, Preset] | None
    serving: Sequence[Deployment]
    engine: str


@dataclass(frozen=True, kw_only=True)
class CompareSettings:
    """How `compare_policies` replays (`CompareOptions` names the same fields for callers).

    `quotas`: the teams' guarantees (none: teams share the fleet). `estimate`: the time-limit
    estimate (`workload.build_workload`; None: exact). `limit`: only the first jobs of the trace.
    `progress`: a progress callback per policy name. `failures` / `serving`: the failure model and
    the serving deployments, if any. `variants`: extra presets by name. `engine`: a name of
    `simulator.ENGINES`. The rest go to `run_simulation` as they are.
    """

    quotas: QuotaSpec | None = None
    estimate: float | None = None
    seed: int = 0
    limit: int | None = None
    cycle_interval_s: float = 60.0
    tick_s: float = 0.0
    progress: Callable[[str], Callable[[float], None] | None] | None = None
    failures: FailureOptions | None = None
    variants: dict[str, Preset] | None = None
    serving: Sequence[Deployment] = ()
    engine: str = "fast"


def compare_policies(
    trace: Sequence[TraceJob], fleet: Fleet, policies: Sequence[str], **options: Unpack[CompareOptions]
) -> Comparison:
    """Replay `trace` on `fleet` under each of `policies` (names of `PRESETS`, or of `variants`:
    extra presets a benchmark defines, e.g. fleetline with another within-team order), planned by
    `engine` (`simulator.ENGINES`: "fast", or "reference", the plain statement of the same rules,
    which gives the same results, slowly); `options` as `CompareSettings` says."""
    settings = CompareSettings(**options)
    quotas, estimate, seed, limit = settings.quotas, settings.estimate, settings.seed, settings.limit
    cycle_interval_s, tick_s, progress = settings.cycle_interval_s, settings.tick_s, settings.progress
    failures, variants, serving, engine = settings.failures, settings.variants, settings.serving, settings.engine
    presets = {**PRESETS, **(variants or {})}
    unknown = [name for name in policies if name not in presets]
    if unknown:
        raise ValueError(f"unknown policy {unknown[0]!r}: expected one of {', '.join(presets)}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if not (0.0 <= tick_s < math.inf):
        raise ValueError(f"tick {tick_s!r}: expected a number of seconds, 0 or more")
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
        preset = presets[name]
        result = run_simulation(
            oracle_jobs(workload.jobs) if preset.oracle else workload.jobs,
            nodes,
            preset.policy(),
            policy_name=name,
            teams=teams,
            quotas=quotas.quotas if quotas else (),
            enforce_quotas=preset.quotas,
            seed=seed,
            cycle_interval_s=cycle_interval_s,
            tick_s=tick_s,
            progress=bar,
            hooks=[
                *([failures.hook(nodes, start_s=w0, until_s=w1)] if failures else []),
                *([serving_hook(serving, nodes, preset.policy(), (w0, w1))] if serving else []),
            ],
            state_options=failures.state_options() if failures else None,
            scheduler=ENGINES[engine],
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
        "tick_s": tick_s,
        "failures": None if failures is None else {"seed": failures.seed, "rate_scale": failures.rate_scale},
        "serving_deployments": [deployment.name for deployment in serving],
    }
    return Comparison(meta, tuple(results))

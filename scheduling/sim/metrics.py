"""The metrics contract of DESIGN.md ("Simulator metrics"), assembled from what the recorder saw.

Choices the contract leaves open, stated once:
- JCT, wait and slowdown are over jobs that finished (completed or killed at their time limit);
  `unfinished` counts jobs that could never start (e.g. beyond their team's quota).
- `jain_fairness`: for each team, x = GPU-seconds used while demanding / GPU-seconds entitled while
  demanding, where the entitlement at each moment is the max-min fair split of the fleet among the
  teams with demand (pending + running GPUs), weighted by guarantees when quotas are given and
  equal otherwise, each capped at its demand. Jain's index of the x values.
- `guarantee_violation_gpu_hours`: per team, unmet = min(pending GPUs, unused guarantee); once
  unmet has been positive for more than 5 minutes in a row, its GPU-time counts.
  `guarantee_violation_fit_gpu_hours` (beyond the contract) counts only demand that fits as whole
  jobs (`formulas.fitting_demand`): a pending job counts only if its whole size fits within its
  team's unused guarantee (a gang bigger than that would borrow to start, and no reclaim within
  the guarantee can serve it).
- `fragmentation_idle_fraction`: idle GPU-seconds while the last plan left some job pending for
  "topology" (enough free GPUs, wrong shape), over capacity x window; a cycle the simulator skips
  (see `gate`) says the same of the jobs it would have left pending.
- `topology_optimal_fraction`: of starts of jobs with more than one GPU, those placed no wider than
  the narrowest domain an empty fleet offers for their size.
- Serving keys (filled by the serving model, `sim.serving.ServingHook`; null / 0 without one):
  `serving_slo_attainment` is the fraction of the replica-seconds demanded in the window that were
  served within each deployment's start-latency objective (`engine.serving.slo_attainment`: a
  late start's whole wait is missed, an on-time start's is not); `serving_start_p99_s` the p99 of
  ask -> serving over replicas asked in the window that were served (handover and restore
  included); `training_preemptions_by_serving` the evictions of other work by serving replicas, and
  `training_lost_gpu_hours_by_serving` their rolled-back work plus the grace period of the GPUs
  handed over; `serving_utilisation` / `serving_goodput` are serving's part of `utilisation` /
  `goodput` (allocated, and serving after handover and restore), and `training_utilisation` /
  `training_goodput` the rest (all of it without a serving model).
- Failure keys are 0 / null until a failure model (hook) reports them.
- `events_per_s` counts arrivals plus FleetState events (starts, completions, evictions, ...).
- `estimate_error_p50` / `estimate_error_p90`: over jobs that waited at least one cycle (left
  pending by the first cycle that saw them, the one at their submission) and started later, the
  ratio of the actual wait to the first estimated wait, both counted from the moment that first
  estimate was shown and each floored at one cycle interval (`ESTIMATE_FLOOR_S`, 60 s), as bounded
  slowdown floors short jobs: ratio = max(actual, 60 s) / max(estimated, 60 s). An estimate of 0
  (or in the past) therefore counts as 60 s: a job told "now" that waited an hour scores 60. A job
  shown no estimate at all (None: the engine could not say when) has no ratio; such jobs are
  counted in `estimate_absent`, the jobs with a ratio in `estimate_jobs`, and `estimate_error_p10`
  shows the other side (estimates too pessimistic). On long traces the simulator records the
  estimates of an even sample of the jobs (every `estimate_sampled_every`-th in submit order; see
  `simulator.run_simulation`). All null when nothing waited or when the replay ran without
  estimates (`record_estimates=False`).
- `estimate_within_range` (beyond the contract): of the jobs with a first estimate that started,
  the share whose start fell within the range shown with that estimate, calibrated on the history
  known when it was shown (`estimate_coverage`); `estimate_range_jobs` those jobs,
  `estimate_range_width_p50` / `estimate_range_high_p50` the median width and high end of the ranges
  over the estimated wait (how useful a range is). Null like the estimate errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.engine import Job

from .estimate_coverage import ShownEstimate, range_coverage
from .formulas import (
    bounded_slowdown,
    estimate_error,
    jain_index,
    limit_ratio,
    mean,
    offered_gpu_s,
    percentile,
    ratio,
)
from .recorder import Recorder

CONTRACT_KEYS: tuple[str, ...] = (
    "capacity_gpus",
    "jobs",
    "window_s",
    "utilisation",
    "goodput",
    "offered_load",
    "limit_ratio",
    "jct_mean_s",
    "jct_p50_s",
    "jct_p95_s",
    "jct_p99_s",
    "wait_mean_s",
    "wait_p99_s",
    "bounded_slowdown_mean",
    "jain_fairness",
    "guarantee_violation_gpu_hours",
    "fragmentation_idle_fraction",
    "racks_per_multinode_job_mean",
    "topology_optimal_fraction",
    "preemptions",
    "preemption_lost_gpu_hours",
    "failures",
    "mttd_mean_s",
    "mttr_mean_s",
    "failure_lost_gpu_hours",
    "serving_slo_attainment",
    "serving_start_p99_s",
    "training_preemptions_by_serving",
    "training_lost_gpu_hours_by_serving",
    "serving_utilisation",
    "training_utilisation",
    "serving_goodput",
    "training_goodput",
    "estimate_error_p50",
    "estimate_error_p90",
    "sim_wall_s",
    "events_per_s",
)
WALL_KEYS: tuple[str, ...] = ("sim_wall_s", "events_per_s")


@dataclass(frozen=True, slots=True)
class TeamShare:
    team: str
    used_gpu_h: float
    entitled_gpu_h: float
    guaranteed_gpus: int

    @property
    def used_over_entitled(self) -> float | None:
        return ratio(self.used_gpu_h, self.entitled_gpu_h)


def team_shares(recorder: Recorder) -> tuple[TeamShare, ...]:
    teams = sorted({team for team, _ in set(recorder.used_gpu_s) | set(recorder.entitled_gpu_s)})
    return tuple(
        TeamShare(
            team,
            sum(v for (t, _), v in recorder.used_gpu_s.items() if t == team) / 3600.0,
            sum(v for (t, _), v in recorder.entitled_gpu_s.items() if t == team) / 3600.0,
            sum(v for (t, _), v in recorder.guarantees.items() if t == team),
        )
        for team in teams
    )


def _jain(recorder: Recorder) -> float | None:
    teams = sorted({team for team, _ in recorder.entitled_gpu_s})
    shares = []
    for team in teams:
        entitled = sum(v for (t, _), v in recorder.entitled_gpu_s.items() if t == team)
        used = sum(v for (t, _), v in recorder.used_while_demanding.items() if t == team)
        if entitled > 0:
            shares.append(used / entitled)
    return jain_index(shares)


@dataclass(frozen=True, slots=True)
class RunTotals:
    """What a replay counted besides its recorder: the policy's name, when it ended, its wall time,
    events and cycles (run and skipped), whether quotas were given, and the hooks' own metrics."""

    policy_name: str
    end_s: float
    wall_s: float
    events: int
    cycles: int
    skipped_cycles: int
    quotas_given: bool
    extra: dict[str, Any]


def build_metrics(recorder: Recorder, jobs: Sequence[Job], totals: RunTotals) -> dict[str, Any]:
    capacity = recorder.capacity_gpus
    window_s = recorder.w1 - recorder.w0
    area = capacity * window_s
    finished = [o for o in recorder.outcomes.values() if o.end_s is not None]
    jct = [o.end_s - o.job.submit_s for o in finished if o.end_s is not None]
    waits = [o.first_start_s - o.job.submit_s for o in finished if o.first_start_s is not None]
    slowdowns = [bounded_slowdown(o.end_s - o.job.submit_s, o.job.duration_s) for o in finished if o.end_s is not None]
    errors, absent = _estimate_errors(recorder)
    coverage = range_coverage(shown_estimates(recorder))
    goodput = ratio(recorder.useful_gpu_s, area)
    offered = ratio(offered_gpu_s([(j.submit_s, j.duration_s, j.gpus) for j in jobs], recorder.w1), area)
    metrics: dict[str, Any] = {
        "capacity_gpus": capacity,
        "jobs": len(jobs),
        "window_s": window_s,
        "utilisation": ratio(recorder.allocated_gpu_s, area),
        "goodput": goodput,
        "offered_load": offered,
        "limit_ratio": limit_ratio(goodput, offered),
        "jct_mean_s": mean(jct),
        "jct_p50_s": percentile(jct, 50),
        "jct_p95_s": percentile(jct, 95),
        "jct_p99_s": percentile(jct, 99),
        "wait_mean_s": mean(waits),
        "wait_p99_s": percentile(waits, 99),
        "bounded_slowdown_mean": mean(slowdowns),
        "jain_fairness": _jain(recorder),
        "guarantee_violation_gpu_hours": sum(m.gpu_s for m in recorder.meters.values()) / 3600.0,
        "guarantee_violation_fit_gpu_hours": sum(m.gpu_s for m in recorder.fit_meters.values()) / 3600.0,
        "fragmentation_idle_fraction": ratio(recorder.fragment_idle_gpu_s, area),
        "racks_per_multinode_job_mean": mean(recorder.multinode_racks),
        "topology_optimal_fraction": ratio(recorder.topology_optimal, recorder.topology_checked),
        "preemptions": recorder.preemptions,
        "preemption_lost_gpu_hours": recorder.preemption_lost_gpu_s / 3600.0,
        "failures": 0,
        "mttd_mean_s": None,
        "mttr_mean_s": None,
        "failure_lost_gpu_hours": recorder.failure_lost_gpu_s / 3600.0,
        "serving_slo_attainment": None,
        "serving_start_p99_s": None,
        "training_preemptions_by_serving": 0,
        "training_lost_gpu_hours_by_serving": 0.0,
        "serving_utilisation": None,
        "training_utilisation": None,
        "serving_goodput": None,
        "training_goodput": None,
        "estimate_error_p50": percentile(errors, 50),
        "estimate_error_p90": percentile(errors, 90),
        "sim_wall_s": totals.wall_s,
        "events_per_s": totals.events / totals.wall_s if totals.wall_s > 0 else None,
    }
    metrics.update({key: value for key, value in totals.extra.items() if key in metrics})
    _split_by_kind(metrics)
    metrics.update(
        {
            "policy": totals.policy_name,
            "completed": sum(1 for o in finished if not o.timed_out),
            "timed_out": sum(1 for o in finished if o.timed_out),
            "unfinished": len(recorder.outcomes) - len(finished),
            "quotas": "given" if totals.quotas_given else "none: teams share the fleet without guarantees",
            "sim_end_s": totals.end_s,
            "cycles": totals.cycles,
            "cycles_skipped": totals.skipped_cycles,
            "events": totals.events,
            "estimate_error_p10": percentile(errors, 10),
            "estimate_jobs": len(errors) if recorder.estimate_every else None,
            "estimate_absent": absent if recorder.estimate_every else None,
            "estimate_sampled_every": recorder.estimate_every or None,
            "estimate_within_range": coverage.within,
            "estimate_range_jobs": coverage.started if recorder.estimate_every else None,
            "estimate_range_width_p50": coverage.width_p50,
            "estimate_range_high_p50": coverage.high_p50,
        }
    )
    return metrics


def _split_by_kind(metrics: dict[str, Any]) -> None:
    """Training (everything that is not serving) gets what serving leaves of utilisation and goodput;
    without a serving model, all of it."""
    for key in ("utilisation", "goodput"):
        total, serving = metrics[key], metrics[f"serving_{key}"]
        if total is not None:
            metrics[f"training_{key}"] = total - (serving or 0.0)


def _estimate_errors(recorder: Recorder) -> tuple[list[float], int]:
    """Estimate error ratios of the jobs that waited and started (see the module docstring), and
    how many waited with no estimate shown."""
    errors: list[float] = []
    absent = 0
    for outcome in recorder.outcomes.values():
        shown_s, started_s = outcome.estimate_shown_s, outcome.first_start_s
        if shown_s is None or started_s is None:
            continue
        if outcome.first_estimate_s is None:
            absent += 1
        else:
            errors.append(estimate_error(started_s - shown_s, outcome.first_estimate_s - shown_s))
    return errors, absent


def shown_estimates(recorder: Recorder) -> list[ShownEstimate]:
    """The first estimates shown with a start (those shown none have no range)."""
    return [
        ShownEstimate(outcome.job.gpus, outcome.estimate_shown_s, outcome.first_estimate_s, outcome.first_start_s)
        for outcome in recorder.outcomes.values()
        if outcome.estimate_shown_s is not None and outcome.first_estimate_s is not None
    ]

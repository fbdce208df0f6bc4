"""Trace jobs shaped for a fleet: engine `Job`s, gangs rounded to whole nodes, impossible jobs dropped.

Multi-node gangs take whole nodes (DESIGN.md), so a gang above one node that is not a multiple of
the node size is rounded up to whole nodes (and counted). A job asking for more GPUs than the fleet
has of its accelerator, or for an accelerator the fleet lacks, can never run: it is dropped and
counted rather than left pending forever.

Time limits: a limit from the trace is the user's limit (backfill plans with it; the job is killed
at it). Without one, `--estimate exact` plans with the true duration and sets no limit (nothing is
killed); a factor `f` sets `time_limit = f x duration`, which backfill plans with and which kills a
job only if it runs `f` times longer than its work (slow placement, restores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.engine import Job

from .fleet import Fleet
from .trace import TraceJob

SERVING_PRIORITY = 100


@dataclass(frozen=True, slots=True)
class Workload:
    jobs: tuple[Job, ...]
    dropped: int
    dropped_reasons: tuple[tuple[str, int], ...]
    rounded: int


def parse_estimate(text: str) -> float | None:
    """`exact` -> None (plan with true durations, no limit); a factor >= 1 like `2.0` -> that factor."""
    if text.strip().lower() == "exact":
        return None
    try:
        factor = float(text)
    except ValueError:
        raise ValueError(f"estimate {text!r} is neither 'exact' nor a factor like 2.0") from None
    if not factor >= 1.0:
        raise ValueError(f"estimate factor {text!r} must be at least 1.0 (limits below the work kill every job)")
    return factor


def _round_gang(gpus: int, per_node: int) -> int:
    if gpus <= per_node or gpus % per_node == 0:
        return gpus
    return -(-gpus // per_node) * per_node


def build_workload(trace: Sequence[TraceJob], fleet: Fleet, *, estimate: float | None = None) -> Workload:
    default_accelerator = fleet.accelerators[0]
    jobs: list[Job] = []
    dropped: dict[str, int] = {}
    rounded = 0
    for item in trace:
        accelerator = item.accelerator or default_accelerator
        per_node = fleet.gpus_per_node(accelerator)
        if per_node is None:
            dropped["unknown-accelerator"] = dropped.get("unknown-accelerator", 0) + 1
            continue
        gpus = _round_gang(item.gpus, per_node)
        min_gpus = None if item.min_gpus is None else _round_gang(item.min_gpus, per_node)
        if min_gpus is not None and min_gpus > gpus:
            min_gpus = gpus
        if (
            min_gpus is not None
            and min_gpus > fleet.capacity_of(accelerator)
            or (min_gpus is None and gpus > fleet.capacity_of(accelerator))
        ):
            dropped["larger-than-fleet"] = dropped.get("larger-than-fleet", 0) + 1
            continue
        gpus = min(gpus, fleet.capacity_of(accelerator))
        max_gpus = (
            None if item.max_gpus is None else min(_round_gang(item.max_gpus, per_node), fleet.capacity_of(accelerator))
        )
        rounded += gpus != item.gpus
        time_limit = item.time_limit_s
        if time_limit is None and estimate is not None:
            time_limit = max(1.0, item.duration_s * estimate)
        serving = item.kind == "serving"
        jobs.append(
            Job(
                id=item.job_id,
                team=item.team,
                kind=item.kind,
                priority=item.priority + (SERVING_PRIORITY if serving and item.priority == 0 else 0),
                preemptible=not serving,
                accelerator=accelerator,
                gpus=gpus,
                duration_s=item.duration_s,
                submit_s=item.submit_s,
                time_limit_s=time_limit,
                min_gpus=min_gpus,
                max_gpus=max_gpus if max_gpus is None or max_gpus >= gpus else gpus,
                checkpoint_interval_s=item.checkpoint_interval_s,
                checkpoint_gb=item.checkpoint_gb,
                checkpoint_on_preempt=item.checkpoint_on_preempt,
            )
        )
    return Workload(tuple(jobs), sum(dropped.values()), tuple(sorted(dropped.items())), rounded)

"""The one model of a job's progress, checkpoints and restore, as small pure functions.

Work is counted in seconds at full size: a job of `duration_s` is done when its progress reaches it.
A run progresses at a rate (its share of its size, slowed by the topology penalty of its placement
level), from an anchor: `anchor_progress_s` of work done at `anchor_s`. It checkpoints every
`checkpoint_interval_s` of work counted from the progress it (re)started with (`base_progress_s`);
an eviction rolls it back to its last checkpoint, and a restart first reads that checkpoint back.

`FleetState` (the engine's clock), the planner's release estimates, the simulator's failure hook and
recorder and the live failures step all use these; the few places that inline one for speed say
which, and `tests/engine/test_progress.py` checks them against these definitions.
"""

from __future__ import annotations

import math

# Work within this many intervals of a checkpoint boundary counts as having reached it: a run
# anchored exactly at a checkpoint (progress rebuilt from floats) must not lose a whole interval.
CHECKPOINT_EPSILON = 1e-9
# Scheduling the pods, container start, NCCL init, warm-up: what every restart pays on top of reading.
DEFAULT_RESTART_OVERHEAD_S = 60.0


def progress_rate(allocated_gpus: int, size_gpus: int, penalty: float) -> float:
    """Seconds of work per second: the share of its size a run holds, slowed by `penalty`."""
    return (allocated_gpus / max(1, size_gpus)) / penalty


def progress_at(anchor_s: float, anchor_progress_s: float, rate: float, duration_s: float, time_s: float) -> float:
    """Work done at `time_s` by a run at `anchor_progress_s` at `anchor_s` progressing at `rate`
    (before its anchor, during a restore, it stands still), never past its duration."""
    if time_s <= anchor_s:
        return anchor_progress_s
    return min(duration_s, anchor_progress_s + (time_s - anchor_s) * rate)


def checkpoint_at(base_progress_s: float, progress_s: float, interval_s: float | None) -> float:
    """The last checkpoint of a run that restarted from `base_progress_s` and is at `progress_s`:
    whole intervals of work since its base (its base, without checkpoints)."""
    if not interval_s or interval_s <= 0:
        return base_progress_s
    done = progress_s - base_progress_s
    return base_progress_s + math.floor(done / interval_s + CHECKPOINT_EPSILON) * interval_s


def time_at_progress(anchor_s: float, anchor_progress_s: float, rate: float, progress_s: float) -> float:
    """When a run progressing at `rate` (> 0) from its anchor reaches `progress_s` of work."""
    return anchor_s + (progress_s - anchor_progress_s) / rate


def next_checkpoint_progress(checkpoint_s: float, interval_s: float | None, duration_s: float) -> float | None:
    """The work at which a run whose last checkpoint is `checkpoint_s` writes its next one; None
    when it does not checkpoint or finishes first."""
    if not interval_s or interval_s <= 0:
        return None
    next_progress = checkpoint_s + interval_s
    return next_progress if next_progress < duration_s else None


def work_gpu_s(to_progress_s: float, from_progress_s: float, size_gpus: int) -> float:
    """GPU-seconds of the work between two points of progress (none when `to` is not past `from`):
    useful work kept, or work rolled back when `from` is the checkpoint a run returns to."""
    return max(0.0, to_progress_s - from_progress_s) * size_gpus


def useful_gpu_s(gpus: int, seconds: float, penalty: float) -> float:
    """GPU-seconds of useful work `gpus` GPUs do in `seconds` on a placement slowed by `penalty`
    (`seconds` at the run's progress rate, counted on its size)."""
    return gpus * seconds / penalty


def kept_on_eviction(
    progress_s: float, checkpoint_s: float, checkpoint_on_preempt: bool, signal_progress_s: float | None
) -> float:
    """The progress an evicted run keeps: its last checkpoint, or, if it checkpoints when told it is
    preempted and was told (at `signal_progress_s` of work), what it had done then."""
    if checkpoint_on_preempt and signal_progress_s is not None:
        return max(checkpoint_s, signal_progress_s)
    return checkpoint_s


def release_after_s(duration_s: float, progress_s: float, size_gpus: int, allocated_gpus: int, penalty: float) -> float:
    """Seconds until a run at `progress_s` finishes its work at its progress rate (`progress_rate`
    of `allocated_gpus`, `size_gpus` and `penalty`), without a time limit or a grace period."""
    remaining = max(0.0, duration_s - progress_s)
    return remaining * size_gpus / max(1, allocated_gpus) * penalty


def worst_runtime_s(duration_s: float, time_limit_s: float | None, size_gpus: int, gpus: int, penalty: float) -> float:
    """How long a start of `gpus` GPUs can hold them: the time limit, else the whole duration at
    the progress rate a placement slowed by `penalty` gives."""
    if time_limit_s is not None:
        return time_limit_s
    return duration_s * penalty * size_gpus / max(1, gpus)


def restore_time_s(
    *,
    checkpoint_gb: float,
    nodes: int,
    storage_gbps: float,
    nic_gbps: float,
    overhead_s: float = 0.0,
    concurrent_gb: float = 0.0,
) -> float:
    """Seconds from a restart's start until its gang computes again.

    A job's checkpoint (``checkpoint_gb`` in total) is sharded over its ``nodes``; every restarting
    node reads its shard at the same moment. Shared storage serves all bytes being restored at once
    (``concurrent_gb``: this job's plus every other job restarting in the same instant) through
    ``storage_gbps`` of aggregate bandwidth; each node's NIC caps its own read at ``nic_gbps``
    (both GB/s). The slower of the two bounds the read; ``overhead_s`` is paid on top.
    """
    if checkpoint_gb <= 0:
        return overhead_s
    total_gb = max(checkpoint_gb, concurrent_gb)
    storage_s = total_gb / storage_gbps
    nic_s = checkpoint_gb / (max(1, nodes) * nic_gbps)
    return overhead_s + max(storage_s, nic_s)


def restore_lower_bound_s(*, checkpoint_gb: float, storage_gbps: float, overhead_s: float = 0.0) -> float:
    """The physical floor: the bytes through the aggregate storage bandwidth, plus the overhead."""
    return overhead_s + max(0.0, checkpoint_gb) / storage_gbps

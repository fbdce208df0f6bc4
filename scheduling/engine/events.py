"""What happened while `FleetState` advanced time or applied a plan."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Started:
    job_id: str
    time_s: float
    allocation: tuple[tuple[str, int], ...]
    level: str
    # Until it makes progress: the handover (its victims' grace period) plus restoring its checkpoint.
    restore_s: float
    # The part of `restore_s` spent waiting for preempted jobs to hand their GPUs over.
    handover_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Completed:
    job_id: str
    time_s: float


@dataclass(frozen=True, slots=True)
class TimedOut:
    job_id: str
    time_s: float
    progress_s: float


@dataclass(frozen=True, slots=True)
class Checkpointed:
    job_id: str
    time_s: float
    progress_s: float


@dataclass(frozen=True, slots=True)
class Evicted:
    """A running job left its GPUs and went back to pending, rolled back to its checkpoint."""

    job_id: str
    time_s: float
    reason: str
    lost_gpu_s: float


@dataclass(frozen=True, slots=True)
class Resized:
    job_id: str
    time_s: float
    allocation: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """A job ended from outside before its work was done (a serving replica scaled down with its
    demand): `was_running`, its work so far counts as done and its GPUs are free; else it left the
    queue."""

    job_id: str
    time_s: float
    was_running: bool


@dataclass(frozen=True, slots=True)
class Rejected:
    """An action that no longer matched the state it was planned on; nothing changed."""

    job_id: str
    time_s: float
    reason: str


Event = Started | Completed | TimedOut | Checkpointed | Evicted | Resized | Rejected | Withdrawn

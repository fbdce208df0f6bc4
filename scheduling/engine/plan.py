"""The vocabulary of decisions one cycle hands to whoever applies it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from .model import Job

# The reason codes and what a blocked job waits for are the shared vocabulary's, re-exported here
# where the engine's modules have always found them.
from .vocabulary import REASON_CAPACITY as REASON_CAPACITY
from .vocabulary import REASON_GUARANTEE as REASON_GUARANTEE
from .vocabulary import REASON_POOL as REASON_POOL
from .vocabulary import REASON_PRIORITY as REASON_PRIORITY
from .vocabulary import REASON_QUOTA as REASON_QUOTA
from .vocabulary import REASON_RESERVED_PREFIX as REASON_RESERVED_PREFIX
from .vocabulary import REASON_TOPOLOGY as REASON_TOPOLOGY
from .vocabulary import WAITS_DOMAIN as WAITS_DOMAIN
from .vocabulary import WAITS_HARDWARE as WAITS_HARDWARE
from .vocabulary import WAITS_JOB as WAITS_JOB
from .vocabulary import WAITS_QUEUE as WAITS_QUEUE
from .vocabulary import WAITS_QUOTA as WAITS_QUOTA
from .vocabulary import WAITS_QUOTA_LIMIT as WAITS_QUOTA_LIMIT
from .vocabulary import reserved_for as reserved_for

Allocation = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Start:
    """Start `job_id` on `allocation`. `replaces` names the jobs preempted in the same plan whose
    GPUs it takes over: they leave now, and the job's first `Preempt.grace_s` is their handover."""

    job_id: str
    allocation: Allocation
    borrowing: bool
    level: str
    replaces: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return sum(gpus for _, gpus in self.allocation)


@dataclass(frozen=True, slots=True)
class Preempt:
    job_id: str
    reason: str
    grace_s: float


@dataclass(frozen=True, slots=True)
class Shrink:
    job_id: str
    allocation: Allocation
    gpus: int


@dataclass(frozen=True, slots=True)
class Grow:
    job_id: str
    allocation: Allocation
    gpus: int
    borrowing: bool = False


@dataclass(frozen=True, slots=True)
class Reserve:
    job_id: str
    node_ids: tuple[str, ...]
    start_s: float


# The reasons a gang is requeued by a node failure: its node died, or lost the GPUs it used (or
# was found slow, which the gang leaves). Such a gang is queued as `Job.requeued_by_failure`.
NODE_FAILED, NODE_DEGRADED = "node-failed", "node-degraded"
FAILURE_REASONS: frozenset[str] = frozenset({NODE_FAILED, NODE_DEGRADED})


@dataclass(frozen=True, slots=True)
class Requeue:
    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Cordon:
    node_id: str
    reason: str


Action = Start | Preempt | Shrink | Grow | Reserve | Requeue | Cordon
ActionT = TypeVar("ActionT", Start, Preempt, Shrink, Grow, Reserve, Requeue, Cordon)


@dataclass(frozen=True, slots=True)
class PendingStatus:
    job_id: str
    reason: str
    estimated_start_s: float | None
    # What the job waits for when there is no estimate to believe: only a `BlockedStatus` says.
    waits_for: ClassVar[str | None] = None


@dataclass(frozen=True, slots=True)
class BlockedStatus(PendingStatus):
    """A pending job without an estimate to believe (none, or beyond the horizon), and what it
    waits for instead: one of the `WAITS_*` forms. A subclass rather than a field of every status:
    setting a fourth slot on each of 10,000 statuses cost about 2 % of a cycle (benchmarks/engine_cycle.py)."""

    waits_for: str | None = None  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Blocker:
    """The one thing that holds a pending job, as facts (`vocabulary.BLOCKER_*` kinds): which limit
    or what it waits for, how many GPUs short, the job ahead, the node, rack or pod. Told from what
    the cycle left (`EndState`); words come from `blocker_text`."""

    kind: str
    accelerator: str
    gpus: int  # the size it waits to start at (an elastic job's smallest)
    short: int = 0  # GPUs short
    have: int = 0  # what there is: in use, free, lent (by kind)
    limit: int | None = None  # the limit in question (by kind)
    team: str | None = None  # the job's team, whose limit or guarantee holds it
    job_id: str | None = None  # the job ahead: kept for, reserved for, of higher priority, first in line
    level: str | None = None  # a topology level: what `domain` is
    domain: str | None = None  # a node id, a rack key (`Node.rack_key`) or a pod


# Tells the blockers of waiting jobs, given in queue order with their reasons (`blockers.describe_blockers`).
Describe = Callable[[Iterable[tuple[Job, str]]], dict[str, Blocker]]


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    pending: tuple[PendingStatus, ...]
    # What the cycle left, to tell each explained job's blocker on demand (`blockers`): the cycle
    # itself never pays for it. Not part of what a plan decides (equality ignores it).
    describe: Describe | None = field(default=None, compare=False, repr=False)

    def blockers(self, jobs: Iterable[Job]) -> dict[str, Blocker]:
        """The `Blocker` of each explained pending job among `jobs` (the snapshot's pending jobs)."""
        if self.describe is None:
            return {}
        by_id = {job.id: job for job in jobs}
        return self.describe((by_id[status.job_id], status.reason) for status in self.pending if status.job_id in by_id)

    def of_type(self, kind: type[ActionT]) -> tuple[ActionT, ...]:
        return tuple(action for action in self.actions if isinstance(action, kind))

    def starts(self) -> tuple[Start, ...]:
        return tuple(action for action in self.actions if isinstance(action, Start))

    def status_of(self, job_id: str) -> PendingStatus | None:
        for status in self.pending:
            if status.job_id == job_id:
                return status
        return None


_new = object.__new__
# The slots' own setters, past the frozen dataclass's __setattr__ (read from the class's namespace:
# mypy types `PendingStatus.job_id` as the field, not as its slot descriptor).
_set_job_id = vars(PendingStatus)["job_id"].__set__
_set_reason = vars(PendingStatus)["reason"].__set__
_set_estimate = vars(PendingStatus)["estimated_start_s"].__set__


def pending_status(job_id: str, reason: str, estimated_start_s: float | None) -> PendingStatus:
    """`PendingStatus(job_id, reason, estimated_start_s)`, built through its slots directly.

    The frozen dataclass's generated `__init__` goes through `object.__setattr__` per field,
    which is most of the cost of explaining a long queue; the result is the same object.
    """
    status = _new(PendingStatus)
    _set_job_id(status, job_id)
    _set_reason(status, reason)
    _set_estimate(status, estimated_start_s)
    return status


def blocked_status(job_id: str, reason: str, waits_for: str) -> BlockedStatus:
    """`BlockedStatus(job_id, reason, None, waits_for)`: no estimate to believe, what it waits for."""
    return BlockedStatus(job_id, reason, None, waits_for)

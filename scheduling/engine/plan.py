"""The vocabulary of decisions one cycle hands to whoever applies it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar

Allocation = tuple[tuple[str, int], ...]

REASON_QUOTA = "quota"
REASON_CAPACITY = "capacity"
REASON_TOPOLOGY = "topology"
REASON_PRIORITY = "priority"
# Work nobody may preempt waits for room within its team's guarantee (or on capacity nobody is
# guaranteed): borrowed GPUs must stay reclaimable by their owners.
REASON_GUARANTEE = "guarantee"
REASON_RESERVED_PREFIX = "reserved-for:"

# What a job without a believable estimate waits for (`BlockedStatus.waits_for`).
WAITS_QUOTA_LIMIT = "quota-limit:"  # + team: larger than the team may ever run (guarantee + borrow)
WAITS_QUOTA = "quota:"  # + team: the team's own running work must end first, beyond the horizon
WAITS_HARDWARE = "hardware"  # more healthy GPUs or whole nodes than the accelerator has
WAITS_DOMAIN = "domain:"  # + level: no rack (or pod) has enough healthy nodes for the gang
WAITS_JOB = "job:"  # + job id: the running job whose end makes room ends beyond the horizon
WAITS_QUEUE = "queue"  # the work queued ahead of it runs beyond the horizon


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
    setting a fourth slot on each of 10,000 statuses cost about 2 % of a cycle (benchmarks/README.md)."""

    waits_for: str | None = None  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    pending: tuple[PendingStatus, ...]

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


def reserved_for(job_id: str) -> str:
    return f"{REASON_RESERVED_PREFIX}{job_id}"

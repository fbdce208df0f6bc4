"""The vocabulary of decisions one cycle hands to whoever applies it."""

from __future__ import annotations

from dataclasses import dataclass

Allocation = tuple[tuple[str, int], ...]

REASON_QUOTA = "quota"
REASON_CAPACITY = "capacity"
REASON_TOPOLOGY = "topology"
REASON_PRIORITY = "priority"
REASON_RESERVED_PREFIX = "reserved-for:"


@dataclass(frozen=True, slots=True)
class Start:
    job_id: str
    allocation: Allocation
    borrowing: bool
    level: str

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


@dataclass(frozen=True, slots=True)
class PendingStatus:
    job_id: str
    reason: str
    estimated_start_s: float | None


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...]
    pending: tuple[PendingStatus, ...]

    def of_type(self, kind: type) -> tuple[Action, ...]:
        return tuple(action for action in self.actions if isinstance(action, kind))

    def starts(self) -> tuple[Start, ...]:
        return tuple(action for action in self.actions if isinstance(action, Start))

    def status_of(self, job_id: str) -> PendingStatus | None:
        for status in self.pending:
            if status.job_id == job_id:
                return status
        return None


def reserved_for(job_id: str) -> str:
    return f"{REASON_RESERVED_PREFIX}{job_id}"

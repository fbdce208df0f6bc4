"""A running job inside FleetState: lazily evaluated progress and checkpoints."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model import Job


@dataclass(frozen=True, slots=True)
class Counters:
    allocated_gpu_s: float
    useful_gpu_s: float
    lost_gpu_s: float
    restore_gpu_s: float
    completed: int
    timed_out: int
    evictions: int


@dataclass(frozen=True, slots=True)
class RunView:
    job: Job
    allocation: tuple[tuple[str, int], ...]
    start_s: float
    level: str
    borrowing: bool
    grace_until_s: float | None
    anchor_s: float
    anchor_progress_s: float
    base_progress_s: float


class RunRecord:
    __slots__ = (
        "job",
        "allocation",
        "gpus",
        "start_s",
        "level",
        "borrowing",
        "grace_until_s",
        "anchor_s",
        "anchor_progress",
        "rate",
        "base_progress",
        "version",
    )

    def __init__(self, job: Job, allocation: tuple[tuple[str, int], ...], start_s: float, level: str) -> None:
        self.job = job
        self.allocation = allocation
        self.gpus = sum(gpus for _, gpus in allocation)
        self.start_s = start_s
        self.level = level
        self.borrowing = False
        self.grace_until_s: float | None = None
        self.anchor_s = start_s
        self.anchor_progress = 0.0
        self.rate = 1.0
        self.base_progress = 0.0
        self.version = 0

    def progress_at(self, time_s: float) -> float:
        if time_s <= self.anchor_s:
            return self.anchor_progress
        return min(self.job.duration_s, self.anchor_progress + (time_s - self.anchor_s) * self.rate)

    def checkpoint_at(self, time_s: float) -> float:
        interval = self.job.checkpoint_interval_s
        if not interval or interval <= 0:
            return self.base_progress
        done = self.progress_at(time_s) - self.base_progress
        return self.base_progress + math.floor(done / interval + 1e-9) * interval

"""A running job inside FleetState: lazily evaluated progress and checkpoints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .model import Job, Running
from .progress import CHECKPOINT_EPSILON, checkpoint_at, progress_at, progress_rate, time_at_progress

_LN2 = math.log(2.0)


@dataclass(frozen=True, slots=True)
class Counters:
    allocated_gpu_s: float
    useful_gpu_s: float
    lost_gpu_s: float
    restore_gpu_s: float
    completed: int
    timed_out: int
    evictions: int


class DecayedUsage:
    """GPU-seconds each team has used, decayed with a half-life (fair share reads it), kept as
    (value, as of, GPUs in use since) per team so that reading it at any time is O(1)."""

    __slots__ = ("half_life_s", "teams")

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self.teams: dict[str, tuple[float, float, int]] = {}

    def at(self, team: str, time_s: float) -> float:
        value, at_s, gpus = self.teams.get(team, (0.0, time_s, 0))
        if self.half_life_s <= 0:
            return 0.0
        decay = math.pow(0.5, max(0.0, time_s - at_s) / self.half_life_s)
        return value * decay + gpus * self.half_life_s / _LN2 * (1.0 - decay)

    def charge(self, team: str, time_s: float, delta_gpus: int) -> None:
        gpus = self.teams.get(team, (0.0, time_s, 0))[2]
        self.teams[team] = (self.at(team, time_s), time_s, gpus + delta_gpus)

    def all_at(self, now: float) -> tuple[tuple[str, float], ...]:
        return tuple(sorted((team, self.at(team, now)) for team in self.teams))


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
    gpus: int  # the allocation's


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
        "signal_progress",
        "release",
        "shown",
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
        # Progress when the job was told it is preempted, if it checkpoints then (see `Job`).
        self.signal_progress: float | None = None
        # When its work is done at its rate from its anchor (no time limit, not throttled), else None.
        self.release: float | None = None
        # What snapshots show of it until it changes (`show_running`); None: not built since.
        self.shown: ShownRunning | None = None

    def progress_at(self, time_s: float) -> float:
        return progress_at(self.anchor_s, self.anchor_progress, self.rate, self.job.duration_s, time_s)

    def checkpoint_at(self, time_s: float) -> float:
        return checkpoint_at(self.base_progress, self.progress_at(time_s), self.job.checkpoint_interval_s)


_new = object.__new__
# The slots' own setters, past the frozen dataclass's __setattr__ (read from the class's namespace:
# mypy types `Running.job` as the field, not as its slot descriptor).
_set_job = vars(Running)["job"].__set__
_set_allocation = vars(Running)["allocation"].__set__
_set_start_s = vars(Running)["start_s"].__set__
_set_progress_s = vars(Running)["progress_s"].__set__
_set_checkpoint_s = vars(Running)["checkpoint_s"].__set__
_set_borrowing = vars(Running)["borrowing"].__set__
_set_grace_until_s = vars(Running)["grace_until_s"].__set__
_set_release_s = vars(Running)["release_s"].__set__


def running_at(run: RunRecord, now: float) -> Running:
    """The frozen `Running` a snapshot at `now` shows for `run` (see `all_running_at`).

    Equal to `Running(job, allocation, start_s, run.progress_at(now), run.checkpoint_at(now),
    borrowing, grace_until_s, anchored_release_s(run, now, penalty))` with the fleet state's level
    penalties (tests/engine/test_fast_paths.py checks it against the definitions).
    """
    return all_running_at((run,), now)[0]


def anchored_release_s(run: RunRecord, now: float, level_penalty: Mapping[str, float]) -> float | None:
    """The release a snapshot at `now` shows for `run` (`Running.release_s`), its plain definition:
    when its work is done at its progress rate counted from its anchor (where its rate last changed),
    for a run without a time limit that progresses at the rate its size and placement level give
    (`level_penalty`: not throttled, not stalled) and has reached its anchor (not restoring); else
    None, and the engine counts from `progress_s` at the cycle's time. The anchored time is the very
    time `FleetState` completes the run, and it does not change from cycle to cycle."""
    job = run.job
    if job.time_limit_s is not None or now < run.anchor_s or run.rate <= 0:
        return None
    if run.rate != progress_rate(run.gpus, job.gpus, level_penalty.get(run.level, 1.0)):
        return None
    return time_at_progress(run.anchor_s, run.anchor_progress, run.rate, job.duration_s)


def all_running_at(runs: Iterable[RunRecord], now: float) -> tuple[Running, ...]:
    """`running_at(run, now)` for each of `runs`, in order: what a snapshot at `now` shows of its
    running jobs, built afresh, one per running job. Both evaluations (`progress.progress_at`,
    `progress.checkpoint_at`) are inlined and the fields set through the slots, in one loop. The
    definition that `FleetState.snapshot`'s kept ones (`show_running`) are held to."""
    shown: list[Running] = []
    append = shown.append
    for run in runs:
        job = run.job
        duration_s = job.duration_s
        if now <= run.anchor_s:
            progress_s = run.anchor_progress
        else:
            progress_s = run.anchor_progress + (now - run.anchor_s) * run.rate
            if progress_s > duration_s:
                progress_s = duration_s
        interval = job.checkpoint_interval_s
        if not interval or interval <= 0:
            checkpoint_s = run.base_progress
        else:
            base = run.base_progress
            checkpoint_s = base + math.floor((progress_s - base) / interval + CHECKPOINT_EPSILON) * interval
        snapshot = _new(Running)
        _set_job(snapshot, job)
        _set_allocation(snapshot, run.allocation)
        _set_start_s(snapshot, run.start_s)
        _set_progress_s(snapshot, progress_s)
        _set_checkpoint_s(snapshot, checkpoint_s)
        _set_borrowing(snapshot, run.borrowing)
        _set_grace_until_s(snapshot, run.grace_until_s)
        _set_release_s(snapshot, run.release if now >= run.anchor_s else None)
        append(snapshot)
    return tuple(shown)


class SnapshotClock:
    """The time of a `FleetState`'s latest snapshot, which its `ShownRunning` read their progress at."""

    __slots__ = ("now",)

    def __init__(self, now: float) -> None:
        self.now = now


class ShownRunning(Running):
    """Fast path: the `Running` a `FleetState` snapshot shows for a run, built once per change of
    the run (start, resize, grace, throttle, restore) and shown again by every snapshot until then,
    instead of one `Running` per running job per cycle (`all_running_at`, the plain definition).

    Its fixed fields are set when it is built; what depends on the time (`progress_s`,
    `checkpoint_s`, `release_s`, `lost_gpu_s`) is read from the run's anchor at the time of the
    fleet state's latest snapshot (`SnapshotClock`), with the very operations of `all_running_at`,
    and only where the engine reads it (victims' lost work, releases that depend on the time). So a
    snapshot's running jobs show the time of the latest snapshot of their fleet state: a snapshot
    is planned on before the next one is taken (the simulator, the live tick and the start
    preview do)."""

    __slots__ = ("run", "clock")

    run: RunRecord
    clock: SnapshotClock

    @property
    def progress_s(self) -> float:
        run, now = self.run, self.clock.now
        if now <= run.anchor_s:
            return run.anchor_progress
        progress_s = run.anchor_progress + (now - run.anchor_s) * run.rate
        duration_s = run.job.duration_s
        return duration_s if progress_s > duration_s else progress_s

    @property
    def checkpoint_s(self) -> float:
        run = self.run
        interval = run.job.checkpoint_interval_s
        if not interval or interval <= 0:
            return run.base_progress
        base = run.base_progress
        return base + math.floor((self.progress_s - base) / interval + CHECKPOINT_EPSILON) * interval

    @property
    def release_s(self) -> float | None:
        run = self.run
        return run.release if self.clock.now >= run.anchor_s else None

    @property
    def lost_gpu_s(self) -> float:
        """`Running.lost_gpu_s` with the progress read once (victims are sorted by it)."""
        run = self.run
        job = run.job
        if job.checkpoint_on_preempt:
            return 0.0
        now = self.clock.now
        if now <= run.anchor_s:
            progress_s = run.anchor_progress
        else:
            progress_s = run.anchor_progress + (now - run.anchor_s) * run.rate
            if progress_s > job.duration_s:
                progress_s = job.duration_s
        interval = job.checkpoint_interval_s
        base = run.base_progress
        if not interval or interval <= 0:
            checkpoint_s = base
        else:
            checkpoint_s = base + math.floor((progress_s - base) / interval + CHECKPOINT_EPSILON) * interval
        return max(0.0, progress_s - checkpoint_s) * job.gpus


_set_run = vars(ShownRunning)["run"].__set__
_set_clock = vars(ShownRunning)["clock"].__set__


def show_running(runs: Iterable[RunRecord], clock: SnapshotClock) -> tuple[Running, ...]:
    """Fast path: what a snapshot at `clock.now` shows of `runs`, in order, equal field by field to
    `all_running_at(runs, clock.now)` (tests/engine/test_fast_paths.py): each run's `ShownRunning`,
    built when the run changed since the last snapshot (`RunRecord.shown` is dropped then)."""
    return tuple([run.shown or _show(run, clock) for run in runs])


def _show(run: RunRecord, clock: SnapshotClock) -> ShownRunning:
    """Build and keep what snapshots show of `run` until it changes."""
    shown = _new(ShownRunning)
    _set_job(shown, run.job)
    _set_allocation(shown, run.allocation)
    _set_start_s(shown, run.start_s)
    _set_borrowing(shown, run.borrowing)
    _set_grace_until_s(shown, run.grace_until_s)
    _set_run(shown, run)
    _set_clock(shown, clock)
    run.shown = shown
    return shown

"""The usage ledger: per tick, GPU-seconds per team, accelerator type and job kind, per job and
fleet calendar day, the fleet's idle and down capacity, and the decayed usage fair share reads.

Two identities hold on every tick, hence on every period of whole ticks:
Σ allocated + idle + down = capacity x interval (``capacity_split``), and useful + lost =
allocated on every row, lost being restore + topology + rolled back by evictions + rolled back
by failures (``_charge``). Borrowed is, per team and accelerator type, the integral of
the GPUs the team held beyond its guarantee, apportioned to its runs with borrowed <= allocated on
every row (``scheduling.cycle.borrowed``). The per-job rows of a day sum to the per-team rows of the
ticks ending on that day."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime

from django.db import connection

from scheduling.bulk_rows import pg_array
from scheduling.cycle.borrowed import Group, Span, borrowed_split
from scheduling.cycle.snapshot import Loaded
from scheduling.engine.fairshare import decay_usage
from scheduling.engine.model import Node
from scheduling.engine.progress import useful_gpu_s
from scheduling.fleet_calendar import fleet_day, fleet_epoch_record
from scheduling.models import AcceleratorType, FleetSample, JobUsage, TeamUsage, UsageSample
from scheduling.tick_outcome import AppliedTick, TickSample

Key = tuple[int, str, str]  # team id, accelerator name, job kind


@dataclass
class _Sums:
    allocated: float = 0.0
    useful: float = 0.0
    lost: float = 0.0
    borrowed: float = 0.0
    restore: float = 0.0
    topology: float = 0.0
    evicted: float = 0.0
    failed: float = 0.0

    def add(self, other: _Sums) -> None:
        self.allocated += other.allocated
        self.useful += other.useful
        self.lost += other.lost
        self.borrowed += other.borrowed
        self.restore += other.restore
        self.topology += other.topology
        self.evicted += other.evicted
        self.failed += other.failed

    @property
    def columns(self) -> tuple[float, ...]:
        """The figures in the order of the ledger's columns (``_SUMS_COLUMNS``)."""
        return (
            self.allocated,
            self.useful,
            self.lost,
            self.borrowed,
            self.restore,
            self.topology,
            self.evicted,
            self.failed,
        )


# The ledger columns ``_Sums`` fills, in the order of ``_Sums.columns``.
_SUMS_COLUMNS = (
    "allocated_gpu_s",
    "useful_gpu_s",
    "lost_gpu_s",
    "borrowed_gpu_s",
    "lost_restore_gpu_s",
    "lost_topology_gpu_s",
    "lost_evicted_gpu_s",
    "lost_failed_gpu_s",
)


@dataclass(frozen=True, slots=True)
class _Held:
    """One run's share of the tick: which job, on which GPUs, from when to when."""

    job_id: int
    key: Key
    allocation: tuple[tuple[str, int], ...]
    gpus: int  # the allocation's
    start_s: float
    useful_from_s: float
    end_s: float
    penalty: float
    borrowing: bool
    rolled_back_gpu_s: float = 0.0
    # The run ended because its hardware failed (a dead, degraded or slow node), not by an
    # eviction the scheduler or an admin chose (`causes.is_failure`).
    failure: bool = False


def _charge(held: _Held, sim_from_s: float, borrowed_gpu_s: float) -> _Sums:
    """What one run did in the tick, its share of its team's borrowed GPU-time given
    (``_borrowed``). Allocated GPU-time splits into useful and lost, and lost into four parts:
    restore, the GPUs held before the run's work resumes (reading its checkpoint back);
    topology, the share of the working time a worse placement wastes (1 - 1/penalty of it);
    and, when the run is evicted, the work since its last checkpoint that the eviction rolls
    back, booked as rolled back by a failure or by an eviction the scheduler chose. That work
    was counted useful in the ticks that did it and moves to lost in the tick that loses it, so
    useful + lost = allocated on every row of every tick (a tick's useful can be below zero
    when it rolls back more than it ran), and lost is exactly the sum of its parts."""
    gpus = held.gpus
    seconds = max(0.0, held.end_s - max(sim_from_s, held.start_s))
    working = max(0.0, held.end_s - max(sim_from_s, held.start_s, held.useful_from_s))
    allocated = gpus * seconds
    restore = gpus * (seconds - working)
    topology = gpus * working - useful_gpu_s(gpus, working, held.penalty)
    failed = held.rolled_back_gpu_s if held.failure else 0.0
    evicted = held.rolled_back_gpu_s - failed
    lost = restore + topology + evicted + failed
    return _Sums(allocated, allocated - lost, lost, borrowed_gpu_s, restore, topology, evicted, failed)


def _borrowed(loaded: Loaded, runs: list[_Held], sim_from_s: float) -> list[float]:
    """Each run's share of the GPU-time its team held beyond its guarantee in the tick, in the
    order of ``runs`` (``scheduling.cycle.borrowed``: the rule). A run holds its GPUs over the same
    span ``_charge`` books as allocated, so the team's GPUs held at each instant are those the
    ledger charges."""
    guaranteed: dict[Group, int] = {(int(quota.team), quota.accelerator): quota.guaranteed for quota in loaded.quotas}
    spans = [
        Span(
            (held.key[0], held.key[1]),
            held.gpus,
            max(sim_from_s, held.start_s),
            held.end_s,
            held.borrowing,
        )
        for held in runs
    ]
    return borrowed_split(spans, guaranteed)


def _runs(loaded: Loaded, applied: AppliedTick, sim_to_s: float) -> list[_Held]:
    """Every run that held GPUs in the tick: those still running and those that ended in it."""
    state, policy = loaded.state, loaded.policy
    runs = []
    for job_id in sorted(state.running):
        run = state.run_view(job_id)
        assert run is not None
        job = run.job
        runs.append(
            _Held(
                int(job_id),
                (int(job.team), job.accelerator, job.kind),
                run.allocation,
                run.gpus,
                run.start_s,
                run.anchor_s,
                sim_to_s,
                policy.penalty(run.level),
                run.borrowing,
            )
        )
    for finished in applied.finished:
        row = loaded.jobs[finished.job_id]
        if row.started_s is None:
            continue
        allocation = loaded.allocations.get(finished.job_id, ())
        runs.append(
            _Held(
                int(finished.job_id),
                (row.team_id, row.accelerator_type__name, row.kind),
                allocation,
                sum(gpus for _, gpus in allocation),
                row.started_s,
                row.anchor_s or row.started_s,
                finished.end_s,
                policy.penalty(row.placement_level or "node"),
                row.borrowing,
                finished.lost_gpu_s,
                finished.failure,
            )
        )
    return runs


@dataclass(frozen=True, slots=True)
class CapacitySplit:
    """The tick's capacity (GPUs x seconds) split three ways, node by node: allocated (a job
    held the GPU, healthy or not: a job on a failed GPU until its eviction is allocated time,
    and lost), down (a GPU out of service, failed or cordoned, that no job held) and idle (the
    rest). allocated + idle + down = capacity x interval exactly."""

    allocated_gpu_s: float
    idle_gpu_s: float
    down_gpu_s: float


def capacity_split(nodes: tuple[Node, ...], held_by_node: dict[str, float], interval_s: float) -> CapacitySplit:
    allocated = idle = down = 0.0
    for node in nodes:
        held = held_by_node.get(node.id, 0.0)
        free = node.gpus * interval_s - held
        out = min(max(0.0, free), (node.gpus - node.usable_gpus) * interval_s)
        allocated += held
        down += out
        idle += free - out
    return CapacitySplit(allocated, idle, down)


def usage_record(
    *, loaded: Loaded, applied: AppliedTick, sim_from_s: float, sim_to_s: float, wall_now: datetime
) -> TickSample:
    state = loaded.state
    by_job: dict[int, tuple[Key, _Sums]] = {}
    held_by_node: dict[str, float] = defaultdict(float)
    gpus_by_kind: dict[str, int] = defaultdict(int)
    runs = _runs(loaded, applied, sim_to_s)
    for held in runs[: len(state.running)]:  # those still running come first
        gpus_by_kind[held.key[2]] += held.gpus
    for held, borrowed_gpu_s in zip(runs, _borrowed(loaded, runs, sim_from_s), strict=True):
        sums = _charge(held, sim_from_s, borrowed_gpu_s)
        seconds = sums.allocated / max(1, held.gpus)
        for node_id, gpus in held.allocation:
            held_by_node[node_id] += gpus * seconds
        if held.job_id in by_job:
            by_job[held.job_id][1].add(sums)
        else:
            by_job[held.job_id] = (held.key, sums)
    interval = max(0.0, sim_to_s - sim_from_s)
    sample = TickSample(
        sim_time_s=sim_to_s,
        capacity_gpus=sum(node.gpus for node in loaded.nodes),
        healthy_gpus=sum(node.usable_gpus for node in loaded.nodes),
        serving_gpus=gpus_by_kind["serving"],
        training_gpus=gpus_by_kind["training"],
        batch_gpus=gpus_by_kind["batch"],
        pending_jobs=len(state.pending),
        running_jobs=len(state.running),
        node_used={node_id: used for node_id, used in state.node_used.items() if used},
    )
    if interval > 0:
        split = capacity_split(loaded.nodes, held_by_node, interval)
        epoch = fleet_epoch_record(wall_now=wall_now, sim_now_s=sim_to_s)
        _samples_write(by_job, sample, split, interval, wall_now)
        _job_usage_write(by_job, fleet_day(sim_to_s, epoch=epoch))
        _team_usage_write(loaded, by_job, sim_to_s)
    return sample


def _by_key(by_job: dict[int, tuple[Key, _Sums]]) -> dict[Key, _Sums]:
    sums: dict[Key, _Sums] = defaultdict(_Sums)
    for key, job_sums in by_job.values():
        sums[key].add(job_sums)
    return sums


def _samples_write(
    by_job: dict[int, tuple[Key, _Sums]], sample: TickSample, split: CapacitySplit, interval: float, wall_now: datetime
) -> None:
    accelerators = dict(AcceleratorType.objects.values_list("name", "id"))
    UsageSample.objects.bulk_create(
        UsageSample(
            sim_time_s=sample.sim_time_s,
            interval_s=interval,
            recorded_at=wall_now,
            team_id=team_id,
            accelerator_type_id=accelerators[accelerator],
            kind=kind,
            **dict(zip(_SUMS_COLUMNS, s.columns, strict=True)),
        )
        for (team_id, accelerator, kind), s in sorted(_by_key(by_job).items())
        if s.allocated or s.lost
    )
    FleetSample.objects.create(
        sim_time_s=sample.sim_time_s,
        interval_s=interval,
        recorded_at=wall_now,
        capacity_gpus=sample.capacity_gpus,
        healthy_gpus=sample.healthy_gpus,
        serving_gpus=sample.serving_gpus,
        training_gpus=sample.training_gpus,
        batch_gpus=sample.batch_gpus,
        idle_gpu_s=split.idle_gpu_s,
        down_gpu_s=split.down_gpu_s,
        pending_jobs=sample.pending_jobs,
        running_jobs=sample.running_jobs,
    )


# Rows per upsert statement where rows are spelled out as VALUES (SQLite): 13 x 500 parameters.
_UPSERT_ROWS = 500
_JOB_USAGE_COLUMNS = ("job_id", "day", "team_id", "accelerator_type_id", "kind")
_JOB_USAGE_ADDED = _SUMS_COLUMNS
_JOB_USAGE_TYPES = ("bigint", "date", "bigint", "bigint", "varchar", *["double precision"] * len(_SUMS_COLUMNS))


def _job_usage_write(by_job: dict[int, tuple[Key, _Sums]], day: date) -> None:
    """Add the tick to each job's row for ``day`` in one ``INSERT ... ON CONFLICT DO UPDATE``:
    on PostgreSQL over ``unnest`` of one array per column (the table keeps free space in its
    pages, fillfactor 50, so these updates stay heap-only and touch no index); elsewhere as
    VALUES lists of 500 rows."""
    rows = [(job_id, key, s) for job_id, (key, s) in sorted(by_job.items()) if s.allocated or s.lost]
    if not rows:
        return
    accelerators = dict(AcceleratorType.objects.values_list("name", "id"))
    table = connection.ops.quote_name(JobUsage._meta.db_table)
    columns = (*_JOB_USAGE_COLUMNS, *_JOB_USAGE_ADDED)
    on_conflict = ", ".join(f"{c} = {table}.{c} + EXCLUDED.{c}" for c in _JOB_USAGE_ADDED)
    head = f"INSERT INTO {table} ({', '.join(columns)}) "
    tail = f" ON CONFLICT (job_id, day) DO UPDATE SET {on_conflict}"
    day_value = connection.ops.adapt_datefield_value(day)
    values = [
        (job_id, day_value, team_id, accelerators[accelerator], kind, *s.columns)
        for job_id, (team_id, accelerator, kind), s in rows
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            arrays = ", ".join(f"%s::{t}[]" for t in _JOB_USAGE_TYPES)
            columns_values = [pg_array(c, t) for c, t in zip(zip(*values, strict=True), _JOB_USAGE_TYPES, strict=True)]
            cursor.execute(f"{head}SELECT * FROM unnest({arrays}){tail}", columns_values)
            return
        for at in range(0, len(values), _UPSERT_ROWS):
            chunk = values[at : at + _UPSERT_ROWS]
            spelled = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(chunk))
            cursor.execute(f"{head}VALUES {spelled}{tail}", [v for row in chunk for v in row])


def _team_usage_write(loaded: Loaded, by_job: dict[int, tuple[Key, _Sums]], sim_to_s: float) -> None:
    """Decay every team's usage to ``sim_to_s`` and add what it held in this tick."""
    half_life = loaded.policy.fairshare_half_life_s
    used: dict[int, float] = defaultdict(float)
    for (team_id, _, _), s in by_job.values():
        used[team_id] += s.allocated
    rows = []
    for team in loaded.teams:
        team_id = int(team.id)
        value, as_of = loaded.team_usage.get(team_id, (0.0, sim_to_s))
        decayed = decay_usage(value, sim_to_s - as_of, half_life)
        rows.append(TeamUsage(team_id=team_id, decayed_gpu_s=decayed + used[team_id], as_of_s=sim_to_s))
    TeamUsage.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["team"], update_fields=["decayed_gpu_s", "as_of_s"]
    )

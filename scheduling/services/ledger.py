"""The usage ledger: per tick, GPU-seconds per team, accelerator type and job kind, the fleet's
idle and down capacity, and the decayed usage that fair share reads."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from scheduling.engine.fairshare import decay_usage
from scheduling.models import AcceleratorType, FleetSample, TeamUsage, UsageSample
from scheduling.services.apply import AppliedTick
from scheduling.services.snapshot import Loaded

Key = tuple[int, str, str]  # team id, accelerator name, job kind


@dataclass(frozen=True, slots=True)
class TickSample:
    sim_time_s: float
    capacity_gpus: int
    healthy_gpus: int
    serving_gpus: int
    training_gpus: int
    batch_gpus: int
    pending_jobs: int
    running_jobs: int
    node_used: dict[str, int]

    @property
    def allocated_gpus(self) -> int:
        return self.serving_gpus + self.training_gpus + self.batch_gpus

    @property
    def utilisation(self) -> float:
        return self.allocated_gpus / self.capacity_gpus if self.capacity_gpus else 0.0


@dataclass
class _Sums:
    allocated: float = 0.0
    useful: float = 0.0
    lost: float = 0.0
    borrowed: float = 0.0


def _charge(
    sums: _Sums,
    gpus: int,
    start_s: float,
    useful_from_s: float,
    end_s: float,
    sim_from_s: float,
    penalty: float,
    borrowing: bool,
) -> None:
    held = max(0.0, end_s - max(sim_from_s, start_s))
    working = max(0.0, end_s - max(sim_from_s, start_s, useful_from_s))
    sums.allocated += gpus * held
    sums.useful += gpus * working / penalty
    if borrowing:
        sums.borrowed += gpus * held


def usage_record(
    *, loaded: Loaded, applied: AppliedTick, sim_from_s: float, sim_to_s: float, wall_now: datetime
) -> TickSample:
    state, policy = loaded.state, loaded.policy
    sums: dict[Key, _Sums] = defaultdict(_Sums)
    gpus_by_kind: dict[str, int] = defaultdict(int)
    for job_id in sorted(state.running):
        run = state.run_view(job_id)
        assert run is not None
        job = run.job
        gpus = sum(g for _, g in run.allocation)
        gpus_by_kind[job.kind] += gpus
        _charge(
            sums[(int(job.team), job.accelerator, job.kind)],
            gpus,
            run.start_s,
            run.anchor_s,
            sim_to_s,
            sim_from_s,
            policy.penalty(run.level),
            run.borrowing,
        )
    for finished in applied.finished:
        row = loaded.jobs[finished.job_id]
        if row.started_s is None:
            continue
        key = (row.team_id, row.accelerator_type__name, row.kind)
        gpus = sum(g for _, g in loaded.allocations.get(finished.job_id, ()))
        _charge(
            sums[key],
            gpus,
            row.started_s,
            row.anchor_s or row.started_s,
            finished.end_s,
            sim_from_s,
            policy.penalty(row.placement_level or "node"),
            row.borrowing,
        )
        sums[key].lost += finished.lost_gpu_s
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
        _samples_write(sums, sample, interval, wall_now)
        _team_usage_write(loaded, sums, sim_to_s)
    return sample


def _samples_write(sums: dict[Key, _Sums], sample: TickSample, interval: float, wall_now: datetime) -> None:
    accelerators = dict(AcceleratorType.objects.values_list("name", "id"))
    UsageSample.objects.bulk_create(
        UsageSample(
            sim_time_s=sample.sim_time_s,
            interval_s=interval,
            recorded_at=wall_now,
            team_id=team_id,
            accelerator_type_id=accelerators[accelerator],
            kind=kind,
            allocated_gpu_s=s.allocated,
            useful_gpu_s=s.useful,
            lost_gpu_s=s.lost,
            borrowed_gpu_s=s.borrowed,
        )
        for (team_id, accelerator, kind), s in sorted(sums.items())
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
        idle_gpu_s=max(0, sample.healthy_gpus - sample.allocated_gpus) * interval,
        down_gpu_s=max(0, sample.capacity_gpus - sample.healthy_gpus) * interval,
        pending_jobs=sample.pending_jobs,
        running_jobs=sample.running_jobs,
    )


def _team_usage_write(loaded: Loaded, sums: dict[Key, _Sums], sim_to_s: float) -> None:
    """Decay every team's usage to ``sim_to_s`` and add what it held in this tick."""
    half_life = loaded.policy.fairshare_half_life_s
    used: dict[int, float] = defaultdict(float)
    for (team_id, _, _), s in sums.items():
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

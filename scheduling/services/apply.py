"""Write one cycle's outcome: what FleetState ended in, against what the database held.

Each changed job is written under a guarded update (expected state and version) inside its own
savepoint together with its allocations and its nodes' GPU counters, so a gang lands whole or
not at all; the database's check constraint refuses any double-booked node. Jobs that release
GPUs are written before jobs that take them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from scheduling import engine
from scheduling.models import Allocation, Job, SchedulerEvent
from scheduling.services.jobs import nodes_shift
from scheduling.services.snapshot import Loaded

Alloc = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class JobChange:
    job_id: int
    team_id: int
    state: str
    event: str
    message: str


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """A run that ended inside this tick, for the usage ledger."""

    job_id: str
    end_s: float
    lost_gpu_s: float


@dataclass
class AppliedTick:
    changes: list[JobChange] = field(default_factory=list)
    finished: list[FinishedRun] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def count(self, event: str) -> int:
        return sum(1 for change in self.changes if change.event == event)


def _touched(events: list[engine.Event], plan: engine.Plan) -> dict[str, list[engine.Event]]:
    touched: dict[str, list[engine.Event]] = defaultdict(list)
    for event in events:
        if not isinstance(event, engine.Rejected):
            touched[event.job_id].append(event)
    for action in plan.actions:
        if isinstance(action, engine.Preempt):
            touched.setdefault(action.job_id, [])
    return touched


def _final_fields(
    loaded: Loaded, job_id: str, history: list[engine.Event], sim_now_s: float
) -> tuple[dict[str, Any], Alloc, str, str]:
    """Fields to write, the final allocation, the event kind and its message."""
    state = loaded.state
    run = state.run_view(job_id)
    if run is not None:
        fields = {
            "state": Job.State.RUNNING,
            "started_s": run.start_s,
            "anchor_s": run.anchor_s,
            "anchor_progress_s": run.anchor_progress_s,
            "base_progress_s": run.base_progress_s,
            "borrowing": run.borrowing,
            "placement_level": run.level,
            "grace_until_s": run.grace_until_s,
        }
        kind, message = _running_event(history, run)
        return fields, run.allocation, kind, message
    pending = state.pending.get(job_id)
    if pending is not None:
        evicted = [e for e in history if isinstance(e, engine.Evicted)]
        fields = {
            "state": Job.State.PENDING,
            "saved_progress_s": state.saved_progress.get(job_id, 0.0),
            "attained_gpu_s": pending.attained_gpu_s,
            "grace_until_s": None,
            "borrowing": False,
            "placement_level": "",
            "restarts": F("restarts") + len(evicted),
        }
        reason = evicted[-1].reason if evicted else "requeued"
        lost_h = sum(e.lost_gpu_s for e in evicted) / 3600
        return (
            fields,
            (),
            SchedulerEvent.Kind.EVICTED,
            f"Evicted ({reason}); {lost_h:.1f} GPU-h rolled back to checkpoint",
        )
    timed_out = any(isinstance(e, engine.TimedOut) for e in history)
    fields = {
        "state": Job.State.TIMED_OUT if timed_out else Job.State.COMPLETED,
        "finished_s": next(
            (e.time_s for e in history if isinstance(e, (engine.Completed, engine.TimedOut))), sim_now_s
        ),
        "grace_until_s": None,
    }
    if timed_out:
        return fields, (), SchedulerEvent.Kind.TIMED_OUT, "Killed at its time limit"
    return fields, (), SchedulerEvent.Kind.COMPLETED, "Completed"


def _running_event(history: list[engine.Event], run: engine.RunView) -> tuple[str, str]:
    gpus = sum(g for _, g in run.allocation)
    if any(isinstance(e, engine.Started) for e in history):
        restore = next((e.restore_s for e in history if isinstance(e, engine.Started)), 0.0)
        extra = f", restoring checkpoint for {restore:.0f} s" if restore else ""
        borrowed = " on borrowed quota" if run.borrowing else ""
        return SchedulerEvent.Kind.STARTED, (
            f"Started on {len(run.allocation)} node(s), {gpus} GPUs, {run.level} level{borrowed}{extra}"
        )
    if any(isinstance(e, engine.Resized) for e in history):
        return SchedulerEvent.Kind.RESIZED, f"Resized to {gpus} GPUs"
    grace = f" until fleet time {run.grace_until_s:.0f} s" if run.grace_until_s is not None else ""
    return SchedulerEvent.Kind.PREEMPTING, f"Preemption requested; checkpointing{grace}"


def _node_deltas(old: Alloc, new: Alloc) -> dict[int, int]:
    deltas: dict[int, int] = defaultdict(int)
    for node_id, gpus in old:
        deltas[int(node_id)] -= gpus
    for node_id, gpus in new:
        deltas[int(node_id)] += gpus
    return {node_id: d for node_id, d in deltas.items() if d}


def _job_write(row: Any, fields: dict[str, Any], old: Alloc, new: Alloc) -> bool:
    """One job's change as a unit: guarded update, allocations, node counters."""
    job_id = row.id
    try:
        with transaction.atomic():
            updated = Job.objects.filter(pk=job_id, state=row.state, version=row.version).update(
                **fields, version=F("version") + 1
            )
            if not updated:
                return False
            if old != new:
                if old:
                    Allocation.objects.filter(job_id=job_id).delete()
                if new:
                    Allocation.objects.bulk_create(
                        Allocation(job_id=job_id, node_id=int(node_id), gpus=gpus) for node_id, gpus in new
                    )
                nodes_shift(_node_deltas(old, new))
            return True
    except IntegrityError:
        return False


def plan_apply(*, loaded: Loaded, plan: engine.Plan, events: list[engine.Event], sim_now_s: float) -> AppliedTick:
    applied = AppliedTick()
    writes = []
    for job_id, history in _touched(events, plan).items():
        row = loaded.jobs.get(job_id)
        if row is None:
            continue
        fields, new, kind, message = _final_fields(loaded, job_id, history, sim_now_s)
        old = loaded.allocations.get(job_id, ())
        if old == new and all(getattr(row, name, None) == value for name, value in fields.items()):
            continue
        acquires = any(d > 0 for d in _node_deltas(old, new).values())
        writes.append((acquires, int(job_id), row, fields, old, new, kind, message, history))
    new_events = []
    for _, _, row, fields, old, new, kind, message, history in sorted(writes, key=lambda w: (w[0], w[1])):
        if not _job_write(row, fields, old, new):
            applied.skipped.append(row.id)
            continue
        applied.changes.append(JobChange(row.id, row.team_id, fields["state"], kind, message))
        new_events.append(
            SchedulerEvent(job_id=row.id, team_id=row.team_id, kind=kind, sim_time_s=sim_now_s, message=message)
        )
        for event in history:
            if isinstance(event, (engine.Completed, engine.TimedOut, engine.Evicted)):
                lost = event.lost_gpu_s if isinstance(event, engine.Evicted) else 0.0
                applied.finished.append(FinishedRun(str(row.id), event.time_s, lost))
    SchedulerEvent.objects.bulk_create(new_events)
    return applied

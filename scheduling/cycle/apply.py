"""Write one cycle's outcome: what FleetState ended in, against what the database held.

The rule, for each changed job on its own (``_write_one``, the plain definition): a guarded
update (the state and version the tick read), its allocations replaced and its nodes' GPU
counters shifted, all in one savepoint, so a job and its gang land whole or not at all; the
database's check constraints refuse any double-booked node. Jobs that only release GPUs are
written first, then jobs that release some and take others, then jobs that only take GPUs.

The same outcome in bulk (``_write_in_bulk``, the default): per group a guarded update of every
job in one statement per thousand (``bulk_rows.rows_update``, which returns the ids whose guard
held), then their allocations and node counters in a few statements. Releasing-only and
taking-only groups move every node's counter one way, so the group fits as a whole exactly when
each job fits in turn; if the group's writes break a constraint, its savepoint is rolled back and
the group is written job by job, which keeps every job that fits. Tests apply the same plans both
ways and compare the database.

Scheduler events are inserted with the writes: each eviction is an event of its own that names
its cause, its incident and its node (``causes``) and counts in the job's restarts, even when the
same plan starts the job again; then the job's final event. The live feed is published after
commit (``cycle_tick``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from scheduling import engine
from scheduling.bulk_rows import by_ids, rows_insert, rows_update, rows_update_supported
from scheduling.cycle import causes
from scheduling.cycle.causes import Cause
from scheduling.cycle.failures import STEP_S
from scheduling.cycle.snapshot import Loaded
from scheduling.job_release import nodes_shift
from scheduling.models import Allocation, Job, Node, SchedulerEvent
from scheduling.tick_outcome import AppliedTick, FinishedRun, JobChange

Alloc = tuple[tuple[str, int], ...]

# Write order: jobs that only release GPUs, then jobs that release and take, then jobs that only take.
RELEASES, MOVES, TAKES = 0, 1, 2


def _touched(events: list[engine.Event], plan: engine.Plan) -> dict[str, list[engine.Event]]:
    touched: dict[str, list[engine.Event]] = defaultdict(list)
    for event in events:
        if not isinstance(event, engine.Rejected):
            touched[event.job_id].append(event)
    for action in plan.actions:
        if isinstance(action, engine.Preempt):
            touched.setdefault(action.job_id, [])
    return touched


@dataclass(frozen=True, slots=True)
class EventRow:
    """A scheduler event to insert for a job: an eviction names its cause, its incident and node."""

    kind: str
    sim_time_s: float
    message: str
    cause: str = ""
    incident_id: int | None = None
    node_id: int | None = None


@dataclass(frozen=True, slots=True)
class _Target:
    """What a job ends the tick as: fields to set, counters to add to, its allocation, its final
    event, and the evictions on the way there (with the progress it kept), each an event of its own."""

    fields: dict[str, Any]
    added: dict[str, int]
    allocation: Alloc
    kind: str
    message: str
    evictions: tuple[engine.Evicted, ...] = ()
    kept_s: float = 0.0


def _final_fields(loaded: Loaded, job_id: str, history: list[engine.Event], sim_now_s: float) -> _Target:
    state = loaded.state
    evicted = tuple(e for e in history if isinstance(e, engine.Evicted))
    # Every eviction is a restart, whether the job waits now or the same plan started it again.
    added = {"restarts": len(evicted)} if evicted else {}
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
        return _Target(fields, added, run.allocation, kind, message, evicted, run.base_progress_s)
    pending = state.pending.get(job_id)
    if pending is not None:
        kept_s = state.saved_progress.get(job_id, 0.0)
        fields = {
            "state": Job.State.PENDING,
            "saved_progress_s": kept_s,
            "attained_gpu_s": pending.attained_gpu_s,
            "requeued_by_failure": pending.requeued_by_failure,
            "grace_until_s": None,
            "borrowing": False,
            "placement_level": "",
        }
        # Its eviction is its final event (`_event_rows`); a requeue with no eviction says so.
        return _Target(fields, added, (), SchedulerEvent.Kind.EVICTED, "Requeued", evicted, kept_s)
    timed_out = any(isinstance(e, engine.TimedOut) for e in history)
    fields = {
        "state": Job.State.TIMED_OUT if timed_out else Job.State.COMPLETED,
        "finished_s": next(
            (e.time_s for e in history if isinstance(e, (engine.Completed, engine.TimedOut))), sim_now_s
        ),
        "grace_until_s": None,
    }
    if timed_out:
        return _Target(fields, added, (), SchedulerEvent.Kind.TIMED_OUT, "Killed at its time limit", evicted)
    return _Target(fields, added, (), SchedulerEvent.Kind.COMPLETED, "Completed", evicted)


def _running_event(history: list[engine.Event], run: engine.RunView) -> tuple[str, str]:
    gpus = sum(g for _, g in run.allocation)
    if any(isinstance(e, engine.Started) for e in history):
        started = next(e for e in history if isinstance(e, engine.Started))
        restore = started.restore_s - started.handover_s
        extra = f", taking over preempted jobs' GPUs after {started.handover_s:.0f} s" if started.handover_s else ""
        extra += f", restoring checkpoint for {restore:.0f} s" if restore > 0 else ""
        borrowed = " on borrowed quota" if run.borrowing else ""
        return SchedulerEvent.Kind.STARTED, (
            f"Started on {_nodes(len(run.allocation))}, {gpus} GPUs, {run.level} level{borrowed}{extra}"
        )
    if any(isinstance(e, engine.Resized) for e in history):
        return SchedulerEvent.Kind.RESIZED, f"Resized to {gpus} GPUs"
    grace = f" until fleet time {run.grace_until_s:.0f} s" if run.grace_until_s is not None else ""
    return SchedulerEvent.Kind.PREEMPTING, f"Preemption requested; checkpointing{grace}"


def _nodes(count: int) -> str:
    return "1 node" if count == 1 else f"{count} nodes"


def _rolled_back(lost_gpu_s: float) -> str:
    """GPU-hours rolled back, in a unit that never reads as nothing when something was lost."""
    if lost_gpu_s <= 0:
        return "no work rolled back"
    if lost_gpu_s < 0.1 * 3600:
        return f"{max(1, round(lost_gpu_s / 60)):,} GPU-min rolled back"
    return f"{lost_gpu_s / 3600:.1f} GPU-h rolled back"


def _work(progress_s: float) -> str:
    return f"{progress_s:.0f} s" if progress_s < 3600 else f"{progress_s / 3600:.1f} h"


def eviction_message(cause: Cause, kept_s: float, lost_gpu_s: float) -> str:
    """ "Evicted by node failure on node r1-n1, requeued from its last checkpoint at step 12 (120 s
    of work); 0.4 GPU-h rolled back" (a step is the modelled training step, `failures.STEP_S`)."""
    rolled_back = _rolled_back(lost_gpu_s)
    if kept_s > 0:
        requeued = f"requeued from its last checkpoint at step {int(kept_s // STEP_S):,} ({_work(kept_s)} of work)"
    else:
        requeued = "requeued to start over"
        rolled_back += " to its start" if lost_gpu_s > 0 else ""
    said = requeued if cause.code == causes.REQUEUED else f"{cause.words}, {requeued}"
    return f"{said[0].upper()}{said[1:]}; {rolled_back}"


def _event_rows(target: _Target, found: Cause | None, sim_now_s: float) -> tuple[EventRow, ...]:
    """Each eviction as an event naming its cause (`found`, for the last one: `causes`), then the
    job's final event unless an eviction is it."""
    rows = []
    for i, evicted in enumerate(target.evictions):
        last = i == len(target.evictions) - 1
        cause = found if last and found is not None else Cause(evicted.reason)
        message = eviction_message(cause, target.kept_s, evicted.lost_gpu_s)
        kind = SchedulerEvent.Kind.EVICTED
        rows.append(EventRow(kind, evicted.time_s, message, cause.code, cause.incident_id, cause.node_id))
    if not (target.evictions and target.fields["state"] == Job.State.PENDING):
        message, code = target.message, ""
        if target.kind == SchedulerEvent.Kind.PREEMPTING and found is not None:
            by = found.code.removeprefix(causes.PREEMPTED_BY)
            message = message.replace("requested", f"requested by job {by}") if by != found.code else message
            code = found.code
        rows.append(EventRow(target.kind, sim_now_s, message, code))
    return tuple(rows)


def _node_deltas(old: Alloc, new: Alloc) -> dict[int, int]:
    deltas: dict[int, int] = defaultdict(int)
    for node_id, gpus in old:
        deltas[int(node_id)] -= gpus
    for node_id, gpus in new:
        deltas[int(node_id)] += gpus
    return {node_id: d for node_id, d in deltas.items() if d}


@dataclass(frozen=True, slots=True)
class JobWrite:
    """One job's change, guarded by the state and version the tick read it at."""

    job_id: int
    team_id: int
    expected_state: str
    expected_version: int
    fields: dict[str, Any]
    added: dict[str, int]  # counters to add to (restarts)
    old: Alloc
    new: Alloc
    deltas: dict[int, int]  # node id -> GPUs taken (positive) or released (negative)
    events: tuple[EventRow, ...]  # in order; the last is the job's final event
    history: tuple[engine.Event, ...]

    @property
    def change(self) -> JobChange:
        """The job's change for the tick's readers: its final event, with the cause of its
        eviction (and that eviction's words, if the job started again in the same tick)."""
        final = self.events[-1]
        evicted = [row for row in self.events if row.kind == SchedulerEvent.Kind.EVICTED]
        cause = evicted[-1].cause if evicted else final.cause
        earlier = evicted[-1].message if evicted and evicted[-1] is not final else ""
        return JobChange(self.job_id, self.team_id, self.fields["state"], final.kind, final.message, cause, earlier)

    @property
    def group(self) -> int:
        deltas = self.deltas.values()
        if not any(d > 0 for d in deltas):
            return RELEASES
        return MOVES if any(d < 0 for d in deltas) else TAKES


def _write_one(write: JobWrite) -> bool:
    """The rule for one job: guarded update, allocations, node counters, all or nothing."""
    try:
        with transaction.atomic():
            updated = Job.objects.filter(
                pk=write.job_id, state=write.expected_state, version=write.expected_version
            ).update(
                **write.fields,
                **{name: F(name) + n for name, n in write.added.items()},
                version=F("version") + 1,
            )
            if not updated:
                return False
            if write.old != write.new:
                if write.old:
                    Allocation.objects.filter(job_id=write.job_id).delete()
                if write.new:
                    Allocation.objects.bulk_create(
                        Allocation(job_id=write.job_id, node_id=int(node_id), gpus=gpus) for node_id, gpus in write.new
                    )
                nodes_shift(write.deltas)
            return True
    except IntegrityError:
        return False


def _write_one_by_one(writes: Sequence[JobWrite]) -> set[int]:
    return {write.job_id for write in writes if _write_one(write)}


def _guarded_update(writes: Sequence[JobWrite]) -> set[int]:
    """Every job's guarded update, one statement per thousand jobs with the same fields."""
    shapes: dict[tuple[tuple[str, ...], tuple[str, ...]], list[JobWrite]] = defaultdict(list)
    for write in writes:
        shapes[tuple(write.fields), tuple(write.added)].append(write)
    updated: set[int] = set()
    for (assign, add), group in shapes.items():
        rows = [
            (
                w.job_id,
                w.expected_state,
                w.expected_version,
                *w.fields.values(),
                *w.added.values(),
                1,  # version
            )
            for w in group
        ]
        updated |= rows_update(Job, match=("id", "state", "version"), assign=assign, add=(*add, "version"), rows=rows)
    return updated


def _group_in_bulk(writes: Sequence[JobWrite]) -> set[int]:
    """A group's writes as a few statements: guarded updates, then the allocations and node
    counters of the jobs whose guard held. Raises IntegrityError if any of it breaks a constraint."""
    updated = _guarded_update(writes)
    moved = [w for w in writes if w.job_id in updated and w.old != w.new]
    released = [w.job_id for w in moved if w.old]
    for chunk in by_ids(Allocation.objects.all(), released, field="job_id"):
        chunk.delete()
    rows_insert(
        Allocation,
        columns=("job", "node", "gpus"),
        rows=[(w.job_id, int(node_id), gpus) for w in moved for node_id, gpus in w.new],
    )
    shift: dict[int, int] = defaultdict(int)
    for write in moved:
        for node_id, delta in write.deltas.items():
            shift[node_id] += delta
    rows_update(Node, match=("id",), add=("allocated_gpus",), rows=[(n, d) for n, d in shift.items() if d])
    return updated


def _write_in_bulk(writes: Sequence[JobWrite]) -> set[int]:
    """What ``_write_one_by_one`` writes, group by group in bulk (see the module docstring)."""
    applied: set[int] = set()
    for group in (RELEASES, MOVES, TAKES):
        members = [w for w in writes if w.group == group]
        if group == MOVES or len(members) < 2:
            applied |= _write_one_by_one(members)
            continue
        try:
            with transaction.atomic():
                applied |= _group_in_bulk(members)
        except IntegrityError:
            applied |= _write_one_by_one(members)
    return applied


def _writes(loaded: Loaded, plan: engine.Plan, events: list[engine.Event], sim_now_s: float) -> list[JobWrite]:
    """The jobs the tick changed, in write order."""
    targets = []
    for job_id, history in _touched(events, plan).items():
        row = loaded.jobs.get(job_id)
        if row is None:
            continue
        target = _final_fields(loaded, job_id, history, sim_now_s)
        old = loaded.allocations.get(job_id, ())
        unchanged = old == target.allocation and not target.added
        if unchanged and all(getattr(row, name, None) == value for name, value in target.fields.items()):
            continue
        targets.append((row, history, target, old))
    found = _causes(targets, plan)
    writes = [
        JobWrite(
            job_id=row.id,
            team_id=row.team_id,
            expected_state=row.state,
            expected_version=row.version,
            fields=target.fields,
            added=target.added,
            old=old,
            new=target.allocation,
            deltas=_node_deltas(old, target.allocation),
            events=_event_rows(target, found.get(row.id), sim_now_s),
            history=tuple(history),
        )
        for row, history, target, old in targets
    ]
    return sorted(writes, key=lambda w: (w.group, w.job_id))


def _causes(targets: list[tuple[Any, list[engine.Event], _Target, Alloc]], plan: engine.Plan) -> dict[int, Cause]:
    """Why each job was evicted (its last eviction this tick) or is asked to leave (a preemption
    with a grace period, whose reason the plan holds)."""
    reasons = {row.id: target.evictions[-1].reason for row, _, target, _ in targets if target.evictions}
    found = causes.eviction_causes(reasons=reasons)
    for action in plan.actions:
        if isinstance(action, engine.Preempt) and int(action.job_id) not in found:
            found[int(action.job_id)] = Cause(action.reason)
    return found


Writer = Callable[[Sequence[JobWrite]], set[int]]


def plan_apply(
    *, loaded: Loaded, plan: engine.Plan, events: list[engine.Event], sim_now_s: float, bulk: bool = True
) -> AppliedTick:
    """Write what changed; ``bulk=False`` writes job by job (the definition the bulk path keeps)."""
    writes = _writes(loaded, plan, events, sim_now_s)
    writer: Writer = _write_in_bulk if bulk and rows_update_supported() else _write_one_by_one
    applied_ids = writer(writes)
    return _applied(writes, applied_ids, sim_now_s)


def _applied(writes: Iterable[JobWrite], applied_ids: set[int], sim_now_s: float) -> AppliedTick:
    """The tick's record of what landed, and the scheduler events of the jobs that did."""
    applied = AppliedTick()
    new_events = []
    created_at = timezone.now()
    for write in writes:
        if write.job_id not in applied_ids:
            applied.skipped.append(write.job_id)
            continue
        applied.changes.append(write.change)
        job, team = write.job_id, write.team_id
        new_events += [
            (job, team, e.kind, e.sim_time_s, e.message, e.cause, e.incident_id, e.node_id, created_at)
            for e in write.events
        ]
        # The job's eviction events come first, one per eviction in its history, in order.
        evicted_causes = iter(row.cause for row in write.events if row.kind == SchedulerEvent.Kind.EVICTED)
        for event in write.history:
            if isinstance(event, engine.Evicted):
                failure = causes.is_failure(next(evicted_causes))
                applied.finished.append(FinishedRun(str(write.job_id), event.time_s, event.lost_gpu_s, failure))
            elif isinstance(event, (engine.Completed, engine.TimedOut)):
                applied.finished.append(FinishedRun(str(write.job_id), event.time_s, 0.0))
    rows_insert(SchedulerEvent, columns=EVENT_COLUMNS, rows=new_events)
    return applied


EVENT_COLUMNS = ("job", "team", "kind", "sim_time_s", "message", "cause", "incident", "node", "created_at")

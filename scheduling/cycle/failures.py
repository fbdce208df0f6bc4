"""Failures in the live fleet: heartbeats each tick, the seeded failure model, detection, incidents
(the admin's cordon / uncordon / drain is a user action: `scheduling.services.nodes`).

`failures_tick` runs inside the cycle's transaction, before the snapshot:
1. with ``settings.FLEET_FAILURES`` on, draw this tick's failures from the engine's failure model
   (seeded by the tick number) and apply them (`failure_apply`): a crash opens a ``dead`` incident
   and the node stops heartbeating; a GPU loss opens a ``degraded`` one and a slowdown a ``slow``
   one, each with the gangs the node runs; repaired nodes return (only nodes out of service are
   looked at, each through its latest incident);
2. every node without a crash heartbeats (``last_heartbeat`` = the tick's wall time);
3. dead = no heartbeat for k intervals of fleet time (wall time since the heartbeat x clock speed):
   the node goes ``down`` with no healthy GPU, so the engine's health triage requeues its gangs to
   their checkpoints and the same plan restarts them on healthy capacity;
4. a lost GPU is found by the node's first heartbeat after the loss (this tick's): the node loses
   the GPU and its gangs, stalled since, go back to their checkpoints at once;
5. slow = m steps at the slow pace, on a node running gangs: the node is cordoned and its gangs
   leave at their next checkpoint (at once when the slowdown is severe), through the preemption
   grace mechanism; a slowdown nobody notices ends at the node's repair, which closes its incident;
6. open incidents learn when their gangs were replaced, restored and resumed.
What a failure means for the gangs, what they lose and when they leave are the engine's
(`scheduling.engine.recovery`), and are counted at the same moments as in the simulator's failure
hook (`tests/failures/test_recovery_parity.py` runs both); each gang progresses at the rate the
engine runs it at (its share of its size, slowed by its placement level's topology penalty), and a
slow node's gangs at that rate over the slowdown from the failure on. Lost GPU-seconds per incident:
the stall until detection on every GPU a gang holds and its work since its last checkpoint as of
the failure; a slow node's gangs: the slow stretch until they leave (or end, or the node's repair)
and the work since their last checkpoint when they leave; and every restart's restore.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, OuterRef, Subquery

from scheduling import engine
from scheduling.bulk_rows import rows_update, rows_update_supported
from scheduling.convert import policy_from_row
from scheduling.cycle.causes import Cause, incident_cause, request_words
from scheduling.cycle.snapshot import Loaded
from scheduling.engine.detector import DetectorPolicy
from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, Failure, FailureRates, failures_between
from scheduling.engine.progress import progress_rate
from scheduling.engine.recovery import (
    Gang,
    lost_by_detection_gpu_s,
    restore_gpu_s,
    slow_detected_at,
    slow_gang_exit,
    slow_stretch_gpu_s,
)
from scheduling.models import Allocation, Incident, Job, Node, SchedulerEvent
from scheduling.tick_outcome import AppliedTick
from tenants.models import AuditEvent, FleetPolicy
from tenants.selectors import fleet_policy_for_cycle
from tenants.services.audit import audit_record

# The demo fleet is a few dozen nodes: at the published rates it would see a failure every few
# fleet-weeks. Scaled up, one comes every fleet-hour or so (about a wall minute at 60x).
DEMO_RATE_SCALE = 200.0
STEP_S = 10.0  # modelled training step, for slow-node detection


@dataclass(frozen=True, slots=True)
class FailureTick:
    changed_incident_ids: tuple[int, ...]


def detector_policy(row: FleetPolicy | None) -> DetectorPolicy:
    if row is None:
        return DetectorPolicy()
    return DetectorPolicy(
        heartbeat_interval_s=row.heartbeat_interval_s,
        dead_after_missed=row.dead_after_missed_heartbeats,
        slow_threshold=row.slow_threshold,
        slow_consecutive_steps=row.slow_consecutive_steps,
    )


def failures_tick(*, tick: int, sim_from_s: float, sim_to_s: float, wall_now: datetime, speed: float) -> FailureTick:
    row = fleet_policy_for_cycle()
    policy, penalties = detector_policy(row), policy_from_row(row)
    changed: set[int] = set()
    rates = FailureRates().scaled(DEMO_RATE_SCALE)
    if settings.FLEET_FAILURES:
        changed |= _inject(rates, random.Random(tick), sim_from_s, sim_to_s, penalties, policy)
        changed |= _repair(rates, sim_to_s, wall_now)
    crashed = Incident.objects.filter(kind=Incident.Kind.DEAD, detected_at__isnull=True).values("node_id")
    Node.objects.exclude(state=Node.State.DOWN).exclude(id__in=crashed).update(last_heartbeat=wall_now)
    changed |= _detect_dead(policy, penalties, sim_to_s, wall_now, speed)
    changed |= _detect_gpu_loss(penalties, sim_to_s)
    changed |= _detect_slow(policy, penalties, sim_to_s)
    changed |= _slowdowns_end(rates, sim_to_s)
    changed |= _follow_up(sim_to_s)
    return FailureTick(tuple(sorted(changed)))


def node_kill(*, node: Node, sim_now_s: float) -> Incident:
    """The node stops heartbeating now (what a crash looks like from outside)."""
    return Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=sim_now_s)


def _inject(
    rates: FailureRates,
    rng: random.Random,
    from_s: float,
    to_s: float,
    penalties: engine.Policy,
    policy: DetectorPolicy,
) -> set[int]:
    busy = Incident.objects.filter(resumed_at__isnull=True).values("node_id")
    healthy = Node.objects.filter(state=Node.State.UP).exclude(id__in=busy).values_list("id", flat=True)
    candidates = {str(node_id) for node_id in healthy}
    changed: set[int] = set()
    for failure in failures_between(rng, rates, sorted(candidates), from_s, to_s):
        if failure.node_id in candidates:
            candidates.discard(failure.node_id)
            node = Node.objects.get(pk=int(failure.node_id))
            changed.add(failure_apply(node=node, failure=failure, rates=rates, penalties=penalties, policy=policy).pk)
    return changed


def failure_apply(
    *, node: Node, failure: Failure, rates: FailureRates, penalties: engine.Policy, policy: DetectorPolicy
) -> Incident:
    """What the failure model's `failure` does to `node` when it happens: a crash stops its
    heartbeats; a lost GPU or a slowdown opens an incident with the gangs the node runs, found
    later by the tick's steps. A slowdown nobody will notice (`recovery.slow_detected_at`) costs
    its gangs their slow stretch until the node's repair, counted now."""
    if failure.kind == CRASH:
        return node_kill(node=node, sim_now_s=failure.time_s)
    if failure.kind == GPU_LOSS:
        incident = Incident.objects.create(
            node=node,
            kind=Incident.Kind.DEGRADED,
            gpus_lost=min(failure.gpus_lost, node.healthy_gpus),
            failed_at=failure.time_s,
        )
        incident.jobs.set(jobs_running_on(node.pk))
        return incident
    incident = Incident.objects.create(
        node=node, kind=Incident.Kind.SLOW, slowdown=failure.slowdown, failed_at=failure.time_s
    )
    gangs = _gangs_on(node.pk, penalties)
    incident.jobs.set([job for job, _ in gangs])
    if slow_detected_at(failure.time_s, failure.slowdown, STEP_S, policy, gangs=len(gangs)) is None:
        repaired_s = failure.time_s + rates.repair_s(SLOW)
        lost = sum(
            slow_stretch_gpu_s(
                gang.slowed(failure.time_s, failure.slowdown), failure.time_s, repaired_s, failure.slowdown
            )
            for _, gang in gangs
        )
        Incident.objects.filter(pk=incident.pk).update(lost_gpu_s=lost)
    return incident


def jobs_running_on(node_id: int) -> list[Job]:
    ids = Allocation.objects.filter(node_id=node_id, job__state=Job.State.RUNNING).values("job_id")
    return list(Job.objects.filter(id__in=ids).order_by("id"))


def gang_of(job: Job, gpus: int, penalties: engine.Policy) -> Gang:
    """The `recovery.Gang` of a running job's row holding `gpus` GPUs: it progresses at the rate
    the engine runs it at (its share of its size, slowed by its placement level's penalty)."""
    anchor_s = job.anchor_s if job.anchor_s is not None else job.started_s
    return Gang(
        str(job.pk),
        gpus,
        job.gpus,
        job.duration_s,
        job.checkpoint_interval_s,
        0.0 if anchor_s is None else anchor_s,
        job.anchor_progress_s,
        job.base_progress_s,
        progress_rate(gpus, job.gpus, penalties.penalty(job.placement_level or "node")),
    )


def _gangs_on(node_id: int, penalties: engine.Policy) -> list[tuple[Job, Gang]]:
    return _gangs_of(jobs_running_on(node_id), penalties)


def _caught(incident: Incident, penalties: engine.Policy) -> list[tuple[Job, Gang]]:
    """The incident's gangs still on the run its failure caught (not finished, not restarted)."""
    jobs = incident.jobs.filter(state=Job.State.RUNNING, started_s__lte=incident.failed_at).order_by("id")
    return _gangs_of(list(jobs), penalties)


def _gangs_of(jobs: list[Job], penalties: engine.Policy) -> list[tuple[Job, Gang]]:
    held = _held_gpus([job.pk for job in jobs])
    return [(job, gang_of(job, held.get(job.pk, job.gpus), penalties)) for job in jobs]


def _held_gpus(job_ids: list[int]) -> dict[int, int]:
    """The GPUs each running job holds, over all its nodes."""
    held: dict[int, int] = {}
    for job_id, gpus in Allocation.objects.filter(job_id__in=job_ids).values_list("job_id", "gpus"):
        held[job_id] = held.get(job_id, 0) + gpus
    return held


def _take_jobs(
    incident: Incident, failed_s: float, detected_s: float, penalties: engine.Policy
) -> list[tuple[Job, Gang]]:
    """Attach the node's running gangs and count what they lose (`recovery.lost_by_detection_gpu_s`):
    the stall, and the work since the last checkpoint (which the engine rolls back when it
    requeues them)."""
    gangs = _gangs_on(incident.node_id, penalties)
    incident.jobs.set([job for job, _ in gangs])
    lost = sum(lost_by_detection_gpu_s(gang, failed_s, detected_s) for _, gang in gangs)
    Incident.objects.filter(pk=incident.pk).update(lost_gpu_s=lost)
    return gangs


def _detect_dead(
    policy: DetectorPolicy, penalties: engine.Policy, now_s: float, wall_now: datetime, speed: float
) -> set[int]:
    changed: set[int] = set()
    # Only nodes silent for the whole timeout come back from the database: every other node
    # heartbeated in this tick.
    silent_since = wall_now - timedelta(seconds=(policy.dead_after_s - 1e-6) / speed) if speed > 0 else wall_now
    for node in Node.objects.exclude(state=Node.State.DOWN).filter(last_heartbeat__lte=silent_since):
        silent_s = (wall_now - node.last_heartbeat).total_seconds() * speed  # type: ignore[operator]
        incident = Incident.objects.filter(node=node, kind=Incident.Kind.DEAD, detected_at__isnull=True).first()
        if incident is None:  # stopped heartbeating on its own
            incident = Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=now_s - silent_s)
        Node.objects.filter(pk=node.pk).update(state=Node.State.DOWN, healthy_gpus=0)
        Incident.objects.filter(pk=incident.pk).update(detected_at=now_s)
        gangs = _take_jobs(incident, incident.failed_at, now_s, penalties)
        # The detector acts as the system (no actor): its drains are audited like an admin's.
        audit_record(
            actor=None,
            kind=AuditEvent.Kind.NODE_DRAINED,
            object_repr=f"node {node.name}: no heartbeat for {silent_s:.0f} s",
            before={"state": node.state, "healthy_gpus": node.healthy_gpus},
            after={"state": Node.State.DOWN, "healthy_gpus": 0, "jobs_restarted": len(gangs)},
        )
        changed.add(incident.pk)
    return changed


def _detect_gpu_loss(penalties: engine.Policy, now_s: float) -> set[int]:
    """This tick's heartbeat reports the GPUs lost since the last one: the node loses them, and its
    gangs (stalled since the loss: which member lost the GPU is not known) go back to their
    checkpoints at once (`recovery.lost_by_detection_gpu_s`)."""
    changed: set[int] = set()
    found = Incident.objects.filter(
        kind=Incident.Kind.DEGRADED, detected_at__isnull=True, failed_at__lte=now_s
    ).select_related("node")
    for incident in found:
        lost = incident.gpus_lost
        Node.objects.filter(pk=incident.node_id, healthy_gpus__gte=lost).update(healthy_gpus=F("healthy_gpus") - lost)
        gangs = _caught(incident, penalties)
        lost_gpu_s = sum(lost_by_detection_gpu_s(gang, incident.failed_at, now_s) for _, gang in gangs)
        Incident.objects.filter(pk=incident.pk).update(detected_at=now_s, lost_gpu_s=lost_gpu_s)
        for job, _ in gangs:
            job_requeue_at(job, now_s, cause=incident_cause(incident), now_s=now_s)
        changed.add(incident.pk)
    return changed


def _detect_slow(policy: DetectorPolicy, penalties: engine.Policy, now_s: float) -> set[int]:
    """A slowdown the detector flags by now: at the end of the m-th slow step (`recovery.
    slow_detected_at`, the time recorded), the node is cordoned and each gang the failure caught
    leaves or stays to its end as `recovery.slow_gang_exit` says, which also says what it loses."""
    changed: set[int] = set()
    for incident in Incident.objects.filter(kind=Incident.Kind.SLOW, detected_at__isnull=True).select_related("node"):
        gangs = incident.jobs.count()
        detected_s = slow_detected_at(incident.failed_at, incident.slowdown, STEP_S, policy, gangs=gangs)
        if detected_s is None or detected_s > now_s:
            continue  # not yet, or never flagged (within the noise, or nothing ran there)
        if Node.objects.filter(pk=incident.node_id, state=Node.State.UP).update(state=Node.State.CORDONED):
            audit_record(
                actor=None,
                kind=AuditEvent.Kind.NODE_CORDONED,
                object_repr=f"node {incident.node.name}: steps {incident.slowdown:.2f}x the gang's median",
                before={"state": Node.State.UP},
                after={"state": Node.State.CORDONED},
            )
        lost_gpu_s = 0.0
        for job, gang in _caught(incident, penalties):
            slowed = gang.slowed(incident.failed_at, incident.slowdown)
            leaving = slow_gang_exit(slowed, incident.failed_at, detected_s, incident.slowdown, policy)
            lost_gpu_s += leaving.lost_gpu_s
            if leaving.leaves_s is not None:  # else it finishes first
                job_requeue_at(job, leaving.leaves_s, cause=incident_cause(incident), now_s=detected_s)
        Incident.objects.filter(pk=incident.pk).update(detected_at=detected_s, lost_gpu_s=lost_gpu_s)
        changed.add(incident.pk)
    return changed


def _slowdowns_end(rates: FailureRates, now_s: float) -> set[int]:
    """A slowdown nobody noticed ends at the node's repair: its incident closes then (its slow
    stretch was counted when it began, `failure_apply`)."""
    repair_s = rates.repair_s(SLOW)
    unnoticed = Incident.objects.filter(
        kind=Incident.Kind.SLOW, detected_at__isnull=True, resumed_at__isnull=True, failed_at__lte=now_s - repair_s
    )
    ended = list(unnoticed.values_list("pk", flat=True))
    Incident.objects.filter(pk__in=ended).update(resumed_at=F("failed_at") + repair_s)
    return set(ended)


def throttled_progress_write(*, loaded: Loaded, applied: AppliedTick, sim_now_s: float) -> None:
    """The rows of the gangs this tick's FleetState slowed or stalled (`Loaded.throttled`) take the
    progress the engine gave them by the tick's end (`sim_now_s`): the next tick rebuilds them at
    their placement's full rate from their anchor, then slows them again while their node's
    incident says so. Rows the plan wrote already hold the engine's figures."""
    if not loaded.throttled:
        return
    written = {str(change.job_id) for change in applied.changes}
    rows = [
        (int(job_id), Job.State.RUNNING, sim_now_s, run.progress_at(sim_now_s))
        for job_id, run in loaded.state.running.items()
        if job_id not in written
        and sim_now_s > run.anchor_s
        and any(node_id in loaded.throttled for node_id, _ in run.allocation)
    ]
    # One statement per thousand gangs, however many the failed nodes hold.
    if rows_update_supported():
        rows_update(Job, match=("id", "state"), assign=("anchor_s", "anchor_progress_s"), rows=rows)
        return
    for job_id, state, anchor_s, progress_s in rows:
        Job.objects.filter(pk=job_id, state=state).update(anchor_s=anchor_s, anchor_progress_s=progress_s)


def job_requeue_at(job: Job, at_s: float, *, cause: Cause | None = None, now_s: float | None = None) -> None:
    """Leave at ``at_s`` through the preemption grace: the engine evicts the gang then, back to its
    checkpoint. The version bump turns away a tick that planned on the old row. With a ``cause``
    (asked at fleet time ``now_s``), the job's history records the request, and the eviction, when
    the grace ends, names that cause (`causes.eviction_causes`) rather than a plain "preempted"."""
    updated = Job.objects.filter(pk=job.pk, state=Job.State.RUNNING).update(
        grace_until_s=at_s, version=F("version") + 1
    )
    if not updated or cause is None:
        return
    asked_s = at_s if now_s is None else now_s
    when = "now" if at_s <= asked_s else f"at fleet time {at_s:.0f} s"
    SchedulerEvent.objects.create(
        job_id=job.pk,
        team_id=job.team_id,
        kind=SchedulerEvent.Kind.PREEMPTING,
        sim_time_s=asked_s,
        message=f"Preemption requested: {request_words(cause)}; leaves {when}, back to its last checkpoint",
        cause=cause.code,
        incident_id=cause.incident_id,
        node_id=cause.node_id,
    )


def _follow_up(now_s: float) -> set[int]:
    changed: set[int] = set()
    for incident in Incident.objects.filter(detected_at__isnull=False, resumed_at__isnull=True).prefetch_related(
        "jobs"
    ):
        detected_at = incident.detected_at
        if detected_at is None:  # excluded by the query; says so to the type checker
            continue
        jobs = list(incident.jobs.all())
        back = [j for j in jobs if j.state == Job.State.RUNNING and (j.started_s or 0.0) >= detected_at]
        gone = [j for j in jobs if j.state not in Job.ACTIVE_STATES]
        if len(back) + len(gone) < len(jobs):
            continue
        replaced = max((j.started_s or now_s for j in back), default=detected_at)
        restored = max((j.anchor_s or replaced for j in back), default=replaced)
        held = _held_gpus([j.pk for j in back])
        restore = sum(restore_gpu_s(j.started_s or now_s, j.anchor_s or replaced, held.get(j.pk, j.gpus)) for j in back)
        Incident.objects.filter(pk=incident.pk).update(
            replaced_at=replaced, restored_at=restored, resumed_at=restored, lost_gpu_s=F("lost_gpu_s") + restore
        )
        changed.add(incident.pk)
    return changed


def _repair(rates: FailureRates, now_s: float, wall_now: datetime) -> set[int]:
    """A failed node comes back after its kind's repair time, once nothing else holds it out: its
    latest incident is over (its gangs resumed). Only nodes out of service are looked at, and of
    each only its latest incident, so a tick's work grows with the fleet, not with its history."""
    kinds: dict[str, str] = {Incident.Kind.DEAD: CRASH, Incident.Kind.DEGRADED: GPU_LOSS, Incident.Kind.SLOW: SLOW}
    out_of_service = Node.objects.exclude(state=Node.State.UP, healthy_gpus=F("gpus"))
    latest = Incident.objects.filter(node=OuterRef("node")).order_by("-failed_at").values("failed_at")[:1]
    over = Incident.objects.filter(node__in=out_of_service, resumed_at__isnull=False, failed_at=Subquery(latest))
    repaired: set[int] = set()
    for incident in over.select_related("node"):
        node = incident.node
        if node.pk in repaired or incident.failed_at + rates.repair_s(kinds[incident.kind]) > now_s:
            continue
        Node.objects.filter(pk=node.pk).update(state=Node.State.UP, healthy_gpus=node.gpus, last_heartbeat=wall_now)
        repaired.add(node.pk)
    return set()

"""Failures in the live fleet: heartbeats each tick, the seeded failure model, detection, incidents
(the admin's cordon / uncordon / drain is a user action: `scheduling.services.nodes`).

`failures_tick` runs inside the cycle's transaction, before the snapshot:
1. with ``settings.FLEET_FAILURES`` on, draw this tick's failures from the engine's failure model
   (seeded by the tick number) and apply them: a crash opens a ``dead`` incident and the node stops
   heartbeating; a GPU loss lowers ``healthy_gpus`` at once; a slowdown opens a ``slow`` incident;
2. every node without a crash heartbeats (``last_heartbeat`` = the tick's wall time);
3. dead = no heartbeat for k intervals of fleet time (wall time since the heartbeat x clock speed):
   the node goes ``down`` with no healthy GPU, so the engine's health triage requeues its gangs to
   their checkpoints and the same plan restarts them on healthy capacity;
4. slow = m steps at the slow pace: the node is cordoned and its gangs leave at their next
   checkpoint (at once when the slowdown is severe), through the preemption grace mechanism;
5. open incidents learn when their gangs were replaced, restored and resumed; repaired nodes return
   (only nodes out of service are looked at, each through its latest incident).
What a failure means for the gangs, what they lose and when they leave are the engine's
(`scheduling.engine.recovery`), as in the simulator; each gang progresses at the rate the engine
runs it at (its share of its size, slowed by its placement level's topology penalty).
Lost GPU-seconds per incident: the stall until detection on every GPU a gang holds, plus its work
since its last checkpoint as of the failure (a slow node's gangs: as of the detection).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, OuterRef, Subquery

from scheduling import engine
from scheduling.convert import policy_from_row
from scheduling.engine.detector import DetectorPolicy
from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, Failure, FailureRates, failures_between
from scheduling.engine.progress import progress_rate
from scheduling.engine.recovery import Gang, lost_by_detection_gpu_s, slow_detected_at, slow_gang_leaves_at
from scheduling.models import Allocation, Incident, Job, Node
from tenants.models import AuditEvent, FleetPolicy
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
    row = FleetPolicy.objects.order_by("pk").first()
    policy, penalties = detector_policy(row), policy_from_row(row)
    changed: set[int] = set()
    if settings.FLEET_FAILURES:
        rates = FailureRates().scaled(DEMO_RATE_SCALE)
        changed |= _inject(rates, random.Random(tick), sim_from_s, sim_to_s, penalties)
        changed |= _repair(rates, sim_to_s, wall_now)
    crashed = Incident.objects.filter(kind=Incident.Kind.DEAD, detected_at__isnull=True).values("node_id")
    Node.objects.exclude(state=Node.State.DOWN).exclude(id__in=crashed).update(last_heartbeat=wall_now)
    changed |= _detect_dead(policy, penalties, sim_to_s, wall_now, speed)
    changed |= _detect_slow(policy, penalties, sim_to_s)
    changed |= _follow_up(sim_to_s)
    return FailureTick(tuple(sorted(changed)))


def node_kill(*, node: Node, sim_now_s: float) -> Incident:
    """The node stops heartbeating now (what a crash looks like from outside)."""
    return Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=sim_now_s)


def _inject(rates: FailureRates, rng: random.Random, from_s: float, to_s: float, penalties: engine.Policy) -> set[int]:
    busy = Incident.objects.filter(resumed_at__isnull=True).values("node_id")
    healthy = Node.objects.filter(state=Node.State.UP).exclude(id__in=busy).values_list("id", flat=True)
    candidates = {str(node_id) for node_id in healthy}
    changed: set[int] = set()
    for failure in failures_between(rng, rates, sorted(candidates), from_s, to_s):
        if failure.node_id in candidates:
            candidates.discard(failure.node_id)
            changed.add(_apply_failure(Node.objects.get(pk=int(failure.node_id)), failure, penalties).pk)
    return changed


def _apply_failure(node: Node, failure: Failure, penalties: engine.Policy) -> Incident:
    if failure.kind == CRASH:
        return node_kill(node=node, sim_now_s=failure.time_s)
    if failure.kind == GPU_LOSS:
        lost = min(failure.gpus_lost, node.healthy_gpus)
        Node.objects.filter(pk=node.pk, healthy_gpus__gte=lost).update(healthy_gpus=F("healthy_gpus") - lost)
        incident = Incident.objects.create(
            node=node, kind=Incident.Kind.DEGRADED, gpus_lost=lost, failed_at=failure.time_s, detected_at=failure.time_s
        )
        _take_jobs(incident, failure.time_s, failure.time_s, penalties)
        return incident
    return Incident.objects.create(
        node=node, kind=Incident.Kind.SLOW, slowdown=failure.slowdown, failed_at=failure.time_s
    )


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
    jobs = jobs_running_on(node_id)
    held: dict[int, int] = {}
    for job_id, gpus in Allocation.objects.filter(job__in=jobs).values_list("job_id", "gpus"):
        held[job_id] = held.get(job_id, 0) + gpus
    return [(job, gang_of(job, held.get(job.pk, job.gpus), penalties)) for job in jobs]


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


def _detect_slow(policy: DetectorPolicy, penalties: engine.Policy, now_s: float) -> set[int]:
    changed: set[int] = set()
    for incident in Incident.objects.filter(kind=Incident.Kind.SLOW, detected_at__isnull=True):
        detected_s = slow_detected_at(incident.failed_at, incident.slowdown, STEP_S, policy)
        if detected_s is None or detected_s > now_s:
            continue  # not yet, or within the noise: never flagged
        if Node.objects.filter(pk=incident.node_id, state=Node.State.UP).update(state=Node.State.CORDONED):
            audit_record(
                actor=None,
                kind=AuditEvent.Kind.NODE_CORDONED,
                object_repr=f"node {incident.node.name}: steps {incident.slowdown:.2f}x the gang's median",
                before={"state": Node.State.UP},
                after={"state": Node.State.CORDONED},
            )
        Incident.objects.filter(pk=incident.pk).update(detected_at=now_s)
        for job, gang in _take_jobs(incident, now_s, now_s, penalties):
            leave_s = slow_gang_leaves_at(gang, now_s, incident.slowdown, policy)
            if leave_s is not None:  # else it finishes before its next checkpoint
                job_requeue_at(job, leave_s)
        changed.add(incident.pk)
    return changed


def job_requeue_at(job: Job, at_s: float) -> None:
    """Leave at ``at_s`` through the preemption grace: the engine evicts the gang then, back to its
    checkpoint. The version bump turns away a tick that planned on the old row."""
    Job.objects.filter(pk=job.pk, state=Job.State.RUNNING).update(grace_until_s=at_s, version=F("version") + 1)


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
        Incident.objects.filter(pk=incident.pk).update(replaced_at=replaced, restored_at=restored, resumed_at=restored)
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

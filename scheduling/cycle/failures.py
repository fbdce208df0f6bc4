"""Failures in the live fleet: heartbeats each tick, the seeded failure model, detection, incidents,
and the admin's cordon / uncordon / drain.

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
5. open incidents learn when their gangs were replaced, restored and resumed; repaired nodes return.
Lost GPU-seconds per incident: the stall until detection plus the work since the last checkpoint,
at full rate (the topology penalty is ignored here).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from scheduling.engine.detector import DetectorPolicy
from scheduling.engine.failures import CRASH, GPU_LOSS, Failure, FailureRates, failures_between
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
    policy = detector_policy(FleetPolicy.objects.order_by("pk").first())
    changed: set[int] = set()
    if settings.FLEET_FAILURES:
        rates = FailureRates().scaled(DEMO_RATE_SCALE)
        changed |= _inject(rates, random.Random(tick), sim_from_s, sim_to_s)
        changed |= _repair(rates, sim_to_s, wall_now)
    crashed = Incident.objects.filter(kind=Incident.Kind.DEAD, detected_at__isnull=True).values("node_id")
    Node.objects.exclude(state=Node.State.DOWN).exclude(id__in=crashed).update(last_heartbeat=wall_now)
    changed |= _detect_dead(policy, sim_to_s, wall_now, speed)
    changed |= _detect_slow(policy, sim_to_s)
    changed |= _follow_up(sim_to_s)
    return FailureTick(tuple(sorted(changed)))


def node_kill(*, node: Node, sim_now_s: float) -> Incident:
    """The node stops heartbeating now (what a crash looks like from outside)."""
    return Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=sim_now_s)


def _inject(rates: FailureRates, rng: random.Random, from_s: float, to_s: float) -> set[int]:
    busy = Incident.objects.filter(resumed_at__isnull=True).values("node_id")
    healthy = Node.objects.filter(state=Node.State.UP).exclude(id__in=busy).values_list("id", flat=True)
    candidates = {str(node_id) for node_id in healthy}
    changed: set[int] = set()
    for failure in failures_between(rng, rates, sorted(candidates), from_s, to_s):
        if failure.node_id in candidates:
            candidates.discard(failure.node_id)
            changed.add(_apply_failure(Node.objects.get(pk=int(failure.node_id)), failure).pk)
    return changed


def _apply_failure(node: Node, failure: Failure) -> Incident:
    if failure.kind == CRASH:
        return node_kill(node=node, sim_now_s=failure.time_s)
    if failure.kind == GPU_LOSS:
        lost = min(failure.gpus_lost, node.healthy_gpus)
        Node.objects.filter(pk=node.pk, healthy_gpus__gte=lost).update(healthy_gpus=F("healthy_gpus") - lost)
        incident = Incident.objects.create(
            node=node, kind=Incident.Kind.DEGRADED, gpus_lost=lost, failed_at=failure.time_s, detected_at=failure.time_s
        )
        _take_jobs(incident, failure.time_s, failure.time_s)
        return incident
    return Incident.objects.create(
        node=node, kind=Incident.Kind.SLOW, slowdown=failure.slowdown, failed_at=failure.time_s
    )


def _jobs_on(node_id: int) -> list[Job]:
    ids = Allocation.objects.filter(node_id=node_id, job__state=Job.State.RUNNING).values("job_id")
    return list(Job.objects.filter(id__in=ids).order_by("id"))


def _take_jobs(incident: Incident, failed_s: float, detected_s: float) -> list[Job]:
    """Attach the node's running gangs and count what they lose: the stall, and the work since
    the last checkpoint (which the engine rolls back when it requeues them)."""
    jobs = _jobs_on(incident.node_id)
    incident.jobs.set(jobs)
    lost = 0.0
    for job in jobs:
        progress = job.anchor_progress_s + max(0.0, failed_s - (job.anchor_s or failed_s))
        interval = job.checkpoint_interval_s
        done = progress - job.base_progress_s
        kept = job.base_progress_s + (math.floor(done / interval) * interval if interval else 0.0)
        lost += job.gpus * ((detected_s - failed_s) + max(0.0, progress - kept))
    Incident.objects.filter(pk=incident.pk).update(lost_gpu_s=lost)
    return jobs


def _detect_dead(policy: DetectorPolicy, now_s: float, wall_now: datetime, speed: float) -> set[int]:
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
        jobs = _take_jobs(incident, incident.failed_at, now_s)
        # The detector acts as the system (no actor): its drains are audited like an admin's.
        audit_record(
            actor=None,
            kind=AuditEvent.Kind.NODE_DRAINED,
            object_repr=f"node {node.name}: no heartbeat for {silent_s:.0f} s",
            before={"state": node.state, "healthy_gpus": node.healthy_gpus},
            after={"state": Node.State.DOWN, "healthy_gpus": 0, "jobs_restarted": len(jobs)},
        )
        changed.add(incident.pk)
    return changed


def _detect_slow(policy: DetectorPolicy, now_s: float) -> set[int]:
    changed: set[int] = set()
    for incident in Incident.objects.filter(kind=Incident.Kind.SLOW, detected_at__isnull=True):
        if incident.slowdown <= policy.slow_threshold:
            continue  # within the noise: never flagged; closed when the node is repaired
        detected_s = incident.failed_at + policy.slow_consecutive_steps * STEP_S * incident.slowdown
        if detected_s > now_s:
            continue
        if Node.objects.filter(pk=incident.node_id, state=Node.State.UP).update(state=Node.State.CORDONED):
            audit_record(
                actor=None,
                kind=AuditEvent.Kind.NODE_CORDONED,
                object_repr=f"node {incident.node.name}: steps {incident.slowdown:.2f}x the gang's median",
                before={"state": Node.State.UP},
                after={"state": Node.State.CORDONED},
            )
        Incident.objects.filter(pk=incident.pk).update(detected_at=now_s)
        for job in _take_jobs(incident, now_s, now_s):
            leave_s = now_s if incident.slowdown >= policy.severe_slowdown else _next_checkpoint_s(job, now_s)
            _requeue_at(job, leave_s)
        changed.add(incident.pk)
    return changed


def _next_checkpoint_s(job: Job, now_s: float) -> float:
    interval = job.checkpoint_interval_s
    if not interval or job.anchor_s is None:
        return now_s
    progress = job.anchor_progress_s + max(0.0, now_s - job.anchor_s)
    done = math.floor((progress - job.base_progress_s) / interval) + 1
    return now_s + (job.base_progress_s + done * interval - progress)


def _requeue_at(job: Job, at_s: float) -> None:
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
    """A failed node comes back after its kind's repair time, once nothing else holds it out."""
    kinds: dict[str, str] = {Incident.Kind.DEAD: CRASH, Incident.Kind.DEGRADED: GPU_LOSS, Incident.Kind.SLOW: "slow"}
    for incident in Incident.objects.filter(resumed_at__isnull=False).select_related("node"):
        node = incident.node
        if node.state == Node.State.UP and node.healthy_gpus == node.gpus:
            continue
        if incident.failed_at + rates.repair_s(kinds[incident.kind]) > now_s:
            continue
        newer = Incident.objects.filter(node=node, failed_at__gt=incident.failed_at).exists()
        if not newer:
            Node.objects.filter(pk=node.pk).update(state=Node.State.UP, healthy_gpus=node.gpus, last_heartbeat=wall_now)
    return set()


# Admin actions -----------------------------------------------------------------------------------
NODE_ACTIONS = ("cordon", "uncordon", "drain")


@transaction.atomic
def node_action(*, node: Node, action: str, actor: Any, sim_now_s: float) -> Node:
    """Cordon (no new work), uncordon (back in service), drain (cordon, and every gang on the node
    leaves now, back to its last checkpoint). Audited."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    before = {"state": node.state, "healthy_gpus": node.healthy_gpus}
    if action in ("cordon", "drain") and node.state == Node.State.UP:
        node.state = Node.State.CORDONED
    elif action == "uncordon":
        if node.state == Node.State.DOWN:  # repaired: whole again, heartbeating from the next tick
            node.healthy_gpus, node.last_heartbeat = node.gpus, None
        node.state = Node.State.UP
    node.save(update_fields=["state", "healthy_gpus", "last_heartbeat"])
    if action == "drain":
        for job in _jobs_on(node.pk):
            _requeue_at(job, sim_now_s)
    audit_record(
        actor=actor,
        kind=f"node.{action}",
        object_repr=f"node {node.name}",
        before=before,
        after={"state": node.state, "healthy_gpus": node.healthy_gpus},
    )
    return node

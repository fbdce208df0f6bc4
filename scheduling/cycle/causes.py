"""Why a job left its GPUs, in words, with the incident and the node behind it.

The engine gives every eviction a reason, but not always the one a person would give: a dead node
has no healthy GPU left, so the health triage requeues its gangs as "node-degraded"; a gang that
leaves a slow node, a node that lost a GPU or a drained node goes through the preemption grace
(`failures.job_requeue_at`) and is evicted as "preempted" when its grace ends, ticks after the
preemption or the failure that set it. So the cause of an eviction is found, in this order:

1. the engine's "preempted-by:<job>" (a preemption whose victim left at once);
2. for a grace that ended ("preempted"), the job's pending "Preemption requested" event, which
   recorded why (`failures.job_requeue_at`, or the cycle's `Preempt` action);
3. the open incident the job is caught in: its kind, not the engine's reason, names the cause (a
   dead node's gangs were "evicted by node failure", whatever the triage called it);
4. the engine's reason as it is ("node-failed", "node-degraded"), or else "requeued".

Causes are codes (`SchedulerEvent.cause`, `JobChange.cause`); `cause_words` says them. Two queries
for a tick's evicted jobs, none in a tick without evictions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from scheduling.models import Incident, SchedulerEvent

PREEMPTED_BY = "preempted-by:"
PREEMPTED = "preempted"
NODE_FAILED = "node-failed"
NODE_DEGRADED = "node-degraded"
NODE_SLOW = "node-slow"
NODE_DRAINED = "node-drained"
REQUEUED = "requeued"

INCIDENT_CAUSES: dict[str, str] = {
    Incident.Kind.DEAD: NODE_FAILED,
    Incident.Kind.DEGRADED: NODE_DEGRADED,
    Incident.Kind.SLOW: NODE_SLOW,
}


def is_failure(code: str) -> bool:
    """Whether an eviction's cause is the hardware's (a dead, degraded or slow node), rather than
    a choice: a preemption, a drain or a requeue. The usage ledger books the work such an
    eviction rolls back as lost to failures."""
    return code in INCIDENT_CAUSES.values()


@dataclass(frozen=True, slots=True)
class Cause:
    code: str
    node_name: str = ""
    incident_id: int | None = None
    node_id: int | None = None

    @property
    def words(self) -> str:
        return cause_words(self.code, self.node_name)


def cause_words(code: str, node_name: str = "") -> str:
    """ "preempted by job 12", "evicted by node failure on node r1-n1", "moved off slow node r1-n1"."""
    on = f" on node {node_name}" if node_name else ""
    if code.startswith(PREEMPTED_BY):
        return f"preempted by job {code.removeprefix(PREEMPTED_BY)}"
    if code == NODE_FAILED:
        return f"evicted by node failure{on}"
    if code == NODE_DEGRADED:
        return f"evicted by a lost GPU{on}"
    if code == NODE_SLOW:
        return f"moved off slow node {node_name}" if node_name else "moved off a slow node"
    if code == NODE_DRAINED:
        return f"drained off node {node_name}" if node_name else "drained off its node"
    if code == PREEMPTED:
        return "preempted"
    return "requeued"


def request_words(cause: Cause) -> str:
    """Why a job is asked to leave: "node r1-n1 is slow", "node r1-n1 lost a GPU"."""
    node = f"node {cause.node_name}" if cause.node_name else "its node"
    if cause.code == NODE_SLOW:
        return f"{node} is slow"
    if cause.code == NODE_DEGRADED:
        return f"{node} lost a GPU"
    if cause.code == NODE_FAILED:
        return f"{node} failed"
    if cause.code == NODE_DRAINED:
        return f"{node} is being drained"
    return cause.words


def incident_cause(incident: Incident) -> Cause:
    return Cause(INCIDENT_CAUSES[incident.kind], incident.node.name, incident.pk, incident.node_id)


def eviction_causes(*, reasons: dict[int, str]) -> dict[int, Cause]:
    """The cause of each evicted job's eviction, from the engine's reason (job id -> reason)."""
    causes = {job_id: Cause(reason) for job_id, reason in reasons.items() if reason.startswith(PREEMPTED_BY)}
    rest = sorted(set(reasons) - set(causes))
    if not rest:
        return causes
    requested = _pending_requests([job_id for job_id in rest if reasons[job_id] == PREEMPTED])
    caught = _open_incidents(rest)
    for job_id in rest:
        reason = reasons[job_id]
        if job_id in requested:
            causes[job_id] = requested[job_id]
        elif job_id in caught:
            causes[job_id] = caught[job_id]
        else:
            causes[job_id] = Cause(reason if reason in (PREEMPTED, NODE_FAILED, NODE_DEGRADED) else REQUEUED)
    return causes


def _pending_requests(job_ids: list[int]) -> dict[int, Cause]:
    """The cause each job's latest "Preemption requested" event gave, if no start or eviction
    came after it (so it is the request this eviction carried out)."""
    if not job_ids:
        return {}
    kinds = (SchedulerEvent.Kind.PREEMPTING, SchedulerEvent.Kind.STARTED, SchedulerEvent.Kind.EVICTED)
    latest = SchedulerEvent.objects.filter(job_id=OuterRef("job_id"), kind__in=kinds).order_by("-id").values("id")[:1]
    rows = (
        SchedulerEvent.objects.filter(job_id__in=job_ids, kind=SchedulerEvent.Kind.PREEMPTING, id=Subquery(latest))
        .exclude(cause="")
        .values_list("job_id", "cause", "node__name", "incident_id", "node_id")
    )
    return {job_id: Cause(code, name or "", incident_id, node_id) for job_id, code, name, incident_id, node_id in rows}


def _open_incidents(job_ids: Iterable[int]) -> dict[int, Cause]:
    """Each job's latest detected incident that is not over yet."""
    caught = (
        Incident.jobs.through.objects.filter(
            job_id__in=list(job_ids), incident__detected_at__isnull=False, incident__resumed_at__isnull=True
        )
        .order_by("job_id", "incident__failed_at", "incident_id")
        .values_list("job_id", "incident_id", "incident__kind", "incident__node_id", "incident__node__name")
    )
    return {
        job_id: Cause(INCIDENT_CAUSES[kind], name, incident_id, node_id)
        for job_id, incident_id, kind, node_id, name in caught
    }

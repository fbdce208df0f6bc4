"""The words the engine and the portal share, each defined once with the text people read.

The engine plans in these codes (topology levels, job kinds, within-team orders, the reasons a job
waits and what it waits for); the portal stores them (model choices), offers them (forms), shows
them (templates, through `reason_text` and `waits_text`) and hands their labels to page scripts
(``scheduling.templatetags.fleet.fleet_vocabulary``), all from the tables below. Pure Python: the
engine and the simulator import it without Django.
"""

from __future__ import annotations

# Topology domains, smallest first: a job's placement level is the smallest holding all its nodes.
LEVEL_LABELS: dict[str, str] = {"node": "Node", "rack": "Rack", "pod": "Pod", "fleet": "Fleet"}
LEVELS: tuple[str, ...] = tuple(LEVEL_LABELS)
LEVEL_RANK: dict[str, int] = {level: rank for rank, level in enumerate(LEVELS)}

KIND_LABELS: dict[str, str] = {"training": "Training", "serving": "Serving", "batch": "Batch"}
JOB_KINDS: tuple[str, ...] = tuple(KIND_LABELS)

# How a priority class is ordered across teams (`ordering.order_jobs`).
QUEUE_ORDER_LABELS: dict[str, str] = {
    "fair_share": "Fair share with age, then the order within a team",
    "shortest_limit": "Shortest time limit first, after the jobs that waited the maximum age",
}
QUEUE_ORDERS: tuple[str, ...] = tuple(QUEUE_ORDER_LABELS)

# The order of a team's jobs of equal fair-share score (`ordering.order_jobs`).
WITHIN_TEAM_ORDER_LABELS: dict[str, str] = {
    "submit": "Submit time",
    "shortest_limit": "Shortest time limit first",
    "las": "Least attained service",
}
WITHIN_TEAM_ORDERS: tuple[str, ...] = tuple(WITHIN_TEAM_ORDER_LABELS)

# A job's life: pending -> running -> (preempted or evicted by a failed node: pending again) ->
# completed, cancelled, timed out (killed at its time limit) or failed (its command exited non-zero
# on a real backend).
JOB_STATE_LABELS: dict[str, str] = {
    "pending": "Pending",
    "running": "Running",
    "completed": "Completed",
    "cancelled": "Cancelled",
    "timed_out": "Timed out",
    "failed": "Failed",
}
JOB_STATES: tuple[str, ...] = tuple(JOB_STATE_LABELS)

# Why a job did not start this cycle (`PendingStatus.reason`).
REASON_QUOTA = "quota"
REASON_CAPACITY = "capacity"
REASON_TOPOLOGY = "topology"
REASON_PRIORITY = "priority"
# Work nobody may preempt waits for room within its team's guarantee (or on capacity nobody is
# guaranteed): borrowed GPUs must stay reclaimable by their owners.
REASON_GUARANTEE = "guarantee"
REASON_RESERVED_PREFIX = "reserved-for:"  # + the job whose reservation holds the nodes
# The portal's, not the engine's: submitted since the last cycle, which has not looked at it yet.
REASON_NEW = "new"

REASON_TEXTS: dict[str, str] = {
    REASON_QUOTA: "the team's quota (guarantee plus borrow limit) is in use, or kept for its first waiting job",
    REASON_CAPACITY: "waiting for free GPUs",
    REASON_TOPOLOGY: "GPUs are free, but not together in the node, rack or pod it waits for",
    REASON_GUARANTEE: "work nobody may preempt runs only within the team's guarantee, or on GPUs nobody is guaranteed",
    REASON_PRIORITY: "higher-priority work comes first",
    REASON_NEW: "waiting for the next scheduling cycle",
}
RESERVED_FOR_TEXT = "nodes are reserved for job #{}, which starts first"

# What a job without a believable estimate waits for (`BlockedStatus.waits_for`).
WAITS_QUOTA_LIMIT = "quota-limit:"  # + team: larger than the team may ever run (guarantee + borrow)
WAITS_QUOTA = "quota:"  # + team: the team's own running work must end first, beyond the horizon
WAITS_HARDWARE = "hardware"  # more healthy GPUs or whole nodes than the accelerator has
WAITS_DOMAIN = "domain:"  # + level: no node (rack, pod) of today's healthy ones could hold the gang
WAITS_JOB = "job:"  # + job id: the running job whose end makes room ends beyond the horizon
WAITS_QUEUE = "queue"  # the work queued ahead of it runs beyond the horizon

# In words, by the part of the code before its colon: {subject} is the part after it, {horizon}
# how far ahead estimates are believed.
WAITS_TEXTS: dict[str, str] = {
    WAITS_QUOTA_LIMIT[:-1]: "never, at this size: more GPUs than team {subject} may use (guarantee plus borrow limit)",
    WAITS_QUOTA[:-1]: "when team {subject}'s running jobs make room, beyond the next {horizon}",
    WAITS_HARDWARE: "when more healthy GPUs are in the fleet: it needs more than there are",
    WAITS_DOMAIN[:-1]: "when a {subject} of the fleet has enough healthy nodes for it",
    WAITS_JOB[:-1]: "when job #{subject} ends, beyond the next {horizon}",
    WAITS_QUEUE: "after more than {horizon} of work queued ahead of it",
}
# Where a form's words depend on its subject: a gang bound to one node but larger than the node
# size never starts, however healthy the fleet (a rack or pod may yet get more healthy nodes).
WAITS_TEXTS_BY_SUBJECT: dict[str, str] = {
    f"{WAITS_DOMAIN}node": "never, at this size: more GPUs than one node holds",
}


def reserved_for(job_id: str) -> str:
    return f"{REASON_RESERVED_PREFIX}{job_id}"


def reason_text(reason: str | None) -> str:
    """Why a job waits, in words (a reason code; an unknown code is shown as it is)."""
    if reason and reason.startswith(REASON_RESERVED_PREFIX):
        return RESERVED_FOR_TEXT.format(reason.removeprefix(REASON_RESERVED_PREFIX))
    return REASON_TEXTS.get(reason or "", reason or "—")


def waits_text(waits_for: str | None, *, horizon_s: float) -> str:
    """What a job without a believable estimate waits for, in words (one of the `WAITS_*` forms)."""
    if not waits_for:
        return "unknown"
    kind, _, subject = waits_for.partition(":")
    text = WAITS_TEXTS_BY_SUBJECT.get(waits_for) or WAITS_TEXTS.get(kind)
    return waits_for if text is None else text.format(subject=subject, horizon=f"{horizon_s / 86400:.0f} days")

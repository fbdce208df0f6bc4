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
# Within its team's guarantee, but the quota pool refuses it: the GPUs free now back other teams'
# loans of the guarantee (`quota.QuotaLedger.admit`, "guarantee"), so it waits for those loans.
REASON_POOL = "pool"
REASON_RESERVED_PREFIX = "reserved-for:"  # + the job whose reservation holds the nodes
# The portal's, not the engine's: submitted since the last cycle, which has not looked at it yet.
REASON_NEW = "new"

REASON_TEXTS: dict[str, str] = {
    REASON_QUOTA: "the team's quota (guarantee plus borrow limit) is in use, or kept for its first waiting job",
    REASON_CAPACITY: "waiting for free GPUs",
    REASON_TOPOLOGY: "GPUs are free, but not together in the node, rack or pod it waits for",
    REASON_GUARANTEE: "work nobody may preempt runs only within the team's guarantee, or on GPUs nobody is guaranteed",
    REASON_PRIORITY: "higher-priority work comes first",
    REASON_POOL: "GPUs are free, but they back other teams' loans of the team's guarantee: it waits for those "
    "loans to end or be reclaimed",
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
    WAITS_QUOTA_LIMIT[:-1]: "never, at this size: more GPUs than {who} may use (guarantee plus borrow limit)",
    WAITS_QUOTA[:-1]: "when {who}'s running jobs make room, beyond the next {horizon}",
    WAITS_HARDWARE: "when more healthy GPUs are in the fleet: it needs more than there are",
    WAITS_DOMAIN[:-1]: "when a {subject} of the fleet has enough healthy nodes for it",
    WAITS_JOB[:-1]: "when {who} ends, beyond the next {horizon}",
    WAITS_QUEUE: "after more than {horizon} of work queued ahead of it",
}
# Where a form's words depend on its subject: a gang bound to one node but larger than the node
# size never starts, however healthy the fleet (a rack or pod may yet get more healthy nodes).
WAITS_TEXTS_BY_SUBJECT: dict[str, str] = {
    f"{WAITS_DOMAIN}node": "never, at this size: more GPUs than one node holds",
}


# The one thing that holds a pending job (`plan.Blocker.kind`): which limit, or what it waits
# for, with the facts its text names.
BLOCKER_TEAM_SIZE = "team-size"  # larger than its team may ever hold (guarantee plus borrow limit)
BLOCKER_TEAM_LIMIT = "team-limit"  # its team's running work leaves its limit too little room
BLOCKER_QUOTA_HELD = "quota-held"  # its team's limit is kept for the team's job that waited longer
BLOCKER_BORROWING = "borrowing"  # beyond its team's guarantee, other teams lend too little now
BLOCKER_GUARANTEE = "guarantee"  # unpreemptible work beyond the guarantee: unguaranteed GPUs in use
BLOCKER_PRIORITY = "priority"  # a job ahead of it in the queue (of higher priority, or strict order) goes first
BLOCKER_CAPACITY = "capacity"  # too few free GPUs of its type
BLOCKER_POOL = "pool"  # within its guarantee, but the free GPUs back other teams' loans of it
BLOCKER_TOPOLOGY = "topology"  # free GPUs, but not together in the node, rack or pod it needs
BLOCKER_RESERVED = "reserved"  # the nodes it would use are reserved for a job that starts first

# In words: {team} the job's team's name, {job} the job ahead (name and link), {accelerator} the GPU
# type, {gpus} the size it waits to start at, {short} GPUs short, {have} and {limit} as each kind
# says, {level} a topology level and {where} the node, rack or pod (by name).
BLOCKER_TEXTS: dict[str, str] = {
    BLOCKER_TEAM_SIZE: "it needs {gpus} {accelerator} GPUs, {short} more than {team} may ever hold "
    "({limit}: guarantee plus borrow limit)",
    BLOCKER_TEAM_LIMIT: "{team} holds {have} of the {limit} {accelerator} GPUs it may use (guarantee plus "
    "borrow limit): {short} GPUs short for this job's {gpus}",
    BLOCKER_QUOTA_HELD: "{team}'s quota is kept for {job}, which has waited longer: the team's other jobs may "
    "hold {limit} {accelerator} GPUs, {have} are in use, {short} short for this job's {gpus}",
    BLOCKER_BORROWING: "beyond {team}'s guarantee it must borrow, and other teams lend only {have} "
    "{accelerator} GPUs now: {short} short for this job's {gpus}",
    BLOCKER_GUARANTEE: "work nobody may preempt runs beyond {team}'s guarantee only on the {limit} {accelerator} "
    "GPUs nobody is guaranteed, {have} of them in use: {short} short",
    BLOCKER_PRIORITY: "{job} is ahead of it in the queue for {accelerator} GPUs and goes first",
    BLOCKER_CAPACITY: "{short} more {accelerator} GPUs must free up ({have} free now)",
    BLOCKER_POOL: "{team}'s guarantee is lent to other teams: the {have} free {accelerator} GPUs back their loans, "
    "which must end or be reclaimed before this job's {gpus} start",
    BLOCKER_TOPOLOGY: "it needs {gpus} GPUs together in one {level}: the closest, {where}, has {have} free, "
    "{short} short",
    BLOCKER_RESERVED: "the GPUs it would use, on {where}, are reserved for {job}, which starts first",
}
# Where a kind's words depend on its facts: the first whose condition holds replaces them.
BLOCKER_CAPACITY_BEHIND = "{short} more {accelerator} GPUs must free up ({have} free now); {job} is ahead of it"
BLOCKER_CAPACITY_FREEING = "its {accelerator} GPUs are being freed"
BLOCKER_TOPOLOGY_FLEET = "it needs {gpus} GPUs on whole nodes: {have} are free on whole nodes, {short} short"


def blocker_words(kind: str, *, short: int, has_job: bool, level: str | None) -> str:
    """The text of a blocker of `kind` with those facts, its placeholders unfilled (see `BLOCKER_TEXTS`)."""
    if kind == BLOCKER_CAPACITY:
        if short <= 0:
            return BLOCKER_CAPACITY_FREEING
        return BLOCKER_CAPACITY_BEHIND if has_job else BLOCKER_TEXTS[kind]
    if kind == BLOCKER_TOPOLOGY and level in (None, "fleet"):
        return BLOCKER_TOPOLOGY_FLEET
    return BLOCKER_TEXTS.get(kind, kind)


def reserved_for(job_id: str) -> str:
    return f"{REASON_RESERVED_PREFIX}{job_id}"


def reason_text(reason: str | None) -> str:
    """Why a job waits, in words (a reason code; an unknown code is shown as it is)."""
    if reason and reason.startswith(REASON_RESERVED_PREFIX):
        return RESERVED_FOR_TEXT.format(reason.removeprefix(REASON_RESERVED_PREFIX))
    return REASON_TEXTS.get(reason or "", reason or "—")


# Who a form's subject is when the reader has no name for it (internal ids are never shown where one is).
WAITS_WHO: dict[str, str] = {WAITS_QUOTA_LIMIT[:-1]: "team {}", WAITS_QUOTA[:-1]: "team {}", WAITS_JOB[:-1]: "job #{}"}


def waits_text(waits_for: str | None, *, horizon_s: float, who: str | None = None) -> str:
    """What a job without a believable estimate waits for, in words (one of the `WAITS_*` forms);
    `who` names the team or job of its subject (a team's or job's name rather than its id)."""
    if not waits_for:
        return "unknown"
    kind, _, subject = waits_for.partition(":")
    text = WAITS_TEXTS_BY_SUBJECT.get(waits_for) or WAITS_TEXTS.get(kind)
    if text is None:
        return waits_for
    if who is None:
        who = WAITS_WHO.get(kind, "{}").format(subject)
    return text.format(subject=subject, who=who, horizon=f"{horizon_s / 86400:.0f} days")

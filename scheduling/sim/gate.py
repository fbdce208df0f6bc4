"""Whether a scheduling cycle could change anything: lets the simulator skip cycles that cannot.

A cycle's plan can only change the fleet by starting, preempting, shrinking or growing jobs
(cordons and requeues come from node health, which only hooks change: the gate is not used with
hooks; reservations change nothing until a start uses them). The gate keeps, incrementally, what
each of those needs and calls a cycle worth running when one of these necessary conditions holds:

- start: the free GPUs of an accelerator cover a pending job's smallest size by count, and by
  shape (a node with that many free GPUs for a job that fits on a node, enough whole free nodes
  for a gang). Under strict FIFO (no backfill, submit order, no fair share, no quotas) only the
  head of each accelerator's queue is looked at: the blocked head blocks everyone behind it.
- reclaim by priority (`may_preempt`): a pending job of a strictly higher priority than some
  preemptible running job of its accelerator that is not already leaving (in its grace period).
- reclaim of a guarantee: a pending job whose team has guarantee left, at least
  `Policy.reclaim_guaranteed_share` of the job's smallest size (the rules "reclaim share" and
  "guarantee" of `engine.quota`, whose functions the gate calls),
  while some other team of that accelerator uses more than its own guarantee once what it already
  has leaving is gone ("loans only": the victim's team must stay covered); for a
  partial reclaim (less than the whole smallest size within the guarantee left), such a team must
  also run work whose lost work is bounded (`preemption.partial_reclaim_takes`: it checkpoints, or
  it (re)started within `Policy.partial_reclaim_young_s` of now), the only loans a partial reclaim
  takes, and those loans a victim search could take (`preemption.may_preempt`: preemptible, started
  as loans, each leaving its team covered on its own), with the free GPUs and any work already
  leaving, must make room for the job by shape (`room_by_shape`: within one node, or whole nodes
  for a gang). At overload most partial reclaimers found none: without checkpoints on Philly at
  load 1.07, 15,574 of 15,641 cycles run for one acted on nothing before this. A reclaim within
  the guarantee needs such room too, from any loan that leaves its team covered (with both,
  27,678 cycles run instead of 41,555, the same plans). Costs, levels and reservations are not
  looked at, which only makes the condition weaker.
- elastic growth: free GPUs on a node of a running elastic job below its `max_gpus` that is not
  leaving (growth happens only on the nodes a job already occupies).

Victims already leaving free nothing new: a plan that only waits for them holds a reservation,
and the `Evicted` event at the end of their grace brings the next cycle. Quota admission, held
reservations and the preemption rules beyond these (cost, lost work, bounds) only ever refuse more,
so every skipped cycle is one whose plan would have started, preempted, shrunk and grown nothing.
`plain_could_act` states the same rule over the whole `FleetState`; tests check that both agree.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping

from scheduling.engine import FleetState, Job, Policy
from scheduling.engine.preemption import bounded_loss, partial_reclaim_takes, young_since_s
from scheduling.engine.quota import reclaims_loans, spare_beyond_guarantee, within_guarantee
from scheduling.engine.runs import RunRecord

Key = tuple[str, str]  # (team, accelerator)


class _Run:
    """What the gate keeps of one running job."""

    __slots__ = (
        "accelerator",
        "team",
        "priority",
        "gpus",
        "preemptible",
        "leaving",
        "bounded",
        "start_s",
        "room",
        "nodes",
        "allocation",
        "borrowing",
    )

    def __init__(
        self,
        job: Job,
        gpus: int,
        leaving: bool,
        allocation: tuple[tuple[str, int], ...],
        start_s: float,
        borrowing: bool,
    ) -> None:
        self.accelerator, self.team, self.priority = job.accelerator, job.team, job.priority
        self.gpus, self.preemptible, self.leaving = gpus, job.preemptible, leaving
        self.bounded = bounded_loss(job)
        self.start_s = start_s
        self.room = 0 if job.max_gpus is None or leaving else max(0, job.max_gpus - gpus)
        self.allocation = allocation
        self.borrowing = borrowing
        self.nodes = tuple(node_id for node_id, _ in allocation)


class _Counts(dict[int, int]):
    """A multiset of ints (value -> count) that drops values whose count reaches 0."""

    def add(self, value: int, delta: int) -> None:
        count = self.get(value, 0) + delta
        if count:
            self[value] = count
        else:
            self.pop(value, None)


class CycleGate:
    def __init__(
        self,
        state: FleetState,
        capacity: dict[str, int],
        policy: Policy,
        *,
        strict_fifo: bool,
        guarantees: Mapping[Key, int] | None = None,
    ) -> None:
        self.state = state
        self.gpus_per_node = policy.gpus_per_node
        # Free GPUs per node, and per accelerator how many nodes have each number free (read again
        # from the FleetState for the nodes of the runs `touch` reads).
        self.accelerator_of: dict[str, str] = {}
        self.node_free: dict[str, int] = {}
        self.free_counts: dict[str, _Counts] = {}
        usable, used = state.node_usable, state.node_used
        for node in state.nodes.values():
            self.accelerator_of[node.id] = node.accelerator
            self.node_free[node.id] = free = usable[node.id] - used[node.id]
            self.free_counts.setdefault(node.accelerator, _Counts()).add(free, 1)
        self.free = dict(capacity)
        self.sizes: dict[str, _Counts] = {}
        self.strict_fifo = strict_fifo and not policy.backfill and not policy.fairshare
        self.strict_fifo = self.strict_fifo and policy.within_team_order == "submit"
        self.heads: dict[str, list[tuple[int, float, str, Job]]] = {}
        self.pending: set[str] = set()
        self.fragmented = False
        self.preemption, self.elastic = policy.preemption, policy.elastic
        self.reclaim_share = policy.reclaim_guaranteed_share
        self.policy = policy
        self.guarantees = {key: gpus for key, gpus in (guarantees or {}).items() if gpus > 0}
        # Pending side: priorities per accelerator; smallest sizes per (team, accelerator).
        self.pending_priorities: dict[str, _Counts] = {}
        self.team_sizes: dict[Key, _Counts] = {}
        # Running side, from `touch`: per job, and totals per accelerator / (team, accelerator).
        self.runs: dict[str, _Run] = {}
        self.used: dict[Key, int] = {}
        self.leaving: dict[Key, int] = {}
        self.bounded: dict[Key, int] = {}  # runs not leaving whose lost work is bounded
        # Runs not leaving whose jobs do not checkpoint, latest (re)start first: (-start_s, job id),
        # entries of runs since gone or changed dropped when met (`_latest_start_s`).
        self.unbounded: dict[Key, list[tuple[float, str]]] = {}
        self.preemptible: dict[str, _Counts] = {}  # priority -> GPUs of preemptible work not leaving
        self.growable: dict[str, dict[str, None]] = {}  # accelerator -> elastic jobs with room

    # Pending -------------------------------------------------------------------------------------
    def queued(self, job: Job) -> None:
        size = job.min_gpus or job.gpus
        self.sizes.setdefault(job.accelerator, _Counts()).add(size, 1)
        self.team_sizes.setdefault((job.team, job.accelerator), _Counts()).add(size, 1)
        self.pending_priorities.setdefault(job.accelerator, _Counts()).add(job.priority, 1)
        self.pending.add(job.id)
        if self.strict_fifo:
            heapq.heappush(self.heads.setdefault(job.accelerator, []), (-job.priority, job.submit_s, job.id, job))

    def dequeued(self, job: Job) -> None:
        size = job.min_gpus or job.gpus
        self.sizes[job.accelerator].add(size, -1)
        self.team_sizes[(job.team, job.accelerator)].add(size, -1)
        self.pending_priorities[job.accelerator].add(job.priority, -1)
        self.pending.discard(job.id)

    def allocated(self, accelerator: str, gpus: int) -> None:
        self.free[accelerator] = self.free.get(accelerator, 0) - gpus

    # Running -------------------------------------------------------------------------------------
    def touch(self, job_ids: Iterable[str]) -> None:
        """Read these jobs' running state again from the FleetState (after a start, an end, a
        resize, or a plan that preempted them)."""
        running = self.state.running
        nodes: dict[str, None] = {}
        for job_id in job_ids:
            old = self.runs.pop(job_id, None)
            if old is not None:
                self._count(job_id, old, -1)
                nodes.update(dict.fromkeys(old.nodes))
            record = running.get(job_id)
            if record is not None:
                leaving = record.grace_until_s is not None
                run = _Run(record.job, record.gpus, leaving, record.allocation, record.start_s, record.borrowing)
                self.runs[job_id] = run
                self._count(job_id, run, +1)
                nodes.update(dict.fromkeys(run.nodes))
        usable, used, node_free = self.state.node_usable, self.state.node_used, self.node_free
        for node_id in nodes:
            free = usable[node_id] - used[node_id]
            if free != node_free[node_id]:
                counts = self.free_counts[self.accelerator_of[node_id]]
                counts.add(node_free[node_id], -1)
                counts.add(free, 1)
                node_free[node_id] = free

    def _count(self, job_id: str, run: _Run, sign: int) -> None:
        key = (run.team, run.accelerator)
        gpus = sign * run.gpus
        self.used[key] = self.used.get(key, 0) + gpus
        if run.leaving:
            self.leaving[key] = self.leaving.get(key, 0) + gpus
            return
        if run.bounded:
            self.bounded[key] = self.bounded.get(key, 0) + sign
        elif sign > 0 and self.policy.partial_reclaim_young_s is not None:
            heapq.heappush(self.unbounded.setdefault(key, []), (-run.start_s, job_id))
        if run.preemptible:
            self.preemptible.setdefault(run.accelerator, _Counts()).add(run.priority, gpus)
        if run.room:
            growable = self.growable.setdefault(run.accelerator, {})
            if sign > 0:
                growable[job_id] = None
            else:
                growable.pop(job_id, None)

    # The verdict ---------------------------------------------------------------------------------
    def could_start(self) -> bool:
        """Whether a cycle now could start, preempt, shrink or grow anything. When not,
        `fragmented` says whether some job it would leave pending fits by count but not by shape
        (what its plan would have said)."""
        self.fragmented = False
        acted = False
        for accelerator, counts in self.sizes.items():
            if not counts:
                continue
            free = self.free.get(accelerator, 0)
            if self.strict_fifo:
                head = self._head(accelerator)
                sizes = [] if head is None else [head.min_gpus or head.gpus]
            else:
                sizes = list(counts)
            if min(sizes, default=free + 1) <= free:
                if self._has_shape_for(accelerator, sizes):
                    return True
                self.fragmented = True
            if self.preemption and not acted:
                acted = self._could_reclaim(accelerator)
        return acted or (self.elastic and self._could_grow())

    def _could_reclaim(self, accelerator: str) -> bool:
        lowest = min(self.preemptible.get(accelerator, ()), default=None)
        if lowest is not None and max(self.pending_priorities[accelerator]) > lowest:
            return True
        lenders = {team for team, acc in self.used if acc == accelerator and self._surplus(team, accelerator) > 0}
        if not lenders:
            return False
        # Lenders a partial reclaim could take from: those running work whose lost work is bounded
        # (found when first needed).
        bounded: set[str] | None = None
        for (team, acc), guaranteed in self.guarantees.items():
            if acc != accelerator or lenders <= {team}:
                continue
            sizes = self.team_sizes.get((team, accelerator))
            if not sizes:
                continue
            unused, smallest = guaranteed - self.used.get((team, accelerator), 0), min(sizes)
            if not reclaims_loans(unused, smallest, self.reclaim_share):
                continue
            if within_guarantee(0, smallest, unused):
                # (a larger job of the team finds room only where the smallest does)
                if self._reclaim_room(team, accelerator, smallest, lenders, False):
                    return True
                continue
            if bounded is None:
                bounded = {lender for lender in lenders if self._partial_takes_from(lender, accelerator)}
            if not bounded <= {team} and self._reclaim_room(team, accelerator, smallest, bounded, True):
                return True
        return False

    def _reclaim_room(self, team: str, accelerator: str, size: int, lenders: set[str], partial: bool) -> bool:
        """Whether the loans a reclaim by `team` could take (`preemption.may_preempt`: preemptible
        work started as a loan, of `lenders` other than `team`, that leaves its team covered on its
        own; for a `partial` one, only work whose lost work is bounded: `partial_reclaim_takes`),
        the GPUs of work already leaving (counted too, though it frees nothing new) and the free
        GPUs make room for `size` GPUs by shape (`room_by_shape`)."""
        since_s = young_since_s(self.policy, self.state.now)
        takeable: dict[str, int] = {}
        for run in self.runs.values():
            if run.accelerator != accelerator:
                continue
            if run.leaving or (
                run.team != team
                and run.team in lenders
                and run.preemptible
                and run.borrowing
                and (not partial or run.bounded or (since_s is not None and run.start_s >= since_s))
                and run.gpus <= self._surplus(run.team, accelerator)
            ):
                for node_id, gpus in run.allocation:
                    takeable[node_id] = takeable.get(node_id, 0) + gpus
        free = self.free_counts.get(accelerator) or _Counts()  # free GPUs -> nodes with that many
        most = max(free, default=0)
        whole = sum(nodes for gpus, nodes in free.items() if gpus >= self.gpus_per_node)
        return room_by_shape(size, self.gpus_per_node, most, whole, self.node_free, takeable)

    def _partial_takes_from(self, team: str, accelerator: str) -> bool:
        """Whether `team` runs work a partial reclaim could take (`preemption.partial_reclaim_takes`):
        work that checkpoints, or young work without checkpoints."""
        key = (team, accelerator)
        if self.bounded.get(key):
            return True
        since_s = young_since_s(self.policy, self.state.now)
        return since_s is not None and self._latest_start_s(key) >= since_s

    def _latest_start_s(self, key: Key) -> float:
        """The latest (re)start of a run of `key` not leaving whose job does not checkpoint (-inf: none)."""
        heap = self.unbounded.get(key)
        while heap:
            start_s = -heap[0][0]
            run = self.runs.get(heap[0][1])
            if run is not None and not run.leaving and not run.bounded and run.start_s == start_s:
                return start_s
            heapq.heappop(heap)
        return -math.inf

    def _surplus(self, team: str, accelerator: str) -> int:
        """GPUs `team` uses beyond its guarantee once its leaving work is gone: what a reclaim may
        take of it (rule "loans only", `quota.spare_beyond_guarantee`)."""
        key = (team, accelerator)
        return spare_beyond_guarantee(self.used.get(key, 0), self.leaving.get(key, 0), self.guarantees.get(key, 0))

    def _could_grow(self) -> bool:
        usable, used = self.state.node_usable, self.state.node_used
        for accelerator, job_ids in self.growable.items():
            if not job_ids or self.free.get(accelerator, 0) <= 0:
                continue
            for job_id in job_ids:
                if any(usable[node_id] > used[node_id] for node_id in self.runs[job_id].nodes):
                    return True
        return False

    def _has_shape_for(self, accelerator: str, sizes: list[int]) -> bool:
        """Whether a node has room for the smallest single-node size, or enough whole nodes are
        free for the smallest gang (multi-node gangs take whole nodes)."""
        per_node = self.gpus_per_node
        free = self.free_counts.get(accelerator) or _Counts()  # free GPUs -> nodes with that many
        single = min((size for size in sizes if size <= per_node), default=None)
        if single is not None and max(free, default=0) >= single:
            return True
        gang = min((size for size in sizes if size > per_node), default=None)
        return gang is not None and sum(n for gpus, n in free.items() if gpus >= per_node) >= -(-gang // per_node)

    def _head(self, accelerator: str) -> Job | None:
        heap = self.heads.get(accelerator, [])
        while heap and heap[0][2] not in self.pending:
            heapq.heappop(heap)
        return heap[0][3] if heap else None


def room_by_shape(
    size: int, per_node: int, most_free: int, whole_free: int, free_on: Mapping[str, int], takeable: Mapping[str, int]
) -> bool:
    """Whether evicting the work `takeable` holds (GPUs per node) could make room for `size` GPUs:
    for a job that fits on a node, a node whose free GPUs and takeable ones cover it (`most_free`:
    the most free on any node); for a gang, enough nodes that would be whole (`whole_free` are
    already). A necessary condition for a victim search to place the job (`preemption.pick_victims`
    places a job within one node, a wider gang on whole nodes): costs, coverage and levels only
    ever refuse more."""
    if size <= per_node:
        return most_free >= size or any(free_on[node_id] + gpus >= size for node_id, gpus in takeable.items())
    freed = sum(1 for node_id, gpus in takeable.items() if free_on[node_id] < per_node <= free_on[node_id] + gpus)
    return whole_free + freed >= -(-size // per_node)


def plain_could_act(state: FleetState, policy: Policy, guarantees: Mapping[Key, int], *, strict_fifo: bool) -> bool:
    """The gate's rule over the whole FleetState, without any incremental bookkeeping (for tests:
    `CycleGate.could_start` must say the same after every change): a job could start, preempt, or
    a running job grow."""
    free_on = {node_id: state.node_usable[node_id] - state.node_used[node_id] for node_id in state.nodes}
    pending = list(state.pending.values())
    runs = list(state.running.values())
    return (
        _plain_could_start(state, policy, free_on, pending, strict_fifo)
        or (policy.preemption and _plain_could_preempt(state, policy, guarantees, pending, runs))
        or (policy.elastic and _plain_could_grow(free_on, runs))
    )


def _plain_could_start(
    state: FleetState, policy: Policy, free_on: Mapping[str, int], pending: list[Job], strict_fifo: bool
) -> bool:
    """Whether some job that may start (the heads, under strict FIFO) fits the free GPUs now."""
    per_node = policy.gpus_per_node
    accelerator_of = {node_id: node.accelerator for node_id, node in state.nodes.items()}
    if strict_fifo and not policy.backfill and not policy.fairshare and policy.within_team_order == "submit":
        heads: dict[str, Job] = {}
        for job in sorted(pending, key=lambda j: (-j.priority, j.submit_s, j.id)):
            heads.setdefault(job.accelerator, job)
        starters = list(heads.values())
    else:
        starters = pending
    for job in starters:
        size = job.min_gpus or job.gpus
        frees = [gpus for node_id, gpus in free_on.items() if accelerator_of[node_id] == job.accelerator]
        if size <= per_node and max(frees, default=0) >= size:
            return True
        if size > per_node and sum(1 for gpus in frees if gpus >= per_node) >= -(-size // per_node):
            if sum(frees) >= size:
                return True
    return False


def _plain_could_preempt(
    state: FleetState, policy: Policy, guarantees: Mapping[Key, int], pending: list[Job], runs: list[RunRecord]
) -> bool:
    """Whether some pending job outranks a preemptible run of its accelerator, or reclaims a loan
    where a node could be freed for it (`_plain_reclaim_room`)."""
    used: dict[Key, int] = {}
    leaving: dict[Key, int] = {}
    for run in runs:
        key = (run.job.team, run.job.accelerator)
        used[key] = used.get(key, 0) + run.gpus
        if run.grace_until_s is not None:
            leaving[key] = leaving.get(key, 0) + run.gpus

    def surplus(team: str, accelerator: str) -> int:
        key = (team, accelerator)
        return spare_beyond_guarantee(used.get(key, 0), leaving.get(key, 0), guarantees.get(key, 0))

    for job in pending:
        size = job.min_gpus or job.gpus
        key = (job.team, job.accelerator)
        unused = guarantees.get(key, 0) - used.get(key, 0)
        reclaiming = reclaims_loans(unused, size, policy.reclaim_guaranteed_share)
        loans = []  # the runs of other teams with loans, not leaving
        for run in runs:
            victim = run.job
            if run.grace_until_s is not None or victim.accelerator != job.accelerator:
                continue
            if victim.preemptible and victim.priority < job.priority:
                return True
            if victim.team != job.team and surplus(victim.team, victim.accelerator) > 0:
                loans.append(run)
        if reclaiming and loans and _plain_reclaim_room(state, policy, job, size, unused, loans, runs, surplus):
            return True
    return False


def _plain_reclaim_room(
    state: FleetState,
    policy: Policy,
    job: Job,
    size: int,
    unused: int,
    loans: list[RunRecord],
    runs: list[RunRecord],
    surplus: Callable[[str, str], int],
) -> bool:
    """Whether a reclaim by `job` of `size` GPUs (`unused` of its team's guarantee left) is
    conceivable: some of `loans` may be taken by it (by a partial one, beyond the guarantee, only
    `partial_reclaim_takes`), and those `may_preempt` allows (preemptible, started as loans, each
    leaving its team covered), the work already leaving and the free GPUs make room for it by
    shape (`room_by_shape`)."""
    since_s = young_since_s(policy, state.now)
    if not within_guarantee(0, size, unused):
        loans = [run for run in loans if partial_reclaim_takes(run.job, run.start_s, since_s)]
        if not loans:
            return False
    takeable: dict[str, int] = {}
    taken = [
        run
        for run in loans
        if run.job.preemptible and run.borrowing and run.gpus <= surplus(run.job.team, job.accelerator)
    ]
    taken += [run for run in runs if run.grace_until_s is not None and run.job.accelerator == job.accelerator]
    for run in taken:
        for node_id, gpus in run.allocation:
            takeable[node_id] = takeable.get(node_id, 0) + gpus
    free_on = {node_id: state.node_usable[node_id] - state.node_used[node_id] for node_id in state.nodes}
    frees = [gpus for node_id, gpus in free_on.items() if state.nodes[node_id].accelerator == job.accelerator]
    whole = sum(1 for gpus in frees if gpus >= policy.gpus_per_node)
    return room_by_shape(size, policy.gpus_per_node, max(frees, default=0), whole, free_on, takeable)


def _plain_could_grow(free_on: Mapping[str, int], runs: list[RunRecord]) -> bool:
    """Whether an elastic run below its largest size has free GPUs on one of its nodes."""
    for run in runs:
        job = run.job
        if run.grace_until_s is None and job.max_gpus is not None and job.max_gpus > run.gpus:
            if any(free_on[node_id] > 0 for node_id, _ in run.allocation):
                return True
    return False

"""The engine's rules stated plainly: `schedule_reference(snapshot, now)` plans what `schedule` plans.

`schedule` is fast: it keeps an incremental capacity index, a release profile it edits in place,
cached verdicts, fits, admissions and natural starts, cheap bounds before every search, and
inlined copies of small formulas. This module is the same cycle without any of that, so that a
surprising plan can be checked against the rules, and so that a rule can be changed here first
and the fast path made to agree (`tests/engine/test_reference.py` compares the two under
Hypothesis; the simulator runs either, `--engine reference`).

Its working state is plain: free GPUs per node, GPUs held per reserved node, the release of
every running job and of every start (listed in time order whenever read), the
quota ledger. Whatever a rule needs is recomputed from that state when the rule is applied: no
cache, no bound standing in for the thing it bounds, no shortcut past a step.

The cycle, as `schedule` states it:
 1. Health: cordon nodes without healthy GPUs; requeue jobs on nodes that lost the GPUs they use.
 2. Free GPUs per node, quota usage, release times of the running work.
 3. Order pending jobs: priority class, fair share with age, within-team order, submit time, id.
 4. Within each priority class, jobs within their team's guarantee first, then the others (when
    some team has guarantee left as the class begins); for each job: quota admission, a start
    (full size, then smaller if elastic; around reservations that start after it surely ends),
    else preemption when it pays, else a reservation for the first blocked heads.
 5. Elastic growth into idle GPUs on accelerators where nothing waits for capacity.
 6. A reason and an estimated start (or what it waits for) for every job that did not start.

Every rule is stated here, in the reference's own words, importing nothing of the fast path but
the data types (`model`, `plan`) and the explanation of blockers (`tests/engine/test_reference.py`
checks the imports): the queue order and fair share, quota admission, borrowing, lending, holds and
refusals (`_PlainLedger`, every total summed from the teams' accounts when read), who may preempt
whom and what preemption could free, which victims are chosen (`_choose_victims`, with the early
stop that decides among the cheapest victims looked at), whether an eviction pays and what it
costs, the gang patience level, placement of single-node jobs and gangs (and, without topology
awareness, the domains single-node jobs leave to waiting gangs), release and runtime formulas,
when a job would fit along the releases and where a blocked head reserves (`_earliest_start`,
`_reservation_start`), backfill around reservations, the elastic sizes worth trying, elastic
growth, and the estimates. The blockers (`blockers.describe_blockers`) are one explanation for
both engines, read from each one's end state.

Specified, not heuristic: the whole plan is compared with `schedule`'s, estimates included. Where
the fast engine keeps a quirk on purpose, the reference states the rule as intended and keeps the
quirk only when asked (`quirks=FAST_PATH_QUIRKS`, as the whole-plan comparisons and the simulator's
`--engine reference` do); a strict `xfail` test names each quirk and shows it on a minimal case:
`DOUBLE_COUNTED_LOANS`, the bound that decides whether a preemption attempt counts sums a borrowed
lower-priority run twice; `VICTIM_COST_PER_NODE`, a gang's victim search prices a domain counting a
victim that spans several of its chosen nodes once per node. One place where the fast engine's
behaviour is stated as it is rather than as one might expect: a growth's `borrowing` is judged
once the accelerator's growth is done (not as each job grows).

Budgets are part of the rules (`Policy.max_preemption_attempts`, `preemption_scan_budget`, and at
most `reservation_depth` + 4 reservation attempts per accelerator), and so is what counts against
them: a preemption attempt is counted once the running work at the cycle's start could free enough
GPUs by priority and loans alone; a victim candidate is counted when a search looks at it.
"""

from __future__ import annotations

import copy
import itertools
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from .blockers import EndState, describe_blockers
from .model import LEVEL_RANK, Job, Node, Policy, Running, Snapshot
from .plan import (
    REASON_CAPACITY,
    REASON_GUARANTEE,
    REASON_POOL,
    REASON_PRIORITY,
    REASON_QUOTA,
    REASON_TOPOLOGY,
    WAITS_DOMAIN,
    WAITS_HARDWARE,
    WAITS_JOB,
    WAITS_QUEUE,
    WAITS_QUOTA,
    WAITS_QUOTA_LIMIT,
    Action,
    Allocation,
    BlockedStatus,
    Cordon,
    Grow,
    PendingStatus,
    Plan,
    Preempt,
    Requeue,
    Reserve,
    Shrink,
    Start,
    reserved_for,
)

STARTED = "started"

# A quirk the fast engine keeps on purpose, which the reference states as intended unless asked to
# plan as the fast engine does (`schedule_reference(..., quirks=FAST_PATH_QUIRKS)`):
# the bound on what preemption could free, which decides whether a preemption attempt is made and
# counted against `Policy.max_preemption_attempts`, counts a borrowed lower-priority run twice, once
# by priority and once as a loan (`prepare.Takeable.plain_upper`). It only ever spends an attempt
# (and scan budget) on a search that cannot succeed, so a later job may find the budget gone.
DOUBLE_COUNTED_LOANS = "double-counted-loans"
# Another: choosing where a gang goes by preemption, the fast engine's victim search prices each
# domain as the sum of what freeing each of its chosen nodes costs, so a victim that runs on several
# of those nodes (a gang) counts its lost work once per node. A domain whose one gang victim loses
# less than two single-node victims elsewhere can lose to them; the reference counts each victim once.
VICTIM_COST_PER_NODE = "victim-cost-per-node"
FAST_PATH_QUIRKS = frozenset({DOUBLE_COUNTED_LOANS, VICTIM_COST_PER_NODE})


def schedule_reference(
    snapshot: Snapshot, now: float, *, explain: bool = True, quirks: AbstractSet[str] = frozenset()
) -> Plan:
    """The plan the rules give, stated plainly: with `quirks=FAST_PATH_QUIRKS`, the plan
    `schedule(snapshot, now, explain=explain)` gives.

    Without explanations the plan lists only the jobs waiting on topology, without estimates, as
    `schedule`'s does (the actions are the same either way)."""
    unknown = set(quirks) - FAST_PATH_QUIRKS
    if unknown:
        raise ValueError(f"unknown quirks: {sorted(unknown)}")
    cycle = _ReferenceCycle(snapshot, now, frozenset(quirks))
    queue = cycle.queue()
    if not snapshot.policy.topology_aware:
        cycle.keep_domains_for_gangs(queue)
    cycle.consider_all(list(enumerate(queue)))
    if snapshot.policy.elastic:
        cycle.grow()
    if not explain:
        topology = [job for position, job in enumerate(queue) if cycle.reasons.get(position) == REASON_TOPOLOGY]
        return Plan(tuple(cycle.actions), tuple(PendingStatus(job.id, REASON_TOPOLOGY, None) for job in topology))
    pending = cycle.explain(queue)
    return Plan(tuple(cycle.actions), pending, lambda waiting: describe_blockers(waiting, cycle.end_state()))


@dataclass(slots=True)
class _Release:
    """When a holder of GPUs (a running job, or a start of this cycle) gives them back."""

    team: str
    accelerator: str
    end_s: float
    allocation: Allocation


class _Terms(NamedTuple):
    """How an eviction is priced besides its cost: whether waiting `reclaim_after_s` counts
    (`by_age`), and whether every victim is of lower priority than the preemptor (`outranks`)."""

    by_age: bool
    outranks: bool


@dataclass(slots=True)
class _Budgets:
    preemption_attempts: int = 0
    scan_budget: int = 0
    reservation_attempts: dict[str, int] = field(default_factory=dict)
    reservations_made: dict[str, int] = field(default_factory=dict)


class _ReferenceCycle:
    def __init__(self, snapshot: Snapshot, now: float, quirks: frozenset[str]) -> None:
        self.snapshot, self.now, self.policy = snapshot, now, snapshot.policy
        self.quirks = quirks
        self.nodes: dict[str, Node] = {node.id: node for node in snapshot.nodes}
        self.actions: list[Action] = []
        self.running = self._triage(list(snapshot.running))  # Step 1.
        used = _used_per_node(self.running)
        # Step 2: free GPUs per node that placement may use (0 on nodes held for a reservation).
        self.free = {node.id: max(0, node.usable_gpus - used.get(node.id, 0)) for node in snapshot.nodes}
        self.held: dict[str, int] = {}
        self.reservations: list[_Reservation] = []
        capacity: dict[str, int] = {}
        for node in snapshot.nodes:
            capacity[node.accelerator] = capacity.get(node.accelerator, 0) + node.usable_gpus
        self.accelerators = sorted(capacity)
        # The fleet's shape, which no cycle changes: node ids per accelerator, in id order.
        self.node_ids_of = {
            accelerator: sorted(node.id for node in snapshot.nodes if node.accelerator == accelerator)
            for accelerator in self.accelerators
        }
        self.ledger = _PlainLedger(snapshot, self.running, capacity)
        self.releases: dict[str, _Release] = {}
        for run in self.running:
            end_s = max(now, _expected_end_s(run, now, self._penalty(run.allocation)))
            self.releases[run.job.id] = _Release(run.job.team, run.job.accelerator, end_s, run.allocation)
        self.budgets = _Budgets(scan_budget=self.policy.preemption_scan_budget)
        self.reasons: dict[int, str] = {}
        self.estimates: dict[str, float] = {}
        self.picked: set[str] = set()
        self.waiting: set[str] = set()  # accelerators with a job left waiting for capacity
        self.blocked: set[str] = set()  # accelerators whose strict-FIFO head is blocked
        self.at = 0
        # Without topology awareness: whole nodes single-node jobs leave to waiting gangs if they can.
        self.kept: dict[str, frozenset[str]] = {}

    def end_state(self) -> EndState:
        """What the cycle left, as blockers read it: the plain state as it stands."""
        nodes = self.nodes.values()
        return EndState(
            ledger=self.ledger,
            free=dict(self.free),
            held=dict(self.held),
            node_accelerator={node.id: node.accelerator for node in nodes},
            node_rack={node.id: node.rack_key for node in nodes},
            node_pod={node.id: node.pod for node in nodes},
            gpus_per_node=self.policy.gpus_per_node,
            reserved={action.job_id: action.node_ids for action in self.actions if isinstance(action, Reserve)},
            elastic=self.policy.elastic,
        )

    # Steps 1-3 ---------------------------------------------------------------------------------

    def _triage(self, running: list[Running]) -> list[Running]:
        """Cordon nodes with no healthy GPU; requeue every job on a node using more GPUs than it has
        healthy (or on a node the fleet does not know)."""
        nodes = self.snapshot.nodes
        cordons = sorted((node.id, "no-healthy-gpus") for node in nodes if node.healthy_gpus <= 0 and not node.cordoned)
        self.actions.extend(Cordon(node_id, reason) for node_id, reason in cordons)
        healthy = {node.id: max(0, min(node.gpus, node.healthy_gpus)) for node in nodes}
        used = _used_per_node(running)
        degraded = {node_id for node_id, gpus in used.items() if gpus > healthy.get(node_id, -1)}
        requeued = {run.job.id for run in running if any(node_id in degraded for node_id, _ in run.allocation)}
        self.actions.extend(Requeue(job_id, "node-degraded") for job_id in sorted(requeued))
        return [run for run in running if run.job.id not in requeued]

    def queue(self) -> list[Job]:
        """Step 3: higher priority class first; within it, the jobs a node failure requeued first.
        Shortest limit first (`queue_order`): then the jobs that waited `max_age_s`, then the
        shortest time limit, submit time and id. Else (with fair share) the higher score: the team's
        fair-share priority plus `age_weight` x the wait over `max_age_s` (at most the weight); then,
        without an age weight, the jobs that waited `max_age_s`; then the within-team order, submit
        time and id."""
        policy, now, snapshot = self.policy, self.now, self.snapshot
        if policy.queue_order == "shortest_limit":
            oldest = now - policy.max_age_s
            return sorted(
                snapshot.pending,
                key=lambda job: (
                    -job.priority,
                    not job.requeued_by_failure,
                    job.submit_s > oldest,
                    job.estimate_s,
                    job.submit_s,
                    job.id,
                ),
            )
        priorities = _fairshare_priorities(snapshot) if policy.fairshare else {}
        weight = max(0.0, policy.age_weight)

        def score(job: Job) -> float:
            if not (policy.fairshare and priorities):
                return job.priority
            value = job.priority * (2.0 + weight) + priorities.get(job.team, 1.0)
            if weight > 0.0 and policy.max_age_s > 0.0:
                aged = job.submit_s <= now - policy.max_age_s
                value += weight if aged else (now - job.submit_s) * (weight / policy.max_age_s)
            return value

        def within_team(job: Job) -> float:
            if policy.within_team_order == "shortest_limit":
                return job.estimate_s
            return job.attained_gpu_s if policy.within_team_order == "las" else job.submit_s

        # Without an age term in the score, a team's jobs that waited `max_age_s` go first within it.
        aged_first = policy.fairshare and weight <= 0.0 and policy.max_age_s > 0.0

        def young(job: Job) -> bool:
            return aged_first and job.submit_s > now - policy.max_age_s

        return sorted(
            snapshot.pending,
            key=lambda job: (
                -job.priority,
                not job.requeued_by_failure,
                -score(job),
                young(job),
                within_team(job),
                job.submit_s,
                job.id,
            ),
        )

    def keep_domains_for_gangs(self, queue: list[Job]) -> None:
        """Without topology awareness, single-node jobs first fit outside the domains that the
        waiting gangs with a required rack or pod would take as the cycle begins: for each such
        multi-node gang, the first whole nodes in id order that gather enough of them in one domain
        of its level (as it would be placed); a single-node job takes one of them only when no other
        node has room."""
        gpn = self.policy.gpus_per_node
        for accelerator in self.accelerators:
            gangs = [job for job in queue if job.accelerator == accelerator and job.required_level in ("rack", "pod")]
            if not gangs:
                continue
            whole = [node_id for node_id in self._node_ids(accelerator) if self.free[node_id] >= gpn]
            racks = {node_id: self.nodes[node_id].rack_key for node_id in whole}
            pods = {node_id: self.nodes[node_id].pod for node_id in whole}
            kept: set[str] = set()
            for gang in gangs:
                if gang.gpus > gpn and gang.required_level is not None:
                    count = _nodes_needed(gang.gpus, gpn)
                    kept.update(_first_in_one_domain(whole, count, gang.required_level, racks, pods) or ())
            self.kept[accelerator] = frozenset(kept)

    # Step 4 ------------------------------------------------------------------------------------

    def consider_all(self, queue: list[tuple[int, Job]]) -> None:
        """While some team has guarantee left as the cycle begins, jobs that fit their team's
        guarantee go first, whatever their class, and those that would borrow after them, by class
        in queue order (with `least_borrowed_first`, within a class those of the teams that borrow
        fewer GPUs first, then those with more of their size within what is left of their team's
        guarantee); otherwise every job in queue order."""
        if not self.ledger.any_headroom():
            for position, job in queue:
                self.consider(position, job, defer=False)
            return
        deferred = [(position, job) for position, job in queue if not self.consider(position, job, defer=True)]
        if self.policy.least_borrowed_first:  # by class, then the teams that borrow less, then the most owed
            deferred.sort(key=lambda waiting: (-waiting[1].priority, *self.ledger.borrowers_rank(waiting[1])))
        for position, job in deferred:
            self.consider(position, job, defer=False)

    def consider(self, position: int, job: Job, *, defer: bool) -> bool:
        """Decide about one job; False when it is put off because it would borrow (`defer`)."""
        accelerator = job.accelerator
        if accelerator not in self.accelerators or job.gpus <= 0:
            self.reasons[position] = REASON_CAPACITY
            return True
        if accelerator in self.blocked:
            self.reasons[position] = REASON_PRIORITY
            return True
        size = self._smallest_size(job)
        pinned = not job.preemptible
        admission = self.ledger.admit(job.team, accelerator, size, pinned)
        if defer and (
            admission.borrowing
            if admission is not None
            else not self.ledger.within_guarantee(job.team, accelerator, size)
        ):
            return False
        if admission is None:
            refused = self.ledger.refusal(job.team, accelerator, size, self._total_free(accelerator), pinned)
            if refused != REASON_CAPACITY:
                self.reasons[position] = refused
                if refused == REASON_QUOTA:  # the team's limit: the job keeps its size within it
                    self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)
                return True
        self.at = position
        if admission is not None and self._start(job, size):
            return True
        if self._preempt(job, size):
            return True
        blocker = self.reasons.get(position)  # a reservation the job could not backfill around
        self.reasons[position] = blocker or self._misfit(job, admission is not None)
        self.waiting.add(accelerator)
        if not blocker:
            self._reserve(job)
        if not self.policy.backfill:
            self.blocked.add(accelerator)  # strict FIFO: the blocked head holds back everyone behind
        if self.reasons[position] != STARTED:  # (a gang may start at a wider level instead)
            self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)
        return True

    def _gang_level(self, job: Job, *, can_reserve: bool | None = None) -> str:
        """The widest level `job` may take now (`_patient_level`), except that a training or batch
        gang it would let spread across pods, though one pod could hold it, stays within one pod
        while a start there, now or when the releases free one, finishes it sooner (at that level's
        topology penalty) than a start across pods now, and while it can reserve that pod
        (`can_reserve`; by default, whether a reservation is left to make on its accelerator this
        cycle), so that the pod drains for it: the slowest placement only when waiting surely pays."""
        accelerator = job.accelerator
        owed = self.ledger.used(job.team, accelerator) < self.ledger.guaranteed(job.team, accelerator)
        level = self._patient_level(job, owed)
        can_reserve = self._can_reserve(accelerator) if can_reserve is None else can_reserve
        if not can_reserve or not self._spreads_across_pods(job, level):
            return level
        found = self._earliest_start(accelerator, job.gpus, "pod", aware=True)
        if found is None:
            return level
        start_s, node_ids = found
        within_pod_s = start_s + job.estimate_s * self.policy.penalty(self._level(list(node_ids)))
        return "pod" if within_pod_s < self.now + job.estimate_s * self.policy.penalty("fleet") else level

    def _patient_level(self, job: Job, owed: bool) -> str:
        """The widest level a gang may take by its patience: its own required level (the fleet, if
        none); under a topology-aware policy a training or batch job stays within the narrowest
        domain an empty fleet offers its size until it has waited its patience (`_patience_s`;
        `owed`: its team uses less than its guarantee), as Slurm's `--switches=count@max-time`.
        Serving takes the first placement it can get (latency first)."""
        level = job.required_level or "fleet"
        patience_s = _patience_s(self.policy, owed, job.requeued_by_failure)
        if not self.policy.topology_aware or job.kind == "serving":
            return level
        if patience_s is not None and self.now - job.submit_s >= patience_s:
            return level
        return self._narrowest_level(job.accelerator, job.gpus, level)

    def _narrowest_level(self, accelerator: str, gpus: int, level: str) -> str:
        """The narrowest domain whose nodes (however many GPUs they have now) could hold `gpus`, no
        wider than `level`: a rack when some rack has enough nodes, else a pod, else `level`."""
        count = _nodes_needed(gpus, self.policy.gpus_per_node)
        racks: dict[str, int] = {}
        pods: dict[str, int] = {}
        for node in (self.nodes[node_id] for node_id in self._node_ids(accelerator)):
            racks[node.rack_key] = racks.get(node.rack_key, 0) + 1
            pods[node.pod] = pods.get(node.pod, 0) + 1
        if count <= max(racks.values(), default=0):
            return _narrower("rack", level)
        return _narrower("pod", level) if count <= max(pods.values(), default=0) else level

    def _spreads_across_pods(self, job: Job, level: str) -> bool:
        """Whether `level` lets a topology-aware training or batch gang that one pod could hold
        spread across pods."""
        policy = self.policy
        if level != "fleet" or not policy.topology_aware or job.kind == "serving" or job.gpus <= policy.gpus_per_node:
            return False
        return self._narrowest_level(job.accelerator, job.gpus, level) != "fleet"

    def _can_reserve(self, accelerator: str) -> bool:
        """Whether a reservation is left to make on `accelerator` this cycle (as `_reserve` counts)."""
        made = self.budgets.reservations_made.get(accelerator, 0)
        attempts = self.budgets.reservation_attempts.get(accelerator, 0)
        return made < max(0, self.policy.reservation_depth) and attempts < self._reservation_cap()

    def _reservation_cap(self) -> int:
        """Reservation attempts per accelerator and cycle: the depth and a few more, none at depth 0."""
        depth = self.policy.reservation_depth
        return depth + EXTRA_RESERVATION_ATTEMPTS if depth > 0 else 0

    def _smallest_size(self, job: Job) -> int:
        if self.policy.elastic and job.is_elastic and job.min_gpus is not None:
            return max(1, job.min_gpus)
        return job.gpus

    def _misfit(self, job: Job, admitted: bool) -> str:
        """Too few free GPUs at all, or free GPUs in the wrong shape, or (not `admitted`) free GPUs
        the quota pool keeps for other teams' loans of the team's guarantee."""
        if self._total_free(job.accelerator) < job.gpus:
            return REASON_CAPACITY
        return REASON_TOPOLOGY if admitted else REASON_POOL

    def _start(self, job: Job, smallest: int) -> bool:
        """Start at the full size, else (elastic) at the largest smaller size quota admits that fits;
        with backfill, also on reserved nodes whose reservations begin after the job surely ends."""
        max_level = self._gang_level(job)
        sizes = [job.gpus]
        if self.policy.elastic and job.is_elastic:
            room = self.ledger.room(job.team, job.accelerator, job.gpus - 1, not job.preemptible)
            sizes += self._reduced_sizes(job, room)
        for size in sizes:
            admission = self.ledger.admit(job.team, job.accelerator, size, not job.preemptible)
            if admission is None:
                continue
            fit = self._fit(job, size, max_level)
            if fit is not None:
                self._commit_start(job, fit, admission)
                return True
            if self.policy.backfill and self._fits_counting_held(job.accelerator, size):
                if self._backfill(job, size, max_level, admission):
                    return True
        return False

    def _reduced_sizes(self, job: Job, room: int) -> list[int]:
        """The sizes below its requested one worth trying for an elastic job, largest first: for every
        number of nodes it could take (no more than the whole nodes free), the largest size in
        `min_gpus..gpus - 1` on that many nodes that quota admits (`room`: the most it admits), and
        for one node, the largest such size that the node with the most free GPUs has room for. Any
        smaller size on as many nodes fits where these do."""
        if job.min_gpus is None or job.min_gpus >= job.gpus:
            return []
        gpn, nodes = self.policy.gpus_per_node, self._node_ids(job.accelerator)
        low, high = max(1, job.min_gpus), min(job.gpus - 1, room)
        whole = sum(1 for node_id in nodes if self.free[node_id] >= gpn)
        sizes = [
            size
            for count in range(min(whole, _nodes_needed(high, gpn)), 1, -1)
            if (size := min(high, count * gpn)) > (count - 1) * gpn and size >= low
        ]
        single = min(high, gpn, max((self.free[node_id] for node_id in nodes), default=0))
        return sizes + [single] if single >= low else sizes

    def _fit(self, job: Job, size: int, max_level: str) -> _Fit | None:
        """Where `size` GPUs of `job` go now. Without topology awareness, a job's preferred level is
        still tried first (with the topology-aware rule)."""
        if job.preferred_level and not self.policy.topology_aware:
            preferred = self._place(self.free, job.accelerator, size, _narrower(job.preferred_level, max_level), True)
            if preferred is not None:
                return preferred
        return self._place(self.free, job.accelerator, size, max_level, self.policy.topology_aware)

    def _fits_counting_held(self, accelerator: str, gpus: int) -> bool:
        """Whether `gpus` could fit by shape if the GPUs held for reservations were free."""
        gpn = self.policy.gpus_per_node
        nodes = self._node_ids(accelerator)
        if gpus <= gpn:
            return max(max(self.free[n], self.held.get(n, 0)) for n in nodes) >= gpus
        whole = sum(1 for n in nodes if self.free[n] >= gpn) + sum(1 for n in nodes if self.held.get(n, 0) >= gpn)
        return whole >= _nodes_needed(gpus, gpn)

    def _backfill(self, job: Job, size: int, max_level: str, admission: _Admission) -> bool:
        """EASY backfill: the job may use nodes held for reservations that start no earlier than its
        worst-case end; failing that, it waits for the first reservation of its accelerator."""
        entries = [entry for entry in self.reservations if entry.accelerator == job.accelerator]
        if not entries:
            return False
        worst_end_s = self.now + _worst_runtime_s(job, size, _worst_penalty(self.policy, size, max_level))
        opened = [node_id for entry in entries if entry.start_s >= worst_end_s for node_id in entry.node_ids]
        trial = dict(self.free)
        for node_id in opened:
            trial[node_id] += self.held.get(node_id, 0)
        fit = self._place(trial, job.accelerator, size, max_level, self.policy.topology_aware) if opened else None
        if fit is None:
            first = min(entries, key=lambda entry: (entry.start_s, entry.job_id))
            self.reasons[self.at] = reserved_for(first.job_id)
            return False
        for node_id, gpus in fit.allocation:
            trial[node_id] -= gpus
        for node_id in opened:  # the reservations hold what is left on their nodes
            self.held[node_id], trial[node_id] = trial[node_id], 0
        self.free = trial
        self._commit_start(job, fit, admission, taken=True)
        return True

    def _commit_start(
        self, job: Job, fit: _Fit, admission: _Admission, *, taken: bool = False, replaces: tuple[str, ...] = ()
    ) -> None:
        """The job starts on `fit`; it holds its GPUs (after the handover of `replaces`, if any) for
        its worst-case runtime at the placement's level."""
        if not taken:
            for node_id, gpus in fit.allocation:
                self.free[node_id] -= gpus
        size = sum(gpus for _, gpus in fit.allocation)
        self.ledger.charge(job.team, job.accelerator, size, not job.preemptible)
        wait_s = max(0.0, self.policy.preemption_grace_s) if replaces else 0.0
        end_s = self.now + (wait_s + _worst_runtime_s(job, size, self.policy.penalty(fit.level)))
        self.releases[job.id] = _Release(job.team, job.accelerator, end_s, fit.allocation)
        self.actions.append(Start(job.id, fit.allocation, admission.borrowing, fit.level, replaces))
        self.reasons[self.at] = STARTED

    # Preemption --------------------------------------------------------------------------------

    def _preempt(self, job: Job, size: int) -> bool:
        """Reclaim GPUs by preemption, when allowed, within the budgets, and only when it pays. A job
        reclaims loans when at least `Policy.reclaim_guaranteed_share` of its size lies within what is
        left of its team's guarantee.

        An elastic job reclaims as much of its size as its guarantee covers (when it reclaims),
        else its smallest size. Victims hand their GPUs over: the job starts on them in this plan."""
        policy, accelerator, budgets = self.policy, job.accelerator, self.budgets
        if (
            not job.may_preempt
            or not policy.preemption
            or budgets.preemption_attempts >= policy.max_preemption_attempts
        ):
            return False  # a priority class that may not preempt takes nothing, and spends no attempt
        ledger = self.ledger
        reclaiming = ledger.reclaims(job.team, accelerator, size, policy.reclaim_guaranteed_share)
        # Reclaiming for more than is left of its guarantee (it borrows the rest), a job takes only
        # loans whose lost work is bounded (`bounded_only`: they checkpoint, or are young); if it
        # has no lower-priority work to take, it counts only the wait of its GPUs within the
        # guarantee as saved, and is never let off by its age.
        bounded_only = reclaiming and not ledger.within_guarantee(job.team, accelerator, size)
        partial: int | None = None
        # With lower-priority work to take, the search may evict by priority: the higher cost cap.
        lower = self._takeable_at_start(job, False) > 0
        if bounded_only and not lower:
            partial = ledger.guaranteed(job.team, accelerator) - ledger.used(job.team, accelerator)
        takeable = self._takeable_at_start(job, reclaiming, bounded_only)
        if takeable == 0 or self._total_free(accelerator) + takeable < size or budgets.scan_budget <= 0:
            return False
        budgets.preemption_attempts += 1
        max_level = self._gang_level(job)
        most = ledger.guaranteed(job.team, accelerator) - ledger.used(job.team, accelerator) if reclaiming else job.gpus
        shrinkable = policy.elastic and any(
            run.job.min_gpus is not None and run.grace_until_s is None and run.gpus > run.job.min_gpus
            for run in self.running
            if run.job.accelerator == accelerator
        )
        for target in sorted({size, min(job.gpus, max(size, most))}, reverse=True):
            natural_s = self._natural_s(job, target, max_level)
            grace_s = max(0.0, policy.preemption_grace_s)
            worth = target if partial is None else partial
            terms = _Terms(partial is None, lower)
            cap_gpu_s = _eviction_cap_gpu_s(job, worth, grace_s, natural_s, self.now, policy, terms)
            # Every eviction costs at least one GPU's handover: below that, only a shrink could pay.
            if cap_gpu_s <= grace_s and not (shrinkable and natural_s > self.now):
                continue
            eligible = self._eligible(job, reclaiming, cap_gpu_s, shrinkable, bounded_only)
            per_node = VICTIM_COST_PER_NODE in self.quirks
            choice = _choose_victims(target, self._fleet(accelerator), eligible, max_level, per_node=per_node)
            if choice is not None and self._hand_over(job, target, choice, max_level, partial):
                return True
        return False

    def _takeable_at_start(self, job: Job, reclaiming: bool, bounded_only: bool = False) -> int:
        """The most GPUs preemption could free for `job`, by priority and loans alone, from the running
        work at the cycle's start: work already leaving, and each staying run that is preemptible and
        of strictly lower priority, or, when it reclaims its guarantee, a loan (only a loan whose lost
        work is bounded, for a partial reclaim: `bounded_only`). Each run counts once (the fast
        engine's bound counts a lower-priority loan twice: `DOUBLE_COUNTED_LOANS`)."""
        runs = [run for run in self.running if run.job.accelerator == job.accelerator]
        staying = [run for run in runs if run.grace_until_s is None]
        leaving = sum(run.gpus for run in runs if run.grace_until_s is not None)

        def lower(run: Running) -> bool:
            return run.job.preemptible and run.job.priority < job.priority

        def loan(run: Running) -> bool:
            return reclaiming and run.borrowing and (not bounded_only or self._loss_bounded(run))

        takeable = leaving + sum(run.gpus for run in staying if lower(run) or loan(run))
        if DOUBLE_COUNTED_LOANS in self.quirks:
            takeable += sum(run.gpus for run in staying if lower(run) and loan(run))
        return takeable

    def _loss_bounded(self, run: Running) -> bool:
        """Whether a partial reclaim may take the loan `run`: what it would lose is bounded, as it
        checkpoints (periodically or when told it is preempted) or (re)started no more than
        `Policy.partial_reclaim_young_s` ago."""
        interval_s, young_s = run.job.checkpoint_interval_s, self.policy.partial_reclaim_young_s
        checkpoints = run.job.checkpoint_on_preempt or (interval_s is not None and interval_s > 0)
        return checkpoints or (young_s is not None and run.start_s >= self.now - young_s)

    def _may_take(self, job: Job, run: Running, reclaiming: bool, bounded_only: bool) -> bool:
        """Whether `job` may take GPUs from `run`. A class that may not preempt takes nothing; work
        nobody may preempt, or already leaving, is never taken; serving only by serving. Within a
        team, strictly lower priority. From another team only real loans, leaving that team its
        guarantee: strictly lower priority, or a loan its team reclaims (only a loan whose lost
        work is bounded, for a partial reclaim)."""
        victim = run.job
        if not job.may_preempt or not victim.preemptible or run.grace_until_s is not None:
            return False
        if victim.kind == "serving" and job.kind != "serving":
            return False
        if victim.team == job.team:
            return victim.priority < job.priority
        if not self._covered(job, run):
            return False
        if victim.priority < job.priority:
            return True
        return reclaiming and run.borrowing and (not bounded_only or self._loss_bounded(run))

    def _natural_s(self, job: Job, gpus: int, level: str) -> float:
        """When `gpus` GPUs of `job` would start within `level` without preemption (inf: never)."""
        found = self._earliest_start(job.accelerator, gpus, level, aware=self.policy.topology_aware)
        return math.inf if found is None else found[0]

    def _eligible(
        self, job: Job, reclaiming: bool, cap_gpu_s: float, shrinkable: bool, bounded_only: bool
    ) -> Iterator[_Victim]:
        """The running work (at the cycle's start) `job` may take (`may_preempt`; only loans whose lost
        work is bounded for a partial reclaim), cheapest first (work lost, priority, id). Each
        candidate looked at costs one unit of the scan budget; one search looks at no more than a
        quarter of the policy's budget. A candidate whose eviction alone costs the cap or more is
        left out unless it can shrink, and (when nothing can shrink) the search ends there. Work
        that ends by the end of the handover anyway is left alone."""
        policy, budgets = self.policy, self.budgets
        grace_s = max(0.0, policy.preemption_grace_s)
        visits = max(1, policy.preemption_scan_budget // 4)
        stop_gpu_s = math.inf if shrinkable else cap_gpu_s
        runs = [run for run in self.running if run.job.accelerator == job.accelerator]
        candidates = sorted((_victim_of(run, policy.elastic) for run in runs), key=_cheapest_first)
        for candidate in candidates:
            if budgets.scan_budget <= 0 or visits <= 0 or candidate.cost >= stop_gpu_s:
                return
            budgets.scan_budget -= 1
            visits -= 1
            run = candidate.run
            if candidate.job_id in self.picked or not self._may_take(job, run, reclaiming, bounded_only):
                continue
            if candidate.cost + grace_s * candidate.gpus >= cap_gpu_s and not candidate.shrinkable:
                continue
            penalty = self._penalty(run.allocation)
            if _expected_end_s(run, self.now, penalty) > self.now + policy.preemption_grace_s:
                yield candidate

    def _covered(self, job: Job, run: Running) -> bool:
        """Only real loans are taken from other teams: the victim's team keeps at least its guarantee
        (counting none of its GPUs that were already leaving as the cycle began)."""
        return self._keeps_guarantees(job, [(run.job.team, run.job.accelerator, run.gpus)])

    def _keeps_guarantees(self, job: Job, freed: list[tuple[str, str, int]]) -> bool:
        """Whether every other team the victims are taken from still uses at least its guarantee
        once they are all gone (counting none of its GPUs already leaving)."""
        taken: dict[tuple[str, str], int] = {}
        for team, accelerator, gpus in freed:
            if team != job.team:
                taken[team, accelerator] = taken.get((team, accelerator), 0) + gpus
        return all(
            self.ledger.used(team, accelerator) - self._leaving(team, accelerator) - gpus
            >= self.ledger.guaranteed(team, accelerator)
            for (team, accelerator), gpus in taken.items()
        )

    def _leaving(self, team: str, accelerator: str) -> int:
        """The GPUs of `team` that were already leaving (in their grace) as the cycle began."""
        return sum(
            other.gpus
            for other in self.running
            if other.grace_until_s is not None and (other.job.team, other.job.accelerator) == (team, accelerator)
        )

    def _hand_over(self, job: Job, gpus: int, choice: _Choice, max_level: str, partial: int | None) -> bool:
        """Tentatively give the victims' quota back; if the job is then admitted and the eviction pays
        at its natural start (for `partial` GPUs, not by age, when that is not None), evict and shrink
        them and start the job on their GPUs; else change nothing."""
        wait_s = _handover_s(choice, self.policy)
        covered = self._keeps_guarantees(job, _freed_quota(choice))
        trial = copy.deepcopy(self.ledger)
        for victim in choice.evict:
            trial.release(victim.run.job.team, victim.run.job.accelerator, victim.gpus)
        for victim, allocation in choice.shrink:
            kept = sum(on_node for _, on_node in allocation)
            trial.release(victim.run.job.team, victim.run.job.accelerator, victim.gpus - kept)
        admission = trial.admit(job.team, job.accelerator, gpus, not job.preemptible)
        cost_gpu_s = _eviction_cost_gpu_s(choice, wait_s)
        natural_s = self._natural_s(job, gpus, max_level)
        worth, by_age = (gpus, True) if partial is None else (partial, False)
        outranks = all(victim.priority < job.priority for victim in choice.evict)
        terms = _Terms(by_age, outranks)
        pays = _eviction_pays(job, worth, cost_gpu_s, wait_s, natural_s, self.now, self.policy, terms)
        if admission is None or (admission.borrowing and not covered) or not pays:
            return False
        self.ledger = trial
        for victim in choice.evict:
            del self.releases[victim.job_id]
            self._give_back(victim.gpus_on)
            self.picked.add(victim.job_id)
            self.actions.append(Preempt(victim.job_id, f"preempted-by:{job.id}", wait_s))
        for victim, allocation in choice.shrink:
            smaller = Running(victim.run.job, allocation, *_progress_of(victim.run))
            end_s = max(self.now, _expected_end_s(smaller, self.now, self._penalty(allocation)))
            self.releases[victim.job_id] = _Release(victim.run.job.team, victim.run.job.accelerator, end_s, allocation)
            self._give_back(victim.gpus_on)
            self.picked.add(victim.job_id)
            self.actions.append(Shrink(victim.job_id, allocation, sum(on_node for _, on_node in allocation)))
        fit = self._handover_fit(choice, gpus)
        self._commit_start(job, fit, admission, replaces=_ids(choice.evict))
        if wait_s > 0.0:
            # What the victims leave beside the preemptor is still theirs until their grace is over
            # (it comes free then, as that release says).
            grace = self._held_through_grace(choice, fit.allocation)
            if grace:
                self.releases[f"{job.id} handover"] = _Release("", job.accelerator, self.now + wait_s, grace)
                self._give_back(grace)
        return True

    def _held_through_grace(self, choice: _Choice, allocation: Allocation) -> Allocation:
        """What evicted victims leave beside the preemptor, on nodes not held for a reservation: no
        one may use it before their grace is over (they still write their checkpoints there)."""
        taken = dict(allocation)
        leaving: dict[str, int] = {}
        for victim in choice.evict:
            for node_id, gpus in victim.gpus_on:
                if gpus > 0 and node_id not in self.held:
                    leaving[node_id] = leaving.get(node_id, 0) + gpus
        return tuple(
            (node_id, gpus - taken[node_id]) for node_id, gpus in leaving.items() if gpus > taken.setdefault(node_id, 0)
        )

    def _give_back(self, allocation: Allocation) -> None:
        """The nodes of `allocation`, whose holders changed (victims left or shrank, GPUs were held
        through a grace period), have free what they may use (`Node.usable_gpus`: nothing when
        cordoned, whoever leaves) less what every holder still uses there (`releases`), never less
        than nothing. So victims' GPUs come free now (for the preemptor: `_hand_over` holds what
        evicted ones leave beside it until their grace is over), except on cordoned nodes, which
        take no new work, and on nodes held for a reservation: the reservation holds what those
        nodes had free when it was made, and the rest stays out of this cycle's placement."""
        for node_id, _ in allocation:
            if node_id not in self.held:
                in_use = sum(
                    gpus for release in self.releases.values() for on, gpus in release.allocation if on == node_id
                )
                self.free[node_id] = max(0, self.nodes[node_id].usable_gpus - in_use)

    def _handover_fit(self, choice: _Choice, gpus: int) -> _Fit:
        """The job starts on the chosen node, or packed on the chosen whole nodes."""
        gpn, node_ids = self.policy.gpus_per_node, list(choice.node_ids)
        allocation = ((node_ids[0], gpus),) if gpus <= gpn else _pack_whole_nodes(node_ids, gpus, gpn)
        return _Fit(allocation, self._level(node_ids))

    # Reservations ------------------------------------------------------------------------------

    def _reserve(self, job: Job) -> None:
        """Hold the nodes where a blocked head starts earliest, for the first `reservation_depth`
        heads of each accelerator. A gang whose narrow domain frees only after its patience starts
        at once at a wider level instead, when that fits now and quota admits it."""
        accelerator, budgets, depth = job.accelerator, self.budgets, max(0, self.policy.reservation_depth)
        if not self._can_reserve(accelerator):
            return
        made = budgets.reservations_made.get(accelerator, 0)
        budgets.reservation_attempts[accelerator] = budgets.reservation_attempts.get(accelerator, 0) + 1
        found = self._reservation_start(job)
        if found is None:
            return
        start_s, node_ids, level = found
        if start_s <= self.now and self._start_spread(job, level):
            return
        budgets.reservations_made[accelerator] = made + 1
        if made + 1 >= depth:
            budgets.reservation_attempts[accelerator] = self._reservation_cap()
        for node_id in node_ids:
            self.held[node_id] = self.held.get(node_id, 0) + self.free[node_id]
            self.free[node_id] = 0
        self.reservations.append(_Reservation(job.id, accelerator, node_ids, start_s))
        self.actions.append(Reserve(job.id, node_ids, start_s))
        self.estimates[job.id] = start_s

    def _start_spread(self, job: Job, level: str) -> bool:
        if level == self._gang_level(job):
            return False
        admission = self.ledger.admit(job.team, job.accelerator, job.gpus, not job.preemptible)
        fit = None if admission is None else self._place(self.free, job.accelerator, job.gpus, level, True)
        if admission is None or fit is None:
            return False
        self._commit_start(job, fit, admission)
        return True

    # Step 5 ------------------------------------------------------------------------------------

    def grow(self) -> None:
        """Idle GPUs on the nodes elastic jobs already occupy go to them (highest priority, then id,
        first), up to their `max_gpus` and as quota admits, on accelerators where no pending job was
        left waiting for capacity; victims of this cycle do not grow. A growth is borrowed when its
        job was, or when its team is beyond its guarantee once the accelerator's growth is done."""
        for accelerator in self.accelerators:
            if accelerator in self.waiting or self._total_free(accelerator) == 0:
                continue
            runs = [
                run
                for run in self.running
                if run.job.accelerator == accelerator and run.job.id not in self.picked
                if run.job.max_gpus is not None and run.grace_until_s is None
            ]
            grown = [
                (run, self._grow(run, accelerator)) for run in sorted(runs, key=lambda r: (-r.job.priority, r.job.id))
            ]
            for run, allocation in grown:
                if allocation is None:
                    continue
                team = run.job.team
                beyond = self.ledger.used(team, accelerator) > self.ledger.guaranteed(team, accelerator)
                gpus = sum(on_node for _, on_node in allocation)
                self.actions.append(Grow(run.job.id, allocation, gpus, run.borrowing or beyond))

    def _grow(self, run: Running, accelerator: str) -> Allocation | None:
        """The larger allocation `run` grows to, its GPUs taken and charged; None if it does not grow."""
        room = (run.job.max_gpus or 0) - run.gpus
        if room <= 0 or self._total_free(accelerator) == 0:
            return None
        added: dict[str, int] = {}
        for node_id, _ in run.allocation:
            node = self.nodes.get(node_id)
            if node_id in self.held or node is None or node.accelerator != accelerator:
                continue
            extra = min(room - sum(added.values()), self.free[node_id])
            if extra > 0:
                added[node_id] = extra
        total = sum(added.values())
        job = run.job
        if total <= 0 or self.ledger.admit(job.team, accelerator, total, not job.preemptible) is None:
            return None
        for node_id, extra in added.items():
            self.free[node_id] -= extra
        self.ledger.charge(job.team, accelerator, total, not job.preemptible)
        return tuple((node_id, gpus + added.get(node_id, 0)) for node_id, gpus in run.allocation)

    # Step 6 ------------------------------------------------------------------------------------

    def explain(self, queue: list[Job]) -> tuple[PendingStatus, ...]:
        """A reason and an estimate for every job that did not start, in queue order.

        The estimate: a reserved job's reservation start; otherwise the latest of when its GPUs are
        free at all along the release profile, when they fit by shape (a node with room for them,
        or enough whole nodes, fleet-wide and within its required level, nodes held for
        reservations left out; each counted when a release in view makes room), when the queue
        served in order would start it (`_list_start`: the first instant, no earlier than the last
        start of the jobs ahead of it on its accelerator, at which its GPUs are free once the
        running jobs' releases are counted and each job ahead with a believable estimate holds its
        GPUs from its start, or its reservation's, until it ends), and, when its team's guarantee
        can hold it, when that guarantee would start it, served in order likewise (its guarantee
        less what its team uses, its team's running work releasing, its team's jobs ahead
        holding); a job held back by quota also waits until its team's running work has ended
        enough to admit it. An estimate beyond `HORIZON_S`, or none, is replaced by what the job
        waits for."""
        statuses: list[PendingStatus] = []
        # Per accelerator, and per team and accelerator: (start, end, GPUs, started in order) of
        # each job ahead that holds GPUs there.
        held: dict[str, list[tuple[float, float, int, bool]]] = {}
        team_held: dict[tuple[str, str], list[tuple[float, float, int, bool]]] = {}
        for position, job in enumerate(queue):
            reason = self.reasons.get(position) or REASON_CAPACITY
            if reason == STARTED:
                continue
            fleet = held.setdefault(job.accelerator, [])
            team = team_held.setdefault((job.team, job.accelerator), [])
            estimate, starts = self._estimate(job, reason, fleet, team)
            if estimate is not None and estimate <= self.now + HORIZON_S:
                if job.accelerator in self.accelerators:
                    in_order = starts is not None
                    fleet_s, team_s = starts if starts is not None else (estimate, estimate)
                    fleet.append((fleet_s, fleet_s + job.estimate_s, job.gpus, in_order))
                    if self._guarantee_holds(job):
                        team.append((team_s, team_s + job.estimate_s, job.gpus, in_order))
                statuses.append(PendingStatus(job.id, reason, estimate))
            else:
                statuses.append(BlockedStatus(job.id, reason, None, self._waits_for(job, reason, estimate)))
        return tuple(statuses)

    def _estimate(
        self,
        job: Job,
        reason: str,
        fleet: list[tuple[float, float, int, bool]],
        team: list[tuple[float, float, int, bool]],
    ) -> tuple[float | None, tuple[float, float] | None]:
        """The estimate, and where the queue served in order starts the job on its accelerator and
        within its guarantee (None: a reservation's start)."""
        if job.id in self.estimates:
            return self.estimates[job.id], None
        if job.accelerator not in self.accelerators or self._short_of(job) is not None:
            return None, None
        times, levels, _ = self._curve(job.accelerator)
        if job.gpus > levels[-1] or levels[-1] <= 0:
            return None, None
        first_s = times[bisect_left(levels, job.gpus)]
        steps = [(times[at], levels[at] - levels[at - 1]) for at in range(1, len(times))]
        fleet_s = _list_start(self.now, levels[0], steps, fleet, job.gpus)
        if fleet_s is None:
            return None, None
        team_s = fleet_s
        if self._guarantee_holds(job):
            guaranteed = self.ledger.guaranteed(job.team, job.accelerator)
            releases = sorted(
                (release.end_s, sum(gpus for _, gpus in release.allocation))
                for release in self.releases.values()
                if (release.team, release.accelerator) == (job.team, job.accelerator)
            )
            free = guaranteed - self.ledger.used(job.team, job.accelerator)
            found = _list_start(self.now, free, releases, team, job.gpus)
            if found is None:
                return None, None
            team_s = found
        estimate = max(fleet_s, team_s, first_s)
        for level in {"fleet", job.required_level or "fleet"}:
            if self._place(self.free, job.accelerator, job.gpus, level, True) is None:
                found_start = self._earliest_start(job.accelerator, job.gpus, level, aware=True)
                if found_start is not None:
                    estimate = max(estimate, found_start[0])
        if reason == REASON_QUOTA:
            return self._quota_estimate(job, estimate), (fleet_s, team_s)
        return estimate, (fleet_s, team_s)

    def _guarantee_holds(self, job: Job) -> bool:
        """Whether the job's team has a guarantee of its accelerator that can hold the job whole."""
        guaranteed = self.ledger.guaranteed(job.team, job.accelerator)
        return 0 < guaranteed and job.gpus <= guaranteed

    def _curve(self, accelerator: str) -> tuple[list[float], list[int], list[float]]:
        """Free GPUs (held ones included) over time along the release profile, and the GPU-seconds
        they serve up to each release time."""
        node_ids = self._node_ids(accelerator)
        free_now = sum(self.free[n] for n in node_ids) + sum(self.held.get(n, 0) for n in node_ids)
        times, levels, areas = [self.now], [free_now], [0.0]
        for end_s, _, gpus in self._release_events(accelerator):
            if end_s > times[-1]:
                areas.append(areas[-1] + levels[-1] * (end_s - times[-1]))
                times.append(end_s)
                levels.append(levels[-1])
            levels[-1] += gpus
        return times, levels, areas

    def _quota_estimate(self, job: Job, estimate: float) -> float | None:
        """Not before the team's own running work (and this cycle's starts) has ended enough to admit
        the job at its smallest size, after the size its team's limit keeps for another job that
        waits (`_PlainLedger.hold`); never when that size is beyond the team's limit."""
        size = self._smallest_quota_size(job)
        limit = self.ledger.limit(job.team, job.accelerator)
        if size > limit:
            return None
        excess = self.ledger.used(job.team, job.accelerator) + size - limit
        excess += self.ledger.held_ahead(job.team, job.accelerator, job.id)
        if excess <= 0:
            return estimate
        ends = sorted(
            (release.end_s, sum(gpus for _, gpus in release.allocation))
            for release in self.releases.values()
            if (release.team, release.accelerator) == (job.team, job.accelerator)
        )
        freed = 0
        for end_s, gpus in ends:
            freed += gpus
            if freed >= excess:
                return max(estimate, end_s)
        return None

    def _smallest_quota_size(self, job: Job) -> int:
        if self.policy.elastic and job.is_elastic and job.min_gpus is not None:
            return job.min_gpus
        return job.gpus

    def _waits_for(self, job: Job, reason: str, estimate: float | None) -> str:
        """Its team's quota limit or running work; the fleet's healthy hardware or domains; the
        running job (least id) whose expected end is the estimate; else the queue ahead."""
        if reason == REASON_QUOTA:
            limited = self._smallest_quota_size(job) > self.ledger.limit(job.team, job.accelerator)
            return f"{WAITS_QUOTA_LIMIT if limited else WAITS_QUOTA}{job.team}"
        short = WAITS_HARDWARE if job.accelerator not in self.accelerators else self._short_of(job)
        if short is not None:
            return short
        if estimate is not None:
            ending = sorted(
                run.job.id
                for run in self.running
                if run.job.accelerator == job.accelerator
                and _expected_end_s(run, self.now, self._penalty(run.allocation)) == estimate
            )
            if ending:
                return f"{WAITS_JOB}{ending[0]}"
        return WAITS_QUEUE

    def _short_of(self, job: Job) -> str | None:
        """Hardware or a domain no empty fleet of today's healthy nodes offers the job."""
        gpn = self.policy.gpus_per_node
        nodes = [self.nodes[node_id] for node_id in self._node_ids(job.accelerator)]
        if job.gpus <= gpn:
            return WAITS_HARDWARE if job.gpus > max(node.usable_gpus for node in nodes) else None
        count = _nodes_needed(job.gpus, gpn)
        whole = [node for node in nodes if node.usable_gpus >= gpn]
        if count > len(whole):
            return WAITS_HARDWARE
        level = job.required_level
        if level is None or LEVEL_RANK[level] >= LEVEL_RANK["fleet"]:
            return None
        domains: dict[str, int] = {}
        for node in whole:
            domain = node.rack_key if level == "rack" else node.pod
            domains[domain] = domains.get(domain, 0) + 1
        room = 1 if level == "node" else max(domains.values(), default=0)
        return f"{WAITS_DOMAIN}{level}" if count > room else None

    # Placement ---------------------------------------------------------------------------------

    def _place(self, free: dict[str, int], accelerator: str, gpus: int, max_level: str, aware: bool) -> _Fit | None:
        """Gang placement, all or nothing. A single-node job goes on the best-packed node
        (`_best_node`), or the first with room in id order without topology awareness.
        A multi-node gang takes whole nodes, in one rack if any has enough (the one with the fewest
        to spare), else one pod, else the fleet, never wider than `max_level`; without topology
        awareness, the first whole nodes in id order that lie in one domain of `max_level`."""
        gpn = self.policy.gpus_per_node
        node_ids = self._node_ids(accelerator)
        if gpus <= 0:
            return None
        if gpus <= gpn:
            if aware:
                chosen = self._best_node(free, accelerator, gpus)
            else:
                kept = self.kept.get(accelerator, frozenset())
                roomy = [node_id for node_id in node_ids if free[node_id] >= gpus]
                chosen = next((node_id for node_id in roomy if node_id not in kept), roomy[0] if roomy else None)
            return None if chosen is None else _Fit(((chosen, gpus),), "node")
        count = _nodes_needed(gpus, gpn)
        whole = [node_id for node_id in node_ids if free[node_id] >= gpn]
        if len(whole) < count or LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
            return None
        if aware:
            picked = self._smallest_domain(whole, count, max_level)
        else:
            racks = {n: self.nodes[n].rack_key for n in whole}
            pods = {n: self.nodes[n].pod for n in whole}
            picked = _first_in_one_domain(whole, count, max_level, racks, pods)
        if picked is None or len(picked) < count:
            return None
        level = self._level(picked)
        if LEVEL_RANK[level] > LEVEL_RANK[max_level]:
            return None
        return _Fit(_pack_whole_nodes(picked, gpus, gpn), level)

    def _best_node(self, free: dict[str, int], accelerator: str, gpus: int) -> str | None:
        """The packing rule (`packing`): among nodes with room, a node in use before a whole one, then
        the fewest free GPUs, then the rack with the fewest free GPUs (the most used), then the rack,
        the node's free GPUs and its id."""
        gpn = self.policy.gpus_per_node
        node_ids = self._node_ids(accelerator)
        rack_free: dict[str, int] = {}
        for node_id in node_ids:
            rack_free[self.nodes[node_id].rack_key] = rack_free.get(self.nodes[node_id].rack_key, 0) + free[node_id]

        def key(node_id: str) -> tuple[bool, int, int, str, int, str]:
            rack, whole = self.nodes[node_id].rack_key, free[node_id] >= gpn
            return (whole, 0 if whole else free[node_id], rack_free[rack], rack, free[node_id], node_id)

        return min((node_id for node_id in node_ids if free[node_id] >= gpus), key=key, default=None)

    def _smallest_domain(self, whole: list[str], count: int, max_level: str) -> list[str] | None:
        by_rack: dict[str, list[str]] = {}
        by_pod: dict[str, list[str]] = {}
        for node_id in whole:
            by_rack.setdefault(self.nodes[node_id].rack_key, []).append(node_id)
            by_pod.setdefault(self.nodes[node_id].pod, []).append(node_id)
        racks = sorted((len(members) - count, rack) for rack, members in by_rack.items() if len(members) >= count)
        if racks:
            return by_rack[racks[0][1]][:count]
        if LEVEL_RANK[max_level] < LEVEL_RANK["pod"]:
            return None
        pods = sorted((len(members) - count, pod) for pod, members in by_pod.items() if len(members) >= count)
        if not pods and LEVEL_RANK[max_level] < LEVEL_RANK["fleet"]:
            return None
        # Within the pod (or across pods, fullest first), the fullest racks first.
        chosen_pods = [pods[0][1]] if pods else sorted(by_pod, key=lambda pod: (-len(by_pod[pod]), pod))
        chosen: list[str] = []
        for pod in chosen_pods:
            racks_of_pod = [rack for rack in by_rack if self.nodes[by_rack[rack][0]].pod == pod]
            for rack in sorted(racks_of_pod, key=lambda rack: (-len(by_rack[rack]), rack)):
                chosen += by_rack[rack][: count - len(chosen)]
            if len(chosen) == count:
                break
        return chosen

    # Plain state, read ---------------------------------------------------------------------------

    def _node_ids(self, accelerator: str) -> list[str]:
        return self.node_ids_of.get(accelerator, [])

    def _total_free(self, accelerator: str) -> int:
        return sum(self.free[node_id] for node_id in self._node_ids(accelerator))

    def _fleet(self, accelerator: str) -> _Fleet:
        """The accelerator's nodes as the victim search reads them."""
        nodes = [self.nodes[node_id] for node_id in self._node_ids(accelerator)]
        return _Fleet(
            free={node.id: self.free[node.id] for node in nodes},
            usable={node.id: node.usable_gpus for node in nodes},
            rack={node.id: node.rack_key for node in nodes},
            pod={node.id: node.pod for node in nodes},
            held=frozenset(self.held),
            gpus_per_node=self.policy.gpus_per_node,
        )

    def _release_events(self, accelerator: str) -> list[tuple[float, str, int]]:
        """When GPUs of `accelerator` come free, as (time, node, GPUs) in time order: every holder's
        release (a running job's expected end, a start's worst-case end, a handover's grace), never
        before now."""
        events = [
            (max(self.now, release.end_s), node_id, gpus)
            for release in self.releases.values()
            if release.accelerator == accelerator
            for node_id, gpus in release.allocation
        ]
        return sorted(events, key=lambda event: event[0])

    def _earliest_start(
        self, accelerator: str, gpus: int, max_level: str, *, aware: bool
    ) -> tuple[float, tuple[str, ...]] | None:
        """The first release time at which `gpus` GPUs fit within `max_level`, on what is free now
        plus what the releases up to then give back, and the nodes they get (None: not in view).

        Releases on nodes held for a reservation give nothing back. It is a start that waits for a
        release: at each release time in turn, a single-node job goes on a node that gains GPUs at
        that time and then has room for it (no more than its usable GPUs), the one with the fewest
        to spare, then by id; a gang takes whole nodes once enough are whole (`_gang_nodes_at`)."""
        gpn = self.policy.gpus_per_node
        if gpus > gpn and LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
            return None
        nodes = {node_id: self.nodes[node_id] for node_id in self._node_ids(accelerator)}
        events = self._release_events(accelerator)
        released: dict[str, int] = {}
        for time_s in sorted({event[0] for event in events}):
            gaining = [(n, g) for t, n, g in events if t == time_s and n in nodes and n not in self.held]
            for node_id, gained in gaining:
                released[node_id] = released.get(node_id, 0) + gained
            if gpus <= gpn:
                has = {n: min(nodes[n].usable_gpus, self.free[n] + released[n]) for n, _ in gaining}
                room = [(free - gpus, node_id) for node_id, free in has.items() if free >= gpus]
                if room:
                    return time_s, (min(room)[1],)
                continue
            chosen = self._gang_nodes_at(accelerator, _nodes_needed(gpus, gpn), released, max_level, aware)
            if chosen is not None:
                return time_s, chosen
        return None

    def _gang_nodes_at(
        self, accelerator: str, count: int, released: dict[str, int], max_level: str, aware: bool
    ) -> tuple[str, ...] | None:
        """Whole nodes for a gang of `count` nodes once `released` GPUs have come back (None: no
        choice yet). A node is whole with a node's GPUs free; it is "new" when the releases make it
        whole (it can hold a whole node and is not held for a reservation). Topology-aware: the rack
        with the fewest to spare among those with a new whole node and enough whole ones, else such
        a pod (within `max_level`), else (at the fleet level) the first whole nodes by id. Without
        topology awareness: the first whole nodes by id that gather in one domain of `max_level`."""
        gpn = self.policy.gpus_per_node
        nodes = [self.nodes[node_id] for node_id in self._node_ids(accelerator)]
        whole = [node for node in nodes if self.free[node.id] >= gpn]
        new = [
            node
            for node in nodes
            if self.free[node.id] < gpn <= node.usable_gpus
            and node.id not in self.held
            and self.free[node.id] + released.get(node.id, 0) >= gpn
        ]
        every = whole + new
        if len(every) < count:
            return None
        if not aware:
            racks = {node.id: node.rack_key for node in every}
            pods = {node.id: node.pod for node in every}
            chosen = _first_in_one_domain(sorted(racks), count, max_level, racks, pods)
            return None if chosen is None else tuple(chosen)

        def fewest_to_spare(domain: Callable[[Node], str]) -> tuple[str, ...] | None:
            ready = sorted(
                (spare, name)
                for name in {domain(node) for node in new}
                if (spare := sum(1 for node in every if domain(node) == name) - count) >= 0
            )
            if not ready:
                return None
            return tuple(sorted(node.id for node in every if domain(node) == ready[0][1])[:count])

        chosen_nodes = fewest_to_spare(lambda node: node.rack_key)
        if chosen_nodes is None and LEVEL_RANK[max_level] >= LEVEL_RANK["pod"]:
            chosen_nodes = fewest_to_spare(lambda node: node.pod)
        if chosen_nodes is None and LEVEL_RANK[max_level] >= LEVEL_RANK["fleet"]:
            chosen_nodes = tuple(sorted(node.id for node in every)[:count])
        return chosen_nodes

    def _reservation_start(self, job: Job) -> tuple[float, tuple[str, ...], str] | None:
        """When and where a blocked head starts earliest, and the level it is looked for at: first at
        the widest level it may take now (`_gang_level`, as one that can reserve).

        A gang held within one pod because a start there finishes it sooner waits for that pod. A
        gang held to a narrower domain than its own by its patience waits for it while that domain
        frees before its patience runs out; otherwise it is also looked for at its own level, from
        when its patience runs out, or from now if no domain of the narrow level frees within
        `HORIZON_S` (or none could ever hold it): whichever starts first is its reservation (now,
        when it fits at its own level already)."""
        accelerator, policy = job.accelerator, self.policy
        owed = self.ledger.used(job.team, accelerator) < self.ledger.guaranteed(job.team, accelerator)
        max_level = self._gang_level(job, can_reserve=True)
        found = self._earliest_start(accelerator, job.gpus, max_level, aware=policy.topology_aware)
        narrow = None if found is None else (found[0], found[1], max_level)
        own_level, patience_s = job.required_level or "fleet", _patience_s(policy, owed, job.requeued_by_failure)
        if patience_s is None or LEVEL_RANK[own_level] <= LEVEL_RANK[max_level] or job.gpus <= policy.gpus_per_node:
            return narrow
        if max_level != self._patient_level(job, owed):  # held within one pod
            return narrow
        patience_end_s = job.submit_s + patience_s
        if narrow is not None and narrow[0] <= patience_end_s:
            return narrow
        fit = self._place(self.free, accelerator, job.gpus, own_level, True)
        spread = (
            (self.now, tuple(node_id for node_id, _ in fit.allocation))
            if fit is not None
            else self._earliest_start(accelerator, job.gpus, own_level, aware=True)
        )
        if spread is None:
            return narrow
        if narrow is not None:
            hopeless = narrow[0] > self.now + HORIZON_S
        else:
            hopeless = not self._fits_some_domain(accelerator, job.gpus, max_level)
        start_s = max(spread[0], self.now if hopeless else patience_end_s)
        if narrow is not None and narrow[0] <= start_s:
            return narrow
        return start_s, spread[1], own_level

    def _fits_some_domain(self, accelerator: str, gpus: int, level: str) -> bool:
        """Whether an empty fleet of today's healthy nodes holds `gpus` GPUs within one domain of
        `level`: one node's GPUs (no more than the node size planning assumes), or the whole nodes of
        the domain with the most nodes that can be whole."""
        gpn = self.policy.gpus_per_node
        nodes = [self.nodes[node_id] for node_id in self._node_ids(accelerator)]
        capable = [node for node in nodes if node.usable_gpus >= gpn]
        racks: dict[str, int] = {}
        pods: dict[str, int] = {}
        for node in capable:
            racks[node.rack_key] = racks.get(node.rack_key, 0) + 1
            pods[node.pod] = pods.get(node.pod, 0) + 1
        if level == "node":
            room = min(1, len(capable))
        elif level in ("rack", "pod"):
            room = max((racks if level == "rack" else pods).values(), default=0)
        else:
            room = len(capable)
        largest = max((node.usable_gpus for node in nodes), default=0)
        return gpus <= max(min(gpn, largest), room * gpn)

    def _level(self, node_ids: list[str]) -> str:
        """The smallest topology domain holding all of `node_ids`: one node, one rack, one pod, or the fleet."""
        if len(set(node_ids)) <= 1:
            return "node"
        if len({self.nodes[node_id].rack_key for node_id in node_ids}) == 1:
            return "rack"
        return "pod" if len({self.nodes[node_id].pod for node_id in node_ids}) == 1 else "fleet"

    def _penalty(self, allocation: Allocation) -> float:
        """The topology penalty of a running placement (nodes the fleet does not know count as their
        own rack and pod)."""
        node_ids = {node_id for node_id, _ in allocation}
        if len(node_ids) <= 1:
            return self.policy.penalty("node")
        racks = {self.nodes[n].rack_key if n in self.nodes else n for n in node_ids}
        pods = {self.nodes[n].pod if n in self.nodes else n for n in node_ids}
        level = "rack" if len(racks) == 1 else "pod" if len(pods) == 1 else "fleet"
        return self.policy.penalty(level)


def _fairshare_priorities(snapshot: Snapshot) -> dict[str, float]:
    """Slurm's classic fair-share factor per team with usage, 2^(-U/S): the team's decayed usage per
    entitlement (its guarantees over all accelerators, at least one GPU, times its fair-share
    weight), over the mean of that across those teams. 1.0: nothing used; heavier users tend to 0."""
    guaranteed: dict[str, int] = {}
    for quota in snapshot.quotas:
        guaranteed[quota.team] = guaranteed.get(quota.team, 0) + max(0, quota.guaranteed)
    weights = {team.id: team.fairshare_weight for team in snapshot.teams}

    def entitlement(team: str) -> float:
        if team not in guaranteed and team not in weights:
            return 1.0
        return max(guaranteed.get(team, 0), 1) * max(weights.get(team, 1.0), 1e-9)

    per_entitlement = {team: max(0.0, used) / entitlement(team) for team, used in snapshot.usage}
    if not per_entitlement:
        return {}
    mean = math.fsum(per_entitlement.values()) / len(per_entitlement)
    if mean <= 0.0:
        return dict.fromkeys(per_entitlement, 1.0)
    return {team: math.pow(2.0, -share / mean) for team, share in per_entitlement.items()}


def _used_per_node(running: list[Running]) -> dict[str, int]:
    used: dict[str, int] = {}
    for run in running:
        for node_id, gpus in run.allocation:
            used[node_id] = used.get(node_id, 0) + gpus
    return used


def _cheapest_first(candidate: _Victim) -> tuple[float, int, str]:
    return candidate.cost, candidate.priority, candidate.job_id


def _progress_of(run: Running) -> tuple[float, float, float, bool, float | None]:
    return run.start_s, run.progress_s, run.checkpoint_s, run.borrowing, run.grace_until_s


def _ids(candidates: tuple[_Victim, ...]) -> tuple[str, ...]:
    return tuple(candidate.job_id for candidate in candidates)


# Quota, stated plainly ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Admission:
    """A job quota admits: on borrowed quota or not."""

    borrowing: bool


@dataclass(slots=True)
class _Account:
    """One team's quota of one accelerator and what it uses. A team without a quota row there has
    no guarantee, lends nothing and may borrow without limit."""

    guaranteed: int = 0
    limit: float = math.inf
    lend_cap: float = 0.0
    used: int = 0
    # The most the team may hold while one of its waiting jobs keeps its size within the limit.
    cap: float = math.inf


class _PlainLedger:
    """The quota rules (Kueue-like, per accelerator), every total summed from the teams' accounts
    when it is read.

    A team may always use up to its guarantee; beyond it, it borrows, up to its limit (guarantee +
    borrow limit), from the pool: the capacity nobody is guaranteed plus each team's unused
    guarantee, up to its lend limit. All loans together stay within the pool less the borrower's
    own unused guarantee (no loan to oneself), and a team starting within its guarantee may not
    take back what its guarantee lends out (the borrowers are reclaimed first). Work nobody may
    preempt ("pinned") beyond its team's guarantee uses only capacity nobody is guaranteed. A
    waiting job that has waited `hold_after_s` keeps its size within its team's limit (the first
    such job of its team and accelerator in a cycle). With `max_share_of_lender`, no borrower
    holds more than that share of what another team lends (`_shares_hold`)."""

    def __init__(self, snapshot: Snapshot, running: list[Running], capacity: dict[str, int]) -> None:
        self.capacity = dict(capacity)
        self.accounts: dict[tuple[str, str], _Account] = {}
        for quota in snapshot.quotas:
            guaranteed = max(0, quota.guaranteed)
            lend_cap = math.inf if quota.lend_limit is None else max(0, quota.lend_limit)
            self.accounts[quota.team, quota.accelerator] = _Account(
                guaranteed, guaranteed + max(0, quota.borrow_limit), lend_cap
            )
            self.capacity.setdefault(quota.accelerator, 0)
        hold_after_s = snapshot.policy.quota_hold_after_s
        self.hold_after_s = math.inf if hold_after_s is None else hold_after_s
        self.share_of_lender = snapshot.policy.max_share_of_lender
        self.holds_anything = hold_after_s is not None and any(
            account.limit < self.capacity[accelerator] for (_, accelerator), account in self.accounts.items()
        )
        self.holders: dict[tuple[str, str], str] = {}
        self.pinned: dict[str, int] = {}
        usage: dict[tuple[str, str], int] = {}
        pinned: dict[tuple[str, str], int] = {}
        for run in running:
            key = (run.job.team, run.job.accelerator)
            usage[key] = usage.get(key, 0) + run.gpus
            if run.borrowing and not run.job.preemptible and run.grace_until_s is None:
                pinned[key] = pinned.get(key, 0) + run.gpus
        for (team, accelerator), gpus in usage.items():
            self._account(team, accelerator).used += gpus
        for (team, accelerator), gpus in pinned.items():
            beyond = max(0, self.used(team, accelerator) - self.guaranteed(team, accelerator))
            self.pinned[accelerator] = self.pinned.get(accelerator, 0) + min(gpus, beyond)
        # Loans the pool did not cover as the cycle began: no guarantee backs them, so they never
        # keep a team from its own guarantee.
        self.unbacked = {
            accelerator: max(0, math.ceil(self._loans(accelerator) - self._pool(accelerator)))
            for accelerator in self.capacity
        }

    def _account(self, team: str, accelerator: str) -> _Account:
        self.capacity.setdefault(accelerator, 0)
        return self.accounts.setdefault((team, accelerator), _Account())

    def _of(self, accelerator: str) -> list[_Account]:
        return [account for (_, of), account in self.accounts.items() if of == accelerator]

    # What the accounts say ---------------------------------------------------------------------

    def used(self, team: str, accelerator: str) -> int:
        return self._account(team, accelerator).used

    def guaranteed(self, team: str, accelerator: str) -> int:
        return self._account(team, accelerator).guaranteed

    def limit(self, team: str, accelerator: str) -> float:
        return self._account(team, accelerator).limit

    def borrowed(self, team: str, accelerator: str) -> int:
        return max(0, self.used(team, accelerator) - self.guaranteed(team, accelerator))

    def _lends(self, account: _Account, used: int | None = None) -> float:
        """What a team's unused guarantee lends (at `used` GPUs in use, by default what it uses)."""
        return min(account.lend_cap, max(0, account.guaranteed - (account.used if used is None else used)))

    def unguaranteed(self, accelerator: str) -> tuple[int, int]:
        """Capacity nobody is guaranteed, and what pinned work beyond its guarantee holds of it."""
        guaranteed = sum(account.guaranteed for account in self._of(accelerator))
        return max(0, self.capacity.get(accelerator, 0) - guaranteed), self.pinned.get(accelerator, 0)

    def _pool(self, accelerator: str) -> float:
        return self.unguaranteed(accelerator)[0] + sum(self._lends(account) for account in self._of(accelerator))

    def _loans(self, accelerator: str) -> int:
        return sum(max(0, account.used - account.guaranteed) for account in self._of(accelerator))

    def lendable_to(self, team: str, accelerator: str) -> int:
        """What other teams could lend `team` now: the pool, less the loans, less its own unused guarantee."""
        own = self._lends(self.accounts[team, accelerator]) if (team, accelerator) in self.accounts else 0.0
        return max(0, math.floor(self._pool(accelerator) - own - self._loans(accelerator)))

    def short_of_limit(self, team: str, accelerator: str, gpus: int) -> int:
        """How many GPUs beyond its guarantee plus borrow limit `team` would hold with `gpus` more."""
        if (team, accelerator) not in self.accounts:
            return 0
        account = self.accounts[team, accelerator]
        return 0 if account.limit == math.inf else max(0, math.ceil(account.used + gpus - account.limit))

    def short_of_pool(self, team: str, accelerator: str, gpus: int) -> int:
        """How many of the GPUs `team` would borrow with `gpus` more other teams cannot lend it now."""
        account = self._account(team, accelerator)
        borrowing = account.used + gpus - max(account.used, account.guaranteed)
        return max(0, max(0, borrowing) - self.lendable_to(team, accelerator))

    def short_of_unguaranteed(self, team: str, accelerator: str, gpus: int) -> int:
        """How many GPUs beyond those nobody is guaranteed pinned work would hold with `gpus` more
        of `team`'s beyond its guarantee."""
        account = self._account(team, accelerator)
        beyond = max(0, account.used + gpus - max(account.used, account.guaranteed))
        unguaranteed, pinned = self.unguaranteed(accelerator)
        return max(0, pinned + beyond - unguaranteed) if beyond > 0 else 0

    def any_headroom(self) -> bool:
        """Whether some team uses less than its guarantee (of any accelerator)."""
        return any(account.used < account.guaranteed for account in self.accounts.values())

    def within_guarantee(self, team: str, accelerator: str, gpus: int) -> bool:
        return self.used(team, accelerator) + gpus <= self.guaranteed(team, accelerator)

    def reclaims(self, team: str, accelerator: str, gpus: int, share: float) -> bool:
        """A job reclaims loans when its team has guarantee left, at least `share` of its size."""
        unused = self.guaranteed(team, accelerator) - self.used(team, accelerator)
        return unused > 0 and unused >= share * gpus

    def borrowers_rank(self, job: Job) -> tuple[int, float]:
        """Among borrowers: the teams that borrow the fewest GPUs first, then the larger share of the
        job within what is left of its team's guarantee."""
        team, accelerator = job.team, job.accelerator
        left = 0
        if (team, accelerator) in self.accounts:
            left = max(0, self.guaranteed(team, accelerator) - self.used(team, accelerator))
        return self.borrowed(team, accelerator), -left / job.gpus if job.gpus > 0 else 0.0

    # Admission ---------------------------------------------------------------------------------

    def admit(self, team: str, accelerator: str, gpus: int, pinned: bool = False) -> _Admission | None:
        """Whether `team` may start `gpus` more GPUs now, and on borrowed quota or not."""
        account = self._account(team, accelerator)
        after = account.used + gpus
        if after > account.cap:
            return None
        others_lend = self._pool(accelerator) - self._lends(account)
        loans = self._loans(accelerator)
        if after <= account.guaranteed:  # its own GPUs, unless the loans its guarantee backs need them
            backed = loans - self.unbacked.get(accelerator, 0)
            return None if backed > others_lend + self._lends(account, after) else _Admission(False)
        if after > account.limit:
            return None
        extra = after - max(account.used, account.guaranteed)
        if loans + extra > others_lend:
            return None
        if pinned and self.pinned.get(accelerator, 0) + extra > self.unguaranteed(accelerator)[0]:
            return None
        if not self._shares_hold(team, accelerator, after):
            return None
        return _Admission(True)

    def _shares_hold(self, team: str, accelerator: str, after: int) -> bool:
        """Whether, once `team` uses `after` GPUs, every loan could be paid by someone: whatever
        group of borrowers we pick, together they borrow no more than the capacity nobody is
        guaranteed plus, from every team that lends, what it lends, but never more than the share
        of it each member of the group may hold (`max_share_of_lender`)."""
        share = self.share_of_lender
        if share is None:
            return True
        loans: dict[str, int] = {}
        lenders: list[float] = []
        for (name, of), account in self.accounts.items():
            if of != accelerator:
                continue
            used = after if name == team else account.used
            if used > account.guaranteed:
                loans[name] = used - account.guaranteed
            else:
                lenders.append(math.floor(self._lends(account, used)))
        spare = self.unguaranteed(accelerator)[0]
        for members in range(1, len(loans) + 1):
            for group in itertools.combinations(loans.values(), members):
                payable = spare + sum(min(lent, members * math.floor(share * lent)) for lent in lenders)
                if sum(group) > payable:
                    return False
        return True

    def room(self, team: str, accelerator: str, most: int, pinned: bool = False) -> int:
        """The most GPUs, up to `most`, that quota admits now (0: none)."""
        return max((gpus for gpus in range(most + 1) if self.admit(team, accelerator, gpus, pinned)), default=0)

    def refusal(self, team: str, accelerator: str, gpus: int, free_gpus: int, pinned: bool = False) -> str:
        """Why quota refuses: the team's limit, a loan no idle fleet could lend, or idle GPUs that are
        not lendable ("quota"); pinned work with no unguaranteed capacity left ("guarantee");
        otherwise other teams' loans hold the pool ("capacity": reclaiming or waiting helps)."""
        account = self._account(team, accelerator)
        after = account.used + gpus
        if after > min(account.limit, account.cap):
            return REASON_QUOTA
        if after <= account.guaranteed:
            return REASON_CAPACITY
        extra = after - max(account.used, account.guaranteed)
        unguaranteed, pinned_now = self.unguaranteed(accelerator)
        if pinned and pinned_now + extra > unguaranteed:
            return REASON_GUARANTEE
        if self._loans(accelerator) + extra <= self._pool(accelerator) - self._lends(account):
            return REASON_QUOTA  # the pool would lend it; the lenders' shares do not
        # Alone on an idle fleet: its guarantee, and what everyone else's guarantee could lend.
        most_lent = unguaranteed + sum(min(other.lend_cap, other.guaranteed) for other in self._of(accelerator))
        never = account.guaranteed + most_lent - min(account.lend_cap, account.guaranteed)
        if never < gpus <= self.capacity[accelerator] or free_gpus >= gpus:
            return REASON_QUOTA
        return REASON_CAPACITY

    # Holds -------------------------------------------------------------------------------------

    def hold(self, team: str, accelerator: str, gpus: int, job_id: str, waited_s: float) -> None:
        """The team's first waiting job (of `gpus` GPUs) that waited `hold_after_s` keeps its size
        within the team's limit: the team's other work is admitted within the limit less that size,
        never less than its guarantee. Nothing is kept for a job beyond the limit, nor where the
        limit is beyond the accelerator's capacity."""
        key = (team, accelerator)
        if not self.holds_anything or key in self.holders or waited_s < self.hold_after_s:
            return
        account = self._account(team, accelerator)
        if gpus > account.limit or account.limit >= self.capacity[accelerator]:
            return
        self.holders[key] = job_id
        account.cap = max(account.limit - gpus, account.guaranteed)

    def held_ahead(self, team: str, accelerator: str, job_id: str) -> float:
        """The GPUs the team's limit keeps for a waiting job other than `job_id`."""
        kept = self.kept_for(team, accelerator)
        return 0.0 if kept is None or kept[0] == job_id else self.limit(team, accelerator) - kept[1]

    def kept_for(self, team: str, accelerator: str) -> tuple[str, float] | None:
        holder = self.holders.get((team, accelerator))
        account = self.accounts.get((team, accelerator))
        if holder is None or account is None or account.cap == math.inf:
            return None
        return holder, account.cap

    # Changes -----------------------------------------------------------------------------------

    def charge(self, team: str, accelerator: str, gpus: int, pinned: bool = False) -> None:
        account = self._account(team, accelerator)
        if pinned:
            beyond = account.used + gpus - max(account.used, account.guaranteed)
            self.pinned[accelerator] = self.pinned.get(accelerator, 0) + max(0, beyond)
        account.used += gpus

    def release(self, team: str, accelerator: str, gpus: int) -> None:
        self._account(team, accelerator).used -= gpus


# Whether an eviction pays, stated plainly ---------------------------------------------------------


def _handover_s(choice: _Choice, policy: Policy) -> float:
    """The preemptor waits out its victims' grace period if anyone is evicted; a shrink hands over at once."""
    return max(0.0, policy.preemption_grace_s) if choice.evict else 0.0


def _eviction_cost_gpu_s(choice: _Choice, handover_s: float) -> float:
    """The work the evicted victims roll back, and their GPUs' time spent on the handover."""
    return sum(victim.cost + handover_s * victim.gpus for victim in choice.evict)


def _credited_wait_s(job: Job, natural_s: float, start_s: float, now: float, policy: Policy, terms: _Terms) -> float:
    """The wait an eviction saves `job`, as it is credited (inf: any cost pays).

    Taking only lower-priority work: the wait to its natural start; once it has waited
    `reclaim_after_s` (when that counts), all it has waited. Reclaiming loans: the wait to its
    natural start, but no more than `reclaim_wait_credit` times what it has waited; past
    `reclaim_after_s`, that multiple of its wait whatever the natural start (no credit factor:
    any cost)."""
    to_natural_s = natural_s - start_s
    waited_s = max(0.0, now - job.submit_s)
    past_bound = terms.by_age and policy.reclaim_after_s is not None and now - job.submit_s >= policy.reclaim_after_s
    if terms.outranks:
        return waited_s if past_bound else to_natural_s
    factor = policy.reclaim_wait_credit
    if factor is None:
        return math.inf if past_bound else max(0.0, to_natural_s)
    return waited_s * factor if past_bound else max(0.0, min(to_natural_s, waited_s * factor))


def _eviction_pays(
    job: Job,
    gpus: int,
    cost_gpu_s: float,
    handover_s: float,
    natural_s: float,
    now: float,
    policy: Policy,
    terms: _Terms,
) -> bool:
    """An eviction pays when the job starts earlier by it than it would (at `natural_s`) and it destroys
    nothing, or the job serves (its wait costs a service), or what it destroys is less than the
    wait it saves on `gpus` GPUs."""
    start_s = now + handover_s
    if natural_s <= start_s:
        return False
    if cost_gpu_s <= 0.0 or job.kind == "serving":
        return True
    return cost_gpu_s < gpus * _credited_wait_s(job, natural_s, start_s, now, policy, terms)


def _eviction_cap_gpu_s(
    job: Job, gpus: int, handover_s: float, natural_s: float, now: float, policy: Policy, terms: _Terms
) -> float:
    """The cost every paying eviction stays below (`_eviction_pays` solved for the cost): nothing
    pays when the job starts no earlier by it; an eviction that destroys nothing always pays
    (the least positive cost)."""
    start_s = now + handover_s
    if natural_s <= start_s:
        return 0.0
    if job.kind == "serving":
        return math.inf
    return max(gpus * _credited_wait_s(job, natural_s, start_s, now, policy, terms), math.ulp(0.0))


def _freed_quota(choice: _Choice) -> list[tuple[str, str, int]]:
    """(team, accelerator, GPUs) each victim gives back: all of an evicted one, what a shrink gives up."""
    freed = [(victim.run.job.team, victim.run.job.accelerator, victim.gpus) for victim in choice.evict]
    for victim, allocation in choice.shrink:
        freed.append((victim.run.job.team, victim.run.job.accelerator, victim.gpus - _gpus_of(allocation)))
    return freed


def _gpus_of(allocation: Allocation) -> int:
    return sum(gpus for _, gpus in allocation)


# Victims, stated plainly --------------------------------------------------------------------------

# The victim search stops looking at candidates once it has this many nodes to choose from (or four
# per node a gang needs, if more), and looks four times as far each time what it has cannot be
# combined into a choice (`tests/engine/test_reference.py` checks they are the fast engine's).
ENOUGH_NODES = 16
NODES_PER_GANG_NODE = 4
GOAL_GROWTH = 4
# Below every job priority: the priority of a node that is freed without taking anything.
_NO_PRIORITY = -(2**31)


@dataclass(frozen=True, slots=True)
class _Victim:
    """A running job seen as a possible victim: the work evicting it rolls back (`cost`, GPU-seconds:
    nothing for a job already leaving) and the GPUs it could give up by shrinking toward its
    `min_gpus` instead (`shrinkable`: only under an elastic policy, never while leaving)."""

    run: Running
    cost: float
    shrinkable: int

    @property
    def job_id(self) -> str:
        return self.run.job.id

    @property
    def priority(self) -> int:
        return self.run.job.priority

    @property
    def gpus_on(self) -> Allocation:
        return self.run.allocation

    @property
    def gpus(self) -> int:
        return _gpus_of(self.run.allocation)


def _victim_of(run: Running, elastic: bool) -> _Victim:
    leaving = run.grace_until_s is not None
    shrinkable = 0
    if elastic and run.job.min_gpus is not None and not leaving:
        shrinkable = max(0, _gpus_of(run.allocation) - run.job.min_gpus)
    return _Victim(run, 0.0 if leaving else run.lost_gpu_s, shrinkable)


@dataclass(frozen=True, slots=True)
class _Choice:
    """The victims chosen: the nodes the job starts on, whom to evict, whom to shrink to what."""

    node_ids: tuple[str, ...]
    evict: tuple[_Victim, ...]
    shrink: tuple[tuple[_Victim, Allocation], ...]


class _Option(NamedTuple):
    """One way to get GPUs on a node: evict a victim (all it runs there) or shrink it (no work lost)."""

    evicts: bool
    cost: float
    priority: int
    job_id: str
    released: int
    victim: _Victim
    node_id: str


class _Freed(NamedTuple):
    """The cheapest options that free a node: their cost, their highest priority, the options."""

    cost: float
    top_priority: int
    picks: tuple[_Option, ...]


@dataclass(frozen=True, slots=True)
class _Fleet:
    """What the victim search reads of an accelerator's nodes: free GPUs now (0 on nodes held for a
    reservation), usable GPUs, rack and pod, the nodes held for reservations, GPUs per node."""

    free: dict[str, int]
    usable: dict[str, int]
    rack: dict[str, str]
    pod: dict[str, str]
    held: AbstractSet[str]
    gpus_per_node: int

    def whole(self) -> list[str]:
        """The nodes with a whole node's GPUs free, in id order."""
        return sorted(node_id for node_id, free in self.free.items() if free >= self.gpus_per_node)


def _choose_victims(
    gpus: int, fleet: _Fleet, candidates: Iterable[_Victim], max_level: str, *, per_node: bool = False
) -> _Choice | None:
    """The cheapest victims that let `gpus` GPUs of a job fit within `max_level`, or None.

    A single-node job needs all its GPUs on one node; a gang needs whole nodes, in one domain of
    `max_level` (a gang cannot fit one node). `candidates` come cheapest first and are looked at one
    by one (each look may cost scan budget: they are drawn only as needed). A node "can be freed"
    when it lacks the GPUs the job needs there (all of them for a single-node job, a whole node for
    a gang) and the candidates looked at so far run enough there to make up the difference; nodes
    held for a reservation, nodes too small, and other accelerators' nodes never count, nor do
    nodes that have the room already.

    The search stops early, and that changes who is chosen: once it has `ENOUGH_NODES` nodes to
    choose from (or `NODES_PER_GANG_NODE` per node a gang needs, if more; a gang counts the whole
    nodes free already), and, for a gang bound to a rack or pod, once some domain with a node that
    can be freed has enough whole or freeable nodes for it, it chooses among the candidates looked
    at so far (`_cheapest_choice`). When they cannot be combined into a choice, it looks on until it
    has `GOAL_GROWTH` times as many nodes, and so on; after the last candidate it chooses among
    all it looked at."""
    gpn = fleet.gpus_per_node
    single = gpus <= gpn
    if not single and LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
        return None
    count = 1 if single else _nodes_needed(gpus, gpn)
    goal = max(ENOUGH_NODES, NODES_PER_GANG_NODE * count)
    seen: list[_Victim] = []
    for candidate in candidates:
        seen.append(candidate)
        freeable = _freeable(gpus, fleet, seen)
        whole = 0 if single else len(fleet.whole())
        if len(freeable) + whole >= goal and _domain_ready(fleet, freeable, count, max_level):
            choice = _cheapest_choice(gpus, fleet, seen, max_level, per_node)
            if choice is not None:
                return choice
            goal *= GOAL_GROWTH
    return _cheapest_choice(gpus, fleet, seen, max_level, per_node)


def _needed_on_node(gpus: int, gpus_per_node: int) -> int:
    """What a job needs free on each of its nodes: all its GPUs, or (a gang) a whole node."""
    return gpus if gpus <= gpus_per_node else gpus_per_node


def _options(gpus: int, fleet: _Fleet, seen: list[_Victim]) -> dict[str, list[_Option]]:
    """Per node that could ever hold the job's share, every way the victims seen free GPUs there:
    shrinking one (up to what it may give up, no more than it runs there) or evicting it.

    A victim with GPUs on a node held for a reservation is not shrunk, only evicted: it keeps those
    GPUs when it shrinks, and the reservation was timed by its release at its present size, which a
    smaller size pushes later."""
    needed = _needed_on_node(gpus, fleet.gpus_per_node)
    options: dict[str, list[_Option]] = {}
    for victim in seen:
        on_reserved = any(node_id in fleet.held for node_id, _ in victim.gpus_on)
        for node_id, on_node in victim.gpus_on:
            if node_id not in fleet.free or node_id in fleet.held or fleet.usable[node_id] < needed:
                continue
            here = options.setdefault(node_id, [])
            if victim.shrinkable and not on_reserved:
                released = min(on_node, victim.shrinkable)
                here.append(_Option(False, 0.0, victim.priority, victim.job_id, released, victim, node_id))
            here.append(_Option(True, victim.cost, victim.priority, victim.job_id, on_node, victim, node_id))
    return options


def _freeable(gpus: int, fleet: _Fleet, seen: list[_Victim]) -> list[str]:
    """The nodes (in id order) that lack room for the job's share but that the victims seen could free."""
    needed = _needed_on_node(gpus, fleet.gpus_per_node)
    return [
        node_id
        for node_id, options in sorted(_options(gpus, fleet, seen).items())
        if fleet.free[node_id]
        < needed
        <= fleet.free[node_id] + sum(option.released for option in options if option.evicts)
    ]


def _domain_ready(fleet: _Fleet, freeable: list[str], count: int, max_level: str) -> bool:
    """A gang bound to a rack or pod: some domain with a freeable node has `count` whole or freeable nodes."""
    if count == 1 or max_level == "fleet":
        return True
    domain = fleet.rack if max_level == "rack" else fleet.pod
    whole = fleet.whole()
    return any(sum(1 for n in freeable + whole if domain[n] == domain[node_id]) >= count for node_id in freeable)


def _free_node(options: list[_Option], need: int) -> _Freed | None:
    """The cheapest options on one node that give back `need` GPUs: shrinks first (no work lost),
    then evictions, cheapest, lowest priority, by id, until enough is given back; evicting a job
    already shrunk there replaces the shrink; the last shrink gives up only what is still needed."""
    picks: dict[str, _Option] = {}
    released = 0
    for option in sorted(options, key=lambda o: (o.evicts, o.cost, o.priority, o.job_id)):
        if released >= need:
            break
        previous = picks.get(option.job_id)
        if previous is not None:
            released -= previous.released
        if not option.evicts and option.released > need - released:
            option = option._replace(released=need - released)
        picks[option.job_id] = option
        released += option.released
    if released < need:
        return None
    top = max((option.priority for option in picks.values()), default=_NO_PRIORITY)
    return _Freed(sum(option.cost for option in picks.values()), top, tuple(picks.values()))


def _cheapest_choice(
    gpus: int, fleet: _Fleet, seen: list[_Victim], max_level: str, per_node: bool = False
) -> _Choice | None:
    """The cheapest choice among the victims seen (`_cheapest_node`, `_cheapest_domain`)."""
    options = _options(gpus, fleet, seen)
    freeable = _freeable(gpus, fleet, seen)
    if gpus <= fleet.gpus_per_node:
        return _cheapest_node(gpus, fleet, options, freeable)
    return _cheapest_domain(gpus, fleet, options, freeable, max_level, per_node)


def _cheapest_node(gpus: int, fleet: _Fleet, options: dict[str, list[_Option]], freeable: list[str]) -> _Choice | None:
    """A single-node job takes the node freed at the least cost, then with the lowest highest
    priority taken, the fewest victims, the node id."""
    best: tuple[tuple[float, int, int, str], str, tuple[_Option, ...]] | None = None
    for node_id in freeable:
        freed = _free_node(options[node_id], gpus - fleet.free[node_id])
        if freed is None:
            continue
        key = (freed.cost, freed.top_priority, len(freed.picks), node_id)
        if best is None or key < best[0]:
            best = (key, node_id, freed.picks)
    return None if best is None else _fold_choice((best[1],), best[2])


def _cheapest_domain(  # noqa: PLR0913
    gpus: int,
    fleet: _Fleet,
    options: dict[str, list[_Option]],
    freeable: list[str],
    max_level: str,
    per_node: bool = False,
) -> _Choice | None:
    """A gang takes, in the narrowest domain (rack, then pod, then the fleet, up to `max_level`)
    that has enough whole or freeable nodes, its cheapest nodes (whole ones cost nothing): the
    domain whose chosen nodes' victims lose the least work in all (each victim counted once; with
    `per_node`, the fast engine's `VICTIM_COST_PER_NODE`, once per chosen node it frees), then with
    the lowest highest priority taken, then the domain's name."""
    gpn = fleet.gpus_per_node
    count = _nodes_needed(gpus, gpn)
    freed_at = dict.fromkeys(fleet.whole(), _Freed(0.0, _NO_PRIORITY, ()))
    for node_id in freeable:
        freed = _free_node(options[node_id], gpn - fleet.free[node_id])
        if freed is not None:
            freed_at[node_id] = freed
    for level in ("rack", "pod", "fleet"):
        if LEVEL_RANK[level] > LEVEL_RANK[max_level]:
            break
        groups: dict[str, list[str]] = {}
        for node_id in sorted(freed_at):
            name = fleet.rack[node_id] if level == "rack" else fleet.pod[node_id] if level == "pod" else "fleet"
            groups.setdefault(name, []).append(node_id)
        chosen: tuple[tuple[float, int, str], list[str]] | None = None
        for name, members in sorted(groups.items()):
            if len(members) < count:
                continue
            cheapest = sorted(members, key=lambda n: (freed_at[n].cost, freed_at[n].top_priority, n))[:count]
            picks = [option for n in cheapest for option in freed_at[n].picks]
            cost = sum(freed_at[n].cost for n in cheapest) if per_node else _lost_once(picks)
            key = (cost, max(freed_at[n].top_priority for n in cheapest), name)
            if chosen is None or key < chosen[0]:
                chosen = (key, cheapest)
        if chosen is not None:
            chosen_picks = tuple(option for node_id in chosen[1] for option in freed_at[node_id].picks)
            return _fold_choice(tuple(chosen[1]), chosen_picks)
    return None


def _lost_once(picks: list[_Option]) -> float:
    """The work the victims of `picks` lose, each victim once (a shrink loses nothing)."""
    lost: dict[str, float] = {}
    for option in picks:
        lost[option.job_id] = max(lost.get(option.job_id, 0.0), option.cost)
    return sum(lost.values())


def _fold_choice(node_ids: tuple[str, ...], picks: tuple[_Option, ...]) -> _Choice:
    """Per-node picks become whole-job decisions: a job evicted on one node is evicted everywhere,
    and one asked to give up more than it may shrink by, over all the chosen nodes, is evicted."""
    evicted = {option.job_id: option.victim for option in picks if option.evicts}
    shrink_on: dict[str, dict[str, int]] = {}
    victims = {option.job_id: option.victim for option in picks}
    for option in picks:
        if not option.evicts:
            shrink_on.setdefault(option.job_id, {})[option.node_id] = option.released
    shrinks: list[tuple[_Victim, Allocation]] = []
    for job_id in sorted(shrink_on.keys() - evicted.keys()):
        victim, given = victims[job_id], shrink_on[job_id]
        if sum(given.values()) > victim.shrinkable:
            evicted[job_id] = victim
            continue
        kept = tuple((n, on_node - given.get(n, 0)) for n, on_node in victim.gpus_on if on_node - given.get(n, 0) > 0)
        shrinks.append((victim, kept))
    return _Choice(node_ids, tuple(evicted[job_id] for job_id in sorted(evicted)), tuple(shrinks))


# Reservations and release times, stated plainly ---------------------------------------------------


def _list_start(
    now: float,
    free: int,
    releases: list[tuple[float, int]],
    held: list[tuple[float, float, int, bool]],
    gpus: int,
) -> float | None:
    """The first instant, no earlier than `now` nor than the latest start of the jobs ahead started
    in order, at which `gpus` are free: `free` now, plus the `releases` (time, GPUs) up to then,
    less what the jobs ahead hold then (`held`: start, end, GPUs, started in order). None: never."""
    clock = max([now] + [start_s for start_s, _, _, in_order in held if in_order])
    instants = sorted(
        {clock}
        | {time_s for time_s, _ in releases if time_s > clock}
        | {at_s for start_s, end_s, _, _ in held for at_s in (start_s, end_s) if at_s > clock}
    )
    for at_s in instants:
        released = sum(gpus_at for time_s, gpus_at in releases if time_s <= at_s)
        holding = sum(gpus_at for start_s, end_s, gpus_at, _ in held if start_s <= at_s < end_s)
        if free + released - holding >= gpus:
            return at_s
    return None


# How far ahead the fleet is foreseeable: an estimate beyond it is not shown, and a gang does not
# wait for a domain that frees only beyond it. Reservation attempts per accelerator and cycle
# beyond `Policy.reservation_depth`: a job that can never fit does not sweep the releases over and
# over. (`tests/engine/test_reference.py` checks they are the fast engine's.)
HORIZON_S = 30 * 86400.0
EXTRA_RESERVATION_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class _Reservation:
    """Nodes held this cycle for a blocked head that starts on them at `start_s`."""

    job_id: str
    accelerator: str
    node_ids: tuple[str, ...]
    start_s: float


def _patience_s(policy: Policy, owed: bool, failed: bool) -> float | None:
    """How long a gang waits for its narrowest domain: `Policy.gang_spread_after_s`, or the lowest of
    it, for a gang of a team below its guarantee (`owed`) `Policy.guarantee_spread_after_s`, and for
    a gang a node failure requeued (`failed`) `Policy.failure_spread_after_s` (None: no bound)."""
    bounds = [
        policy.gang_spread_after_s,
        policy.guarantee_spread_after_s if owed else None,
        policy.failure_spread_after_s if failed else None,
    ]
    return min((bound for bound in bounds if bound is not None), default=None)


def _expected_end_s(run: Running, now: float, penalty: float = 1.0) -> float:
    """When a running job is expected to give its GPUs back (never before now): the end of its
    grace when it is leaving, else its start plus its time limit, else its known release, else
    when its remaining work is done at its progress rate (its share of its size, slowed by
    `penalty`, the topology penalty of its placement)."""
    if run.grace_until_s is not None:
        return max(now, run.grace_until_s)
    job = run.job
    if job.time_limit_s is not None:
        return max(now, run.start_s + job.time_limit_s)
    if run.release_s is not None:
        return max(now, run.release_s)
    remaining_s = max(0.0, job.duration_s - run.progress_s)
    return now + remaining_s * job.gpus / max(1, run.gpus) * penalty


def _worst_runtime_s(job: Job, size: int, penalty: float) -> float:
    """How long a start of `size` GPUs can hold them: its time limit, else its whole duration at the
    progress rate of that size slowed by `penalty`."""
    if job.time_limit_s is not None:
        return job.time_limit_s
    return job.duration_s * penalty * job.gpus / max(1, size)


def _worst_penalty(policy: Policy, size: int, max_level: str) -> float:
    """The slowest topology penalty a placement of `size` GPUs within `max_level` can get."""
    if size <= policy.gpus_per_node:
        return policy.penalty("node")
    return max(policy.penalty(level) for level, rank in LEVEL_RANK.items() if rank <= LEVEL_RANK[max_level])


# Placement's shapes, stated plainly -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fit:
    """Where a start goes: its GPUs per node, and the smallest domain holding them."""

    allocation: Allocation
    level: str


def _nodes_needed(gpus: int, gpus_per_node: int) -> int:
    """The nodes a gang of `gpus` takes: whole nodes, the last one perhaps partly."""
    return -(-gpus // gpus_per_node)


def _narrower(level: str, other: str) -> str:
    return level if LEVEL_RANK[level] <= LEVEL_RANK[other] else other


def _pack_whole_nodes(node_ids: list[str], gpus: int, gpus_per_node: int) -> Allocation:
    """A gang's GPUs on its nodes: a whole node's worth on each, in order, the remainder on the last."""
    allocation: list[tuple[str, int]] = []
    for node_id in node_ids:
        share = min(gpus_per_node, gpus - sum(on_node for _, on_node in allocation))
        allocation.append((node_id, share))
    return tuple(allocation)


def _first_in_one_domain(
    node_ids: list[str], count: int, max_level: str, rack: dict[str, str], pod: dict[str, str]
) -> list[str] | None:
    """The first `count` of `node_ids` (in their order) that lie in one domain of `max_level`: the
    domain that gathers `count` of them first (at the fleet level, simply the first `count`). None
    when no domain has that many."""
    if LEVEL_RANK[max_level] >= LEVEL_RANK["fleet"]:
        return node_ids[:count] if len(node_ids) >= count else None
    domain_of = rack if max_level == "rack" else pod
    gathered: dict[str, list[str]] = {}
    for node_id in node_ids:
        members = gathered.setdefault(domain_of[node_id], [])
        members.append(node_id)
        if len(members) == count:
            return members
    return None

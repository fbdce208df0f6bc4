"""Victim selection: the cheapest set of running work whose removal frees a fitting domain.

A job whose priority class may not preempt (`Job.may_preempt` False, Kubernetes' preemptionPolicy
`Never`) takes nothing from anyone: it neither evicts nor shrinks running work to start, even to
reclaim its team's guarantee. Work nobody may preempt (its priority class says so) is never a
victim. Within a team, work may be taken when it is strictly lower priority. Another team's work
may be taken only as far as that team keeps its guarantee (as in Kueue, where a workload preempts
in other queues only what they borrow): when it is strictly lower priority, or when it is
borrowing quota and the preemptor's team is reclaiming within its own guarantee. Otherwise a job
that borrows could take a guarantee by priority and its owner reclaim it back at once, forever.
A partial reclaim (a job only partly within what is left of its guarantee, which reclaims by
`Policy.reclaim_guaranteed_share` and borrows the rest) takes only loans whose lost work is bounded
(`partial_reclaim_takes`: they checkpoint periodically or on preemption, or they (re)started within
`Policy.partial_reclaim_young_s`).
Serving is never preempted by anything but serving. Cost is
the work the victim would roll back (GPU-seconds): everything since its last checkpoint (since its
start, without one), nothing when it checkpoints on preemption; then its priority. Elastic
victims give up GPUs by shrinking toward `min_gpus` (no work lost), only as many as needed,
before anyone is evicted, except a victim that runs on a node held for a reservation this cycle:
at a smaller size it would hold that node past the reservation's start (`stays_on_held`). Jobs
already in their grace period are not taken again: their GPUs come back at its end, as the
release profile says. Whether an eviction pays is decided here too (`eviction_pays`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Final, NamedTuple

from .capacity import AcceleratorPool
from .model import LEVEL_RANK, Job, Policy, Running
from .ordering import sort_by_number
from .placement import nodes_needed
from .plan import Allocation


class Candidate:
    """A running job seen as a possible victim (a per-cycle working object). Its one mutable part
    is `ends_soon`, the memo of whether the job releases its GPUs by the end of this cycle's
    handover anyway (`reclaim.ends_by` at `now` + grace, the same for every search of a cycle)."""

    __slots__ = ("run", "gpus_on", "cost", "shrinkable", "job_id", "leaving", "gpus", "priority", "ends_soon")

    def __init__(self, run: Running, gpus_on: tuple[tuple[str, int], ...], cost: float, shrinkable: int) -> None:
        self.run = run
        self.gpus_on = gpus_on
        self.cost = cost
        self.shrinkable = shrinkable
        self.job_id = run.job.id
        self.leaving = run.grace_until_s is not None
        self.gpus = gpus_on[0][1] if len(gpus_on) == 1 else sum(gpus for _, gpus in gpus_on)
        self.priority = run.job.priority
        self.ends_soon: bool | None = None


@dataclass(frozen=True, slots=True)
class VictimChoice:
    node_ids: tuple[str, ...]
    evict: tuple[Candidate, ...]
    shrink: tuple[tuple[Candidate, Allocation], ...]


def candidate_of(run: Running, elastic: bool) -> Candidate:
    return _candidate(run, elastic, _lost_gpu_s(run))


def _candidate(run: Running, elastic: bool, cost: float) -> Candidate:
    """`candidate_of` with its cost (`_lost_gpu_s`) already known."""
    job = run.job
    shrinkable = 0
    if elastic and job.min_gpus is not None and run.grace_until_s is None:
        shrinkable = max(0, sum(gpus for _, gpus in run.allocation) - job.min_gpus)
    return Candidate(run, run.allocation, cost, shrinkable)


class Victims:
    """The running jobs of one accelerator as victim candidates, cheapest first (work lost, then
    priority, then job id), each made the first time a search reaches it.

    Finding the order takes one number per job, each job's cost (`costs`, in order), which its
    candidate then takes instead of computing it again (fast path; plain: `candidate_of`); the
    searches of a cycle look at no more than the policy's scan budget of candidates in all, however
    many jobs run. Iterating starts from the cheapest every time."""

    __slots__ = ("runs", "costs", "made", "elastic", "shrinkable")

    def __init__(self, running: Iterable[Running], accelerator: str, elastic: bool) -> None:
        self.runs = [run for run in running if run.job.accelerator == accelerator]
        self.costs = sort_by_number(self.runs, _lost_gpu_s, _priority_then_id)
        self.made: list[Candidate] = []
        self.elastic = elastic
        # Whether some candidate could give up GPUs by shrinking (`candidate_of(...).shrinkable`).
        self.shrinkable = elastic and any(
            run.job.min_gpus is not None and run.grace_until_s is None and run.gpus > run.job.min_gpus
            for run in self.runs
        )

    def __iter__(self) -> Iterator[Candidate]:
        made, runs, costs = self.made, self.runs, self.costs
        position = 0
        while position < len(runs):
            if position == len(made):
                made.append(_candidate(runs[position], self.elastic, costs[position]))
            yield made[position]
            position += 1


def _lost_gpu_s(run: Running) -> float:
    """`candidate_of(run, ...).cost`: nothing for a job already leaving."""
    return 0.0 if run.grace_until_s is not None else run.lost_gpu_s


def _priority_then_id(run: Running) -> tuple[int, str]:
    return run.job.priority, run.job.id


def bounded_loss(job: Job) -> bool:
    """Whether preempting `job` rolls back at most a bounded amount of work: it checkpoints every
    `checkpoint_interval_s` of work (at most one interval lost) or when told it is preempted
    (nothing lost but the grace period). Without either, everything since its start is lost."""
    interval_s = job.checkpoint_interval_s
    return job.checkpoint_on_preempt or (interval_s is not None and interval_s > 0)


def young_since_s(policy: Policy, now: float) -> float | None:
    """The earliest (re)start of a loan without checkpoints that a partial reclaim at `now` may take
    (`Policy.partial_reclaim_young_s` before `now`; None: none)."""
    young_s = policy.partial_reclaim_young_s
    return None if young_s is None else now - young_s


def partial_reclaim_takes(job: Job, start_s: float, since_s: float | None) -> bool:
    """Whether a partial reclaim may take a loan of `job` running since `start_s` (what it would
    lose is bounded): `job` checkpoints (`bounded_loss`), or the run (re)started at or after
    `since_s` (`young_since_s`), so that it loses at most `Policy.partial_reclaim_young_s` of work."""
    return bounded_loss(job) or (since_s is not None and start_s >= since_s)


def may_preempt(
    preemptor: Job,
    victim: Running,
    reclaiming: bool,
    victim_team_stays_covered: bool,
    bounded_only: bool = False,
    since_s: float | None = None,
) -> bool:
    """Whether `preemptor` may take GPUs from `victim` (rules in the module docstring).

    Only real loans are taken from another team, by reclaim and by priority alike: the victim's
    team must still use at least its own guarantee after losing the victim
    (`victim_team_stays_covered`), otherwise two teams would keep taking from each other. A partial
    reclaim (`bounded_only`) takes only loans whose lost work is bounded (`partial_reclaim_takes`
    with `since_s`, from `young_since_s`); what it may take by priority is unchanged.
    """
    job = victim.job
    if not preemptor.may_preempt or not job.preemptible or victim.grace_until_s is not None:
        return False
    if job.kind == "serving" and preemptor.kind != "serving":
        return False
    if job.team == preemptor.team:
        return job.priority < preemptor.priority
    if not victim_team_stays_covered:
        return False
    if job.priority < preemptor.priority:
        return True
    return reclaiming and victim.borrowing and (not bounded_only or partial_reclaim_takes(job, victim.start_s, since_s))


# A victim search stops adding candidates once it has this many nodes it could free to choose
# from (or four per node a gang needs, if more), and looks four times as far each time the nodes
# it has cannot be combined into a choice.
ENOUGH_NODES = 16
NODES_PER_GANG_NODE = 4
GOAL_GROWTH = 4
# Below every job priority: the priority of a node that is freed without taking anything.
NO_PRIORITY = -(2**31)


# One way to get GPUs on a node: evict a candidate, or shrink it. A plain tuple read through the
# field positions below (fast path: a search builds one or two per candidate and node, and a
# named tuple's constructor made small cycles a tenth slower).
_Option = tuple[float, int, str, int, Candidate, bool, str]
COST: Final = 0  # the work lost (none for a shrink)
PRIORITY: Final = 1
JOB_ID: Final = 2
RELEASED: Final = 3  # GPUs it gives back on NODE_ID
CANDIDATE: Final = 4
EVICTS: Final = 5  # False: a shrink
NODE_ID: Final = 6
# Shrinks (no work lost) before any eviction, then the cheapest, lowest priority, by id.
_option_order = itemgetter(EVICTS, COST, PRIORITY, JOB_ID)


class _Freed(NamedTuple):
    """The cheapest options that free a node: their cost, their highest priority, the options."""

    cost: float
    top_priority: int
    picks: tuple[_Option, ...]


_NOTHING_TAKEN = _Freed(0.0, NO_PRIORITY, ())


def pick_victims(
    job: Job,
    gpus: int,
    pool: AcceleratorPool,
    candidates: Iterable[Candidate],
    *,
    max_level: str,
    held: dict[str, int],
    enough_nodes: int = ENOUGH_NODES,
) -> VictimChoice | None:
    """The cheapest victims that let `gpus` GPUs of `job` fit, or None when none do.

    `candidates` must be sorted cheapest first. Nodes become feasible as cheap candidates are
    added; the search stops as soon as enough feasible nodes exist to choose from, which keeps a
    victim search far below O(running jobs) on a busy fleet while still preferring cheap victims.
    """
    gpn = pool.gpus_per_node
    single = gpus <= gpn
    if not single and LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
        return None
    threshold = gpus if single else gpn
    count = 1 if single else nodes_needed(gpus, gpn)
    goal = max(enough_nodes, NODES_PER_GANG_NODE * count)
    options: dict[str, list[_Option]] = {}
    releasable: dict[str, int] = {}
    feasible: list[str] = []
    free, usable = pool.free, pool.usable
    # A gang bound to a rack (or pod) needs `count` whole or freeable nodes in one of them: no
    # choice is tried before some domain has that many.
    domain_of = None if single or max_level == "fleet" else pool.node_rack if max_level == "rack" else pool.node_pod
    in_domain: dict[str, int] = {}
    ready = domain_of is None
    for candidate in candidates:
        priority = candidate.priority
        shrinks = candidate.shrinkable and not (held and stays_on_held(candidate.gpus_on, held))
        for node_id, on_node in candidate.gpus_on:
            if node_id not in free or node_id in held or usable[node_id] < threshold:
                continue
            node_options = options.setdefault(node_id, [])
            if shrinks:
                released = min(on_node, candidate.shrinkable)
                node_options.append((0.0, priority, candidate.job_id, released, candidate, False, node_id))
            node_options.append((candidate.cost, priority, candidate.job_id, on_node, candidate, True, node_id))
            before = releasable.get(node_id, 0)
            releasable[node_id] = before + on_node
            if free[node_id] + before < threshold <= free[node_id] + before + on_node:
                feasible.append(node_id)
                if domain_of is not None and not ready:
                    domain = domain_of[node_id]
                    in_domain[domain] = in_domain.get(domain, 0) + 1
                    whole = len(pool.whole_by_rack[domain]) if max_level == "rack" else pool.pod_whole[domain]
                    ready = in_domain[domain] + whole >= count
        if ready and len(feasible) + (0 if single else pool.whole_count) >= goal:
            choice = _evaluate(pool, options, feasible, gpus, count, max_level)
            if choice is not None:
                return choice
            goal *= GOAL_GROWTH
    return _evaluate(pool, options, feasible, gpus, count, max_level)


def stays_on_held(gpus_on: Allocation, held: Mapping[str, int]) -> bool:
    """Whether a victim runs on a node held for a reservation. Such a victim is not shrunk: the
    reservation's start counts on its release there, and at a smaller size it would end later (a
    shrink keeps its GPUs on the held node, since GPUs given up there stay held). Evicting it only
    frees the node sooner."""
    return any(node_id in held for node_id, _ in gpus_on)


def _evaluate(
    pool: AcceleratorPool,
    options: dict[str, list[_Option]],
    feasible: list[str],
    gpus: int,
    count: int,
    max_level: str,
) -> VictimChoice | None:
    if gpus <= pool.gpus_per_node:
        return _pick_single(pool, options, sorted(feasible), gpus)
    return _pick_gang(pool, options, sorted(feasible), count, max_level)


def _free_node(options: dict[str, list[_Option]], node_id: str, need: int) -> _Freed | None:
    """Greedy cheapest options on one node releasing >= need GPUs (`_option_order`), or None.
    A shrink gives up only the GPUs still needed, so the elastic victim keeps the rest."""
    picks: dict[str, _Option] = {}
    released = 0
    for option in sorted(options.get(node_id, ()), key=_option_order):
        if released >= need:
            break
        previous = picks.get(option[JOB_ID])
        if previous is not None:
            released -= previous[RELEASED]
        if not option[EVICTS] and option[RELEASED] > need - released:
            # the shrink gives up only what is still needed
            option = (option[COST], option[PRIORITY], option[JOB_ID], need - released, *option[CANDIDATE:])
        picks[option[JOB_ID]] = option
        released += option[RELEASED]
    if released < need:
        return None
    cost = sum(option[COST] for option in picks.values())
    top = max((option[PRIORITY] for option in picks.values()), default=NO_PRIORITY)
    return _Freed(cost, top, tuple(picks.values()))


def _pick_single(
    pool: AcceleratorPool, options: dict[str, list[_Option]], feasible: list[str], gpus: int
) -> VictimChoice | None:
    best = None
    for node_id in feasible:
        need = gpus - pool.free[node_id]
        freed = _free_node(options, node_id, need)
        if freed is None:
            continue
        key = (freed.cost, freed.top_priority, len(freed.picks), node_id)
        if best is None or key < best[0]:
            best = (key, node_id, freed.picks)
    if best is None:
        return None
    return _choice((best[1],), best[2])


def _pick_gang(
    pool: AcceleratorPool, options: dict[str, list[_Option]], feasible: list[str], count: int, max_level: str
) -> VictimChoice | None:
    gpn = pool.gpus_per_node
    per_node: dict[str, _Freed] = {}
    for whole in pool.whole_by_rack.values():
        for node_id in whole:
            per_node[node_id] = _NOTHING_TAKEN
    for node_id in feasible:
        if node_id in per_node:
            continue
        freed = _free_node(options, node_id, gpn - pool.free[node_id])
        if freed is not None:
            per_node[node_id] = freed
    domains: list[tuple[str, dict[str, list[str]]]] = [("rack", {}), ("pod", {}), ("fleet", {})]
    for node_id in sorted(per_node):
        domains[0][1].setdefault(pool.node_rack[node_id], []).append(node_id)
        domains[1][1].setdefault(pool.node_pod[node_id], []).append(node_id)
        domains[2][1].setdefault("fleet", []).append(node_id)
    for level, groups in domains:
        if LEVEL_RANK[level] > LEVEL_RANK[max_level]:
            break
        cheapest = _cheapest_domain(per_node, groups, count)
        if cheapest is not None:
            picks = tuple(option for node_id in cheapest for option in per_node[node_id].picks)
            return _choice(tuple(cheapest), picks)
    return None


def _cheapest_domain(per_node: dict[str, _Freed], groups: dict[str, list[str]], count: int) -> list[str] | None:
    """The `count` cheapest nodes of the cheapest domain among `groups` that has that many (by
    their total cost, then their highest victim priority, then the domain's name), or None."""
    best = None
    for name, members in sorted(groups.items()):
        if len(members) < count:
            continue
        cheapest = sorted(members, key=lambda n: (per_node[n].cost, per_node[n].top_priority, n))[:count]
        key = (sum(per_node[n].cost for n in cheapest), max(per_node[n].top_priority for n in cheapest), name)
        if best is None or key < best[0]:
            best = (key, cheapest)
    return None if best is None else best[1]


def _choice(node_ids: tuple[str, ...], picks: tuple[_Option, ...]) -> VictimChoice:
    """Fold per-node picks into whole-job decisions: evict anywhere means evict everywhere."""
    evicted: dict[str, Candidate] = {}
    shrink_on: dict[str, dict[str, int]] = {}
    candidates: dict[str, Candidate] = {}
    for _, _, job_id, released, candidate, evicts, node_id in picks:  # the fields of `_Option`
        candidates[job_id] = candidate
        if evicts:
            evicted[job_id] = candidate
        else:
            shrink_on.setdefault(job_id, {})[node_id] = released
    shrinks: list[tuple[Candidate, Allocation]] = []
    for job_id in sorted(shrink_on):
        if job_id in evicted:
            continue
        candidate = candidates[job_id]
        if sum(shrink_on[job_id].values()) > candidate.shrinkable:
            evicted[job_id] = candidate
            continue
        allocation = tuple(
            (node_id, gpus - shrink_on[job_id].get(node_id, 0))
            for node_id, gpus in candidate.gpus_on
            if gpus - shrink_on[job_id].get(node_id, 0) > 0
        )
        shrinks.append((candidate, allocation))
    evict = tuple(evicted[job_id] for job_id in sorted(evicted))
    return VictimChoice(node_ids, evict, tuple(shrinks))


# The price of an eviction: the one home of the rule "eviction pays" and of "victim price"; the
# terms are `reclaim`'s module docstring's. -------------------------------------------------------


def victim_price_gpu_s(cost_gpu_s: float, gpus: int, handover: float) -> float:
    """Rule "victim price": what evicting one victim costs, the work it rolls back (`Candidate.cost`)
    plus its `gpus` GPUs' time spent on the handover. Every eviction is priced by it
    (`eviction_cost_gpu_s`, and each candidate of a victim search against its cap)."""
    return cost_gpu_s + handover * gpus


def eviction_cost_gpu_s(choice: VictimChoice, handover: float) -> float:
    """The work the victims roll back, plus their GPUs' time spent on the handover."""
    return sum(victim_price_gpu_s(victim.cost, victim.gpus, handover) for victim in choice.evict)


# The least positive cost (GPU-seconds): the cost cap when only an eviction that destroys nothing pays.
NOTHING_GPU_S = math.ulp(0.0)


class Terms(NamedTuple):
    """How an eviction is priced besides its cost and the natural start: whether waiting
    `reclaim_after_s` counts (`by_age`), and whether every victim is of lower priority than the
    preemptor (`outranks`: an eviction by priority, not a reclaim of loans)."""

    by_age: bool = True
    outranks: bool = False


# The terms of a reclaim of loans by a job within its guarantee (the default).
RECLAIM = Terms()


def eviction_pays(
    job: Job,
    gpus: int,
    cost_gpu_s: float,
    handover: float,
    natural_s: float,
    now: float,
    policy: Policy,
    terms: Terms = RECLAIM,
) -> bool:
    """Rule "eviction pays" (`reclaim`'s module docstring): whether evicting for `job` (starting `gpus` GPUs at
    `now` + `handover`, where it would start at `natural_s` otherwise) pays for `cost_gpu_s`."""
    start_s = now + handover
    if natural_s <= start_s:
        return False
    if cost_gpu_s <= 0.0 or pays_any_cost(job):
        return True
    return cost_gpu_s < gpus * credited_wait_s(job, natural_s, start_s, now, policy, terms)


def credited_wait_s(job: Job, natural_s: float, start_s: float, now: float, policy: Policy, terms: Terms) -> float:
    """The wait an eviction is credited with saving `job` (starting at `start_s` instead of
    `natural_s`; inf: any cost pays).

    Victims all of lower priority (`terms.outranks`): the wait to its natural start, or, once it
    has waited `reclaim_after_s` (when `terms.by_age`), all it has waited, wherever its natural
    start (rent or buy, as below: a higher-priority gang that waited two hours may destroy two
    hours of its size, not a day's work of a big job without checkpoints).

    Otherwise (a reclaim of loans): the wait to its natural start, but no more than
    `Policy.reclaim_wait_credit` times what it has already waited (None: no such bound); once it has
    waited `reclaim_after_s` (when `terms.by_age`), that multiple of all it has waited (None: any
    cost), wherever its natural start. The natural start is read from the running work's time
    limits, the latest each may end: with loose limits it lies far later than the work really
    frees (sim_quotas, days 20-30, limits twice the duration: the median 1-GPU reclaimer's natural
    start lay 37 times further ahead than its true one), and a price of that wait evicts for waits
    that never happen. What the job has already waited is known, whatever the limits say;
    crediting no more than that (a factor of 1) is rent or buy (a ski rental): an eviction is
    bought once the wait it ends has cost as much as the work it destroys, so no schedule loses
    more than about twice what the better of waiting and evicting would, however loose the limits.
    The price of that bound is the owner's wait: every GPU-second it waits within its guarantee is
    a GPU-second of guarantee violated, about as much as the eviction at last destroys."""
    to_natural_s = natural_s - start_s
    past_bound = waited_past_bound(job, now, policy, terms.by_age)
    if terms.outranks:
        return max(0.0, now - job.submit_s) if past_bound else to_natural_s
    factor = policy.reclaim_wait_credit
    if factor is None:
        return math.inf if past_bound else max(0.0, to_natural_s)
    waited_s = max(0.0, now - job.submit_s) * factor
    return waited_s if past_bound else max(0.0, min(to_natural_s, waited_s))


def waited_past_bound(job: Job, now: float, policy: Policy, by_age: bool = True) -> bool:
    """Whether `job` has waited `reclaim_after_s` (when `by_age`; None: never)."""
    bound_s = policy.reclaim_after_s
    return by_age and bound_s is not None and now - job.submit_s >= bound_s


def pays_any_cost(job: Job) -> bool:
    """Whether any eviction that lets `job` start earlier pays, whatever it destroys: serving (its
    wait costs a service, not GPU-seconds)."""
    return job.kind == "serving"


def eviction_cap_gpu_s(
    job: Job,
    gpus: int,
    handover: float,
    natural_s: float,
    now: float,
    policy: Policy,
    terms: Terms = RECLAIM,
) -> float:
    """What an eviction for `job` may cost at most, exclusive: `eviction_pays` solved for the cost
    (for every cost >= 0, it pays exactly when the cost is below this). Known before any victim
    is searched for, it lets the search leave out victims that could never be part of a paying
    choice (tests check that both agree); a search that may find victims of lower priority uses
    the cap with `Terms.outranks`, the higher one."""
    start_s = now + handover
    if natural_s <= start_s:
        return 0.0
    if pays_any_cost(job):
        return math.inf
    # An eviction that destroys nothing pays even when no wait is credited: the cap is then the
    # least positive cost, which nothing else is below.
    credited_s = credited_wait_s(job, natural_s, start_s, now, policy, terms)
    return max(gpus * credited_s, NOTHING_GPU_S)


def outranks_all(job: Job, choice: VictimChoice) -> bool:
    """Whether every job `choice` evicts is of lower priority than `job` (an eviction by priority,
    not a reclaim of loans)."""
    return all(victim.priority < job.priority for victim in choice.evict)


def could_pay(cap_gpu_s: float, grace_s: float) -> bool:
    """Whether any eviction could cost less than `cap_gpu_s`: every one costs at least the handover
    of one GPU, `grace_s`, so a cap no higher than that leaves only shrinks (which cost nothing)."""
    return cap_gpu_s > grace_s

"""Reclaim without waste: whether an eviction pays, and the handover that starts the preemptor on
its victims' GPUs in the same plan.

An eviction is a handover: the victims leave now and the preemptor starts on their GPUs in the
same plan, making progress once the grace period (the victims' time to stop, and to checkpoint if
they do so on preemption) has passed (`Start.replaces`). No GPU is freed for a start that might
not happen: a victim is only ever evicted together with the start it makes room for.

What an eviction costs: the work its victims roll back (`Candidate.cost`: everything since their
last checkpoint, since their start without one, nothing for work that checkpoints on preemption)
plus the grace period of their GPUs. What it saves: the preemptor's GPUs times the wait until the
running work would have made room for it anyway, along the release profile (its natural start);
for a reclaim of loans, optionally no more than a multiple of what the preemptor has already
waited (`Policy.reclaim_wait_credit`, `credited_wait_s`: the profile is read from time limits, the
latest the work may end, so with loose limits the natural start lies too late; what has been
waited is known).

The plain rule ("eviction pays", `preemption.eviction_pays`, where the price of every eviction
lives, with "victim price", `preemption.victim_price_gpu_s`): an eviction pays when the preemptor
could not start as early without it, and either it destroys nothing (shrinks only), or the
preemptor is serving (its wait costs a service, not GPU-seconds), or its cost is smaller than the
wait it is credited with (`credited_wait_s`): for an eviction by priority (every victim of lower
priority) the wait to the natural start, or all it has waited once it has waited
`Policy.reclaim_after_s` (rent or buy); for a reclaim of loans the same, but any cost past that
bound unless `reclaim_wait_credit` bounds the credit by the wait so far. A victim that would end by
the end of the handover anyway is never taken (`ends_by`).

A job larger than what is left of its team's guarantee reclaims loans when at least
`Policy.reclaim_guaranteed_share` of it lies within that guarantee (it borrows the rest): a partial
reclaim. It takes only loans whose lost work is bounded (`preemption.partial_reclaim_takes`: they
checkpoint periodically or on preemption, or they (re)started within `Policy.partial_reclaim_young_s`),
it is not let off by its wait (`reclaim_after_s` does not raise its
credit), and only its GPUs within the guarantee count as saved, unless it outranks the work it
could take.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from operator import attrgetter

from .backfill import (
    EarliestStart,
    ReleaseProfile,
    earliest_start,
    expected_end_s,
    sooner_within_pod,
    spreads_across_pods,
    within_pod_horizon_s,
    within_pod_start,
)
from .capacity import AcceleratorPool, CapacityIndex, level_of
from .cycle_state import Budgets, Decisions, Fruitless, Memo, SearchKey, Statement, Walked
from .model import Job, Policy, Running
from .placement import Fit, could_fit_by_shape, narrowest_level, pack_whole_nodes, patience_s
from .plan import Allocation, Preempt, Shrink
from .preemption import (
    Candidate,
    Terms,
    VictimChoice,
    Victims,
    could_pay,
    eviction_cap_gpu_s,
    eviction_cost_gpu_s,
    eviction_pays,
    may_preempt,
    outranks_all,
    pays_any_cost,
    pick_victims,
    victim_price_gpu_s,
    waited_past_bound,
    young_since_s,
)
from .prepare import Prepared
from .quota import Admission, QuotaLedger

_cost = attrgetter("cost")  # a victim candidate's cost, by which `Victims` come in order

# One victim search looks at no more than a quarter (1 / SCAN_BUDGET_SHARES) of the policy's scan
# budget (`search_visits`), so that a job no search can place leaves some of it to the jobs after it.
SCAN_BUDGET_SHARES = 4


def search_visits(policy: Policy) -> int:
    """How many victim candidates one search may look at: a share of the scan budget, at least one."""
    return max(1, policy.preemption_scan_budget // SCAN_BUDGET_SHARES)


def handover_s(choice: VictimChoice, policy: Policy) -> float:
    """How long the preemptor waits for its victims' GPUs: the grace period, if anyone is evicted
    (a shrink hands GPUs over at once)."""
    return max(0.0, policy.preemption_grace_s) if choice.evict else 0.0


def first_free_s(profile: ReleaseProfile, free_now: int, gpus: int) -> float:
    """When `gpus` GPUs are free at all, whatever their shape (inf: never): the natural start
    cannot be earlier, so it bounds it from below without a sweep of node shapes."""
    if free_now >= gpus:
        return profile.now
    free = free_now
    for end_s, _, released in profile.sorted_events():
        free += released
        if free >= gpus:
            return end_s
    return math.inf


def handover_fit(pool: AcceleratorPool, choice: VictimChoice, gpus: int) -> Fit:
    """Where the preemptor starts: on the chosen node, or packed on the chosen whole nodes."""
    gpn, nodes = pool.gpus_per_node, list(choice.node_ids)
    allocation = ((nodes[0], gpus),) if gpus <= gpn else pack_whole_nodes(nodes, gpus, gpn)
    return Fit(allocation, level_of(nodes, pool.node_rack, pool.node_pod))


def held_through_grace(
    choice: VictimChoice, allocation: Allocation, held: Mapping[str, int]
) -> tuple[tuple[str, int], ...]:
    """The GPUs evicted victims leave that no job may use before their grace is over: on each node
    they leave (unless held for a reservation, which keeps them out of placement anyway), those the
    preemptor (starting on `allocation`) does not take, the victims' GPUs taken first. The preemptor
    waits the grace out as its handover; another start on those GPUs would share them with a victim
    still writing its checkpoint."""
    taken = dict(allocation)
    leaving: dict[str, int] = {}
    for victim in choice.evict:
        for node_id, gpus in victim.gpus_on:
            if gpus > 0 and node_id not in held:
                leaving[node_id] = leaving.get(node_id, 0) + gpus
    return tuple((node_id, left) for node_id, gpus in leaving.items() if (left := gpus - taken.get(node_id, 0)) > 0)


def ends_by(run: Running, prepared: Prepared, time_s: float) -> bool:
    """Whether `run` releases its GPUs by `time_s` anyway (its time limit, or its remaining work)."""
    return expected_end_s(run, prepared.now, prepared.penalty.of(run.allocation)) <= time_s


def freed_quota(choice: VictimChoice) -> list[tuple[str, str, int]]:
    """(team, accelerator, GPUs) each victim gives back: all of an evicted job, a shrink's part."""
    freed = [(victim.run.job.team, victim.run.job.accelerator, victim.gpus) for victim in choice.evict]
    for victim, allocation in choice.shrink:
        kept = sum(gpus for _, gpus in allocation)
        freed.append((victim.run.job.team, victim.run.job.accelerator, victim.gpus - kept))
    return freed


def keeps_guarantees(
    job: Job, freed: list[tuple[str, str, int]], ledger: QuotaLedger, leaving: Callable[[str, str], int]
) -> bool:
    """Whether every other team a choice takes from keeps at least its guarantee once all of the
    choice's victims of that team are gone (`leaving`: its GPUs already on their way out).

    Each victim is checked alone as it is found (`may_preempt`'s `victim_team_stays_covered`), and
    two victims of one team can each leave it covered and together not. A preemptor that then
    starts on borrowed quota is itself a loan that team may reclaim at once, and the preemptor
    takes it back by priority, forever: such a handover must keep every team it takes from
    covered. One that starts within the preemptor's own guarantee cannot be taken back, and may
    leave a team below its guarantee (its GPUs serve a guarantee too)."""
    taken: dict[tuple[str, str], int] = {}
    for team, accelerator, gpus in freed:
        if team != job.team:
            taken[team, accelerator] = taken.get((team, accelerator), 0) + gpus
    return all(
        ledger.spare(team, accelerator, leaving(team, accelerator)) >= gpus
        for (team, accelerator), gpus in taken.items()
    )


def spare_gpus(ledger: QuotaLedger, evicting: dict[tuple[str, str], int], team: str, accelerator: str) -> int:
    """The most GPUs of `team` a victim of another team's job may hold and leave `team` covered,
    counting its GPUs already leaving (`evicting`): `keeps_guarantees` for that one victim holds
    exactly when its GPUs are at most this (GPU counts are whole numbers)."""
    return ledger.spare(team, accelerator, evicting.get((team, accelerator), 0))


def release_quota(ledger: QuotaLedger, freed: list[tuple[str, str, int]], sign: int) -> None:
    """Give the victims' quota back (`sign` 1) or charge it again (-1)."""
    for team, accelerator, gpus in freed:
        if sign > 0:
            ledger.release(team, accelerator, gpus)
        else:
            ledger.charge(team, accelerator, gpus)


def hand_over(prepared: Prepared, index: CapacityIndex, choice: VictimChoice) -> None:
    """The victims' GPUs come free now for the preemptor (those on nodes held for a reservation
    stay out of placement; what evicted victims leave beside it is held until their grace is over,
    `held_through_grace`), and their releases leave the profile and the team releases: an evicted
    job's entirely, a shrunk one's move to when its smaller size ends."""
    now, penalty = prepared.now, prepared.penalty
    for victim in choice.evict:
        _free(index, victim.gpus_on)
        _move(prepared, victim.run, ())
    for victim, allocation in choice.shrink:
        kept = dict(allocation)
        _free(index, tuple((node_id, gpus - kept.get(node_id, 0)) for node_id, gpus in victim.gpus_on))
        run = victim.run
        later_s = expected_end_s(_with_allocation(run, allocation), now, penalty.of(allocation))
        _move(prepared, run, ((later_s, allocation),))


def _free(index: CapacityIndex, released: tuple[tuple[str, int], ...]) -> None:
    index.give(tuple(part for part in released if part[1] > 0 and part[0] not in index.held))


def _move(prepared: Prepared, run: Running, releases: tuple[tuple[float, tuple[tuple[str, int], ...]], ...]) -> None:
    job, now = run.job, prepared.now
    end_s = max(now, expected_end_s(run, now, prepared.penalty.of(run.allocation)))
    events = [(max(time_s, now), node_id, gpus) for time_s, allocation in releases for node_id, gpus in allocation]
    prepared.profiles[job.accelerator].move(end_s, run.allocation, events)
    team = prepared.team_releases.get((job.team, job.accelerator), [])
    if (end_s, run.gpus) in team:
        team.remove((end_s, run.gpus))
        team.extend((max(time_s, now), sum(gpus for _, gpus in allocation)) for time_s, allocation in releases)


def _with_allocation(run: Running, allocation: tuple[tuple[str, int], ...]) -> Running:
    return Running(run.job, allocation, run.start_s, run.progress_s, run.checkpoint_s, run.borrowing, run.grace_until_s)


class _SpareGpus(dict[str, int]):
    """`spare_gpus` of each team of `accelerator`, computed the first time a team is looked up."""

    __slots__ = ("ledger", "evicting", "accelerator")

    def __init__(self, ledger: QuotaLedger, evicting: dict[tuple[str, str], int], accelerator: str) -> None:
        super().__init__()
        self.ledger, self.evicting, self.accelerator = ledger, evicting, accelerator

    def __missing__(self, team: str) -> int:
        spare = self[team] = spare_gpus(self.ledger, self.evicting, team, self.accelerator)
        return spare


class WalkBounds:
    """How a walk over the victim candidates (`Reclaimer._eligible`) went, as far as its cost cap
    goes: it would have gone the same way for every cap above `above` and at most `below`, unless
    it ended for want of scan budget (`by_budget`). Set when the walk ends or is closed."""

    __slots__ = ("above", "below", "by_budget")

    def __init__(self) -> None:
        self.above, self.below, self.by_budget = -math.inf, math.inf, False


# How a step commits a start it decided (`schedule._Cycle._commit_start`): the job, its fit and
# admission, whether its GPUs are taken already, the jobs it replaces and their handover wait.
CommitStart = Callable[[Job, Fit, Admission, bool, tuple[str, ...], float], None]


@dataclass(frozen=True, slots=True)
class CycleContext:
    """What a step of the cycle works on, handed to it explicitly: the policy and the instant, the
    working state `prepare_cycle` built (steps 1-2: the index, the running work, the quota ledger,
    the release profiles, the GPUs leaving), the cycle's decisions (victims picked, actions), memos
    (candidates, earliest starts, fruitless searches) and budgets (attempts, the scan budget)
    (`cycle_state`), how long gangs wait for their narrowest domain (`placement.patience_s`: of a
    team that uses its guarantee, and of one below it), and how a start is committed."""

    policy: Policy
    now: float
    prepared: Prepared
    decided: Decisions
    memo: Memo
    budgets: Budgets
    patience: tuple[float | None, float | None]
    commit_start: CommitStart


class Reclaimer:
    """Step 4's preemption, and the gang levels and earliest starts the cycle keeps, on a cycle's
    `CycleContext` (its parts held directly: they are read in the queue scan's inner loops)."""

    __slots__ = (
        "policy",
        "now",
        "prepared",
        "index",
        "ledger",
        "profiles",
        "running",
        "evicting",
        "decided",
        "memo",
        "budgets",
        "patience",
        "commit_start",
    )

    def __init__(self, context: CycleContext) -> None:
        prepared = context.prepared
        self.policy, self.now, self.prepared = context.policy, context.now, prepared
        self.index, self.ledger, self.running = prepared.index, prepared.ledger, prepared.running
        self.profiles, self.evicting = prepared.profiles, prepared.evicting
        self.decided, self.memo, self.budgets = context.decided, context.memo, context.budgets
        self.patience, self.commit_start = context.patience, context.commit_start

    def owed(self, job: Job) -> bool:
        """Whether `job`'s team uses fewer GPUs than it is guaranteed, now in the cycle (its gangs
        then have their own patience, `Policy.guarantee_spread_after_s`)."""
        if self.policy.guarantee_spread_after_s is None:
            return False
        return self.ledger.below_guarantee(job.team, job.accelerator)

    def can_reserve(self, accelerator: str) -> bool:
        """Whether a reservation is left to make on `accelerator` this cycle."""
        budgets = self.budgets
        made, attempts = budgets.reservations_made.get(accelerator, 0), budgets.reservation_attempts.get(accelerator, 0)
        return made < max(0, self.policy.reservation_depth) and attempts < budgets.reservation_cap

    def gang_level(self, pool: AcceleratorPool, job: Job) -> str:
        """`gang_level` for `job`, with the patience of a gang of a team below its guarantee.

        Fast path: without topology awareness, or for serving, `gang_level` is the job's required
        level whatever its team owes, so `owed` (quota lookups, asked for every gang of a long
        queue) is not asked (plain: `gang_level` with `owed` always; `test_reference.py`). Else
        what `owed` says is kept per team and accelerator while the ledger's version stays the
        same (`Memo.owed`: it reads only the ledger), and the two patiences are the cycle's
        (`patience`), and when a gang could start within one pod is swept by `earliest`, which
        keeps it while the working state stays the same (a reservation's sweep within that pod is
        the same sweep); plain:
        `backfill.gang_level_now` with `owed` and `can_reserve`
        (`test_fast_paths.py::test_gang_levels_from_kept_patiences_and_debts_are_gang_level`)."""
        policy, level = self.policy, job.required_level or "fleet"
        if not policy.topology_aware or job.kind == "serving":
            return level
        owed = False
        if policy.guarantee_spread_after_s is not None:
            key, version = (job.team, job.accelerator), self.ledger.version
            kept = self.memo.owed.get(key)
            if kept is None or kept[0] != version:
                kept = self.memo.owed[key] = (version, self.owed(job))
            owed = kept[1]
        # A gang a node failure requeued has a patience of its own (`patience_s`; rare: asked only then).
        spread_after_s = patience_s(policy, owed, True) if job.requeued_by_failure else self.patience[owed]
        if spread_after_s is None or self.now - job.submit_s < spread_after_s:
            return narrowest_level(pool, job.gpus, level)
        if self.can_reserve(job.accelerator) and spreads_across_pods(pool, job, policy, level):
            profile = self.profiles[job.accelerator]
            until_s = within_pod_horizon_s(job, policy, self.now)
            within_pod = within_pod_start(pool, self.index.held, profile, job.gpus, self.earliest, until_s)
            if sooner_within_pod(job, policy, self.now, within_pod):
                return "pod"
        return level

    def cannot_preempt(self, job: Job, pool: AcceleratorPool, size: int) -> bool:
        """Whether `try_preempt` for `job` at `size` would return False before any search, having
        changed nothing (no attempt spent, no memo but `Takeable.upper`'s): the job may not preempt,
        no attempt or search is left, or it does not reclaim and lower-priority and leaving work
        could not free its size. Most of a long queue at overload is such jobs (borrowers of the
        same priority as the running work), and with this known their look is the cached verdict
        of their shape (`_Cycle._scan`).

        Fast path: a prefix of `try_preempt`'s early returns, kept beside it (plain: calling
        `try_preempt`; `test_fast_paths.py::test_jobs_that_cannot_preempt_are_answered_as_trying_would`).
        Left out: the case that marks the accelerator `victimless` (the full look does that, and
        settles it), and reclaimers (their answer depends on more than this)."""
        policy, budgets = self.policy, self.budgets
        if not job.may_preempt or not policy.preemption:
            return True
        accelerator = job.accelerator
        if budgets.preemption_attempts >= policy.max_preemption_attempts or accelerator in self.memo.victimless:
            return True
        takeable, ledger = self.prepared.takeable, self.ledger
        if not takeable.upper(accelerator, job.priority, ledger.any_guarantee(accelerator)):
            return False  # `try_preempt` marks the accelerator victimless: let it
        if ledger.reclaims(job.team, accelerator, size, policy.reclaim_guaranteed_share):
            return False
        # Not reclaiming, so not a partial reclaim either: what `try_preempt` compares is this.
        upper = takeable.upper(accelerator, job.priority, False)
        return upper == 0 or pool.total_free + upper < size or budgets.scan_budget <= 0

    def try_preempt(self, job: Job, pool: AcceleratorPool, size: int, admission: Admission | None) -> bool:
        if not job.may_preempt:  # `may_preempt` refuses every victim: no search, no attempt spent
            return False
        policy, accelerator, ledger, memo, budgets = self.policy, job.accelerator, self.ledger, self.memo, self.budgets
        attempts_left = budgets.preemption_attempts < policy.max_preemption_attempts
        if not (policy.preemption and attempts_left) or accelerator in memo.victimless:  # see below
            return False
        takeable, anyone_reclaims = self.prepared.takeable, ledger.any_guarantee(accelerator)
        upper = takeable.upper(accelerator, job.priority, anyone_reclaims)
        if not upper:
            memo.victimless.add(accelerator)  # priorities only fall along the queue: nobody after may either
            return False
        reclaiming = ledger.reclaims(job.team, accelerator, size, policy.reclaim_guaranteed_share)
        # A job reclaiming for more than is left of its guarantee (it borrows the rest) takes only
        # loans whose lost work is bounded (`bounded_only`: they checkpoint, or are young), and
        # evicts them only when that pays by its cost, counting the wait saved on the GPUs within
        # the guarantee alone, never by its age, unless it also has lower-priority work to take.
        bounded_only = reclaiming and not ledger.within_guarantee(job.team, accelerator, size)
        partial: int | None = None
        # Whether it may find victims of lower priority: its searches then use the higher cost cap
        # of evictions by priority (`eviction_cap_gpu_s` with `outranks`).
        lower = bool(takeable.upper(accelerator, job.priority, False))
        if bounded_only and not lower:
            partial = ledger.unused_guarantee(job.team, accelerator)
        if reclaiming != anyone_reclaims or bounded_only:
            since_s = young_since_s(policy, self.now) if bounded_only else None
            upper = takeable.upper(accelerator, job.priority, reclaiming, bounded_only, since_s)
        if upper == 0 or pool.total_free + upper < size or budgets.scan_budget <= 0:
            return False
        victims = memo.candidates.get(accelerator)
        if victims is None:
            victims = memo.candidates[accelerator] = Victims(self.running, accelerator, policy.elastic)
        budgets.preemption_attempts += 1
        max_level = self.gang_level(pool, job)
        # An elastic job reclaims as much of its size as it may (within its guarantee, when it
        # reclaims), else its smallest size.
        most = ledger.unused_guarantee(job.team, accelerator) if reclaiming else job.gpus
        # (A job reclaiming for a size beyond what is left of its guarantee, `reclaim_guaranteed_share`
        # < 1, borrows the rest: `most` is then below `size` and only `size` is tried.)
        for target in sorted({size, min(job.gpus, max(size, most))}, reverse=True):
            # What a paying eviction may cost is known before any search: when even the cheapest
            # eviction could not pay (and no shrink could), no victim search is made. It still
            # counts as an attempt: attempts bound the sweeps for natural starts as well, and once
            # they run out the rest of the queue is answered from cached verdicts.
            natural_s, cap = self._cap(job, pool, target, max_level, partial, lower)
            if not could_pay(cap, max(0.0, policy.preemption_grace_s)) and not (
                victims.shrinkable and natural_s > self.now
            ):
                continue
            choice = self._search(job, pool, target, max_level, reclaiming, cap, bounded_only)
            if choice is not None and self._hand_over(job, pool, target, choice, max_level, partial):
                return True
        return False

    def _search(
        self,
        job: Job,
        pool: AcceleratorPool,
        size: int,
        level: str,
        reclaiming: bool,
        cap: float,
        bounded_only: bool = False,
    ) -> VictimChoice | None:
        """The cheapest victims for `size` GPUs of `job` within `level` (`pick_victims` over the
        `_eligible` candidates), or None; while the working state stays the same, a search that found
        nothing is not made again with a cap no higher (`_fruitless_again`), nor any search with a
        cap its walk goes the same way for (`_walked_again`)."""
        key: SearchKey = (job.accelerator, size, level, job.team, job.priority, job.kind, reclaiming, bounded_only)
        if self._fruitless_again(key, cap):
            return None
        budgets, memo = self.budgets, self.memo
        walked = self._walked_again(key, cap)
        if walked is not None:
            if walked.choice is None and budgets.scan_budget > 0:
                memo.fruitless[key] = Fruitless(memo.generation, walked.visited, cap)  # as searching records
            return walked.choice
        budget = budgets.scan_budget
        shrinks = memo.candidates[job.accelerator].shrinkable
        walk = WalkBounds()
        eligible = self._eligible(job, reclaiming, cap, shrinks, bounded_only, walk)
        choice = pick_victims(job, size, pool, eligible, max_level=level, held=self.index.held)
        eligible.close()  # the walk's bounds are set once it is closed
        visited = budget - budgets.scan_budget
        if choice is None and budgets.scan_budget > 0:
            memo.fruitless[key] = Fruitless(memo.generation, visited, cap)
        if not walk.by_budget:
            memo.walks[key] = Walked(memo.generation, visited, walk.above, walk.below, choice)
        return choice

    def _walked_again(self, key: SearchKey, cap: float) -> Walked | None:
        """The search with the same `key` made since the working state last changed, if a search
        with cost cap `cap` would walk the same candidates the same way, and so find what it found;
        if so, it is charged the candidates it visited (fast path, see `schedule`; plain: searching
        again).

        Besides the key, the working state (`generation`) and the scan budget, a walk reads the cap
        only in two comparisons (`_eligible`): it stops at the first candidate whose cost reaches it
        (without shrinkable work), and it leaves out a candidate that cannot shrink whose cost plus
        handover reaches it. A walk that did not end for want of budget makes the same comparisons
        come out the same for every cap above `Walked.above` and at most `Walked.below`
        (`WalkBounds`), and reads the budget only to stop: with as much budget as it visited or more,
        it visits the same candidates and `pick_victims` gets the same ones in the same order."""
        memo, budgets = self.memo, self.budgets
        walked = memo.walks.get(key)
        if walked is None or walked.generation != memo.generation or not walked.above < cap <= walked.below:
            return None
        if budgets.scan_budget < walked.visited:
            return None
        budgets.scan_budget -= walked.visited
        return walked

    def _fruitless_again(self, key: SearchKey, cap: float) -> bool:
        """Whether a victim search with cost cap `cap` would find nothing, as one with the same `key`
        and a cap at least as high already did since the working state last changed; if so, it is
        charged the candidates it would have visited (fast path, see `schedule`; plain: searching
        again).

        What a search reads is the key (the preemptor's accelerator, size, level, team, priority
        and kind, whether it reclaims and whether only loans whose lost work is bounded), the cap,
        the working state (`generation`: picked victims, quota, free capacity) and the scan budget.
        One that found nothing read every candidate up to a stop of its own (not the budget: it is
        only recorded with budget left). With a cap no higher, `_eligible` walks the same candidates
        in the same order and yields a subset of what it yielded (each test it makes is the same
        or, for the cost, stricter), and `pick_victims` finds nothing among a subset of candidates
        among which it found nothing (a node is feasible when its free GPUs and its candidates'
        cover the need, a gang's domain when enough of its nodes are: fewer candidates, fewer such
        nodes). Candidates come cheapest first, so it stops at the first that costs the cap or
        more (unless some running work could shrink: then where the recorded search stopped):
        what it visits is the recorded visits, cut at the first candidate costing `cap` or more."""
        memo, budgets = self.memo, self.budgets
        missed = memo.fruitless.get(key)
        if missed is None or missed.generation != memo.generation or cap > missed.cap:
            return False
        visited = missed.visited
        victims = memo.candidates[key[0]]
        if cap < missed.cap and not victims.shrinkable:
            visited = bisect_left(victims.made, cap, 0, visited, key=_cost)
        if budgets.scan_budget <= visited:
            return False
        budgets.scan_budget -= visited
        return True

    def _cap(
        self, job: Job, pool: AcceleratorPool, size: int, level: str, partial: int | None, lower: bool
    ) -> tuple[float, float]:
        """`eviction_cap_gpu_s` for `size` GPUs of `job`, with its natural start or a lower bound on
        it: the cap of a serving preemptor, or of one that has waited `reclaim_after_s`, does not
        depend on its natural start once it could not start by the end of the handover anyway,
        which the cheap bound of `_pays` often shows without a sweep."""
        policy, now = self.policy, self.now
        grace_s = max(0.0, policy.preemption_grace_s)
        worth, by_age = (size, True) if partial is None else (partial, False)
        if pays_any_cost(job) or waited_past_bound(job, now, policy, by_age):
            bound = self._natural_bound_s(pool, job.accelerator, size, grace_s)
            if bound > now + grace_s:
                return bound, eviction_cap_gpu_s(job, worth, grace_s, bound, now, policy, Terms(by_age, lower))
        natural_s = self._natural_s(job, pool, size, level)
        return natural_s, eviction_cap_gpu_s(job, worth, grace_s, natural_s, now, policy, Terms(by_age, lower))

    def _natural_bound_s(self, pool: AcceleratorPool, accelerator: str, size: int, wait_s: float) -> float:
        """A lower bound on the natural start: when `size` GPUs are free at all (`first_free_s`)
        and, if they are free now but not in a fitting shape, the first release."""
        profile = self.profiles[accelerator]
        bound = first_free_s(profile, pool.total_free, size)
        if bound <= self.now + wait_s and not could_fit_by_shape(pool, size):
            events = profile.sorted_events()
            bound = events[0][0] if events else math.inf
        return bound

    def _natural_s(self, job: Job, pool: AcceleratorPool, size: int, level: str) -> float:
        """When `size` GPUs of `job` would start within `level` without preemption, along the release
        profile (inf: never), from the sweeps kept until the working state changes (`earliest`)."""
        profile, aware = self.profiles[job.accelerator], self.policy.topology_aware
        found = self.earliest(pool, self.index.held, profile, size, max_level=level, topology_aware=aware)
        return math.inf if found is None else found.start_s

    def earliest(
        self,
        pool: AcceleratorPool,
        held: dict[str, int],
        profile: ReleaseProfile,
        gpus: int,
        *,
        max_level: str,
        topology_aware: bool,
        until_s: float = math.inf,
    ) -> EarliestStart | None:
        """`earliest_start` on the cycle's working state (`held` and `profile` are the index's and
        `pool`'s accelerator's), kept per size, level and topology awareness until the working
        state changes (`generation`): blocked gangs of one size sweep the profile once. A sweep
        that stopped at its `until_s` answers a later one up to the same time or sooner, or
        whatever its start was found (fast path; plain: sweeping again,
        `test_fast_paths.py::test_earliest_starts_kept_while_the_working_state_stays_the_same_are_found_again`)."""
        memo = self.memo
        key = (pool.accelerator, gpus, max_level, topology_aware)
        kept = memo.earliest.get(key)
        if kept is not None and kept[0] == memo.generation:
            found, swept_until_s = kept[1], kept[2]
            if found is not None:
                return found if found.start_s <= until_s else None
            if swept_until_s >= until_s:
                return None
        found = earliest_start(
            pool, held, profile, gpus, max_level=max_level, topology_aware=topology_aware, until_s=until_s
        )
        memo.earliest[key] = (memo.generation, found, until_s)
        return found

    def _hand_over(
        self,
        job: Job,
        pool: AcceleratorPool,
        size: int,
        choice: VictimChoice,
        max_level: str,
        partial: int | None = None,
    ) -> bool:
        """Evict or shrink the victims of `choice` and start `job` on their GPUs in this plan, if
        quota then admits it and the eviction pays (`reclaim`); otherwise change nothing: the
        victims' quota is given back tentatively, and charged again unless the handover is made."""
        ledger, wait_s = self.ledger, handover_s(choice, self.policy)
        freed = freed_quota(choice)
        evicting = self.evicting
        covered = keeps_guarantees(job, freed, ledger, lambda team, accelerator: evicting.get((team, accelerator), 0))
        with Statement() as tentative:
            tentative.do(lambda: release_quota(ledger, freed, 1), lambda: release_quota(ledger, freed, -1))
            admission = ledger.admit(job.team, job.accelerator, size, not job.preemptible)
            if admission is None or (admission.borrowing and not covered):
                return False
            cost_gpu_s = eviction_cost_gpu_s(choice, wait_s)
            outranks = outranks_all(job, choice)
            if not self._pays(job, pool, size, cost_gpu_s, wait_s, max_level, partial, outranks):
                return False
            tentative.commit()
        hand_over(self.prepared, self.index, choice)
        decided = self.decided
        for victim in choice.evict:
            decided.picked.add(victim.job_id)
            decided.actions.append(Preempt(victim.job_id, f"preempted-by:{job.id}", wait_s))
        for victim, allocation in choice.shrink:
            decided.picked.add(victim.job_id)
            decided.actions.append(Shrink(victim.job_id, allocation, sum(gpus for _, gpus in allocation)))
        replaces = tuple(victim.job_id for victim in choice.evict)
        fit = handover_fit(pool, choice, size)
        self.commit_start(job, fit, admission, False, replaces, wait_s)
        if wait_s > 0.0:
            grace = held_through_grace(choice, fit.allocation, self.index.held)
            if grace:
                self.index.take(grace)
                self.profiles[job.accelerator].add(self.now + wait_s, grace)
        return True

    def _eligible(
        self,
        job: Job,
        reclaiming: bool,
        cap_gpu_s: float = math.inf,
        shrinks: bool = True,
        bounded_only: bool = False,
        walk: WalkBounds | None = None,
    ) -> Generator[Candidate, None, None]:
        """Candidates `job` may preempt (`may_preempt`, with `bounded_only` for a partial reclaim),
        cheapest first, each visit paid from the scan budget; one search spends at most a quarter
        of it, so one no search can place leaves some to the jobs after it.

        A candidate whose eviction alone costs `cap_gpu_s` or more (`eviction_cap_gpu_s`) could only
        be shrunk in a paying choice: it is left out unless it can shrink, and once the work it
        would lose reaches the cap the search ends, since all later candidates lose more (unless
        some running work could shrink: `shrinks`). Once the walk ends (or is closed), `walk` holds
        the caps for which it would have gone the same way (`WalkBounds`)."""
        grace_s, budgets, picked = max(0.0, self.policy.preemption_grace_s), self.budgets, self.decided.picked
        by_s = self.now + self.policy.preemption_grace_s  # work ending by then is left alone
        most = visits = search_visits(self.policy)
        since_s = young_since_s(self.policy, self.now) if bounded_only else None
        stop_gpu_s = math.inf if shrinks else cap_gpu_s
        # Fast path: what each other team may lose and stay covered, looked up once per team and
        # search (the ledger and the GPUs leaving stay the same while a search walks); plain:
        # `keeps_guarantees` for each candidate alone, as `reference._ReferenceCycle._covered` asks.
        spare = _SpareGpus(self.ledger, self.evicting, job.accelerator)
        victims = self.memo.candidates[job.accelerator]
        # The caps the walk goes the same way for: above every cost plus handover it let through
        # (and every cost it visited, below), and at most every one it left out (and the cost it
        # stopped at).
        above, below, by_budget = -math.inf, math.inf, False
        try:
            for candidate in victims:
                if budgets.scan_budget <= 0 or visits <= 0 or candidate.cost >= stop_gpu_s:
                    by_budget = budgets.scan_budget <= 0
                    below = min(below, candidate.cost) if visits > 0 and not by_budget else below  # stopped at the cap
                    return
                budgets.scan_budget -= 1
                visits -= 1
                if candidate.job_id in picked:
                    continue
                run = candidate.run
                team = run.job.team
                covered = team == job.team or candidate.gpus <= spare[team]
                if not may_preempt(job, run, reclaiming, covered, bounded_only, since_s):
                    continue
                if not candidate.shrinkable:
                    spent_gpu_s = victim_price_gpu_s(candidate.cost, candidate.gpus, grace_s)
                    if spent_gpu_s >= cap_gpu_s:
                        below = min(below, spent_gpu_s)
                        continue
                    above = max(above, spent_gpu_s)
                ends_soon = candidate.ends_soon  # `by_s` is the same for every search of the cycle
                if ends_soon is None:
                    limit_s = run.job.time_limit_s  # fast path: `ends_by`, inlined for jobs with a time limit
                    ends_soon = (
                        run.start_s + limit_s <= by_s if limit_s is not None else ends_by(run, self.prepared, by_s)
                    )
                    candidate.ends_soon = ends_soon
                if not ends_soon:
                    yield candidate
        finally:
            if walk is not None:
                # Past every cost it visited, too (without shrinks), the last of them the highest.
                visited = most - visits
                last = victims.costs[visited - 1] if visited and not shrinks else -math.inf
                walk.above, walk.below, walk.by_budget = max(above, last), below, by_budget

    def _pays(
        self,
        job: Job,
        pool: AcceleratorPool,
        size: int,
        cost_gpu_s: float,
        wait_s: float,
        level: str,
        partial: int | None = None,
        outranks: bool = False,
    ) -> bool:
        """`eviction_pays` at the job's natural start within `level`, found by a sweep of the release
        profile only when the cheap bounds on it do not already say yes: when `size` GPUs are free at
        all (`first_free_s`) and, if they have no fitting shape now, the first release."""
        now, policy = self.now, self.policy
        bound = self._natural_bound_s(pool, job.accelerator, size, wait_s)
        worth, terms = (size, Terms(True, outranks)) if partial is None else (partial, Terms(False, outranks))
        if bound > now + wait_s and eviction_pays(job, worth, cost_gpu_s, wait_s, bound, now, policy, terms):
            return True
        natural_s = self._natural_s(job, pool, size, level)
        return eviction_pays(job, worth, cost_gpu_s, wait_s, natural_s, now, policy, terms)

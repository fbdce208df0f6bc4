"""One scheduling cycle: snapshot in, plan out.

The cycle, in order:
 1. Health: cordon nodes without healthy GPUs; requeue jobs on nodes that lost the GPUs they use.
 2. Index free capacity, charge running work to quotas, build release profiles (once).
 3. Order pending jobs: priority, fair share, within-team policy, id.
 4. For each job: quota admission -> placement (full size, then smaller if elastic, backfilling
    around reservations) -> preemption when it pays (the victims hand their GPUs over and the job
    starts on them in the same plan, see `reclaim`) -> reservation for the first blocked heads.
 5. Elastic growth into capacity that nothing pending could use.
 6. A reason and an estimated start for every job that did not start.

Working state is mutable and private to the cycle; the snapshot is never touched.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .backfill import Reservation, ReservationBook, reservation_start, worst_penalty, worst_runtime_s
from .capacity import AcceleratorPool
from .collector import collector_paused
from .elastic import grow_actions, reduced_sizes
from .explain import STARTED, explain_pending, topology_waits
from .fairshare import fairshare_factors, fairshare_priorities
from .model import Job, Snapshot
from .ordering import order_jobs
from .placement import Fit, classify_misfit, could_fit_by_shape, fit_gang, gang_level, kept_for_gangs, narrower
from .plan import (
    REASON_CAPACITY,
    REASON_PRIORITY,
    Plan,
    Reserve,
    Start,
    reserved_for,
)
from .preemption import Victims
from .prepare import prepare_cycle
from .quota import Admission
from .reclaim import Reclaiming, SearchKey

_VerdictKey = tuple[str, int, int, str | None, str | None, bool]


def schedule(snapshot: Snapshot, now: float, *, explain: bool = True) -> Plan:
    """Decide what to start, preempt, resize and reserve; explain every job left pending.

    With `explain=False` (for replays that read no estimates) the actions are the same, but
    `Plan.pending` only lists the jobs waiting on topology, without estimates, and the queue scan
    stops once every accelerator is blocked by its strict-FIFO head or full. Runs with the cyclic
    collector paused (see `collector`): the cycle makes no reference cycles.
    """
    with collector_paused():
        return _Cycle(snapshot, now, explain).run()


class _Cycle(Reclaiming):
    def __init__(self, snapshot: Snapshot, now: float, explain: bool = True) -> None:
        self.snapshot, self.now, self.explain = snapshot, now, explain
        self.policy = policy = snapshot.policy
        self.prepared = prepared = prepare_cycle(snapshot, now)  # Steps 1-2.
        self.index, self.running, self.actions = prepared.index, prepared.running, prepared.actions
        self.ledger, self.profiles = prepared.ledger, prepared.profiles
        # Victim candidates are built on the first preemption attempt per accelerator; accelerators
        # where no job left in the queue may take anything are `victimless`.
        self.candidates: dict[str, Victims] = {}
        self.victimless: set[str] = set()
        # A failed fit stays failed until the working state changes: cache misses per shape.
        self.generation = 0
        self.misses: dict[tuple[str, int, str], int] = {}
        self.naturals: dict[tuple[str, int, str], tuple[int, float]] = {}
        self.fruitless: dict[SearchKey, tuple[int, int]] = {}
        self.verdicts: dict[_VerdictKey, tuple[int, float, str]] = {}
        self.reservation_attempts: dict[str, int] = {}
        self.reservation_cap = policy.reservation_depth + 4 if policy.reservation_depth > 0 else 0
        self.admissions: dict[tuple[str, str, int, bool], tuple[int, int, Admission | None, str | None]] = {}
        self.backfill_misses: dict[tuple[str, int, str], tuple[int, float, str]] = {}
        self.book = ReservationBook()
        self.picked: set[str] = set()
        # Reasons by queue position (None: none yet; STARTED); `at`: the job being considered.
        self.reasons: list[str | None] = []
        self.at = 0
        self.estimates: dict[str, float | None] = {}
        self.reservations_made: dict[str, int] = {}
        self.blocked: set[str] = set()  # behind a strict-FIFO head, or full (without explanations)
        self.settled: set[str] = set()
        # Accelerators with a job left waiting for capacity (not quota): no elastic growth there.
        self.waiting: set[str] = set()
        self.preemption_attempts, self.scan_budget = 0, policy.preemption_scan_budget
        # GPUs per (team, accelerator) already on their way out: in grace, or picked this cycle.
        self.evicting: dict[tuple[str, str], int] = prepared.evicting
        # Without topology awareness: per accelerator, the nodes single-node jobs leave to the
        # waiting gangs with a required level when they can (`placement.kept_for_gangs`).
        self.kept: dict[str, frozenset[str]] = {}

    def run(self) -> Plan:
        snapshot = self.snapshot
        factors = fairshare_factors(snapshot.usage, snapshot.teams, snapshot.quotas) if self.policy.fairshare else {}
        queue = order_jobs(snapshot.pending, self.policy, fairshare_priorities(factors), self.now)
        self.reasons = [None] * len(queue)
        if not self.policy.topology_aware:
            self._keep_domains_for_gangs(queue)
        self._consider_all(queue)
        if self.policy.elastic:  # Step 5.
            self.actions.extend(grow_actions(self.index, self.running, self.picked, self.waiting, self.ledger))
        if not self.explain:
            return Plan(tuple(self.actions), topology_waits(queue, self.reasons))
        pending = explain_pending(queue, self.prepared, self.reasons, self.estimates, self.policy.elastic)  # Step 6.
        return Plan(tuple(self.actions), pending)

    def _keep_domains_for_gangs(self, queue: list[Job]) -> None:
        gangs: dict[str, list[Job]] = {}
        for job in queue:
            if job.required_level in ("rack", "pod") and job.accelerator in self.index.pools:
                gangs.setdefault(job.accelerator, []).append(job)
        for accelerator, jobs in gangs.items():
            self.kept[accelerator] = kept_for_gangs(self.index.pools[accelerator], jobs)

    def _consider_all(self, queue: list[Job]) -> None:
        """Within each priority level, jobs that fit their own guarantee go before the rest, which
        would borrow (as in Kueue): otherwise a borrower takes the GPUs an owner just reclaimed by
        preemption, and the owner has to reclaim them again, forever. When no team has guarantee
        left as a level begins (on a busy fleet, or when nobody is guaranteed anything), every job
        of it would borrow, and the level is taken in order in one pass."""
        # Without explanations, nothing is left to find out once every accelerator is blocked.
        stop = -1 if self.explain else len(self.index.pools)
        start = 0
        while start < len(queue):
            priority = queue[start].priority
            deferred: list[int] | None = [] if self.ledger.any_headroom() else None
            end = self._scan(queue, range(start, len(queue)), priority, stop, deferred)
            if end < 0 or (deferred and self._scan(queue, deferred, priority, stop, None) < 0):
                return
            start = end

    def _scan(
        self, queue: list[Job], positions: Iterable[int], priority: int, stop: int, deferred: list[int] | None
    ) -> int:
        """Step 4 for the jobs at `positions` of `queue` up to the first of another `priority`: its
        position (or the queue's length) is returned, -1 once `stop` accelerators are blocked. Jobs
        beyond their guarantee are put off into `deferred` unless it is None. Runs once per job, so
        the cheap answers (unknown, blocked, over quota, a settled verdict) are inlined here."""
        blocked = self.blocked
        if len(blocked) == stop:
            return -1
        pools, reasons, admissions, ledger = self.index.pools, self.reasons, self.admissions, self.ledger
        verdicts, settled, waiting, elastic = self.verdicts, self.settled, self.waiting, self.policy.elastic
        now = self.now
        for position in positions:
            job = queue[position]
            if job.priority != priority:
                return position
            accelerator = job.accelerator
            pool = pools.get(accelerator)
            gpus = job.gpus
            if pool is None or gpus <= 0:
                reasons[position] = REASON_CAPACITY
                continue
            if accelerator in blocked:
                # A blocked accelerator stays blocked (and is already `waiting`).
                reasons[position] = REASON_PRIORITY
                continue
            low = job.min_gpus  # the smallest size the job may start at:
            size = max(1, low) if elastic and low is not None and low < gpus else gpus
            pinned = not job.preemptible
            cached = admissions.get((job.team, accelerator, size, pinned))  # `_admission`'s cache
            if cached is not None and cached[0] == ledger.version and cached[1] == pool.total_free:
                admission, refused = cached[2], cached[3]
            else:
                admission, refused = self._admission(job.team, accelerator, size, pool, pinned)
            if deferred is not None and (
                admission.borrowing
                if admission is not None
                else not ledger.within_guarantee(job.team, accelerator, size)
            ):
                deferred.append(position)  # beyond its guarantee (an owner waiting for its loans back is not)
                continue
            if refused:
                reasons[position] = refused
                continue
            # A job shaped like one that already failed, with nothing changed since, fails the same way.
            level = job.required_level if gpus <= pool.gpus_per_node else gang_level(pool, job, self.policy, now)
            key = (accelerator, gpus, size, level, job.preferred_level, admission is None)
            verdict = verdicts.get(key)
            if (
                verdict is not None
                and verdict[0] == self.generation
                and (accelerator in settled or self._settled(accelerator))
                and (
                    verdict[1] == -math.inf
                    or (now + limit if (limit := job.time_limit_s) is not None else self._worst_end_s(job, size, level))
                    >= verdict[1]
                )
            ):
                reasons[position] = verdict[2]
                waiting.add(accelerator)
                continue
            self.at = position
            self._consider_sized(job, pool, size, admission, key)
            if stop > 0 and not pool.total_free and not self.book.held_max_free.get(accelerator):
                if self._settled(accelerator):  # nothing free, held, to preempt or reserve: all wait
                    blocked.add(accelerator)
                    waiting.add(accelerator)
            if len(blocked) == stop:
                return -1
        return -1 if len(blocked) == stop else len(queue)

    def _consider_sized(
        self, job: Job, pool: AcceleratorPool, size: int, admission: Admission | None, key: _VerdictKey
    ) -> None:
        """The full look at a job no cached verdict answers (never a strict-FIFO blocked one)."""
        accelerator = job.accelerator
        # The verdict holds for the state this look began on: a reservation or spread start made
        # below changes the state (and the generation), so later jobs of this shape look again.
        generation = self.generation
        backfill = self.policy.backfill
        shaped = self.book.could_fit_with_held(pool, size) if backfill and self.book.entries else None
        if shaped is None:
            shaped = could_fit_by_shape(pool, size)
        if not shaped and self._settled(accelerator):
            # Nothing to place, preempt or reserve: where the full path below ends, in short.
            self.reasons[self.at] = reason = classify_misfit(pool, job.gpus)
            self.waiting.add(accelerator)
            if not backfill:
                self.blocked.add(accelerator)
            self.verdicts[key] = (generation, -math.inf, reason)
            return
        if shaped and admission is not None and self._try_start(job, pool, size, admission):
            return
        if self._try_preempt(job, pool, size, admission):
            return
        blocker = self.reasons[self.at]
        self.reasons[self.at] = reason = blocker or classify_misfit(pool, job.gpus)
        self.waiting.add(accelerator)
        if not blocker:
            self._try_reserve(job, pool)
        if not self.policy.backfill:
            self.blocked.add(accelerator)
        worst_end_s = self._worst_end_s(job, size, key[3]) if blocker else -math.inf
        self.verdicts[key] = (generation, worst_end_s, reason)

    def _admission(
        self, team: str, accelerator: str, size: int, pool: AcceleratorPool, pinned: bool = False
    ) -> tuple[Admission | None, str | None]:
        """Quota admission (of work nobody may preempt, when `pinned`), and the reason when waiting
        cannot be helped by capacity ("quota", "guarantee"); cached until the ledger or the free
        capacity changes (both only change through starts, growth and preemption)."""
        key = (team, accelerator, size, pinned)
        cached = self.admissions.get(key)
        if cached is not None and cached[0] == self.ledger.version and cached[1] == pool.total_free:
            return cached[2], cached[3]
        admission = self.ledger.admit(team, accelerator, size, pinned)
        refused = None
        if admission is None:
            refused = self.ledger.refusal(team, accelerator, size, pool.total_free, pinned)
            refused = None if refused == REASON_CAPACITY else refused
        self.admissions[key] = (self.ledger.version, pool.total_free, admission, refused)
        return admission, refused

    def _settled(self, accelerator: str) -> bool:
        """No more preemption or reservation attempts this cycle that could treat jobs differently.

        Attempts and the scan budget only ever run out, so once settled, an accelerator stays so."""
        if accelerator in self.settled:
            return True
        policy = self.policy
        searches_left = self.preemption_attempts < policy.max_preemption_attempts and self.scan_budget > 0
        if policy.preemption and searches_left and accelerator not in self.victimless:
            return False
        if self.reservation_attempts.get(accelerator, 0) < self.reservation_cap:
            return False
        self.settled.add(accelerator)
        return True

    def _worst_end_s(self, job: Job, size: int, level: str | None) -> float:
        """The latest a start at `size` within `level` (the verdict key's) could end."""
        if job.time_limit_s is not None:  # `worst_runtime_s`, without the penalty it ignores
            return self.now + job.time_limit_s
        return self.now + worst_runtime_s(job, size, worst_penalty(self.policy, size, level or "fleet"))

    def _sizes(self, job: Job, pool: AcceleratorPool) -> list[int]:
        if not (self.policy.elastic and job.is_elastic):
            return [job.gpus]
        room = self.ledger.room(job.team, job.accelerator, job.gpus - 1, not job.preemptible)
        return [job.gpus, *reduced_sizes(job, pool, room)]

    def _try_start(self, job: Job, pool: AcceleratorPool, smallest: int, smallest_admission: Admission) -> bool:
        max_level = gang_level(pool, job, self.policy, self.now)
        for size in self._sizes(job, pool):
            if size == smallest:
                admission: Admission | None = smallest_admission
            else:
                admission = self.ledger.admit(job.team, job.accelerator, size, not job.preemptible)
            if admission is None:
                continue
            key = (job.accelerator, size, max_level)
            fit, taken = None, False
            if self.misses.get(key) != self.generation or job.preferred_level:
                fit = self._fit(job, pool, size, max_level)
                if fit is None:
                    self.misses[key] = self.generation
            if fit is None and self.policy.backfill and self.book.could_fit_with_held(pool, size):
                fit, taken = self._fit_around_reservations(job, pool, size, max_level), True
            if fit is not None:
                self._commit_start(job, fit, admission, taken)
                return True
        return False

    def _fit(self, job: Job, pool: AcceleratorPool, size: int, max_level: str) -> Fit | None:
        if not could_fit_by_shape(pool, size):
            return None
        topology_aware = self.policy.topology_aware
        if job.preferred_level and not topology_aware:
            preferred = fit_gang(pool, size, max_level=narrower(job.preferred_level, max_level))
            if preferred is not None:
                return preferred
        kept = self.kept.get(job.accelerator, frozenset())
        return fit_gang(pool, size, max_level=max_level, topology_aware=topology_aware, kept=kept)

    def _fit_around_reservations(self, job: Job, pool: AcceleratorPool, size: int, max_level: str) -> Fit | None:
        """EASY backfill: use reserved nodes only if the job surely ends before they are needed.

        Only reservations starting after the job's worst-case end are opened up, so whatever
        the placement picks cannot delay any reservation.
        """
        entries = self.book.of(job.accelerator)
        if not entries:
            return None
        worst_end_s = self.now + worst_runtime_s(job, size, worst_penalty(self.policy, size, max_level))
        key = (job.accelerator, size, max_level)
        missed = self.backfill_misses.get(key)
        if missed is not None and missed[0] == self.generation and worst_end_s >= missed[1]:
            # A job ending no earlier than one that already failed here fails too.
            self.reasons[self.at] = missed[2]
            return None
        usable = [entry for entry in entries if entry.start_s >= worst_end_s]
        fit = None
        if usable:
            self.book.release_holds(self.index, usable)
            aware, kept = self.policy.topology_aware, self.kept.get(job.accelerator, frozenset())
            fit = fit_gang(pool, size, max_level=max_level, topology_aware=aware, kept=kept)
            if fit is not None:
                self.index.take(fit.allocation)
            self.book.restore_holds(self.index, usable)
        if fit is None:
            first = min(entries, key=lambda entry: (entry.start_s, entry.job_id))
            self.reasons[self.at] = reason = reserved_for(first.job_id)
            self.backfill_misses[key] = (self.generation, worst_end_s, reason)
        return fit

    def _commit_start(
        self, job: Job, fit: Fit, admission: Admission, taken: bool, replaces: tuple[str, ...] = (), wait_s: float = 0.0
    ) -> None:
        self.generation += 1
        if not taken:
            self.index.take(fit.allocation)
        size = sum(gpus for _, gpus in fit.allocation)
        self.ledger.charge(job.team, job.accelerator, size, not job.preemptible)
        runtime_s = wait_s + worst_runtime_s(job, size, self.policy.penalty(fit.level))
        self.profiles[job.accelerator].add(self.now + runtime_s, fit.allocation)
        self.prepared.team_releases.setdefault((job.team, job.accelerator), []).append((self.now + runtime_s, size))
        self.actions.append(Start(job.id, fit.allocation, admission.borrowing, fit.level, replaces))
        self.reasons[self.at] = STARTED

    def _try_reserve(self, job: Job, pool: AcceleratorPool) -> None:
        made = self.reservations_made.get(job.accelerator, 0)
        attempts = self.reservation_attempts.get(job.accelerator, 0)
        if made >= max(0, self.policy.reservation_depth) or attempts >= self.reservation_cap:
            return
        # Jobs that can never fit do not get to sweep the release profile over and over.
        self.reservation_attempts[job.accelerator] = attempts + 1
        found = reservation_start(pool, self.index.held, self.profiles[job.accelerator], job, self.policy, self.now)
        if found is None or (found[0] <= self.now and self._start_spread(job, pool, found[2])):
            return
        self.reservations_made[job.accelerator] = made + 1
        if made + 1 >= max(0, self.policy.reservation_depth):
            self.reservation_attempts[job.accelerator] = self.reservation_cap
        self._reserve(job, pool, found[1], found[0])

    def _start_spread(self, job: Job, pool: AcceleratorPool, level: str) -> bool:
        """Start a gang at a wider `level` than it waits for now, if quota admits it: its narrowest
        domain frees only after its patience runs out (see `backfill.reservation_start`)."""
        if level == gang_level(pool, job, self.policy, self.now):
            return False
        admission = self.ledger.admit(job.team, job.accelerator, job.gpus, not job.preemptible)
        fit = None if admission is None else fit_gang(pool, job.gpus, max_level=level)
        if admission is None or fit is None:
            return False
        self._commit_start(job, fit, admission, False)
        return True

    def _reserve(self, job: Job, pool: AcceleratorPool, node_ids: tuple[str, ...], start_s: float) -> None:
        self.generation += 1
        self.book.add(self.index, Reservation(job.id, job.accelerator, node_ids, start_s))
        self.actions.append(Reserve(job.id, node_ids, start_s))
        self.estimates[job.id] = start_s

"""One scheduling cycle: snapshot in, plan out.

`_Cycle.run` is the cycle, a line per step:
 1-2. Health and the index (`prepare_cycle`): cordon nodes without healthy GPUs, requeue jobs on
    nodes that lost the GPUs they use; index free capacity, charge running work to quotas, build
    release profiles.
 3. Order pending jobs: priority, fair share, within-team policy, id.
 4. Consider each job: quota admission -> placement (full size, then smaller if elastic,
    backfilling around reservations) -> preemption when it pays (the victims hand their GPUs over
    and the job starts on them in the same plan, see `reclaim`) -> reservation for the first
    blocked heads.
 5. Grow: elastic growth into capacity that nothing pending could use.
 6. Explain: a reason and an estimated start for every job that did not start.

The working state is private to the cycle (the snapshot is never touched), in named parts
(`cycle_state`): what it decided, what it memoises (one invalidation point) and its budgets.

Speed. `reference.schedule_reference` states the same rules plainly, without any of what
follows, and `tests/engine/test_reference.py` checks under Hypothesis that both plan the same
(estimates included). The engine's CPython speed tricks, each marked "Fast path" where it is,
with its plain definition and the test that proves the two equal (`tests/engine/...`):
- The cyclic collector is paused for the cycle (`collector.collector_paused`); plain: the cycle
  with it on, which frees the same, since the cycle makes no reference cycles
  (`test_collector.py::test_a_cycle_leaves_no_cyclic_garbage_behind`).
- `_scan` answers the cheap cases inline, with the working state in local names (unknown
  accelerator, blocked, a settled verdict), and reads the admission memo inline, calling
  `_Cycle._admission` (its plain definition, which the plain scan calls for every job) only when
  the memo is stale; the smallest size and the worst-case end are the helpers' (`smallest_size`,
  `_Cycle._worst_end_s`), called, not copied; plain: `reference._ReferenceCycle.consider`, and
  the scan without shortcuts, `plain_scan.schedule_plain_scan`
  (`test_queue_tail.py::test_the_shortcut_scan_plans_exactly_as_the_plain_scan`).
- A job with the shape of the job before it (`_Cycle.shape_of`: all that an answer from a verdict
  reads of a job but its worst-case end), when that one was answered from a verdict and no full
  look has changed the working state since, gets the same answer if it ends no earlier than the
  verdict says, without the lookups (runs of one team's jobs alike in a long queue at overload);
  a job of another `Job.shape` object (most) is told apart by that identity alone, without its
  `shape_of` tuple; plain: a shape equal to no other's, each job answered on its own
  (`test_fast_paths.py::test_jobs_answered_as_the_job_before_them_are_answered_as_on_their_own`).
- The verdict of a job's shape also answers a job on an accelerator not yet settled when that job
  could not preempt (`Reclaimer.cannot_preempt`: a prefix of `try_preempt`'s early returns) and
  no reservation attempt is left there (`_passed_over`): the borrowers filling a queue at overload;
  plain: the full look
  (`test_fast_paths.py::test_jobs_that_cannot_preempt_are_answered_as_trying_would`).
- The memos of `cycle_state.Memo` (verdicts, fit and backfill misses, earliest starts, quota
  admissions); plain: `reference.py`, which keeps none (`test_reference.py`). Victim searches
  that found nothing, which also answer those with a lower cost cap, charged what those would
  visit (`Reclaimer._fruitless_again`); plain: searching again
  (`test_fast_paths.py::test_victim_searches_answered_from_the_memo_give_the_plans_searching_gives`).
- Victim searches answered from the walk a search with the same key made since the working
  state last changed, when their cost cap lies where that walk goes the same way
  (`Reclaimer._walked_again`, `WalkBounds`), charged what it visited; plain: searching again
  (`test_fast_paths.py::test_victim_searches_answered_from_the_walks_made_give_the_plans_searching_gives`).
- When a job fits earliest along the release profile (`backfill.earliest_start`), kept per
  accelerator, size, level and topology awareness until the working state changes
  (`Reclaimer.earliest`: blocked gangs of one size sweep the profile once), and a reservation
  attempt takes its gang's level from `Reclaimer.gang_level`, which keeps when it could start within one
  pod; plain: `reservation_start` and `earliest_start` on their own
  (`test_fast_paths.py::test_earliest_starts_kept_while_the_working_state_stays_the_same_are_found_again`).
- Victim candidates made lazily, cheapest first, with the costs they were sorted by
  (`preemption.Victims`, with the `Candidate.ends_soon` memo of `reclaim.ends_by`); plain:
  `candidate_of` for every run, sorted
  (`test_fast_paths.py::test_victims_come_cheapest_first_as_the_plain_definition_says`), and
  `reference._ReferenceCycle._eligible`.
- Whether a candidate's team stays covered, from what each team may lose looked up once per
  search (`reclaim.spare_gpus`); plain: `keeps_guarantees` for the one victim
  (`test_fast_paths.py::test_what_a_team_may_lose_and_stay_covered_answers_as_keeping_its_guarantee_does`).
- The owners' pass looks only at the jobs whose smallest size fits in what is left of their
  team's guarantee, found by shape (`QueueShapes`, `_Cycle._maybe_owners`), every job after an
  eviction; plain: every job looked at, the borrowers put off (`plain_scan`;
  `test_fast_paths.py::test_the_owners_pass_looks_at_every_job_after_an_eviction_gives_a_team_guarantee_back`).
  The borrowers' order from the rank of each shape (`_Cycle._rank_borrowers`); plain: the rank
  per job (`reference.py`, `plain_scan`). Shapes told apart by the identity of `Job.shape`, one
  object per shape, without a tuple built and hashed per job; plain: by value
  (`test_fast_paths.py::test_queue_shapes_told_apart_by_identity_plan_as_shapes_told_apart_by_value`).
- Without explanations, past the last job that might evict or shrink anything, an accelerator with
  nothing free or held and no reservation attempt left is blocked (`_Cycle._last_pass`); plain: the
  scan to the end (`test_queue_tail.py::test_without_explanations_the_actions_and_topology_waits_are_the_same`,
  `test_fast_paths.py::test_without_explanations_the_scan_ends_once_nothing_is_free_and_no_job_left_may_preempt`).
- What preemption could take, memoised (`prepare.Takeable.upper`); plain: `Takeable.plain_upper`
  (`test_fast_paths.py::test_what_preemption_could_take_is_the_plain_sum_over_victims`).
- One pass over the running jobs (`prepare.running_totals`), and its time-free part kept between
  cycles by `FleetState` (`state.RunningBook`); plain: the per-run formulas
  (`test_fast_paths.py::test_running_totals_match_the_plain_per_run_definitions`,
  `test_the_book_a_fleet_state_keeps_adds_up_as_the_running_jobs_do`).
- Estimates along one list schedule per accelerator and per team's guarantee, walked forward
  along the queue (`explain.explain_pending`, `explain.ListSchedule`); plain: per job
  (`test_fast_paths.py::test_explanations_match_the_plain_per_job_definitions`,
  `test_the_list_schedule_starts_jobs_when_its_plain_definition_does`), and statuses
  built through slots (`plan.pending_status`; `test_slot_built_statuses_equal_constructed_ones`).
- The packing choice from buckets (`packing.best_node`); plain: `packing.plain_best_node`
  (`test_packing.py::test_the_packing_fast_path_picks_the_node_the_plain_definition_picks`).
- The queue sorted on one number per job (`ordering.sort_by_numbers`, the positions sorted by a
  C-level lookup of their numbers), and on the tie-break alone when every job has the same number;
  without an age term (one score per team and class), sorted key by key from the last, the scores
  read in C-level passes (`ordering._sort_by_team_score`); plain: the reference's sort on whole
  keys (`test_reference.py`), and a stable sort on (number, tie-break)
  (`test_ordering.py::test_sort_by_number_sorts_by_number_then_tiebreak_keeping_the_order_of_full_ties`,
  `test_without_an_age_term_the_queue_is_sorted_on_whole_keys`).
- The pending jobs of each class and team (of each class, without fair share) kept in within-team
  order by `FleetState` as they join and leave the queue (`ordering.KeptQueue`, a snapshot's
  `queue`), so that the default order (a team's jobs that waited `max_age_s` first) and the order
  without fair share are put together from them without a sort; plain: sorting the snapshot's
  pending jobs
  (`test_ordering.py::test_the_queue_kept_in_within_team_order_orders_as_sorting_the_queue_does`).
- Whether a size lies beyond what is left of its team's guarantee, memoised with its admission
  (`CachedAdmission.beyond`), and a gang's level without the quota lookups of `_owed` where
  `gang_level` does not read it (`Reclaimer.gang_level`); plain: `QuotaLedger.within_guarantee`
  and `gang_level` asked every time (`test_queue_tail.py`, `test_reference.py`).
- The capacity index's pools built in one loop each (`capacity.AcceleratorPool.with_used`);
  plain: `capacity.plain_pools`, the empty-fleet pool with each used node set one at a time
  (`test_fast_paths.py::test_the_capacity_index_builds_the_pools_setting_nodes_one_at_a_time_builds`).
- A snapshot's running jobs kept by `FleetState` from one snapshot to the next, one per change
  of a run, their progress, checkpoint, release and lost work read from the run's anchor at the
  latest snapshot's time only where the engine reads them (`runs.ShownRunning`,
  `runs.show_running`); plain: `Running` built field by field from `progress_at`,
  `checkpoint_at` and `runs.anchored_release_s`, and `runs.all_running_at` (one per running job
  per snapshot)
  (`test_fast_paths.py::test_fleet_state_snapshots_show_the_same_running_as_built_field_by_field`).
- The running jobs' releases, GPUs per node and team releases kept by `FleetState` between cycles
  (`prepare.KeptReleases`, read by `RunningBook.totals`); plain: `prepare.running_totals`, summed
  per run (`test_fast_paths.py::test_the_book_a_fleet_state_keeps_adds_up_as_the_running_jobs_do`).
- The kept releases built once per change of the running jobs, their GPUs per node summed as runs
  start and end, their earliest release kept in a heap and their events kept in time order as
  runs enter and leave, so that no cycle sorts its release profile (`prepare.KeptReleases.at`);
  plain: `KeptReleases.plain_at`, summed per run and sorted at every cycle
  (`test_fast_paths.py::test_kept_releases_built_once_per_change_equal_them_built_at_every_look`).
- Growth passes over accelerators without elastic runs (`RunningTotals.elastic`); plain: every
  accelerator's runs looked at
  (`test_fast_paths.py::test_growth_that_passes_over_accelerators_without_elastic_runs_grows_as_looking_at_every_run`).
- The empty-fleet index and the cordons of a node tuple, kept for it by the `FleetState` that
  shows it while the nodes stay the same (`node_cache.NodeCache`, handed in `kept.Kept`); plain:
  built afresh, as for a bare snapshot
  (`test_fast_paths.py::test_a_cycle_on_the_same_node_tuple_plans_as_on_a_fresh_one`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Set
from itertools import compress, count
from operator import attrgetter, not_

from .backfill import (
    ReleaseProfile,
    Reservation,
    ReservationStart,
    reservation_start,
    worst_penalty,
    worst_runtime_s,
)
from .blockers import describe_blockers
from .capacity import AcceleratorPool, CapacityIndex
from .collector import collector_paused
from .cycle_state import (
    ANY_END_S,
    AdmissionKey,
    BackfillMiss,
    Budgets,
    CachedAdmission,
    Decisions,
    FitKey,
    Memo,
    Statement,
    Verdict,
    VerdictKey,
)
from .elastic import grow_actions, reduced_sizes
from .explain import STARTED, end_state_of, explain_pending, topology_waits
from .fairshare import fairshare_factors, fairshare_priorities
from .kept import Kept
from .model import Job, Policy, Running, Snapshot
from .ordering import order_jobs
from .placement import Fit, classify_misfit, could_fit_by_shape, fit_gang, kept_for_gangs, narrower, patience_s
from .plan import (
    REASON_CAPACITY,
    REASON_POOL,
    REASON_PRIORITY,
    REASON_QUOTA,
    REASON_TOPOLOGY,
    Blocker,
    Plan,
    Reserve,
    Start,
    reserved_for,
)
from .prepare import Prepared, prepare_cycle
from .quota import Admission, QuotaLedger, borrowers_rank
from .reclaim import CycleContext, Reclaimer


class QueueShapes:
    """The queue's jobs by shape: what the owners' pass, the borrowers' order and the end of the
    preemptors read of a job (class, team, accelerator, size, smallest size: `Job.shape`), read in
    one pass over the jobs. Each pass that reads a long queue's jobs into keys costs about 0.2 us a
    job, which several such passes per cycle made a tenth of a cycle at overload; what is worked
    out per shape (few) is then looked up per job by the shape's number.

    Fast path: the shapes are told apart by the identity of `Job.shape`, one object per shape, so
    no tuple is built or hashed per job (plain: by value; a shape of two objects, as an unpickled
    job's, is then two shapes alike, which only costs their lookups twice)."""

    __slots__ = ("shapes", "ids")
    SHAPE = attrgetter("shape")

    def __init__(self, queue: list[Job]) -> None:
        keys = list(map(self.SHAPE, queue))
        objects = list(map(id, keys))
        shapes = dict(zip(objects, keys, strict=True))
        number = {key: index for index, key in enumerate(shapes)}
        self.shapes: list[tuple[int, str, str, int, int | None]] = list(shapes.values())
        self.ids: list[int] = list(map(number.__getitem__, objects))


def misfit(pool: AcceleratorPool, gpus: int, admitted: bool) -> str:
    """Why a job that neither starts nor preempts waits, when nothing ahead of it holds its GPUs:
    `placement.classify_misfit` (too few free GPUs, or free GPUs in the wrong shape), except that
    GPUs free for it but refused by the quota pool (not `admitted`: within its team's guarantee, the
    free GPUs back other teams' loans of it) are the pool's doing, not the shape's."""
    reason = classify_misfit(pool, gpus)
    return REASON_POOL if not admitted and reason == REASON_TOPOLOGY else reason


def smallest_size(gpus: int, low: int | None, elastic: bool) -> int:
    """The smallest size a job of `gpus` GPUs (at least `low` when elastic) may start at."""
    return max(1, low) if elastic and low is not None and low < gpus else gpus


def schedule(snapshot: Snapshot, now: float, *, explain: bool | Set[str] = True, kept: Kept | None = None) -> Plan:
    """Decide what to start, preempt, resize and reserve; explain every job left pending.

    With `explain=False` (for replays that read no estimates) the actions are the same, but
    `Plan.pending` only lists the jobs waiting on topology, without estimates, and the queue scan
    stops once every accelerator is blocked by its strict-FIFO head or full. With a set of job ids
    (a start preview, a replay sampling estimates) only those are explained, with the jobs ahead of
    them in the queue (an estimate follows the queue ahead), and the rest listed as without
    explanations: the same statuses as a full explanation for those jobs. Runs with the cyclic
    collector paused (fast path, see `collector`): the cycle makes no reference cycles.

    `kept`: what the `FleetState` the snapshot came from keeps between cycles (`FleetState.kept()`,
    see `kept.Kept`); the plan is the same without it, only computed from the snapshot alone.
    """
    with collector_paused():
        return _Cycle(snapshot, now, explain, kept).run()


class _Cycle:
    # The working state `prepare_cycle` builds (steps 1-2), shared with the preemption step
    # (`reclaim.Reclaimer`) through its `CycleContext`.
    prepared: Prepared
    profiles: dict[str, ReleaseProfile]
    decided: Decisions
    reclaim: Reclaimer
    index: CapacityIndex
    running: list[Running]
    ledger: QuotaLedger
    evicting: dict[tuple[str, str], int]  # GPUs per (team, accelerator) in grace, or picked this cycle
    # All that the queue scan's answer from a verdict reads of a job but its worst-case end: a job
    # with the shape of the one before it, with nothing changed since, gets its answer (`_scan`).
    # Plain: a shape equal to no other's, each job answered on its own.
    shape_of = staticmethod(
        attrgetter(
            "team",
            "accelerator",
            "gpus",
            "min_gpus",
            "preemptible",
            "required_level",
            "preferred_level",
            "priority",
            "may_preempt",
            "kind",
        )
    )

    def __init__(
        self, snapshot: Snapshot, now: float, explain: bool | Set[str] = True, kept_state: Kept | None = None
    ) -> None:
        self.snapshot, self.now, self.explain = snapshot, now, explain
        self.kept_state = Kept() if kept_state is None else kept_state
        self.policy: Policy = snapshot.policy
        self.memo = Memo()
        self.budgets = Budgets.of(snapshot.policy)
        self.patience = (patience_s(self.policy, False), patience_s(self.policy, True))
        # Without topology awareness: per accelerator, the nodes single-node jobs leave to the
        # waiting gangs with a required level when they can (`placement.kept_for_gangs`).
        self.kept: dict[str, frozenset[str]] = {}
        self.queue_shapes: QueueShapes | None = None

    def run(self) -> Plan:
        try:
            kept = self.kept_state
            # Steps 1-2: health, the index.
            self._prepare(prepare_cycle(self.snapshot, self.now, kept.book, kept.nodes))
            queue = self._order()  # Step 3.
            self._keep_domains_for_gangs(queue)
            self._consider_all(queue)  # Step 4.
            self._grow()  # Step 5.
            return self._explain(queue)  # Step 6.
        finally:
            # The preemption step's context commits starts through this cycle: a reference cycle,
            # which the collector (paused during cycles) must never be left to free.
            if hasattr(self, "reclaim"):
                del self.reclaim

    def _prepare(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.index, self.running, self.ledger = prepared.index, prepared.running, prepared.ledger
        self.profiles, self.evicting = prepared.profiles, prepared.evicting
        self.decided = Decisions(prepared.actions)
        context = CycleContext(
            self.policy, self.now, prepared, self.decided, self.memo, self.budgets, self.patience, self._commit_start
        )
        self.reclaim = Reclaimer(context)

    def _order(self) -> list[Job]:
        snapshot = self.snapshot
        # Fair-share priorities only rank the fair-share order.
        by_share = self.policy.fairshare and self.policy.queue_order == "fair_share"
        factors = fairshare_factors(snapshot.usage, snapshot.teams, snapshot.quotas) if by_share else {}
        priorities = fairshare_priorities(factors)
        queue = order_jobs(snapshot.pending, self.policy, priorities, self.now, self.kept_state.queue)
        self.decided.reasons = [None] * len(queue)
        return queue

    def _keep_domains_for_gangs(self, queue: list[Job]) -> None:
        if self.policy.topology_aware:
            return
        gangs: dict[str, list[Job]] = {}
        for job in queue:
            if job.required_level in ("rack", "pod") and job.accelerator in self.index.pools:
                gangs.setdefault(job.accelerator, []).append(job)
        for accelerator, jobs in gangs.items():
            self.kept[accelerator] = kept_for_gangs(self.index.pools[accelerator], jobs)

    def _grow(self) -> None:
        if self.policy.elastic:
            decided = self.decided
            decided.actions.extend(
                grow_actions(
                    self.index, self.running, decided.picked, decided.waiting, self.ledger, self.prepared.elastic
                )
            )

    def _explain(self, queue: list[Job]) -> Plan:
        decided = self.decided
        reasons, explain = decided.reasons, self.explain
        if not explain:
            return Plan(tuple(decided.actions), topology_waits(queue, reasons))
        end = len(queue)
        if explain is not True:  # jobs named: the explained part of the queue ends with the last of them
            end = 1 + max((position for position, job in enumerate(queue) if job.id in explain), default=-1)
        pending = explain_pending(queue[:end], self.prepared, reasons[:end], decided.estimates, self.policy.elastic)
        if end < len(queue):
            pending += topology_waits(queue[end:], reasons[end:])
        actions = tuple(decided.actions)
        prepared, elastic = self.prepared, self.policy.elastic

        def describe(waiting: Iterable[tuple[Job, str]]) -> dict[str, Blocker]:
            return describe_blockers(waiting, end_state_of(prepared, actions, elastic))

        return Plan(actions, pending, describe)

    def _consider_all(self, queue: list[Job]) -> None:
        """Jobs that fit their own guarantee go before the rest, which would borrow, whatever their
        priority class (as Kueue admits within nominal quota before borrowing, and Run:ai in-quota
        work before over-quota): otherwise a borrower takes the GPUs an owner just reclaimed by
        preemption, and the owner has to reclaim them again, forever; and a class's borrowers would
        take freed GPUs before a lower class's owners, who then evict loans to get their guarantee.
        Each pass goes in queue order, so by class; with `Policy.least_borrowed_first` the
        borrowers of each class go by `QuotaLedger.borrowers_rank`. When no team has guarantee left
        as the cycle begins (on a busy fleet, or when nobody is guaranteed anything), every job
        would borrow, and the queue is taken in order in one pass."""
        # Without explanations, nothing is left to find out once every accelerator is blocked.
        stop = -1 if self.explain else len(self.index.pools)
        if not queue:
            return
        if not self.ledger.any_headroom():
            self._last_pass(queue, range(len(queue)), stop)
            return
        # The borrowers' pass starts again from the highest class: what the owners' pass found for
        # lower classes only (no victims, settled, hence blocked) does not hold for it.
        classes = queue[0].priority != queue[-1].priority
        deferred: list[int] = []
        if (
            self._scan(queue, self._maybe_owners(queue, deferred), -1 if classes else stop, deferred) < 0
            or not deferred
        ):
            return
        deferred.sort()  # queue order
        self._rank_borrowers(queue, deferred)
        if classes:
            self.memo.new_pass()
        self._last_pass(queue, deferred, stop)

    def _last_pass(self, queue: list[Job], positions: Sequence[int], stop: int) -> None:
        """The pass that ends the scan. Without explanations (`stop` > 0), once past the last job
        that might evict or shrink anything (`_preemptors_end`), an accelerator with nothing free,
        nothing held and no reservation attempt left has nothing more to do, whoever waits there:
        it is blocked, and the scan ends once every accelerator is (fast path: plain, the scan to
        the end; the actions and the topology waits are the same, `test_queue_tail.py`)."""
        end = len(positions) if stop < 0 else self._preemptors_end(queue, positions)
        if end >= len(positions):
            self._scan(queue, positions, stop, None)
            return
        releases = self.ledger.releases
        if self._scan(queue, positions[:end], stop, None) < 0:
            return
        # (An eviction may have given a team guarantee back: its jobs may reclaim after all.)
        closing = self.ledger.releases == releases
        if closing:
            decided = self.decided
            for accelerator, pool in self.index.pools.items():
                if self._closed(accelerator, pool):
                    decided.blocked.add(accelerator)
                    decided.waiting.add(accelerator)
        self._scan(queue, positions[end:], stop, None, closing)

    def _preemptors_end(self, queue: list[Job], positions: Sequence[int]) -> int:
        """The index along `positions` just past the last job that might evict or shrink running
        work: of a team with guarantee left (it may reclaim), or of a class above some preemptible
        or leaving work of its accelerator (`Takeable.upper`). Starts change neither."""
        if not self.policy.preemption:
            return 0
        ledger, upper, shapes = self.ledger, self.prepared.takeable.upper, self._shapes(queue)
        might = [
            ledger.unused_guarantee(team, accelerator) > 0 or upper(accelerator, priority, False) > 0
            for priority, team, accelerator, _, _ in shapes.shapes
        ]
        flags = list(map(might.__getitem__, map(shapes.ids.__getitem__, reversed(positions))))
        return len(flags) - flags.index(True) if True in flags else 0

    def _maybe_owners(self, queue: list[Job], deferred: list[int]) -> Iterator[int]:
        """The positions of `queue` the owners' pass looks at: the jobs whose smallest size fits in
        what was left of their team's guarantee as the pass began. The others would borrow, so
        `_scan` would put them off: they go to `deferred` unlooked at. What is left of a guarantee
        only shrinks as jobs start; should an eviction give some team GPUs back, every job after
        it is looked at.

        Fast path: at overload nearly every job would borrow, and the owners' pass picks out the
        few that would not from their shapes (`QueueShapes`; plain: every position looked at,
        `plain_scan`; `test_queue_tail.py`)."""
        ledger, elastic, shapes = self.ledger, self.policy.elastic, self._shapes(queue)
        releases = ledger.releases
        fit = [
            smallest_size(gpus, low, elastic) <= ledger.unused_guarantee(team, accelerator)
            for _, team, accelerator, gpus, low in shapes.shapes
        ]
        if True not in fit:
            # Fast path: no shape fits (most cycles at overload), so every job would borrow: all of
            # them put off, in queue order (plain: the passes below, which find that).
            deferred.extend(range(len(queue)))
            return
        fits = list(map(fit.__getitem__, shapes.ids))
        for position in compress(count(), fits):
            yield position
            if ledger.releases != releases:
                deferred.extend(compress(range(position), map(not_, fits)))
                yield from range(position + 1, len(queue))
                return
        deferred.extend(compress(count(), map(not_, fits)))

    def _rank_borrowers(self, queue: list[Job], deferred: list[int]) -> None:
        """Sort the put-off positions of `queue`, in queue order, by class, highest first, then
        (with `Policy.least_borrowed_first`) by `QuotaLedger.borrowers_rank`, stably.

        Fast path: the rank of each shape of job (`QueueShapes`) is worked out once, however many
        jobs of that shape wait, and the positions sorted on the rank's place among the shapes'
        (plain: the rank per job, as the reference sorts)."""
        if not self.policy.least_borrowed_first:
            return  # in queue order, which is by class already
        ledger, shapes = self.ledger, self._shapes(queue)
        # What the ledger says of each team and accelerator, asked once for all their shapes.
        accounts: dict[tuple[str, str], tuple[int, int]] = {}
        for _, team, accelerator, _, _ in shapes.shapes:
            if (team, accelerator) not in accounts:
                accounts[team, accelerator] = (
                    ledger.borrowed(team, accelerator),
                    ledger.guarantee_left(team, accelerator),
                )
        ranks = [
            (-priority, *borrowers_rank(*accounts[team, accelerator], gpus))
            for priority, team, accelerator, gpus, _ in shapes.shapes
        ]
        place = {rank: number for number, rank in enumerate(sorted(set(ranks)))}
        if len(place) == 1:
            return  # one rank for all: the stable sort keeps queue order
        places = [place[rank] for rank in ranks]
        if len(deferred) == len(queue):  # every position (in order): its own index
            numbers = list(map(places.__getitem__, shapes.ids))
            deferred[:] = sorted(range(len(deferred)), key=numbers.__getitem__)
            return
        numbers = list(map(places.__getitem__, map(shapes.ids.__getitem__, deferred)))
        deferred[:] = map(deferred.__getitem__, sorted(range(len(deferred)), key=numbers.__getitem__))

    def _shapes(self, queue: list[Job]) -> QueueShapes:
        if self.queue_shapes is None:
            self.queue_shapes = QueueShapes(queue)
        return self.queue_shapes

    def _scan(
        self, queue: list[Job], positions: Iterable[int], stop: int, deferred: list[int] | None, closing: bool = False
    ) -> int:
        """Step 4 for the jobs at `positions` of `queue`: the queue's length is returned, or -1 once
        `stop` accelerators are blocked. Jobs beyond their guarantee are put off into `deferred`
        unless it is None. With `closing` (no job at `positions` may evict or shrink anything), an
        accelerator is blocked as soon as nothing is free or held there and no reservation
        attempt is left (`_last_pass`).

        Fast path (module docstring): runs once per job, so the cheap answers (unknown, blocked, over
        quota, a settled verdict) are inlined here, with the working state in local names, and a job
        shaped like the one before it takes that one's answer from a verdict (`shape_of`); the plain
        scan considers each job in full."""
        decided, memo = self.decided, self.memo
        blocked = decided.blocked
        if len(blocked) == stop:
            return -1
        pools, reasons, admissions, ledger = self.index.pools, decided.reasons, memo.admissions, self.ledger
        verdicts, settled, waiting, elastic = memo.verdicts, memo.settled, decided.waiting, self.policy.elastic
        now, shape_of, topology_aware = self.now, self.shape_of, self.policy.topology_aware
        worst_end_s = self._worst_end_s
        holding, hold = ledger.holds, ledger.hold  # (no call at all where no hold can matter)
        # The run: the shape of the last job answered from a verdict, with that verdict, its size
        # and level, while no full look has changed the working state since (None: no run).
        run_shape: object = None
        # (the run's `Job.shape`: jobs of another one, most, are told apart without `shape_of`)
        run_job_shape: object = None
        run_verdict, run_size, run_level = Verdict(0, ANY_END_S, ""), 0, None
        for position in positions:
            job = queue[position]
            if (
                run_shape is not None
                and job.shape is run_job_shape
                and shape_of(job) == run_shape
                and (
                    run_verdict.worst_end_s == ANY_END_S
                    or worst_end_s(job, run_size, run_level) >= run_verdict.worst_end_s
                )
            ):
                reasons[position] = run_verdict.reason
                # (a job of the run that has waited long enough to hold ends the run: `QuotaLedger.hold`)
                run_shape = (
                    None
                    if holding and hold(job.team, job.accelerator, run_size, job.id, now - job.submit_s)
                    else run_shape
                )
                continue
            accelerator = job.accelerator
            pool = pools.get(accelerator)
            gpus = job.gpus
            if pool is None or gpus <= 0 or accelerator in blocked:
                # Unknown or no GPUs: capacity; a blocked accelerator stays blocked (and is already `waiting`).
                reasons[position] = REASON_CAPACITY if pool is None or gpus <= 0 else REASON_PRIORITY
                continue
            size = smallest_size(gpus, job.min_gpus, elastic)
            pinned = not job.preemptible
            admission_key = (job.team, accelerator, size, pinned)
            # Fast path: `_admission`'s memo read inline, `_admission` itself (the plain definition, as
            # the plain scan asks it) only when stale (`test_queue_tail.py`, shortcut scan = plain).
            cached = admissions.get(admission_key)
            if cached is None or cached.ledger_version != ledger.version or cached.total_free != pool.total_free:
                self._admission(job.team, accelerator, size, pool, pinned)
                cached = admissions[admission_key]
            admission, refused = cached.admission, cached.refused
            # (`cached.beyond`: `not ledger.within_guarantee(job.team, accelerator, size)`, memoised)
            if deferred is not None and (admission.borrowing if admission is not None else cached.beyond):
                deferred.append(position)  # beyond its guarantee (an owner waiting for its loans back is not)
                continue
            if refused:
                reasons[position] = refused
                # (a job refused by its team's limit keeps its size within it: `QuotaLedger.hold`)
                held = (
                    holding
                    and refused == REASON_QUOTA
                    and hold(job.team, accelerator, size, job.id, now - job.submit_s)
                )
                run_shape = None if held else run_shape  # (a hold ends the run)
                continue
            # A job shaped like one that already failed, with nothing changed since, fails the same way.
            level = job.required_level if gpus <= pool.gpus_per_node else self.reclaim.gang_level(pool, job)
            key = (accelerator, gpus, size, level, job.preferred_level, admission is None)
            verdict = verdicts.get(key)
            if (
                verdict is not None
                and verdict.generation == memo.generation
                and (accelerator in settled or self._settled(accelerator) or self._passed_over(job, pool, size))
                and (verdict.worst_end_s == ANY_END_S or worst_end_s(job, size, level) >= verdict.worst_end_s)
            ):
                reasons[position] = verdict.reason
                waiting.add(accelerator)
                # A hold changes what the team's jobs are admitted to: no run of answers goes past it.
                held = holding and hold(job.team, accelerator, size, job.id, now - job.submit_s)
                run_shape = None if held else run_shape
                if not held and (gpus <= pool.gpus_per_node or not topology_aware or job.kind == "serving"):
                    # (the level is the shape's: `Reclaimer.gang_level` reads a gang's wait only otherwise)
                    run_shape, run_verdict, run_size, run_level = shape_of(job), verdict, size, level
                    run_job_shape = job.shape
                continue
            run_shape = None
            decided.at = position
            self._consider_sized(job, pool, size, admission, key, level)
            if stop > 0:
                self._block_if_done(accelerator, pool, closing)
            if len(blocked) == stop:
                return -1
        return -1 if len(blocked) == stop else len(queue)

    def _block_if_done(self, accelerator: str, pool: AcceleratorPool, closing: bool) -> None:
        """After a full look without explanations: nothing free, held, to preempt or reserve on
        `accelerator` (`_settled`, or `_closed` in the closing pass), so every later job of it
        waits."""
        decided = self.decided
        if pool.total_free or decided.book.held_max_free.get(accelerator):
            return
        if (closing and self._closed(accelerator, pool)) or self._settled(accelerator):
            decided.blocked.add(accelerator)
            decided.waiting.add(accelerator)

    def _consider_sized(
        self,
        job: Job,
        pool: AcceleratorPool,
        size: int,
        admission: Admission | None,
        key: VerdictKey,
        level: str | None,
    ) -> None:
        """The full look at a job no cached verdict answers (never a strict-FIFO blocked one), within
        `level` (the verdict key's). Its reason is `reasons[at]` (`Decisions.reason`, without the
        property: this runs for every job the verdicts do not answer)."""
        accelerator, decided = job.accelerator, self.decided
        reasons, at = decided.reasons, decided.at
        # The verdict holds for the state this look began on: a reservation or spread start made
        # below changes the state (and the generation), so later jobs of this shape look again.
        generation = self.memo.generation
        backfill = self.policy.backfill
        shaped = decided.book.could_fit_with_held(pool, size) if backfill and decided.book.entries else None
        if shaped is None:
            shaped = could_fit_by_shape(pool, size)
        if not shaped and self._settled(accelerator):
            # Nothing to place, preempt or reserve: where the full path below ends, in short.
            reasons[at] = reason = misfit(pool, job.gpus, admission is not None)
            decided.waiting.add(accelerator)
            if not backfill:
                decided.blocked.add(accelerator)
            self.memo.verdicts[key] = Verdict(generation, ANY_END_S, reason)
            self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)
            return
        if shaped and admission is not None and self._try_start(job, pool, size, admission):
            return
        if self.reclaim.try_preempt(job, pool, size, admission):
            return
        self._wait(job, pool, size, key, level, generation)

    def _wait(
        self, job: Job, pool: AcceleratorPool, size: int, key: VerdictKey, level: str | None, generation: int
    ) -> None:
        """The job neither starts nor preempts: its reason (a reservation it could not backfill
        around, or the misfit), a reservation when nothing else blocks it, and the verdict for its
        shape, holding for the state of `generation`, the one its look began on."""
        decided, accelerator = self.decided, job.accelerator
        reasons, at = decided.reasons, decided.at
        blocker = reasons[at]
        # (the key's last field: quota refused the job, `_admission`)
        reasons[at] = reason = blocker or misfit(pool, job.gpus, not key[-1])
        decided.waiting.add(accelerator)
        if not blocker:
            self._try_reserve(job, pool)
        if not self.policy.backfill:
            decided.blocked.add(accelerator)
        worst_end_s = self._worst_end_s(job, size, level) if blocker else ANY_END_S
        self.memo.verdicts[key] = Verdict(generation, worst_end_s, reason)
        if reasons[at] is not STARTED:  # (a gang may have started at a wider level instead)
            self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)

    def _admission(
        self, team: str, accelerator: str, size: int, pool: AcceleratorPool, pinned: bool = False
    ) -> tuple[Admission | None, str | None]:
        """Quota admission (of work nobody may preempt, when `pinned`), and the reason when waiting
        cannot be helped by capacity ("quota", "guarantee"); cached until the ledger or the free
        capacity changes (both only change through starts, growth and preemption)."""
        key: AdmissionKey = (team, accelerator, size, pinned)
        ledger, admissions = self.ledger, self.memo.admissions
        cached = admissions.get(key)
        if cached is not None and cached.ledger_version == ledger.version and cached.total_free == pool.total_free:
            return cached.admission, cached.refused
        admission = ledger.admit(team, accelerator, size, pinned)
        refused = None
        if admission is None:
            refused = ledger.refusal(team, accelerator, size, pool.total_free, pinned)
            refused = None if refused == REASON_CAPACITY else refused
        beyond = not ledger.within_guarantee(team, accelerator, size)
        admissions[key] = CachedAdmission(ledger.version, pool.total_free, admission, refused, beyond)
        return admission, refused

    def _closed(self, accelerator: str, pool: AcceleratorPool) -> bool:
        """Nothing free or held on `accelerator`, and no reservation attempt left there: no job
        that may not preempt can start or reserve anything."""
        budgets = self.budgets
        return (
            not pool.total_free
            and not self.decided.book.held_max_free.get(accelerator)
            and budgets.reservation_attempts.get(accelerator, 0) >= budgets.reservation_cap
        )

    def _settled(self, accelerator: str) -> bool:
        """No more preemption or reservation attempts this cycle that could treat jobs differently.

        Attempts and the scan budget only ever run out, so once settled, an accelerator stays so."""
        memo = self.memo
        if accelerator in memo.settled:
            return True
        policy, budgets = self.policy, self.budgets
        searches_left = budgets.preemption_attempts < policy.max_preemption_attempts and budgets.scan_budget > 0
        if policy.preemption and searches_left and accelerator not in memo.victimless:
            return False
        if budgets.reservation_attempts.get(accelerator, 0) < budgets.reservation_cap:
            return False
        memo.settled.add(accelerator)
        return True

    def _passed_over(self, job: Job, pool: AcceleratorPool, size: int) -> bool:
        """Whether a full look at `job` (at its smallest `size`) could only end as its shape's
        verdict says, although its accelerator is not settled: it could not preempt
        (`Reclaimer.cannot_preempt`: nothing tried, nothing spent) and no reservation attempt is left there
        (so it would reserve nothing). What is left of its look is placement and the reason, which
        the verdict holds for (fast path: plain, the full look; `test_queue_tail.py`).

        Fast path: a yes of `Reclaimer.cannot_preempt` is kept for the jobs of the same team, accelerator,
        size, priority and right to preempt until the working state changes (`generation`): what it
        reads besides them either changes only with the working state (the quota ledger, the free
        GPUs) or only ever runs out (attempts, the scan budget, the accelerators without victims),
        so a yes stays a yes (plain: asking it every time;
        `test_fast_paths.py::test_a_kept_verdict_that_a_job_cannot_preempt_is_what_asking_again_says`)."""
        if self.budgets.reservation_attempts.get(job.accelerator, 0) < self.budgets.reservation_cap:
            return False
        memo = self.memo
        key = (job.team, job.accelerator, size, job.priority, job.may_preempt)
        if memo.cannot_preempt.get(key) == memo.generation:
            return True
        if self.reclaim.cannot_preempt(job, pool, size):
            memo.cannot_preempt[key] = memo.generation
            return True
        return False

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
        max_level, memo = self.reclaim.gang_level(pool, job), self.memo
        for size in self._sizes(job, pool):
            if size == smallest:
                admission: Admission | None = smallest_admission
            else:
                admission = self.ledger.admit(job.team, job.accelerator, size, not job.preemptible)
            if admission is None:
                continue
            key: FitKey = (job.accelerator, size, max_level)
            fit, taken = None, False
            if memo.misses.get(key) != memo.generation or job.preferred_level:
                fit = self._fit(job, pool, size, max_level)
                if fit is None:
                    memo.misses[key] = memo.generation
            if fit is None and self.policy.backfill and self.decided.book.could_fit_with_held(pool, size):
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
        the placement picks cannot delay any reservation; they are held again whatever it finds
        (the opening is a statement, always discarded; a fit found is taken meanwhile).
        """
        book, memo = self.decided.book, self.memo
        entries = book.of(job.accelerator)
        if not entries:
            return None
        worst_end_s = self.now + worst_runtime_s(job, size, worst_penalty(self.policy, size, max_level))
        key: FitKey = (job.accelerator, size, max_level)
        missed = memo.backfill_misses.get(key)
        if missed is not None and missed.generation == memo.generation and worst_end_s >= missed.worst_end_s:
            # A job ending no earlier than one that already failed here fails too.
            self.decided.reason = missed.reason
            return None
        usable = [entry for entry in entries if entry.start_s >= worst_end_s]
        fit = None
        if usable:
            index = self.index
            with Statement() as opened:
                opened.do(lambda: book.release_holds(index, usable), lambda: book.restore_holds(index, usable))
                aware, kept = self.policy.topology_aware, self.kept.get(job.accelerator, frozenset())
                fit = fit_gang(pool, size, max_level=max_level, topology_aware=aware, kept=kept)
                if fit is not None:
                    index.take(fit.allocation)
        if fit is None:
            first = min(entries, key=lambda entry: (entry.start_s, entry.job_id))
            self.decided.reason = reason = reserved_for(first.job_id)
            memo.backfill_misses[key] = BackfillMiss(memo.generation, worst_end_s, reason)
        return fit

    def _record(self, action: Start | Reserve) -> None:
        """A start or a reservation goes into the plan: the working state it changed invalidates
        every memo (the one place it does)."""
        self.memo.invalidate()
        self.decided.actions.append(action)

    def _commit_start(
        self, job: Job, fit: Fit, admission: Admission, taken: bool, replaces: tuple[str, ...] = (), wait_s: float = 0.0
    ) -> None:
        if not taken:
            self.index.take(fit.allocation)
        size = sum(gpus for _, gpus in fit.allocation)
        self.ledger.charge(job.team, job.accelerator, size, not job.preemptible)
        runtime_s = wait_s + worst_runtime_s(job, size, self.policy.penalty(fit.level))
        self.profiles[job.accelerator].add(self.now + runtime_s, fit.allocation)
        self.prepared.team_releases.setdefault((job.team, job.accelerator), []).append((self.now + runtime_s, size))
        self._record(Start(job.id, fit.allocation, admission.borrowing, fit.level, replaces))
        self.decided.reason = STARTED

    def _try_reserve(self, job: Job, pool: AcceleratorPool) -> None:
        if not self.reclaim.can_reserve(job.accelerator):
            return
        budgets, depth = self.budgets, max(0, self.policy.reservation_depth)
        made = budgets.reservations_made.get(job.accelerator, 0)
        # The level `reservation_start` would find (`gang_level_now`, asked while a reservation is
        # left to make), from what `Reclaimer.gang_level` keeps (fast path; plain: found again there).
        max_level = self.reclaim.gang_level(pool, job)
        # Jobs that can never fit do not get to sweep the release profile over and over.
        budgets.reservation_attempts[job.accelerator] = budgets.reservation_attempts.get(job.accelerator, 0) + 1
        profile, owed = self.profiles[job.accelerator], self.reclaim.owed(job)
        found = reservation_start(
            pool, self.index.held, profile, job, self.policy, self.now, owed, max_level, self.reclaim.earliest
        )
        if found is None or (found.start_s <= self.now and self._start_spread(job, pool, found.level)):
            return
        budgets.reservations_made[job.accelerator] = made + 1
        if made + 1 >= depth:
            budgets.reservation_attempts[job.accelerator] = budgets.reservation_cap
        self._reserve(job, found)

    def _start_spread(self, job: Job, pool: AcceleratorPool, level: str) -> bool:
        """Start a gang at a wider `level` than it waits for now, if quota admits it: its narrowest
        domain frees only after its patience runs out (see `backfill.reservation_start`)."""
        if level == self.reclaim.gang_level(pool, job):
            return False
        admission = self.ledger.admit(job.team, job.accelerator, job.gpus, not job.preemptible)
        fit = None if admission is None else fit_gang(pool, job.gpus, max_level=level)
        if admission is None or fit is None:
            return False
        self._commit_start(job, fit, admission, False)
        return True

    def _reserve(self, job: Job, found: ReservationStart) -> None:
        self.decided.book.add(self.index, Reservation(job.id, job.accelerator, found.node_ids, found.start_s))
        self._record(Reserve(job.id, found.node_ids, found.start_s))
        self.decided.estimates[job.id] = found.start_s

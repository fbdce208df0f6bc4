"""Steps 1-2 of a cycle: health triage, the capacity index, quota usage and release profiles.

One pass over the running jobs gives what a cycle needs from them before it looks at the queue:

Quota usage per (team, accelerator), the release events of every accelerator's profile and of
every team's running work (for quota estimates), the GPUs already leaving (in their preemption
grace) per (team, accelerator) and the most preemption could take per accelerator. Doing this in
one tight loop instead of one loop per consumer is most of the fixed cost of a cycle on a busy
fleet. What of it does not depend on the time (`RunningBook`) a `FleetState` keeps between
cycles, so that the loop over a snapshot it made only sums the releases and the GPUs per node.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

from .backfill import ReleaseEvent, ReleaseProfile, event_time
from .capacity import CapacityIndex, EmptyFleet, Topology
from .health import triage_nodes
from .model import Job, Policy, Running, Snapshot
from .node_cache import NodeCache
from .plan import Action, Allocation, Cordon, Requeue
from .preemption import bounded_loss
from .quota import QuotaLedger

Key = tuple[str, str]
_T = TypeVar("_T")


@dataclass(slots=True)
class RunningTotals:
    used: dict[str, int]
    usage: dict[Key, int]
    # Per accelerator, the runs' release events in time order (running order among equal times).
    releases: dict[str, list[ReleaseEvent]]
    evicting: dict[Key, int]
    takeable: Takeable
    team_releases: dict[Key, list[tuple[float, int]]]
    # GPUs of borrowing work nobody may preempt (not leaving), per (team, accelerator).
    pinned: dict[Key, int]
    # Elastic running jobs (a `max_gpus`) not leaving, per accelerator: the only ones that may grow.
    elastic: dict[str, int]


@dataclass(slots=True)
class Takeable:
    """The most preemption could take per accelerator, from priorities alone (the cheap check
    before any victim search): GPUs of preemptible running work by priority, GPUs already leaving
    (in their grace period) and GPUs running on borrowed quota, all of them and those a partial
    reclaim may take (`preemption.partial_reclaim_takes`): of work that checkpoints
    (`preemption.bounded_loss`, counted in `bounded`) and, looked up in `running` when first asked,
    of young loans without checkpoints."""

    preemptible: dict[str, dict[int, int]]
    leaving: dict[str, int]
    borrowing: dict[str, int]
    bounded: dict[str, int]
    # The running jobs these totals are of (for the young loans of a partial reclaim).
    running: Sequence[Running] = ()
    # `upper` by its arguments: the totals above are complete once `running_totals` returns and
    # nothing changes them afterwards, so the memo never goes stale (every pending job of a cycle
    # asks, most with the same few priorities).
    uppers: dict[tuple[str, int, bool, bool, float | None], int] = field(default_factory=dict)

    def upper(
        self,
        accelerator: str,
        priority: int,
        reclaiming: bool,
        bounded_only: bool = False,
        since_s: float | None = None,
    ) -> int:
        """GPUs a job of `priority` could free at most: strictly lower-priority preemptible work,
        work leaving anyway and, when it reclaims within its guarantee, borrowed work (for a partial
        reclaim, `bounded_only`, only loans that checkpoint or (re)started at or after `since_s`:
        `preemption.partial_reclaim_takes`)."""
        key = (accelerator, priority, reclaiming, bounded_only, since_s)
        found = self.uppers.get(key)
        if found is None:
            found = self.uppers[key] = self.plain_upper(accelerator, priority, reclaiming, bounded_only, since_s)
        return found

    def plain_upper(
        self,
        accelerator: str,
        priority: int,
        reclaiming: bool,
        bounded_only: bool = False,
        since_s: float | None = None,
    ) -> int:
        """`upper`, computed from the totals every time (its plain definition: `upper` is a fast path)."""
        lower = sum(gpus for level, gpus in self.preemptible.get(accelerator, {}).items() if level < priority)
        borrowed = 0
        if reclaiming and bounded_only:
            borrowed = self.bounded.get(accelerator, 0) + self.young_loans(accelerator, since_s)
        elif reclaiming:
            borrowed = self.borrowing.get(accelerator, 0)
        return lower + self.leaving.get(accelerator, 0) + borrowed

    def young_loans(self, accelerator: str, since_s: float | None) -> int:
        """GPUs of loans of `accelerator` not leaving whose jobs do not checkpoint and that (re)started
        at or after `since_s` (none when it is None): what a partial reclaim may take besides
        `bounded` (`preemption.partial_reclaim_takes`)."""
        if since_s is None:
            return 0
        return sum(
            run.gpus
            for run in self.running
            if run.job.accelerator == accelerator
            and run.borrowing
            and run.grace_until_s is None
            and run.start_s >= since_s
            and not bounded_loss(run.job)
        )


def running_totals(running: Iterable[Running], now: float, penalty: RunPenalty | None = None) -> RunningTotals:
    """Totals of `running` at `now`: GPUs in use per node, per (team, accelerator) and leaving, and
    the release events per accelerator.

    The release time is `backfill.expected_end_s` with the topology penalty `penalty` gives each
    run (none without it), clamped to `now` as `ReleaseProfile.add` does. The time-free part is
    counted into a fresh `RunningBook`; `FleetState` keeps one between cycles instead.
    """
    runs = tuple(running)
    return RunningBook.of(runs).totals(runs, now, penalty)


class RunningBook:
    """The parts of `running_totals` that depend only on which jobs run where, not on the time:
    GPUs per (team, accelerator) in use and leaving, and what preemption could take (`Takeable`,
    `pinned`). `FleetState` keeps one up to date as jobs start, end, resize and enter their grace
    period (`count`), and hands a copy of it beside each snapshot (`copy`, `kept.Kept`), so that a cycle
    sums per run only what depends on the time: the releases and the GPUs in use per node (`totals`).

    `totals(running, ...)` equals `running_totals(running, ...)` for the running jobs the book
    counted (tests check it); a copy names the snapshot's running tuple (`running`), and
    `prepare_cycle` uses it only for that very tuple."""

    __slots__ = (
        "usage",
        "runs",
        "evicting",
        "leaving",
        "preemptible",
        "borrowing",
        "bounded",
        "pinned",
        "elastic",
        "running",
        "kept",
        "kept_now",
    )

    def __init__(self) -> None:
        self.usage: dict[Key, int] = {}
        self.runs: dict[Key, int] = {}  # running jobs per key of `usage`: a key stays while one runs
        self.evicting: dict[Key, int] = {}
        self.leaving: dict[str, int] = {}
        self.preemptible: dict[str, dict[int, int]] = {}
        self.borrowing: dict[str, int] = {}
        self.bounded: dict[str, int] = {}  # GPUs of `borrowing` whose lost work is bounded
        self.pinned: dict[Key, int] = {}
        self.elastic: dict[str, int] = {}  # elastic runs not leaving per accelerator
        self.running: tuple[Running, ...] | None = None
        # A snapshot's releases as `KeptReleases.at(kept_now)` gave them, when it could.
        self.kept: KeptTotals | None = None
        self.kept_now = 0.0

    def count(self, job: Job, gpus: int, borrowing: bool, leaving: bool, sign: int) -> None:
        """Add (`sign` 1) or take away (-1) a run of `job` on `gpus` GPUs, as `running_totals`
        counts it. Every entry `running_totals` would not make (its sum back to 0) is dropped."""
        key, accelerator, delta = (job.team, job.accelerator), job.accelerator, sign * gpus
        runs = self.runs[key] = self.runs.get(key, 0) + sign
        if runs:
            self.usage[key] = self.usage.get(key, 0) + delta
        else:
            del self.runs[key], self.usage[key]
        if leaving:
            _add(self.evicting, key, delta)
            _add(self.leaving, accelerator, delta)
            return
        if job.max_gpus is not None:
            _add(self.elastic, accelerator, sign)
        if job.preemptible:
            by_priority = self.preemptible.setdefault(accelerator, {})
            _add(by_priority, job.priority, delta)
            if not by_priority:
                del self.preemptible[accelerator]
        if borrowing:
            _add(self.borrowing, accelerator, delta)
            if bounded_loss(job):
                _add(self.bounded, accelerator, delta)
            if not job.preemptible:
                _add(self.pinned, key, delta)

    @classmethod
    def of(cls, runs: Iterable[Running]) -> RunningBook:
        """A fresh book with `runs` counted in (`count` with `sign` 1 for each).

        Fast path: one loop with the book's maps in local names, entries that sum to 0 dropped at
        the end (a cycle on a snapshot without a kept book counts every running job: 24,000 calls
        of `count` were a tenth of the 16,384-node cycle's preparation); plain: `count` per run
        (`test_fast_paths.py::test_a_book_counted_in_one_loop_equals_one_counted_run_by_run`)."""
        book = cls()
        usage, runs_of, evicting, leaving = book.usage, book.runs, book.evicting, book.leaving
        elastic, preemptible = book.elastic, book.preemptible
        for run in runs:
            job, gpus = run.job, run.gpus
            key = (job.team, job.accelerator)
            runs_of[key] = runs_of.get(key, 0) + 1
            usage[key] = usage.get(key, 0) + gpus
            accelerator = key[1]
            if run.grace_until_s is not None:
                evicting[key] = evicting.get(key, 0) + gpus
                leaving[accelerator] = leaving.get(accelerator, 0) + gpus
                continue
            if job.max_gpus is not None:
                elastic[accelerator] = elastic.get(accelerator, 0) + 1
            if job.preemptible:
                by_priority = preemptible.setdefault(accelerator, {})
                by_priority[job.priority] = by_priority.get(job.priority, 0) + gpus
            if run.borrowing:
                _count_loan(book, job, key, gpus)
        _drop_zeros(book)
        return book

    def copy(self, running: tuple[Running, ...]) -> RunningBook:
        """A copy of the book for a snapshot whose running jobs are `running`."""
        twin = RunningBook()
        twin.usage, twin.runs, twin.evicting = dict(self.usage), dict(self.runs), dict(self.evicting)
        twin.leaving, twin.borrowing, twin.pinned = dict(self.leaving), dict(self.borrowing), dict(self.pinned)
        twin.elastic = dict(self.elastic)
        twin.bounded = dict(self.bounded)
        twin.preemptible = {accelerator: dict(gpus) for accelerator, gpus in self.preemptible.items()}
        twin.running = running
        return twin

    def totals(self, running: Iterable[Running], now: float, penalty: RunPenalty | None = None) -> RunningTotals:
        """`running_totals(running, now, penalty)` from the book and, per run, the releases (read
        from `kept` when the snapshot's releases were kept for this very time)."""
        if not isinstance(running, (list, tuple)):
            running = tuple(running)
        kept = self.kept
        if kept is not None and self.kept_now == now:
            kept_used, kept_releases, kept_ends = kept
            return self._with(
                dict(kept_used),
                {accelerator: list(events) for accelerator, events in kept_releases.items()},
                {key: list(ends) for key, ends in kept_ends.items()},
                running,
            )
        used, releases, team_releases = _summed(running, now, penalty)
        return self._with(used, releases, team_releases, running)

    def _with(
        self,
        used: dict[str, int],
        releases: dict[str, list[ReleaseEvent]],
        team_releases: dict[Key, list[tuple[float, int]]],
        running: Sequence[Running],
    ) -> RunningTotals:
        takeable = Takeable(
            {accelerator: dict(gpus) for accelerator, gpus in self.preemptible.items()},
            dict(self.leaving),
            dict(self.borrowing),
            dict(self.bounded),
            running,
        )
        return RunningTotals(
            used,
            dict(self.usage),
            releases,
            dict(self.evicting),
            takeable,
            team_releases,
            dict(self.pinned),
            dict(self.elastic),
        )


# GPUs per node, release events per accelerator and (release, GPUs) per (team, accelerator), in running order.
KeptTotals = tuple[dict[str, int], dict[str, tuple[ReleaseEvent, ...]], dict[Key, tuple[tuple[float, int], ...]]]


class KeptReleases:
    """The releases of the running jobs, kept by `FleetState` in running order between cycles:
    each run's release events, its (release, GPUs) for its team and its allocation, entered when it
    starts (`keep`), replaced in place when it resizes, is throttled or restored or enters its grace
    period (`keep` again), dropped when it ends (`forget`). A release that does not depend on the
    cycle's time (a grace period, a time limit, `Running.release_s`) is computed once per change
    instead of once per cycle.

    `at(now)` equals the `used`, `releases` and `team_releases` of `running_totals` for the same
    running jobs (tests check it), or is None when a run's release depends on the time (restoring,
    throttled, stalled) or falls before `now`: the cycle then sums per run. The release events of
    each accelerator are kept in time order as runs enter and leave (`timeline`: by time, then
    running order, then place in the allocation, as a stable sort of them in running order puts
    them), so that no cycle sorts them.

    Fast path: what `at` returns depends on the time only through whether it is None, so it is
    built once per change of the kept runs (`version`, bumped by `keep` and `forget`) with the
    earliest release among them, and handed out again until the next change (most cycles follow
    an arrival or a re-plan, not a start or an end). Its readers copy it (`RunningBook.totals`);
    nothing mutates it. The GPUs per node are kept summed as runs enter and leave (`node_gpus`),
    and a build takes their order (first appearance, in running order) from the allocations in one
    C-level pass. Plain: `plain_at`, built afresh at every call, summing per run in a loop (tests
    compare them, in order)."""

    __slots__ = (
        "events",
        "ends",
        "allocations",
        "timed",
        "restoring",
        "version",
        "_built",
        "node_gpus",
        "node_runs",
        "_first_ends",
        "places",
        "_next_place",
        "timeline",
    )

    def __init__(self) -> None:
        self.events: dict[str, dict[str, tuple[ReleaseEvent, ...]]] = {}
        self.ends: dict[Key, dict[str, tuple[float, int]]] = {}
        self.allocations: dict[str, Allocation] = {}
        self.timed: set[str] = set()  # runs whose release depends on the cycle's time
        self.restoring: dict[str, float] = {}  # anchored runs by the time their anchor is reached
        self.version = 0  # bumped by every change of the kept runs
        # (version, earliest release, totals) as `at` last built them.
        self._built: tuple[int, float, KeptTotals] | None = None
        # GPUs in use per node over the kept allocations, and how many allocations name the node.
        self.node_gpus: dict[str, int] = {}
        self.node_runs: dict[str, int] = {}
        # Every release entered, earliest first: (release, job id, (team, accelerator)), an entry
        # stale once its run ended or changed its release (`_first_end_s`).
        self._first_ends: list[tuple[float, str, Key]] = []
        # Each run's place in running order (given when it is first kept), and per accelerator the
        # release events in time order with their keys (time, place, position in the allocation).
        self.places: dict[str, int] = {}
        self._next_place = 0
        self.timeline: dict[str, tuple[list[tuple[float, int, int]], list[ReleaseEvent]]] = {}

    def keep(self, job: Job, allocation: Allocation, gpus: int, end_s: float | None, anchor_s: float | None) -> None:
        """Enter or replace (in place) a run: its release `end_s` (None: it depends on the time),
        reached from `anchor_s` on when it is an anchored release (else None)."""
        job_id = job.id
        self.version += 1
        replaced = self.allocations.get(job_id)
        if replaced is not None:
            self._count(replaced, -1)
        self._count(allocation, 1)
        self.allocations[job_id] = allocation
        if end_s is None:
            self.timed.add(job_id)
            end_s = 0.0
        else:
            self.timed.discard(job_id)
        if anchor_s is None:
            self.restoring.pop(job_id, None)
        else:
            self.restoring[job_id] = anchor_s
        runs = self.events.setdefault(job.accelerator, {})
        place = self.places.get(job_id)
        if place is None:
            place = self.places[job_id] = self._next_place
            self._next_place += 1
        timeline = self.timeline.setdefault(job.accelerator, ([], []))
        if job_id in runs:
            _unline(timeline, runs[job_id], place)
        runs[job_id] = events = tuple((end_s, node_id, on_node) for node_id, on_node in allocation)
        _line(timeline, events, place)
        key = (job.team, job.accelerator)
        self.ends.setdefault(key, {})[job_id] = (end_s, gpus)
        heapq.heappush(self._first_ends, (end_s, job_id, key))

    def forget(self, job: Job) -> None:
        job_id = job.id
        self.version += 1
        self._count(self.allocations.pop(job_id), -1)
        self.timed.discard(job_id)
        self.restoring.pop(job_id, None)
        events = self.events[job.accelerator]
        _unline(self.timeline[job.accelerator], events.pop(job_id), self.places.pop(job_id))
        if not events:
            del self.events[job.accelerator], self.timeline[job.accelerator]
        key = (job.team, job.accelerator)
        ends = self.ends[key]
        del ends[job_id]
        if not ends:
            del self.ends[key]

    def at(self, now: float) -> KeptTotals | None:
        """`plain_at(now)`, built once per `version` (fast path, see the class docstring)."""
        if self.timed or (self.restoring and max(self.restoring.values()) > now):
            return None
        built = self._built
        if built is None or built[0] != self.version:
            built = self._built = (self.version, self._first_end_s(), self._totals(self._used()))
        return None if built[1] < now else built[2]

    def _first_end_s(self) -> float:
        """The earliest release of the kept runs (inf: none), the first entry of `_first_ends` still
        current (plain: the least over `ends`, as `plain_at` takes it)."""
        heap, ends = self._first_ends, self.ends
        while heap:
            end_s, job_id, key = heap[0]
            team = ends.get(key)
            kept = None if team is None else team.get(job_id)
            if kept is not None and kept[0] == end_s:
                return end_s
            heapq.heappop(heap)
        return math.inf

    def plain_at(self, now: float) -> KeptTotals | None:
        """The kept runs' totals at `now`, or None when a run's release depends on the time or
        falls before `now` (the definition `at` keeps between changes)."""
        if self.timed or any(anchor_s > now for anchor_s in self.restoring.values()):
            return None
        ends = self.ends
        if ends and min(min(team.values()) for team in ends.values())[0] < now:
            return None
        used: dict[str, int] = {}
        used_get = used.get
        for allocation in self.allocations.values():
            for node_id, gpus in allocation:
                used[node_id] = used_get(node_id, 0) + gpus
        releases = {
            accelerator: tuple(sorted(chain.from_iterable(runs.values()), key=event_time))
            for accelerator, runs in self.events.items()
        }
        return used, releases, self._team_ends()

    def _count(self, allocation: Allocation, sign: int) -> None:
        node_gpus, node_runs = self.node_gpus, self.node_runs
        for node_id, gpus in allocation:
            runs = node_runs[node_id] = node_runs.get(node_id, 0) + sign
            if runs:
                node_gpus[node_id] = node_gpus.get(node_id, 0) + sign * gpus
            else:
                del node_runs[node_id], node_gpus[node_id]

    def _used(self) -> dict[str, int]:
        """The GPUs per node in the order a loop over the allocations first meets the nodes: the
        pairs in that order (a later pair of a node keeps the node's place), then the kept sums
        over the very same nodes."""
        used = dict(chain.from_iterable(self.allocations.values()))
        used.update(self.node_gpus)
        return used

    def _totals(self, used: dict[str, int]) -> KeptTotals:
        releases = {accelerator: tuple(self.timeline[accelerator][1]) for accelerator in self.events}
        return used, releases, self._team_ends()

    def _team_ends(self) -> dict[Key, tuple[tuple[float, int], ...]]:
        return {key: tuple(team.values()) for key, team in self.ends.items()}


def _line(
    timeline: tuple[list[tuple[float, int, int]], list[ReleaseEvent]], events: tuple[ReleaseEvent, ...], place: int
) -> None:
    """Enter a run's release `events` into an accelerator's `timeline` (`KeptReleases`)."""
    keys, line = timeline
    for position, event in enumerate(events):
        key = (event[0], place, position)
        at = bisect_left(keys, key)
        keys.insert(at, key)
        line.insert(at, event)


def _unline(
    timeline: tuple[list[tuple[float, int, int]], list[ReleaseEvent]], events: tuple[ReleaseEvent, ...], place: int
) -> None:
    """Take a run's release `events`, entered with `_line`, out of `timeline` again."""
    keys, line = timeline
    for position, event in enumerate(events):
        at = bisect_left(keys, (event[0], place, position))
        del keys[at], line[at]


def _count_loan(book: RunningBook, job: Job, key: Key, gpus: int) -> None:
    """`RunningBook.of`: a loan of `gpus` GPUs of `job` (not leaving) counted in."""
    accelerator = key[1]
    book.borrowing[accelerator] = book.borrowing.get(accelerator, 0) + gpus
    if bounded_loss(job):
        book.bounded[accelerator] = book.bounded.get(accelerator, 0) + gpus
    if not job.preemptible:
        book.pinned[key] = book.pinned.get(key, 0) + gpus


def _drop_zeros(book: RunningBook) -> None:
    """The entries of `book` that sum to 0, which `count` never keeps, dropped (`RunningBook.of`)."""
    _drop_zero_entries(book.evicting)
    _drop_zero_entries(book.leaving)
    _drop_zero_entries(book.elastic)
    _drop_zero_entries(book.borrowing)
    _drop_zero_entries(book.bounded)
    _drop_zero_entries(book.pinned)
    for accelerator, by_priority in list(book.preemptible.items()):
        _drop_zero_entries(by_priority)
        if not by_priority:
            del book.preemptible[accelerator]


def _drop_zero_entries(counts: dict[_T, int]) -> None:
    for key in [key for key, value in counts.items() if not value]:
        del counts[key]


def _add(counts: dict[_T, int], key: _T, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value:
        counts[key] = value
    else:
        counts.pop(key, None)


class RunPenalty:
    """The topology penalty of a running job's placement level (`Policy.penalty`), which slows its
    progress and so delays the release of a job without a time limit."""

    __slots__ = ("topology", "policy", "node")

    def __init__(self, topology: Topology, policy: Policy) -> None:
        self.topology, self.policy, self.node = topology, policy, policy.penalty("node")

    def __call__(self, allocation: Allocation) -> float:
        return self.policy.penalty(self.topology.level(allocation))

    def of(self, allocation: Allocation) -> float:
        """The penalty `running_totals` applies to a run on `allocation`."""
        return self.node if len(allocation) == 1 else self(allocation)


@dataclass(slots=True)
class Prepared:
    """The working state a cycle starts from; everything here is private to that cycle."""

    index: CapacityIndex
    running: list[Running]
    actions: list[Action]
    ledger: QuotaLedger
    profiles: dict[str, ReleaseProfile]
    evicting: dict[Key, int]
    takeable: Takeable
    # (release time, GPUs) of each running job per (team, accelerator), in running order.
    team_releases: dict[Key, list[tuple[float, int]]]
    now: float
    penalty: RunPenalty
    # Elastic running jobs not leaving per accelerator (`RunningTotals.elastic`).
    elastic: dict[str, int]


def prepare_cycle(
    snapshot: Snapshot, now: float, book: RunningBook | None = None, nodes: NodeCache | None = None
) -> Prepared:
    """Index free capacity, triage health against it (cordons, requeues), then charge the
    surviving running work to quotas and build one release profile per accelerator.

    `book`: the running jobs' book kept by their `FleetState`, read when counted for this very
    `snapshot.running` (else counted from it); `nodes`: the empty-fleet index and cordons kept for
    the node tuple (else built from `snapshot.nodes`). Fast paths, see `kept.Kept`."""
    gpus_per_node = snapshot.policy.gpus_per_node
    running = list(snapshot.running)
    if nodes is None:
        fleet, cordon = EmptyFleet.of(snapshot.nodes, gpus_per_node), None
    else:
        fleet, cordon = nodes.empty_fleet(snapshot.nodes, gpus_per_node), nodes.cordons(snapshot.nodes)
    penalty = RunPenalty(fleet.topology, snapshot.policy)
    if book is not None and book.running is snapshot.running:
        totals = book.totals(running, now, penalty)
    else:
        totals = running_totals(running, now, penalty)
    index = CapacityIndex(snapshot.nodes, totals.used, gpus_per_node, fleet)
    triage = triage_nodes(snapshot.nodes, running, totals.used, index, cordon)
    actions: list[Action] = [Cordon(node_id, reason) for node_id, reason in triage.cordon]
    actions.extend(Requeue(job_id, reason) for job_id, reason in triage.requeue)
    if triage.requeue:
        requeued = {job_id for job_id, _ in triage.requeue}
        running = [run for run in running if run.job.id not in requeued]
        totals = running_totals(running, now, penalty)
        index = CapacityIndex(snapshot.nodes, totals.used, gpus_per_node, fleet)
    capacity = {accelerator: pool.capacity for accelerator, pool in index.pools.items()}
    ledger = QuotaLedger(
        snapshot.quotas, snapshot.teams, (), capacity, usage=totals.usage, pinned=totals.pinned, policy=snapshot.policy
    )
    profiles = {name: ReleaseProfile(now, totals.releases.get(name, ())) for name in index.pools}
    return Prepared(
        index,
        running,
        actions,
        ledger,
        profiles,
        totals.evicting,
        totals.takeable,
        totals.team_releases,
        now,
        penalty,
        totals.elastic,
    )


def _summed(
    running: Sequence[Running], now: float, penalty: RunPenalty | None
) -> tuple[dict[str, int], dict[str, list[ReleaseEvent]], dict[Key, list[tuple[float, int]]]]:
    """The per-run part of `RunningBook.totals`: GPUs used per node, the release events per
    accelerator (in time order) and the team releases, as in `running_totals`, to the last
    floating-point operation; a single-node run (most are) is read without a loop over its
    allocation."""
    node_penalty = 1.0 if penalty is None else penalty.node
    used: dict[str, int] = {}
    releases: dict[str, list[ReleaseEvent]] = {}
    team_releases: dict[Key, list[tuple[float, int]]] = {}
    used_get, team_get = used.get, team_releases.get
    # The release list of the accelerator of the run before (most fleets have one).
    last_accelerator: str | None = None
    append = None
    for run in running:
        job = run.job
        allocation = run.allocation
        accelerator = job.accelerator
        if accelerator is not last_accelerator or append is None:
            events = releases.get(accelerator)
            if events is None:
                events = releases[accelerator] = []
            append, last_accelerator = events.append, accelerator
        single = len(allocation) == 1
        if single:
            node_id, gpus = allocation[0]
        else:
            gpus = 0
            for _, on_node in allocation:
                gpus += on_node
        end_s = _run_end_s(run, now, gpus, node_penalty, None if single else penalty)
        if single:
            used[node_id] = used_get(node_id, 0) + gpus
            append((end_s, node_id, gpus))
        else:
            for node_id, on_node in allocation:
                used[node_id] = used_get(node_id, 0) + on_node
                append((end_s, node_id, on_node))
        key = (job.team, accelerator)
        team_ends = team_get(key)
        if team_ends is None:
            team_releases[key] = [(end_s, gpus)]
        else:
            team_ends.append((end_s, gpus))
    for events in releases.values():
        events.sort(key=event_time)
    return used, releases, team_releases


def _run_end_s(run: Running, now: float, gpus: int, node_penalty: float, penalty: RunPenalty | None) -> float:
    """When `run` (on `gpus` GPUs) releases them, no earlier than `now`: `expected_end_s`, to the
    last floating-point operation, slowed down by `penalty` of its allocation (None: a single-node
    run, or no penalty: `node_penalty`), read only when its remaining work counts."""
    job = run.job
    grace_until_s = run.grace_until_s
    if grace_until_s is not None:
        end_s = grace_until_s
    elif job.time_limit_s is not None:
        end_s = run.start_s + job.time_limit_s
    elif run.release_s is not None:
        end_s = run.release_s
    else:
        remaining_s = job.duration_s - run.progress_s
        slowdown = node_penalty if penalty is None else penalty(run.allocation)
        remaining_s = remaining_s if remaining_s > 0.0 else 0.0
        end_s = now + remaining_s * job.gpus / (gpus if gpus > 1 else 1) * slowdown
    return end_s if end_s >= now else now

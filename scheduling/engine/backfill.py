"""Reservations for blocked head jobs, the backfill rule, and start-time estimates.

A release profile lists when running GPUs come free (start + time limit, or the remaining work
when there is no limit). The head job that cannot start gets the nodes where it fits earliest
along that profile; those nodes are then held out of placement. A later job may still use held
nodes only if its worst-case end is no later than the start of every reservation it touches
(EASY backfill); with `reservation_depth` > 1 several heads hold nodes (conservative backfill).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import NamedTuple

from .capacity import AcceleratorPool, CapacityIndex, domain_gpus, level_of
from .model import LEVEL_RANK, LEVELS, Job, Policy, Running
from .placement import first_in_one_domain, fit_gang, gang_level, narrowest_level, nodes_needed, patience_s
from .plan import Allocation
from .progress import release_after_s
from .progress import worst_runtime_s as progress_worst_runtime_s

ReleaseEvent = tuple[float, str, int]
# How far ahead the fleet is foreseeable: an estimate beyond it is not shown (see `explain`), and a
# gang does not wait for a domain that frees only beyond it.
HORIZON_S = 30 * 86400.0
# Reservation attempts per accelerator and cycle beyond `Policy.reservation_depth`: a job that can
# never fit does not get to sweep the release profile over and over.
EXTRA_RESERVATION_ATTEMPTS = 4
event_time = itemgetter(0)  # a release event's time
# Beyond this many events added since the last sort, `ReleaseProfile.move` sorts the profile and
# searches it by time rather than look through the unsorted ones one by one.
_UNSORTED_SEARCH_LIMIT = 64
# Up to this many events added since the last sort, `ReleaseProfile.sorted_events` puts them in
# place one by one rather than sort the whole profile again.
_INSORT_LIMIT = 32


class EarliestStart(NamedTuple):
    """The first time along the release profile at which a job fits, and the nodes it gets."""

    start_s: float
    node_ids: tuple[str, ...]


class ReservationStart(NamedTuple):
    """When and where a blocked job starts earliest, and the level it was looked for at."""

    start_s: float
    node_ids: tuple[str, ...]
    level: str


class ReleaseProfile:
    """When GPUs of one accelerator come free, as (time, node, gpus) events in time order.

    Events of one time keep the order they were added in: whoever reads the profile takes a whole
    time step at once, so their order within it changes nothing, and comparing times alone sorts
    a long profile several times faster than comparing whole events."""

    __slots__ = ("now", "events", "_dirty", "_sorted", "_curve")

    def __init__(self, now: float, events: Iterable[ReleaseEvent] = ()) -> None:
        """A profile at `now` of `events`, already clamped to `now` and in time order."""
        self.now = now
        self.events: list[ReleaseEvent] = list(events)
        self._dirty = False
        self._sorted = len(self.events)  # events[:_sorted] are in time order
        self._curve: tuple[list[float], list[int], list[float]] | None = None

    def add(self, end_s: float, allocation: tuple[tuple[str, int], ...]) -> None:
        end_s = max(end_s, self.now)
        for node_id, gpus in allocation:
            self.events.append((end_s, node_id, gpus))
        self._dirty = True
        self._curve = None

    def extend(self, events: list[ReleaseEvent]) -> None:
        """Add events already clamped to `now` (see `running_totals`)."""
        if events:
            self.events.extend(events)
            self._dirty = True
            self._curve = None

    def sorted_events(self) -> list[ReleaseEvent]:
        """The events in time order, those of one time in the order they were added.

        Fast path: the few added since the last sort (a start between two sweeps adds one per
        node) are put in place one by one, each after those of its time already there, which is
        where a stable sort puts it (plain: sorting all of them by time,
        `test_fast_paths.py::test_a_profile_sorted_as_it_grows_is_sorted_as_a_whole`)."""
        if self._dirty:
            events = self.events
            if len(events) - self._sorted <= _INSORT_LIMIT:
                added = events[self._sorted :]
                del events[self._sorted :]
                for event in added:
                    insort_right(events, event, key=event_time)
            else:
                events.sort(key=event_time)
            self._dirty = False
            self._sorted = len(events)
        return self.events

    def move(self, end_s: float, allocation: Allocation, events: list[ReleaseEvent]) -> None:
        """Replace the release of `allocation` at `end_s` (as `add` or `extend` put it in) by
        `events` (clamped to `now` here): a victim of this cycle leaves, or runs on smaller, earlier.

        The events sorted so far are searched by time, the few added since then one by one."""
        end_s = max(end_s, self.now)
        unsorted = len(self.events) - self._sorted
        profile = self.sorted_events() if unsorted > _UNSORTED_SEARCH_LIMIT else self.events
        for node_id, gpus in allocation:
            wanted = (end_s, node_id, gpus)
            at = bisect_left(profile, end_s, hi=self._sorted, key=event_time)
            while at < self._sorted and profile[at][0] == end_s and profile[at] != wanted:
                at += 1
            if at < self._sorted and profile[at] == wanted:
                self._sorted -= 1
            elif wanted in profile[self._sorted :]:
                at = profile.index(wanted, self._sorted)
            else:
                continue
            del profile[at]
        self.extend([(max(time_s, self.now), node_id, gpus) for time_s, node_id, gpus in events])
        self._curve = None

    def curve(self, free_now: int) -> tuple[list[float], list[int], list[float]]:
        if self._curve is not None and self._curve[1][0] == free_now:
            return self._curve
        times, levels, areas = [self.now], [free_now], [0.0]
        for end_s, _, gpus in self.sorted_events():
            if end_s > times[-1]:
                areas.append(areas[-1] + levels[-1] * (end_s - times[-1]))
                times.append(end_s)
                levels.append(levels[-1])
            levels[-1] += gpus
        self._curve = (times, levels, areas)
        return self._curve


@dataclass(slots=True)
class Reservation:
    job_id: str
    accelerator: str
    node_ids: tuple[str, ...]
    start_s: float


@dataclass(slots=True)
class ReservationBook:
    """Reservations made this cycle; their nodes' free GPUs are held out of placement."""

    entries: list[Reservation] = field(default_factory=list)
    held_max_free: dict[str, int] = field(default_factory=dict)
    held_whole: dict[str, int] = field(default_factory=dict)

    def add(self, index: CapacityIndex, reservation: Reservation) -> None:
        self.entries.append(reservation)
        for node_id in reservation.node_ids:
            index.hold(node_id)
        self._refresh_counts(index, reservation.accelerator)

    def of(self, accelerator: str) -> list[Reservation]:
        if len(self.entries) == 1:
            return self.entries if self.entries[0].accelerator == accelerator else []
        return [entry for entry in self.entries if entry.accelerator == accelerator]

    def could_fit_with_held(self, pool: AcceleratorPool, gpus: int) -> bool:
        """Cheap necessary condition for a fit when held nodes are counted as free."""
        accelerator = pool.accelerator
        if gpus <= pool.gpus_per_node:
            return max(pool.max_free(), self.held_max_free.get(accelerator, 0)) >= gpus
        whole = pool.whole_count + self.held_whole.get(accelerator, 0)
        return whole >= nodes_needed(gpus, pool.gpus_per_node)

    def release_holds(self, index: CapacityIndex, entries: list[Reservation]) -> None:
        for entry in entries:
            for node_id in entry.node_ids:
                index.unhold(node_id)

    def restore_holds(self, index: CapacityIndex, entries: list[Reservation]) -> None:
        for entry in entries:
            for node_id in entry.node_ids:
                index.hold(node_id)
        for accelerator in sorted({entry.accelerator for entry in entries}):
            self._refresh_counts(index, accelerator)

    def _refresh_counts(self, index: CapacityIndex, accelerator: str) -> None:
        gpn = index.gpus_per_node
        held = [index.held.get(node_id, 0) for entry in self.of(accelerator) for node_id in entry.node_ids]
        self.held_max_free[accelerator] = max(held, default=0)
        self.held_whole[accelerator] = sum(1 for free in held if free >= gpn)


def earliest_start(
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    gpus: int,
    *,
    max_level: str,
    topology_aware: bool,
    until_s: float = math.inf,
) -> EarliestStart | None:
    """The first time along the release profile at which the job fits, and the nodes it gets; None
    also when it fits only after `until_s` (the sweep stops there)."""
    if gpus <= pool.gpus_per_node:
        return _earliest_single(pool, held, profile, gpus, until_s)
    if LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
        return None
    count = nodes_needed(gpus, pool.gpus_per_node)
    return _earliest_gang(pool, held, profile, count, max_level, topology_aware, until_s)


# `earliest_start`, or a stand-in that answers as it does (the cycle's, which keeps its answers while
# the working state stays the same).
EarliestFinder = Callable[..., "EarliestStart | None"]


def spreads_across_pods(pool: AcceleratorPool, job: Job, policy: Policy, level: str) -> bool:
    """Whether `level` (the job's `gang_level`) lets a topology-aware training or batch gang that one
    pod could hold spread across pods."""
    if level != "fleet" or not policy.topology_aware or job.kind == "serving" or job.gpus <= pool.gpus_per_node:
        return False
    return narrowest_level(pool, job.gpus, level) != "fleet"


def within_pod_start(
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    gpus: int,
    earliest: EarliestFinder = earliest_start,
    until_s: float = math.inf,
) -> tuple[float, str] | None:
    """When a gang of `gpus` GPUs starts earliest within one pod along the release profile, and the
    level it gets there (a rack or the pod); `earliest` sweeps the profile, up to `until_s`."""
    found = earliest(pool, held, profile, gpus, max_level="pod", topology_aware=True, until_s=until_s)
    if found is None:
        return None
    return found.start_s, level_of(found.node_ids, pool.node_rack, pool.node_pod)


def sooner_within_pod(job: Job, policy: Policy, now: float, within_pod: tuple[float, str] | None) -> bool:
    """Whether a start within one pod (`within_pod`: when, and at what level) finishes `job` sooner
    than a start across pods now: the start plus the job's runtime estimate slowed by that level's
    topology penalty, against now plus the estimate slowed by the fleet's."""
    if within_pod is None:
        return False
    start_s, level = within_pod
    return start_s + job.estimate_s * policy.penalty(level) < now + job.estimate_s * policy.penalty("fleet")


def within_pod_horizon_s(job: Job, policy: Policy, now: float) -> float:
    """A time after which no start within one pod is `sooner_within_pod` for `job`: the estimate
    slowed by the fleet's penalty, less it slowed by the smallest penalty within a pod, from now (a
    second later, so that rounding cannot cut off a start that is sooner). A sweep for the start
    within one pod may stop there (fast path; plain: sweeping the whole profile,
    `test_fast_paths.py::test_gang_levels_from_kept_patiences_and_debts_are_gang_level`)."""
    narrow = min(policy.penalty(level) for level in LEVELS if LEVEL_RANK[level] < LEVEL_RANK["fleet"])
    return now + job.estimate_s * (policy.penalty("fleet") - narrow) + 1.0


def gang_level_now(
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    job: Job,
    policy: Policy,
    now: float,
    owed: bool = False,
    can_reserve: bool = True,
) -> str:
    """`placement.gang_level`, except that a gang it lets spread across pods is held within one pod
    while a start there, now or when the release profile frees one, finishes it sooner than a start
    across pods now would (`sooner_within_pod`), and while it can reserve that pod (`can_reserve`: a
    reservation is left to make on its accelerator this cycle), so that the pod drains for it: the
    slowest placement is taken only when waiting surely pays."""
    level = gang_level(pool, job, policy, now, owed)
    if can_reserve and spreads_across_pods(pool, job, policy, level):
        if sooner_within_pod(job, policy, now, within_pod_start(pool, held, profile, job.gpus)):
            return "pod"
    return level


def reservation_start(  # noqa: PLR0913 (the last two: what the fast engine's cycle already knows)
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    job: Job,
    policy: Policy,
    now: float,
    owed: bool = False,
    max_level: str | None = None,
    earliest: EarliestFinder = earliest_start,
) -> ReservationStart | None:
    """When and where a blocked job starts earliest along the release profile, and the level it is
    looked for at: the widest it may take now (`gang_level_now`; asked to reserve, so the job can),
    or `max_level` when the caller has found that already; `earliest` sweeps the profile.

    A gang held within one pod because a start there finishes it sooner than one across pods now
    waits for that pod. A gang held to a narrower domain than its own by its patience waits for it
    (the reservation drains the domain that frees first) while that domain frees before its patience
    (`placement.patience_s`; `owed`: its team uses less than its guarantee) runs out. Otherwise it
    is also looked for at its own level, from when its patience runs out, or from now if no domain
    of the narrow level frees within `HORIZON_S` (racks held by serving that never ends, or by
    failed nodes): whichever starts first is its reservation (the start is `now` when the gang fits
    at its own level already and may take it)."""
    if max_level is None:
        max_level = gang_level_now(pool, held, profile, job, policy, now, owed)
    found = earliest(pool, held, profile, job.gpus, max_level=max_level, topology_aware=policy.topology_aware)
    narrow = None if found is None else ReservationStart(found.start_s, found.node_ids, max_level)
    own_level, spread_after_s = job.required_level or "fleet", patience_s(policy, owed, job.requeued_by_failure)
    if spread_after_s is None or LEVEL_RANK[own_level] <= LEVEL_RANK[max_level] or job.gpus <= pool.gpus_per_node:
        return narrow
    if max_level != gang_level(pool, job, policy, now, owed):  # held within one pod
        return narrow
    patience_end_s = job.submit_s + spread_after_s
    if narrow is not None and narrow.start_s <= patience_end_s:
        return narrow
    fit = fit_gang(pool, job.gpus, max_level=own_level)
    if fit is not None:  # it fits wider already: the sweep looks only at later releases
        spread: EarliestStart | None = EarliestStart(now, tuple(node_id for node_id, _ in fit.allocation))
    else:
        spread = earliest(pool, held, profile, job.gpus, max_level=own_level, topology_aware=True)
    if spread is None:
        return narrow
    # No domain of the narrow level frees in view: one frees only beyond the horizon, or none
    # can ever hold the gang (too few healthy nodes in each).
    hopeless = narrow.start_s > now + HORIZON_S if narrow is not None else not fit_domains(pool, job.gpus, max_level)
    start_s = max(spread.start_s, now if hopeless else patience_end_s)
    if narrow is not None and narrow.start_s <= start_s:
        return narrow
    return ReservationStart(start_s, spread.node_ids, own_level)


def fit_domains(pool: AcceleratorPool, gpus: int, level: str) -> bool:
    """Whether some domain of `level` has enough healthy nodes for `gpus` GPUs, when empty."""
    return gpus <= domain_gpus(pool.shape, level)


def _until(events: list[ReleaseEvent], until_s: float) -> int:
    """How many of the sorted `events` come at `until_s` or before."""
    return len(events) if until_s == math.inf else bisect_right(events, until_s, key=event_time)


def _earliest_single(
    pool: AcceleratorPool, held: dict[str, int], profile: ReleaseProfile, gpus: int, until_s: float
) -> EarliestStart | None:
    extra: dict[str, int] = {}
    events = profile.sorted_events()
    touched: list[str] = []
    cut = _until(events, until_s)
    for position, (end_s, node_id, released) in enumerate(islice(events, cut)):
        if node_id in pool.free and node_id not in held:
            extra[node_id] = extra.get(node_id, 0) + released
            touched.append(node_id)
        if position + 1 < cut and events[position + 1][0] == end_s:
            continue
        best: tuple[int, str] | None = None
        for candidate in touched:
            avail = min(pool.usable[candidate], pool.free[candidate] + extra[candidate])
            if avail >= gpus and (best is None or (avail - gpus, candidate) < best):
                best = (avail - gpus, candidate)
        if best is not None:
            return EarliestStart(end_s, (best[1],))
        touched = []
    return None


def _earliest_gang(
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    count: int,
    max_level: str,
    topology_aware: bool,
    until_s: float = math.inf,
) -> EarliestStart | None:
    """The first release time (up to `until_s`) after which `count` whole nodes fit the gang, and
    those nodes.

    One pass over the release events: a node becomes whole once the GPUs released on it cover
    what it lacks; a choice is tried at the end of each release time once enough nodes are whole.
    """
    gpn = pool.gpus_per_node
    free, usable, node_rack, node_pod, whole_by_rack, pod_whole = (
        pool.free,
        pool.usable,
        pool.node_rack,
        pool.node_pod,
        pool.whole_by_rack,
        pool.pod_whole,
    )
    # GPUs each node that could become whole still lacks (`_lacking`); 0 once it is, or when it never
    # can. Fast path: found for a node the first time a release reaches it, so that a sweep that ends
    # after a few release times reads a few nodes, not the whole pool (plain: every node up front).
    lacking: dict[str, int] = {}
    new_whole: dict[str, None] = {}
    rack_gain: dict[str, int] = {}
    pod_gain: dict[str, int] = {}
    # Racks and pods that gained whole nodes and now hold `count` of them, with their gains: the
    # only ones a choice looks at (readiness only grows along the sweep).
    ready_racks: dict[str, int] = {}
    ready_pods: dict[str, int] = {}
    # A choice can only succeed fleet-wide (when allowed) or in a ready rack or pod.
    fleet_wide = LEVEL_RANK[max_level] >= LEVEL_RANK["fleet"]
    pod_wide = LEVEL_RANK[max_level] >= LEVEL_RANK["pod"]
    # Without topology awareness, first fit may also pick a domain that needed no release at all.
    any_domain = fleet_wide or (
        not topology_aware
        and (
            any(len(whole) >= count for whole in whole_by_rack.values())
            or (pod_wide and any(whole >= count for whole in pod_whole.values()))
        )
    )
    at_s: float | None = None
    events = profile.sorted_events()
    for end_s, node_id, released in islice(events, _until(events, until_s)):
        if end_s != at_s:
            if (
                at_s is not None
                and pool.whole_count + len(new_whole) >= count
                and (any_domain or ready_racks or (pod_wide and ready_pods))
            ):
                chosen = _choose_gang_nodes(pool, new_whole, ready_racks, ready_pods, count, max_level, topology_aware)
                if chosen is not None:
                    return EarliestStart(at_s, chosen)
            at_s = end_s
        need = lacking.get(node_id)
        if need is None:
            need = lacking[node_id] = _lacking(free, usable, held, gpn, node_id)
        if not need:
            continue
        need -= released
        lacking[node_id] = need if need > 0 else 0
        if need > 0:
            continue
        new_whole[node_id] = None
        rack = node_rack[node_id]
        gain = rack_gain[rack] = rack_gain.get(rack, 0) + 1
        if len(whole_by_rack[rack]) + gain >= count:
            ready_racks[rack] = gain
        pod = node_pod[node_id]
        gain = pod_gain[pod] = pod_gain.get(pod, 0) + 1
        if pod_whole[pod] + gain >= count:
            ready_pods[pod] = gain
    if at_s is not None and pool.whole_count + len(new_whole) >= count:
        chosen = _choose_gang_nodes(pool, new_whole, ready_racks, ready_pods, count, max_level, topology_aware)
        if chosen is not None:
            return EarliestStart(at_s, chosen)
    return None


def _lacking(free: dict[str, int], usable: dict[str, int], held: dict[str, int], gpn: int, node_id: str) -> int:
    """The GPUs `node_id` lacks to be whole as the sweep begins: 0 unless it is free for placement,
    short of whole and healthy enough to become whole."""
    gpus = free.get(node_id)
    if gpus is None or gpus >= gpn or usable[node_id] < gpn or node_id in held:
        return 0
    return gpn - gpus


def _choose_gang_nodes(
    pool: AcceleratorPool,
    new_whole: dict[str, None],
    rack_gain: dict[str, int],
    pod_gain: dict[str, int],
    count: int,
    max_level: str,
    topology_aware: bool,
) -> tuple[str, ...] | None:
    """Nodes for the gang once `new_whole` have come free: the rack, else the pod, with the least
    to spare, else fleet-wide; `rack_gain` and `pod_gain` need only hold the domains that can."""

    def whole_in(racks: list[str]) -> list[str]:
        nodes = [node_id for rack in racks for node_id in pool.whole_by_rack[rack]]
        chosen = set(racks)
        nodes += [node_id for node_id in new_whole if pool.node_rack[node_id] in chosen]
        return sorted(nodes)

    if not topology_aware:  # first fit in node-id order, within one domain of `max_level`
        every = sorted(list(new_whole) + [n for whole in pool.whole_by_rack.values() for n in whole])
        chosen = first_in_one_domain(every, count, max_level, pool.node_rack, pool.node_pod)
        return None if chosen is None else tuple(chosen)
    racks = sorted(
        (len(pool.whole_by_rack[rack]) + gain - count, rack)
        for rack, gain in rack_gain.items()
        if len(pool.whole_by_rack[rack]) + gain >= count
    )
    if racks:
        return tuple(whole_in([racks[0][1]])[:count])
    if LEVEL_RANK[max_level] >= LEVEL_RANK["pod"]:
        pods = sorted(
            (pool.pod_whole[pod] + gain - count, pod)
            for pod, gain in pod_gain.items()
            if pool.pod_whole[pod] + gain >= count
        )
        if pods:
            return tuple(whole_in(list(pool.racks_of_pod[pods[0][1]]))[:count])
    if LEVEL_RANK[max_level] >= LEVEL_RANK["fleet"]:
        return tuple(whole_in(list(pool.whole_by_rack))[:count])
    return None


def expected_end_s(run: Running, now: float, penalty: float = 1.0) -> float:
    """When a running job is expected to release its GPUs (for reservations and estimates): the end
    of its grace period when it is leaving, else its time limit, else when its remaining work is
    done at its progress rate (its share of its size, slowed by `penalty`, the topology penalty of
    its placement level, as `FleetState` runs it)."""
    if run.grace_until_s is not None:
        return max(now, run.grace_until_s)
    job = run.job
    if job.time_limit_s is not None:
        return max(now, run.start_s + job.time_limit_s)
    if run.release_s is not None:
        return max(now, run.release_s)
    return now + release_after_s(job.duration_s, run.progress_s, job.gpus, run.gpus, penalty)


def worst_runtime_s(job: Job, size: int, penalty: float) -> float:
    """How long a start can hold its GPUs: the time limit, else the slowed-down duration
    (`progress.worst_runtime_s`)."""
    return progress_worst_runtime_s(job.duration_s, job.time_limit_s, job.gpus, size, penalty)


def worst_penalty(policy: Policy, size: int, max_level: str) -> float:
    """The slowest topology penalty a placement of `size` GPUs within `max_level` can get."""
    if size <= policy.gpus_per_node:
        return policy.penalty("node")
    allowed = [level for level in LEVELS if LEVEL_RANK[level] <= LEVEL_RANK[max_level]]
    return max(policy.penalty(level) for level in allowed)

"""Step 6 of the cycle: a reason and an estimated start for every job that did not start.

Estimates are cheap and deterministic, and say what `squeue --start` says of a job in a queue served
in order: when it would start if the jobs ahead of it start first, each holding its GPUs from its
own start until it ends (its time limit, else its duration), as the running jobs release theirs
(`ReleaseProfile`): the first instant, no earlier than the last start ahead, at which its GPUs are
free (`ListSchedule`); a job with a reservation holds its GPUs from the reservation's start and
moves no start. Not the GPU-seconds of the whole queue ahead served before it (a job ahead delays
it only while it holds GPUs, not until all of its work is done), and not before the job's shape
fits (`shape_fits_s`: free GPUs by count are not one node's).

A job its team's guarantee can hold also waits until that guarantee has room for it (the same list
schedule within the guarantee: its team's running work ending, its team's jobs ahead holding theirs):
beyond its guarantee a job runs on capacity other teams may take first or claim back (owners
within their guarantee reclaim loans, teams with more fair share left go first, later arrivals
among them), so its guarantee is the start it can count on; a job larger than its team's guarantee
has only the fleet's list schedule. Jobs that will not start within the horizon hold nothing. Jobs
held back by quota also wait for their own team's running work to end below its limit.

Measured (`benchmarks/sim_quotas.py`, fleetline, load 0.8, exact limits): the 90th percentile of
actual / first estimated wait (`estimate_error_p90`) was 2.00 on Philly (2.38 with checkpoints
every 30 minutes) and 1.84 on ITP with the fluid sweep this replaced (the GPU-seconds of the whole
queue ahead served first), 1.12 (1.07) and 1.07 with these rules; its median 0.19 (0.33) and 0.26
before, 0.11 (0.15) and 0.22 after. Nearly all of the jobs told too early had been borrowers: 84 %
of Philly's that started over 1.5 times later than told were one team's single-GPU jobs, the team
using a median 49 GPUs of its guarantee of 32, each overtaken by hundreds of later arrivals.

An estimate nobody could believe is not given: when nothing in the fleet's foreseeable future
makes room (the job is larger than its team's quota, or than any healthy domain of the required
shape), or the start would lie beyond `ESTIMATE_HORIZON_S`, the status says what the job waits for
instead (`PendingStatus.waits_for`, see `Blockers`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from heapq import heappop, heappush

from .backfill import HORIZON_S, ReleaseProfile, earliest_start, expected_end_s
from .blockers import EndState
from .capacity import AcceleratorPool, Shape, domain_gpus
from .model import LEVEL_RANK, Job
from .placement import fit_gang, nodes_needed
from .plan import (
    REASON_CAPACITY,
    REASON_QUOTA,
    REASON_TOPOLOGY,
    WAITS_DOMAIN,
    WAITS_HARDWARE,
    WAITS_JOB,
    WAITS_QUEUE,
    WAITS_QUOTA,
    WAITS_QUOTA_LIMIT,
    PendingStatus,
    Reserve,
    blocked_status,
    pending_status,
)
from .prepare import Prepared
from .quota import QuotaLedger

Curve = tuple[list[float], list[int], list[float]]
STARTED = "started"  # in a cycle's reasons: the job starts, there is nothing to explain
# Estimates further ahead than this are not shown: the fleet will have changed long before.
ESTIMATE_HORIZON_S = HORIZON_S


def explain_pending(
    queue: list[Job],
    prepared: Prepared,
    reasons: list[str | None],
    estimates: dict[str, float | None],
    elastic: bool,
) -> tuple[PendingStatus, ...]:
    """One `PendingStatus` per job of `queue` that did not start, in queue order, from the cycle's
    working state at its end (`prepared`, as the cycle left it) and its reasons by queue position
    (None: capacity).

    Fast path: one list schedule per accelerator and one per team's guarantee (`ListSchedule`),
    walked forward along the queue since no job starts before the jobs ahead of it, with what each
    size waits for by shape kept per accelerator (`_Curves`); plain: the list schedules' first
    instants per job (`test_fast_paths.py::test_explanations_match_the_plain_per_job_definitions`)."""
    curves = _Curves(prepared, elastic)
    statuses: list[PendingStatus] = []
    append, make = statuses.append, pending_status
    horizon_s = prepared.now + ESTIMATE_HORIZON_S
    blockers = Blockers(prepared, elastic)
    schedules = curves.schedules
    for job, reason in zip(queue, reasons, strict=True):
        if reason is STARTED:
            continue
        job_id, gpus = job.id, job.gpus
        fleet, team = schedules(job)
        reason = REASON_CAPACITY if reason is None else reason
        # The list schedules moved to this job's start (`ListSchedule.start`): taken or undone.
        moved: tuple[ListSchedule, ...] = ()
        if job_id in estimates:
            estimate = estimates[job_id]
        elif fleet is not None:
            estimate, moved = curves.estimate(job, reason, fleet, team)
        else:
            estimate = None
        if estimate is not None and estimate <= horizon_s:
            hold_s = job.estimate_s  # (its time limit, else its duration)
            if moved:
                for schedule in moved:  # (`ListSchedule.take`, inline: once or twice a job)
                    schedule.free -= gpus
                    heappush(schedule.heap, (schedule.clock + hold_s, gpus))
            elif fleet is not None:  # a reservation's start
                fleet.hold(estimate, gpus, hold_s)
                if team is not None:
                    team.hold(estimate, gpus, hold_s)
            append(make(job_id, reason, estimate))
        else:
            for schedule in moved:
                schedule.undo()
            append(blocked_status(job_id, reason, blockers.of(job, reason, estimate)))
    return tuple(statuses)


class ListSchedule:
    """The queue served in order on a capacity that grows as running work ends: free GPUs (`free`,
    of the fleet's accelerator, or of a team's guarantee: its guarantee less what it uses, which may
    be negative), the releases still to come (`times` and `gains`, in time order, from `steps`, and
    `heap`, what the jobs put in hold return, and take from a reservation's start), and the last start so far
    (`clock`: no job starts before the jobs ahead of it).

    `start(gpus)`: the first instant, no earlier than `clock`, at which `gpus` are free, the
    schedule moved there; then `take` (the job holds them from there for its hold time) or `undo`
    (back to before `start`: a job that will not start within the horizon holds nothing). `hold`:
    a job with a reservation holds its GPUs from its reservation's start, moving no start.

    Fast path of its plain definition (`plain_list_start`): the releases applied once each as the
    clock passes them, instead of summed again per job
    (`test_fast_paths.py::test_the_list_schedule_starts_jobs_when_its_plain_definition_does`)."""

    __slots__ = ("bound", "clock", "free", "times", "gains", "at", "heap", "_saved", "_popped")

    def __init__(self, now: float, free: int, steps: Sequence[tuple[float, int]], bound: int) -> None:
        self.bound = bound  # the most it can ever hold (a team's guarantee), for the caller
        self.clock, self.free, self.at = now, free, 0
        # The releases as two lists (times, GPUs): read once per release and job, a pair costs a
        # tuple index each time.
        self.times = [time_s for time_s, _ in steps]
        self.gains = [gpus for _, gpus in steps]
        self.heap: list[tuple[float, int]] = []
        self._saved: tuple[float, int, int] = (now, free, 0)
        self._popped: list[tuple[float, int]] = []

    def start(self, gpus: int) -> float | None:
        clock, free, at, times, heap = self.clock, self.free, self.at, self.times, self.heap
        last = len(times)
        # Every release at or before the clock, for good.
        if at < last and times[at] <= clock:
            gains = self.gains
            while at < last and times[at] <= clock:
                free += gains[at]
                at += 1
        while heap and heap[0][0] <= clock:
            free += heappop(heap)[1]
        self._saved = (clock, free, at)
        if free >= gpus:
            self.free, self.at = free, at
            if self._popped:
                self._popped = []
            return clock
        gains = self.gains
        popped: list[tuple[float, int]] = []
        while free < gpus:
            if at < last:
                time_s = times[at]
                if heap and heap[0][0] < time_s:
                    time_s = heap[0][0]
            elif heap:
                time_s = heap[0][0]
            else:
                self._popped = popped
                self.clock, self.free, self.at = clock, free, at
                return None
            while at < last and times[at] <= time_s:
                free += gains[at]
                at += 1
            while heap and heap[0][0] <= time_s:
                event = heappop(heap)
                popped.append(event)
                free += event[1]
            clock = time_s
        self._popped = popped
        self.clock, self.free, self.at = clock, free, at
        return clock

    def take(self, gpus: int, hold_s: float) -> None:
        self.free -= gpus
        heappush(self.heap, (self.clock + hold_s, gpus))

    def undo(self) -> None:
        self.clock, self.free, self.at = self._saved
        for event in self._popped:
            heappush(self.heap, event)
        self._popped = []

    def hold(self, start_s: float, gpus: int, hold_s: float) -> None:
        heappush(self.heap, (start_s, -gpus))
        heappush(self.heap, (start_s + hold_s, gpus))


def plain_list_start(
    now: float,
    free: int,
    steps: Sequence[tuple[float, int]],
    held: Sequence[tuple[float, float, int, bool]],
    gpus: int,
) -> float | None:
    """`ListSchedule.start` as defined: the first instant, no earlier than `now` nor than the latest
    start of the jobs ahead taken in order, at which `gpus` are free: `free` now, plus the releases
    (`steps`) up to then, less what the jobs ahead hold then (`held`: start, end, GPUs, and whether
    its start was taken in order, else a reservation's). None: never."""
    clock = max([now, *(start_s for start_s, _, _, in_order in held if in_order)])
    instants = {clock}
    instants.update(time_s for time_s, _ in steps if time_s > clock)
    instants.update(at_s for start_s, end_s, _, _ in held for at_s in (start_s, end_s) if at_s > clock)
    for at_s in sorted(instants):
        released = sum(gpus_at for time_s, gpus_at in steps if time_s <= at_s)
        holding = sum(gpus_at for start_s, end_s, gpus_at, _ in held if start_s <= at_s < end_s)
        if free + released - holding >= gpus:
            return at_s
    return None


def fleet_steps(times: Sequence[float], levels: Sequence[int]) -> list[tuple[float, int]]:
    """The releases of a curve of free GPUs (`ReleaseProfile.curve`) as (time, GPUs) steps."""
    return [(times[at], levels[at] - levels[at - 1]) for at in range(1, len(times))]


class _Curves:
    """What `explain_pending` reads per accelerator, made the first time it is asked: the curve of
    free GPUs (`ReleaseProfile.curve`) with the earliest time `gpus` GPUs are free at all by size,
    the sweeps of node shapes, what each size and level lacks, and the list schedules of each
    accelerator and of each team's guarantee on it."""

    __slots__ = (
        "prepared",
        "elastic",
        "free_now",
        "curves",
        "firsts",
        "fleets",
        "teams_of",
        "shape_sweeps",
        "shorts",
        "within",
        "teams",
    )

    def __init__(self, prepared: Prepared, elastic: bool) -> None:
        self.prepared, self.elastic = prepared, elastic
        held = prepared.index.held
        self.free_now = {
            name: pool.total_free + sum(held[node_id] for node_id in held if node_id in pool.free)
            for name, pool in prepared.index.pools.items()
        }
        self.curves: dict[str, Curve] = {}
        self.firsts: dict[str, dict[int, float | None]] = {}
        self.fleets: dict[str, ListSchedule | None] = {}
        self.teams_of: dict[tuple[str, str], ListSchedule | None] = {}
        self.shape_sweeps: dict[str, ShapeSweep] = {}
        self.shorts: dict[tuple[str, int, str], str] = {}  # `_short_of` by (accelerator, size, level): "" fits
        self.within: dict[tuple[str, int, str], float | None] = {}  # `shape_fits_s` by (accelerator, size, level)
        self.teams: dict[tuple[str, str], list[tuple[float, int]]] | None = None

    def schedules(self, job: Job) -> tuple[ListSchedule | None, ListSchedule | None]:
        """The list schedules `job` is estimated on: its accelerator's, and its team's guarantee's
        unless that can never hold it (then it has nothing to count on but the fleet)."""
        accelerator, fleets = job.accelerator, self.fleets
        fleet = fleets[accelerator] if accelerator in fleets else self.fleet(accelerator)
        if fleet is None:
            return None, None
        key, teams = (job.team, accelerator), self.teams_of
        team = teams[key] if key in teams else self.team(*key)
        return fleet, None if team is None or job.gpus > team.bound else team

    def fleet(self, accelerator: str) -> ListSchedule | None:
        """The list schedule of `accelerator` (None: no release profile)."""
        if accelerator in self.fleets:
            return self.fleets[accelerator]
        found = None
        profiles = self.prepared.profiles
        if accelerator in profiles:
            times, levels, _ = curve = profiles[accelerator].curve(self.free_now[accelerator])
            self.curves[accelerator], self.firsts[accelerator] = curve, {}
            found = ListSchedule(self.prepared.now, levels[0], fleet_steps(times, levels), levels[-1])
        self.fleets[accelerator] = found
        return found

    def team(self, team: str, accelerator: str) -> ListSchedule | None:
        """The list schedule of `team`'s guarantee on `accelerator` (None: it has none)."""
        key = (team, accelerator)
        if key in self.teams_of:
            return self.teams_of[key]
        ledger = self.prepared.ledger
        guaranteed = ledger.guaranteed(team, accelerator)
        found = None
        if guaranteed > 0:
            free = guaranteed - ledger.used(team, accelerator)
            found = ListSchedule(self.prepared.now, free, self._team_releases().get(key, []), guaranteed)
        self.teams_of[key] = found
        return found

    def estimate(
        self, job: Job, reason: str, fleet: ListSchedule, team: ListSchedule | None
    ) -> tuple[float | None, tuple[ListSchedule, ...]]:
        """The estimate of a job without a reservation on an accelerator with a release profile, and
        the list schedules moved to its start."""
        accelerator, gpus = job.accelerator, job.gpus
        firsts = self.firsts[accelerator]
        first = firsts[gpus] if gpus in firsts else self.first_free_s(accelerator, gpus)
        if job.required_level is not None and first is not None:
            first = self.within_level(accelerator, gpus, job.required_level, first)
        if first is None:
            return None, ()
        estimate = fleet.start(gpus)
        if estimate is None:
            return None, (fleet,)
        moved: tuple[ListSchedule, ...] = (fleet,)
        if team is not None:
            moved = (fleet, team)
            within = team.start(gpus)
            if within is None:
                return None, moved
            estimate = within if within > estimate else estimate
        estimate = first if first > estimate else estimate
        if reason == REASON_QUOTA:
            return self.quota_estimate(job, estimate), moved
        return estimate, moved

    def first_free_s(self, accelerator: str, gpus: int) -> float | None:
        """When `gpus` GPUs are free at all, and not before they fit by shape (kept per size)."""
        curve, firsts = self.curves[accelerator], self.firsts[accelerator]
        first = None
        if _short_of(self.prepared.index.pools[accelerator].shape, gpus, None) is None:
            first = _first_time(curve, gpus)
            fitted = self._sweep(accelerator).fits_s(gpus, None)
            if first is not None and fitted is not None and fitted > first:
                first = fitted
        firsts[gpus] = first
        return first

    def within_level(self, accelerator: str, gpus: int, level: str, first: float) -> float | None:
        """`first`, or later when `gpus` fit within `level` only later (None: a level no healthy
        domain offers: never)."""
        bounded = (accelerator, gpus, level)
        short = self.shorts.get(bounded)
        if short is None:
            short = self.shorts[bounded] = _short_of(self.prepared.index.pools[accelerator].shape, gpus, level) or ""
            if not short:
                self.within[bounded] = self._sweep(accelerator).fits_s(gpus, level)
        if short:
            return None
        fitted = self.within[bounded]
        return fitted if fitted is not None and fitted > first else first

    def quota_estimate(self, job: Job, estimate: float) -> float | None:
        return _quota_estimate(job, estimate, self.prepared.ledger, self._team_releases(), self.elastic)

    def _team_releases(self) -> dict[tuple[str, str], list[tuple[float, int]]]:
        """Each team's releases (`Prepared.team_releases`) in time order, sorted the first time asked."""
        if self.teams is None:
            self.teams = {key: sorted(ends) for key, ends in self.prepared.team_releases.items()}
        return self.teams

    def _sweep(self, accelerator: str) -> ShapeSweep:
        found = self.shape_sweeps.get(accelerator)
        if found is None:
            prepared = self.prepared
            pool, profile = prepared.index.pools[accelerator], prepared.profiles[accelerator]
            found = self.shape_sweeps[accelerator] = ShapeSweep(pool, prepared.index.held, profile, prepared.now)
        return found


class Blockers:
    """What a job without a believable estimate waits for (the `WAITS_*` forms of `plan`): its
    team's quota limit or running work, the fleet's healthy hardware or domains, the running job
    whose end would make room, else the queue ahead of it. What it reads is found on the first such
    job of a cycle."""

    def __init__(self, prepared: Prepared, elastic: bool) -> None:
        self.prepared, self.elastic = prepared, elastic
        # Per accelerator: the running job (least id) released at each release time.
        self.released: dict[str, dict[float, str]] = {}

    def of(self, job: Job, reason: str, estimate: float | None) -> str:
        ledger, accelerator = self.prepared.ledger, job.accelerator
        if reason == REASON_QUOTA:
            size = job.min_gpus if self.elastic and job.is_elastic and job.min_gpus is not None else job.gpus
            limited = size > ledger.limit(job.team, accelerator)
            return f"{WAITS_QUOTA_LIMIT if limited else WAITS_QUOTA}{job.team}"
        pool = self.prepared.index.pools.get(accelerator)
        short = WAITS_HARDWARE if pool is None else _short_of(pool.shape, job.gpus, job.required_level)
        if short is not None:
            return short
        if estimate is not None:
            released = self.released.get(accelerator)
            if released is None:
                released = self.released[accelerator] = self._released_by(accelerator)
            if estimate in released:
                return f"{WAITS_JOB}{released[estimate]}"
        return WAITS_QUEUE

    def _released_by(self, accelerator: str) -> dict[float, str]:
        prepared = self.prepared
        released: dict[float, str] = {}
        for run in prepared.running:
            if run.job.accelerator == accelerator:
                end_s = expected_end_s(run, prepared.now, prepared.penalty.of(run.allocation))
                if end_s not in released or run.job.id < released[end_s]:
                    released[end_s] = run.job.id
        return released


def _short_of(shape: Shape, gpus: int, level: str | None) -> str | None:
    """`WAITS_HARDWARE` or `WAITS_DOMAIN` when even an empty fleet of today's healthy nodes could
    not hold `gpus` GPUs within `level` (`domain_gpus`), else None."""
    if gpus > domain_gpus(shape, "fleet"):
        return WAITS_HARDWARE
    if level is not None and gpus > domain_gpus(shape, level):
        return f"{WAITS_DOMAIN}{level}"
    return None


def topology_waits(queue: list[Job], reasons: list[str | None]) -> tuple[PendingStatus, ...]:
    """Without explanations: only the jobs waiting on topology, in queue order.

    Fast path: most cycles leave no job waiting on topology, which one C-level search of the
    reasons tells (plain: the pass below, which then finds none)."""
    topology = REASON_TOPOLOGY
    if topology not in reasons:
        return ()
    return tuple(
        pending_status(job.id, topology, None) for job, reason in zip(queue, reasons, strict=True) if reason == topology
    )


def shape_fits_s(
    pool: AcceleratorPool, held: dict[str, int], profile: ReleaseProfile, gpus: int, level: str | None, now: float
) -> float | None:
    """When `gpus` GPUs first fit by shape (one node with room for them, or enough whole nodes
    within `level` for a gang), nodes held for reservations left out: now, or the first release
    time along `profile` after which they do (None: no release in view makes room). Plain: the
    placement and reservation rules (`fit_gang`, `earliest_start`); `ShapeSweep` answers the same
    for every size at once."""
    max_level = level or "fleet"
    if fit_gang(pool, gpus, max_level=max_level) is not None:
        return now
    found = earliest_start(pool, held, profile, gpus, max_level=max_level, topology_aware=True)
    return None if found is None else found.start_s


class ShapeSweep:
    """`shape_fits_s` of one accelerator for every size, from one pass over its release profile:
    when the most room on one node (not held) and the number of whole nodes first grow to each
    value. A gang that must stay within a rack or pod is answered by `shape_fits_s` itself.

    Fast path: the pass goes only as far along the profile as the sizes asked need (a few time
    steps, on a busy fleet, of tens of thousands of release events), one whole time step at a time;
    plain: `shape_fits_s` per size
    (`test_fast_paths.py::test_one_sweep_says_when_each_size_fits_by_shape_as_the_placement_and_reservation_rules_do`).
    The profile must not change while the sweep is asked (explanations read it at the cycle's end)."""

    __slots__ = ("pool", "held", "profile", "now", "rooms", "wholes", "_events", "_next", "_extra", "_room", "_whole")

    def __init__(self, pool: AcceleratorPool, held: dict[str, int], profile: ReleaseProfile, now: float) -> None:
        self.pool, self.held, self.profile, self.now = pool, held, profile, now
        self._room = max((gpus for node_id, gpus in pool.free.items() if node_id not in held), default=0)
        self._whole = pool.whole_count
        # (time, value) each time the most room on one node, or the whole nodes, grow.
        self.rooms: list[tuple[float, int]] = [(now, self._room)]
        self.wholes: list[tuple[float, int]] = [(now, self._whole)]
        self._events = profile.sorted_events()
        self._next = 0  # the first event not swept yet (the first of a time step)
        self._extra: dict[str, int] = {}

    def _sweep_until(self, steps: list[tuple[float, int]], value: int) -> None:
        """Sweep whole time steps until `steps` (`rooms` or `wholes`) reaches `value`, or the end."""
        pool, held, extra, events = self.pool, self.held, self._extra, self._events
        gpn, free, usable = pool.gpus_per_node, pool.free, pool.usable
        room, whole, rooms, wholes = self._room, self._whole, self.rooms, self.wholes
        position, last = self._next, len(events) - 1
        while position <= last and steps[-1][1] < value:
            end_s, node_id, released = events[position]
            if node_id in free and node_id not in held:
                before = min(usable[node_id], free[node_id] + extra.get(node_id, 0))
                extra[node_id] = extra.get(node_id, 0) + released
                after = min(usable[node_id], free[node_id] + extra[node_id])
                if after > room:
                    room = after
                if before < gpn <= after:
                    whole += 1
            position += 1
            if position <= last and events[position][0] == end_s:
                continue
            if room > rooms[-1][1]:
                rooms.append((end_s, room))
            if whole > wholes[-1][1]:
                wholes.append((end_s, whole))
        self._next, self._room, self._whole = position, room, whole

    def fits_s(self, gpus: int, level: str | None) -> float | None:
        pool = self.pool
        if gpus > pool.gpus_per_node and level is not None and LEVEL_RANK[level] < LEVEL_RANK["fleet"]:
            return shape_fits_s(pool, self.held, self.profile, gpus, level, self.now)
        if gpus <= pool.gpus_per_node:
            steps, value = self.rooms, gpus
        else:
            steps, value = self.wholes, nodes_needed(gpus, pool.gpus_per_node)
        if steps[-1][1] < value:
            self._sweep_until(steps, value)
        return next((time_s for time_s, reached in steps if reached >= value), None)


def _first_time(curve: Curve, gpus: int) -> float | None:
    """When `gpus` GPUs are first free at all; None when the accelerator can never hold them."""
    times, levels, _ = curve
    final = levels[-1]
    if gpus > final or final <= 0:
        return None
    return times[bisect_left(levels, gpus)]


def _quota_estimate(
    job: Job,
    estimate: float,
    ledger: QuotaLedger,
    team_releases: dict[tuple[str, str], list[tuple[float, int]]],
    elastic: bool,
) -> float | None:
    """Not before the team's own running work has ended enough to admit the job, after the size its
    team's limit keeps for another job that waits (`QuotaLedger.hold`)."""
    size = job.min_gpus if elastic and job.is_elastic and job.min_gpus is not None else job.gpus
    limit = ledger.limit(job.team, job.accelerator)
    if size > limit:
        return None
    excess = ledger.used(job.team, job.accelerator) + size - limit
    excess += ledger.held_ahead(job.team, job.accelerator, job.id)
    if excess <= 0:
        return estimate
    freed = 0
    for end_s, gpus in team_releases.get((job.team, job.accelerator), []):
        freed += gpus
        if freed >= excess:
            return max(estimate, end_s)
    return None


def end_state_of(prepared: Prepared, actions: Sequence[object], elastic: bool) -> EndState:
    """The fast engine's working state at the end of its cycle, as an `EndState`."""
    free: dict[str, int] = {}
    node_accelerator: dict[str, str] = {}
    node_rack: dict[str, str] = {}
    node_pod: dict[str, str] = {}
    for name, pool in prepared.index.pools.items():
        free.update(pool.free)
        node_accelerator.update(dict.fromkeys(pool.free, name))
        node_rack.update(pool.node_rack)
        node_pod.update(pool.node_pod)
    reserved = {action.job_id: action.node_ids for action in actions if isinstance(action, Reserve)}
    gpus_per_node = prepared.index.gpus_per_node
    held = dict(prepared.index.held)
    return EndState(
        prepared.ledger, free, held, node_accelerator, node_rack, node_pod, gpus_per_node, reserved, elastic
    )

"""Step 6 of the cycle: a reason and an estimated start for every job that did not start.

Estimates are cheap and deterministic: a fluid sweep over each accelerator's release profile,
with the GPU-seconds of the jobs ahead in the queue consumed first (see `ReleaseProfile`), and not
before the job's shape fits (`shape_fits_s`: free GPUs by count are not one node's); jobs that will
not start within the horizon consume nothing. Jobs held back by quota also wait for their own
team's running work to end.

An estimate nobody could believe is not given: when nothing in the fleet's foreseeable future
makes room (the job is larger than its team's quota, or than any healthy domain of the required
shape), or the start would lie beyond `ESTIMATE_HORIZON_S`, the status says what the job waits for
instead (`PendingStatus.waits_for`, see `Blockers`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

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

    Fast path: the estimate is read off one curve per accelerator (`_Curves`), walked forward
    along the queue since the demand ahead only grows, with the state of the accelerator in hand
    in local names (most queues have one); plain: per job
    (`test_fast_paths.py::test_explanations_match_the_plain_per_job_definitions`)."""
    curves = _Curves(prepared, elastic)
    statuses: list[PendingStatus] = []
    append, make = statuses.append, pending_status
    horizon_s = prepared.now + ESTIMATE_HORIZON_S
    blockers = Blockers(prepared, elastic)
    # The accelerator whose curve and queue demand are loaded in locals.
    current: str | None = None
    ahead, walk = 0.0, 0
    times: list[float] | None = None
    levels: list[int] = []
    areas: list[float] = []
    firsts: dict[int, float | None] = {}
    for job, reason in zip(queue, reasons, strict=True):
        if reason is STARTED:
            continue
        job_id, accelerator, gpus = job.id, job.accelerator, job.gpus
        if accelerator != current:
            if current is not None:
                curves.leave(current, ahead, walk)
            current = accelerator
            ahead, walk, (times, levels, areas, firsts) = curves.enter(accelerator)
        reason = REASON_CAPACITY if reason is None else reason
        estimate: float | None = None
        if job_id in estimates:
            estimate = estimates[job_id]
        elif times is not None:
            first = firsts[gpus] if gpus in firsts else curves.first_free_s(accelerator, gpus)
            if job.required_level is not None and first is not None:
                first = curves.within_level(accelerator, gpus, job.required_level, first)
            if first is not None:
                # When the queue ahead's GPU-seconds have been served (the fluid part of the estimate).
                last = len(areas) - 1
                while walk < last and areas[walk + 1] <= ahead:
                    walk += 1
                served = _served_s(times, levels, areas, walk, ahead)
                estimate = served if served > first else first  # (`max(first, served)`, without its call)
                if reason == REASON_QUOTA:
                    estimate = curves.quota_estimate(job, estimate)
        if estimate is not None and estimate <= horizon_s:
            ahead += gpus * job.estimate_s  # (its time limit, else its duration)
            append(make(job_id, reason, estimate))
        else:
            append(blocked_status(job_id, reason, blockers.of(job, reason, estimate)))
    return tuple(statuses)


def _served_s(times: list[float], levels: list[int], areas: list[float], walk: int, ahead: float) -> float:
    """When `ahead` GPU-seconds of the queue ahead have been served along the curve, from the
    point `walk` the walk has reached."""
    at = walk
    while levels[at] == 0:
        at += 1
    over = ahead - areas[at]
    return times[at] + (over if over > 0.0 else 0.0) / levels[at]


class _Curves:
    """What `explain_pending` reads per accelerator, made the first time it is asked: the curve of
    free GPUs (`ReleaseProfile.curve`) with the earliest time `gpus` GPUs are free at all by size,
    the sweeps of node shapes, what each size and level lacks, and the queue demand and walk of
    each accelerator left behind."""

    __slots__ = ("prepared", "elastic", "free_now", "sweeps", "shape_sweeps", "shorts", "within", "saved", "teams")

    def __init__(self, prepared: Prepared, elastic: bool) -> None:
        self.prepared, self.elastic = prepared, elastic
        held = prepared.index.held
        self.free_now = {
            name: pool.total_free + sum(held[node_id] for node_id in held if node_id in pool.free)
            for name, pool in prepared.index.pools.items()
        }
        self.sweeps: dict[str, tuple[list[float] | None, list[int], list[float], dict[int, float | None]]] = {}
        self.shape_sweeps: dict[str, ShapeSweep] = {}
        self.shorts: dict[tuple[str, int, str], str] = {}  # `_short_of` by (accelerator, size, level): "" fits
        self.within: dict[tuple[str, int, str], float | None] = {}  # `shape_fits_s` by (accelerator, size, level)
        self.saved: dict[str, tuple[float, int]] = {}  # the demand ahead and the walk, per accelerator left
        self.teams: dict[tuple[str, str], list[tuple[float, int]]] | None = None

    def enter(
        self, accelerator: str
    ) -> tuple[float, int, tuple[list[float] | None, list[int], list[float], dict[int, float | None]]]:
        """The demand ahead, the walk and the curve of `accelerator` (no curve: no profile)."""
        ahead, walk = self.saved.get(accelerator, (0.0, 0))
        sweep = self.sweeps.get(accelerator)
        if sweep is None:
            profiles = self.prepared.profiles
            if accelerator in profiles:
                sweep = (*profiles[accelerator].curve(self.free_now[accelerator]), {})
            else:
                sweep = (None, [], [], {})
            self.sweeps[accelerator] = sweep
        return ahead, walk, sweep

    def leave(self, accelerator: str, ahead: float, walk: int) -> None:
        self.saved[accelerator] = (ahead, walk)

    def first_free_s(self, accelerator: str, gpus: int) -> float | None:
        """When `gpus` GPUs are free at all, and not before they fit by shape (kept per size)."""
        times, levels, areas, firsts = self.sweeps[accelerator]
        first = None
        if times is not None and _short_of(self.prepared.index.pools[accelerator].shape, gpus, None) is None:
            first = _first_time((times, levels, areas), gpus)
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
        if self.teams is None:
            self.teams = {key: sorted(ends) for key, ends in self.prepared.team_releases.items()}
        return _quota_estimate(job, estimate, self.prepared.ledger, self.teams, self.elastic)

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

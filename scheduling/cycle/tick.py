"""One scheduling cycle over the modelled fleet in the database.

The engine never plans inside a database transaction: however long a plan takes, no session sits
idle in a transaction and the fleet clock's row is locked only while the tick writes.

1. claim the tick (a short transaction): a guarded update of the fleet clock (expected tick,
   fencing token; fleet time moves only when the plan is written, so a tick that dies leaves no
   interval out of the ledger); the backend's fleet (``scheduling.backends``: nothing to do for the modelled
   fleet; on a real cluster its nodes, their states and the incidents of the nodes that died);
   serving deployments reconciled with their demand curves; failures_tick: heartbeats, the seeded
   failure model (settings.FLEET_FAILURES), dead/slow detection and incidents, so this tick's plan
   already reacts
2. load the fleet (a read-only transaction of its own, locking nothing the next leader waits on):
   the state the leader kept from its last tick, reconciled with the database by what changed, or
   rebuilt from it (``scheduling.cycle.kept``); on a real backend, the runs that ended there leave
   the FleetState at their real end (a short fenced transaction)
3. outside any transaction: advance the FleetState to the new fleet time (completions, time
   limits, grace); schedule(snapshot, now, kept=...) -> Plan; FleetState applies it
4. write the plan (a short transaction, fenced: the clock's row locked and the claim re-checked,
   else nothing is written and the next tick plans again): what changed, each job under a guarded
   update of the state and version the tick read, so a row changed meanwhile is skipped and
   planned again next tick, never half-applied; the gangs a failed node slowed or stalled keep the
   progress the engine gave them; the backend carries the plan out (held until commit); the jobs
   left waiting for the first time keep the estimate they were shown (``scheduling.estimates``);
   the usage ledger. After commit, the backend lets what it started run, and the tick publishes to
   the live feed and tells the jobs' submitters (``notices``: one summary per user per tick,
   mails by a worker)

A leader frozen in any of these transactions is ended by PostgreSQL once it has sat idle in it for
``FLEET_CYCLE_IDLE_TIMEOUT_S``, which releases the clock's row to the next leader.

The fleet clock follows wall time × speed. ``FleetClock.wall_updated_at`` is the wall time the
fleet clock has accounted for so far: in steady state the last tick's wall time, and behind it
while the clock catches up after a stall. Each tick accounts for at most ``MAX_WALL_STEP_S`` of
wall time, so a stall (a dead leader, a restarted Redis or database) is caught up over the
following ticks in bounded steps and fleet time loses nothing. Only an outage longer than
``MAX_WALL_BEHIND_S`` loses fleet time: the excess is dropped and logged at WARNING.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from scheduling import engine
from scheduling.backends import backend_get
from scheduling.backends.base import Backend, Observed
from scheduling.cycle.apply import plan_apply
from scheduling.cycle.failures import failures_tick, throttled_progress_write
from scheduling.cycle.kept import fleet_load, kept_fleet_forget, kept_fleet_ticked
from scheduling.cycle.ledger import usage_record
from scheduling.cycle.serving import deployments_reconcile
from scheduling.cycle.snapshot import Loaded
from scheduling.estimates import first_estimates_of, first_estimates_write
from scheduling.live.feed import incidents_publish, tick_publish
from scheduling.live.notices import job_notices_send
from scheduling.models import FleetClock
from scheduling.tick_outcome import AppliedTick

logger = logging.getLogger("fleetline.cycle")

# One tick accounts for at most this much wall time, so catching up after a stall never turns
# into one giant jump of the fleet.
MAX_WALL_STEP_S = 5.0
# The clock catches up at most this much wall time; beyond it (a long outage) the rest is dropped.
MAX_WALL_BEHIND_S = 600.0


@dataclass(frozen=True, slots=True)
class WallStep:
    """How much wall time one tick accounts for, and how much remains owed after it."""

    step_s: float
    behind_s: float
    dropped_s: float
    accounted_to: datetime


def wall_step_for(*, accounted_to: datetime | None, wall_now: datetime) -> WallStep:
    """The clock rule: account for the wall time owed since ``accounted_to`` in steps of at most
    ``MAX_WALL_STEP_S``, owing at most ``MAX_WALL_BEHIND_S``. Never moves backwards (a worker
    whose clock runs behind the last leader's adds nothing)."""
    if accounted_to is None:
        return WallStep(step_s=0.0, behind_s=0.0, dropped_s=0.0, accounted_to=wall_now)
    owed_s = (wall_now - accounted_to).total_seconds()
    if owed_s <= 0.0:
        return WallStep(step_s=0.0, behind_s=0.0, dropped_s=0.0, accounted_to=accounted_to)
    dropped_s = max(0.0, owed_s - MAX_WALL_BEHIND_S)
    step_s = min(MAX_WALL_STEP_S, owed_s - dropped_s)
    if step_s == owed_s:
        # Caught up: land on wall_now exactly rather than on a sum of float seconds.
        return WallStep(step_s=step_s, behind_s=0.0, dropped_s=0.0, accounted_to=wall_now)
    return WallStep(
        step_s=step_s,
        behind_s=owed_s - dropped_s - step_s,
        dropped_s=dropped_s,
        accounted_to=accounted_to + timedelta(seconds=dropped_s + step_s),
    )


@dataclass(frozen=True, slots=True)
class TickResult:
    tick: int
    sim_from_s: float
    sim_to_s: float
    applied: AppliedTick
    timings_ms: dict[str, float]
    token: int
    wall_behind_s: float


class _Stopwatch:
    """Milliseconds spent in each step of a tick, for the benchmark and the logs."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last) * 1000.0
        self._last = now


def clock_get() -> FleetClock:
    clock, _ = FleetClock.objects.get_or_create(pk=1)
    return clock


def _end_if_frozen() -> None:
    """A leader frozen inside its tick keeps the fleet clock's row locked, and the next leader's
    claim would wait behind it for as long as it stays frozen. PostgreSQL ends a session idle in
    its transaction past this timeout, releasing the lock; the frozen leader's writes are rolled
    back with it."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            timeout_ms = int(settings.FLEET_CYCLE_IDLE_TIMEOUT_S * 1000)
            cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = {timeout_ms}")


def _tick_read(
    *,
    backend: Backend,
    clock: FleetClock,
    token: int,
    wall: WallStep,
    wall_now: datetime,
    speed: float,
    sim: tuple[float, float],
) -> tuple[Loaded, Observed] | None:
    """The tick's first, short transaction claims the tick (the fenced update of the fleet clock),
    syncs the backend's fleet and the serving deployments and detects failures. Then the fleet is
    loaded (the kept state reconciled, or rebuilt) in a read-only transaction of its own, which
    locks nothing the next leader waits on, so however long the state takes to build no session
    holds the clock's row meanwhile; on a real backend a short fenced transaction then takes out
    the runs that ended there. None when the claim is refused or fenced out."""
    sim_from, sim_to = sim
    tick = clock.ticks + 1
    with transaction.atomic():
        _end_if_frozen()
        claimed = FleetClock.objects.filter(pk=1, ticks=clock.ticks, leader_token__lt=token).update(
            ticks=F("ticks") + 1, leader_token=token
        )
        if not claimed:
            logger.warning("stale tick refused: token %d lost tick %d to another leader's tick", token, tick)
            return None
        synced = backend.fleet_sync(sim_now_s=sim_to, wall_now=wall.accounted_to)
        deployments_reconcile(sim_now_s=sim_to)
        failed = failures_tick(tick=tick, sim_from_s=sim_from, sim_to_s=sim_to, wall_now=wall_now, speed=speed)
        changed_incidents = tuple(sorted(synced | set(failed.changed_incident_ids)))
        if changed_incidents:
            transaction.on_commit(lambda: incidents_publish(incident_ids=changed_incidents))
    with transaction.atomic():
        _one_snapshot()
        loaded = fleet_load(
            sim_now_s=sim_from, tick=tick, previous=(clock.ticks, clock.leader_token), real_runs=backend.real
        )
    if not backend.real:
        return loaded, Observed()
    with transaction.atomic():
        _end_if_frozen()
        if not _fence_holds(token=token, tick=tick):
            return None
        return loaded, backend.runs_observe(loaded=loaded)


def _one_snapshot() -> None:
    """Read the fleet's tables as of one moment (a repeatable-read, read-only transaction on
    PostgreSQL), when this is the outermost transaction."""
    if connection.vendor == "postgresql" and not connection.savepoint_ids:
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")


def _fence_holds(*, token: int, tick: int) -> bool:
    """In the tick's second transaction: lock the fleet clock's row and check that this leader's
    claim is still the newest (no newer token and no later tick got in while it planned). The
    lock holds off the next leader's claim until this tick's writes commit."""
    now = FleetClock.objects.select_for_update().filter(pk=1).values_list("leader_token", "ticks").first()
    if now != (token, tick):
        logger.warning(
            "tick %d by token %d fenced out before writing its plan: the clock is at tick %s by token %s",
            tick,
            token,
            None if now is None else now[1],
            None if now is None else now[0],
        )
        return False
    return True


def cycle_tick(*, token: int, wall_now: datetime, speed: float | None = None) -> TickResult | None:
    """Run one cycle as the leader holding fencing ``token``. Returns None when another
    leader's tick or a newer token got there first: nothing is written then. A token ticks at
    most once: the claim needs it strictly newer than the last one that ticked."""
    speed = settings.FLEET_CLOCK_SPEED if speed is None else speed
    clock = clock_get()
    if clock.leader_token >= token:
        logger.warning(
            "stale tick refused: token %d is not newer than token %d, which already ticked", token, clock.leader_token
        )
        return None
    wall = wall_step_for(accounted_to=clock.wall_updated_at, wall_now=wall_now)
    if wall.dropped_s > 0.0:
        logger.warning(
            "fleet clock %.0f s of wall time behind after an outage: catching up %.0f s, dropping %.0f s",
            wall.dropped_s + wall.step_s + wall.behind_s,
            wall.step_s + wall.behind_s,
            wall.dropped_s,
        )
    backend = backend_get()
    if backend.real:
        speed = 1.0
    sim_from, sim_to = clock.sim_now_s, clock.sim_now_s + wall.step_s * speed
    watch = _Stopwatch()
    tick = clock.ticks + 1
    try:
        read = _tick_read(
            backend=backend, clock=clock, token=token, wall=wall, wall_now=wall_now, speed=speed, sim=(sim_from, sim_to)
        )
        if read is None:
            return None
        loaded, observed = read
        watch.lap("snapshot")
        # The plan is made outside any transaction: however long it takes, no session sits idle
        # in a transaction and no row is locked meanwhile.
        events = loaded.state.advance(sim_to)
        snapshot = loaded.state.snapshot(sim_to, loaded.teams, loaded.quotas, loaded.policy, loaded.usage)
        plan = engine.schedule(snapshot, sim_to, kept=loaded.state.kept())
        events += loaded.state.apply(plan, sim_to)
        first_estimates = first_estimates_of(statuses=plan.pending, sim_now_s=sim_to)
        watch.lap("engine")
        with transaction.atomic():
            _end_if_frozen()
            if not _fence_holds(token=token, tick=tick):
                kept_fleet_forget()
                return None
            # Fleet time moves with the plan: a tick that dies after its claim, or is fenced out,
            # leaves the clock where the ledger's last sample ends, and the next tick covers both.
            FleetClock.objects.filter(pk=1).update(sim_now_s=sim_to, wall_updated_at=wall.accounted_to)
            applied = plan_apply(loaded=loaded, plan=plan, events=events, sim_now_s=sim_to)
            applied.changes[:0] = observed.changes
            applied.finished[:0] = observed.finished
            backend.plan_carry_out(applied=applied, sim_now_s=sim_to, token=token)
            transaction.on_commit(backend.after_commit)
            throttled_progress_write(loaded=loaded, applied=applied, sim_now_s=sim_to)
            first_estimates_write(first_estimates)
            sample = usage_record(
                loaded=loaded, applied=applied, sim_from_s=sim_from, sim_to_s=sim_to, wall_now=wall_now
            )
            watch.lap("apply")
            transaction.on_commit(
                lambda: tick_publish(sample=sample, applied=applied, plan=plan, jobs=snapshot.pending)
            )
            # Robust: a notice that cannot be written never holds back the tick or its feed.
            transaction.on_commit(lambda: job_notices_send(changes=applied.changes), robust=True)
    except BaseException:
        # The kept state may hold a plan the database never took: the next tick rebuilds.
        kept_fleet_forget()
        raise
    kept_fleet_ticked(loaded=loaded, tick=tick, token=token)
    watch.lap("commit_publish")
    return TickResult(
        tick=tick,
        sim_from_s=sim_from,
        sim_to_s=sim_to,
        applied=applied,
        timings_ms=watch.laps,
        token=token,
        wall_behind_s=wall.behind_s,
    )

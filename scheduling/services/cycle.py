"""One scheduling cycle over the modelled fleet in the database.

1. claim the tick: a guarded update of the fleet clock (expected tick, fencing token)
2. reconcile serving deployments with their demand curves
3. failures_tick: heartbeats, the seeded failure model (settings.FLEET_FAILURES), dead/slow
   detection and incidents, written before the snapshot so this tick's plan already reacts
4. snapshot_build: the fleet, jobs, quotas, policy and usage, in a fixed number of queries
5. advance the engine's FleetState to the new fleet time (completions, time limits, grace)
6. schedule(snapshot, now) -> Plan; FleetState applies it
7. plan_apply: write what changed, each job under a guarded update, each gang in a savepoint
8. record the usage ledger; publish to the live feed after commit
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F

from scheduling import engine
from scheduling.models import FleetClock
from scheduling.services.apply import AppliedTick, plan_apply
from scheduling.services.failures import failures_tick
from scheduling.services.feed import incidents_publish, tick_publish
from scheduling.services.ledger import usage_record
from scheduling.services.serving import deployments_reconcile
from scheduling.services.snapshot import snapshot_build

# After an outage the clock catches up at most this much wall time in one tick, so a long
# pause never turns into one giant jump.
MAX_WALL_STEP_S = 5.0


@dataclass(frozen=True, slots=True)
class TickResult:
    tick: int
    sim_from_s: float
    sim_to_s: float
    applied: AppliedTick
    timings_ms: dict[str, float]


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


def cycle_tick(*, token: int, wall_now: datetime, speed: float | None = None) -> TickResult | None:
    """Run one cycle as the leader holding fencing ``token``. Returns None when another
    leader's tick or a newer token got there first: nothing is written then."""
    speed = settings.FLEET_CLOCK_SPEED if speed is None else speed
    clock = clock_get()
    if clock.leader_token > token:
        return None
    wall_step = 0.0
    if clock.wall_updated_at is not None:
        wall_step = min(MAX_WALL_STEP_S, max(0.0, (wall_now - clock.wall_updated_at).total_seconds()))
    sim_from, sim_to = clock.sim_now_s, clock.sim_now_s + wall_step * speed
    watch = _Stopwatch()
    with transaction.atomic():
        claimed = FleetClock.objects.filter(pk=1, ticks=clock.ticks, leader_token__lte=token).update(
            sim_now_s=sim_to, wall_updated_at=wall_now, ticks=F("ticks") + 1, leader_token=token
        )
        if not claimed:
            return None
        deployments_reconcile(sim_now_s=sim_to)
        failed = failures_tick(
            tick=clock.ticks + 1, sim_from_s=sim_from, sim_to_s=sim_to, wall_now=wall_now, speed=speed
        )
        if failed.changed_incident_ids:
            transaction.on_commit(lambda: incidents_publish(incident_ids=failed.changed_incident_ids))
        loaded = snapshot_build(sim_now_s=sim_from)
        watch.lap("snapshot")
        events = loaded.state.advance(sim_to)
        snapshot = loaded.state.snapshot(sim_to, loaded.teams, loaded.quotas, loaded.policy, loaded.usage)
        plan = engine.schedule(snapshot, sim_to)
        events += loaded.state.apply(plan, sim_to)
        watch.lap("engine")
        applied = plan_apply(loaded=loaded, plan=plan, events=events, sim_now_s=sim_to)
        sample = usage_record(loaded=loaded, applied=applied, sim_from_s=sim_from, sim_to_s=sim_to, wall_now=wall_now)
        watch.lap("apply")
        transaction.on_commit(lambda: tick_publish(sample=sample, applied=applied, pending=plan.pending))
    watch.lap("commit_publish")
    return TickResult(
        tick=clock.ticks + 1, sim_from_s=sim_from, sim_to_s=sim_to, applied=applied, timings_ms=watch.laps
    )

"""The fleet state the leader keeps between its ticks, reconciled with the database by what changed.

Rebuilding the engine's FleetState from every active row is most of a tick at scale, while from
one tick to the next only a few rows change. So the worker that leads keeps the state its last
tick ended in (the plan applied), and its next tick brings it in line with the database by the
rows' versions (every write to a job bumps its version: the tick's own writes, submissions,
cancels, requeues, the backend's records), in a fixed number of queries:

1. the active jobs' ids and versions: a job that left the active states leaves the state; a job
   that is new or whose version moved is taken out and put back from its row, exactly as a fresh
   build puts it in (``snapshot.job_add``);
2. the nodes' health, state and booked GPUs: any node that changed, appeared or went rebuilds
   (a node changes rarely, and a fresh build says what its gangs then do); after the jobs are
   reconciled, the GPUs the state books on each node must be those the database books, or the
   kept state has drifted and is rebuilt;
3. the small tables (teams, quotas, policy, usage) are read whole, as a fresh build does; the
   policy's penalties and half-life and the priority classes shape the state, so a change to
   them rebuilds; the slowed nodes are re-applied (``snapshot.throttles_apply``).

The state is rebuilt from scratch (``snapshot_build``) when this worker did not run the tick
before (a new leader, or another worker ticked in between), when a check above finds drift,
every ``FLEET_CYCLE_REBUILD_EVERY`` ticks, and after any tick that failed or was fenced out.

The kept state is millions of long-lived objects, and CPython's cyclic collector traverses all of
them in each full collection, which the tick's allocations set off once or twice a tick (130-180
ms each at 16,384 nodes: a quarter of a steady tick). So a committed tick ends by collecting what
is not frozen (the objects made since the last tick: the traversal is that short) and freezing
what is left (``gc.freeze``: out of the collector's sight; reference counting still frees it). A
state dropped whole (a rebuild, a failed tick) is unfrozen first, so that the next collection
finds its cycles. That collection traverses the whole process, so a state too small for the
collector to notice (``FLEET_CYCLE_FREEZE_FROM`` nodes and jobs) is not frozen: on a test's
four-node fleet it was 144 ms of every rebuilding tick.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings

from scheduling.convert import job_from_row
from scheduling.cycle.snapshot import (
    Loaded,
    fleet_tables,
    job_add,
    job_rows,
    node_throttles,
    running_allocations,
    snapshot_build,
    throttles_apply,
)
from scheduling.models import Job, Node
from tenants.models import PriorityClass

logger = logging.getLogger("fleetline.cycle")

Shape = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Kept:
    """The state a committed tick ended in, and what it may be reconciled against."""

    loaded: Loaded
    tick: int  # the tick that committed it
    token: int  # the fencing token of that tick
    built_tick: int  # the tick that last rebuilt it from scratch
    shape: Shape


@dataclass(frozen=True, slots=True)
class _InFlight:
    loaded: Loaded
    built_tick: int
    shape: Shape


class _Keeper:
    """One per process: the kept state, and the state of the tick in flight."""

    def __init__(self) -> None:
        self.kept: _Kept | None = None
        self.in_flight: _InFlight | None = None
        self.rebuilds: dict[str, int] = {}
        self.frozen = False  # whether the state kept was frozen (`kept_fleet_ticked`)


_KEEPER = _Keeper()

# Why a tick rebuilt the state from scratch instead of reconciling the kept one.
FIRST = "no kept state on this worker"
LEADER = "another leader ticked since"
EVERY_N = "periodic rebuild"
SHAPE = "the policy or a priority class changed"
NODES = "a node changed"
DRIFT = "drift: the booked GPUs differ from the database's"
CLOCK = "the fleet clock moved apart from the kept state"


def _shape(loaded_policy: Any, real_runs: bool) -> Shape:
    """What the FleetState and its engine jobs are built from beyond the job rows."""
    classes = tuple(PriorityClass.objects.order_by("id").values_list("id", "value", "preemptible", "may_preempt"))
    return (loaded_policy.level_penalty, loaded_policy.fairshare_half_life_s, real_runs, classes)


def fleet_load(*, sim_now_s: float, tick: int, previous: tuple[int, int], real_runs: bool) -> Loaded:
    """The fleet as tick ``tick`` (from fleet time ``sim_now_s``) starts: the kept state reconciled
    when this worker committed the tick before (``previous``: the clock's last tick and its token),
    else a fresh build."""
    kept, _KEEPER.kept = _KEEPER.kept, None
    reason: str | None = None
    loaded: Loaded | None = None
    shape: Shape = ()
    if kept is None:
        reason = FIRST
    elif (kept.tick, kept.token) != previous:
        reason = LEADER
    elif tick - kept.built_tick >= settings.FLEET_CYCLE_REBUILD_EVERY:
        reason = EVERY_N
    else:
        loaded, shape, reason = _reconciled(kept, sim_now_s=sim_now_s, real_runs=real_runs)
    built_tick = kept.built_tick if kept is not None else tick
    if loaded is None:
        _unfreeze()  # the state dropped may hold cycles: the tick's end collects them
        loaded = snapshot_build(sim_now_s=sim_now_s, real_runs=real_runs)
        shape, built_tick = _shape(loaded.policy, real_runs), tick
        _KEEPER.rebuilds[reason or FIRST] = _KEEPER.rebuilds.get(reason or FIRST, 0) + 1
        level = logging.WARNING if reason == DRIFT else logging.DEBUG
        logger.log(level, "tick %d rebuilds the fleet state: %s", tick, reason)
    _KEEPER.in_flight = _InFlight(loaded, built_tick, shape)
    return loaded


def kept_fleet_ticked(*, loaded: Loaded, tick: int, token: int) -> None:
    """Tick ``tick`` by ``token`` committed the plan its state holds: keep that state for the next."""
    flight, _KEEPER.in_flight = _KEEPER.in_flight, None
    if flight is None or flight.loaded is not loaded:
        return
    _KEEPER.kept = _Kept(loaded, tick, token, flight.built_tick, flight.shape)
    state = loaded.state
    if len(loaded.nodes) + len(state.running) + len(state.pending) >= settings.FLEET_CYCLE_FREEZE_FROM:
        gc.collect()
        gc.freeze()
        _KEEPER.frozen = True


def kept_fleet_forget() -> None:
    """Drop the kept state (a tick failed or was fenced out: it may hold what was never written)."""
    _KEEPER.kept = None
    _KEEPER.in_flight = None
    _unfreeze()


def _unfreeze() -> None:
    if _KEEPER.frozen:
        gc.unfreeze()
        _KEEPER.frozen = False


def kept_fleet_rebuilds() -> dict[str, int]:
    """How many times this process rebuilt the state from scratch, by reason."""
    return dict(_KEEPER.rebuilds)


def _reconciled(kept: _Kept, *, sim_now_s: float, real_runs: bool) -> tuple[Loaded | None, Shape, str | None]:
    loaded = kept.loaded
    state = loaded.state
    if state.now != sim_now_s:
        return None, (), CLOCK
    tables = fleet_tables(sim_now_s=sim_now_s)
    shape = _shape(tables.policy, real_runs)
    if shape != kept.shape:
        return None, (), SHAPE
    nodes = list(Node.objects.order_by("id").values_list("id", "healthy_gpus", "state", "allocated_gpus"))
    if len(nodes) != len(state.nodes) or any(_node_changed(state, row) for row in nodes):
        return None, (), NODES
    _jobs_reconcile(loaded, real_runs=real_runs)
    if any(state.node_used[str(node_id)] != booked for node_id, _, _, booked in nodes):
        return None, (), DRIFT
    throttled = node_throttles(sim_from_s=sim_now_s)
    throttles_apply(state, throttled, sim_now_s, lifted=loaded.throttled)
    return (
        replace(
            loaded,
            sim_now_s=sim_now_s,
            teams=tables.teams,
            quotas=tables.quotas,
            policy=tables.policy,
            usage=tables.usage,
            team_usage=tables.team_usage,
            throttled=throttled,
        ),
        shape,
        None,
    )


def _node_changed(state: Any, row: tuple[int, int, str, int]) -> bool:
    node_id, healthy_gpus, node_state, _ = row
    node = state.nodes.get(str(node_id))
    return node is None or node.healthy_gpus != healthy_gpus or node.cordoned != (node_state != Node.State.UP)


def _jobs_reconcile(loaded: Loaded, *, real_runs: bool) -> None:
    """Bring the kept jobs in line with the database by their versions: what left the active
    states leaves the state; what is new or was written since is put back from its row."""
    state, rows, allocations = loaded.state, loaded.jobs, loaded.allocations
    versions = {
        str(job_id): version
        for job_id, version in Job.objects.filter(state__in=Job.ACTIVE_STATES).values_list("id", "version")
    }
    stale = [job_id for job_id, row in rows.items() if versions.get(job_id) != row.version]
    fresh = [
        int(job_id) for job_id, version in versions.items() if job_id not in rows or rows[job_id].version != version
    ]
    for job_id in stale:
        state.withdraw(job_id, state.now)
        del rows[job_id]
        allocations.pop(job_id, None)
    # Jobs the state holds without a row: planned by a tick whose write was turned away.
    for job_id in [job_id for job_id in (*state.running, *state.pending) if job_id not in versions]:
        state.withdraw(job_id, state.now)
    if not fresh:
        return
    fetched = job_rows(ids=fresh)
    fetched_allocations = running_allocations(
        ids=[int(job_id) for job_id, row in fetched.items() if row.state == Job.State.RUNNING]
    )
    for job_id, row in fetched.items():
        allocation = fetched_allocations.get(job_id)
        state.withdraw(job_id, state.now)
        job_add(state, row, job_from_row(row), allocation, real_runs=real_runs)
        rows[job_id] = row
        if allocation:
            allocations[job_id] = allocation

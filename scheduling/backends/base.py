"""The seam between the live cycle and what runs the jobs.

A tick (``scheduling.cycle.tick``) calls its backend at three points, each inside a transaction
that holds the fenced leader's claim of the fleet clock (the claim's own for ``fleet_sync``, and
for the two others a short one that re-checks the claim first); the engine plans between them,
outside any transaction. Every write to a job bumps its version: the leader keeps its fleet state
between ticks and reconciles it by the versions (``scheduling.cycle.kept``):
1. ``fleet_sync`` before failure detection and the snapshot: the nodes as the backend sees them
   (added, removed, up, down, drained), with incidents for the nodes that died;
2. ``runs_observe`` after the snapshot, before planning: the runs that ended on their own (their
   real end, exit code), taken out of the tick's FleetState and written, so the plan reuses their
   GPUs and the ledger charges them to their real end;
3. ``plan_carry_out`` after the plan is written: start what the plan started, signal what it
   preempts, stop what no longer runs. What it does must be idempotent (a retried tick, a new
   leader after a crash) and nothing may run before the tick commits: ``after_commit`` then lets
   it run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from scheduling.tick_outcome import FinishedRun, JobChange

if TYPE_CHECKING:
    from scheduling.cycle.snapshot import Loaded
    from scheduling.tick_outcome import AppliedTick


@dataclass
class Observed:
    """Runs that ended on the backend since the last tick, as the tick must record them."""

    finished: list[FinishedRun] = field(default_factory=list)
    changes: list[JobChange] = field(default_factory=list)


class Backend(Protocol):
    name: str
    # A real backend: fleet time is wall time (speed 1), and runs end when the backend says so,
    # never by the engine's model of their work.
    real: bool

    def fleet_sync(self, *, sim_now_s: float, wall_now: datetime) -> set[int]:
        """Bring the node table in line with the backend; returns the incidents it opened or closed."""
        ...

    def runs_observe(self, *, loaded: Loaded) -> Observed: ...

    def plan_carry_out(self, *, applied: AppliedTick, sim_now_s: float, token: int) -> None: ...

    def after_commit(self) -> None: ...

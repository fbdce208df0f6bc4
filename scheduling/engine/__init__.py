"""Fleetline's pure scheduling core: a frozen `Snapshot` in, a `Plan` out.

No Django, no I/O, no clock, no randomness: the live cycle and the simulator both call
`schedule(snapshot, now, kept=state.kept())` and advance the world with the same `FleetState`
(`kept`: what the state keeps for the engine between cycles; optional). `schedule_reference`
plans the same from the rules stated plainly (slowly), to check the fast path against.
"""

from __future__ import annotations

from .events import Checkpointed, Completed, Event, Evicted, Rejected, Resized, Started, TimedOut, Withdrawn
from .kept import Kept
from .model import Job, Node, Policy, Quota, Running, Snapshot, Team
from .plan import (
    Action,
    Cordon,
    Grow,
    PendingStatus,
    Plan,
    Preempt,
    Requeue,
    Reserve,
    Shrink,
    Start,
)
from .reference import schedule_reference
from .runs import RunView
from .schedule import schedule
from .state import Counters, FleetState

__all__ = [
    "Action",
    "Checkpointed",
    "Completed",
    "Cordon",
    "Counters",
    "Event",
    "Evicted",
    "FleetState",
    "Grow",
    "Job",
    "Kept",
    "Node",
    "PendingStatus",
    "Plan",
    "Policy",
    "Preempt",
    "Quota",
    "Rejected",
    "Requeue",
    "Reserve",
    "Resized",
    "RunView",
    "Running",
    "Shrink",
    "Snapshot",
    "Start",
    "Started",
    "Team",
    "TimedOut",
    "Withdrawn",
    "schedule",
    "schedule_reference",
]

"""What a `FleetState` keeps for the engine between cycles, handed to `schedule` beside a snapshot.

A `Snapshot` is plain data: the fleet as it is. What the fast path keeps from one cycle to the
next is not part of it but a `Kept` its `FleetState` hands out (`FleetState.kept()`) for the
latest snapshot it made, passed as `schedule(snapshot, now, kept=...)`:

- `book`: what the snapshot's running jobs add up to apart from the time (`prepare.RunningBook`),
  read only for the very `running` tuple it was counted for (else the cycle counts it);
- `queue`: the pending jobs in within-team order (`ordering.QueueView`), read only for the very
  `pending` tuple it was taken with and while the queue is unchanged (else the cycle sorts);
- `nodes`: the empty-fleet index and the cordons of the node tuple (`node_cache.NodeCache`), kept
  while the nodes stay the same, one node tuple at a time.

Each part checks by identity that it belongs to the snapshot it is read with, so a `Kept` handed
with another snapshot (a what-if made from the state's by `dataclasses.replace`) only costs the
cycle the work the part saves; it never changes a plan. Without one (`kept=None`) the engine
computes everything from the snapshot. `model` imports none of this (the engine has no circle).
"""

from __future__ import annotations

from dataclasses import dataclass

from .node_cache import NodeCache
from .ordering import QueueView
from .prepare import RunningBook


@dataclass(frozen=True, slots=True)
class Kept:
    """The fast path's state for one snapshot of a `FleetState` (see the module docstring)."""

    book: RunningBook | None = None
    queue: QueueView | None = None
    nodes: NodeCache | None = None

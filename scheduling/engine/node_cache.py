"""What the engine derives from a fleet's nodes alone, kept while the nodes stay the same.

The live loop and the simulator show the engine the same node tuple from one snapshot to the next
while no node changes (`FleetState` rebuilds the tuple only when one does). The empty-fleet index
(`capacity.EmptyFleet`) and the nodes to cordon (`health.cordons_of`) depend on that tuple only, so
a `NodeCache` keeps them for it: the cycle's fixed cost paid once per change of the nodes, not once
per cycle. Fast path (listed in `schedule`'s docstring); plain: built afresh every cycle, as the
engine does when no cache is given (a bare `Snapshot`).

Bound: one node tuple, the latest asked about (held, so that identity means the same nodes), and
per tuple one empty-fleet index (for the latest `gpus_per_node`) and one set of cordons. Owned by
whoever runs the cycles (`FleetState`, through `kept.Kept`), never a module-level cache.
"""

from __future__ import annotations

from .capacity import EmptyFleet
from .health import cordons_of
from .model import Node


class NodeCache:
    """The empty-fleet index and the cordons of the latest node tuple asked about."""

    __slots__ = ("_nodes", "_gpus_per_node", "_fleet", "_cordons")

    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] | None = None
        self._gpus_per_node = 0
        self._fleet: EmptyFleet | None = None
        self._cordons: tuple[tuple[str, str], ...] | None = None

    def _of(self, nodes: tuple[Node, ...]) -> None:
        """Forget what was kept unless it was kept for this very tuple."""
        if nodes is not self._nodes:
            self._nodes, self._fleet, self._cordons = nodes, None, None

    def empty_fleet(self, nodes: tuple[Node, ...], gpus_per_node: int) -> EmptyFleet:
        """`EmptyFleet.of(nodes, gpus_per_node)`, built once per node tuple and node size."""
        self._of(nodes)
        fleet = self._fleet
        if fleet is None or self._gpus_per_node != gpus_per_node:
            fleet = self._fleet = EmptyFleet.of(nodes, gpus_per_node)
            self._gpus_per_node = gpus_per_node
        return fleet

    def cordons(self, nodes: tuple[Node, ...]) -> tuple[tuple[str, str], ...]:
        """`health.cordons_of(nodes)`, found once per node tuple."""
        self._of(nodes)
        cordons = self._cordons
        if cordons is None:
            cordons = self._cordons = cordons_of(nodes)
        return cordons

    @property
    def nodes(self) -> tuple[Node, ...] | None:
        """The node tuple what is kept belongs to (None: nothing kept yet)."""
        return self._nodes

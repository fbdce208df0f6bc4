"""Node health as the cycle sees it: what to cordon and which jobs lost their GPUs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .capacity import CapacityIndex
from .model import Node, Running


@dataclass(frozen=True, slots=True)
class Triage:
    cordon: tuple[tuple[str, str], ...]
    requeue: tuple[tuple[str, str], ...]


def triage_nodes(
    nodes: Iterable[Node],
    running: Iterable[Running],
    used: Mapping[str, int],
    index: CapacityIndex,
) -> Triage:
    """Cordon nodes with no healthy GPU; requeue every job on a node using more GPUs than it has.

    Which job on a degraded node lost the GPU is not known from the snapshot, so all jobs on it
    restart from their checkpoints elsewhere (a gang is only as healthy as its worst member).
    A cordoned node keeps its running jobs; it only takes no new ones.
    """
    cordon = _cordons(nodes)
    healthy = index.healthy
    degraded = {node_id for node_id, gpus in used.items() if gpus > healthy.get(node_id, -1)}
    if not degraded:
        return Triage(cordon, ())
    requeue = tuple(
        sorted(
            (run.job.id, "node-degraded")
            for run in running
            if any(node_id in degraded for node_id, _ in run.allocation)
        )
    )
    return Triage(cordon, requeue)


# Cordons of the last node tuple seen: the live loop and the simulator pass the same tuple object
# while nodes don't change (see `capacity._EMPTY_FLEETS`); keyed by identity, the tuple kept alive.
# Fast path (listed in `schedule`'s docstring); plain: found afresh every cycle.
_CORDONS: dict[int, tuple[Iterable[Node], tuple[tuple[str, str], ...]]] = {}


def _cordons(nodes: Iterable[Node]) -> tuple[tuple[str, str], ...]:
    cached = _CORDONS.get(id(nodes))
    if cached is not None and cached[0] is nodes and isinstance(nodes, tuple):
        return cached[1]
    cordon = tuple(
        sorted((node.id, "no-healthy-gpus") for node in nodes if node.healthy_gpus <= 0 and not node.cordoned)
    )
    if isinstance(nodes, tuple):
        _CORDONS.clear()
        _CORDONS[id(nodes)] = (nodes, cordon)
    return cordon

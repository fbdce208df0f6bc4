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
    cordon = tuple(
        sorted((node.id, "no-healthy-gpus") for node in nodes if node.healthy_gpus <= 0 and not node.cordoned)
    )
    degraded = {node_id for node_id, gpus in used.items() if gpus > _healthy(index, node_id)}
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


def _healthy(index: CapacityIndex, node_id: str) -> int:
    pool = index.pools.get(index.node_accelerator.get(node_id, ""))
    if pool is None:
        return -1
    return pool.healthy[node_id]

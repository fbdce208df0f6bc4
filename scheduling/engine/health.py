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
    cordon: tuple[tuple[str, str], ...] | None = None,
) -> Triage:
    """Cordon nodes with no healthy GPU; requeue every job on a node using more GPUs than it has.

    Which job on a degraded node lost the GPU is not known from the snapshot, so all jobs on it
    restart from their checkpoints elsewhere (a gang is only as healthy as its worst member).
    A cordoned node keeps its running jobs; it only takes no new ones. `cordon`: `cordons_of(nodes)`
    kept by the caller for these very nodes (`node_cache.NodeCache`); None: found from `nodes`.
    """
    if cordon is None:
        cordon = cordons_of(nodes)
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


def cordons_of(nodes: Iterable[Node]) -> tuple[tuple[str, str], ...]:
    """(node id, reason) of each node to cordon: no healthy GPU left and not cordoned yet, by id."""
    return tuple(sorted((node.id, "no-healthy-gpus") for node in nodes if node.healthy_gpus <= 0 and not node.cordoned))

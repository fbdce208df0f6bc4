"""Node health as the cycle sees it: what to cordon and which jobs lost their GPUs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import Node, Running


@dataclass(frozen=True, slots=True)
class Triage:
    cordon: tuple[tuple[str, str], ...]
    requeue: tuple[tuple[str, str], ...]


def triage_nodes(nodes: Iterable[Node], running: Iterable[Running]) -> Triage:
    """Cordon nodes with no healthy GPU; requeue every job on a node using more GPUs than it has.

    Which job on a degraded node lost the GPU is not known from the snapshot, so all jobs on it
    restart from their checkpoints elsewhere (a gang is only as healthy as its worst member).
    """
    by_id = {node.id: node for node in nodes}
    cordon = tuple(
        (node.id, "no-healthy-gpus")
        for node in sorted(by_id.values(), key=lambda n: n.id)
        if node.healthy_gpus <= 0 and not node.cordoned
    )
    used: dict[str, int] = {}
    runs = list(running)
    for run in runs:
        for node_id, gpus in run.allocation:
            used[node_id] = used.get(node_id, 0) + gpus
    degraded = {
        node_id
        for node_id, gpus in used.items()
        if node_id not in by_id or gpus > max(0, min(by_id[node_id].gpus, by_id[node_id].healthy_gpus))
    }
    requeue = tuple(
        sorted(
            (run.job.id, "node-degraded")
            for run in runs
            if degraded and any(node_id in degraded for node_id, _ in run.allocation)
        )
    )
    return Triage(cordon, requeue)

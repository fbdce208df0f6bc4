"""Whether a scheduling cycle could change anything: lets the simulator skip cycles that cannot.

Only used for policies that can neither preempt nor resize (and without hooks): then a cycle can
only start pending jobs, and a job can only start if the free GPUs of its accelerator cover its
(smallest) size, and if they have its shape: one node with that many free GPUs for a job that fits
on a node, enough whole free nodes for a gang. Under strict FIFO (no backfill, submit order, no
fair share, no quotas) only the head of each accelerator's queue can start. All are necessary
conditions, so a skipped cycle is always one whose plan would have started nothing.
"""

from __future__ import annotations

import heapq

from scheduling.engine import FleetState, Job, Policy


class CycleGate:
    def __init__(self, state: FleetState, capacity: dict[str, int], policy: Policy, *, strict_fifo: bool) -> None:
        self.state = state
        self.gpus_per_node = policy.gpus_per_node
        self.node_ids: dict[str, list[str]] = {}
        for node in state.nodes.values():
            self.node_ids.setdefault(node.accelerator, []).append(node.id)
        self.free = dict(capacity)
        self.sizes: dict[str, dict[int, int]] = {}
        self.strict_fifo = strict_fifo and not policy.backfill and not policy.fairshare
        self.strict_fifo = self.strict_fifo and policy.within_team_order == "submit"
        self.heads: dict[str, list[tuple[int, float, str, Job]]] = {}
        self.pending: set[str] = set()
        self.fragmented = False

    def queued(self, job: Job) -> None:
        size = job.min_gpus or job.gpus
        counts = self.sizes.setdefault(job.accelerator, {})
        counts[size] = counts.get(size, 0) + 1
        self.pending.add(job.id)
        if self.strict_fifo:
            heapq.heappush(self.heads.setdefault(job.accelerator, []), (-job.priority, job.submit_s, job.id, job))

    def dequeued(self, job: Job) -> None:
        counts = self.sizes[job.accelerator]
        size = job.min_gpus or job.gpus
        counts[size] -= 1
        if not counts[size]:
            del counts[size]
        self.pending.discard(job.id)

    def allocated(self, accelerator: str, gpus: int) -> None:
        self.free[accelerator] = self.free.get(accelerator, 0) - gpus

    def could_start(self) -> bool:
        """Whether a cycle now could start anything. When not, `fragmented` says whether some job
        it would leave pending fits by count but not by shape (what its plan would have said)."""
        self.fragmented = False
        for accelerator, counts in self.sizes.items():
            if not counts:
                continue
            free = self.free.get(accelerator, 0)
            if self.strict_fifo:
                head = self._head(accelerator)
                sizes = [] if head is None else [head.min_gpus or head.gpus]
            else:
                sizes = list(counts)
            if min(sizes, default=free + 1) <= free:
                if self._has_shape_for(accelerator, sizes):
                    return True
                self.fragmented = True
        return False

    def _has_shape_for(self, accelerator: str, sizes: list[int]) -> bool:
        """Whether a node has room for the smallest single-node size, or enough whole nodes are
        free for the smallest gang (multi-node gangs take whole nodes)."""
        per_node = self.gpus_per_node
        usable, used = self.state.node_usable, self.state.node_used
        free = [usable[node_id] - used[node_id] for node_id in self.node_ids.get(accelerator, ())]
        single = min((size for size in sizes if size <= per_node), default=None)
        if single is not None and max(free, default=0) >= single:
            return True
        gang = min((size for size in sizes if size > per_node), default=None)
        return gang is not None and sum(1 for gpus in free if gpus >= per_node) >= -(-gang // per_node)

    def _head(self, accelerator: str) -> Job | None:
        heap = self.heads.get(accelerator, [])
        while heap and heap[0][2] not in self.pending:
            heapq.heappop(heap)
        return heap[0][3] if heap else None

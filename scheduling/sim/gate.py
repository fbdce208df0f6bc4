"""Whether a scheduling cycle could change anything: lets the simulator skip cycles that cannot.

Only used for policies that can neither preempt nor resize (and without hooks): then a cycle can
only start pending jobs, and a job can only start if the free GPUs of its accelerator cover its
(smallest) size. Under strict FIFO (no backfill, submit order, no fair share, no quotas) only the
head of each accelerator's queue can start. Both tests are necessary conditions computed from
counts, so a skipped cycle is always one whose plan would have started nothing.
"""

from __future__ import annotations

import heapq

from scheduling.engine import Job, Policy


class CycleGate:
    def __init__(self, capacity: dict[str, int], policy: Policy, *, strict_fifo: bool) -> None:
        self.free = dict(capacity)
        self.sizes: dict[str, dict[int, int]] = {}
        self.strict_fifo = strict_fifo and not policy.backfill and not policy.fairshare
        self.strict_fifo = self.strict_fifo and policy.within_team_order == "submit"
        self.heads: dict[str, list[tuple[int, float, str, Job]]] = {}
        self.pending: set[str] = set()

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
        for accelerator, counts in self.sizes.items():
            if not counts:
                continue
            free = self.free.get(accelerator, 0)
            if self.strict_fifo:
                head = self._head(accelerator)
                if head is not None and (head.min_gpus or head.gpus) <= free:
                    return True
            elif min(counts) <= free:
                return True
        return False

    def _head(self, accelerator: str) -> Job | None:
        heap = self.heads.get(accelerator, [])
        while heap and heap[0][2] not in self.pending:
            heapq.heappop(heap)
        return heap[0][3] if heap else None

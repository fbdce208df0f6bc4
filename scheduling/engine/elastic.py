"""Elastic jobs: start smaller when the full size does not fit, grow into idle capacity.

An elastic job runs anywhere in `min_gpus..max_gpus`. When its requested size does not fit it
starts at the largest size that does, quota and a node (or enough whole nodes) allowing; after
everything pending has been considered, idle GPUs that no pending job could use go to running
elastic jobs (highest priority first) up to their `max_gpus`. Shrinking happens in preemption,
where elastic victims give up GPUs first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .capacity import AcceleratorPool, CapacityIndex
from .model import Job, Running
from .plan import Allocation, Grow
from .quota import QuotaLedger


@dataclass(frozen=True, slots=True)
class Growth:
    run: Running
    allocation: Allocation
    added: int


def reduced_sizes(job: Job, pool: AcceleratorPool, room: int | None = None) -> list[int]:
    """Sizes below the requested one worth trying for an elastic job, largest first: for every
    number of nodes it could take, the largest size in `min_gpus..gpus - 1` on that many nodes that
    quota admits (`room`: the most GPUs it admits; None: no bound) and that could fit (enough whole
    nodes; a node with that many free GPUs). Any smaller size on as many nodes fits where these do."""
    if job.min_gpus is None or job.min_gpus >= job.gpus:
        return []
    low, gpn = max(1, job.min_gpus), pool.gpus_per_node
    high = job.gpus - 1 if room is None else min(job.gpus - 1, room)
    sizes: list[int] = []
    for count in range(min(pool.whole_count, -(-high // gpn)), 1, -1):
        size = min(high, count * gpn)
        if size > (count - 1) * gpn and size >= low:
            sizes.append(size)
    single = min(high, gpn, pool.max_free())
    if single >= low:
        sizes.append(single)
    return sizes


def plan_growth(
    runs: Iterable[Running],
    pool: AcceleratorPool,
    ledger: QuotaLedger,
    held: dict[str, int],
) -> list[Growth]:
    """Give idle GPUs of `pool` to elastic jobs, on the nodes they already occupy."""
    growths: list[Growth] = []
    elastic = [run for run in runs if run.job.max_gpus is not None and run.grace_until_s is None]
    for run in sorted(elastic, key=lambda r: (-r.job.priority, r.job.id)):
        room = (run.job.max_gpus or 0) - run.gpus
        if room <= 0 or pool.total_free == 0:
            continue
        added: dict[str, int] = {}
        for node_id, _ in run.allocation:
            if node_id in held or node_id not in pool.free:
                continue
            extra = min(room - sum(added.values()), pool.free[node_id])
            if extra > 0:
                added[node_id] = extra
        total = sum(added.values())
        pinned = not run.job.preemptible
        if total <= 0 or ledger.admit(run.job.team, run.job.accelerator, total, pinned) is None:
            continue
        for node_id, extra in added.items():
            pool.take(node_id, extra)
        ledger.charge(run.job.team, run.job.accelerator, total, pinned)
        allocation = tuple((node_id, gpus + added.get(node_id, 0)) for node_id, gpus in run.allocation)
        growths.append(Growth(run, allocation, total))
    return growths


def grow_action(growth: Growth, ledger: QuotaLedger) -> Grow:
    job = growth.run.job
    borrowing = growth.run.borrowing or ledger.used(job.team, job.accelerator) > ledger.guaranteed(
        job.team, job.accelerator
    )
    return Grow(job.id, growth.allocation, sum(gpus for _, gpus in growth.allocation), borrowing)


def grow_actions(
    index: CapacityIndex,
    running: list[Running],
    picked: set[str],
    waiting: set[str],
    ledger: QuotaLedger,
    elastic: Mapping[str, int] | None = None,
) -> list[Grow]:
    """Step 5 of a cycle: grow elastic jobs on accelerators where nothing pending waits for capacity
    (`waiting`), leaving alone the jobs picked as victims this cycle.

    Fast path: `elastic`, when given, counts per accelerator the runs of `running` that have a
    `max_gpus` and are not leaving (`RunningTotals.elastic`), the only ones `plan_growth` looks at;
    an accelerator without any is passed over without a look at its running jobs. Plain: None,
    every accelerator's runs looked at (a test checks both give the same actions)."""
    actions: list[Grow] = []
    for accelerator, pool in index.pools.items():
        if accelerator in waiting or pool.total_free == 0:
            continue
        if elastic is not None and not elastic.get(accelerator):
            continue
        runs = [run for run in running if run.job.accelerator == accelerator and run.job.id not in picked]
        actions.extend(grow_action(growth, ledger) for growth in plan_growth(runs, pool, ledger, index.held))
    return actions

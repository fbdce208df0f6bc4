"""Gang placement: all or nothing, smallest topology domain first, best fit inside it.

Single-node jobs (gpus <= gpus_per_node) go on exactly one node, packed against fragmentation
(`packing.best_node`): a node that is already in use before a whole one, in the most-used rack that
fits, on the node that leaves the fewest free GPUs behind, so that whole nodes and whole racks stay
free for gangs. Multi-node gangs take ceil(gpus / gpus_per_node) whole nodes (nodes with at least
`gpus_per_node` free GPUs), packed `gpus_per_node` per node with the remainder on the last; the
remainder's unused GPUs stay available to single-node jobs. A gang is placed in one rack if any
rack has enough whole nodes (the one with the fewest left over), else one pod, else the fleet,
never wider than the job's `required_level`. How wide a training or batch gang may go now is
`gang_level`: its narrowest domain until its patience runs out, then its own level; one that would
then start across pods is held within one pod while a start there, now or when the release profile
frees one, finishes it sooner at that level's topology penalty (`backfill.gang_level_now`).

Without topology awareness (the FIFO and EASY baselines) placement is first fit in node-id order,
but a required level still holds: the gang takes the first domain of that level, in node-id order,
to gather enough whole nodes, and a single-node job first fits outside the domains the waiting
gangs with a required level would take (`kept_for_gangs`) when any node outside them has room, so
a small job that goes first does not take the one rack such a gang can start in. Ties are always
broken by id, so the plan never depends on the order the snapshot lists nodes or running jobs in.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice

from .capacity import AcceleratorPool, RacksByWhole, level_of
from .model import LEVEL_RANK, Job, Policy
from .packing import best_node
from .plan import REASON_CAPACITY, REASON_TOPOLOGY, Allocation


@dataclass(frozen=True, slots=True)
class Fit:
    allocation: Allocation
    level: str


def nodes_needed(gpus: int, gpus_per_node: int) -> int:
    return -(-gpus // gpus_per_node)


def could_fit_by_shape(pool: AcceleratorPool, gpus: int) -> bool:
    """A cheap necessary condition for `fit_gang`: enough free GPUs in the right shape."""
    gpn = pool.gpus_per_node
    if gpus <= gpn:
        return pool.max_free() >= gpus
    return pool.whole_count >= nodes_needed(gpus, gpn)


def classify_misfit(pool: AcceleratorPool | None, gpus: int) -> str:
    """Why a job does not fit now: too few free GPUs at all, or free GPUs in the wrong shape."""
    if pool is None or pool.total_free < gpus:
        return REASON_CAPACITY
    return REASON_TOPOLOGY


def fit_gang(
    pool: AcceleratorPool,
    gpus: int,
    *,
    max_level: str = "fleet",
    topology_aware: bool = True,
    kept: Container[str] = frozenset(),
) -> Fit | None:
    """Where `gpus` GPUs fit right now, or None. Never mutates the pool. Without topology awareness
    a single-node job takes a node of `kept` only when no other node has room."""
    if gpus <= 0:
        return None
    if gpus <= pool.gpus_per_node:
        node_id = best_node(pool, gpus) if topology_aware else _first_node(pool, gpus, kept)
        return None if node_id is None else Fit(((node_id, gpus),), "node")
    count = nodes_needed(gpus, pool.gpus_per_node)
    if pool.whole_count < count or LEVEL_RANK[max_level] < LEVEL_RANK["rack"]:
        return None
    if topology_aware:
        node_ids = _whole_nodes_in_smallest_domain(pool, count, max_level)
    else:
        gpn, free = pool.gpus_per_node, pool.free
        whole = (node_id for node_id in pool.order if free[node_id] >= gpn)
        node_ids = first_in_one_domain(whole, count, max_level, pool.node_rack, pool.node_pod)
    if node_ids is None or len(node_ids) < count:
        return None
    level = level_of(node_ids, pool.node_rack, pool.node_pod)
    if LEVEL_RANK[level] > LEVEL_RANK[max_level]:
        return None
    return Fit(pack_whole_nodes(node_ids, gpus, pool.gpus_per_node), level)


def pack_whole_nodes(node_ids: list[str], gpus: int, gpus_per_node: int) -> Allocation:
    allocation: list[tuple[str, int]] = []
    remaining = gpus
    for node_id in node_ids:
        share = min(gpus_per_node, remaining)
        allocation.append((node_id, share))
        remaining -= share
    return tuple(allocation)


def first_in_one_domain(
    node_ids: Iterable[str], count: int, max_level: str, node_rack: Mapping[str, str], node_pod: Mapping[str, str]
) -> list[str] | None:
    """The first `count` of `node_ids` (in their order) that lie in one domain of `max_level`: the
    domain that gathers `count` of them first. None when no domain has that many."""
    if LEVEL_RANK[max_level] >= LEVEL_RANK["fleet"]:
        chosen = list(islice(node_ids, count))
        return chosen if len(chosen) == count else None
    domain_of = node_rack if max_level == "rack" else node_pod
    gathered: dict[str, list[str]] = {}
    for node_id in node_ids:
        members = gathered.setdefault(domain_of[node_id], [])
        members.append(node_id)
        if len(members) == count:
            return members
    return None


def _first_node(pool: AcceleratorPool, gpus: int, kept: Container[str]) -> str | None:
    if pool.max_free() < gpus:
        return None
    free = pool.free
    fallback = None
    for node_id in pool.order:
        if free[node_id] >= gpus:
            if node_id not in kept:
                return node_id
            fallback = fallback or node_id
    return fallback


def kept_for_gangs(pool: AcceleratorPool, gangs: Iterable[Job]) -> frozenset[str]:
    """The whole nodes that the multi-node `gangs` with a required level narrower than the fleet
    would take now, without topology awareness (the first domain of their level, in node-id order,
    that gathers enough of them): what single-node jobs should leave to them."""
    gpn, free = pool.gpus_per_node, pool.free
    whole = [node_id for node_id in pool.order if free[node_id] >= gpn]
    kept: set[str] = set()
    seen: set[tuple[int, str]] = set()
    for gang in gangs:
        level = gang.required_level
        if gang.gpus <= gpn or level not in ("rack", "pod"):
            continue
        shape = (nodes_needed(gang.gpus, gpn), level)
        if shape in seen:  # the same shape finds the same domain
            continue
        seen.add(shape)
        chosen = first_in_one_domain(iter(whole), shape[0], level, pool.node_rack, pool.node_pod)
        kept.update(chosen or ())
    return frozenset(kept)


def smallest_rack(pool: AcceleratorPool, count: int) -> str | None:
    """The rack with at least `count` whole nodes and the fewest beyond them (then the least key).

    Fast path: from the racks kept by their whole nodes (`capacity.RacksByWhole`), built on the
    first call of a cycle (plain: `plain_smallest_rack`, every rack looked at;
    `test_placement.py::test_the_smallest_rack_kept_by_whole_nodes_is_the_one_every_rack_gives`)."""
    if pool.racks_by_whole is None:
        pool.racks_by_whole = RacksByWhole(pool.whole_by_rack, pool.rack_nodes_max)
    return pool.racks_by_whole.fewest(count)


def plain_smallest_rack(pool: AcceleratorPool, count: int) -> str | None:
    best_rack: tuple[int, str] | None = None
    for rack_key, whole in pool.whole_by_rack.items():
        spare = len(whole) - count
        if spare >= 0 and (best_rack is None or (spare, rack_key) < best_rack):
            best_rack = (spare, rack_key)
    return None if best_rack is None else best_rack[1]


def _whole_nodes_in_smallest_domain(pool: AcceleratorPool, count: int, max_level: str) -> list[str] | None:
    rack = smallest_rack(pool, count)
    if rack is not None:
        return list(pool.whole_by_rack[rack])[:count]
    if LEVEL_RANK[max_level] < LEVEL_RANK["pod"]:
        return None
    best_pod: tuple[int, str] | None = None
    for pod, whole_count in pool.pod_whole.items():
        spare = whole_count - count
        if spare >= 0 and (best_pod is None or (spare, pod) < best_pod):
            best_pod = (spare, pod)
    if best_pod is not None:
        return _gather_from_racks(pool, pool.racks_of_pod[best_pod[1]], count)
    if LEVEL_RANK[max_level] < LEVEL_RANK["fleet"]:
        return None
    # Fullest pods first, fullest racks first within each: only the pods the gang reaches are sorted.
    chosen: list[str] = []
    for pod in sorted(pool.pod_whole, key=lambda pod: (-pool.pod_whole[pod], pod)):
        chosen += _take_nodes(pool, _racks_fullest_first(pool, pool.racks_of_pod[pod]), count - len(chosen))
        if len(chosen) == count:
            break
    return chosen


def _racks_fullest_first(pool: AcceleratorPool, racks: tuple[str, ...]) -> list[str]:
    return sorted(racks, key=lambda rack: (-len(pool.whole_by_rack[rack]), rack))


def _gather_from_racks(pool: AcceleratorPool, racks: tuple[str, ...], count: int) -> list[str]:
    # Fullest racks first keeps the gang on as few racks as possible.
    return _take_nodes(pool, _racks_fullest_first(pool, racks), count)


def _take_nodes(pool: AcceleratorPool, racks: list[str], count: int) -> list[str]:
    chosen: list[str] = []
    for rack in racks:
        for node_id in pool.whole_by_rack[rack]:
            chosen.append(node_id)
            if len(chosen) == count:
                return chosen
    return chosen


def gang_level(pool: AcceleratorPool, job: Job, policy: Policy, now: float, owed: bool = False) -> str:
    """The widest level a multi-node gang may be placed at now: its own `required_level`, but, for
    topology-aware policies and training or batch work, no wider than the narrowest domain an
    empty fleet offers its size until it has waited its patience (`patience_s`; `owed`: its team
    uses less than its guarantee), as Slurm's `--switches=count@max-time` waits for a placement on
    few switches before taking any. Serving is latency-sensitive: it takes the first placement it
    can get."""
    level = job.required_level or "fleet"
    spread_after_s = patience_s(policy, owed, job.requeued_by_failure)
    if not policy.topology_aware or job.kind == "serving":  # serving starts where it can: latency first
        return level
    if spread_after_s is not None and now - job.submit_s >= spread_after_s:
        return level
    return narrowest_level(pool, job.gpus, level)


def narrowest_level(pool: AcceleratorPool, gpus: int, level: str) -> str:
    """The narrowest domain an empty fleet offers `gpus` in, no wider than `level`."""
    count = nodes_needed(gpus, pool.gpus_per_node)
    if count <= pool.rack_nodes_max:
        return narrower("rack", level)
    return narrower("pod", level) if count <= pool.pod_nodes_max else level


def patience_s(policy: Policy, owed: bool, failed: bool = False) -> float | None:
    """How long a gang waits for its narrowest domain: `Policy.gang_spread_after_s`, or the lowest of
    it, `Policy.guarantee_spread_after_s` for a gang of a team below its guarantee (`owed`) and
    `Policy.failure_spread_after_s` for a gang a node failure requeued (`failed`) (None: no bound)."""
    bounds = [
        policy.gang_spread_after_s,
        policy.guarantee_spread_after_s if owed else None,
        policy.failure_spread_after_s if failed else None,
    ]
    return min((bound for bound in bounds if bound is not None), default=None)


def narrower(level: str, other: str) -> str:
    return level if LEVEL_RANK[level] <= LEVEL_RANK[other] else other

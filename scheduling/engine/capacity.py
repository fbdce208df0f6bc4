"""A mutable working index of free GPUs, built once per cycle from the frozen snapshot.

Placement must never scan every node for every job, so free capacity is indexed per accelerator:
nodes bucketed by their free GPU count (best fit for single-node jobs in O(gpus_per_node)), and
"whole" nodes (at least `gpus_per_node` free) grouped per rack with per-rack and per-pod counts
(multi-node gangs look at counts, not nodes), and free GPUs per rack (packing single-node jobs
into the most-used rack that fits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from heapq import heapify, heappop, heappush

from .model import Node
from .packing import RackPacking

# The healthy nodes of an accelerator: GPUs per node, the largest node, and how many nodes can be
# whole in the fleet, in its fullest rack and in its fullest pod.
Shape = tuple[int, int, int, int, int]


def domain_gpus(shape: Shape, level: str) -> int:
    """The largest gang an empty fleet of `shape` holds within one domain of `level` (a topology
    level; "fleet": anywhere): one node's GPUs up to the node size planning assumes, or, since a
    larger gang takes whole nodes, the node size times the whole nodes of the domain with the most.

    What could ever run: the submission refuses a gang larger than this at its required level, and
    the explanation says a job waits for hardware or a domain when it is larger (`explain._short_of`)."""
    gpus_per_node, largest, whole, rack_whole, pod_whole = shape
    if level == "node":
        room = min(1, whole)
    else:
        room = rack_whole if level == "rack" else pod_whole if level == "pod" else whole
    return max(min(gpus_per_node, largest), room * gpus_per_node)


class RacksByWhole:
    """The racks of a pool by how many whole nodes each has, to find the rack with the fewest
    whole nodes that still has `count` (and the least key among those) without looking at every
    rack: per count of whole nodes, a heap of rack keys, an entry stale once its rack's count moved
    (left in place, dropped when it comes to the top). Built by the first gang placement of a
    cycle that looks for one (`placement._whole_nodes_in_smallest_domain`), then kept up to date by
    the pool as nodes become whole or stop being whole."""

    __slots__ = ("count", "heaps")

    def __init__(self, whole_by_rack: Mapping[str, Mapping[str, None]], most: int) -> None:
        self.count = {rack: len(whole) for rack, whole in whole_by_rack.items()}
        self.heaps: list[list[str]] = [[] for _ in range(most + 1)]
        for rack, whole in self.count.items():
            self.heaps[whole].append(rack)
        for heap in self.heaps:
            heapify(heap)

    def moved(self, rack: str, whole: int) -> None:
        self.count[rack] = whole
        heappush(self.heaps[whole], rack)

    def fewest(self, count: int) -> str | None:
        """The rack with at least `count` whole nodes, the fewest beyond them, then the least key."""
        counts = self.count
        for whole in range(max(count, 0), len(self.heaps)):
            heap = self.heaps[whole]
            while heap and counts[heap[0]] != whole:
                heappop(heap)
            if heap:
                return heap[0]
        return None


class AcceleratorPool:
    """Free capacity of one accelerator type."""

    __slots__ = (
        "accelerator",
        "gpus_per_node",
        "free",
        "buckets",
        "bucket_keys",
        "total_free",
        "capacity",
        "whole_by_rack",
        "packing",
        "racks_by_whole",
        "rack_usable_max",
        "pod_whole",
        "whole_count",
        "racks_of_pod",
        "order",
        "node_rack",
        "node_pod",
        "usable",
        "healthy",
        "rack_nodes_max",
        "pod_nodes_max",
        "shape",
        "over",
    )

    def __init__(
        self,
        accelerator: str,
        nodes: list[Node],
        used: Mapping[str, int],
        gpus_per_node: int,
    ) -> None:
        self.accelerator = accelerator
        self.gpus_per_node = gpus_per_node
        self.free: dict[str, int] = {}
        top = max([node.usable_gpus for node in nodes] + [gpus_per_node])
        self.bucket_keys: tuple[int, ...] = tuple(range(top, 0, -1))
        self.buckets: dict[int, dict[str, None]] = {key: {} for key in range(top + 1)}
        self.total_free = 0
        self.capacity = 0
        self.whole_by_rack: dict[str, dict[str, None]] = {}
        # Free GPUs per rack and racks ordered by them, built by the first single-node placement
        # of a cycle (see `packing`), then kept up to date here.
        self.packing: RackPacking | None = None
        # Racks by their whole nodes, built by the first gang placement that looks (`RacksByWhole`).
        self.racks_by_whole: RacksByWhole | None = None
        self.pod_whole: dict[str, int] = {}
        self.whole_count = 0
        racks_of_pod: dict[str, list[str]] = {}
        self.node_rack: dict[str, str] = {}
        self.node_pod: dict[str, str] = {}
        self.usable: dict[str, int] = {}
        self.healthy: dict[str, int] = {}
        # GPUs in use beyond what a node may use (`Node.usable_gpus`): the running jobs a cordoned
        # node keeps. Only nodes with some are listed. What leaves such a node gives these back
        # first: a node's free GPUs are what it may use less what is in use there, never below 0.
        self.over: dict[str, int] = {}
        for node in sorted(nodes, key=lambda n: (n.pod, n.rack, n.id)):
            rack_key = node.rack_key
            self.node_rack[node.id] = rack_key
            self.node_pod[node.id] = node.pod
            if rack_key not in self.whole_by_rack:
                self.whole_by_rack[rack_key] = {}
                racks_of_pod.setdefault(node.pod, []).append(rack_key)
                self.pod_whole.setdefault(node.pod, 0)
            self.capacity += node.usable_gpus
            self.usable[node.id] = node.usable_gpus
            self.healthy[node.id] = max(0, min(node.gpus, node.healthy_gpus))
            self.free[node.id] = 0
            self._set(node.id, max(0, node.usable_gpus - used.get(node.id, 0)))
        self.racks_of_pod = {pod: tuple(racks) for pod, racks in racks_of_pod.items()}
        # The most nodes any rack or pod has (whatever their state): what an empty fleet offers.
        per_rack: dict[str, int] = {}
        per_pod: dict[str, int] = {}
        for node_id, rack_key in self.node_rack.items():
            per_rack[rack_key] = per_rack.get(rack_key, 0) + 1
            per_pod[self.node_pod[node_id]] = per_pod.get(self.node_pod[node_id], 0) + 1
        self.rack_nodes_max = max(per_rack.values(), default=0)
        usable_per_rack: dict[str, int] = {}
        # Healthy nodes that can be whole, in the fleet and per rack and pod: what an empty fleet
        # of today's healthy nodes could hold (see `Shape`).
        whole_rack: dict[str, int] = {}
        whole_pod: dict[str, int] = {}
        for node_id, rack_key in self.node_rack.items():
            usable = self.usable[node_id]
            usable_per_rack[rack_key] = usable_per_rack.get(rack_key, 0) + usable
            if usable >= gpus_per_node:
                whole_rack[rack_key] = whole_rack.get(rack_key, 0) + 1
                whole_pod[self.node_pod[node_id]] = whole_pod.get(self.node_pod[node_id], 0) + 1
        self.rack_usable_max = max(usable_per_rack.values(), default=0)
        self.shape: Shape = (
            gpus_per_node,
            max(self.usable.values(), default=0),
            sum(whole_rack.values()),
            max(whole_rack.values(), default=0),
            max(whole_pod.values(), default=0),
        )
        self.pod_nodes_max = max(per_pod.values(), default=0)
        self.order: tuple[str, ...] = tuple(sorted(self.free))

    def clone(self) -> AcceleratorPool:
        """A copy whose mutable parts are independent; topology maps are shared (read-only)."""
        twin = AcceleratorPool.__new__(AcceleratorPool)
        for name in ("accelerator", "gpus_per_node", "bucket_keys", "total_free", "capacity"):
            setattr(twin, name, getattr(self, name))
        for name in ("whole_count", "racks_of_pod", "order", "node_rack", "node_pod", "usable", "healthy"):
            setattr(twin, name, getattr(self, name))
        for name in ("rack_nodes_max", "pod_nodes_max", "rack_usable_max", "shape"):
            setattr(twin, name, getattr(self, name))
        twin.free = dict(self.free)
        twin.buckets = {key: dict(bucket) for key, bucket in self.buckets.items()}
        twin.whole_by_rack = {rack: dict(whole) for rack, whole in self.whole_by_rack.items()}
        twin.packing = None
        twin.racks_by_whole = None
        twin.pod_whole = dict(self.pod_whole)
        twin.over = dict(self.over)
        return twin

    def with_used(self, used: Iterable[tuple[str, int]]) -> AcceleratorPool:
        """Fast path: a clone of this pool (an empty-fleet template, `packing` not built) with `used` GPUs
        (node, GPUs) taken, in that order: the same pool as `clone()` followed by `take(node, gpus)`
        for each (tests check it), in one loop. A node keeps its place in its bucket unless it
        moves; moved nodes enter their new bucket in `used` order."""
        twin = self.clone()
        free, buckets, usable, gpn, over = twin.free, twin.buckets, twin.usable, twin.gpus_per_node, twin.over
        whole_by_rack, pod_whole = twin.whole_by_rack, twin.pod_whole
        node_rack, node_pod = twin.node_rack, twin.node_pod
        total_free, whole_count = twin.total_free, twin.whole_count
        for node_id, gpus in used:
            new_free = usable[node_id] - gpus
            if new_free < 0:
                over[node_id] = -new_free
                new_free = 0
            old = free[node_id]
            if old == new_free:
                continue
            if old > 0:
                del buckets[old][node_id]
            if new_free > 0:
                buckets[new_free][node_id] = None
            free[node_id] = new_free
            total_free += new_free - old
            if (old >= gpn) != (new_free >= gpn):
                rack = whole_by_rack[node_rack[node_id]]
                pod = node_pod[node_id]
                if new_free >= gpn:
                    rack[node_id] = None
                    pod_whole[pod] += 1
                    whole_count += 1
                else:
                    del rack[node_id]
                    pod_whole[pod] -= 1
                    whole_count -= 1
        twin.total_free, twin.whole_count = total_free, whole_count
        return twin

    def _set(self, node_id: str, new_free: int) -> None:
        old = self.free[node_id]
        if old == new_free:
            return
        buckets = self.buckets
        if old > 0:
            del buckets[old][node_id]
        if new_free > 0:
            buckets[new_free][node_id] = None
        self.free[node_id] = new_free
        self.total_free += new_free - old
        if self.packing is not None:
            self.packing.moved(node_id, old, new_free)
        gpn = self.gpus_per_node
        if (old >= gpn) != (new_free >= gpn):
            rack_key = self.node_rack[node_id]
            rack = self.whole_by_rack[rack_key]
            pod = self.node_pod[node_id]
            if new_free >= gpn:
                rack[node_id] = None
                self.pod_whole[pod] += 1
                self.whole_count += 1
            else:
                del rack[node_id]
                self.pod_whole[pod] -= 1
                self.whole_count -= 1
            if self.racks_by_whole is not None:
                self.racks_by_whole.moved(rack_key, len(rack))

    def take(self, node_id: str, gpus: int) -> None:
        """`gpus` more GPUs are in use on `node_id`; those beyond its free ones are counted `over`."""
        free = self.free[node_id]
        if gpus > free:
            self.over[node_id] = self.over.get(node_id, 0) + gpus - free
            gpus = free
        self._set(node_id, free - gpus)

    def give(self, node_id: str, gpus: int) -> None:
        """`gpus` GPUs in use on `node_id` are given back: those in use beyond what the node may use
        first (a cordoned node's: they never come free), the rest come free."""
        over = self.over
        if over and node_id in over:
            beyond = over.pop(node_id)
            if beyond > gpus:
                over[node_id] = beyond - gpus
            gpus = max(0, gpus - beyond)
        self._set(node_id, self.free[node_id] + gpus)

    def max_free(self) -> int:
        buckets = self.buckets
        for key in self.bucket_keys:
            if buckets[key]:
                return key
        return 0


class CapacityIndex:
    """Free GPUs of the whole fleet, one `AcceleratorPool` per accelerator type."""

    __slots__ = ("pools", "node_accelerator", "held", "gpus_per_node", "healthy")

    def __init__(
        self, nodes: tuple[Node, ...], used: Mapping[str, int], gpus_per_node: int, fleet: EmptyFleet | None = None
    ):
        """`fleet`: the empty-fleet index of `nodes` with `gpus_per_node` kept by the caller
        (`node_cache.NodeCache`); None: built from `nodes`."""
        if fleet is None:
            fleet = EmptyFleet.of(nodes, gpus_per_node)
        node_accelerator, templates, healthy = fleet.node_accelerator, fleet.templates, fleet.healthy
        self.node_accelerator = node_accelerator
        # Healthy GPUs per node of the whole fleet (read-only, shared between cycles).
        self.healthy = healthy
        self.gpus_per_node = gpus_per_node
        # Each pool takes its nodes' used GPUs in `used` order (the bucket order depends on it).
        if len(templates) == 1 and all(map(node_accelerator.__contains__, used)):
            ((name, template),) = templates.items()
            self.pools: dict[str, AcceleratorPool] = {name: template.with_used(used.items())}
        else:
            by_accelerator: dict[str, list[tuple[str, int]]] = {name: [] for name in templates}
            for node_id, gpus in used.items():
                accelerator = node_accelerator.get(node_id)
                if accelerator is not None:
                    by_accelerator[accelerator].append((node_id, gpus))
            self.pools = {name: template.with_used(by_accelerator[name]) for name, template in templates.items()}
        # Free GPUs taken out of placement because they are held for a reservation.
        self.held: dict[str, int] = {}

    def usable(self, node_id: str) -> int | None:
        """Healthy GPUs of an uncordoned node (0 when cordoned); None for unknown nodes."""
        accelerator = self.node_accelerator.get(node_id)
        return None if accelerator is None else self.pools[accelerator].usable[node_id]

    def pool(self, accelerator: str) -> AcceleratorPool | None:
        return self.pools.get(accelerator)

    def free(self, node_id: str) -> int:
        return self.pools[self.node_accelerator[node_id]].free.get(node_id, 0)

    def take(self, allocation: Iterable[tuple[str, int]]) -> None:
        for node_id, gpus in allocation:
            self.pools[self.node_accelerator[node_id]].take(node_id, gpus)

    def give(self, allocation: Iterable[tuple[str, int]]) -> None:
        for node_id, gpus in allocation:
            self.pools[self.node_accelerator[node_id]].give(node_id, gpus)

    def hold(self, node_id: str) -> None:
        """Take a node's free GPUs out of placement until `unhold`."""
        free = self.free(node_id)
        self.held[node_id] = self.held.get(node_id, 0) + free
        if free:
            self.take(((node_id, free),))

    def unhold(self, node_id: str) -> None:
        free = self.held.pop(node_id, 0)
        if free:
            self.give(((node_id, free),))


def plain_pools(nodes: tuple[Node, ...], used: Mapping[str, int], gpus_per_node: int) -> dict[str, AcceleratorPool]:
    """The pools of `CapacityIndex(nodes, used, gpus_per_node)` as defined: each empty-fleet pool
    cloned, then each used node's GPUs taken from it, one node at a time in `used` order (the
    index builds the same pools in one loop per pool, `AcceleratorPool.with_used`; tests check it)."""
    fleet = EmptyFleet.of(nodes, gpus_per_node)
    node_accelerator, templates = fleet.node_accelerator, fleet.templates
    pools = {name: template.clone() for name, template in templates.items()}
    for node_id, gpus in used.items():
        accelerator = node_accelerator.get(node_id)
        if accelerator is not None:
            pools[accelerator].take(node_id, gpus)
    return pools


class Topology:
    """Which rack and pod each node of a fleet is in (read-only, shared between cycles)."""

    __slots__ = ("node_rack", "node_pod")

    def __init__(self, node_rack: dict[str, str], node_pod: dict[str, str]) -> None:
        self.node_rack, self.node_pod = node_rack, node_pod

    def level(self, allocation: Iterable[tuple[str, int]]) -> str:
        """The placement level of an allocation (nodes unknown to the fleet count as their own rack)."""
        node_ids = {node_id for node_id, _ in allocation}
        if len(node_ids) <= 1:
            return "node"
        racks = {self.node_rack.get(node_id, node_id) for node_id in node_ids}
        if len(racks) == 1:
            return "rack"
        pods = {self.node_pod.get(node_id, node_id) for node_id in node_ids}
        return "pod" if len(pods) == 1 else "fleet"


def fleet_topology(nodes: tuple[Node, ...], gpus_per_node: int) -> Topology:
    """The topology of `nodes` (built with the empty-fleet index, see `EmptyFleet`)."""
    return EmptyFleet.of(nodes, gpus_per_node).topology


class EmptyFleet:
    """The fleet with nothing running: which accelerator each node has, one empty pool per
    accelerator (the templates each cycle's pools are cloned from), each node's healthy GPUs and
    the topology. Building it is the fixed cost of every cycle; whoever runs cycles on the same
    nodes keeps it (`node_cache.NodeCache`, held by `FleetState`). Read-only once built."""

    __slots__ = ("node_accelerator", "templates", "healthy", "topology")

    def __init__(
        self,
        node_accelerator: dict[str, str],
        templates: dict[str, AcceleratorPool],
        healthy: dict[str, int],
        topology: Topology,
    ) -> None:
        self.node_accelerator, self.templates, self.healthy, self.topology = (
            node_accelerator,
            templates,
            healthy,
            topology,
        )

    @classmethod
    def of(cls, nodes: tuple[Node, ...], gpus_per_node: int) -> EmptyFleet:
        by_accelerator: dict[str, list[Node]] = {}
        node_accelerator: dict[str, str] = {}
        for node in nodes:
            by_accelerator.setdefault(node.accelerator, []).append(node)
            node_accelerator[node.id] = node.accelerator
        templates = {
            accelerator: AcceleratorPool(accelerator, members, {}, gpus_per_node)
            for accelerator, members in sorted(by_accelerator.items())
        }
        healthy = {node_id: pool.healthy[node_id] for pool in templates.values() for node_id in pool.healthy}
        topology = Topology(
            {node_id: rack for pool in templates.values() for node_id, rack in pool.node_rack.items()},
            {node_id: pod for pool in templates.values() for node_id, pod in pool.node_pod.items()},
        )
        return cls(node_accelerator, templates, healthy, topology)


def level_of(node_ids: Iterable[str], node_rack: Mapping[str, str], node_pod: Mapping[str, str]) -> str:
    """The smallest topology domain containing all the given nodes."""
    ids = set(node_ids)
    if len(ids) <= 1:
        return "node"
    if len({node_rack[node_id] for node_id in ids}) == 1:
        return "rack"
    if len({node_pod[node_id] for node_id in ids}) == 1:
        return "pod"
    return "fleet"

"""Fleets and quotas derived from a trace: a fleet sized for an offered load, guarantees by demand.

Used by the benchmarks (`benchmarks/sim_itp.py`, `benchmarks/sim_quotas.py`) to turn a public trace
without a fleet or quotas into a reproducible setting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduling.engine import Quota

from .fleet import DEFAULT_ACCELERATOR, DEFAULT_DEPARTMENT, Fleet, NodeGroup, QuotaSpec
from .trace import TraceJob

GPUS_PER_NODE, NODES_PER_RACK, RACKS_PER_POD = 8, 10, 8


def offered_gpu_s(trace: Sequence[TraceJob]) -> float:
    return sum(job.gpus * job.duration_s for job in trace)


def demand_by_team(trace: Sequence[TraceJob]) -> dict[str, float]:
    """GPU-seconds each team offers, in the order its first job comes."""
    demand: dict[str, float] = {}
    for job in trace:
        demand[job.team] = demand.get(job.team, 0.0) + job.gpus * job.duration_s
    return demand


def fleet_for_load(trace: Sequence[TraceJob], load: float) -> Fleet:
    """The fleet on which `trace` offers about `load`: total GPU-seconds / window / load, rounded up
    to whole nodes of 8 GPUs, shaped into racks of 10 nodes and pods of 8 racks (the last pod and
    rack may be smaller); never smaller than the largest job."""
    window_s = max(1.0, trace[-1].submit_s - trace[0].submit_s)
    nodes = max(1, math.ceil(offered_gpu_s(trace) / window_s / load / GPUS_PER_NODE))
    nodes = max(nodes, -(-max(job.gpus for job in trace) // GPUS_PER_NODE))
    groups: list[NodeGroup] = []
    per_pod = NODES_PER_RACK * RACKS_PER_POD
    full_pods, rest = divmod(nodes, per_pod)
    if full_pods:
        groups.append(NodeGroup(full_pods, RACKS_PER_POD, NODES_PER_RACK, GPUS_PER_NODE))
    full_racks, last = divmod(rest, NODES_PER_RACK)
    if full_racks:
        groups.append(NodeGroup(1, full_racks, NODES_PER_RACK, GPUS_PER_NODE))
    if last:
        groups.append(NodeGroup(1, 1, last, GPUS_PER_NODE))
    return Fleet(tuple(groups))


def quotas_by_demand(
    trace: Sequence[TraceJob], fleet: Fleet, *, guaranteed_share: float = 0.9, accelerator: str = DEFAULT_ACCELERATOR
) -> QuotaSpec:
    """One quota per team: a guarantee proportional to the team's demand (GPU-seconds offered),
    the guarantees adding up to about `guaranteed_share` of the fleet (each rounded down to whole
    GPUs), and borrowing up to the whole fleet (`borrow_limit` = capacity - guarantee). All teams in
    one department, no lend limit."""
    capacity = fleet.capacity_of(accelerator)
    demand = demand_by_team(trace)
    total = sum(demand.values()) or 1.0
    quotas = []
    for team in sorted(demand):
        guaranteed = int(guaranteed_share * capacity * demand[team] / total)
        quotas.append(Quota(team, accelerator, guaranteed, capacity - guaranteed))
    return QuotaSpec(tuple(quotas), tuple((team, DEFAULT_DEPARTMENT) for team in sorted(demand)))

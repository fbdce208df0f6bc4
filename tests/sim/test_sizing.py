"""Benchmark settings derived from a trace: a fleet for an offered load, guarantees by demand."""

from __future__ import annotations

from scheduling.sim.sizing import fleet_for_load, quotas_by_demand
from scheduling.sim.trace import TraceJob

# Over 1,000 s, team a offers 3 x what team b does: 60 GPU-s/s in all.
TRACE = [
    TraceJob("a1", 0.0, 1000.0, 45, "a"),
    TraceJob("b1", 500.0, 1000.0, 15, "b"),
    TraceJob("a2", 1000.0, 1.0, 1, "a"),
]


def test_the_fleet_is_sized_in_whole_nodes_for_the_offered_load() -> None:
    # (45 x 1000 + 15 x 1000 + 1) GPU-s over 1,000 s at load 0.8: 75 GPUs, so 10 nodes of 8.
    fleet = fleet_for_load(TRACE, 0.8)
    assert fleet.capacity_gpus == 80
    assert fleet.describe() == "1x1x10x8:gpu"


def test_guarantees_follow_demand_add_up_to_ninety_percent_and_borrowing_reaches_the_whole_fleet() -> None:
    fleet = fleet_for_load(TRACE, 0.8)
    spec = quotas_by_demand(TRACE, fleet, guaranteed_share=0.9)
    by_team = {quota.team: quota for quota in spec.quotas}
    assert (by_team["a"].guaranteed, by_team["b"].guaranteed) == (54, 17)  # 72 x 45001/60001, 72 x 15000/60001
    assert all(quota.guaranteed + quota.borrow_limit == 80 for quota in spec.quotas)
    assert sum(quota.guaranteed for quota in spec.quotas) <= 0.9 * 80

"""Restore time, computed by hand: the storage burst of every restarting node, the NIC cap, the overhead."""

from __future__ import annotations

import pytest

from scheduling.engine import FleetState, Plan, Preempt, Start
from scheduling.engine.progress import restore_lower_bound_s, restore_time_s
from tests.engine.builders import fleet, job


@pytest.mark.parametrize(
    ("case", "checkpoint_gb", "nodes", "concurrent_gb", "expected_s"),
    [
        # One node, 100 GB: storage could give 50 GB/s but the NIC gives 12.5 -> 8 s, + 30 s overhead.
        ("one node is NIC-bound", 100.0, 1, 0.0, 8.0 + 30.0),
        # 64 nodes read 1,000 GB: NICs could do 800 GB/s, storage only 50 -> 20 s.
        ("many nodes saturate storage", 1000.0, 64, 0.0, 20.0 + 30.0),
        # Two 500 GB jobs restarting at once share the 50 GB/s: 1,000 GB -> 20 s, even for 64 nodes.
        ("concurrent restarts share storage", 500.0, 64, 1000.0, 20.0 + 30.0),
        # 2 nodes, 400 GB: storage 8 s, NICs 400 / 25 = 16 s.
        ("a small gang is NIC-bound", 400.0, 2, 0.0, 16.0 + 30.0),
        ("no checkpoint pays only the overhead", 0.0, 4, 0.0, 30.0),
    ],
)
def test_restore_time_is_the_slower_of_storage_and_nic_plus_the_overhead(
    case: str, checkpoint_gb: float, nodes: int, concurrent_gb: float, expected_s: float
) -> None:
    restore_s = restore_time_s(
        checkpoint_gb=checkpoint_gb,
        nodes=nodes,
        storage_gbps=50.0,
        nic_gbps=12.5,
        overhead_s=30.0,
        concurrent_gb=concurrent_gb,
    )

    assert restore_s == pytest.approx(expected_s), case


def test_restore_never_beats_its_physical_lower_bound() -> None:
    for nodes in (1, 2, 8, 64, 512):
        actual = restore_time_s(checkpoint_gb=800.0, nodes=nodes, storage_gbps=50.0, nic_gbps=12.5, overhead_s=60.0)
        bound = restore_lower_bound_s(checkpoint_gb=800.0, storage_gbps=50.0, overhead_s=60.0)
        assert actual >= bound - 1e-9
    assert restore_lower_bound_s(checkpoint_gb=800.0, storage_gbps=50.0, overhead_s=60.0) == pytest.approx(76.0)


def _restart(state: FleetState, job_id: str, allocation: tuple[tuple[str, int], ...], now: float) -> float:
    (event,) = state.apply(Plan((Start(job_id, allocation, False, "rack"),), ()), now)
    return event.restore_s  # type: ignore[union-attr]


def test_fleet_state_charges_the_overhead_and_the_burst_of_gangs_restarting_together() -> None:
    state = FleetState(fleet("1x1x4x8"), storage_gbps=10.0, nic_gbps=12.5, restart_overhead_s=5.0)
    for job_id in ("a", "b"):
        state.submit(job(job_id, 16, duration_s=1000.0, checkpoint_interval_s=10.0, checkpoint_gb=100.0))
    state.apply(
        Plan(
            (
                Start("a", (("p0-r0-n0", 8), ("p0-r0-n1", 8)), False, "rack"),
                Start("b", (("p0-r0-n2", 8), ("p0-r0-n3", 8)), False, "rack"),
            ),
            (),
        ),
        0.0,
    )
    state.apply(Plan((Preempt("a", "t", 0.0), Preempt("b", "t", 0.0)), ()), 25.0)

    events = state.apply(
        Plan(
            (
                Start("a", (("p0-r0-n0", 8), ("p0-r0-n1", 8)), False, "rack"),
                Start("b", (("p0-r0-n2", 8), ("p0-r0-n3", 8)), False, "rack"),
            ),
            (),
        ),
        30.0,
    )

    # 200 GB through 10 GB/s = 20 s (the NICs alone would take 100 / 25 = 4 s), + 5 s overhead.
    assert [event.restore_s for event in events] == [pytest.approx(25.0), pytest.approx(25.0)]  # type: ignore[union-attr]


def test_without_an_overhead_fleet_state_restores_exactly_as_before() -> None:
    state = FleetState(fleet("1x1x1x8"), storage_gbps=10.0)
    state.submit(job("j", 8, duration_s=100.0, checkpoint_interval_s=10.0, checkpoint_gb=100.0))
    _restart(state, "j", (("p0-r0-n0", 8),), 0.0)
    state.apply(Plan((Preempt("j", "t", 0.0),), ()), 15.0)

    assert _restart(state, "j", (("p0-r0-n0", 8),), 20.0) == pytest.approx(10.0)

"""The cycle's queue-tail shortcuts give exactly the plans of the plain scan (`plain_scan`:
every job goes through admission, the verdict cache, placement, preemption and reservation), so
any difference in actions, reasons or estimates is a bug in a shortcut.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Node, Plan, Policy, Snapshot, schedule
from scheduling.engine.model import Job
from scheduling.engine.plain_scan import schedule_plain_scan
from scheduling.engine.plan import REASON_TOPOLOGY

from .strategies import jobs, snapshots

SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

POLICIES = (
    Policy(),
    Policy.easy(),
    Policy.fifo(),
    Policy(reservation_depth=0),
    Policy(reservation_depth=2, max_preemption_attempts=1),
    Policy(preemption_scan_budget=2, elastic=False),
    Policy(preemption=False, reservation_depth=0, topology_aware=False),
    Policy(backfill=False, preemption=False, elastic=False, fairshare=False, reservation_depth=0),
    Policy(within_team_order="las", max_preemption_attempts=2),
    Policy(queue_order="shortest_limit", max_age_s=8.0),
    Policy(least_borrowed_first=False, max_preemption_attempts=2),
)


@st.composite
def busy_snapshots(draw: st.DrawFn) -> Snapshot:
    """Small fleets with long queues (so accelerators fill up and settle mid-scan) and mixed policies."""
    base = draw(snapshots(draw(st.sampled_from(POLICIES))))
    extra = draw(st.integers(0, 24))
    more = tuple(draw(jobs(f"k{index}", float(draw(st.integers(0, 40))))) for index in range(extra))
    return Snapshot(base.nodes, base.running, base.pending + more, base.teams, base.quotas, base.policy, base.usage)


@SETTINGS
@given(busy_snapshots(), st.floats(0.0, 2000.0))
def test_the_shortcut_scan_plans_exactly_as_the_plain_scan(snapshot: Snapshot, now: float) -> None:
    assert schedule(snapshot, now) == schedule_plain_scan(snapshot, now)


@SETTINGS
@given(busy_snapshots(), st.floats(0.0, 2000.0))
def test_without_explanations_the_actions_and_topology_waits_are_the_same(snapshot: Snapshot, now: float) -> None:
    full: Plan = schedule(snapshot, now)
    lean = schedule(snapshot, now, explain=False)

    assert lean.actions == full.actions
    assert sorted(s.job_id for s in lean.pending) == sorted(
        s.job_id for s in full.pending if s.reason == REASON_TOPOLOGY
    )
    assert all(s.reason == REASON_TOPOLOGY and s.estimated_start_s is None for s in lean.pending)


def test_a_blocked_fifo_head_ends_the_scan_when_nothing_is_explained() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    head = Job("head", "alpha", "training", 0, True, "a100", 16, 100.0, 0.0)
    rest = tuple(Job(f"j{index}", "alpha", "training", 0, True, "a100", 1, 100.0, 1.0 + index) for index in range(50))
    snapshot = Snapshot(nodes, (), (head, *rest), (), (), Policy.fifo(), ())

    full = schedule(snapshot, 0.0)
    lean = schedule(snapshot, 0.0, explain=False)

    assert full.actions == lean.actions == ()
    assert [s.reason for s in full.pending] == ["capacity"] + ["priority"] * 50
    assert lean.pending == ()

"""The fast engine plans what the plain statement of its rules (`engine.reference`) plans.

Both are called through their public entry points on the same snapshots; the whole plan is
compared: every action (starts with their placements and levels, preemptions, shrinks, growth,
reservations, cordons, requeues) and every pending job's reason, estimated start and what it waits
for. No difference is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Job, Node, Plan, Policy, Reserve, Running, Snapshot, Team, schedule, schedule_reference
from scheduling.engine.plan import REASON_CAPACITY, REASON_TOPOLOGY

from .strategies import contested_snapshots, gang_snapshots, snapshots

# Each test a few hundred plans of both engines: well under a minute together.
SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

REFERENCE = Path(__file__).resolve().parents[2] / "scheduling" / "engine" / "reference.py"


def _assert_same_plan(fast: Plan, reference: Plan, explain: bool) -> None:
    assert fast.actions == reference.actions
    if not explain:  # only jobs waiting on topology are listed
        assert fast.pending == reference.pending
        return
    assert [status.job_id for status in fast.pending] == [status.job_id for status in reference.pending]
    for mine, plain in zip(fast.pending, reference.pending, strict=True):
        assert (mine.estimated_start_s, mine.waits_for) == (plain.estimated_start_s, plain.waits_for), mine.job_id
        assert mine.reason == plain.reason, mine.job_id
        assert type(mine) is type(plain)


@SETTINGS
@given(snapshots(), st.floats(0.0, 5000.0), st.booleans())
def test_the_fast_engine_plans_what_the_rules_say(snapshot: Snapshot, now: float, explain: bool) -> None:
    fast = schedule(snapshot, now, explain=explain)

    _assert_same_plan(fast, schedule_reference(snapshot, now, explain=explain), explain)


@SETTINGS
@given(gang_snapshots(), st.floats(0.0, 5000.0), st.booleans())
def test_the_fast_engine_plans_what_the_rules_say_around_running_gangs(
    snapshot: Snapshot, now: float, explain: bool
) -> None:
    fast = schedule(snapshot, now, explain=explain)

    _assert_same_plan(fast, schedule_reference(snapshot, now, explain=explain), explain)


@SETTINGS
@given(contested_snapshots(), st.floats(0.0, 300.0), st.booleans())
def test_the_fast_engine_plans_what_the_rules_say_on_a_contested_fleet(
    snapshot: Snapshot, now: float, explain: bool
) -> None:
    """Degraded nodes, elastic growth and shrinks, evictions that pay, budgets that run out."""
    fast = schedule(snapshot, now, explain=explain)

    _assert_same_plan(fast, schedule_reference(snapshot, now, explain=explain), explain)


def _job(job_id: str, gpus: int, limit_s: float = 100.0) -> Job:
    return Job(job_id, "alpha", "training", 0, True, "a100", gpus, limit_s, 0.0, time_limit_s=limit_s)


def _reserved_head_snapshot() -> Snapshot:
    """Two half-used nodes of one rack (8 GPUs free, none whole) and two 8-GPU jobs under EASY
    backfill: the first reserves n0, whose 4 free GPUs are then held for it."""
    nodes = (Node("n0", "p0", "r0", "a100"), Node("n1", "p0", "r0", "a100"))
    running = (
        Running(_job("r0", 4), (("n0", 4),), 0.0, 50.0, 0.0, False),
        Running(_job("r1", 4, 300.0), (("n1", 4),), 0.0, 10.0, 0.0, False),
    )
    return Snapshot(nodes, running, (_job("j1", 8), _job("j2", 8)), (Team("alpha", "research"),), (), Policy.easy())


def test_the_reference_reserves_for_the_head_and_explains_the_job_behind_it_from_what_is_left() -> None:
    plan = schedule_reference(_reserved_head_snapshot(), 50.0)

    assert [(action.job_id, action.node_ids, action.start_s) for action in plan.of_type(Reserve)] == [
        ("j1", ("n0",), 100.0)
    ]
    head, behind = plan.status_of("j1"), plan.status_of("j2")
    assert head is not None and (head.reason, head.estimated_start_s) == (REASON_TOPOLOGY, 100.0)
    assert behind is not None and behind.reason == REASON_CAPACITY  # 4 GPUs free once n0 is held


def test_a_job_shaped_like_a_reserved_head_is_explained_from_the_state_after_the_reservation() -> None:
    snapshot = _reserved_head_snapshot()

    fast, plain = schedule(snapshot, 50.0), schedule_reference(snapshot, 50.0)

    assert fast.status_of("j2") == plain.status_of("j2")


def test_the_reference_states_the_cycle_itself_rather_than_calling_the_fast_one() -> None:
    """It may use the engine's rule helpers, never the fast cycle, its working index or its caches."""
    tree = ast.parse(REFERENCE.read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}

    assert not modules & {"schedule", "prepare", "explain", "collector"}
    fast_parts = {"schedule", "best_node", "fit_gang", "Victims", "CapacityIndex", "ReservationBook", "Reclaiming"}
    assert not names & fast_parts

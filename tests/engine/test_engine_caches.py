"""What the engine keeps between cycles stays bounded, and forgetting it changes no plan."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Cordon, FleetState, Policy, model, schedule
from scheduling.engine.capacity import EmptyFleet
from scheduling.engine.health import cordons_of
from scheduling.engine.model import Node, Snapshot
from scheduling.engine.node_cache import NodeCache

from .strategies import snapshots

ENGINE = Path(__file__).resolve().parents[2] / "scheduling" / "engine"
SETTINGS = settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_interned_job_shapes_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "SHAPES_KEPT", 8)
    monkeypatch.setattr(model, "_SHAPES", {})
    first = model.Job("j0", "t", "training", 0, True, "a100", 1, 60.0, 0.0)
    for gpus in range(2, 40):
        model.Job(f"j{gpus}", "t", "training", 0, True, "a100", gpus, 60.0, 0.0)
    assert len(model._SHAPES) == 8
    # The oldest shape was forgotten: a new job of it is interned afresh, equal but not the same.
    again = model.Job("k0", "t", "training", 0, True, "a100", 1, 60.0, 0.0)
    assert again.shape == first.shape and again.shape is not first.shape
    assert again.shape is model.Job("k1", "t", "training", 0, True, "a100", 1, 60.0, 0.0).shape


@SETTINGS
@given(snapshots(), st.floats(0.0, 5000.0))
def test_jobs_whose_shape_was_forgotten_plan_as_jobs_of_one_interned_shape(snapshot: Snapshot, now: float) -> None:
    # Half the queue rebuilt after every shape was forgotten: equal shapes of two objects.
    half = len(snapshot.pending) // 2
    model._SHAPES.clear()
    rebuilt = tuple(replace(job) for job in snapshot.pending[half:])
    assert all(new.shape is not old.shape for new, old in zip(rebuilt, snapshot.pending[half:], strict=True))
    mixed = replace(snapshot, pending=snapshot.pending[:half] + rebuilt)
    assert schedule(mixed, now) == schedule(snapshot, now)


def test_no_engine_module_keys_anything_by_object_identity() -> None:
    """What the engine keeps between cycles is owned by whoever runs them (`FleetState`, handing
    out `kept.Kept`), not a module-level cache keyed by `id()` that outlives them."""
    calls = {
        f"{path.name}:{node.lineno}"
        for path in sorted(ENGINE.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
    }
    assert not calls


def _nodes(count: int, *, failed: int | None = None) -> tuple[Node, ...]:
    return tuple(
        Node(f"n{index}", "p0", "r0", "a100", healthy_gpus=0 if index == failed else 8) for index in range(count)
    )


def test_the_node_cache_keeps_one_node_tuple_and_builds_as_from_scratch() -> None:
    cache, first, second = NodeCache(), _nodes(4), _nodes(4, failed=2)
    fleet = cache.empty_fleet(first, 8)
    assert cache.empty_fleet(first, 8) is fleet and cache.cordons(first) == () == cordons_of(first)
    assert cache.cordons(second) == (("n2", "no-healthy-gpus"),) == cordons_of(second)
    assert cache.nodes is second  # the first tuple is forgotten: one tuple kept at a time
    again = cache.empty_fleet(first, 8)
    assert again is not fleet and again.healthy == EmptyFleet.of(first, 8).healthy
    assert cache.empty_fleet(first, 4) is not again  # another node size: built again
    assert cache.empty_fleet(first, 4).templates["a100"].gpus_per_node == 4


def test_a_fleet_state_s_kept_state_follows_its_nodes_and_belongs_to_its_latest_snapshot() -> None:
    state = FleetState(_nodes(2))
    before = state.snapshot(0.0, (), (), Policy())
    assert schedule(before, 0.0, kept=state.kept()) == schedule(before, 0.0)
    assert state.kept().nodes is not None and state.kept().nodes.nodes is before.nodes
    state.fail_node("n1", 10.0)
    after = state.snapshot(10.0, (), (), Policy())
    assert after.nodes is not before.nodes
    plan = schedule(after, 10.0, kept=state.kept())
    assert plan == schedule(after, 10.0)
    assert [action.node_id for action in plan.actions if isinstance(action, Cordon)] == ["n1"]
    # A snapshot of the state compares without what the state keeps beside it.
    assert state.snapshot(10.0, (), (), Policy()) == after

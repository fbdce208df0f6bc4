"""What the engine keeps between cycles stays bounded, and forgetting it changes no plan."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import model, schedule
from scheduling.engine.model import Snapshot

from .strategies import snapshots

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
    mixed = replace(snapshot, pending=snapshot.pending[:half] + rebuilt, queue=None)
    assert schedule(mixed, now) == schedule(replace(snapshot, queue=None), now)

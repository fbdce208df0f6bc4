"""A cycle runs with the cyclic collector paused, which is only sound because it makes no cycles."""

from __future__ import annotations

import gc

import pytest
from hypothesis import HealthCheck, given, settings

from scheduling.engine import Policy, Snapshot, schedule
from scheduling.engine.collector import collector_paused

from .strategies import snapshots


@pytest.fixture
def collector_off() -> object:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(snapshot=snapshots(), fifo=snapshots(Policy.fifo()))
def test_a_cycle_leaves_no_cyclic_garbage_behind(collector_off: object, snapshot: Snapshot, fifo: Snapshot) -> None:
    # With the collector off, everything the cycles allocate stays in the youngest generation.
    gc.collect(0)
    for each in (snapshot, fifo):
        schedule(each, 100.0)
        schedule(each, 100.0, explain=False)

    assert gc.collect(0) == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pause_restores_the_collector_as_it_found_it(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("boom")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()

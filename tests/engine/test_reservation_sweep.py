"""The reservation sweep for gangs finds exactly what the plain per-event definition finds."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Snapshot
from scheduling.engine.backfill import ReleaseProfile, _choose_gang_nodes, _earliest_gang
from scheduling.engine.capacity import AcceleratorPool
from scheduling.engine.prepare import prepare_cycle

from .strategies import snapshots


def _plain_earliest_gang(
    pool: AcceleratorPool,
    held: dict[str, int],
    profile: ReleaseProfile,
    count: int,
    max_level: str,
    topology_aware: bool,
) -> tuple[float, tuple[str, ...]] | None:
    """After each release time, count the nodes whose free GPUs (capped by what they may use) have
    reached a whole node, and try a choice once there are enough."""
    gpn = pool.gpus_per_node
    extra: dict[str, int] = {}
    new_whole: dict[str, None] = {}
    rack_gain: dict[str, int] = {}
    pod_gain: dict[str, int] = {}
    events = profile.sorted_events()
    for position, (end_s, node_id, released) in enumerate(events):
        if node_id in pool.free and node_id not in held:
            before = min(pool.usable[node_id], pool.free[node_id] + extra.get(node_id, 0))
            extra[node_id] = extra.get(node_id, 0) + released
            after = min(pool.usable[node_id], pool.free[node_id] + extra[node_id])
            if before < gpn <= after:
                new_whole[node_id] = None
                rack_gain[pool.node_rack[node_id]] = rack_gain.get(pool.node_rack[node_id], 0) + 1
                pod_gain[pool.node_pod[node_id]] = pod_gain.get(pool.node_pod[node_id], 0) + 1
        if position + 1 < len(events) and events[position + 1][0] == end_s:
            continue
        if pool.whole_count + len(new_whole) < count:
            continue
        chosen = _choose_gang_nodes(pool, new_whole, rack_gain, pod_gain, count, max_level, topology_aware)
        if chosen is not None:
            return end_s, chosen
    return None


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshots(),
    st.floats(0.0, 2000.0),
    st.integers(1, 7),
    st.sampled_from(("rack", "pod", "fleet")),
    st.booleans(),
    st.one_of(st.just(math.inf), st.floats(0.0, 20000.0)),
    st.data(),
)
def test_the_gang_sweep_matches_the_plain_definition(
    snapshot: Snapshot,
    now: float,
    count: int,
    max_level: str,
    topology_aware: bool,
    until_s: float,
    data: st.DataObject,
) -> None:
    """Also when the sweep stops at `until_s`: it finds what the whole sweep finds up to then."""
    prepared = prepare_cycle(snapshot, now)
    pool, profile = prepared.index.pools["a100"], prepared.profiles["a100"]
    held = {node_id: 0 for node_id in data.draw(st.sets(st.sampled_from(sorted(pool.free))))}

    plain = _plain_earliest_gang(pool, held, profile, count, max_level, topology_aware)
    if plain is not None and plain[0] > until_s:
        plain = None
    assert _earliest_gang(pool, held, profile, count, max_level, topology_aware, until_s) == plain

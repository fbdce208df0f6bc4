"""The plan depends on what the snapshot holds, never on the order its tuples list it in."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Job, Node, Policy, Running, Snapshot, schedule
from scheduling.engine.fairshare import fairshare_priorities

from .builders import Scenario, fleet, job, running
from .strategies import jobs
from .test_fast_paths import gang_snapshots

SETTINGS = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def busy_snapshots(draw: st.DrawFn) -> Snapshot:
    """Snapshots with ties everywhere: equal submit times, equal sizes, equal release times."""
    base = draw(gang_snapshots())
    policy = draw(st.sampled_from((base.policy, Policy.easy(), Policy.fifo(), Policy(reservation_depth=2))))
    extra = tuple(draw(jobs(f"k{index}", float(draw(st.integers(0, 3))))) for index in range(draw(st.integers(0, 12))))
    return Snapshot(base.nodes, base.running, base.pending + extra, base.teams, base.quotas, policy, base.usage)


def _permuted(data: st.DataObject, snapshot: Snapshot) -> Snapshot:
    draw = data.draw
    return Snapshot(
        tuple(draw(st.permutations(snapshot.nodes))),
        tuple(draw(st.permutations(snapshot.running))),
        tuple(draw(st.permutations(snapshot.pending))),
        tuple(draw(st.permutations(snapshot.teams))),
        tuple(draw(st.permutations(snapshot.quotas))),
        snapshot.policy,
        tuple(draw(st.permutations(snapshot.usage))),
    )


@SETTINGS
@given(busy_snapshots(), st.floats(0.0, 2000.0), st.data())
def test_permuting_the_snapshots_tuples_gives_the_same_plan(
    snapshot: Snapshot, now: float, data: st.DataObject
) -> None:
    permuted = _permuted(data, snapshot)

    assert schedule(permuted, now) == schedule(snapshot, now)
    assert schedule(permuted, now, explain=False) == schedule(snapshot, now, explain=False)


def _small_jobs_on_equal_nodes(order: list[int]) -> Snapshot:
    nodes = fleet("1x2x2x8")
    runs = [running(job(f"r{index}", 2, time_limit_s=100.0), on=nodes[index].id) for index in range(4)]
    scenario = Scenario(tuple(nodes[i] for i in order)).with_running(*(runs[i] for i in order))
    return scenario.pending(job("one", 1), job("gang", 16, submit_s=1.0)).build()


def test_equal_nodes_listed_in_another_order_get_the_same_jobs() -> None:
    plans = {schedule(_small_jobs_on_equal_nodes(order), 0.0) for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1])}

    assert len(plans) == 1


def test_running_jobs_listed_in_another_order_release_their_nodes_the_same_way() -> None:
    nodes: tuple[Node, ...] = fleet("1x1x2x8")
    runs: list[Running] = [
        running(job("a", 8, time_limit_s=50.0), on=nodes[0].id),
        running(job("b", 8, time_limit_s=50.0), on=nodes[1].id),
    ]
    pending: list[Job] = [job("h", 8), job("g", 8, submit_s=0.0)]
    plans = {
        schedule(Scenario(nodes).with_running(*order).pending(*queue).build(), 0.0)
        for order in (runs, runs[::-1])
        for queue in (pending, pending[::-1])
    }

    assert len(plans) == 1


def test_fair_share_priorities_do_not_depend_on_the_order_teams_are_listed_in() -> None:
    factors = {"a": 0.1, "b": 0.2, "c": 0.3}
    backwards = dict(reversed(factors.items()))

    assert fairshare_priorities(factors) == fairshare_priorities(backwards)

"""Cycles the simulator skips are ones whose plan would have done nothing: skipping changes no result."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import FleetState, Job, Policy, Quota, Reserve, Team, schedule
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.gate import CycleGate, plain_could_act
from scheduling.sim.metrics import WALL_KEYS
from scheduling.sim.recorder import Recorder
from scheduling.sim.simulator import SimulationStalled, run_simulation

from .builders import POLICIES, job

COUNTS = {"cycles", "cycles_skipped", *WALL_KEYS}


@st.composite
def traces(draw: st.DrawFn) -> list[Job]:
    count = draw(st.integers(1, 25))
    jobs, submit_s = [], 0.0
    for index in range(count):
        submit_s += draw(st.sampled_from((0.0, 30.0, 600.0, 3600.0)))
        gpus = draw(st.sampled_from((1, 2, 3, 4, 6, 8, 16, 24)))
        duration_s = draw(st.sampled_from((60.0, 900.0, 3600.0, 7200.0)))
        team = draw(st.sampled_from(("alpha", "beta")))
        jobs.append(job(f"j{index:02d}", submit_s, gpus, duration_s, team=team))
    return jobs


def _metrics(jobs: list[Job], policy: str, skip: bool) -> dict[str, object]:
    nodes = parse_fleet("1x2x2x8").nodes()
    result = run_simulation(jobs, nodes, POLICIES[policy], policy_name=policy, skip_idle_cycles=skip)
    return {key: value for key, value in result.metrics.items() if key not in COUNTS}


@settings(max_examples=80, deadline=None, database=None)
@given(jobs=traces())
def test_strict_fifo_gives_the_same_metrics_with_and_without_skipped_cycles(jobs: list[Job]) -> None:
    assert _metrics(jobs, "fifo", True) == _metrics(jobs, "fifo", False)


@settings(max_examples=80, deadline=None, database=None)
@given(jobs=traces())
def test_easy_backfill_gives_the_same_schedule_with_and_without_skipped_cycles(jobs: list[Job]) -> None:
    # Only the fragmentation sample may differ: a skipped cycle judges it by counts, not by a plan.
    with_skips, without = _metrics(jobs, "easy", True), _metrics(jobs, "easy", False)
    with_skips.pop("fragmentation_idle_fraction")
    without.pop("fragmentation_idle_fraction")
    assert with_skips == without


def test_a_cycle_is_skipped_when_free_gpus_suffice_by_count_but_not_by_shape() -> None:
    # First fit, in id order, puts a and b on one node, c and d on the other; from 3600 s until
    # 7200 s 8 GPUs are free, 4 on each node, and "whole" needs 8 on one.
    jobs = [job("a", 0.0, 4, 7200.0), job("b", 0.0, 4, 3600.0), job("c", 0.0, 4, 7200.0)]
    jobs += [job("d", 0.0, 4, 3600.0), job("whole", 60.0, 8, 600.0), job("late", 7000.0, 1, 60.0)]
    nodes = parse_fleet("1x1x2x8").nodes()
    runs = {
        skip: run_simulation(jobs, nodes, POLICIES["fifo"], policy_name="fifo", skip_idle_cycles=skip)
        for skip in (True, False)
    }

    assert runs[True].jct_by_job == runs[False].jct_by_job
    assert runs[True].metrics["cycles"] < runs[False].metrics["cycles"]
    assert runs[True].metrics["fragmentation_idle_fraction"] == runs[False].metrics["fragmentation_idle_fraction"] > 0


# With quotas, priorities, elastic jobs and checkpoints, so that reclaims, shrinks and growth happen.
QUOTA_TEAMS = (Quota("alpha", "gpu", 8, 24), Quota("beta", "gpu", 12, 20))


@st.composite
def contended_traces(draw: st.DrawFn) -> list[Job]:
    count = draw(st.integers(1, 18))
    jobs, submit_s = [], 0.0
    for index in range(count):
        submit_s += draw(st.sampled_from((0.0, 30.0, 45.0, 600.0, 3600.0)))
        gpus = draw(st.sampled_from((1, 2, 4, 8, 16)))
        extra: dict[str, object] = {
            "priority": draw(st.sampled_from((0, 0, 0, 5))),
            "checkpoint_interval_s": draw(st.sampled_from((None, None, 300.0))),
            "checkpoint_on_preempt": draw(st.sampled_from((False, False, False, True))),
            "time_limit_s": draw(st.sampled_from((None, None, 9000.0))),
        }
        if gpus <= 8 and draw(st.booleans()):
            extra.update(min_gpus=max(1, gpus // 2), max_gpus=8)
        team = draw(st.sampled_from(("alpha", "beta", "gamma")))
        duration_s = draw(st.sampled_from((60.0, 900.0, 3600.0, 7200.0)))
        jobs.append(job(f"j{index:02d}", submit_s, gpus, duration_s, team=team, **extra))
    return jobs


def _replay(
    jobs: list[Job], policy: Policy, skip: bool, estimates: bool
) -> tuple[dict[str, object], list[tuple[float, tuple]]]:
    """Metrics (without cycle counts and the fragmentation sample) and every plan that acted.
    Without estimates the gate may skip arrivals too (they need no explanation)."""
    plans: list[tuple[float, tuple]] = []

    def scheduler(snapshot, now, explain, kept):
        plan = schedule(snapshot, now, explain=explain, kept=kept)
        acted = tuple(action for action in plan.actions if not isinstance(action, Reserve))
        if acted:
            plans.append((now, acted))
        return plan

    nodes = parse_fleet("1x2x2x8").nodes()
    try:
        result = run_simulation(
            jobs,
            nodes,
            policy,
            quotas=QUOTA_TEAMS,
            skip_idle_cycles=skip,
            scheduler=scheduler,
            record_estimates=estimates,
        )
    except SimulationStalled as stalled:  # a stall must happen the same way with and without the gate
        return {"stalled": str(stalled)}, plans
    metrics = {k: v for k, v in result.metrics.items() if k not in COUNTS and k != "fragmentation_idle_fraction"}
    return metrics, plans


@settings(max_examples=120, deadline=None, database=None)
@given(
    jobs=contended_traces(),
    name=st.sampled_from(("fleetline", "easy", "fleetline-las", "fleetline-reclaim-whole", "fleetline-reclaim-any")),
    estimates=st.sampled_from((False, False, True)),
)
def test_with_preemption_and_elastic_jobs_skipped_cycles_are_ones_whose_plan_would_have_done_nothing(
    jobs: list[Job], name: str, estimates: bool
) -> None:
    policy = _policy(name)
    assert _replay(jobs, policy, True, estimates) == _replay(jobs, policy, False, estimates)


def _policy(name: str) -> Policy:
    """A named policy of `POLICIES`, or fleetline with another within-team order or reclaim share."""
    if name == "fleetline-las":
        return replace(Policy(), within_team_order="las")
    if name == "fleetline-reclaim-whole":  # only a job within its team's guarantee reclaims
        return replace(Policy(), reclaim_guaranteed_share=1.0)
    if name == "fleetline-reclaim-any":  # any job of a team with guarantee left reclaims
        return replace(Policy(), reclaim_guaranteed_share=0.0)
    return POLICIES[name]


def test_a_replay_with_quotas_and_preemption_skips_cycles() -> None:
    # Two teams keep the fleet full of one-GPU work; beta's guarantee is met all along, so
    # arrivals into a full fleet can neither start nor reclaim anything.
    jobs = [job(f"a{i}", 10.0 * i, 1, 5000.0, team="alpha") for i in range(16)]
    jobs += [job(f"b{i}", 10.0 * i, 1, 5000.0, team="beta") for i in range(16)]
    jobs += [job(f"late{i}", 200.0 + 10.0 * i, 1, 60.0, team="beta") for i in range(20)]
    result = run_simulation(jobs, parse_fleet("1x1x4x8").nodes(), Policy(), quotas=QUOTA_TEAMS, record_estimates=False)
    assert result.metrics["cycles_skipped"] > 0


@settings(max_examples=60, deadline=None, database=None)
@given(
    jobs=contended_traces(),
    name=st.sampled_from(("fleetline", "fifo", "fleetline-reclaim-whole", "fleetline-reclaim-any")),
)
def test_the_incremental_gate_says_what_its_plain_definition_says_after_every_cycle(jobs: list[Job], name: str) -> None:
    policy = _policy(name)
    nodes = parse_fleet("1x2x2x8").nodes()
    guarantees = {(q.team, q.accelerator): q.guaranteed for q in QUOTA_TEAMS}
    state = FleetState(nodes, checkpoint_events=False, now=0.0)
    recorder = Recorder(nodes, window=(0.0, 1.0), penalty={}, guarantees=guarantees, weights={}, sample_every_s=60.0)
    recorder.gate = gate = CycleGate(state, recorder.capacity, policy, strict_fifo=False, guarantees=guarantees)
    teams = tuple(Team(team, "fleet") for team in ("alpha", "beta", "gamma"))
    arrivals = sorted(jobs, key=lambda j: j.submit_s)
    now = 0.0
    for step in range(60):
        due = [j for j in arrivals if j.submit_s <= now]
        arrivals = [j for j in arrivals if j.submit_s > now]
        recorder.record(state.advance(now))
        for arrival in due:
            state.submit(arrival)
            recorder.submitted(arrival)
        assert gate.could_start() == plain_could_act(state, policy, guarantees, strict_fifo=False), step
        plan = schedule(state.snapshot(now, teams, QUOTA_TEAMS, policy), now, explain=False)
        recorder.record(state.apply(plan, now))
        recorder.applied(plan)
        assert gate.could_start() == plain_could_act(state, policy, guarantees, strict_fifo=False), step
        assert gate.node_free == {node: state.node_usable[node] - state.node_used[node] for node in state.nodes}
        upcoming = [t for t in (state.next_event_time(), arrivals[0].submit_s if arrivals else None) if t is not None]
        if not upcoming:
            break
        now = max(now + 1.0, min(upcoming))


def _gate_on(
    running: list[tuple[Job, str, int, bool]],
    pending: list[Job],
    guarantees: dict,
    share: float = 1.0,
    *,
    now: float = 0.0,
    young_s: float | None = None,
) -> tuple[bool, bool]:
    """The gate's verdict and its plain definition's on a 2-node fleet (16 GPUs) where `running`
    holds (job, node, GPUs, leaving), started at 0 as loans, and `pending` waits, at `now`; a job reclaims
    when `share` of it lies within its team's guarantee (1, in the table below: only a job that fits
    within it whole), and a partial reclaim takes loans without checkpoints started within `young_s`."""
    policy = Policy(reclaim_guaranteed_share=share, partial_reclaim_young_s=young_s)
    nodes = parse_fleet("1x1x2x8").nodes()
    state = FleetState(nodes, checkpoint_events=False, now=now)
    gate = CycleGate(state, {"gpu": 16}, policy, strict_fifo=False, guarantees=guarantees)
    for run, node, gpus, leaving in running:
        node_id = nodes[int(node[-1])].id
        state.restore(
            run,
            ((node_id, gpus),),
            start_s=0.0,
            borrowing=True,
            anchor_s=0.0,
            anchor_progress_s=0.0,
            base_progress_s=0.0,
            grace_until_s=30.0 if leaving else None,
        )
        gate.allocated("gpu", gpus)
        gate.touch([run.id])
    for waiting in pending:
        state.submit(waiting)
        gate.queued(waiting)
    return gate.could_start(), plain_could_act(state, policy, guarantees, strict_fifo=False)


G = {("alpha", "gpu"): 8, ("beta", "gpu"): 4}


@pytest.mark.parametrize(
    ("case", "running", "pending", "guarantees", "expected"),
    [
        (
            "a team reclaims its whole guarantee from a borrower",
            [(job("b1", 0, 8, 9e3, team="beta"), "n0", 8, False), (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False)],
            [job("a", 1, 8, 60, team="alpha")],
            G,
            True,
        ),
        (
            "up to exactly its guarantee",
            [
                (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
            ],
            [job("a", 1, 4, 60, team="alpha")],
            G,
            True,
        ),
        (
            "but not one GPU beyond it",
            [
                (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
            ],
            [job("a", 1, 5, 60, team="alpha")],
            G,
            False,
        ),
        (
            "from a team over its guarantee by the loan's GPUs",
            [
                (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
            ],
            [job("a", 1, 4, 60, team="alpha")],
            {("alpha", "gpu"): 8, ("beta", "gpu"): 8},
            True,
        ),
        (
            "but not from a team one GPU over it, whose loans would leave it uncovered",
            [
                (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
            ],
            [job("a", 1, 4, 60, team="alpha")],
            {("alpha", "gpu"): 8, ("beta", "gpu"): 11},
            False,
        ),
        (
            "but not from a team within its guarantee",
            [
                (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
            ],
            [job("a", 1, 4, 60, team="alpha")],
            {("alpha", "gpu"): 8, ("beta", "gpu"): 12},
            False,
        ),
        (
            "nor where no node could be freed for it",
            [
                (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
                (job("c1", 0, 4, 9e3, team="beta", preemptible=False), "n0", 4, False),
                (job("b2", 0, 4, 9e3, team="beta"), "n1", 4, False),
                (job("c2", 0, 4, 9e3, team="beta", preemptible=False), "n1", 4, False),
            ],
            [job("a", 1, 8, 60, team="alpha")],
            G,
            False,
        ),
        (
            "nor from loans already leaving",
            [(job("b1", 0, 8, 9e3, team="beta"), "n0", 8, True), (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, True)],
            [job("a", 1, 8, 60, team="alpha")],
            G,
            False,
        ),
        (
            "a team without a guarantee reclaims nothing",
            [(job("b1", 0, 8, 9e3, team="beta"), "n0", 8, False), (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False)],
            [job("c", 1, 8, 60, team="gamma")],
            G,
            False,
        ),
        (
            "a higher priority takes lower-priority work",
            [(job("l1", 0, 8, 9e3), "n0", 8, False), (job("l2", 0, 8, 9e3), "n1", 8, False)],
            [job("hi", 1, 8, 60, priority=5)],
            {},
            True,
        ),
        (
            "but not work of its own priority",
            [(job("l1", 0, 8, 9e3, priority=5), "n0", 8, False), (job("l2", 0, 8, 9e3, priority=5), "n1", 8, False)],
            [job("hi", 1, 8, 60, priority=5)],
            {},
            False,
        ),
        (
            "nor work that may not be preempted",
            [
                (job("l1", 0, 8, 9e3, preemptible=False), "n0", 8, False),
                (job("l2", 0, 8, 9e3, preemptible=False), "n1", 8, False),
            ],
            [job("hi", 1, 8, 60, priority=5)],
            {},
            False,
        ),
        (
            "an elastic job grows into free GPUs on its own node",
            [(job("e", 0, 4, 9e3, min_gpus=2, max_gpus=8), "n0", 4, False), (job("f", 0, 8, 9e3), "n1", 8, False)],
            [job("big", 1, 16, 60)],
            {},
            True,
        ),
        (
            "but not into GPUs free on another node",
            [(job("e", 0, 8, 9e3, min_gpus=2, max_gpus=16), "n0", 8, False), (job("f", 0, 4, 9e3), "n1", 4, False)],
            [job("big", 1, 16, 60)],
            {},
            False,
        ),
        (
            "a job that fits the free GPUs of one node can start",
            [(job("f", 0, 4, 9e3), "n1", 4, False), (job("g", 0, 8, 9e3), "n0", 8, False)],
            [job("small", 1, 4, 60)],
            {},
            True,
        ),
    ],
)
def test_the_gate_lets_a_cycle_run_only_when_it_could_act(case, running, pending, guarantees, expected) -> None:
    assert _gate_on(running, pending, guarantees) == (expected, expected), case


@pytest.mark.parametrize(("share", "expected"), [(0.0, True), (0.8, True), (0.81, False)])
def test_a_job_partly_beyond_its_guarantee_makes_a_reclaim_conceivable_when_the_share_within_allows(
    share: float, expected: bool
) -> None:
    # alpha has 4 of its 8 GPUs left and asks for 5: 80 % of the job lies within its guarantee.
    # beta's loans checkpoint (every 30 minutes, or when told they are preempted): a partial
    # reclaim may take them.
    running = [
        (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
        (job("b1", 0, 4, 9e3, team="beta", checkpoint_interval_s=1800.0), "n0", 4, False),
        (job("b2", 0, 8, 9e3, team="beta", checkpoint_on_preempt=True), "n1", 8, False),
    ]
    assert _gate_on(running, [job("a", 1, 5, 60, team="alpha")], G, share) == (expected, expected)


@pytest.mark.parametrize("share", [0.0, 0.8])
def test_a_partial_reclaim_is_not_conceivable_when_no_loan_checkpoints(share: float) -> None:
    # As above, but beta's loans never checkpoint: a partial reclaim would take none of them. A
    # job of alpha within its guarantee (4 GPUs) may still reclaim them.
    running = [
        (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
        (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
        (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
    ]
    assert _gate_on(running, [job("a", 1, 5, 60, team="alpha")], G, share) == (False, False)
    assert _gate_on(running, [job("a", 1, 4, 60, team="alpha")], G, share) == (True, True)


@pytest.mark.parametrize("share", [0.0, 0.8])
def test_a_partial_reclaim_is_conceivable_while_a_loan_without_checkpoints_is_young(share: float) -> None:
    # The same loans without checkpoints, started at 0, with a bound of an hour for young loans: a
    # partial reclaim may take them until an hour has passed, and not after.
    running = [
        (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
        (job("b1", 0, 4, 9e3, team="beta"), "n0", 4, False),
        (job("b2", 0, 8, 9e3, team="beta"), "n1", 8, False),
    ]
    partial = [job("a", 1, 5, 60, team="alpha")]
    assert _gate_on(running, partial, G, share, now=3600.0, young_s=3600.0) == (True, True)
    assert _gate_on(running, partial, G, share, now=3601.0, young_s=3600.0) == (False, False)


@pytest.mark.parametrize(("beta_on_n1", "expected"), [(((3, 1800.0), (3, 1800.0)), True), (((4, 1800.0),), False)])
def test_a_partial_reclaim_is_conceivable_only_where_a_node_could_be_freed_for_it(
    beta_on_n1: tuple[tuple[int, float], ...], expected: bool
) -> None:
    # alpha has 4 of its 8 GPUs left and asks for 5; beta (no guarantee) lends loans that
    # checkpoint, gamma one that does not (never taken by a partial reclaim). n0: alpha's 4,
    # beta's 2, 2 free: at most 4 could be freed there. n1: beta's loans, gamma's 4 or 2 free.
    # By count 5 could always be found; by shape only when beta's loans on n1 leave room for 5.
    running = [
        (job("a1", 0, 4, 9e3, team="alpha"), "n0", 4, False),
        (job("b0", 0, 2, 9e3, team="beta", checkpoint_interval_s=1800.0), "n0", 2, False),
    ]
    running += [
        (job(f"b{index + 1}", 0, gpus, 9e3, team="beta", checkpoint_interval_s=interval), "n1", gpus, False)
        for index, (gpus, interval) in enumerate(beta_on_n1)
    ]
    if sum(gpus for gpus, _ in beta_on_n1) == 4:
        running.append((job("c1", 0, 4, 9e3, team="gamma"), "n1", 4, False))
    guarantees = {("alpha", "gpu"): 8}
    assert _gate_on(running, [job("a", 1, 5, 60, team="alpha")], guarantees, 0.8) == (expected, expected)

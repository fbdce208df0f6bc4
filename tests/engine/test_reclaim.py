"""Reclaim without waste: scenarios, one rule each (see `scheduling.engine.reclaim`)."""

from __future__ import annotations

import math
from typing import TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import (
    Evicted,
    FleetState,
    Job,
    Node,
    Policy,
    Preempt,
    Quota,
    Reserve,
    Running,
    Snapshot,
    Start,
    Started,
    Team,
    schedule,
)
from scheduling.engine.cycle_state import Budgets, Decisions, Memo
from scheduling.engine.placement import Fit, patience_s
from scheduling.engine.preemption import Terms, eviction_cap_gpu_s, eviction_pays
from scheduling.engine.prepare import prepare_cycle
from scheduling.engine.quota import Admission
from scheduling.engine.reclaim import CycleContext, Reclaimer
from scheduling.engine.reference import FAST_PATH_QUIRKS, schedule_reference

from .builders import Scenario, fleet, job, quota, reason_of, running, started

NOW = 100_000.0
HOUR = 3600.0


class RunningSince(TypedDict):
    """`FleetState.restore`'s record of how long a job has been running."""

    start_s: float
    borrowing: bool
    anchor_s: float | None
    anchor_progress_s: float
    base_progress_s: float


RUNNING_SINCE_ZERO: RunningSince = {
    "start_s": 0.0,
    "borrowing": True,
    "anchor_s": 0.0,
    "anchor_progress_s": 0.0,
    "base_progress_s": 0.0,
}


def _borrowed_fleet(*borrowers: Running, reclaim_after_s: float | None = 1800.0) -> Scenario:
    """Team alpha is guaranteed the whole fleet (an 8-GPU node per borrower); beta borrows it all."""
    nodes = fleet(f"1x1x{len(borrowers)}x8")
    scenario = Scenario(nodes).quotas(quota("alpha", 8 * len(borrowers)), quota("beta", 0))
    return scenario.with_running(*borrowers).policy(reclaim_after_s=reclaim_after_s)


def _borrower(
    job_id: str,
    node: str,
    *,
    ran_s: float,
    limit_s: float | None = None,
    checkpoint_s: float = 0.0,
    **overrides: object,
) -> Running:
    work = job(job_id, 8, team="beta", duration_s=100 * HOUR, time_limit_s=limit_s, **overrides)
    return running(work, on=node, start_s=NOW - ran_s, progress_s=ran_s, checkpoint_s=checkpoint_s, borrowing=True)


def _owner(**overrides: object) -> Job:
    return job("mine", 8, **{"team": "alpha", "submit_s": NOW - 1200.0, **overrides})


def test_a_victim_without_checkpoint_about_to_finish_is_left_alone() -> None:
    nearly_done = _borrower("nearly-done", "p0-r0-n0", ran_s=10 * HOUR, limit_s=10 * HOUR + 600.0)
    long_left = _borrower("long-left", "p0-r0-n1", ran_s=12 * HOUR)
    plan = _borrowed_fleet(nearly_done, long_left).pending(_owner()).plan(now=NOW)

    # Evicting either throws away 10 h or more of work on 8 GPUs to save a 10-minute wait.
    assert plan.of_type(Preempt) == ()
    assert plan.of_type(Reserve) == (Reserve("mine", ("p0-r0-n0",), NOW + 600.0),)


def test_a_higher_priority_job_that_has_just_arrived_still_evicts_lower_priority_work_by_its_natural_start() -> None:
    # Evictions by priority keep the wait to the natural start as their credit: no wait needed first.
    victim = _borrower("victim", "p0-r0-n0", ran_s=600.0, limit_s=10 * HOUR, priority=0)
    plan = _borrowed_fleet(victim).pending(_owner(submit_s=NOW, priority=5)).plan(now=NOW)

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:mine", 30.0),)


def test_under_rent_or_buy_a_job_that_has_just_arrived_does_not_evict_for_a_wait_limits_only_promise() -> None:
    # The borrowers' limits say the node frees in 9 h at the earliest; ten minutes of work on
    # 8 GPUs is cheap against that, but the owner has not waited yet, and limits may overstate
    # waits (rent or buy: a credit of once the wait so far).
    young = _borrower("young", "p0-r0-n0", ran_s=600.0, limit_s=10 * HOUR)
    older = _borrower("older", "p0-r0-n1", ran_s=HOUR, limit_s=10 * HOUR)
    scenario = _borrowed_fleet(young, older, reclaim_after_s=4 * HOUR).policy(reclaim_wait_credit=1.0)

    arrived = scenario.pending(_owner(submit_s=NOW)).plan(now=NOW)
    assert arrived.of_type(Preempt) == ()
    assert reason_of(arrived, "mine") == "capacity"

    # Once its wait has cost more than the work an eviction destroys (20 min against 10 min plus
    # the grace, on as many GPUs), it evicts the youngest borrower.
    scenario.pending_jobs.clear()
    waited = scenario.pending(_owner(submit_s=NOW - 1200.0)).plan(now=NOW)
    assert waited.of_type(Preempt) == (Preempt("young", "preempted-by:mine", 30.0),)


def test_without_a_bound_on_the_credit_an_owner_evicts_at_once_for_the_wait_its_limits_promise() -> None:
    # The same loans: credited the wait the limits promise (9 h on 8 GPUs, the default credit),
    # the owner evicts the youngest borrower as soon as it arrives.
    young = _borrower("young", "p0-r0-n0", ran_s=600.0, limit_s=10 * HOUR)
    older = _borrower("older", "p0-r0-n1", ran_s=HOUR, limit_s=10 * HOUR)
    assert Policy().reclaim_wait_credit is None
    scenario = _borrowed_fleet(young, older, reclaim_after_s=4 * HOUR)
    plan = scenario.pending(_owner(submit_s=NOW)).plan(now=NOW)

    assert plan.of_type(Preempt) == (Preempt("young", "preempted-by:mine", 30.0),)


def test_a_victim_that_ends_within_the_grace_period_is_never_taken() -> None:
    ending = _borrower("ending", "p0-r0-n0", ran_s=60.0, limit_s=70.0)
    plan = _borrowed_fleet(ending, reclaim_after_s=0.0).pending(_owner()).plan(now=NOW)

    assert plan.of_type(Preempt) == ()
    assert plan.of_type(Reserve) == (Reserve("mine", ("p0-r0-n0",), NOW + 10.0),)


def test_the_youngest_borrower_goes_first() -> None:
    old = _borrower("old", "p0-r0-n0", ran_s=20 * HOUR)
    young = _borrower("young", "p0-r0-n1", ran_s=600.0)
    plan = _borrowed_fleet(old, young).pending(_owner()).plan(now=NOW)

    assert plan.of_type(Preempt) == (Preempt("young", "preempted-by:mine", 30.0),)
    assert started(plan) == {"mine": (("p0-r0-n1", 8),)}


def test_the_preemption_step_works_on_the_context_it_is_given_and_commits_through_it() -> None:
    old = _borrower("old", "p0-r0-n0", ran_s=20 * HOUR)
    young = _borrower("young", "p0-r0-n1", ran_s=600.0)
    snapshot = _borrowed_fleet(old, young).pending(_owner()).build()
    owner, policy = snapshot.pending[0], snapshot.policy
    prepared = prepare_cycle(snapshot, NOW)
    committed: list[tuple[str, Fit, bool, tuple[str, ...], float]] = []

    def commit(job: Job, fit: Fit, admission: Admission, taken: bool, replaces: tuple[str, ...], wait_s: float) -> None:
        committed.append((job.id, fit, admission.borrowing, replaces, wait_s))

    decided, memo, budgets = Decisions(prepared.actions), Memo(), Budgets.of(policy)
    patience = (patience_s(policy, False), patience_s(policy, True))
    step = Reclaimer(CycleContext(policy, NOW, prepared, decided, memo, budgets, patience, commit))

    assert step.try_preempt(owner, prepared.index.pools[owner.accelerator], 8, None)
    ((job_id, fit, borrowing, replaces, wait_s),) = committed
    assert (job_id, fit.allocation, borrowing, replaces, wait_s) == (
        "mine",
        (("p0-r0-n1", 8),),
        False,
        ("young",),
        30.0,
    )
    assert decided.actions[-1] == Preempt("young", "preempted-by:mine", 30.0) and decided.picked == {"young"}
    assert budgets.preemption_attempts == 1  # the context's budgets, spent in place


def test_the_borrower_that_checkpointed_most_recently_goes_first() -> None:
    stale = _borrower("stale", "p0-r0-n0", ran_s=HOUR, checkpoint_interval_s=HOUR / 2)
    fresh = running(
        job("fresh", 8, team="beta", duration_s=100 * HOUR, checkpoint_interval_s=HOUR / 2),
        on="p0-r0-n1",
        start_s=NOW - 4 * HOUR,
        progress_s=4 * HOUR,
        checkpoint_s=4 * HOUR - 60.0,
        borrowing=True,
    )
    plan = _borrowed_fleet(stale, fresh).pending(_owner()).plan(now=NOW)

    assert [action.job_id for action in plan.of_type(Preempt)] == ["fresh"]


def test_reclaim_waits_while_it_destroys_more_than_the_wait_saves_and_goes_ahead_after_the_bound() -> None:
    # 5 h of work on 8 GPUs would be lost to save a 1-hour wait: not while the owner has waited 20 minutes.
    busy = _borrower("busy", "p0-r0-n0", ran_s=5 * HOUR, limit_s=6 * HOUR)
    other = _borrower("other", "p0-r0-n1", ran_s=5 * HOUR, limit_s=7 * HOUR)
    scenario = _borrowed_fleet(busy, other)

    early = scenario.pending(_owner()).plan(now=NOW)
    assert early.of_type(Preempt) == ()
    assert reason_of(early, "mine") == "capacity"

    # Past the bound (30 minutes), all the owner has waited counts, whatever its natural start:
    # six hours on 8 GPUs outweigh the 5 h lost.
    scenario.pending_jobs.clear()
    late = scenario.pending(_owner(submit_s=NOW - 6 * HOUR)).plan(now=NOW)
    assert [action.job_id for action in late.of_type(Preempt)] == ["busy"]
    assert set(started(late)) == {"mine"}


def test_a_preemptor_past_the_bound_does_not_destroy_more_work_than_its_credit_for_the_wait() -> None:
    # The owner has waited an hour, twice the bound. With a credit of once the wait so far, 5 h of
    # work on 8 GPUs is more than its hour on as many; six times that hour is not.
    busy = _borrower("busy", "p0-r0-n0", ran_s=5 * HOUR, limit_s=6 * HOUR)
    other = _borrower("other", "p0-r0-n1", ran_s=5 * HOUR, limit_s=7 * HOUR)
    scenario = _borrowed_fleet(busy, other).pending(_owner(submit_s=NOW - HOUR)).policy(reclaim_wait_credit=1.0)

    once = scenario.plan(now=NOW)
    assert once.of_type(Preempt) == ()
    assert reason_of(once, "mine") == "capacity"
    assert [action.job_id for action in scenario.policy(reclaim_wait_credit=6.0).plan(now=NOW).of_type(Preempt)] == [
        "busy"
    ]


def test_without_a_bound_on_the_credit_any_cost_pays_past_the_bound() -> None:
    busy = _borrower("busy", "p0-r0-n0", ran_s=5 * HOUR, limit_s=6 * HOUR)
    other = _borrower("other", "p0-r0-n1", ran_s=5 * HOUR, limit_s=7 * HOUR)
    scenario = _borrowed_fleet(busy, other).pending(_owner(submit_s=NOW - HOUR))
    plan = scenario.policy(reclaim_wait_credit=None).plan(now=NOW)

    assert [action.job_id for action in plan.of_type(Preempt)] == ["busy"]


def test_without_a_bound_only_the_cost_decides() -> None:
    busy = _borrower("busy", "p0-r0-n0", ran_s=5 * HOUR, limit_s=6 * HOUR)
    other = _borrower("other", "p0-r0-n1", ran_s=5 * HOUR, limit_s=7 * HOUR)
    plan = _borrowed_fleet(busy, other, reclaim_after_s=None).pending(_owner(submit_s=0.0)).plan(now=NOW)

    assert plan.of_type(Preempt) == ()


def test_checkpoint_on_preempt_makes_a_victim_cheapest() -> None:
    plain = _borrower("plain", "p0-r0-n0", ran_s=600.0)
    checkpointing = _borrower("checkpointing", "p0-r0-n1", ran_s=10 * HOUR, checkpoint_on_preempt=True)
    plan = _borrowed_fleet(plain, checkpointing).pending(_owner()).plan(now=NOW)

    assert [action.job_id for action in plan.of_type(Preempt)] == ["checkpointing"]


def test_checkpoint_on_preempt_loses_only_the_grace() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    victim = Job("v", "beta", "training", 0, True, "a100", 8, 100 * HOUR, 0.0, checkpoint_on_preempt=True)
    state = FleetState(nodes, now=0.0)
    state.restore(victim, (("n0", 8),), **RUNNING_SINCE_ZERO)
    state.advance(5 * HOUR)
    state.submit(Job("mine", "alpha", "training", 0, True, "a100", 8, HOUR, 5 * HOUR - 60.0))
    teams = (Team("alpha", "d0"), Team("beta", "d1"))
    quotas = (Quota("alpha", "a100", 8, 0), Quota("beta", "a100", 0, 8))
    plan = schedule(state.snapshot(5 * HOUR, teams, quotas, Policy()), 5 * HOUR)
    events = state.apply(plan, 5 * HOUR)

    (evicted,) = [event for event in events if isinstance(event, Evicted)]
    (begun,) = [event for event in events if isinstance(event, Started)]
    assert evicted.lost_gpu_s == 0.0 and state.saved_progress["v"] == 5 * HOUR
    # The GPUs spend the grace on the victim's checkpoint: the new job makes progress after it.
    assert begun.restore_s == Policy().preemption_grace_s
    assert state.counters().lost_gpu_s + begun.restore_s * 8 == Policy().preemption_grace_s * 8


def test_a_victim_without_any_checkpoint_loses_everything_it_has_done() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    victim = Job("v", "beta", "training", 0, True, "a100", 8, 100 * HOUR, 0.0)
    state = FleetState(nodes, now=0.0)
    state.restore(victim, (("n0", 8),), **RUNNING_SINCE_ZERO)
    state.advance(HOUR)
    state.submit(Job("mine", "alpha", "training", 0, True, "a100", 8, HOUR, -HOUR))
    teams = (Team("alpha", "d0"), Team("beta", "d1"))
    quotas = (Quota("alpha", "a100", 8, 0), Quota("beta", "a100", 0, 8))
    # "mine" has waited two hours, past the bound: more than the hour of work the victim loses.
    events = state.apply(schedule(state.snapshot(HOUR, teams, quotas, Policy(reclaim_after_s=HOUR)), HOUR), HOUR)

    (evicted,) = [event for event in events if isinstance(event, Evicted)]
    assert evicted.lost_gpu_s == HOUR * 8
    assert state.saved_progress.get("v", 0.0) == 0.0


def test_no_eviction_whose_gpus_are_not_used_by_a_start_in_the_same_plan() -> None:
    # "greedy" outranks the victim, but quota would not admit it even with the victim gone.
    nodes = fleet("1x1x2x8")
    victim = running(job("victim", 8, team="beta", duration_s=100 * HOUR), on="p0-r0-n0", borrowing=True)
    greedy = job("greedy", 16, team="alpha", priority=10, submit_s=0.0)
    scenario = Scenario(nodes).with_running(victim).quotas(quota("alpha", 0, borrow_limit=8), quota("beta", 0))
    plan = scenario.pending(greedy).plan(now=NOW)

    assert plan.of_type(Preempt) == ()
    assert reason_of(plan, "greedy") == "quota"


def test_a_preemptor_takes_only_the_victims_it_starts_on() -> None:
    # Two cheap victims would do for a 16-GPU gang; an 8-GPU job needs one and evicts one.
    victims = (_borrower(f"v{index}", f"p0-r0-n{index}", ran_s=60.0) for index in range(2))
    plan = _borrowed_fleet(*victims).pending(_owner()).plan(now=NOW)

    (preempt,) = plan.of_type(Preempt)
    (start,) = plan.starts()
    assert start.replaces == (preempt.job_id,)
    assert start.allocation == (({"v0": "p0-r0-n0", "v1": "p0-r0-n1"}[preempt.job_id], 8),)


def test_a_serving_preemptor_evicts_whenever_it_starts_sooner() -> None:
    busy = running(job("busy", 8, duration_s=100 * HOUR, time_limit_s=6 * HOUR), on="p0-r0-n0", progress_s=5 * HOUR)
    busy = Running(busy.job, busy.allocation, NOW - 5 * HOUR, 5 * HOUR, 0.0, False)
    serving = job("serve", 8, kind="serving", priority=100, preemptible=False, submit_s=NOW)
    plan = Scenario(fleet("1x1x1x8")).with_running(busy).pending(serving).plan(now=NOW)

    assert plan.starts() == (Start("serve", (("p0-r0-n0", 8),), True, "node", ("busy",)),)


@given(
    cost=st.floats(0.0, 1e7),
    handover=st.sampled_from((0.0, 30.0)),
    natural=st.floats(0.0, 1e6),
    waited=st.floats(0.0, 1e5),
    bound=st.none() | st.floats(0.0, 1e5),
    credit=st.none() | st.sampled_from((0.0, 1.0, 4.0)),
)
@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_eviction_never_pays_when_the_preemptor_would_start_as_soon_without_it(
    cost: float, handover: float, natural: float, waited: float, bound: float | None, credit: float | None
) -> None:
    now = 0.0
    preemptor = job("p", 8, submit_s=now - waited)
    policy = Policy(reclaim_after_s=bound, reclaim_wait_credit=credit)
    pays = eviction_pays(preemptor, 8, cost, handover, now + natural, now, policy)

    if natural <= handover:
        assert not pays
    elif bound is not None and waited >= bound:
        # Past the bound, the credit times all the wait so far is credited (no bound: any cost).
        assert pays == (credit is None or cost <= 0.0 or cost < 8 * credit * waited)
    else:
        # The wait credited is the wait to the natural start, but no more than the credit times the
        # one already waited.
        credited = natural - handover if credit is None else min(natural - handover, credit * waited)
        assert pays == (cost <= 0.0 or cost < 8 * credited)


@given(
    cost=st.floats(0.0, 1e7),
    handover=st.sampled_from((0.0, 30.0)),
    natural=st.floats(0.0, 1e6) | st.just(math.inf),
    waited=st.floats(0.0, 1e5),
    bound=st.none() | st.floats(0.0, 1e5),
)
@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_eviction_by_priority_is_credited_the_wait_to_its_natural_start_then_all_it_has_waited(
    cost: float, handover: float, natural: float, waited: float, bound: float | None
) -> None:
    now = 0.0
    preemptor = job("p", 8, submit_s=now - waited)
    policy = Policy(reclaim_after_s=bound)
    pays = eviction_pays(preemptor, 8, cost, handover, now + natural, now, policy, Terms(True, True))

    if natural <= handover:
        assert not pays
    elif bound is not None and waited >= bound:
        # Rent or buy past the bound, wherever the natural start: never any cost.
        assert pays == (cost <= 0.0 or cost < 8 * waited)
    else:
        assert pays == (cost <= 0.0 or cost < 8 * (natural - handover))


@given(
    cost=st.floats(0.0, 1e7),
    handover=st.sampled_from((0.0, 30.0)),
    natural=st.floats(0.0, 1e6) | st.just(math.inf),
    waited=st.floats(0.0, 1e5),
    pricing=st.tuples(st.none() | st.floats(0.0, 1e5), st.none() | st.sampled_from((0.0, 1.0, 4.0))),
    kind=st.sampled_from(("training", "serving")),
    gpus=st.sampled_from((1, 8, 24)),
    flags=st.tuples(st.booleans(), st.booleans()),
)
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_cost_cap_known_before_a_victim_search_says_exactly_which_evictions_pay(
    cost: float,
    handover: float,
    natural: float,
    waited: float,
    pricing: tuple[float | None, float | None],
    kind: str,
    gpus: int,
    flags: tuple[bool, bool],
) -> None:
    now, (by_age, outranks) = 1000.0, flags
    preemptor = job("p", gpus, kind=kind, submit_s=now - waited)
    bound, credit = pricing  # reclaim_after_s, reclaim_wait_credit
    policy = Policy(reclaim_after_s=bound, reclaim_wait_credit=credit)
    cap = eviction_cap_gpu_s(preemptor, gpus, handover, now + natural, now, policy, Terms(by_age, outranks))
    pays = eviction_pays(preemptor, gpus, cost, handover, now + natural, now, policy, Terms(by_age, outranks))
    assert pays == (cost < cap)


def test_priority_is_kept_even_within_one_team_when_nothing_else_may_be_taken() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    low = Running(Job("low", "t", "batch", 0, True, "a100", 8, 1e6, 0.0), (("n0", 8),), 0.0, 10.0, 0.0, False)
    high = Job("high", "t", "training", 5, True, "a100", 8, 10.0, 0.0)
    plan = schedule(Snapshot(nodes, (low,), (high,), (Team("t", "d"),), (), Policy(), ()), NOW)

    assert plan.starts() == (Start("high", (("n0", 8),), True, "node", ("low",)),)


def _gang_beyond_the_guarantee(share: float, *, checkpoints: bool = True, guaranteed: int = 8) -> Scenario:
    """alpha is guaranteed 8 GPUs and uses none; beta borrows all four nodes, one of them 5 h in
    (25 minutes since its last checkpoint), the others an hour and 10 minutes in (10 minutes since
    theirs), all checkpointing every 30 minutes (or, without `checkpoints`, never: all their work
    is lost); alpha's 16-GPU gang has waited three hours, past `reclaim_after_s`."""
    interval_s = HOUR / 2 if checkpoints else None

    def loan(job_id: str, node: str, ran_s: float, since_s: float) -> Running:
        checkpoint_s = ran_s - since_s if checkpoints else 0.0
        return _borrower(job_id, node, ran_s=ran_s, checkpoint_s=checkpoint_s, checkpoint_interval_s=interval_s)

    busy = loan("busy", "p0-r0-n0", 5 * HOUR + 1500.0, 1500.0)
    young = [loan(f"young{n}", f"p0-r0-n{n}", HOUR + 600.0, 600.0) for n in (1, 2, 3)]
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", guaranteed), quota("beta", 0))
    gang = job("gang", 16, team="alpha", submit_s=NOW - 3 * HOUR)
    policy = scenario.with_running(busy, *young).policy(reclaim_after_s=1800.0, reclaim_guaranteed_share=share)
    return policy.pending(gang)


def test_a_gang_larger_than_what_is_left_of_its_guarantee_reclaims_when_share_allows_and_borrows_the_rest() -> None:
    plan = _gang_beyond_the_guarantee(0.5).plan(now=NOW)

    # Half of the gang lies within alpha's guarantee: it evicts two of beta's loans (the cheapest,
    # 10 minutes since their checkpoints) and starts on their nodes in the same plan, borrowing
    # the other 8 GPUs.
    assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["young1", "young2"]
    (start,) = plan.starts()
    assert start.job_id == "gang" and start.borrowing and start.replaces == ("young1", "young2")


def _fresh_and_checkpointing_loans(young_s: float | None) -> Scenario:
    """beta's loans: two without checkpoints 5 minutes in (the cheapest to evict now), one that
    checkpoints every 30 minutes 20 minutes after its last one, one that checkpoints when told it
    is preempted, 10 h in; alpha is guaranteed 8 GPUs, uses none, and a partial reclaim takes loans
    without checkpoints started within `young_s`."""
    fresh = [_borrower(f"fresh{n}", f"p0-r0-n{n}", ran_s=300.0) for n in (0, 1)]
    periodic = _borrower(
        "periodic", "p0-r0-n2", ran_s=2 * HOUR + 1200.0, checkpoint_s=2 * HOUR, checkpoint_interval_s=HOUR / 2
    )
    on_preempt = _borrower("on-preempt", "p0-r0-n3", ran_s=10 * HOUR, checkpoint_on_preempt=True)
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8), quota("beta", 0))
    return scenario.with_running(*fresh, periodic, on_preempt).policy(
        reclaim_after_s=1800.0, partial_reclaim_young_s=young_s
    )


def test_a_partial_reclaim_evicts_a_loan_that_checkpoints() -> None:
    # alpha's 16-GPU gang, half within its guarantee, takes the two loans that checkpoint, though
    # evicting a fresh loan without checkpoints would lose less now: no loan counts as young.
    scenario = _fresh_and_checkpointing_loans(young_s=None)
    gang = job("gang", 16, team="alpha", submit_s=NOW - 3 * HOUR)

    for share in (0.0, 0.5):
        plan = scenario.policy(reclaim_guaranteed_share=share).pending(gang).plan(now=NOW)

        assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["on-preempt", "periodic"]
        (start,) = plan.starts()
        assert start.job_id == "gang" and start.borrowing
        scenario.pending_jobs.clear()


def test_a_partial_reclaim_evicts_a_young_loan_without_checkpoints_when_it_loses_less() -> None:
    # The same loans, with the default bound for young loans (two hours): a fresh loan (5 minutes
    # lost) is cheaper than the one 20 minutes past its checkpoint, so the gang takes the loan that
    # checkpoints when told (nothing lost) and a fresh one.
    assert Policy().partial_reclaim_young_s == 2 * HOUR
    scenario = _fresh_and_checkpointing_loans(young_s=Policy().partial_reclaim_young_s)
    gang = job("gang", 16, team="alpha", submit_s=NOW - 3 * HOUR)
    plan = scenario.policy(reclaim_guaranteed_share=0.5).pending(gang).plan(now=NOW)

    assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["fresh0", "on-preempt"]
    (start,) = plan.starts()
    assert start.job_id == "gang" and start.borrowing


def test_a_partial_reclaim_leaves_a_loan_without_checkpoints_alone_once_it_is_older_than_the_bound() -> None:
    # The same gang and loans as above, but the loans never checkpoint and started 1 h 10 min ago
    # or earlier, past a bound for young loans of an hour: evicting two would lose 2 h 20 min on 8
    # GPUs, less than the three hours the gang's 8 guaranteed GPUs have waited, yet a gang that
    # borrows half of its size takes no work whose loss has no bound. It waits.
    for share in (0.0, 0.5):
        plan = _gang_beyond_the_guarantee(share, checkpoints=False).policy(partial_reclaim_young_s=HOUR).plan(now=NOW)

        assert plan.of_type(Preempt) == ()
        assert "gang" not in started(plan)
        assert reason_of(plan, "gang") == "capacity"


def test_a_partial_reclaim_takes_loans_without_checkpoints_while_they_are_younger_than_the_bound() -> None:
    # With the default bound of two hours, the loans 1 h 10 min in are young: the gang takes the
    # two cheapest (1 h 10 min lost on 8 GPUs each, less than the three hours its 8 guaranteed GPUs
    # waited).
    assert Policy().partial_reclaim_young_s == 2 * HOUR
    scenario = _gang_beyond_the_guarantee(0.5, checkpoints=False).policy(partial_reclaim_young_s=2 * HOUR)
    plan = scenario.plan(now=NOW)

    assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["young1", "young2"]
    (start,) = plan.starts()
    assert start.job_id == "gang" and start.borrowing


def test_by_default_a_gang_a_quarter_within_its_guarantee_reclaims_and_borrows_the_rest() -> None:
    # The default share is 0.25: alpha has 4 GPUs of guarantee left, a quarter of its 16-GPU gang.
    # The gang takes beta's two cheapest loans (10 minutes since their checkpoints on 8 GPUs each,
    # less than the three hours its 4 guaranteed GPUs have waited) and borrows the other 12 GPUs.
    assert Policy().reclaim_guaranteed_share == 0.25
    scenario = _gang_beyond_the_guarantee(0.5, guaranteed=4)
    plan = scenario.policy(reclaim_guaranteed_share=Policy().reclaim_guaranteed_share).plan(now=NOW)

    assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["young1", "young2"]
    (start,) = plan.starts()
    assert start.job_id == "gang" and start.borrowing


def test_a_gang_less_than_the_share_within_its_guarantee_does_not_reclaim() -> None:
    # The same with share 0.5: 4 GPUs of guarantee left are less than half of the gang, which waits.
    plan = _gang_beyond_the_guarantee(0.5, guaranteed=4).plan(now=NOW)

    assert plan.of_type(Preempt) == ()
    assert "gang" not in started(plan)


def test_a_whole_job_reclaim_still_evicts_a_loan_without_checkpoints_when_it_pays() -> None:
    # alpha is guaranteed all 16 GPUs of its gang: a reclaim within the guarantee evicts loans
    # that lose all their work when that pays (three hours waited on 16 GPUs, past the bound,
    # against 1 h 10 min lost on each of two 8-GPU loans), whatever the share.
    for share in (0.0, 1.0):
        plan = _gang_beyond_the_guarantee(share, checkpoints=False, guaranteed=16).plan(now=NOW)

        assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["young1", "young2"]
        (start,) = plan.starts()
        assert start.job_id == "gang" and not start.borrowing


def test_a_gang_larger_than_what_is_left_of_its_guarantee_does_not_reclaim_below_the_share() -> None:
    for share in (1.0, 0.75):
        plan = _gang_beyond_the_guarantee(share).plan(now=NOW)

        assert plan.of_type(Preempt) == ()
        assert "gang" not in started(plan)


def test_a_gang_beyond_what_is_left_of_its_guarantee_is_not_let_off_by_its_wait() -> None:
    # beta's loans each end in an hour, after 5 h of work on 8 GPUs: evicting two saves the gang
    # an hour on 16 GPUs and destroys 10 h on 16. alpha's gang has waited two hours, past the
    # bound, which would let a job within the guarantee evict anyway; this one borrows half.
    # (They checkpoint, every 8 hours: a partial reclaim may take them, at the price of their work.)
    loans = [
        _borrower(f"loan{n}", f"p0-r0-n{n}", ran_s=5 * HOUR, limit_s=6 * HOUR, checkpoint_interval_s=8 * HOUR)
        for n in range(4)
    ]
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8), quota("beta", 0)).with_running(*loans)
    gang = job("gang", 16, team="alpha", submit_s=NOW - 2 * HOUR)
    plan = scenario.policy(reclaim_after_s=1800.0, reclaim_guaranteed_share=0.5).pending(gang).plan(now=NOW)

    assert plan.of_type(Preempt) == ()
    assert reason_of(plan, "gang") == "capacity"

    # A job within the guarantee that has waited past the bound counts all its wait: six hours
    # on 8 GPUs outweigh one loan's 5 h.
    owner = job("owner", 8, team="alpha", submit_s=NOW - 6 * HOUR)
    scenario.pending_jobs.clear()
    assert len(scenario.pending(owner).plan(now=NOW).of_type(Preempt)) == 1


def _beta_above_its_guarantee_by_one_job(alpha_guaranteed: int) -> Scenario:
    """Team beta runs 16 GPUs against a guarantee of 12 (two 4-GPU jobs on n0, 8 on n1): either
    job on n0 is a loan, both are not. Alpha's 8-GPU job of priority 5 has waited an hour."""
    on_n0 = [running(job(name, 4, team="beta"), (("p0-r0-n0", 4),), borrowing=True) for name in ("b1", "b2")]
    whole = running(job("b3", 8, team="beta"), on="p0-r0-n1")
    scenario = Scenario(fleet("1x1x2x8")).quotas(quota("alpha", alpha_guaranteed), quota("beta", 12))
    return scenario.with_running(*on_n0, whole).pending(job("urgent", 8, team="alpha", priority=5, submit_s=NOW - HOUR))


def test_a_borrower_does_not_take_two_jobs_of_a_team_that_leave_it_below_its_guarantee_together() -> None:
    # Alpha has no guarantee, so its job borrows: taking both jobs on n0 would leave beta at 8, and
    # beta would take them back at once by reclaim, alpha's job evicting them again, forever.
    scenario = _beta_above_its_guarantee_by_one_job(alpha_guaranteed=0)
    plan = scenario.plan(now=NOW)

    assert plan.of_type(Preempt) == ()
    assert "urgent" not in started(plan)
    assert schedule_reference(scenario.build(), NOW, quirks=FAST_PATH_QUIRKS) == plan


def test_a_job_starting_within_its_own_guarantee_may_take_two_jobs_of_a_team_each_a_loan_alone() -> None:
    # Alpha is guaranteed 8 GPUs: its job starts within its guarantee, which beta cannot reclaim,
    # so taking both jobs on n0 ends nothing in a loop.
    scenario = _beta_above_its_guarantee_by_one_job(alpha_guaranteed=8)
    plan = scenario.plan(now=NOW)

    assert {action.job_id for action in plan.of_type(Preempt)} == {"b1", "b2"}
    assert started(plan) == {"urgent": (("p0-r0-n0", 8),)}
    assert schedule_reference(scenario.build(), NOW, quirks=FAST_PATH_QUIRKS) == plan

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine import Policy, Quota
from scheduling.engine.quota import BEYOND_POOL, UNGUARANTEED, QuotaLedger, charge_loans, loans_within_shares

from .builders import Scenario, fleet, job, quota, reason_of, running, started, team


def test_a_start_within_the_guarantee_is_not_borrowing() -> None:
    plan = Scenario(fleet("1x1x2x8")).quotas(quota("alpha", 8, 8)).pending(job("j", 8)).plan()

    assert plan.starts()[0].borrowing is False


def test_a_start_beyond_the_guarantee_is_marked_borrowing() -> None:
    scenario = Scenario(fleet("1x1x2x8")).quotas(quota("alpha", 8, 8))
    scenario.with_running(running(job("mine", 8), on="p0-r0-n0"))
    plan = scenario.pending(job("more", 8)).plan()

    assert plan.starts()[0].borrowing is True


@pytest.mark.parametrize(
    ("guaranteed", "borrow_limit", "asked", "starts"),
    [(8, 0, 8, True), (8, 0, 16, False), (8, 8, 16, True), (0, 8, 16, False), (0, 16, 16, True)],
)
def test_a_team_never_goes_beyond_guarantee_plus_borrow_limit(
    guaranteed: int, borrow_limit: int, asked: int, starts: bool
) -> None:
    plan = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", guaranteed, borrow_limit)).pending(job("j", asked)).plan()

    assert bool(plan.starts()) is starts
    if not starts:
        assert reason_of(plan, "j") == "quota"


def test_a_team_without_a_quota_row_borrows_idle_capacity_without_limit() -> None:
    plan = Scenario(fleet("1x1x4x8")).quotas(quota("beta", 8, 0)).pending(job("j", 24)).plan()

    (start,) = plan.starts()
    assert start.borrowing is True


@pytest.mark.parametrize(("lend_limit", "starts"), [(0, False), (8, True), (None, True)])
def test_lend_limit_caps_how_much_of_an_unused_guarantee_others_may_borrow(
    lend_limit: int | None, starts: bool
) -> None:
    scenario = Scenario(fleet("1x1x4x8")).teams(team("alpha"), team("beta"))
    scenario.quotas(quota("alpha", 16, 100), quota("beta", 16, 0, lend_limit=lend_limit))
    plan = scenario.pending(job("j", 24)).plan()

    assert bool(plan.starts()) is starts
    if not starts:
        assert reason_of(plan, "j") == "quota"


def test_quota_is_charged_as_the_cycle_starts_jobs() -> None:
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8))
    plan = scenario.pending(job("a", 8), job("b", 8, submit_s=1), job("c", 8, submit_s=2)).plan()

    assert set(started(plan)) == {"a", "b"}
    assert reason_of(plan, "c") == "quota"


def test_a_borrower_blocked_only_because_the_fleet_is_busy_waits_for_capacity() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("other", 8, team="beta"), on="p0-r0-n0"))
    plan = scenario.pending(job("j", 8)).plan()

    assert reason_of(plan, "j") == "capacity"


def test_within_a_priority_a_team_inside_its_guarantee_goes_before_a_borrower() -> None:
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 8), quota("beta", 0, 8))
    plan = scenario.pending(job("borrower", 8, team="beta", submit_s=0), job("owner", 8, submit_s=5)).plan()

    assert set(started(plan)) == {"owner"}


@pytest.mark.parametrize("policy", [Policy(), Policy.fifo()], ids=["fleetline", "fifo"])
@pytest.mark.parametrize("quotas", [(), (quota("gamma", 8),)], ids=["no-guarantees", "another-team-guaranteed"])
def test_jobs_beyond_their_guarantee_keep_queue_order_whether_they_fit_the_pool_or_not(
    policy: Policy, quotas: tuple[Quota, ...]
) -> None:
    scenario = Scenario(fleet("1x1x2x8")).policy(policy).quotas(*quotas)
    scenario.with_running(running(job("busy", 8, team="beta"), on="p0-r0-n0"))
    # "small" would borrow and fits; "big", behind it, is refused until "busy" ends.
    plan = scenario.pending(job("small", 4, duration_s=7200.0), job("big", 16, submit_s=5, duration_s=14400.0)).plan()

    assert set(started(plan)) == {"small"}
    assert reason_of(plan, "big") == "capacity"


@pytest.mark.parametrize(("least_borrowed_first", "starts"), [(False, "heavy-next"), (True, "light-next")])
def test_with_least_borrowed_first_the_borrower_of_the_team_that_borrows_less_goes_first(
    least_borrowed_first: bool, starts: str
) -> None:
    # 16 GPUs, 4 guaranteed to each team: beta borrows 4 of the 8 lendable (gamma's unused 4 and
    # the 4 nobody is guaranteed), alpha uses just its own; 4 GPUs are left to lend, for one of the
    # two borrowers. gamma's unused guarantee makes the class split into owners and borrowers.
    scenario = Scenario(fleet("1x1x2x8")).policy(least_borrowed_first=least_borrowed_first)
    scenario.quotas(quota("alpha", 4, 16), quota("beta", 4, 16), quota("gamma", 4, 16))
    scenario.with_running(
        running(job("heavy", 8, team="beta"), on="p0-r0-n0", borrowing=True),
        running(job("light", 4), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("heavy-next", 4, team="beta", submit_s=0), job("light-next", 4, submit_s=5)).plan()

    assert set(started(plan)) == {starts}
    assert plan.starts()[0].borrowing is True


def test_reclaiming_never_takes_a_team_below_its_own_guarantee() -> None:
    from scheduling.engine import Preempt

    stale = running(job("stale", 8, team="beta"), on="p0-r0-n0", borrowing=True)
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 8), quota("beta", 8)).with_running(stale)
    plan = scenario.pending(job("mine", 8)).plan()

    assert plan.of_type(Preempt) == ()


def test_running_pinned_work_beyond_its_guarantee_uses_up_the_capacity_nobody_is_guaranteed() -> None:
    # 24 GPUs, 16 of them guaranteed: work nobody may preempt may borrow the other 8, once.
    serving = {"kind": "serving", "priority": 100, "preemptible": False}
    scenario = Scenario(fleet("1x1x3x8")).quotas(quota("alpha", 8, 16), quota("beta", 8, 0))
    scenario.with_running(
        running(job("own", 8, **serving), on="p0-r0-n0"),
        running(job("lent", 8, **serving), on="p0-r0-n1", borrowing=True),
    )
    plan = scenario.pending(job("more", 8, **serving), job("batch", 8, submit_s=1.0)).plan()

    assert set(started(plan)) == {"batch"}
    assert reason_of(plan, "more") == "guarantee"


def test_room_is_the_largest_admissible_size() -> None:
    ledger = QuotaLedger((Quota("alpha", "a100", 8, 4),), (), (), {"a100": 32})
    ledger.charge("alpha", "a100", 3)

    assert ledger.room("alpha", "a100", 100) == 9
    assert all(ledger.admit("alpha", "a100", size) is not None for size in range(1, 10))
    assert ledger.admit("alpha", "a100", 10) is None


def test_an_owner_whose_unused_guarantee_is_lent_out_is_admitted_only_once_the_loans_fit_what_remains() -> None:
    quotas = (Quota("alpha", "a100", 8, 0), Quota("beta", "a100", 16, 0, 0))
    ledger = QuotaLedger(quotas, (), (), {"a100": 32})
    ledger.charge("gamma", "a100", 16)  # all 8 unguaranteed GPUs and alpha's 8 unused ones

    assert ledger.admit("alpha", "a100", 8) is None
    assert ledger.refusal("alpha", "a100", 8, free_gpus=16) == "capacity"  # reclaiming the loans helps
    ledger.release("gamma", "a100", 8)
    assert ledger.admit("alpha", "a100", 8) is not None


@pytest.mark.parametrize(("least_borrowed_first", "starts"), [(False, "sliver"), (True, "owed")])
def test_among_teams_that_borrow_nothing_the_job_mostly_within_its_guarantee_goes_first(
    least_borrowed_first: bool, starts: str
) -> None:
    # 16 GPUs: gamma runs on its own 8; alpha (6 guaranteed) and beta (2) use nothing and each wait
    # with an 8-GPU job that would borrow the rest. One node is free, for one of them: alpha's job
    # is three quarters within its guarantee, beta's one quarter, though beta's is first in the queue.
    scenario = Scenario(fleet("1x1x2x8")).policy(least_borrowed_first=least_borrowed_first, preemption=False)
    scenario.quotas(quota("alpha", 6, 16), quota("beta", 2, 16), quota("gamma", 8, 16))
    scenario.with_running(running(job("own", 8, team="gamma"), on="p0-r0-n0"))
    plan = scenario.pending(job("sliver", 8, team="beta", submit_s=0), job("owed", 8, submit_s=5)).plan()

    assert set(started(plan)) == {starts}
    assert plan.starts()[0].borrowing is True


def test_an_owner_of_a_lower_class_goes_before_a_borrower_of_a_higher_one() -> None:
    # 8 GPUs: gamma runs on its own 4; alpha (4 guaranteed, none used) and beta (nothing guaranteed)
    # each wait with a 4-GPU job, beta's in a higher class. The 4 free GPUs are alpha's guarantee:
    # alpha's job takes them, and beta's would have borrowed them only to be reclaimed.
    scenario = Scenario(fleet("1x1x1x8")).policy(preemption=False)
    scenario.quotas(quota("alpha", 4, 8), quota("beta", 0, 8), quota("gamma", 4, 8))
    scenario.with_running(running(job("own", 4, team="gamma"), on="p0-r0-n0"))
    plan = scenario.pending(job("loan", 4, team="beta", priority=10), job("owed", 4, submit_s=5)).plan()

    assert set(started(plan)) == {"owed"}
    assert plan.starts()[0].borrowing is False
    assert reason_of(plan, "loan") == "capacity"


def _estimate_of(plan, job_id: str) -> float | None:  # type: ignore[no-untyped-def]
    return next(status.estimated_start_s for status in plan.pending if status.job_id == job_id)


def test_a_job_waiting_for_its_teams_limit_is_not_overtaken_by_its_teams_later_jobs() -> None:
    # alpha may use 16 GPUs and uses 12: "big" (8) waits for its limit and keeps its 8 GPUs within
    # it, so "small" (2), which the limit alone would admit, waits behind it; beta (no quota row)
    # borrows the idle GPUs meanwhile.
    lent = running(job("lent", 12, time_limit_s=3600.0), (("p0-r0-n0", 8), ("p0-r0-n1", 4)), borrowing=True)
    scenario = Scenario(fleet("1x1x4x8")).policy(quota_hold_after_s=0.0).quotas(quota("alpha", 8, 8)).with_running(lent)
    small = job("small", 2, submit_s=2.0)
    plan = scenario.pending(job("big", 8, submit_s=1.0), small, job("other", 8, team="beta", submit_s=3.0)).plan(10.0)

    assert set(started(plan)) == {"other"}
    assert reason_of(plan, "big") == reason_of(plan, "small") == "quota"
    # Alone, or with quota holds off (the default), the small job starts: the limit admits it.
    alone = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8)).with_running(lent).pending(small).plan(10.0)
    assert set(started(alone)) == {"small"}
    behind = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8)).with_running(lent)
    assert set(started(behind.pending(job("big", 8, submit_s=1.0), small).plan(10.0))) == {"small"}


def test_a_job_waiting_for_capacity_keeps_its_size_within_its_teams_limit() -> None:
    # alpha may use 12 GPUs and uses 2; "whole" (8) fits the limit but no node has 8 GPUs free.
    # "four" (4) would fit node n1 and the limit, but would leave "whole" beyond the limit once a
    # node frees: it waits.
    runs = (
        running(job("beta-run", 8, team="beta", time_limit_s=3600.0), on="p0-r0-n0"),
        running(job("mine", 2, time_limit_s=7200.0), (("p0-r0-n1", 2),)),
    )
    scenario = (
        Scenario(fleet("1x1x2x8")).policy(quota_hold_after_s=0.0).quotas(quota("alpha", 0, 12)).with_running(*runs)
    )
    plan = scenario.pending(job("whole", 8, submit_s=1.0), job("four", 4, submit_s=2.0)).plan(10.0)

    assert started(plan) == {}
    assert reason_of(plan, "four") == "quota"


def test_the_estimate_of_a_job_held_back_by_its_teams_limit_comes_after_the_job_it_waits_behind() -> None:
    # alpha may use 16 and uses 12 (8 free at 3,600 s, 4 more at 7,200 s): "big" (8) needs 4 of
    # them, at 3,600 s; "six" (6) comes after big's 8, so it needs 10, at 7,200 s. Both are larger
    # than alpha's guarantee of 4: no start within it to wait for (`explain`).
    runs = (
        running(job("first", 8, time_limit_s=3600.0), on="p0-r0-n0", borrowing=True),
        running(job("second", 4, time_limit_s=7200.0), (("p0-r0-n1", 4),)),
    )
    scenario = (
        Scenario(fleet("1x1x4x8")).policy(quota_hold_after_s=0.0).quotas(quota("alpha", 4, 12)).with_running(*runs)
    )
    plan = scenario.pending(job("big", 8, submit_s=1.0), job("six", 6, submit_s=2.0)).plan(10.0)

    assert _estimate_of(plan, "big") == 3600.0
    assert _estimate_of(plan, "six") == 7200.0


def test_a_job_larger_than_its_teams_limit_keeps_nothing() -> None:
    # 24 GPUs can never fit alpha's 16: the small job starts.
    scenario = Scenario(fleet("1x1x4x8")).policy(quota_hold_after_s=0.0).quotas(quota("alpha", 8, 8))
    plan = scenario.pending(job("huge", 24, submit_s=1.0), job("small", 2, submit_s=2.0)).plan(10.0)

    assert set(started(plan)) == {"small"}


def test_a_job_that_keeps_quota_never_keeps_its_team_from_its_guarantee() -> None:
    # alpha is guaranteed 10 and may use 12; "ten" waits for two free nodes and keeps 10 of the 12,
    # but "four" lies within alpha's guarantee, and starts on the free half of n1.
    runs = (running(job("beta-run", 12, team="beta"), (("p0-r0-n0", 8), ("p0-r0-n1", 4))),)
    scenario = Scenario(fleet("1x1x2x8")).policy(quota_hold_after_s=0.0, preemption=False).quotas(quota("alpha", 10, 2))
    plan = scenario.with_running(*runs).pending(job("ten", 10, submit_s=1.0), job("four", 4, submit_s=2.0)).plan(10.0)

    assert set(started(plan)) == {"four"}


def test_the_ledger_records_who_lent_what_to_whom() -> None:
    quotas = (Quota("alpha", "a100", 8, 0), Quota("beta", "a100", 8, 0, 2))
    ledger = QuotaLedger(quotas, (), (), {"a100": 24})
    ledger.charge("gamma", "a100", 9)
    ledger.charge("delta", "a100", 3)

    # alpha lends its 8 unused GPUs, beta 2 (its lend limit), the rest is what nobody is guaranteed;
    # each lender spread over the largest loans first.
    assert ledger.loans("a100") == {
        ("alpha", "gamma"): 7,
        ("alpha", "delta"): 1,
        ("beta", "delta"): 1,
        ("beta", "gamma"): 1,
        (UNGUARANTEED, "delta"): 1,
        (UNGUARANTEED, "gamma"): 1,
    }


@given(
    st.lists(st.tuples(st.integers(0, 16), st.integers(0, 24), st.none() | st.integers(0, 8)), min_size=1, max_size=4),
    st.integers(0, 64),
)
def test_every_loan_is_charged_to_a_lender_within_what_it_lends(
    teams: list[tuple[int, int, int | None]], capacity: int
) -> None:
    names = [f"t{number}" for number in range(len(teams))]
    quotas = tuple(
        Quota(name, "a100", guaranteed, 64, lend) for name, (guaranteed, _, lend) in zip(names, teams, strict=True)
    )
    ledger = QuotaLedger(quotas, (), (), {"a100": capacity})
    for name, (_, used, _) in zip(names, teams, strict=True):
        ledger.charge(name, "a100", used)
    loans = ledger.loans("a100")

    lends = {
        name: min(ledger.guarantee_left(name, "a100"), 64 if lend is None else lend)
        for name, (_, _, lend) in zip(names, teams, strict=True)
    }
    for name in names:
        assert sum(gpus for (_, borrower), gpus in loans.items() if borrower == name) == ledger.borrowed(name, "a100")
        assert sum(gpus for (lender, _), gpus in loans.items() if lender == name) <= lends[name]
    unguaranteed, _ = ledger.unguaranteed("a100")
    assert sum(gpus for (lender, _), gpus in loans.items() if lender == UNGUARANTEED) <= unguaranteed
    # Only what the pool cannot cover is charged to no one.
    outstanding = sum(ledger.borrowed(name, "a100") for name in names)
    beyond = sum(gpus for (lender, _), gpus in loans.items() if lender == BEYOND_POOL)
    assert beyond == max(0, outstanding - unguaranteed - sum(lends.values()))


def _shared_ledger(capacity: int, share: float | None) -> QuotaLedger:
    """alpha lends its 8 unused GPUs, beta uses its 8; what is beyond 16 is nobody's."""
    quotas = (Quota("alpha", "a100", 8, 0), Quota("beta", "a100", 8, 0))
    ledger = QuotaLedger(quotas, (), (), {"a100": capacity}, policy=Policy(max_share_of_lender=share))
    ledger.charge("beta", "a100", 8)
    return ledger


def test_a_team_takes_at_most_its_share_of_what_another_team_lends() -> None:
    ledger = _shared_ledger(16, 0.5)

    assert ledger.room("gamma", "a100", 16) == 4
    assert ledger.refusal("gamma", "a100", 5, free_gpus=8) == "quota"  # waiting for capacity would not help
    ledger.charge("gamma", "a100", 4)
    assert ledger.room("delta", "a100", 16) == 4  # the lender's other half is left for another borrower
    ledger.charge("delta", "a100", 4)
    assert ledger.loans("a100") == {("alpha", "gamma"): 4, ("alpha", "delta"): 4}


def test_without_a_share_a_team_may_borrow_all_a_lender_lends() -> None:
    assert _shared_ledger(16, None).room("gamma", "a100", 16) == 8


def test_the_share_does_not_bound_what_nobody_is_guaranteed() -> None:
    ledger = _shared_ledger(20, 0.25)

    assert ledger.room("gamma", "a100", 16) == 4 + 2  # the 4 unguaranteed GPUs and a quarter of alpha's 8


def test_an_owner_within_its_guarantee_is_not_bounded_by_any_share() -> None:
    ledger = _shared_ledger(16, 0.25)

    assert ledger.admit("alpha", "a100", 8) is not None


@given(
    st.lists(st.integers(0, 12), max_size=4),
    st.lists(st.integers(0, 12), max_size=3),
    st.integers(0, 8),
    st.sampled_from((0.01, 0.25, 0.5, 0.75, 1.0)),
)
def test_the_share_rule_admits_exactly_the_loans_the_ledger_can_charge_to_lenders(
    borrowed: list[int], lent: list[int], unguaranteed: int, share: float
) -> None:
    borrowers = {f"b{number}": gpus for number, gpus in enumerate(borrowed)}
    lenders = {f"l{number}": float(gpus) for number, gpus in enumerate(lent)}
    charged = charge_loans(borrowers, lenders, unguaranteed, share)

    assert loans_within_shares(borrowed, list(lenders.values()), unguaranteed, share) == (
        not any(lender == BEYOND_POOL for lender, _ in charged)
    )
    for (lender, _), gpus in charged.items():
        if lender in lenders:
            assert gpus <= share * lenders[lender]


@given(
    st.lists(st.tuples(st.integers(0, 16), st.integers(0, 16), st.integers(0, 16) | st.none()), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.booleans()), max_size=5),
    st.integers(0, 3),
    st.integers(1, 24),
    st.booleans(),
)
def test_the_shortfalls_the_explanations_read_are_the_rules_admission_applies(
    quotas: list[tuple[int, int, int | None]],
    charges: list[tuple[int, int, bool]],
    asking: int,
    gpus: int,
    pinned: bool,
) -> None:
    """`short_of_limit`, `short_of_pool` and `short_of_unguaranteed` (what blockers read) are above
    0 exactly when `admit` refuses a loan for that rule (the reference engine's plain ledger states
    them apart: `test_blockers.py` holds both engines' blockers equal)."""
    teams = [f"t{index}" for index in range(4)]
    rows = tuple(
        Quota(teams[index], "a100", guaranteed, borrow, lend) for index, (guaranteed, borrow, lend) in enumerate(quotas)
    )
    ledger = QuotaLedger(rows, (), (), {"a100": 32})
    for index, size, pin in charges:
        ledger.charge(teams[index], "a100", size, pin)
    team = teams[asking]
    limit_short = ledger.short_of_limit(team, "a100", gpus)
    pool_short = ledger.short_of_pool(team, "a100", gpus)
    pinned_short = ledger.short_of_unguaranteed(team, "a100", gpus)
    beyond = ledger.used(team, "a100") + gpus > ledger.guaranteed(team, "a100")
    if beyond:  # a loan: the borrow limit, then the pool, then (pinned) the unguaranteed GPUs decide
        admitted = ledger.admit(team, "a100", gpus, pinned) is not None
        assert admitted == (limit_short == 0 and pool_short == 0 and (not pinned or pinned_short == 0))
    else:
        assert limit_short == pool_short == pinned_short == 0

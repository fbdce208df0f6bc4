"""Quota defects found from outside (issue #45), as minimal snapshots: the fast engine and the
reference engine plan the same, and the plan keeps the quota rules' promises."""

from __future__ import annotations

from scheduling.engine import schedule_reference
from scheduling.engine.plain_scan import schedule_plain_scan
from scheduling.engine.plan import REASON_POOL
from scheduling.engine.reference import FAST_PATH_QUIRKS
from scheduling.engine.vocabulary import BLOCKER_POOL, reason_text

from .builders import Scenario, fleet, job, quota, reason_of, running, started


def _overdrawn() -> Scenario:
    """alpha is guaranteed the whole fleet (24 GPUs) and lends nothing; gamma, without a quota, still
    borrows 16 of them, two jobs of 8 (loans made before alpha's lend limit was lowered): 16 GPUs of loans beyond
    a pool of none. One node is free."""
    loans = [running(job(f"g{node}", 8, team="gamma"), on=f"p0-r0-n{node}", borrowing=True) for node in (0, 1)]
    return Scenario(fleet("1x1x3x8")).quotas(quota("alpha", 24, 0, lend_limit=0)).with_running(*loans)


def test_a_job_within_its_guarantee_starts_when_other_teams_loans_exceed_the_pool() -> None:
    scenario = _overdrawn().pending(job("a", 8))

    plan = scenario.plan()

    assert started(plan) == {"a": (("p0-r0-n2", 8),)}
    assert schedule_reference(scenario.build(), 0.0, quirks=FAST_PATH_QUIRKS) == plan


def _lent_out() -> Scenario:
    """gamma is guaranteed 1 GPU and lends it; beta, without a quota, runs 8 GPUs nobody may
    preempt, which the pool backs with gamma's GPU and the 7 nobody is guaranteed (alpha lends
    none of its 8). One node, 8 GPUs, is free."""
    loan = running(job("r0", 8, team="beta", preemptible=False), on="p0-r0-n1")
    return (
        Scenario(fleet("1x1x2x8"))
        .quotas(quota("alpha", 8, 0, lend_limit=0), quota("gamma", 1, 0))
        .with_running(loan)
        .pending(job("j0", 1, team="gamma", preemptible=False))
    )


def test_a_job_the_quota_pool_refuses_is_explained_by_the_pool_not_by_topology() -> None:
    """Issue #45: a 1-GPU job within its team's guarantee, with a whole node free, waits because
    its team's guarantee backs another team's loan: the reason names the pool (fast path, plain
    scan and reference alike), and the blocker says the free GPUs back those loans."""
    scenario = _lent_out()
    snapshot = scenario.build()

    plan = scenario.plan()

    assert started(plan) == {}
    assert reason_of(plan, "j0") == REASON_POOL
    assert "loans" in reason_text(REASON_POOL)
    blocker = plan.blockers(snapshot.pending)["j0"]
    assert (blocker.kind, blocker.team, blocker.have) == (BLOCKER_POOL, "gamma", 8)
    assert schedule_plain_scan(snapshot, 0.0) == plan
    assert schedule_reference(snapshot, 0.0, quirks=FAST_PATH_QUIRKS) == plan

"""Quota defects found from outside (issue #45), as minimal snapshots: the fast engine and the
reference engine plan the same, and the plan keeps the quota rules' promises."""

from __future__ import annotations

from scheduling.engine import schedule_reference
from scheduling.engine.reference import FAST_PATH_QUIRKS

from .builders import Scenario, fleet, job, quota, running, started


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
